"""Speed of `--embedded` on a CPU with the default model (Qwen2.5-Coder-1.5B Q4_K_M): the first
reply of a one-shot run, and decoding of whole-file rewrites.

1. First token of a new run, counted from the model being loaded (the server answering): the
   agent's real first request as `--embedded` makes it (its system prompt, text tool calls, the
   compact tool set, greedy) through `LLMClient.chat`, on a new server process each time, with
   an empty prompt cache (as every run was before: the whole prompt read) and with the cache the
   previous process left (the saved prompt restored, only the task read). Alternated, ROUNDS
   times each. Target: ≤ 3 s warm.
2. Decoding speed (llama.cpp's own `predicted_per_second`) with and without speculative
   decoding, two servers loaded side by side and the requests alternated between them: a
   whole-file rewrite of a 100-line file (a rename, so nearly every token is in the prompt) and
   fresh code, greedy and at temperature 0.7. Whether the greedy replies are the same with and
   without speculation. Target: ≥ 2× on the greedy rewrite, when speculation is chosen.
3. The server's memory (VmRSS) with each setting. Target: ≤ 1.3× today's.

    python -m bench --only speed --timeout 5400
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from pathlib import Path

import lmagent.llm.embedded as embedded_llm
from bench.common import ROOT, at_most, figure, make_config, median, result, temp_workspace
from lmagent.core.config import SPECULATION_TYPES
from lmagent.core.workspace import Workspace
from lmagent.llm.client import Callbacks, LLMClient
from lmagent.loop.prompts import system_prompt
from lmagent.runtime import Runtime
from lmagent.sessions.store import SessionStore

ROUNDS = 2  # of the first-token runs
DECODE_ROUNDS = 1  # on a shared two-core machine a rewrite at ~1 token/s takes minutes
FIRST_TOKEN_TARGET = 3.0
TASK = "Add a function area(width, height) to shapes.py that returns width * height."
SOURCE = ROOT / "lmagent" / "llm" / "probe.py"  # its first 100 lines are the file rewritten
REWRITE = (
    "Here is info.py:\n```python\n{source}```\nRename the class `ServerInfo` to `ServerFacts` "
    "everywhere and write info.py again, whole, in one code block."
)
FRESH = (
    "Write a Python module with a class LRUCache (get, put, a capacity) and a function that "
    "parses lines of 'name,age' into dicts. Code only."
)
REWRITE_TOKENS = 300  # the speed over the rewrite's first 300 tokens (the file is ~1,000)
FRESH_TOKENS = 150
CANDIDATE = "ngram-simple"  # measured when --embedded runs without speculation
TITLE = "--embedded on a CPU: first token of a new run, decoding speed (Qwen2.5-Coder-1.5B)"


def server(model: Path, slots: Path | None = None, speculation: str = "none"):
    return embedded_llm.EmbeddedServer(model, slots=slots, speculation=speculation)


def rss_mb(running: embedded_llm.EmbeddedServer) -> float:
    for line in Path(f"/proc/{running.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --------------------------------------------------------------------------- first token


def first_request(workspace: Path, running) -> tuple[LLMClient, list[dict]]:
    """The client and messages of a one-shot run's first request, as --embedded sets it up."""
    config = make_config(workspace, running.url, llm_timeout=600.0)
    config = config.with_changes(**embedded_llm.embedded_settings(config, running.url))
    config = config.with_changes(llm_max_tokens=8)
    runtime = Runtime(config)
    try:
        toolset = runtime.toolset()
    finally:
        runtime.close()
    session = SessionStore(workspace).create(TASK)
    client = LLMClient(config)
    prompt = system_prompt(Workspace(workspace), session, toolset, client.tool_form)
    return client, [{"role": "system", "content": prompt}, {"role": "user", "content": TASK}]


def one_run(workspace: Path, model: Path, slots: Path) -> dict:
    """A new server process on `slots`: its load time, and the first request's first token."""
    started = time.perf_counter()
    with server(model, slots) as running:
        loaded = time.perf_counter() - started
        client, messages = first_request(workspace, running)
        shown: list[str] = []
        reply = client.chat(messages, callbacks=Callbacks(on_status=shown.append))
        client.close()
    return {
        "load": loaded,
        "first": reply.first_token_s,
        "prompt_n": reply.timings.get("prompt_n", 0),
        "reused": any(s.startswith("reused the saved prompt") for s in shown),
    }


def first_tokens(workspace: Path, model: Path, folder: Path) -> dict[str, list[dict]]:
    """Cold (an empty cache folder) and warm (the folder a previous run left), alternated."""
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    for n in range(ROUNDS):
        slots = folder / f"round{n}"
        runs["cold"].append(one_run(workspace, model, slots))
        runs["warm"].append(one_run(workspace, model, slots))
    return runs


# --------------------------------------------------------------------------- decoding


def decode(client: LLMClient, text: str, temperature: float) -> dict:
    reply = client.chat([{"role": "user", "content": text}], temperature=temperature)
    return {
        "tps": reply.timings.get("predicted_per_second", 0.0),
        "tokens": reply.timings.get("predicted_n", 0),
        "accepted": reply.timings.get("draft_n_accepted", 0),
        "sha": hashlib.sha256(reply.content.encode()).hexdigest(),
    }


