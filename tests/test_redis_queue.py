"""The scheduler on the distributed queue (SCHEDULER_QUEUE=redis://…): a real redis-server on a
free port, workers started as `agent_main.py --scheduler --queue URL` processes (each with its
own workspace root, standing in for machines), and the scripted LLM server."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
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

pytest_plugins = ["tests.sandbox_fixtures"]

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
def workers(tmp_path, tmp_path_factory, redis_server):
    """Start queue workers (`start(llm, name)`); each is killed with its process group. Each
    has a WORKSPACE of its own (`.root`) and accepts task workspaces under `tmp_path`."""
    started: list[subprocess.Popen] = []

    def start(
        llm: ScriptedLLM, name: str, lease: int = 2, clock: str = "", **settings: str
    ) -> subprocess.Popen:
        """`clock`: how far this worker's clock is off, for libfaketime ("-1h", "+1h");
        `settings`: more of its environment."""
        root = tmp_path_factory.mktemp(f"machine-{name}")
        env = dict(
            os.environ,
            WORKSPACE=str(root),
            QUEUE_WORKSPACE_ROOTS=str(tmp_path),
            LLM_URL=llm.url,
            LLM_RETRY_DELAY="0.01",
            SCHEDULER_LEASE=str(lease),
            ENABLE_MCP="false",
            **(skewed_clock(clock, tmp_path) if clock else {}),
            **settings,
        )
        log = open(tmp_path / f"worker-{name}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), "--scheduler", "--queue",
             redis_server.url],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        process.log, process.root = log, root
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
        "PYTHONPATH": python_path_with(site),
    }


def python_path_with(directory: Path) -> str:
    """PYTHONPATH with `directory` first (its sitecustomize.py runs in the process)."""
    return os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))


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


def test_a_queue_password_is_never_printed(tmp_path):
    url = f"rediss://lm:s3cret@127.0.0.1:{free_port()}/0"
    for args in (("--submit", "hello"), ("--scheduler-status",), ("--scheduler",)):
        done = cli(*args, "--queue", url, WORKSPACE=str(tmp_path))
        assert done.returncode == 1
        assert "rediss://lm:***@127.0.0.1" in done.stderr and "s3cret" not in done.stderr


def test_a_wrong_queue_url_names_the_setting(tmp_path):
    done = cli("--submit", "hello", "--queue", "http://localhost:6379", WORKSPACE=str(tmp_path))
    assert done.returncode == 1
    assert "--queue='http://localhost:6379' is not valid" in done.stderr


def test_status_holds_while_workers_move_scheduled_tasks_on(tmp_path, redis_server):
    """A worker takes a due task out of the scheduled set at any moment; `status` read the
    set and then each task's time, and raised when a task left between the two reads."""
    from rq.registry import ScheduledJobRegistry

    config = queue_config(tmp_path, redis_server.url)
    queue = redis_queue.rq_queue(redis_queue.connect(redis_server.url))
    key = ScheduledJobRegistry(queue=queue).key
    churner = redis_queue.connect(redis_server.url)
    moved, stop = 0, threading.Event()

    def move_tasks_on() -> None:
        nonlocal moved
        while not stop.is_set():
            churner.zadd(key, {"task-due": 1_900_000_000})
            churner.zrem(key, "task-due")
            moved += 1

    thread = threading.Thread(target=move_tasks_on)
    thread.start()
    try:
        seen = [redis_queue.status(config)["scheduled"] for _ in range(400)]
    finally:
        stop.set()
        thread.join()
    listed = [entry for entries in seen for entry in entries]
    assert moved > 400 and listed  # the race was there to be lost
    assert {(e["task_id"], e["not_before"]) for e in listed} == {
        ("task-due", "2030-03-17T17:46:40+00:00")
    }


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


