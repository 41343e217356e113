"""Resuming a 10,000-message session, and listing 1,000 sessions.

The session is written with the real `Session.append` (fsynced per message) and compacted the
way the loop does it whenever the history passes the default threshold, so the file on disk
looks like one a long run leaves behind: tool calls with their results, file contents, command
output, the odd nudge, and compaction records.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

from bench.common import (
    ROOT,
    WORDS,
    ScriptedLLM,
    at_most,
    figure,
    make_config,
    median,
    result,
    scripted,
    temp_workspace,
    time_call,
)
from lmagent.llm.tokens import estimate_tokens
from lmagent.loop.compaction import Compactor
from lmagent.loop.conversation import SUMMARY_TOKENS
from lmagent.loop.run import open_session, run_agent
from lmagent.sessions.store import SessionStore

MESSAGES = 10_000
SESSIONS = 1_000
RUNS = 5
TARGET_S = 0.5


# --------------------------------------------------------------------------- realistic messages


def code(rng: random.Random, chars: int) -> str:
    """Source-like text of about `chars` characters."""
    lines, size = [], 0
    while size < chars:
        a, b, c = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
        line = rng.choice(
            (
                f"def {a}_{b}(self, {c}):",
                f"    {a} = self.{b}.get({c!r}, None)",
                f"    if not {a}:\n        raise ValueError('{b} {c} missing')",
                f"    return {{'{a}': {b}, '{c}': len({a})}}",
                f"# {a} the {b} before the {c} is sent",
                f"class {a.title()}{b.title()}:",
            )
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def size(rng: random.Random, typical: int) -> int:
    return int(min(typical * rng.lognormvariate(0, 0.8), typical * 8))


def tool_step(rng: random.Random, n: int) -> tuple[dict, dict]:
    """An assistant tool call and its result, with sizes typical of each tool."""
    path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"
    kind = rng.choices(("read", "write", "edit", "grep", "shell"), (35, 15, 15, 10, 25))[0]
    if kind == "read":
        text = code(rng, size(rng, 2500))
        args = {"path": path}
        out = {"path": path, "content": text, "total_lines": text.count("\n") + 1}
    elif kind == "write":
        args = {"path": path, "content": code(rng, size(rng, 1500))}
        out = {"path": path, "bytes": len(args["content"]), "created": True}
    elif kind == "edit":
        args = {"path": path, "search": code(rng, 200), "replace": code(rng, 300)}
        out = {"path": path, "match": "exact"}
    elif kind == "grep":
        args = {"pattern": rng.choice(WORDS) + r"_\w+"}
        hits = [
            {"file": path, "line": rng.randint(1, 400), "text": code(rng, 60)}
            for _ in range(rng.randint(1, 30))
        ]
        out = {"pattern": args["pattern"], "matches": hits, "count": len(hits)}
    else:
        args = {"command": f"python -m pytest -q tests/test_{rng.choice(WORDS)}.py"}
        out = {"exit_code": rng.choice((0, 0, 1)), "output": code(rng, size(rng, 800))}
    call_id = f"call_{n}"
    thought = code(rng, rng.randint(40, 300)) if rng.random() < 0.3 else ""
    function = {"name": kind, "arguments": json.dumps(args)}
    assistant = {
        "role": "assistant",
        "content": thought,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }
    result_text = json.dumps({"success": True, **out}, ensure_ascii=False)
    return assistant, {"role": "tool", "tool_call_id": call_id, "content": result_text}


def conversation(rng: random.Random):
    yield {"role": "user", "content": "Refactor the request handling in src/ " + code(rng, 300)}
    n = 0
    while True:
        n += 1
        if rng.random() < 0.03:
            yield {"role": "assistant", "content": "I'll now update the handlers."}
            yield {"role": "user", "content": "You described a next step but did not call a tool."}
            continue
        yield from tool_step(rng, n)


def build_session(store: SessionStore, count: int, threshold: int) -> tuple[str, int]:
    """Write a `count`-message session, compacting like the loop; (id, compactions)."""
    rng = random.Random(20240501)
    session = store.create("Refactor the request handling in src/", source="cli")
    compactor, tokens, compactions = Compactor(threshold), 0, 0
    messages = conversation(rng)
    for _ in range(count):
        message = next(messages)
        session.append(message)
        tokens += estimate_tokens([message])
        if tokens > threshold and message["role"] != "assistant":
            plan = compactor.compact(session.history, threshold // 2 - SUMMARY_TOKENS)
            if plan:
                session.record_compaction(0, plan[0], plan[1])
                compactions += 1
            tokens = estimate_tokens(session.history)
    session.save_meta(status="interrupted", iterations=count // 2)
    session.close()
    return session.id, compactions


# --------------------------------------------------------------------------- measurements


def time_resume(workspace, session_id: str) -> dict:
    config = make_config(workspace)
    store = SessionStore(workspace)
    opened = [time_call(lambda: store.open(session_id))[0] for _ in range(RUNS)]

    def prepare():
        session, _ = open_session(config, None, session_id)
        session.close()
        return session

    prepared = [time_call(prepare)[0] for _ in range(RUNS)]
    return {"open": median(opened), "prepare": median(prepared), "history": prepare().history}


def time_first_request(workspace, session_id: str) -> float:
    """Seconds from run_agent(session_id=...) until the server receives the first request."""
    arrived: list[float] = []

    def reply(body: dict) -> dict:
        arrived.append(time.perf_counter())
        return scripted.text("Nothing left to do.\nTASK_COMPLETE")

    with ScriptedLLM([reply]) as llm:
        config = make_config(workspace, llm)
        start = time.perf_counter()
        outcome = run_agent(config, session_id=session_id)
        if outcome.status != "completed" or not arrived:
            raise RuntimeError(f"the resumed run ended {outcome.status}: {outcome.message}")
    return arrived[0] - start


def time_listing(workspace) -> tuple[float, float]:
    """(SessionStore.list() median, `agent_main.py --list-sessions` wall median) in seconds."""
    store = SessionStore(workspace)
    rng = random.Random(7)
    for index in range(SESSIONS):
        session = store.create(f"task number {index}: " + code(rng, 80))
        for message in [{"role": "user", "content": code(rng, 200)}, *tool_step(rng, 1)]:
            session.append(message)
        session.save_meta(status="completed")
        session.close()
    listed = [time_call(store.list)[0] for _ in range(RUNS)]
    if len(store.list()) != SESSIONS:
        raise RuntimeError(f"list() found {len(store.list())} sessions, not {SESSIONS}")
    command = [sys.executable, "agent_main.py", "--list-sessions", "--workspace", str(workspace)]
    cli = [
        time_call(lambda: subprocess.run(command, cwd=ROOT, capture_output=True, check=True))[0]
        for _ in range(RUNS)
    ]
    return median(listed), median(cli)


def run() -> dict:
    with temp_workspace() as workspace:
        threshold = make_config(workspace).summarization_threshold
        store = SessionStore(workspace)
        build_s, (session_id, compactions) = time_call(
            lambda: build_session(store, MESSAGES, threshold)
        )
        transcript = store.directory / f"{session_id}.jsonl"
        megabytes = transcript.stat().st_size / 1e6
        resume = time_resume(workspace, session_id)
        first_request = time_first_request(workspace, session_id)
    with temp_workspace() as workspace:
        list_s, cli_s = time_listing(workspace)
    figures = [
        at_most(
            "open + repair + resume message (`open_session`)", resume["prepare"], "s", TARGET_S
        ),
        figure("`SessionStore.open` alone", resume["open"], "s"),
        figure(
            "`run_agent(session_id=…)` until the server has the first request", first_request, "s"
        ),
        figure("transcript size", megabytes, "MB"),
        figure("compaction records in it", compactions),
        figure("messages the model sees after resuming", len(resume["history"])),
        figure(f"`SessionStore.list()` of {SESSIONS:,} sessions", list_s, "s"),
        figure(f"`agent_main.py --list-sessions` with {SESSIONS:,} sessions", cli_s, "s"),
        figure("building the session (fsynced appends)", build_s, "s"),
    ]
    notes = f"""
The {MESSAGES:,}-message session is written with `Session.append` (fsync per message) from a
seeded generator: tool calls (read, write, edit, grep, shell) with results of typical sizes
(files of ~2.5 kB and up, command output, grep hits), some assistant text and nudges, compacted
like the loop does whenever the estimate passes the default threshold ({threshold:,} tokens).
Times are medians of {RUNS} runs with the files in the page cache. The first-request time covers
everything `--resume` does before the model is asked: opening and replaying the transcript,
repairing cut-off calls, the resume message, building the loop and the first request. Each of
the {SESSIONS:,} listed sessions holds a few messages.
"""
    return result("resume", figures, " ".join(notes.split()), title="resume and session listing")
