"""Sandboxed shell: round trip of `true` through the Docker and bwrap sandboxes vs the host.

Target (issue 3): through the Docker backend, p50 <= 3x and p95 <= 10x a bare host
`subprocess.run(["sh", "-c", "true"])` measured in the same run (bwrap is held to the same).
The three are timed interleaved (host, docker, bwrap, host, ...), so each sees the same machine
load; separate loops on a busy machine would compare different moments.

    python -m bench --only sandbox        # or: python -m bench.bench_sandbox [RUNS]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.common import figure, percentile, result, temp_workspace
from lmagent.sandbox.base import SandboxConfig, SandboxUnavailable
from lmagent.sandbox.select import open_sandbox, quiesce

RUNS = 200
QUIESCE_RUNS = 50
TARGET_P50, TARGET_P95 = 3.0, 10.0
BACKENDS = ("docker", "bwrap")


def host_true() -> None:
    subprocess.run(["sh", "-c", "true"], check=True)


def sandbox_true(sandbox):
    def call() -> None:
        outcome = sandbox.run("true")
        if outcome.exit_code != 0:
            raise RuntimeError(f"{sandbox.name}: `true` failed: {outcome}")

    return call


def open_backends(workspace: Path) -> tuple[dict, dict]:
    opened, skipped = {}, {}
    for backend in BACKENDS:
        try:
            opened[backend] = open_sandbox(SandboxConfig(workspace=workspace, backend=backend))
        except SandboxUnavailable as exc:
            skipped[backend] = str(exc)
    return opened, skipped


def measure(calls: dict, runs: int) -> dict[str, list[float]]:
    """Seconds per call of each entry, interleaved, after a few untimed warm-up calls."""
    for call in calls.values():  # container start, runner start, first shells
        for _ in range(5):
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - started)
    return samples


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def ratio_figure(label: str, value: float, host: float, limit: float) -> dict:
    ratio = value / host
    return figure(label, round(ratio, 2), "x host", f"≤ {limit:g}x host", ratio <= limit)


def figures_for(samples: dict[str, list[float]]) -> list[dict]:
    host50, host95 = percentile(samples["host"], 50), percentile(samples["host"], 95)
    figures = [
        figure("host `sh -c true`, p50", host50 * 1e3, "ms"),
        figure("host `sh -c true`, p95", host95 * 1e3, "ms"),
    ]
    for name in BACKENDS:
        if name not in samples:
            continue
        p50, p95 = percentile(samples[name], 50), percentile(samples[name], 95)
        figures += [
            figure(f"{name} `true`, p50", p50 * 1e3, "ms"),
            figure(f"{name} `true`, p95", p95 * 1e3, "ms"),
            ratio_figure(f"{name} p50 / host p50", p50, host50, TARGET_P50),
            ratio_figure(f"{name} p95 / host p95", p95, host95, TARGET_P95),
        ]
    if "quiesce" in samples:
        figures.append(
            figure(
                "quiesce (before a restore), p50", percentile(samples["quiesce"], 50) * 1e3, "ms"
            )
        )
    return figures


def run(runs: int = RUNS) -> dict:
    with temp_workspace() as workspace:
        opened, skipped = open_backends(workspace)
        try:
            calls = {"host": host_true}
            calls.update({name: sandbox_true(sandbox) for name, sandbox in opened.items()})
            samples = measure(calls, runs)
            samples["quiesce"] = [timed(lambda: quiesce(workspace)) for _ in range(QUIESCE_RUNS)]
        finally:
            for sandbox in opened.values():
                sandbox.close()
            if "docker" in opened:
                from lmagent.sandbox.docker import remove_containers

                remove_containers(workspace=workspace)
    notes = (
        f"{runs} interleaved runs of each. A sandboxed command goes to a runner that lives in "
        "the sandbox (Docker: over a unix socket in the workspace, not through dockerd) and is "
        "handed to a bash started ahead of time. `quiesce` is what every restore does first: "
        "from the host, make sure no sandboxed process of the workspace lives (the Docker "
        f"container's and any bwrap sandbox of it), {QUIESCE_RUNS} runs, nothing left to kill. "
    )
    notes += " ".join(f"{name} skipped: {reason}." for name, reason in skipped.items())
    return result("sandbox", figures_for(samples), notes, title="sandboxed shell round trip")


def markdown(report: dict) -> str:
    rows = ["| figure | value | target | met? |", "|---|---|---|---|"]
    for item in report["figures"]:
        met = {True: "yes", False: "**no**", None: ""}[item["met"]]
        value = f"{item['value']:.2f} {item['unit']}".strip()
        rows.append(f"| {item['name']} | {value} | {item['target'] or ''} | {met} |")
    return "\n".join([*rows, "", report["notes"]])


if __name__ == "__main__":
    print(markdown(run(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)))
