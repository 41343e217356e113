"""What a queue worker accepts from Redis: only jobs shaped as the project's own `--submit`
writes them. Whoever can write to Redis can put anything there: another function, callbacks RQ
would import and call, dependencies, webhooks, pickled data, a job id that is a path. A taken
job is checked on its raw fields before RQ decodes it (`CheckedQueue`); one that does not pass
is failed at once with its reason, in RQ's failed-job registry and the run history, and RQ never
acts on it. Jobs written straight into the started-job registry or the list of taken jobs are
checked the same way before RQ's maintenance fetches them (`refuse_planted`). QueueClockJob
(queue_clock.py) also never runs a callback or sends a webhook, whichever way a job reaches RQ's
own code.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from datetime import timedelta

from rq import Queue
from rq.registry import FailedJobRegistry
from rq.serializers import JSONSerializer

from lmagent.scheduler.queue_clock import (
    QueueClockIntermediateQueue,
    QueueClockJob,
    QueueClockScheduler,
    QueueClockStartedJobRegistry,
)
from lmagent.scheduler.redis_queue import (
    FAILURE_TTL,
    JOB_FUNCTION,
    QUEUE_NAME,
    payload_problem,
    queue_time,
    record_outcome,
)

TASK_ID = re.compile(r"task-\d{8}-\d{6}-[0-9a-f]{8}")
# the fields RQ and the worker write on a task --submit made; every other one is refused
FIELDS = {
    "data", "origin", "description", "status", "timeout", "result_ttl", "failure_ttl",
    "created_at", "enqueued_at", "started_at", "ended_at", "last_heartbeat", "worker_name",
    "retries_left", "retry_intervals", "number_of_retries", "meta", "result", "exc_info",
    "success_callback_name", "failure_callback_name", "stopped_callback_name", "group_id",
}  # fmt: skip
EMPTY = ("success_callback_name", "failure_callback_name", "stopped_callback_name", "group_id")


def job_problem(job_id: str, fields: dict[bytes, bytes], connection) -> str | None:
    """Why a job's raw Redis fields are not a task `--submit` wrote, or None."""
    if not TASK_ID.fullmatch(job_id):
        return f"job id {job_id[:80]!r} is not an lmagent task id"
    named = {key.decode("utf-8", "replace"): value for key, value in fields.items()}
    extra = sorted(set(named) - FIELDS) + [k for k in EMPTY if named.get(k)]
    if extra:
        return "carries what --submit never writes: " + ", ".join(extra)
    if named.get("origin") != QUEUE_NAME.encode():
        return f"not on the {QUEUE_NAME} queue"
    problem = call_problem(named)
    if problem:
        return problem
    try:  # what RQ will read of it (no field is left that could name code)
        QueueClockJob(job_id, connection, JSONSerializer).restore(fields)
    except Exception as exc:
        return f"its fields cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def call_problem(named: dict[str, bytes]) -> str | None:
    """Why a job's data (the call) and meta are not a task's, or None."""
    try:
        function, instance, args, kwargs = json_field(named.get("data", b""), zipped=True)
        meta = json_field(named["meta"]) if "meta" in named else {}
    except (ValueError, TypeError):
        return "its data cannot be read as JSON (pickled or damaged)"
    if function != JOB_FUNCTION:
        return f"not an lmagent task ({str(function)[:80]}); never run"
    if instance is not None or args != [] or not isinstance(kwargs, dict):
        return "its call carries arguments --submit never writes"
    if set(kwargs) != {"payload"}:
        return "its call carries arguments --submit never writes"
    if not isinstance(meta, dict):
        return "its meta is not a JSON object"
    return payload_problem(kwargs["payload"])


def json_field(raw: bytes, zipped: bool = False):
    if zipped:
        try:
            raw = zlib.decompress(raw)
        except zlib.error:
            pass  # RQ stores small data uncompressed
    return json.loads(raw.decode("utf-8"))


class CheckedQueue(Queue):
    """RQ's queue, refusing a taken job that fails `job_problem` before RQ reads it."""

    say: Callable[[str], None] = staticmethod(lambda line: None)
    worker = ""

    @classmethod
    def _fetch_dequeued_job(cls, connection, queue_key, job_id, *args, **kwargs):
        if cls.refused(connection, queue_key, job_id):
            return None  # RQ takes the next one
        return super()._fetch_dequeued_job(connection, queue_key, job_id, *args, **kwargs)

    @classmethod
    def refused(cls, connection, queue_key: str, job_id: str) -> bool:
        """Fail the job when it is not a task (`job_problem`); whether it was. A job whose
        fields are gone is left to RQ (it skips it)."""
        fields = connection.hgetall(Queue.job_class.key_for(job_id))
        problem = job_problem(job_id, fields, connection) if fields else None
        if problem is None:
            return False
        reject(connection, queue_key, job_id, problem, cls.worker)
        cls.say(f"worker: refused {job_id[:80]!r}: {problem}")
        return True

    @classmethod
    def refuse_planted(cls, queue) -> None:
        """Before RQ's maintenance: the jobs in the started-job registry and the list of taken
        jobs that are not tasks, refused (RQ's cleanup would fetch them, and call a failure
        callback of an abandoned one)."""
        connection = queue.connection
        started = QueueClockStartedJobRegistry(queue.name, connection=connection)
        for entry in connection.zrange(started.key, 0, -1):
            job_id = started.parse_job_id(entry.decode("utf-8", "replace"))
            if cls.refused(connection, queue.key, job_id):
                connection.zrem(started.key, entry)
        for job_id in QueueClockIntermediateQueue(queue.key, connection).get_job_ids():
            cls.refused(connection, queue.key, job_id)


def reject(connection, queue_key: str, job_id: str, problem: str, worker: str) -> None:
    """Fail a job that is not a task: off the list of taken jobs, into the failed-job registry,
    its reason in the run history."""
    taken = QueueClockIntermediateQueue(queue_key, connection)
    failed = FailedJobRegistry(QUEUE_NAME, connection=connection)
    until = (queue_time(connection) + timedelta(seconds=FAILURE_TTL)).timestamp()
    with connection.pipeline() as pipeline:
        pipeline.lrem(taken.key, 1, job_id)
        pipeline.delete(taken.get_first_seen_key(job_id))
        pipeline.zadd(failed.key, {job_id: until})
        pipeline.hset(Queue.job_class.key_for(job_id), "status", "failed")
        pipeline.execute()
    record = {"task_id": job_id[:200], "status": "refused", "worker": worker, "error": problem}
    record_outcome(connection, record)


class CheckedScheduler(QueueClockScheduler):
    """RQ's scheduler on Redis's clock, refusing (as `checked` does) a due job that is not a
    task before RQ fetches it: a garbled one would end the scheduler's thread."""

    checked: type[CheckedQueue] = CheckedQueue  # the worker's, naming it

    def enqueue_scheduled_jobs(self) -> None:
        if not self._scheduled_job_registries and self._acquired_locks:
            self.prepare_registries()
        for registry in self._scheduled_job_registries:
            queue_key = Queue.redis_queue_namespace_prefix + registry.name
            for job_id in registry.get_jobs_to_schedule():
                if self.checked.refused(self.connection, queue_key, job_id):
                    registry.remove(job_id)
        super().enqueue_scheduled_jobs()


def checked_queue(worker: str, say: Callable[[str], None]) -> type[CheckedQueue]:
    """The queue class of one worker, naming it in what it records and says."""
    return type("CheckedQueue", (CheckedQueue,), {"worker": worker, "say": staticmethod(say)})