def test_a_git_remote_task_is_run_and_pushed_and_what_its_model_planted_never_runs(
    tmp_path, tmp_path_factory, redis_server, workers
):
    from tests.test_scheduler_git import make_origin

    origin = make_origin(tmp_path_factory.mktemp("remote"))
    marker = tmp_path_factory.mktemp("markers") / "ran"
    plant = (
        f"printf '#!/bin/sh\\ntouch {marker}-$(basename $0)\\n' > .git/hooks/pre-commit && "
        "chmod +x .git/hooks/pre-commit && for h in post-commit pre-push reference-transaction "
        "post-index-change; do cp .git/hooks/pre-commit .git/hooks/$h; done && "
        f"git config core.fsmonitor 'touch {marker}-fsmonitor' && "
        f"git config alias.add '!touch {marker}-alias' && "
        f"git config filter.evil.clean 'touch {marker}-filter' && "
        "echo '* filter=evil' > .gitattributes && "
        "(setsid sh -c 'while :; do echo x >> alive.log; sleep 0.2; done' >/dev/null 2>&1 &)"
    )
    write = {"name": "write", "arguments": {"path": "result.txt", "content": "42\n"}}
    shell = {"name": "shell", "arguments": {"command": plant}}
    llm = ScriptedLLM([{"tool_calls": [write]}, {"tool_calls": [shell]}, DONE]).start()
    try:
        config = queue_config(tmp_path, redis_server.url)
        task_id = redis_queue.submit(
            config, {"task": "write result.txt", "git": str(origin), "branch": "main"}
        )
        worker = workers(llm, "a")
        wait_for(lambda: outcomes(redis_server.url), 60, "the task to finish")
        (record,) = outcomes(redis_server.url)
        assert (record["status"], record["branch"]) == (STATUS_COMPLETED, f"lmagent/{task_id}")
        planted = json.loads(llm.requests[2]["messages"][-1]["content"])
        assert planted["exit_code"] == 0, planted
        work = worker.root / ".lmagent" / "queue" / "work" / task_id
        assert "fsmonitor" in (work / ".git" / "config").read_text()
        assert list(marker.parent.iterdir()) == []
        shown = git_show(origin, f"lmagent/{task_id}:result.txt")
        assert shown == "42\n"
        files = git_show(origin, f"lmagent/{task_id}", "ls-tree", "-r", "--name-only")
        pushed = [name for name in files.split() if name != "alive.log"]
        assert pushed == [".gitattributes", "README", "result.txt"]  # no .lmagent/, no .git/
        alive = work / "alive.log"
        size = alive.stat().st_size if alive.exists() else 0
        time.sleep(1)
        assert (alive.stat().st_size if alive.exists() else 0) == size  # nothing left running
        said = (tmp_path / "worker-a.log").read_text()
        assert f"worker: start {task_id} in {worker.root}" in said
    finally:
        llm.stop()


def test_a_git_remote_tasks_docker_container_ends_with_the_task(
    tmp_path, tmp_path_factory, redis_server, workers, require_backend, sandbox_image
):
    from lmagent.sandbox.docker import docker_client, remove_containers
    from tests.test_scheduler_git import make_origin

    require_backend("docker")
    origin = make_origin(tmp_path_factory.mktemp("remote"))
    shell = {"name": "shell", "arguments": {"command": "hostname > where.txt"}}
    llm = ScriptedLLM([{"tool_calls": [shell]}, DONE]).start()
    work = None
    try:
        config = queue_config(tmp_path, redis_server.url)
        task_id = redis_queue.submit(
            config, {"task": "say where", "git": str(origin), "branch": "main"}
        )
        worker = workers(llm, "a", SANDBOX_BACKEND="docker", SANDBOX_IMAGE=sandbox_image)
        work = (worker.root / ".lmagent" / "queue" / "work" / task_id).resolve()
        wait_for(lambda: outcomes(redis_server.url), 120, "the task to finish")
        (record,) = outcomes(redis_server.url)
        assert (record["status"], record["branch"]) == (STATUS_COMPLETED, f"lmagent/{task_id}")
        assert git_show(origin, f"lmagent/{task_id}:where.txt") == "lmagent-sandbox\n"
        label = f"lmagent.workspace={work}"
        assert docker_client().containers.list(all=True, filters={"label": label}) == []
    finally:
        llm.stop()
        if work is not None:
            remove_containers(workspace=work)


