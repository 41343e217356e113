"""Per-step overhead of the real loop (`run_agent`) against an instant scripted server.

One session makes STEPS tool calls (a read of a small file, arguments differing each step so
loop detection stays quiet) and then answers TASK_COMPLETE. A step is delimited by the loop's
own `iteration` events. Right after the agent's request of a measured step, the same request
bytes, in the same chunks, are sent again with a bare `http.client` POST (same server, same
reply, read to the end); the agent's overhead for that step is its wall time (replays left out)
minus the median of those bare round trips.
"""

from __future__ import annotations

import http.client
import itertools
import os
import re
import socket
import time
from urllib.parse import urlsplit

from bench.common import (
    at_most,
    figure,
    make_config,
    median,
    result,
    scripted,
    scripted_server_process,
    temp_workspace,
)
from lmagent.llm.client import LLMClient
from lmagent.loop.run import run_agent

STEPS = 520  # tool-call steps in one session
EARLY = range(5, 25)  # steps "around 10" (the first ones include warming up)
LATE = range(491, 511)  # steps "around 500"
SESSIONS = 3  # sessions per variant; their windows are pooled
REPLAYS = 5  # bare round trips per measured request
FILES = 20
TARGET_MS = 2.0
TARGET_GROWTH = 1.2
NO_COMPACTION = 10**9
RAM_DISK = "/dev/shm"


class TimedClient(LLMClient):
    """The real client; records each chat() call's duration, and for the steps in `measure`
    sends the same request bytes again with bare `http.client` right after the agent's own
    request (same moment, same machine state). The replays' time is left out of the step."""

    def __init__(self, config, measure: set[int], bare: http.client.HTTPConnection):
        super().__init__(config)
        self.measure = measure
        self.bare_connection = bare
        self.seconds: list[float] = []
        self.bare: dict[int, tuple[float, float]] = {}  # step -> (wall, CPU) of a bare trip
        self.excluded: dict[int, tuple[float, float]] = {}  # step -> time spent replaying

    def chat(self, messages, tools=None, *args, **kwargs):
        start = time.perf_counter()
        try:
            return super().chat(messages, tools, *args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)
            step = len(self.seconds)
            if step in self.measure:
                begin, begin_cpu = time.perf_counter(), time.process_time()
                # the very chunks the client sent (the encodings are cached, not redone)
                chunks = self._messages.encode_body(self.build_body(messages, tools or [], True))
                self.bare[step] = bare_round_trip(self.bare_connection, self.url, chunks)
                spent = (time.perf_counter() - begin, time.process_time() - begin_cpu)
                self.excluded[step] = spent


