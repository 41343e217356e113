"""The scheduler on the distributed queue (RQ on Redis) against the directory inbox, same run:
pick-up latency and claims per second, with 1 and with 3 workers (or 1 and 3 tasks at a time
for the inbox daemon).

A real redis-server (append-only, fsync every write) on a free port; workers are
`agent_main.py --scheduler --queue URL` processes, each with its own workspace root; the
scripted server answers every request at once with TASK_COMPLETE. Latency: SUBMISSIONS tasks
submitted one at a time after random pauses; pick-up is the run's start recorded in the history
(the queue's: Redis's clock, on this machine), measured from the return of `submit`.
Throughput: BATCH tasks put on the queue while the workers wait, spread over 3 shared-path
workspaces (a workspace runs one task at a time); the inbox daemon drains BATCH files of one
workspace.

    python -m bench --only queue        # or: python -m bench.bench_queue
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.bench_scheduler import runs, start_daemon, stop_daemon, wait_until
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
from lmagent.scheduler import redis_queue
from lmagent.scheduler.inbox import submit as submit_to_inbox

SUBMISSIONS = 30
BATCH = 150
TARGET_S = 1.0


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def redis_server(directory: Path):
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
         "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _answers(url), 10, "redis-server")
        yield url
    finally:
        process.kill()
        process.wait()


def _answers(url: str) -> bool:
    with contextlib.suppress(redis_queue.QueueError):
        redis_queue.connect(url).flushdb()
        return True
    return False


@contextlib.contextmanager
def queue_workers(root: Path, url: str, llm: ScriptedLLM, count: int):
    env = dict(os.environ, LLM_URL=llm.url, ENABLE_MCP="false", LLM_RETRY_DELAY="0.01")
    processes = []
    for index in range(count):
        machine = root / f"machine-{index}"
        machine.mkdir()
        process = subprocess.Popen(
            [sys.executable, "agent_main.py", "--scheduler", "--queue", url],
            cwd=ROOT, env={**env, "WORKSPACE": str(machine)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        processes.append(process)
    try:
        connection = redis_queue.connect(url)
        queue = redis_queue.rq_queue(connection)
        from rq import Worker

        wait_until(lambda: Worker.count(queue=queue) >= count, 30, "the workers to start")
        yield connection
    finally:
        for process in processes:
            stop_daemon(process)


def reply(body: dict) -> dict:
    return {"content": "done\nTASK_COMPLETE"}


def queue_latency(root: Path, url: str, workers: int) -> list[float]:
    shared = root / "shared"
    shared.mkdir()
    config = make_config(shared).with_changes(scheduler_queue=url)
    rng = random.Random(17)
    pickups = []
    with (
        ScriptedLLM([reply] * SUBMISSIONS, chunk_size=1000) as llm,
        queue_workers(root, url, llm, workers) as connection,
    ):
        for index in range(SUBMISSIONS):
            time.sleep(rng.uniform(0, 0.25))
            task_id = redis_queue.submit(config, {"task": f"task {index}"})
            submitted = time.time()
            wait_until(lambda t=task_id: _outcome(connection, t), 20, f"task {index}")
            started = datetime.fromisoformat(_outcome(connection, task_id)["started"])
            pickups.append(started.timestamp() - submitted)
    return pickups


def _outcome(connection, task_id: str) -> dict | None:
    for record in redis_queue.read_history(connection, 5):
        if record["task_id"] == task_id:
            return record
    return None


def queue_throughput(root: Path, url: str, workers: int) -> float:
    spaces = [root / f"shared-{index}" for index in range(3)]
    for space in spaces:
        space.mkdir()
    with (
        ScriptedLLM([reply] * BATCH, chunk_size=1000) as llm,
        queue_workers(root, url, llm, workers) as connection,
    ):
        queue = redis_queue.rq_queue(connection)
        config = make_config(spaces[0])
        start = time.monotonic()
        for index in range(BATCH):
            data = {"task": f"batch {index}", "workspace": str(spaces[index % 3])}
            redis_queue.enqueue(queue, redis_queue.task_payload(config, data))
        wait_until(lambda: connection.llen(redis_queue.HISTORY_KEY) >= BATCH, 180, "the batch")
        return BATCH / (time.monotonic() - start)


def inbox_latency(workspace: Path) -> list[float]:
    pickups = []
    rng = random.Random(17)
    with ScriptedLLM([reply] * SUBMISSIONS, chunk_size=1000) as llm:
        daemon = start_daemon(workspace, llm, 1)
        config = make_config(workspace, llm)
        try:
            for index in range(SUBMISSIONS):
                time.sleep(rng.uniform(0, 0.25))
                submit_to_inbox(config, f"task {index}")
                submitted = time.time()
                wait_until(lambda n=index: len(runs(workspace)) > n, 20, f"run {index}")
                started = datetime.fromisoformat(runs(workspace)[index]["started"])
                pickups.append(started.timestamp() - submitted)
        finally:
            stop_daemon(daemon)
    return pickups


def inbox_throughput(workspace: Path, concurrency: int) -> float:
    with ScriptedLLM([reply] * BATCH, chunk_size=1000) as llm:
        daemon = start_daemon(workspace, llm, concurrency)
        config = make_config(workspace, llm)
        try:
            start = time.monotonic()
            for index in range(BATCH):
                submit_to_inbox(config, f"batch {index}")
            wait_until(lambda: len(runs(workspace)) >= BATCH, 180, "the batch")
            return BATCH / (time.monotonic() - start)
        finally:
            stop_daemon(daemon)


def run() -> dict:
    figures = []
    for workers in (1, 3):
        with temp_workspace() as root, redis_server(root) as url:
            pickups = queue_latency(root, url, workers)
        with temp_workspace() as root, redis_server(root) as url:
            rate = queue_throughput(root, url, workers)
        figures += [
            at_most(f"queue, {workers} workers: pick-up p50", median(pickups), "s", TARGET_S),
            figure(f"queue, {workers} workers: pick-up p95", percentile(pickups, 95), "s"),
            figure(f"queue, {workers} workers: claims/s ({BATCH} tasks)", rate, "runs/s"),
        ]
    with temp_workspace() as workspace:
        pickups = inbox_latency(workspace)
    figures += [
        figure("inbox daemon: pick-up p50", median(pickups), "s"),
        figure("inbox daemon: pick-up p95", percentile(pickups, 95), "s"),
    ]
    for concurrency in (1, 3):
        with temp_workspace() as workspace:
            rate = inbox_throughput(workspace, concurrency)
        figures.append(figure(f"inbox daemon, {concurrency} at a time: claims/s", rate, "runs/s"))
    notes = (
        f"{SUBMISSIONS} submissions one at a time after random 0–0.25 s pauses; {BATCH} tasks "
        "for each throughput figure. Queue workers are separate processes on this machine "
        "(2 cores, shared with Redis and the scripted server); the queue's throughput tasks "
        "are spread over 3 workspaces, the inbox's sit in one. Every task makes and fsyncs "
        "one session; Redis fsyncs every write (appendfsync always)."
    )
    return result("queue", figures, notes, title="distributed queue vs directory inbox")


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