def git_show(origin: Path, what: str, *command: str) -> str:
    command = command or ("show",)
    done = subprocess.run(
        ["git", "--git-dir", str(origin), *command, what], capture_output=True, text=True
    )
    return done.stdout


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


def forged_callback(*args) -> None:
    """What a forged job names as its callback: leaves a mark in the worker's WORKSPACE."""
    (Path(os.environ["WORKSPACE"]) / "callback-ran").write_text("ran")


FORGED = "tests.test_redis_queue.forged_callback"


def plant(connection, job_id: str, fields: dict) -> None:
    """Write a job into Redis as anyone who can write to it might, and queue it."""
    connection.hset(f"rq:job:{job_id}", mapping=fields)
    connection.rpush(f"rq:queue:{redis_queue.QUEUE_NAME}", job_id)


def forged_jobs(connection, legit: dict, workspace: Path) -> dict[str, tuple[dict, str]]:
    """job id → (its fields, the reason it must be refused with)."""
    pickled = zlib.compress(pickle.dumps(("os.system", None, ["touch /tmp/x"], {})))
    good = {k.decode(): v for k, v in legit.items()}
    ids = iter(redis_queue.new_task_id() for _ in range(20))
    payload = {"task": "x", "mode": "auto", "workspace": {"path": str(workspace)}}
    data = lambda **change: zlib.compress(  # noqa: E731
        json.dumps([redis_queue.JOB_FUNCTION, None, [], {"payload": {**payload, **change}}])
        .encode()
    )  # fmt: skip
    return {
        next(ids): ({**good, "success_callback_name": FORGED}, "success_callback_name"),
        next(ids): ({**good, "failure_callback_name": FORGED}, "failure_callback_name"),
        next(ids): ({**good, "stopped_callback_name": FORGED}, "stopped_callback_name"),
        next(ids): ({**good, "dependency_ids": '["task-x"]'}, "dependency_ids"),
        next(ids): ({**good, "webhooks": '[{"url": "http://127.0.0.1:9/"}]'}, "webhooks"),
        next(ids): ({**good, "repeats_left": "3"}, "repeats_left"),
        next(ids): ({**good, "data": pickled}, "cannot be read as JSON (pickled"),
        next(ids): ({**good, "meta": pickle.dumps({"a": 1})}, "cannot be read as JSON (pickled"),
        next(ids): (
            {**good, "data": zlib.compress(json.dumps([FORGED, None, [], {}]).encode())},
            f"not an lmagent task ({FORGED}); never run",
        ),
        next(ids): ({**good, "data": data(mode=None)}, "'mode' must be one of"),
        next(ids): ({**good, "data": data(workspace=7)}, "names no workspace path or git remote"),
        next(ids): ({**good, "data": data(extra=1)}, "its payload is not a task's"),
        next(ids): ({**good, "data": b"\x80garbage"}, "cannot be read as JSON"),
        "/etc/lmagent-forged": (good, "job id '/etc/lmagent-forged' is not an lmagent task id"),
        "../../escape": (good, "is not an lmagent task id"),
    }


def shared_config(tmp_path: Path, url: str):
    """The config of a submitter on the shared workspace `tmp_path/shared` (made here)."""
    (tmp_path / "shared").mkdir()
    return queue_config(tmp_path / "shared", url)