def bare_connection(url: str) -> http.client.HTTPConnection:
    """A kept-alive connection set up as the client's are (Nagle off)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.connect()
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def bare_round_trip(
    connection: http.client.HTTPConnection, url: str, chunks: list[bytes]
) -> tuple[float, float]:
    """Median wall and CPU seconds of the bare HTTP exchange: POSTing the request's bytes
    (encoded beforehand, outside the timing: encoding is the agent's own work) in the same
    chunks with plain http.client, and reading the whole reply."""
    walls, cpus = [], []
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(sum(len(chunk) for chunk in chunks)),
    }
    for _ in range(REPLAYS):
        start, start_cpu = time.perf_counter(), time.process_time()
        connection.request("POST", urlsplit(url).path, chunks, headers)
        connection.getresponse().read()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return median(walls), median(cpus)


LAST_RESULT = re.compile(rb'"tool_call_id": "call_(\d+)"')


def scripted_turn(raw: bytes) -> dict:
    """The reply depends only on the request, so a replayed request gets the same reply. The
    step is read from the request bytes without parsing them (the last tool result's call id;
    compaction keeps the tail), so the server adds next to nothing at step 500."""
    match = LAST_RESULT.match(raw, max(0, raw.rfind(b'"tool_call_id": "call_')))
    step = int(match[1]) + 1 if match else 0
    usage = {"prompt_tokens": len(raw) // 4, "completion_tokens": 20}
    usage["total_tokens"] = usage["prompt_tokens"] + 20
    if step >= STEPS:
        return scripted.text("Read every module.\nTASK_COMPLETE", usage=usage)
    arguments = {"path": f"src/module_{step % FILES}.py", "limit": 40 + step}
    return scripted.tool_call("read", arguments, id=f"call_{step}", usage=usage)


def make_files(workspace) -> None:
    src = workspace / "src"
    src.mkdir()
    for index in range(FILES):
        body = "".join(
            f"def function_{n}(value):\n    return value * {n} + {index}\n\n" for n in range(10)
        )
        (src / f"module_{index}.py").write_text(body, encoding="utf-8")


def one_session(compaction: bool = False, parent: str | None = None) -> dict:
    """Run one session; per step: wall time, time inside client.chat, bare round trip (s)."""
    with (
        temp_workspace(parent=parent) as workspace,
        scripted_server_process("bench.bench_loop:scripted_turn", instant=True) as url,
    ):
        make_files(workspace)
        config = make_config(workspace, url, max_iterations=STEPS + 10)
        if not compaction:
            config = config.with_changes(summarization_threshold=NO_COMPACTION)
        marks: list[tuple[float, float]] = []
        compactions: list[str] = []
        bare = bare_connection(url)
        client = TimedClient(config, {*EARLY, *LATE}, bare)

        def sink(event: dict) -> None:
            if event["type"] in ("iteration", "done"):
                marks.append((time.perf_counter(), time.process_time()))
            elif event["type"] == "status" and "compacted" in str(event.get("message")):
                compactions.append(event["message"])

        try:
            outcome = run_agent(config, "Read the modules in src/.", sink=sink, client=client)
        finally:
            bare.close()
        if outcome.status != "completed" or len(client.seconds) != STEPS + 1:
            raise RuntimeError(
                f"the run ended {outcome.status} ({outcome.message[:200]}) after "
                f"{outcome.iterations} steps and {len(client.seconds)} requests"
            )
        excluded = [client.excluded.get(n, (0.0, 0.0)) for n in range(1, len(marks))]
        pairs = list(zip(itertools.pairwise(marks), excluded, strict=True))
        return {
            "wall": [end[0] - start[0] - skip[0] for (start, end), skip in pairs],
            "cpu": [end[1] - start[1] - skip[1] for (start, end), skip in pairs],
            "chat": client.seconds,
            "bare": {step: trip[0] for step, trip in client.bare.items()},
            "bare_cpu": {step: trip[1] for step, trip in client.bare.items()},
            "compactions": len(compactions),
        }


def window(sessions: list[dict], steps: range) -> dict:
    """p50 in milliseconds over the pooled steps of several sessions."""

    def pooled(pick) -> float:
        return median([pick(s, n) * 1000 for s in sessions for n in steps])

    return {
        "wall": pooled(lambda s, n: s["wall"][n - 1]),
        "bare": pooled(lambda s, n: s["bare"][n]),
        "overhead": pooled(lambda s, n: s["wall"][n - 1] - s["bare"][n]),
        "cpu_overhead": pooled(lambda s, n: s["cpu"][n - 1] - s["bare_cpu"][n]),
        "outside_chat": pooled(lambda s, n: s["wall"][n - 1] - s["chat"][n - 1]),
        "client_http": pooled(lambda s, n: s["chat"][n - 1] - s["bare"][n]),
    }


def growth(early: dict, late: dict, key: str) -> float:
    return late[key] / early[key] if early[key] > 0 else float("inf")


def breakdown(stats: dict, label: str) -> list[dict]:
    return [
        figure(f"step wall time p50, steps {label}", stats["wall"], "ms"),
        figure(f"bare HTTP round trip p50, steps {label}", stats["bare"], "ms"),
        figure(f"loop outside client.chat p50, steps {label}", stats["outside_chat"], "ms"),
        figure(f"client.chat minus bare round trip p50, steps {label}", stats["client_http"], "ms"),
        figure(f"agent CPU overhead p50, steps {label}", stats["cpu_overhead"], "ms"),
    ]


def with_compaction() -> list[dict]:
    session = one_session(compaction=True)
    return [
        figure(
            "with compaction at the default threshold: overhead p50, steps 491-510",
            window([session], LATE)["overhead"],
            "ms",
        ),
        figure("compactions in that session", session["compactions"]),
    ]


def on_tmpfs() -> list[dict]:
    """The same sessions with the workspace in RAM, where fsync costs nothing."""
    if not (os.path.isdir(RAM_DISK) and os.access(RAM_DISK, os.W_OK)):
        return []
    sessions = [one_session(parent=RAM_DISK) for _ in range(SESSIONS)]
    early, late = window(sessions, EARLY), window(sessions, LATE)
    return [
        figure("workspace on tmpfs: overhead p50, steps 5-24", early["overhead"], "ms"),
        figure("workspace on tmpfs: overhead p50, steps 491-510", late["overhead"], "ms"),
        figure("workspace on tmpfs: growth of the overhead", growth(early, late, "overhead"), "×"),
    ]


def run() -> dict:
    plain = [one_session() for _ in range(SESSIONS)]
    early, late = window(plain, EARLY), window(plain, LATE)
    figures = [
        at_most("overhead p50, steps 5-24", early["overhead"], "ms", TARGET_MS),
        at_most("overhead p50, steps 491-510", late["overhead"], "ms", TARGET_MS),
        at_most(
            "growth of the overhead, step ~500 / step ~10",
            growth(early, late, "overhead"),
            "×",
            TARGET_GROWTH,
        ),
        figure("growth of the agent CPU overhead", growth(early, late, "cpu_overhead"), "×"),
        *breakdown(early, "5-24"),
        *breakdown(late, "491-510"),
        *with_compaction(),
    ]
    ram = on_tmpfs()
    figures += ram
    ram_note = (
        f" The tmpfs rows repeat the measurement with the workspace in {RAM_DISK}, where fsync "
        "costs nothing: the difference is the price of the durable session files."
        if ram
        else ""
    )
    notes = f"""
One session = {STEPS} steps that each read a small file with a native tool call, then
TASK_COMPLETE; steps are delimited by the loop's `iteration` events. The server is the
"instant" one of bench/common.py (`_serve_instant`), in its own process as a real LLM server
is: it reads each request's bytes without parsing them and streams the scripted reply in the
real wire format (one chunk per SSE event, tool-call arguments split across chunks), so at step
500 it does not spend milliseconds parsing a ~450 KB body the way the JSON-parsing test server
would. Overhead = step wall time minus the median of {REPLAYS} bare `http.client` round trips
(one kept-alive connection, Nagle off, as the client's) of the same request bytes in the same
chunks to the same server, made right after the agent's own request and left out of the step's
time; the bare figure is the HTTP exchange alone (sending bytes encoded beforehand, the
server's work, reading the reply), so encoding the request counts as the agent's overhead.
Pooled over {SESSIONS} sessions with compaction disabled (threshold raised, so the history
grows to ~{2 * STEPS} messages); one more session at the default threshold shows the effect of
compaction. "Loop outside client.chat" is the loop's own bookkeeping (prompt assembly, token
estimate, tool execution, transcript writes, metadata); "client.chat minus bare round trip" is
what the client adds to the HTTP exchange (message cleaning and encoding, SSE parsing,
callbacks). "Agent CPU overhead" is the same subtraction in CPU time of the agent's process
(all its threads, so the background fsyncs and metadata writes count), which other load on the
machine hardly disturbs.{ram_note}
"""
    return result("loop", figures, " ".join(notes.split()), title="per-step loop overhead")
