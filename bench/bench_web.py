"""Benchmark: the web UI's streaming path, scripted LLM → `python agent_web.py` → Chromium.

The web server runs as its own process (`python agent_web.py`, waitress), exactly as a user
starts it; the scripted LLM runs in this process with its chunk writes timestamped, and headless
Chromium (Playwright) shows the real page, where a MutationObserver notes when each token's
text first appears in the DOM. Every token carries its number («000123»), one per chunk.

- latency: LLM chunk written → the page holding its text (p50/p95), at 100 tokens/s;
- throughput: tokens/s the page keeps up with when the LLM streams as fast as it can, and
  whether every token arrived (loss);
- memory: the server's RSS after 1,000 streamed tokens and after 100,000 (read by a plain
  SSE client), against the replay buffer's byte cap.

    python -m bench.bench_web        # prints the figures as JSON
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import tests.scripted_llm as scripted
from bench.common import at_most, figure, percentile, result, temp_workspace
from tests.scripted_llm import ScriptedLLM, text
from tests.test_web_support import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parent.parent

PIN = "73519624"
TOKEN_CHARS = 9  # "«000123» "
MARK = re.compile(rb"\xc2\xab(\d{6})\xc2\xbb")
LATENCY_TOKENS = 500
LATENCY_DELAY = 0.01
BURST_TOKENS = 20_000
SMALL_TOKENS = 1_000
LARGE_TOKENS = 100_000
LARGE_RUNS = 9  # the 99,000 tokens after the first 1,000, in runs of 11,000
TARGET_P95_MS = 10.0
BUFFER_BYTES = 8 << 20  # agent_web's EVENT_BUFFER_BYTES

# Runs in the page before its own script: note when each numbered token first shows up.
OBSERVER = r"""
window.__seen = new Map();
const scanned = new WeakMap();
const mark = /«(\d{6})»/g;
function scan(node, t) {
  const data = node.data;
  let from = scanned.get(node) || 0;
  if (data.length < from) from = 0;
  mark.lastIndex = Math.max(0, from - 8);
  let m;
  while ((m = mark.exec(data))) {
    const n = Number(m[1]);
    if (!window.__seen.has(n)) window.__seen.set(n, t);
  }
  scanned.set(node, data.length);
}
new MutationObserver((records) => {
  const t = performance.timeOrigin + performance.now();
  for (const r of records) if (r.type === 'characterData') scan(r.target, t);
}).observe(document, {subtree: true, characterData: true});
"""


def tokens(first: int, count: int) -> str:
    return "".join(f"«{n:06d}» " for n in range(first, first + count))


class Emitted:
    """Timestamps of the scripted LLM's chunk writes, by token number."""

    def __init__(self) -> None:
        self.times: dict[int, float] = {}

    @contextlib.contextmanager
    def watching(self):
        original = scripted._Handler.write_chunk
        nagle = scripted._Handler.disable_nagle_algorithm
        times = self.times

        def write_chunk(handler, data: bytes) -> None:
            original(handler, data)
            found = MARK.search(data)
            if found:
                times[int(found.group(1))] = time.time()

        scripted._Handler.write_chunk = write_chunk
        scripted._Handler.disable_nagle_algorithm = True  # as real servers do
        try:
            yield self
        finally:
            scripted._Handler.write_chunk = original
            scripted._Handler.disable_nagle_algorithm = nagle


# --------------------------------------------------------------------------- the server process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def web_server(workspace: Path, llm_url: str):
    """`python agent_web.py` on 127.0.0.1; yields (base URL, process)."""
    port = free_port()
    env = {
        **os.environ,
        "WORKSPACE": str(workspace),
        "LLM_URL": llm_url,
        "AGENT_TOKEN": PIN,
        "PERMISSION_MODE": "auto",
        "ENABLE_MCP": "false",
        "LLM_RETRIES": "1",
    }
    command = [sys.executable, str(ROOT / "agent_web.py"), "--host", "127.0.0.1"]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        seen = []
        for line in process.stdout:
            seen.append(line)
            if line.startswith("Press Ctrl+C"):
                break
        else:
            raise RuntimeError("agent_web.py did not start: " + "".join(seen)[-2000:])
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mib(process: subprocess.Popen) -> float:
    import psutil

    return psutil.Process(process.pid).memory_info().rss / (1 << 20)


# --------------------------------------------------------------------------- the browser


def clock_offset(page) -> float:
    """Page clock (performance.timeOrigin + now) minus time.time(), from the tightest of 20
    round trips, in seconds."""
    best = (float("inf"), 0.0)
    for _ in range(20):
        before = time.time()
        page_ms = page.evaluate("performance.timeOrigin + performance.now()")
        after = time.time()
        best = min(best, (after - before, page_ms / 1000 - (before + after) / 2))
    return best[1]


def seen_times(page) -> dict[int, float]:
    return {int(n): t / 1000 for n, t in page.evaluate("Array.from(window.__seen)")}


def run_in_page(page, llm: ScriptedLLM, first: int, count: int, delay: float, timeout: float):
    llm.add(text(tokens(first, count), chunk_size=TOKEN_CHARS, chunk_delay=delay))
    page.click("#new-chat")
    page.fill("#input", f"stream {count} tokens")
    page.press("#input", "Enter")
    page.wait_for_selector(".ending", timeout=timeout * 1000)
    held = page.eval_on_selector_all(".msg.assistant", "ns => ns.map(n => n.textContent).join('')")
    found = {int(n) for n in re.findall(r"«(\d{6})»", held)}
    return len(found & set(range(first, first + count)))


