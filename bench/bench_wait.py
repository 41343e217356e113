"""What the harness adds between the model's turns on whole tasks, with the real model (issue 35:
"nothing else in the harness waits").

Own tasks (bench_tasks.TASKS, WAIT_TASKS of them) are run one after the other in this process
(`run_agent`, set up as `--embedded` sets up the default model: text calls, the compact tool
set, greedy) against the embedded server (Qwen2.5-Coder-1.5B Q4_K_M, --embedded's speculation),
through a relay that stamps each chat request as it arrives. The run's events are stamped as
the sink receives them. For every request after a run's first:

    wait    = its arrival - the last token of the reply before it, as the agent received it
    server  = the end of that reply (as the relay saw it) - its last token: the server's own
              time after the last token (its timings, saving the prompt in its cache)
    tools   = the time from each tool_call event to its tool_result in between, less the
              checkpoints taken inside it (StepRecorder.before/after, timed by wrapping them):
              the model's own commands, what it asked for
    checks  = the finish's checks (a "checking: ..." status to the next event): commands the
              harness runs on purpose (lmagent.loop.verify)
    harness = wait - server - tools - checks: parsing, permissions, checkpoints, the
              session's files, building the next request (checkpoints also given alone)

and for each run's first request: from `run_agent` being called to its arrival (the sandbox,
the first snapshot, the system prompt). Target: harness p50 ≤ 50 ms per step.

    python -m bench --only wait
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator

import lmagent.llm.embedded as embedded_llm
from bench import bench_tasks
from bench.common import at_most, figure, make_config, median, percentile, result, temp_workspace
from lmagent.checkpoints.recorder import StepRecorder
from lmagent.core.config import SPECULATION_TYPES
from lmagent.loop.run import run_agent

WAIT_TASKS = ("hello", "fix-test", "csv-sum", "syntax", "git-init", "implement")
STEP_TARGET_MS = 50.0
TITLE = "harness time between the model's turns on whole tasks (Qwen2.5-Coder-1.5B)"


class Stamps:
    """The events of one run and the arrivals of its requests, on one clock."""

    def __init__(self):
        self.events: list[tuple[float, dict]] = []
        self.arrivals: list[float] = []
        self.snapshots: list[tuple[float, float]] = []  # (start, end) of each checkpoint call
        self.ends: list[float] = []  # when each chat reply ended, as the relay saw it

    def sink(self, event: dict) -> None:
        self.events.append((time.monotonic(), event))

    def arrived(self, body: dict) -> dict:
        if "messages" in body:  # a chat request
            self.arrivals.append(time.monotonic())
        return body

    def steps(self) -> list[dict]:
        """{wait, tools, checks, checkpoints, harness} in seconds for each request after the
        first."""
        pairs = itertools.pairwise(self.arrivals)
        return [self._between(a, b, e) for (a, b), e in zip(pairs, self.ends, strict=False)]

    def _between(self, start: float, end: float, reply_end: float) -> dict:
        inside = [(t, e) for t, e in self.events if start <= t < end]
        tokens = [t for t, e in inside if e.get("type") == "token"]
        last = tokens[-1] if tokens else start
        checks = 0.0
        calls: dict[str, float] = {}
        checking: float | None = None
        spans: list[tuple[float, float]] = []  # of the model's commands
        for t, e in ((t, e) for t, e in inside if t >= last):
            if checking is not None:
                checks, checking = checks + t - checking, None
            if e.get("type") == "tool_call":
                calls[str(e.get("id"))] = t
            elif e.get("type") == "tool_result" and str(e.get("id")) in calls:
                spans.append((calls.pop(str(e.get("id"))), t))
            elif e.get("type") == "status" and str(e.get("message", "")).startswith("checking:"):
                checking = t
        if checking is not None:
            checks += end - checking
        snapshots = [(a, b) for a, b in self.snapshots if last <= a < end]
        taken = sum(b - a for a, b in snapshots)
        in_tools = sum(b - a for a, b in snapshots if any(s <= a < e for s, e in spans))
        tools = sum(e - s for s, e in spans) - in_tools
        wait, server = end - last, max(0.0, min(reply_end, end) - last)
        return {
            "wait": wait,
            "server": server,
            "tools": tools,
            "checks": checks,
            "checkpoints": taken,
            "harness": wait - server - tools - checks,
        }


@contextlib.contextmanager
def timed_checkpoints(stamps: Stamps) -> Iterator[None]:
    """StepRecorder.before and .after, each call's span added to `stamps.snapshots`."""
    originals = {name: getattr(StepRecorder, name) for name in ("before", "after")}

    def timed(function):
        def call(*args, **kwargs):
            started = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                stamps.snapshots.append((started, time.monotonic()))

        return call

    for name, function in originals.items():
        setattr(StepRecorder, name, timed(function))
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(StepRecorder, name, function)


