"""RQ on the queue's clock: the parts of RQ that compare times read Redis's `TIME`, so workers
whose clocks differ from each other (and from Redis) agree on when a task is due.

RQ compares with the local clock of whichever process does the work: the scheduler (due
`--not-before` tasks and `WAIT` wake-ups), the started-job registry (a task's heartbeat expiry,
written by its worker and checked by whichever worker cleans up) and the intermediate queue (a
task taken but never started). Each has a subclass here that takes the time from Redis
instead; AgentWorker builds them.
"""

from __future__ import annotations

from datetime import timedelta

from rq.intermediate_queue import IntermediateQueue
from rq.job import Job
from rq.registry import (
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.scheduler import RQScheduler
from rq.worker_registration import clean_worker_registry

from lmagent.scheduler.redis_queue import queue_time


def queue_timestamp(connection) -> int:
    """Now by Redis's clock, in the whole seconds RQ's registries keep."""
    return int(queue_time(connection).timestamp())


class QueueClockScheduledJobRegistry(ScheduledJobRegistry):
    def get_jobs_to_schedule(self, timestamp: int | None = None, chunk_size: int = 1000):
        """The jobs due by Redis's clock (RQ's scheduler passes its own clock's time: ignored)."""
        return super().get_jobs_to_schedule(queue_timestamp(self.connection), chunk_size)


class QueueClockScheduler(RQScheduler):
    """RQ's scheduler, moving due jobs by Redis's clock."""

    def prepare_registries(self, queue_names=None):
        self._scheduled_job_registries = [
            QueueClockScheduledJobRegistry(
                name, connection=self.connection, serializer=self.serializer
            )
            for name in queue_names or self._acquired_locks
        ]


class QueueClockStartedJobRegistry(StartedJobRegistry):
    """Running jobs, each expiring `ttl` seconds after its last heartbeat by Redis's clock."""

    def add_execution(self, execution, pipeline, ttl: int = 0, xx: bool = False) -> int:
        expires = queue_timestamp(self.connection) + ttl
        return pipeline.zadd(self.key, {execution.composite_key: expires}, xx=xx)

    def cleanup(self, timestamp: float | None = None, exception_handlers: list | None = None):
        """Return the jobs whose heartbeat expired by Redis's clock to the queue."""
        now = timestamp if timestamp is not None else queue_timestamp(self.connection)
        super().cleanup(now, exception_handlers)


class QueueClockJob(Job):
    """A job whose started-job registry keeps Redis's clock, and which never runs a callback or
    sends a webhook, whatever its fields in Redis name (queue_guard.py refuses such jobs; this
    holds on RQ's other paths too, such as the cleanup of an abandoned job)."""

    success_callback = failure_callback = stopped_callback = property(lambda self: None)

    def send_webhooks(self, *args, **kwargs) -> None:
        return None

    @property
    def started_job_registry(self):
        return QueueClockStartedJobRegistry(
            self.origin,
            connection=self.connection,
            job_class=type(self),
            serializer=self.serializer,
        )


class QueueClockIntermediateQueue(IntermediateQueue):
    """Jobs taken from the queue but not started: one left there a minute by Redis's clock
    (its worker died in between) is failed, so RQ retries it."""

    def set_first_seen(self, job_id: str) -> bool:
        seen = queue_time(self.connection).timestamp()
        key = self.get_first_seen_key(job_id)
        return bool(self.connection.set(key, seen, nx=True, ex=24 * 3600))

    def should_be_cleaned_up(self, job_id: str) -> bool:
        first_seen = self.get_first_seen(job_id)
        stuck = first_seen and queue_time(self.connection) - first_seen > timedelta(minutes=1)
        return bool(stuck)


def clean_registries(worker, queue) -> None:
    """RQ's maintenance of `queue` (what Worker.clean_registries does, less the parts lmagent
    does not use: deferred jobs and rate limits), by Redis's clock."""
    now = queue_timestamp(queue.connection)
    FinishedJobRegistry(queue=queue).cleanup(now)
    started = QueueClockStartedJobRegistry(queue=queue, job_class=QueueClockJob)
    started.cleanup(now, worker._exc_handlers)
    FailedJobRegistry(queue=queue).cleanup(now)
    clean_worker_registry(queue)
    QueueClockIntermediateQueue(queue.key, queue.connection).cleanup(worker, queue)
