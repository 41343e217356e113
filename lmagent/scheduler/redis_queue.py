"""The scheduler on a distributed queue (SCHEDULER_QUEUE=redis://host:port/db): tasks are RQ
jobs on Redis, so a task submitted on any machine runs once on whichever worker is free.

RQ does the queue: jobs, scheduled jobs (`not_before`, `WAIT` wake-ups), worker heartbeats,
retries, the failed-job registry, and the return of a dead worker's job. This module is what
submitters and status readers need (no worker code): the connection, a task's payload, `submit`
and `status`. The worker is lmagent/scheduler/redis_worker.py.

A task names its workspace: `{"path": DIR}` (a directory every worker reaches) or
`{"git": URL, "branch": NAME}` (each worker clones it into its own workspace root and pushes a
result branch named after the task). Jobs are stored as JSON, never pickled: a worker runs
only `run_task` on data, whoever wrote to Redis.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit, urlunsplit

from lmagent.core.config import PERMISSION_MODES, Config
from lmagent.scheduler.inbox import task_fields
from lmagent.sessions.waiting import parse_time

QUEUE_NAME = "lmagent"
JOB_FUNCTION = "lmagent.scheduler.redis_worker.run_task"
MAX_TRIES = 5  # a task whose worker died (or that could not start) this often is failed
HISTORY_KEY = "lmagent:history"
UNREACHABLE_KEY = "lmagent:model-unreachable:"  # + worker name: the server it waits for
HISTORY_KEEP = 1000
RESULT_TTL = 7 * 24 * 3600
FAILURE_TTL = 30 * 24 * 3600
INSTALL_HINT = "pip install -r requirements-queue.txt"


def shown(url: str) -> str:
    """A queue URL as it may be printed: its password replaced by ***."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    user = f"{parts.username}:" if parts.username else ":"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}***@{host}"))


class QueueError(RuntimeError):
    """The queue cannot be used (library missing, Redis unreachable); one line for the user."""


def connect(url: str):
    """A Redis connection that answered a ping; QueueError naming the URL otherwise."""
    try:
        import redis
    except ImportError:
        raise QueueError(f"SCHEDULER_QUEUE needs redis and rq: {INSTALL_HINT}") from None
    connection = redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=10)
    try:
        connection.ping()
    except redis.exceptions.RedisError as exc:
        raise QueueError(f"cannot reach the queue at {shown(url)}: {exc}") from None
    return connection


def rq_queue(connection):
    try:
        from rq import Queue
        from rq.serializers import JSONSerializer
    except ImportError:
        raise QueueError(f"SCHEDULER_QUEUE needs rq: {INSTALL_HINT}") from None
    return Queue(QUEUE_NAME, connection=connection, serializer=JSONSerializer)


def queue_time(connection) -> datetime:
    """Now, by the Redis server's clock: the one clock every machine shares."""
    seconds, micros = connection.time()
    return datetime.fromtimestamp(seconds + micros / 1e6, timezone.utc)


# --------------------------------------------------------------------------- tasks


def task_payload(config: Config, data: dict) -> dict:
    """The job's data from a submission (`task`, `session_id`, `mode`, and `git`/`branch` or
    the submitter's workspace path); ValueError says what is wrong."""
    task, session_id, mode = task_fields(data)
    if data.get("git"):
        workspace = {"git": str(data["git"]), "branch": str(data.get("branch") or "main")}
    else:
        workspace = {"path": str(data.get("workspace") or config.workspace)}
    return {"task": task, "session_id": session_id, "mode": mode, "workspace": workspace}


PAYLOAD_KEYS = {"task", "session_id", "mode", "workspace", "wake"}


def payload_problem(payload) -> str | None:
    """Why a job's payload is not one `task_payload` (or a wake-up) makes, or None."""
    if not isinstance(payload, dict) or not set(payload) <= PAYLOAD_KEYS:
        return "its payload is not a task's: " + repr(payload)[:200]
    try:
        task_fields(payload)
    except ValueError as exc:
        return f"its payload is not a task's: {exc}"
    if payload.get("mode") not in PERMISSION_MODES:
        return f"its payload is not a task's: 'mode' must be one of {', '.join(PERMISSION_MODES)}"
    if not isinstance(payload.get("wake", ""), str):
        return "its payload is not a task's: 'wake' must be a string"
    where = payload.get("workspace")
    if not (
        isinstance(where, dict)
        and set(where) in ({"path"}, {"git", "branch"})
        and all(isinstance(value, str) for value in where.values())
    ):
        return f"the task names no workspace path or git remote: {where!r}"[:300]
    return None


def new_task_id() -> str:
    return f"task-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def whole_second_after(moment: datetime) -> datetime:
    """`moment`, rounded up to a whole second."""
    if moment.microsecond:
        return moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment


def enqueue(queue, payload: dict, not_before: datetime | None = None, task_id: str | None = None):
    """Put a task on the queue (now, or scheduled for `not_before`); returns the RQ job. Once
    this returns, Redis has the task (see docs/SCHEDULER.md on persistence)."""
    from rq import Retry

    options = {
        "job_id": task_id or new_task_id(),
        "job_timeout": -1,  # agent tasks may run for hours; the lease guards a dead worker
        "result_ttl": RESULT_TTL,
        "failure_ttl": FAILURE_TTL,
        "retry": Retry(max=MAX_TRIES - 1),
        "description": summary(payload),
        "kwargs": {"payload": payload},
    }
    if not_before is not None:  # RQ keeps whole seconds: round up, never start early
        return queue.enqueue_at(whole_second_after(not_before), JOB_FUNCTION, **options)
    return queue.enqueue(JOB_FUNCTION, **options)