def one_task(task: bench_tasks.Task, url: str, relay_factory) -> tuple[Stamps, float, str]:
    """(the stamps, seconds from run_agent's call to its first request, the run's status)."""
    stamps = Stamps()
    with temp_workspace("lmagent-bench-wait-") as folder, relay_factory(stamps) as relay:
        bench_tasks.prepare(task, folder)
        config = make_config(folder, url)
        config = config.with_changes(**embedded_llm.embedded_settings(config, relay.url))
        config = config.with_changes(max_iterations=bench_tasks.STEPS, llm_timeout=600.0)
        called = time.monotonic()
        with timed_checkpoints(stamps):
            outcome = run_agent(config, task.prompt, sink=stamps.sink)
        stamps.ends = [exchange.ended for exchange in relay.chats()]
    first = stamps.arrivals[0] - called if stamps.arrivals else 0.0
    ending = (
        outcome.status
        if outcome.status == "completed"
        else f"{outcome.status} ({outcome.message[:80]!r})"
    )
    return stamps, first, ending


def run() -> dict:
    from types import SimpleNamespace

    from tests.realmodel_fixtures import Relay  # tests/: imports pytest

    model = embedded_llm.resolve_model()
    speculation = SPECULATION_TYPES[0]
    chosen = [t for t in bench_tasks.TASKS if t.name in WAIT_TASKS]
    steps: list[dict] = []
    firsts: list[float] = []
    statuses: list[str] = []
    with embedded_llm.EmbeddedServer(
        model, n_ctx=bench_tasks.N_CTX, threads=2, speculation=speculation
    ) as server:
        upstream = SimpleNamespace(base_url=server.base_url)

        def relay_factory(stamps: Stamps) -> Relay:
            return Relay(upstream, rewrite=stamps.arrived)

        for task in chosen:
            stamps, first, status = one_task(task, server.url, relay_factory)
            steps += stamps.steps()
            firsts.append(first)
            statuses.append(f"{task.name}: {status}, {len(stamps.arrivals)} requests")
    return result("wait", figures(steps, firsts), notes(steps, statuses, speculation), TITLE)


def figures(steps: list[dict], firsts: list[float]) -> list[dict]:
    def ms(values: list[float], q: float) -> float:
        return round(1000 * percentile(values, q), 1) if values else 0.0

    harness = [s["harness"] for s in steps]
    return [
        figure("steps measured", len(steps), "steps"),
        at_most("harness per step, p50", ms(harness, 50), "ms", STEP_TARGET_MS),
        figure("harness per step, p90", ms(harness, 90), "ms"),
        figure("harness per step, max", ms(harness, 100), "ms"),
        figure("of which checkpoints, p50", ms([s["checkpoints"] for s in steps], 50), "ms"),
        figure("server after its last token, p50", ms([s["server"] for s in steps], 50), "ms"),
        figure("the model's commands per step, p50", ms([s["tools"] for s in steps], 50), "ms"),
        figure("finish checks, total", round(sum(s["checks"] for s in steps), 1), "s"),
        figure("run start to first request, p50", round(median(firsts), 2), "s"),
        figure("run start to first request, max", round(max(firsts), 2), "s"),
    ]


def notes(steps: list[dict], statuses: list[str], speculation: str) -> str:
    worst = sorted(steps, key=lambda s: s["harness"], reverse=True)[:3]
    shown = "; ".join(
        f"{1000 * s['harness']:.0f} ms harness, {1000 * s['server']:.0f} ms server, of a "
        f"{1000 * s['wait']:.0f} ms wait"
        for s in worst
    )
    return (
        f"Tasks: {', '.join(statuses)}. Server: llama.cpp (xllamacpp) as --embedded starts it, "
        f"{bench_tasks.N_CTX}-token window, 2 threads, speculation '{speculation}'; the agent "
        "in this process, default sandbox, permission auto. The largest steps: "
        f"{shown or 'none'}. A step's harness time is what is left of the wait between the "
        "model's last token and the next request after the model's commands and the finish's "
        "checks are taken out, and the server's time after its last token."
    )


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
