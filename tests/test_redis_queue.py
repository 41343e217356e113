"""The scheduler on the distributed queue (SCHEDULER_QUEUE=redis://…): a real redis-server on a
free port, workers started as `agent_main.py --scheduler --queue URL` processes (each with its
own workspace root, standing in for machines), and the scripted LLM server."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path

import pytest

from lmagent.core.status import STATUS_COMPLETED
from lmagent.scheduler import redis_queue
from tests.conftest import IN_CI, ROOT, free_port, make_config, need, wait_for
from tests.scripted_llm import ScriptedLLM, text

if not IN_CI:  # in CI the queue's packages must be there (requirements-queue.txt)
    pytest.importorskip("rq", reason="the queue needs: pip install -r requirements-queue.txt")

DONE = text("done\nTASK_COMPLETE")


class RedisServer:
    """redis-server on a free port, append-only file fsynced always, in a temporary folder."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.directory), "--appendonly", "yes", "--appendfsync", "always",
             "--save", "", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self._answers, 10, "redis-server to answer")
        return self

    def _answers(self) -> bool:
        with contextlib.suppress(redis_queue.QueueError):
            redis_queue.connect(self.url)
            return True
        return False

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def redis_server(tmp_path):
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    server = RedisServer(tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def workers(tmp_path, redis_server):
    """Start queue workers (`start(llm, name)`); each is killed with its process group."""
    started: list[subprocess.Popen] = []

    def start(llm: ScriptedLLM, name: str, lease: int = 2, clock: str = "") -> subprocess.Popen:
        """`clock`: how far this worker's clock is off, for libfaketime ("-1h", "+1h")."""
        root = tmp_path / f"machine-{name}"
        root.mkdir(exist_ok=True)
        env = dict(
            os.environ,
            WORKSPACE=str(root),
            LLM_URL=llm.url,
            LLM_RETRY_DELAY="0.01",
            SCHEDULER_LEASE=str(lease),
            ENABLE_MCP="false",
            **(skewed_clock(clock, tmp_path) if clock else {}),
        )
        log = open(tmp_path / f"worker-{name}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), "--scheduler", "--queue",
             redis_server.url],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        process.log = log
        started.append(process)
        return process

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.log.close()


def faketime_library() -> str | None:
    """libfaketime's multithreaded library, as the faketime package installed it."""
    if not shutil.which("dpkg"):
        return None
    listed = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True)
    found = [line for line in listed.stdout.split() if line.endswith("libfaketimeMT.so.1")]
    return found[0] if found else None


SLEEP_FIX = '''"""libfaketime 0.9.10 makes Python 3.11's time.sleep fail (EINVAL) when the monotonic
clock is left real (wolfcw/libfaketime#426): sleep in select, which it leaves alone."""
import select
import time


def sleep(seconds):
    select.select([], [], [], seconds)


time.sleep = sleep
'''


def skewed_clock(offset: str, directory: Path) -> dict:
    """Environment for a process whose wall clock is `offset` off (monotonic clocks kept)."""
    library = faketime_library()
    need(library is not None, "libfaketime is not installed (apt-get install faketime)")
    site = directory / "faketime-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SLEEP_FIX)
    return {
        "LD_PRELOAD": library,
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }


def queue_config(workspace: Path, url: str):
    return make_config(workspace).with_changes(scheduler_queue=url)


def submit_many(url: str, workspace: str, count: int) -> list[str]:
    """Run in another process: submit `count` tasks on `workspace`, return their ids."""
    config = queue_config(Path(workspace), url)
    return [redis_queue.submit(config, {"task": f"task {i}"}) for i in range(count)]


def outcomes(url: str) -> list[dict]:
    return redis_queue.read_history(redis_queue.connect(url))


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "agent_main.py"), *args],
        env=dict(os.environ, **env), cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


# --------------------------------------------------------------------------- the drain


def test_200_tasks_from_4_processes_run_once_each_on_3_workers(tmp_path, redis_server, workers):
    llm = ScriptedLLM([DONE] * 200).start()
    try:
        workspaces = [tmp_path / f"shared-{i}" for i in range(4)]
        for workspace in workspaces:
            workspace.mkdir()
        with ProcessPoolExecutor(4) as pool:
            batches = pool.map(submit_many, [redis_server.url] * 4, map(str, workspaces), [50] * 4)
            submitted = [task_id for batch in batches for task_id in batch]
        for name in "abc":
            workers(llm, name)
        wait_for(lambda: len(outcomes(redis_server.url)) >= 200, 90, "200 outcomes")
        records = outcomes(redis_server.url)
        assert Counter(r["task_id"] for r in records) == Counter(submitted)  # 0 lost, 0 twice
        assert {r["status"] for r in records} == {STATUS_COMPLETED}
        assert len({r["worker"] for r in records}) == 3
        assert len(llm.requests) == 200
    finally:
        llm.stop()