def soon(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


def a_queued_task(tmp_path: Path, url: str) -> tuple:
    """(config, connection, queue, job): a task as --submit queues it, on `tmp_path/shared`."""
    config = shared_config(tmp_path, url)
    connection = redis_queue.connect(url)
    queue = redis_queue.rq_queue(connection)
    job = redis_queue.enqueue(queue, redis_queue.task_payload(config, {"task": "x"}))
    return config, connection, queue, job


def test_forged_and_undecodable_jobs_are_refused_once_and_never_acted_on(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([DONE]).start()
    try:
        config, connection, queue, template = a_queued_task(tmp_path, redis_server.url)
        workspace = config.workspace
        legit = connection.hgetall(f"rq:job:{template.id}")
        connection.delete(f"rq:job:{template.id}")  # the template itself: gone before a worker
        forged = forged_jobs(connection, legit, workspace)
        for job_id, (fields, _) in forged.items():
            plant(connection, job_id, fields)
        foreign = queue.enqueue("os.system", f"touch {tmp_path / 'os-system-ran'}")
        worker = workers(llm, "a")
        wait_for(
            lambda: len(outcomes(redis_server.url)) >= len(forged) + 1, 40, "every job refused"
        )
        after = redis_queue.submit(config, {"task": "a real task"})  # the worker keeps going
        wait_for(lambda: len(outcomes(redis_server.url)) >= len(forged) + 2, 30, "the task")
        records = {r["task_id"]: r for r in outcomes(redis_server.url)}
        for job_id, (_, reason) in forged.items():
            assert records[job_id]["status"] == "refused", job_id
            assert reason in records[job_id]["error"], (job_id, records[job_id]["error"])
        assert records[foreign.id]["status"] == "refused"  # RQ's own enqueue: its id already
        assert records[after]["status"] == STATUS_COMPLETED
        failed = set(redis_queue.status(config)["failed"])
        assert failed == {*forged, foreign.id}
        assert not (worker.root / "callback-ran").exists()
        assert not (tmp_path / "os-system-ran").exists()
        assert len(llm.requests) == 1  # only the real task reached the model
        said = (tmp_path / "worker-a.log").read_text()
        assert said.count("taking tasks from") == 1 and "Traceback" not in said  # no restart
    finally:
        llm.stop()


FLIPPER = '''"""The attacker of test_a_jobs_data_rewritten_after_the_guards_read_is_never_run, in
the worker: right after the worker reads a race job's hash, another connection rewrites its
`data` to call forged_race.run, and only then does the worker go on."""
import os

if os.environ.get("RACE_FORGED_DATA"):
    import redis

    FORGED = bytes.fromhex(os.environ["RACE_FORGED_DATA"])
    read = redis.Redis.execute_command
    attacker = redis.Redis.from_url(os.environ["RACE_REDIS_URL"])

    def execute_command(self, *args, **options):
        result = read(self, *args, **options)
        if args[0] == "HGETALL" and result and result.get(b"data") != FORGED:
            if result.get(b"description", b"").startswith(b"resume race-"):
                attacker.hset(args[1], "data", FORGED)
                attacker.sadd("race:flipped", args[1])
        return result

    redis.Redis.execute_command = execute_command
'''

FORGED_MODULE = '''"""What the rewritten job names: leaves a mark when imported and when called."""
import os
from pathlib import Path

(Path(os.environ["RACE_MARKS"]) / "imported").write_text("imported")


def run(**kwargs):
    (Path(os.environ["RACE_MARKS"]) / "called").write_text(repr(kwargs))
'''

RACE_ATTEMPTS = 300


def race_payload(workspace: Path, attempt: int) -> dict:
    """A wake-up of a session that is not waiting: a task the worker runs, and skips, at once."""
    session = f"race-{attempt:04d}"
    where = {"path": str(workspace)}
    return {"task": None, "session_id": session, "mode": "auto", "workspace": where,
            "wake": "2000-01-01T00:00:00+00:00"}  # fmt: skip


def forged_race_data(payload: dict) -> bytes:
    return zlib.compress(json.dumps(["forged_race.run", None, [], {"payload": payload}]).encode())


def test_a_jobs_data_rewritten_after_the_guards_read_is_never_run(
    tmp_path, tmp_path_factory, redis_server, workers
):
    """Finding: the guard checked one read of a job's hash and RQ ran another; a writer
    rewriting `data` in between had RQ import and call a function of its choice. Here every
    one of RACE_ATTEMPTS jobs is rewritten right after the worker's read of it."""
    site, marks = tmp_path_factory.mktemp("race-site"), tmp_path_factory.mktemp("race-marks")
    (site / "sitecustomize.py").write_text(FLIPPER)
    (site / "forged_race.py").write_text(FORGED_MODULE)
    llm = ScriptedLLM([DONE]).start()
    try:
        config = shared_config(tmp_path, redis_server.url)
        connection = redis_queue.connect(redis_server.url)
        queue = redis_queue.rq_queue(connection)
        payloads = [race_payload(config.workspace, i) for i in range(RACE_ATTEMPTS)]
        ids = [redis_queue.enqueue(queue, payload).id for payload in payloads]
        env = {"PYTHONPATH": python_path_with(site), "RACE_MARKS": str(marks)}
        env["RACE_REDIS_URL"] = redis_server.url
        env["RACE_FORGED_DATA"] = forged_race_data(payloads[0]).hex()
        workers(llm, "a", **env)
        wait_for(
            lambda: list(marks.iterdir()) or len(outcomes(redis_server.url)) >= RACE_ATTEMPTS,
            240, "every race job to be run",
        )  # fmt: skip
        flipped = connection.scard("race:flipped")
        print(f"{flipped} jobs rewritten right after the worker's read of them")
        assert list(marks.iterdir()) == [], f"the forged function ran ({flipped} attempts)"
        assert flipped == RACE_ATTEMPTS
        records = outcomes(redis_server.url)
        assert Counter(r["task_id"] for r in records) == Counter(ids)  # each once
        assert {r["status"] for r in records} == {"skipped"}  # what was checked ran
        real = redis_queue.submit(config, {"task": "a real task"})
        wait_for(lambda: len(outcomes(redis_server.url)) > RACE_ATTEMPTS, 60, "the real task")
        last = outcomes(redis_server.url)[-1]
        assert (last["task_id"], last["status"]) == (real, STATUS_COMPLETED)
        assert list(marks.iterdir()) == [] and len(llm.requests) == 1
        said = (tmp_path / "worker-a.log").read_text()
        assert said.count("taking tasks from") == 1 and "Traceback" not in said
    finally:
        llm.stop()


def test_a_job_changed_after_its_check_is_refused_when_performed(
    tmp_path, redis_server, monkeypatch
):
    """The worker's job class checks the call again when RQ performs it, before importing
    anything: a job object that no longer holds what was checked runs nothing."""
    from lmagent.scheduler.queue_guard import NotATask, checked_job

    (tmp_path / "forged_race.py").write_text(FORGED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RACE_MARKS", str(tmp_path))
    _, connection, _, submitted = a_queued_task(tmp_path, redis_server.url)
    job = checked_job(submitted.id, connection.hgetall(submitted.key), connection)
    job.data = zlib.decompress(forged_race_data(job.kwargs["payload"]))
    with pytest.raises(NotATask, match=r"not an lmagent task \(forged_race.run\); never run"):
        job.perform()
    assert "forged_race" not in sys.modules and not (tmp_path / "imported").exists()
    (record,) = outcomes(redis_server.url)
    assert (record["task_id"], record["status"]) == (submitted.id, "refused")
    assert job.retries_left == 0  # failed once, not tried again


def test_jobs_planted_where_rqs_maintenance_looks_are_refused_without_calling_anything(
    tmp_path, redis_server, workers
):
    """RQ's cleanup fetches the jobs in the started-job registry (calling the failure callback
    of one whose worker died) and in the list of taken jobs: jobs written straight there must
    not make a worker import anything, nor crash it."""
    llm = ScriptedLLM([DONE]).start()
    try:
        config, connection, queue, job = a_queued_task(tmp_path, redis_server.url)
        connection.lrem(queue.key, 1, job.id)
        legit = {k.decode(): v for k, v in connection.hgetall(f"rq:job:{job.id}").items()}
        connection.hset(
            f"rq:job:{job.id}", mapping={"status": "started", "failure_callback_name": FORGED}
        )
        garbled, pickled = redis_queue.new_task_id(), redis_queue.new_task_id()
        connection.hset(f"rq:job:{garbled}", mapping={**legit, "retries_left": "many"})
        connection.hset(f"rq:job:{pickled}", mapping={**legit, "data": pickle.dumps(("x",))})
        started = f"rq:wip:{redis_queue.QUEUE_NAME}"
        connection.zadd(started, {f"{job.id}:forged": 1, f"{garbled}:forged": 1})
        connection.rpush(f"{queue.key}:intermediate", pickled)
        due = redis_queue.new_task_id()
        connection.hset(f"rq:job:{due}", mapping={**legit, "created_at": "yesterday"})
        connection.zadd(f"rq:scheduled:{redis_queue.QUEUE_NAME}", {due: 1})
        worker = workers(llm, "a")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 4, 40, "the four refused")
        later = redis_queue.submit(config, {"task": "after them", "not_before": soon(2)})
        wait_for(lambda: len(outcomes(redis_server.url)) >= 5, 40, "a scheduled task to run")
        records = {r["task_id"]: r for r in outcomes(redis_server.url)}
        assert {records[i]["status"] for i in (job.id, garbled, pickled, due)} == {"refused"}
        assert records[later]["status"] == STATUS_COMPLETED  # RQ's scheduler still works
        assert "failure_callback_name" in records[job.id]["error"]
        assert "its fields cannot be decoded (ValueError" in records[garbled]["error"]
        assert not (worker.root / "callback-ran").exists()
        said = (tmp_path / "worker-a.log").read_text()
        assert said.count("taking tasks from") == 1 and "Traceback" not in said  # no restart
    finally:
        llm.stop()


def test_workspaces_outside_the_roots_are_refused_with_the_reason(
    tmp_path, tmp_path_factory, redis_server, workers
):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("host file\n")
    (tmp_path / "link").symlink_to(outside)
    (tmp_path / "proj" / ".lmagent" / "sessions").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    llm = ScriptedLLM([DONE]).start()
    try:
        config = queue_config(tmp_path / "shared", redis_server.url)
        attempts = {
            str(outside): "is outside this worker's QUEUE_WORKSPACE_ROOTS",
            f"{tmp_path}/shared/../../{outside.name}": "is outside this worker's",
            str(tmp_path / "link"): "is outside this worker's",
            "shared": "is not an absolute path",
            str(tmp_path / "proj" / ".lmagent" / "sessions"): "inside an agent's own data",
        }
        ids = {
            redis_queue.submit(config, {"task": "read secret.txt", "workspace": path}): reason
            for path, reason in attempts.items()
        }
        workers(llm, "a")
        wait_for(lambda: len(outcomes(redis_server.url)) >= len(ids), 90, "every refusal")
        good = redis_queue.submit(config, {"task": "fine"})
        wait_for(lambda: len(outcomes(redis_server.url)) > len(ids), 30, "the good task")
        records = {r["task_id"]: r for r in outcomes(redis_server.url)}
        for task_id, reason in ids.items():
            assert records[task_id]["status"] == "failed"
            assert reason in records[task_id]["error"], records[task_id]["error"]
        assert records[good]["status"] == STATUS_COMPLETED
        assert len(llm.requests) == 1
        assert not (outside / ".lmagent").exists()  # no session was made there
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
        assert_no_two_runs_at_once(redis_server.url)
    finally:
        llm.stop()


def assert_no_two_runs_at_once(url: str) -> None:
    spans = sorted(
        (start := datetime.fromisoformat(r["started"]).timestamp(), start + r["duration_s"])
        for r in outcomes(url)
    )
    assert all(end <= next_start for (_, end), (next_start, _) in pairwise(spans))


def test_tasks_in_nested_workspaces_never_run_at_once(tmp_path, redis_server, workers):
    """A run's sandbox could swap a folder of its workspace for a link out of the roots, so a
    workspace inside it (or around it) must not be mounted meanwhile."""
    llm = ScriptedLLM([text("done\nTASK_COMPLETE", delay=1.5)] * 3).start()
    try:
        deeper = tmp_path / "shared" / "inner" / "deeper"
        deeper.mkdir(parents=True)
        for workspace in (tmp_path / "shared", deeper, deeper.parent):
            redis_queue.submit(queue_config(workspace, redis_server.url), {"task": "work"})
        workers(llm, "a")
        workers(llm, "b")
        wait_for(lambda: len(outcomes(redis_server.url)) >= 3, 60, "the three tasks")
        assert_no_two_runs_at_once(redis_server.url)
        said = (tmp_path / "worker-a.log").read_text() + (tmp_path / "worker-b.log").read_text()
        assert "workspace in use by another run (in " in said
    finally:
        llm.stop()


def test_a_task_waiting_for_a_busy_workspace_runs_after_it_without_losing_a_try(
    tmp_path, redis_server, workers
):
    release = threading.Event()

    def held(body: dict) -> dict:  # the first run's reply, until worker b has met the task
        release.wait(60)
        return text("done\nTASK_COMPLETE")

    llm = ScriptedLLM([held, DONE]).start()
    try:
        workspace = tmp_path / "shared"
        workspace.mkdir()
        config = queue_config(workspace, redis_server.url)
        redis_queue.submit(config, {"task": "long"})
        workers(llm, "a")
        llm.wait_for_requests(1, timeout=30)
        waiting = redis_queue.submit(config, {"task": "after it"})
        workers(llm, "b")
        log_b = tmp_path / "worker-b.log"
        left = f"worker: left {waiting} for another worker: workspace in use"
        wait_for(lambda: log_b.exists() and left in log_b.read_text(), 30, "b to meet the task")
        release.set()
        wait_for(lambda: len(outcomes(redis_server.url)) >= 2, 30, "both tasks")
        first, second = outcomes(redis_server.url)
        assert (first["status"], second["status"]) == (STATUS_COMPLETED, STATUS_COMPLETED)
        finished = datetime.fromisoformat(first["started"]).timestamp() + first["duration_s"]
        assert datetime.fromisoformat(second["started"]).timestamp() >= finished
        assert "Traceback" not in log_b.read_text()
        job = redis_queue.rq_queue(redis_queue.connect(redis_server.url)).fetch_job(waiting)
        assert job.retries_left == redis_queue.MAX_TRIES - 1  # waiting is not failing
    finally:
        release.set()
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


def test_status_shows_what_a_queue_writer_chose_escaped(tmp_path, redis_server):
    _, connection, queue, job = a_queued_task(tmp_path, redis_server.url)
    connection.lrem(queue.key, 1, job.id)
    connection.hset(f"rq:job:{job.id}", "description", "\x1b]0;owned\x07\x1b[2J\nforged line")
    connection.zadd(f"rq:wip:{redis_queue.QUEUE_NAME}", {f"{job.id}:x": 2**40})
    shown = cli("--scheduler-status", "--queue", redis_server.url, WORKSPACE=str(tmp_path))
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    (line,) = [line for line in shown.stdout.splitlines() if "running" in line and job.id in line]
    assert line.endswith("\\x1b]0;owned\\x07\\x1b[2J\\nforged line")


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
        assert 0 <= late < 6, f"started {late:+.1f} s from its not-before time"  # not 1 h
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
        assert 5 <= slept < 15, f"woken {slept:.1f} s after the WAIT"  # not an hour
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
        # SCHEDULER.md's "about 1.5 x SCHEDULER_LEASE", with room for a busy machine
        assert taken <= 1.5 * lease + 6, f"taken {taken:.1f} s after the kill"
        assert len(llm.requests) == 2
    finally:
        llm.stop()


# --------------------------------------------------------------------------- the model server


def test_tasks_stay_queued_while_the_model_server_is_down_and_run_when_it_is_back(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([DONE]).start()
    llm.stop()  # the server is down, its URL known
    try:
        config = shared_config(tmp_path, redis_server.url)
        workspace = config.workspace
        workers(llm, "a")
        log = tmp_path / "worker-a.log"
        wait_for(lambda: "no model server answers at" in log.read_text(), 30, "the worker to say")
        task_id = redis_queue.submit(config, {"task": "needs the model"})
        time.sleep(3)  # a worker that took it would have failed it by now
        info = redis_queue.status(config)
        assert info["queued"] == [task_id] and outcomes(redis_server.url) == []
        assert [n["url"] for n in info["waiting_for_model"]] == [llm.url]
        shown = cli("--scheduler-status", "--queue", redis_server.url, WORKSPACE=str(workspace))
        assert f"no model server answers at {llm.url}" in shown.stdout
        assert log.read_text().count("no model server answers at") == 1  # said once
        llm.start()
        wait_for(lambda: outcomes(redis_server.url), 60, "the task to run")
        (record,) = outcomes(redis_server.url)
        assert (record["task_id"], record["status"]) == (task_id, STATUS_COMPLETED)
        assert "answers again; taking tasks" in log.read_text()
        assert redis_queue.status(config)["waiting_for_model"] == []
    finally:
        llm.stop()


def test_a_task_whose_model_server_goes_away_mid_run_is_put_back_not_failed(
    tmp_path, redis_server, workers
):
    llm = ScriptedLLM([text("working on it", delay=30), DONE]).start()
    try:
        config = shared_config(tmp_path, redis_server.url)
        workspace = config.workspace
        task_id = redis_queue.submit(config, {"task": "long"})
        workers(llm, "a")
        llm.wait_for_requests(1, timeout=30)
        llm.stop()  # mid-reply
        log = tmp_path / "worker-a.log"
        wait_for(lambda: f"put {task_id} back on the queue" in log.read_text(), 30, "put back")
        llm.start()
        wait_for(lambda: outcomes(redis_server.url), 60, "the task to finish")
        (record,) = outcomes(redis_server.url)
        assert (record["task_id"], record["status"]) == (task_id, STATUS_COMPLETED)
        job = redis_queue.rq_queue(redis_queue.connect(redis_server.url)).fetch_job(task_id)
        assert job.retries_left == redis_queue.MAX_TRIES - 1  # no try spent
        sessions = list((workspace / ".lmagent" / "sessions").glob("*.meta.json"))
        assert len(sessions) == 1 and record["session_id"] in sessions[0].name  # resumed
    finally:
        llm.stop()


def test_submit_says_how_many_workers_take_tasks(tmp_path, redis_server, workers):
    llm = ScriptedLLM([DONE]).start()
    try:
        args = ("--queue", redis_server.url, "--workspace", str(tmp_path))
        later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
        done = cli("--submit", "report", "--not-before", later, *args)
        assert "no worker takes tasks from" in done.stderr
        workers(llm, "a")
        workers(llm, "b")
        wait_for_workers(queue_config(tmp_path, redis_server.url), 2)
        done = cli("--submit", "report", "--not-before", later, *args)
        assert f"2 workers take tasks from {redis_server.url}" in done.stderr
        assert done.stdout.strip().startswith("task-")  # what scripts keep, alone on stdout
    finally:
        llm.stop()


def test_a_worker_with_embedded_starts_the_clis_embedded_server_and_stops_it(
    tmp_path, redis_server
):
    from tests.realmodel_fixtures import need_model, need_module

    need_module("xllamacpp")
    need_model()
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), "--scheduler", "--embedded",
             "--queue", redis_server.url, "--workspace", str(tmp_path)],
            env=dict(os.environ, ENABLE_MCP="false", EMBEDDED_KEEP_WARM="0"), cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            said = wait_for(
                lambda: "taking tasks from" in (text := log.read_text()) and text, 120, "start"
            )
            url = said.split("embedded model ready at ")[1].split()[0]
            time.sleep(2)  # it would say so now if it found no model server
            assert "no model server answers" not in log.read_text()
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the embedded server went with the worker


def test_a_queue_over_tls_verifies_the_servers_certificate(tmp_path):
    """README: beyond one machine, rediss:// (TLS) with the server's CA certificate."""
    need(shutil.which("openssl") is not None, "openssl is not installed")
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"),
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(tmp_path / "cert.pem"), "--tls-key-file", str(tmp_path / "key.pem"),
         "--tls-auth-clients", "no", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        trusted = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tmp_path / 'cert.pem'}"
        done = wait_for(
            lambda: (d := cli("--submit", "hi", "--queue", trusted, WORKSPACE=str(tmp_path)))
            .returncode == 0 and d, 20, "the TLS queue to take a task",
        )  # fmt: skip
        assert done.stdout.startswith("task-")
        untrusted = cli("--scheduler-status", "--queue", f"rediss://127.0.0.1:{port}/0")
        assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
    finally:
        server.kill()
        server.wait()