def submit(config: Config, data: dict) -> str:
    """Queue a submission on SCHEDULER_QUEUE; returns the task id."""
    payload = task_payload(config, data)
    not_before = parse_time(data["not_before"]) if data.get("not_before") else None
    queue = rq_queue(connect(config.scheduler_queue))
    return enqueue(queue, payload, not_before).id


def who_takes_it(config: Config) -> str:
    """How many workers take tasks from the queue (and how many wait for a model server)."""
    from rq import Worker

    connection = connect(config.scheduler_queue)
    count = len(Worker.all(queue=rq_queue(connection)))
    url = shown(config.scheduler_queue)
    if not count:
        return (
            f"no worker takes tasks from {url}: start one with `agent_main.py --queue {url} "
            "--scheduler`, or the task waits"
        )
    said = f"{count} workers take" if count > 1 else "1 worker takes"
    said += f" tasks from {url}"
    waiting = len(waiting_for_model(connection))
    return said + (f" ({waiting} waiting for their model server)" if waiting else "")


def summary(payload: dict) -> str:
    text = payload.get("task") or f"resume {payload.get('session_id')}"
    return " ".join(text.split())[:80]


def record_outcome(connection, record: dict) -> None:
    """One line of the shared run history (newest first, the last HISTORY_KEEP kept)."""
    line = json.dumps({"time": queue_time(connection).isoformat(), **record}, ensure_ascii=False)
    with connection.pipeline() as pipeline:
        pipeline.lpush(HISTORY_KEY, line)
        pipeline.ltrim(HISTORY_KEY, 0, HISTORY_KEEP - 1)
        pipeline.execute()


def note_unreachable(connection, worker: str, url: str, since, ttl: int = 0) -> None:
    """Note (or with `since` None, clear) that `worker` waits for the model server at `url`;
    the note expires with the worker."""
    if since is None:
        connection.delete(UNREACHABLE_KEY + worker)
        return
    note = json.dumps({"worker": worker, "url": url, "since": since.isoformat()})
    connection.set(UNREACHABLE_KEY + worker, note, ex=ttl)


def waiting_for_model(connection) -> list[dict]:
    notes = [connection.get(key) for key in connection.scan_iter(UNREACHABLE_KEY + "*")]
    return sorted((json.loads(note) for note in notes if note), key=lambda n: n["worker"])


def read_history(connection, recent: int = HISTORY_KEEP) -> list[dict]:
    """The shared run history, oldest first."""
    lines = connection.lrange(HISTORY_KEY, 0, recent - 1)
    return [json.loads(line) for line in reversed(lines)]


# --------------------------------------------------------------------------- status


def status(config: Config, recent: int = 10) -> dict:
    """What `--scheduler-status` shows for the queue: queued, scheduled, running (on which
    worker), failed, the workers, and the latest outcomes of all workers."""
    from rq import Worker
    from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

    connection = connect(config.scheduler_queue)
    queue = rq_queue(connection)
    running = []
    # no cleanup: RQ's would compare with this machine's clock (workers clean by Redis's)
    for job_id in StartedJobRegistry(queue=queue).get_job_ids(cleanup=False):
        job = queue.fetch_job(job_id)
        if job is not None:
            running.append({"task_id": job_id, "worker": job.worker_name, "task": job.description})
    return {
        "queue": shown(config.scheduler_queue),
        "workers": sorted(worker.name for worker in Worker.all(queue=queue)),
        "queued": queue.get_job_ids(),
        "scheduled": scheduled_tasks(ScheduledJobRegistry(queue=queue)),
        "running": running,
        "failed": FailedJobRegistry(queue=queue).get_job_ids(),
        "waiting_for_model": waiting_for_model(connection),
        "recent": read_history(connection, recent),
    }


def scheduled_tasks(registry) -> list[dict]:
    """The tasks waiting for their time, ids and times in one read: a worker moving a task
    on between two reads would make the second fail."""
    pairs = registry.connection.zrange(registry.key, 0, -1, withscores=True)
    return [
        {
            "task_id": registry.parse_job_id(job_id),
            "not_before": datetime.fromtimestamp(score, timezone.utc).isoformat(),
        }
        for job_id, score in pairs
    ]


def status_lines(config: Config, recent: int = 10) -> list[str]:
    """`status` for a person."""
    info = status(config, recent)
    lines = [
        f"queue {info['queue']}: {len(info['workers'])} workers",
        f"queued: {len(info['queued'])}   scheduled: {len(info['scheduled'])}   "
        f"running: {len(info['running'])}   failed: {len(info['failed'])}",
    ]
    lines += [
        f"  {n['worker']}: no model server answers at {n['url']} (since {n['since'][:19]}); "
        "it takes no task until one does"
        for n in info["waiting_for_model"]
    ]
    lines += [f"  running {r['task_id']} on {r['worker']}: {r['task']}" for r in info["running"]]
    lines += [f"  {s['task_id']} not before {s['not_before']}" for s in info["scheduled"]]
    if info["recent"]:
        lines.append("recent:")
    for record in info["recent"]:
        error = f" — {record['error'][:200]}" if record.get("error") else ""
        lines.append(
            f"  {record['time'][:19]}  {record['status']:<14} {record['task_id']} on "
            f"{record.get('worker', '?')}  session {record.get('session_id')}{error}"
        )
    return lines