def test_a_worker_killed_mid_task_has_it_finished_once_by_another(tmp_path, redis_server, workers):
    llm = ScriptedLLM([text("working on it", delay=30), DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        task_id = redis_queue.submit(queue_config(workspace, redis_server.url), {"task": "long"})
        first = workers(llm, "first")
        llm.wait_for_requests(1, timeout=30)
        os.killpg(first.pid, signal.SIGKILL)
        workers(llm, "second")
        wait_for(lambda: outcomes(redis_server.url), 30, "the task to finish elsewhere")
        (record,) = outcomes(redis_server.url)
        assert (record["task_id"], record["status"]) == (task_id, STATUS_COMPLETED)
        assert str(first.pid) not in record["worker"]
        assert len(llm.requests) == 2  # the killed turn, then the finish on the second worker
        # the second worker resumed the first one's session: one session, the task once in it
        sessions = list((workspace / ".lmagent" / "sessions").glob("*.meta.json"))
        assert len(sessions) == 1 and record["session_id"] in sessions[0].name
    finally:
        llm.stop()


# --------------------------------------------------------------------------- bad input


def test_an_unreachable_queue_is_one_line_and_exit_1(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    for args in (("--submit", "hello"), ("--scheduler-status",), ("--scheduler",)):
        done = cli(*args, "--queue", url, WORKSPACE=str(tmp_path))
        assert done.returncode == 1
        assert done.stderr.strip().count("\n") == 0
        assert f"cannot reach the queue at {url}" in done.stderr


def test_a_wrong_queue_url_names_the_setting(tmp_path):
    done = cli("--submit", "hello", "--queue", "http://localhost:6379", WORKSPACE=str(tmp_path))
    assert done.returncode == 1
    assert "--queue='http://localhost:6379' is not valid" in done.stderr


def test_a_workspace_missing_on_every_worker_fails_with_each_reason(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([]).start()
    try:
        missing = tmp_path / "nowhere"
        config = queue_config(tmp_path, redis_server.url)
        task_id = redis_queue.submit(config, {"task": "x", "workspace": str(missing)})
        workers(llm, "a")
        workers(llm, "b")
        info = wait_for(
            lambda: (s := redis_queue.status(config))["failed"] and s, 40, "the task to fail"
        )
        assert info["failed"] == [task_id]
        job = redis_queue.rq_queue(redis_queue.connect(redis_server.url)).fetch_job(task_id)
        assert f"workspace {missing} is not a directory on this worker" in job.meta["refused"][0]
        assert len(job.meta["refused"]) == redis_queue.MAX_TRIES
        assert job.latest_result().exc_string.startswith("no worker could run it: ")
        assert llm.requests == []
    finally:
        llm.stop()


def test_a_git_remote_task_is_cloned_run_and_pushed_as_its_result_branch(
    tmp_path, redis_server, workers
):
    origin, seed = tmp_path / "origin.git", tmp_path / "seed"
    run = lambda *args, cwd=None: subprocess.run(  # noqa: E731
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )  # fmt: skip
    run("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    run("clone", "--quiet", str(origin), str(seed))
    (seed / "README").write_text("hello\n")
    run("add", "README", cwd=seed)
    run("commit", "--quiet", "-m", "seed", cwd=seed)
    run("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    write = {"name": "write", "arguments": {"path": "result.txt", "content": "42\n"}}
    llm = ScriptedLLM([{"tool_calls": [write]}, DONE]).start()
    try:
        config = queue_config(tmp_path, redis_server.url)
        task_id = redis_queue.submit(
            config, {"task": "write result.txt", "git": str(origin), "branch": "main"}
        )
        workers(llm, "a")
        wait_for(lambda: outcomes(redis_server.url), 30, "the task to finish")
        (record,) = outcomes(redis_server.url)
        assert (record["status"], record["branch"]) == (STATUS_COMPLETED, f"lmagent/{task_id}")
        shown = run("--git-dir", str(origin), "show", f"lmagent/{task_id}:result.txt")
        assert shown.stdout == "42\n"
        files = run("--git-dir", str(origin), "ls-tree", "-r", "--name-only", f"lmagent/{task_id}")
        assert files.stdout.split() == ["README", "result.txt"]  # no .lmagent/ pushed
    finally:
        llm.stop()


def test_a_redis_restart_mid_drain_loses_no_acknowledged_task(tmp_path, redis_server, workers):
    llm = ScriptedLLM([text("done\nTASK_COMPLETE", delay=0.05)] * 40).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        submitted = submit_many(redis_server.url, str(workspace), 40)
        workers(llm, "a")
        workers(llm, "b")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 5, 30, "the drain to start")
        redis_server.kill()  # kill -9: only what the append-only file holds survives
        redis_server.start()
        wait_for(lambda: len(set(r["task_id"] for r in outcomes(redis_server.url))) >= 40, 90)
        assert {r["task_id"] for r in outcomes(redis_server.url)} == set(submitted)
    finally:
        llm.stop()


def test_a_poisoned_task_is_failed_after_its_tries_with_the_error(tmp_path, redis_server, workers):
    llm = ScriptedLLM([]).start()
    try:
        config = queue_config(tmp_path, redis_server.url)
        queue = redis_queue.rq_queue(redis_queue.connect(redis_server.url))
        poisoned = {"task": "x", "workspace": {"path": str(tmp_path)}}  # written by hand: no mode
        job = redis_queue.enqueue(queue, poisoned)
        workers(llm, "a")
        workers(llm, "b")
        wait_for(lambda: redis_queue.status(config)["failed"], 40, "the task to fail")
        job.refresh()
        assert job.retries_left == 0
        assert "KeyError: 'mode'" in job.latest_result().exc_string
        assert llm.requests == []
    finally:
        llm.stop()


def test_a_waiting_session_wakes_on_a_free_worker_and_resumes(tmp_path, redis_server, workers):
    asked: list[datetime] = []

    def wait_a_little(body: dict) -> dict:  # the wake-up time is set when the run asks
        asked.append(datetime.now(timezone.utc) + timedelta(seconds=1.5))
        return {"content": f"WAIT: {asked[0].isoformat()}: the build runs"}

    llm = ScriptedLLM([wait_a_little, DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        redis_queue.submit(queue_config(workspace, redis_server.url), {"task": "wait, then go"})
        workers(llm, "a")
        workers(llm, "b")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 2, 30, "the wake-up to run")
        first, woken = outcomes(redis_server.url)
        assert (first["status"], woken["status"]) == ("waiting", STATUS_COMPLETED)
        assert woken["session_id"] == first["session_id"]
        assert datetime.fromisoformat(woken["started"]) >= asked[0]
        assert len(llm.requests) == 2
    finally:
        llm.stop()


def test_two_workers_never_run_in_one_shared_workspace_at_once(tmp_path, redis_server, workers):
    llm = ScriptedLLM([text("done\nTASK_COMPLETE", delay=0.5)] * 4).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        submit_many(redis_server.url, str(workspace), 4)
        workers(llm, "a")
        workers(llm, "b")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 4, 40, "the four tasks")
        spans = sorted(
            (start := datetime.fromisoformat(r["started"]).timestamp(), start + r["duration_s"])
            for r in outcomes(redis_server.url)
        )
        assert all(end <= next_start for (_, end), (next_start, _) in pairwise(spans))
    finally:
        llm.stop()


def test_a_task_waiting_for_a_busy_workspace_runs_after_it_without_losing_a_try(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([text("done\nTASK_COMPLETE", delay=6), DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        config = queue_config(workspace, redis_server.url)
        redis_queue.submit(config, {"task": "long"})
        workers(llm, "a")
        llm.wait_for_requests(1, timeout=30)
        waiting = redis_queue.submit(config, {"task": "after it"})
        workers(llm, "b")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 2, 30, "both tasks")
        first, second = outcomes(redis_server.url)
        assert (first["status"], second["status"]) == (STATUS_COMPLETED, STATUS_COMPLETED)
        finished = datetime.fromisoformat(first["started"]).timestamp() + first["duration_s"]
        assert datetime.fromisoformat(second["started"]).timestamp() >= finished
        said = (tmp_path / "worker-b.log").read_text()
        assert f"worker: left {waiting} for another worker: workspace in use" in said
        assert "Traceback" not in said
        job = redis_queue.rq_queue(redis_queue.connect(redis_server.url)).fetch_job(waiting)
        assert job.retries_left == redis_queue.MAX_TRIES - 1  # waiting is not failing
    finally:
        llm.stop()


def test_a_task_given_back_leaves_no_stamp_that_would_fail_it_later(tmp_path, redis_server):
    """RQ stamps a task the first time maintenance finds it taken but not started, and fails it
    as stuck a minute after that stamp. A task left for a busy workspace is taken again and
    again: the stamp of an earlier taking must go with it, or the next taking fails it."""
    from lmagent.core.stop import StopToken
    from lmagent.scheduler.queue_clock import QueueClockIntermediateQueue
    from lmagent.scheduler.redis_worker import AgentWorker, Refused

    config = queue_config(tmp_path, redis_server.url)
    connection = redis_queue.connect(redis_server.url)
    task_id = redis_queue.submit(config, {"task": "after the long one"})
    queue = redis_queue.rq_queue(connection)
    worker = AgentWorker(config, connection, lambda line: None, StopToken())
    taken = QueueClockIntermediateQueue(queue.key, connection)
    connection.lmove(queue.key, taken.key)  # as RQ takes a task for a worker
    stamp = taken.get_first_seen_key(task_id)
    connection.set(stamp, time.time() - 120)  # maintenance saw it taken two minutes ago
    worker.give_back(queue.fetch_job(task_id), queue, Refused("workspace in use", counts=False))
    assert not connection.exists(stamp)
    assert queue.job_ids == [task_id] and taken.get_job_ids() == []


def test_submit_prints_the_task_id_and_status_shows_it_scheduled(tmp_path, redis_server):
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    args = ("--queue", redis_server.url, "--workspace", str(tmp_path))
    done = cli("--submit", "report", "--not-before", later, *args)
    assert done.returncode == 0, done.stderr
    task_id = done.stdout.strip()
    assert task_id.startswith("task-")
    status = json.loads(cli("--scheduler-status", "--json", *args).stdout)
    assert [s["task_id"] for s in status["scheduled"]] == [task_id]
    assert status["queued"] == [] and status["running"] == []
    shown = cli("--scheduler-status", *args).stdout
    assert f"{task_id} not before" in shown


def test_the_web_scheduler_panel_shows_the_queue(tmp_path, redis_server):
    from lmagent.web.app import create_app

    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    config = queue_config(tmp_path, redis_server.url)
    task_id = redis_queue.submit(config, {"task": "report", "not_before": later})
    client = create_app(config, {"PIN": "1234567890"}).test_client()
    auth = {"Authorization": "Bearer 1234567890"}
    panel = client.get("/api/scheduler", headers=auth).get_json()
    assert (panel["kind"], panel["queue"]) == ("queue", redis_server.url)
    assert [s["task_id"] for s in panel["scheduled"]] == [task_id]
    details = client.get("/api/status?detail=1", headers=auth).get_json()["details"]
    assert f"  {task_id} not before {panel['scheduled'][0]['not_before']}" in details
    redis_server.kill()
    panel = client.get("/api/scheduler", headers=auth).get_json()
    assert panel["error"].startswith(f"cannot reach the queue at {redis_server.url}")


def test_the_web_scheduler_panel_shows_the_inbox_without_a_queue(tmp_path):
    from lmagent.web.app import create_app

    client = create_app(make_config(tmp_path), {"PIN": "1234567890"}).test_client()
    panel = client.get("/api/scheduler", headers={"Authorization": "Bearer 1234567890"})
    assert panel.get_json()["kind"] == "inbox" and panel.get_json()["queued"] == 0


def test_a_worker_stopped_mid_task_hands_it_over_and_the_session_resumes(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([text("working on it", delay=30), DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        task_id = redis_queue.submit(queue_config(workspace, redis_server.url), {"task": "long"})
        first = workers(llm, "first")
        llm.wait_for_requests(1, timeout=30)
        first.send_signal(signal.SIGTERM)
        assert first.wait(30) == 0
        workers(llm, "second")
        wait_for(lambda: outcomes(redis_server.url), 30, "the task to finish elsewhere")
        (record,) = outcomes(redis_server.url)
        assert (record["task_id"], record["status"]) == (task_id, STATUS_COMPLETED)
        sessions = list((workspace / ".lmagent" / "sessions").glob("*.meta.json"))
        assert len(sessions) == 1 and record["session_id"] in sessions[0].name
        assert len(llm.requests) == 2
    finally:
        llm.stop()


def test_foreign_and_malformed_jobs_are_failed_and_never_run(tmp_path, redis_server, workers):
    llm = ScriptedLLM([]).start()
    try:
        planted = tmp_path / "planted"
        config = queue_config(tmp_path, redis_server.url)
        queue = redis_queue.rq_queue(redis_queue.connect(redis_server.url))
        foreign = queue.enqueue("os.system", f"touch {planted}")
        nowhere = redis_queue.enqueue(queue, {"task": "x", "mode": "auto", "workspace": 7})
        workers(llm, "a")
        wait_for(lambda: len(redis_queue.status(config)["failed"]) == 2, 40, "both to fail")
        foreign.refresh()
        assert "not an lmagent task (os.system); never run" in foreign.latest_result().exc_string
        nowhere.refresh()
        assert "the task names no workspace path or git remote: 7" in (
            nowhere.latest_result().exc_string
        )
        assert not planted.exists() and llm.requests == []
    finally:
        llm.stop()


# --------------------------------------------------------------------------- clocks


def queue_now(url: str) -> datetime:
    return redis_queue.queue_time(redis_queue.connect(url))


def wait_for_workers(config, count: int) -> None:
    wait_for(lambda: len(redis_queue.status(config)["workers"]) >= count, 30, f"{count} workers")


@pytest.mark.parametrize("clock", ["-1h", "+1h"])
def test_a_skewed_worker_starts_a_not_before_task_by_the_queues_clock(
    tmp_path, redis_server, workers, clock
):
    llm = ScriptedLLM([DONE]).start()
    try:
        config = queue_config(tmp_path, redis_server.url)
        workers(llm, "skewed", clock=clock)
        wait_for_workers(config, 1)
        not_before = redis_queue.whole_second_after(queue_now(redis_server.url)) + timedelta(
            seconds=3
        )
        redis_queue.submit(config, {"task": "later", "not_before": not_before.isoformat()})
        wait_for(lambda: outcomes(redis_server.url), 20, "the task to start")
        (record,) = outcomes(redis_server.url)
        late = (datetime.fromisoformat(record["started"]) - not_before).total_seconds()
        assert 0 <= late < 3, f"started {late:+.1f} s from its not-before time"
        side = "behind" if clock.startswith("-") else "ahead of"
        said = (tmp_path / "worker-skewed.log").read_text()
        assert f"worker: this machine's clock is 3600 s {side} the queue's;" in said
    finally:
        llm.stop()


def test_a_wait_on_a_worker_an_hour_ahead_wakes_after_its_delay(tmp_path, redis_server, workers):
    asked: list[datetime] = []

    def wait_5_seconds(body: dict) -> dict:  # the time a model reading the worker's clock names
        asked.append(datetime.now(timezone.utc))
        worker_now = asked[0] + timedelta(hours=1)
        return {"content": f"WAIT: {(worker_now + timedelta(seconds=5)).isoformat()}: a build"}

    llm = ScriptedLLM([wait_5_seconds, DONE]).start()
    try:
        config = queue_config(tmp_path, redis_server.url)
        workers(llm, "ahead", clock="+1h")
        redis_queue.submit(config, {"task": "wait, then go"})
        wait_for(lambda: outcomes(redis_server.url), 30, "the run to wait")
        (wake,) = redis_queue.status(config)["scheduled"]  # what --scheduler-status shows
        shown = (datetime.fromisoformat(wake["not_before"]) - asked[0]).total_seconds()
        assert 5 <= shown < 7, f"the wake-up is scheduled {shown:.1f} s after the WAIT"
        wait_for(lambda: len(outcomes(redis_server.url)) >= 2, 20, "the wake-up to run")
        first, woken = outcomes(redis_server.url)
        assert (first["status"], woken["status"]) == ("waiting", STATUS_COMPLETED)
        slept = (datetime.fromisoformat(woken["started"]) - asked[0]).total_seconds()
        assert 5 <= slept < 9, f"woken {slept:.1f} s after the WAIT"
    finally:
        llm.stop()


def test_a_task_of_a_killed_skewed_worker_is_taken_within_the_bound(
    tmp_path, redis_server, workers
):
    lease = 2
    llm = ScriptedLLM([text("working on it", delay=60), DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        config = queue_config(workspace, redis_server.url)
        task_id = redis_queue.submit(config, {"task": "long"})
        ahead = workers(llm, "ahead", lease=lease, clock="+1h")
        llm.wait_for_requests(1, timeout=30)
        workers(llm, "behind", lease=lease, clock="-1h")
        wait_for_workers(config, 2)
        os.killpg(ahead.pid, signal.SIGKILL)
        killed = queue_now(redis_server.url)
        wait_for(lambda: outcomes(redis_server.url), 30, "the task to finish elsewhere")
        (record,) = outcomes(redis_server.url)
        assert (record["task_id"], record["status"]) == (task_id, STATUS_COMPLETED)
        assert str(ahead.pid) not in record["worker"]
        taken = (datetime.fromisoformat(record["started"]) - killed).total_seconds()
        assert taken <= 1.5 * lease + 2, f"taken {taken:.1f} s after the kill"  # README's bound
        assert len(llm.requests) == 2
    finally:
        llm.stop()