def browser_figures(base: str, llm: ScriptedLLM, emitted: Emitted) -> tuple[list, str]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.add_init_script(OBSERVER)
            page = context.new_page()
            page.goto(base + "/")
            page.fill("#pin", PIN)
            page.click("#login-button")
            page.wait_for_selector("#input")
            offset = clock_offset(page)

            held = run_in_page(page, llm, 0, LATENCY_TOKENS, LATENCY_DELAY, 60)
            seen = seen_times(page)
            latencies = [
                (seen[n] - offset - emitted.times[n]) * 1000
                for n in range(LATENCY_TOKENS)
                if n in seen and n in emitted.times
            ]
            if len(latencies) < LATENCY_TOKENS * 0.9:
                raise RuntimeError(f"only {len(latencies)} of {LATENCY_TOKENS} tokens timed")

            first = LATENCY_TOKENS
            burst_held = run_in_page(page, llm, first, BURST_TOKENS, 0.0, 300)
            seen = seen_times(page)
            numbers = range(first, first + BURST_TOKENS)
            start = min(emitted.times[n] for n in numbers if n in emitted.times)
            end = max(seen[n] - offset for n in numbers if n in seen)
            rate = BURST_TOKENS / (end - start)
        finally:
            browser.close()
    figures = [
        figure("token latency p50, LLM chunk → page DOM", percentile(latencies, 50), "ms"),
        at_most(
            "token latency p95, LLM chunk → page DOM",
            percentile(latencies, 95),
            "ms",
            TARGET_P95_MS,
        ),
        figure("token latency max", max(latencies), "ms"),
        figure("tokens held by the page at 100 tokens/s", held, f"of {LATENCY_TOKENS}"),
        figure("sustained rate into the page, LLM unthrottled", rate, "tokens/s"),
        figure(
            "tokens lost at that rate",
            BURST_TOKENS - burst_held,
            f"of {BURST_TOKENS}",
            "= 0",
            burst_held == BURST_TOKENS,
        ),
    ]
    notes = (
        f"Latency: {len(latencies)} tokens at {1 / LATENCY_DELAY:g} tokens/s, one token per "
        f"SSE event; page clock aligned to time.time() by the tightest of 20 round trips "
        f"(offset {offset * 1000:.2f} ms). "
    )
    return figures, notes


# --------------------------------------------------------------------------- memory


def stream_run(base: str, llm: ScriptedLLM, first: int, count: int) -> int:
    """One run of `count` tokens read by a plain SSE client; returns the tokens it received."""
    llm.add(text(tokens(first, count), chunk_size=TOKEN_CHARS))
    host, port = base.removeprefix("http://").split(":")
    auth = {"Authorization": f"Bearer {PIN}"}
    reader = http.client.HTTPConnection(host, int(port), timeout=120)
    reader.request("GET", "/api/stream", headers=auth)
    response = reader.getresponse()
    poster = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"message": f"stream {count} tokens"})
    poster.request("POST", "/api/chat", body, {**auth, "Content-Type": "application/json"})
    if poster.getresponse().status != 202:
        raise RuntimeError("the web server refused the chat")
    poster.close()
    received, buffer = 0, b""
    try:
        while chunk := response.read1(1 << 16):
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if b"event: token" in frame:
                    received += len(MARK.findall(frame))
                elif b"event: done" in frame:
                    return received
    finally:
        reader.close()
    return received


def memory_figures(base: str, llm: ScriptedLLM, process) -> tuple[list, str]:
    got = stream_run(base, llm, 100_000, SMALL_TOKENS)
    time.sleep(0.5)
    small = rss_mib(process)
    per_run = (LARGE_TOKENS - SMALL_TOKENS) // LARGE_RUNS
    began = time.monotonic()
    for index in range(LARGE_RUNS):
        got += stream_run(base, llm, 200_000 + index * per_run, per_run)
    seconds = time.monotonic() - began
    time.sleep(0.5)
    large = rss_mib(process)
    total = SMALL_TOKENS + per_run * LARGE_RUNS
    figures = [
        figure("server RSS after 1,000 streamed tokens", small, "MiB"),
        figure(f"server RSS after {total:,} streamed tokens", large, "MiB"),
        at_most(
            "RSS growth from 1,000 to 100,000 tokens", large - small, "MiB", BUFFER_BYTES / 2**20
        ),
        figure(
            "rate through the server to a plain SSE client",
            (total - SMALL_TOKENS) / seconds,
            "tokens/s",
        ),
        figure("tokens lost by the SSE client", total - got, f"of {total:,}", "= 0", got == total),
    ]
    notes = (
        f"Memory: {total:,} tokens in {1 + LARGE_RUNS} runs (new sessions) read by a plain SSE "
        f"client; the growth target is the replay buffer's byte cap ({BUFFER_BYTES >> 20} MiB), "
        "the only thing allowed to grow with the number of events."
    )
    return figures, notes


def run() -> dict:
    emitted = Emitted()
    with contextlib.ExitStack() as stack:
        workspace = stack.enter_context(temp_workspace())
        stack.enter_context(emitted.watching())
        llm = stack.enter_context(ScriptedLLM())
        base, process = stack.enter_context(web_server(workspace, llm.url))
        page_figures, page_notes = browser_figures(base, llm, emitted)
        rss_figures, rss_notes = memory_figures(base, llm, process)
    notes = page_notes + rss_notes + " Loopback, headless Chromium, one tab."
    return result("web", page_figures + rss_figures, notes, title="web UI streaming")


if __name__ == "__main__":
    outcome = run()
    print(json.dumps(outcome, indent=1))
    sys.exit(0 if all(f["met"] is not False for f in outcome["figures"]) else 1)
