"""The leftover sweep: what killing every process a command left behind costs per command.

Target (issue 14): the sweep adds ≤ 2 ms p50 to a `true` round trip, on Docker and bwrap. The
baseline is the same runner with its one `self.sweep()` call taken out (and nothing else
changed), timed interleaved with the real one, so both see the same machine load. For context,
a command that leaves one process behind (`sleep 100 &`), whose sweep has something to kill.

    python -m bench --only processes        # or: python -m bench.bench_processes [RUNS]
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import lmagent.sandbox.docker as docker_backend
import lmagent.sandbox.local as local_backend
from bench.bench_sandbox import measure
from bench.common import figure, percentile, result, temp_workspace
from lmagent.sandbox.base import RUNNER_SOURCE, SandboxConfig, SandboxUnavailable
from lmagent.sandbox.select import open_sandbox

RUNS = 200
TARGET_MS = 2.0
BACKENDS = ("docker", "bwrap")
SWEEP_CALL = "        self.sweep()\n"


@contextlib.contextmanager
def runner_source(source: str):
    """Sandboxes opened inside start runners from `source`."""
    saved = docker_backend.RUNNER_SOURCE, local_backend.RUNNER_SOURCE
    docker_backend.RUNNER_SOURCE = local_backend.RUNNER_SOURCE = source
    try:
        yield
    finally:
        docker_backend.RUNNER_SOURCE, local_backend.RUNNER_SOURCE = saved


def command(sandbox, line: str):
    def call() -> None:
        outcome = sandbox.run(line)
        if outcome.exit_code != 0:
            raise RuntimeError(f"{sandbox.name}: {line!r} failed: {outcome}")

    return call


def open_pair(backend: str, stack: contextlib.ExitStack, workspaces: list[Path]) -> dict:
    """{"<backend> swept": sandbox, "<backend> unswept": sandbox}, each on its own workspace."""
    assert RUNNER_SOURCE.count(SWEEP_CALL) == 1, "the runner's sweep call moved"
    pair = {}
    for label, source in (
        ("swept", RUNNER_SOURCE),
        ("unswept", RUNNER_SOURCE.replace(SWEEP_CALL, "")),
    ):
        workspace = stack.enter_context(temp_workspace())
        workspaces.append(workspace)
        with runner_source(source):
            sandbox = open_sandbox(SandboxConfig(workspace=workspace, backend=backend))
            sandbox.run("true")  # the runner starts now, from `source`
        stack.callback(sandbox.close)
        pair[f"{backend} {label}"] = sandbox
    return pair


def figures_for(samples: dict[str, list[float]], backends: list[str]) -> list[dict]:
    figures = []
    for backend in backends:
        swept = percentile(samples[f"{backend} swept"], 50) * 1e3
        unswept = percentile(samples[f"{backend} unswept"], 50) * 1e3
        leftover = percentile(samples[f"{backend} leftover"], 50) * 1e3
        added = swept - unswept
        figures += [
            figure(f"{backend} `true`, p50 without the sweep", unswept, "ms"),
            figure(f"{backend} `true`, p50 with the sweep", swept, "ms"),
            figure(
                f"{backend} sweep added, p50",
                added,
                "ms",
                f"≤ {TARGET_MS:g} ms",
                added <= TARGET_MS,
            ),
            figure(f"{backend} `sleep 100 & true` (one leftover killed), p50", leftover, "ms"),
        ]
    return figures


def run(runs: int = RUNS) -> dict:
    skipped, workspaces = {}, []
    with contextlib.ExitStack() as stack:
        stack.callback(remove_docker_containers, workspaces)  # runs last: after every close
        calls = {}
        for backend in BACKENDS:
            try:
                pair = open_pair(backend, stack, workspaces)
            except SandboxUnavailable as exc:
                skipped[backend] = str(exc)
                continue
            calls.update({name: command(sandbox, "true") for name, sandbox in pair.items()})
            calls[f"{backend} leftover"] = command(pair[f"{backend} swept"], "sleep 100 & true")
        samples = measure(calls, runs)
    backends = [b for b in BACKENDS if b not in skipped]
    notes = (
        f"{runs} interleaved runs of each. 'without the sweep' is the same runner with its "
        "`self.sweep()` call removed. The sweep reads the runner's children "
        "(/proc/self/task/PID/children) and kills any that are not the waiting shell or the "
        "job server, with their trees and process groups, until none are left. "
    )
    notes += " ".join(f"{name} skipped: {reason}." for name, reason in skipped.items())
    return result("processes", figures_for(samples, backends), notes, title="leftover sweep cost")


def remove_docker_containers(workspaces: list[Path]) -> None:
    with contextlib.suppress(SandboxUnavailable):  # no Docker: no containers
        for workspace in workspaces:
            docker_backend.remove_containers(workspace=workspace)


if __name__ == "__main__":
    from bench.bench_sandbox import markdown

    print(markdown(run(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)))