def decoding(workspace: Path, model: Path, speculation: str) -> tuple[dict, dict]:
    """{(setting, task, temperature): [samples]}, {setting: RSS in MB}: both servers loaded,
    every request alternated between them."""
    source = "".join(SOURCE.read_text().splitlines(keepends=True)[:100])
    tasks = {
        "rewrite": (REWRITE.format(source=source), REWRITE_TOKENS),
        "fresh": (FRESH, FRESH_TOKENS),
    }
    samples: dict[tuple, list[dict]] = {}
    with contextlib.ExitStack() as stack:
        servers = {
            s: stack.enter_context(server(model, speculation=s)) for s in ("none", speculation)
        }
        for n in range(DECODE_ROUNDS):
            for task, (text, tokens) in tasks.items():
                for temperature in (0.0, 0.7):
                    order = list(servers.items())
                    for setting, running in order if n % 2 == 0 else order[::-1]:
                        config = make_config(workspace, running.url, llm_timeout=900.0)
                        client = LLMClient(config.with_changes(llm_max_tokens=tokens))
                        sample = decode(client, text, temperature)
                        client.close()
                        samples.setdefault((setting, task, temperature), []).append(sample)
        memory = {setting: rss_mb(running) for setting, running in servers.items()}
    return samples, memory


# --------------------------------------------------------------------------- the figures


def run() -> dict:
    model = embedded_llm.resolve_model()
    speculation = SPECULATION_TYPES[0]
    tried = speculation if speculation != "none" else CANDIDATE
    with temp_workspace() as workspace, temp_workspace("lmagent-bench-kv-") as folder:
        (workspace / "shapes.py").write_text("def perimeter(w, h):\n    return 2 * (w + h)\n")
        runs = first_tokens(workspace, model, folder)
        samples, memory = decoding(workspace, model, tried)
    figures = first_token_figures(runs) + decoding_figures(samples, tried)
    figures.append(figure("server RSS today (no speculation)", round(memory["none"]), "MB"))
    ratio = memory[tried] / memory["none"]
    figures.append(at_most(f"server RSS with {tried}, × today's", round(ratio, 2), "×", 1.3))
    notes = (
        f"{ROUNDS} rounds of first tokens, {DECODE_ROUNDS} of decoding, alternated. First "
        "token: from the server answering (model loaded) to the first streamed token of the "
        "agent's first request (system prompt of the compact tool set in text form, greedy), "
        f"each on a new server process. Decoding: {SOURCE.name}'s first 100 lines rewritten "
        f"whole (a rename; the first {REWRITE_TOKENS} tokens timed), and fresh code "
        f"({FRESH_TOKENS} tokens), with speculation '{tried}' (llama.cpp's draftless n-gram "
        "speculation with its default sizes; a draft model, measured below, halved decoding) and "
        f"without; chosen for --embedded: '{speculation}'. The machine is shared; compare the "
        "ratios, measured side by side."
    )
    context = (ROOT / "bench" / "speed_notes.md").read_text(encoding="utf-8").strip()
    return result("speed", figures, f"{notes}\n\n{context}", TITLE)


def first_token_figures(runs: dict[str, list[dict]]) -> list[dict]:
    cold, warm = runs["cold"], runs["warm"]
    load = round(median_of(cold + warm, "load"), 1)
    reused = sum(r["reused"] for r in warm)
    return [
        figure("model load (server start to ready), p50", load, "s"),
        figure("first token, empty cache (today), p50", round(median_of(cold, "first"), 1), "s"),
        at_most(
            "first token, saved prompt reused, p50",
            round(median_of(warm, "first"), 1),
            "s",
            FIRST_TOKEN_TARGET,
        ),
        figure("prompt tokens read, empty cache", median_of(cold, "prompt_n"), "tokens"),
        figure("prompt tokens read, saved prompt reused", median_of(warm, "prompt_n"), "tokens"),
        figure("runs that said the saved prompt was reused", reused, f"of {len(warm)}"),
    ]


def decoding_figures(samples: dict[tuple, list[dict]], tried: str) -> list[dict]:
    figures = []
    for task in ("rewrite", "fresh"):
        for temperature in (0.0, 0.7):
            label = f"{task}, temperature {temperature:g}"
            plain = median_of(samples[("none", task, temperature)], "tps")
            speculated = samples[(tried, task, temperature)]
            fast = median_of(speculated, "tps")
            speedup = round(fast / plain, 2) if plain else 0.0
            accepted = sum(s["accepted"] for s in speculated) / max(
                sum(s["tokens"] for s in speculated), 1
            )
            target = task == "rewrite" and temperature == 0.0
            figures += [
                figure(f"decode {label}, today", round(plain, 1), "tokens/s"),
                figure(f"decode {label}, {tried}", round(fast, 1), "tokens/s"),
                figure(
                    f"speed-up {label}", speedup, "×", *(("≥ 2 ×", speedup >= 2) if target else ())
                ),
                figure(f"tokens from accepted drafts, {label}", round(100 * accepted), "%"),
            ]
    pairs = [
        (a["sha"], b["sha"])
        for task in ("rewrite", "fresh")
        for a, b in zip(samples[("none", task, 0.0)], samples[(tried, task, 0.0)], strict=True)
    ]
    same = round(100 * sum(a == b for a, b in pairs) / len(pairs))
    figures.append(
        figure(
            "greedy replies the same with and without speculation",
            same,
            "%",
            "= 100 %",
            same == 100,
        )
    )
    return figures


def median_of(samples: list[dict], key: str) -> float:
    return median([float(s[key]) for s in samples])
