"""What a queue worker accepts from Redis: only jobs shaped as the project's own `--submit`
writes them. Whoever can write to Redis can put anything there: another function, callbacks RQ
would import and call, dependencies, webhooks, pickled data, a job id that is a path. A taken
job's hash is read once (`CheckedQueue`), its raw fields checked, and the job RQ performs is
decoded from that very read, so a writer rewriting the hash after the check changes nothing
the worker runs; the decoded call is checked before anything is imported. One that does not
pass is failed at once with its reason, in RQ's failed-job registry and the run history, and
RQ never acts on it. At perform time `CheckedJob` checks the call again and runs nothing but
the task function on a task's payload. Jobs written straight into the started-job registry or
the list of taken jobs are checked the same way before RQ's maintenance fetches them
(`refuse_planted`). QueueClockJob (queue_clock.py) also never runs a callback or sends a
webhook, whichever way a job reaches RQ's own code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta

from rq import Queue
from rq.exceptions import DeserializationError
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
CALLBACKS = ("success_callback_name", "failure_callback_name", "stopped_callback_name")


class NotATask(Exception):
    """A job that is not a task --submit wrote; the message says why."""


class CheckedJob(QueueClockJob):
    """The job a worker performs: at perform time, as when it was taken, nothing but a call
    of the task function on a task's payload (checked before the function is imported). One
    that is not is failed once, never tried again, with its reason in the run history."""

    def _execute(self):
        problem = call_problem(self)
        if problem:
            self.retries_left = 0
            record_refusal(self.connection, self.id, self.worker_name or "", problem)
            raise NotATask(problem)
        return super()._execute()


def checked_job(job_id: str, fields: dict[bytes, bytes], connection) -> CheckedJob:
    """The job RQ would make of a job's raw Redis fields, decoded from them, when it is a task
    `--submit` wrote; NotATask says why not."""
    problem = fields_problem(job_id, fields)
    if problem:
        raise NotATask(problem)
    job = CheckedJob(job_id, connection, JSONSerializer)
    try:
        job.restore(fields)
    except Exception as exc:
        raise NotATask(
            f"its fields cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    problem = call_problem(job)
    if problem:
        raise NotATask(problem)
    return job


def fields_problem(job_id: str, fields: dict[bytes, bytes]) -> str | None:
    """Why a job's id and raw fields (their names, its queue, its meta) are not a task's, or
    None."""
    if not TASK_ID.fullmatch(job_id):
        return f"job id {job_id[:80]!r} is not an lmagent task id"
    named = {key.decode("utf-8", "replace"): value for key, value in fields.items()}
    extra = sorted(set(named) - FIELDS) + ["group_id"] * bool(named.get("group_id"))
    if extra:
        return "carries what --submit never writes: " + ", ".join(extra)
    if named.get("origin") != QUEUE_NAME.encode():
        return f"not on the {QUEUE_NAME} queue"
    try:
        meta = json.loads(named.get("meta", b"{}").decode("utf-8"))
    except ValueError:
        return "its meta cannot be read as JSON (pickled or damaged)"
    if not isinstance(meta, dict):
        return "its meta is not a JSON object"
    return None


def call_problem(job: CheckedJob) -> str | None:
    """Why a decoded job is not a call of the task function on a task's payload with nothing
    to call back, or None. Reads nothing that imports (`func`, the callbacks)."""
    try:
        function, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
    except DeserializationError:
        return "its data cannot be read as JSON (pickled or damaged)"
    if function != JOB_FUNCTION:
        return f"not an lmagent task ({str(function)[:80]}); never run"
    arguments = args not in ([], ()) or not isinstance(kwargs, dict) or set(kwargs) != {"payload"}
    if instance is not None or arguments:
        return "its call carries arguments --submit never writes"
    # what the job calls back or waits for, as RQ decoded it (under these names)
    hooks = [name for name in CALLBACKS if getattr(job, f"_{name}")]
    hooks += ["dependency_ids"] * bool(job._dependency_ids)
    if hooks:
        return "carries what --submit never writes: " + ", ".join(hooks)
    return payload_problem(kwargs["payload"])


class CheckedQueue(Queue):
    """RQ's queue, handing the worker only tasks, each decoded from the read that was checked."""

    say: Callable[[str], None] = staticmethod(lambda line: None)
    worker = ""

    @classmethod
    def _fetch_dequeued_job(cls, connection, queue_key, job_id, death_penalty_class=None, **_):
        """(job, queue) for a taken job that is a task, else None (RQ takes the next one).
        Not RQ's fetch: it would read the hash again, and what it ran could differ from what
        was checked. Always a CheckedJob on JSON, whatever job class RQ passes."""
        try:
            job = cls.read_task(connection, queue_key, job_id)
        except NotATask:
            return None
        if job is None:
            return None
        queue = cls.from_queue_key(
            queue_key,
            connection=connection,
            job_class=CheckedJob,
            serializer=JSONSerializer,
            death_penalty_class=death_penalty_class,
        )
        return job, queue

    @classmethod
    def refused(cls, connection, queue_key: str, job_id: str) -> bool:
        """Whether the job was not a task (and is now failed: `read_task`)."""
        try:
            cls.read_task(connection, queue_key, job_id)
        except NotATask:
            return True
        return False

    @classmethod
    def read_task(cls, connection, queue_key: str, job_id: str) -> CheckedJob | None:
        """The job, decoded from one read of its hash, when it is a task; None when its
        fields are gone (RQ skips it). One that is not a task is failed with its reason, and
        NotATask raised."""
        fields = connection.hgetall(CheckedJob.key_for(job_id))
        if not fields:
            return None
        try:
            return checked_job(job_id, fields, connection)
        except NotATask as exc:
            reject(connection, queue_key, job_id, str(exc), cls.worker)
            cls.say(f"worker: refused {job_id[:80]!r}: {exc}")
            raise

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
        pipeline.hset(CheckedJob.key_for(job_id), "status", "failed")
        pipeline.execute()
    record_refusal(connection, job_id, worker, problem)


def record_refusal(connection, job_id: str, worker: str, problem: str) -> None:
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
