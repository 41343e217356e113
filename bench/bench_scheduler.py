"""Scheduler: how soon a submitted task is picked up, and how many tasks a second it runs.

The real daemon (`python agent_main.py --scheduler`, SCHEDULER_POLL_INTERVAL at its default of
60 s) runs against the scripted server, which answers every request at once with TASK_COMPLETE.
Latency: SUBMISSIONS tasks are submitted one at a time, each after the previous one finished
and a random pause (so submissions land at every phase of the daemon's inbox poll); pick-up is
the moment the daemon claimed the file (its run history's `started`), measured from the return
of `lmagent.scheduler.inbox.submit`. Throughput: BATCH tasks dropped at once, run with 4 at a time.

    python -m bench --only scheduler        # or: python -m bench.bench_scheduler
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.common import (
    ROOT,
    ScriptedLLM,
    at_most,
    figure,
    make_config,
    median,
    percentile,
    result,
    temp_workspace,
)
from lmagent.scheduler.inbox import DaemonLock, Paths, read_history, submit

SUBMISSIONS = 50
BATCH = 300
TARGET_S = 1.0


def reply(arrivals: list[float]):
    def turn(body: dict) -> dict:
        arrivals.append(time.time())
        return {"content": "done\nTASK_COMPLETE"}

    return turn


def start_daemon(workspace: Path, llm: ScriptedLLM, concurrency: int) -> subprocess.Popen:

    env = dict(os.environ, WORKSPACE=str(workspace), LLM_URL=llm.url, PERMISSION_MODE="auto")
    env.pop("SCHEDULER_POLL_INTERVAL", None)  # the default (60 s): the fast path must not need it
    process = subprocess.Popen(
        [sys.executable, "agent_main.py", "--scheduler", "--max-concurrent", str(concurrency)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lock = DaemonLock(Paths(workspace).lock)
    wait_until(lambda: lock.holder() == str(process.pid), 20, "the daemon to start")
    return process


def stop_daemon(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.005)


def runs(workspace: Path) -> list[dict]:

    history = read_history(Paths(workspace).history)
    return [r for r in history if "duration_s" in r]


def latency(workspace: Path) -> tuple[list[float], list[float]]:
    """(pick-up seconds, submit-to-first-LLM-request seconds) for SUBMISSIONS tasks."""

    arrivals: list[float] = []
    pickups, to_model = [], []
    rng = random.Random(6)
    with ScriptedLLM([reply(arrivals)] * SUBMISSIONS, chunk_size=1000) as llm:
        daemon = start_daemon(workspace, llm, 1)
        config = make_config(workspace, llm)
        try:
            for index in range(SUBMISSIONS):
                time.sleep(rng.uniform(0, 0.25))
                path = submit(config, f"task {index}")
                submitted = time.time()
                wait_until(lambda n=index: len(runs(workspace)) > n, 10, f"run {index}")
                record = runs(workspace)[index]
                if record["task_file"] != path.name or record["status"] != "completed":
                    raise RuntimeError(f"unexpected run record: {record}")
                pickups.append(datetime.fromisoformat(record["started"]).timestamp() - submitted)
                to_model.append(arrivals[index] - submitted)
        finally:
            stop_daemon(daemon)
    return pickups, to_model


def throughput(workspace: Path) -> float:
    """Runs a second with 4 at a time, BATCH tasks waiting in the inbox at the start."""

    arrivals: list[float] = []
    with ScriptedLLM([reply(arrivals)] * BATCH, chunk_size=1000) as llm:
        config = make_config(workspace, llm)
        for index in range(BATCH):
            submit(config, f"batch {index}")
        start = time.monotonic()
        daemon = start_daemon(workspace, llm, 4)
        try:
            wait_until(lambda: len(runs(workspace)) >= BATCH, 120, "the batch")
            elapsed = time.monotonic() - start
        finally:
            stop_daemon(daemon)
    return BATCH / elapsed


def run() -> dict:
    with temp_workspace() as workspace:
        pickups, to_model = latency(workspace)
    with temp_workspace() as workspace:
        rate = throughput(workspace)
    figures = [
        at_most("submission → pick-up, p50", median(pickups), "s", TARGET_S),
        at_most("submission → pick-up, p95", percentile(pickups, 95), "s", TARGET_S),
        figure("submission → pick-up, max", max(pickups), "s"),
        figure("submission → first LLM request, p50", median(to_model), "s"),
        figure("submission → first LLM request, p95", percentile(to_model, 95), "s"),
        figure(f"throughput, {BATCH} queued tasks, 4 at a time", rate, "runs/s"),
    ]
    notes = (
        f"{SUBMISSIONS} submissions one at a time after random 0–0.25 s pauses; the daemon "
        "polls its inbox every 0.2 s (SCHEDULER_POLL_INTERVAL left at 60 s). Pick-up is the "
        "claim recorded in the run history. The throughput figure includes the daemon's start "
        "(about 0.3 s) and one fsynced session per task."
    )
    return result("scheduler", figures, notes, title="scheduler pick-up latency")


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
