"""A worker of the distributed queue: an RQ `SimpleWorker` that runs each task in this process
with the shared loop (`run_agent`, one `Runtime` per workspace), one task at a time. Start
several per machine and on several machines.

What keeps a task to one run at a time, across machines with clocks of their own:
- two leases in Redis (locks whose expiry is Redis's own clock): the task's, and its
  workspace's when it is a shared path. A heartbeat thread renews them, and RQ's execution
  heartbeat, every third of SCHEDULER_LEASE. A worker that finds either held leaves the task.
- the task's session id is stored on the job before the session is made, and its outcome
  before RQ is told, so a task taken again (its worker died: RQ's started-job registry returns
  it once the heartbeat stops) resumes its transcript, and a finished one is not run again.
- RQ's scheduler, started-job registry and maintenance run on Redis's clock (queue_clock.py),
  and a WAIT wake-up is scheduled after the session's wait by that clock: what is due, and
  when a dead worker's task is taken again, does not depend on any worker's clock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from redis.exceptions import LockNotOwnedError
from rq import SimpleWorker
from rq.exceptions import StopRequested
from rq.job_lifecycle import record_job_failure
from rq.serializers import JSONSerializer
from rq.utils import now

from lmagent.core.config import Config
from lmagent.core.files import read_json
from lmagent.core.status import STATUS_ERROR, STATUS_INTERRUPTED, STATUS_WAITING
from lmagent.core.stop import StopToken
from lmagent.llm.probe import probe_model
from lmagent.loop.permissions import PermissionGate
from lmagent.scheduler.queue_clock import QueueClockIntermediateQueue, clean_registries
from lmagent.scheduler.queue_guard import CheckedJob, CheckedScheduler, checked_queue
from lmagent.scheduler.redis_queue import (
    MAX_TRIES,
    QUEUE_NAME,
    QueueError,
    connect,
    enqueue,
    note_unreachable,
    queue_time,
    record_outcome,
    rq_queue,
    shown,
)
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore, new_session_id
from lmagent.sessions.waiting import parse_time

LOCK_PREFIX = "lmagent:lease:"
BUSY_WAIT = 2.0  # seconds to wait for a busy workspace before leaving the task for later
GIVE_BACK_DELAY = 1  # seconds before a task left by a worker is offered again
CLOCK_TOLERANCE = 2.0  # seconds this machine's clock may differ from Redis's unremarked
KILLED = "the worker running it stopped before it finished"
MODEL_BACKOFF = 30  # seconds at most between two asks of a model server that does not answer
ACTIVE: AgentWorker | None = None  # the worker of this process: RQ calls run_task in it


class Refused(Exception):
    """This worker cannot run the task now; the message says why (it is left for another)."""

    def __init__(self, reason: str, counts: bool = True):
        super().__init__(reason)
        self.counts = counts  # False: only busy, not a fault of this worker


def run_task(payload: dict) -> dict:
    """The job function RQ calls (by name) for every task."""
    if ACTIVE is None:
        raise RuntimeError("run_task runs only inside an lmagent queue worker")
    return ACTIVE.run_current(payload)


class AgentWorker(SimpleWorker):
    def __init__(self, config: Config, connection, log: Callable[[str], None], stop: StopToken):
        lease = config.scheduler_lease
        name = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns() % 10**6}"
        super().__init__(
            [QUEUE_NAME],  # a CheckedQueue (queue_class)
            connection=connection,
            serializer=JSONSerializer,
            job_class=CheckedJob,  # checked again when performed
            queue_class=checked_queue(name, log),
            name=name,
            worker_ttl=15 + max(1, lease // 2),  # RQ waits this minus 15 s for a job at a time
            maintenance_interval=max(1, lease // 2),
            job_monitoring_interval=max(1, lease // 3),
        )
        self.config = config
        self.roots = workspace_roots(config)
        self.lease = lease
        self.say = log
        self.runtimes: dict[Path, object] = {}
        self.current: tuple | None = None  # (job, workspace, its run's stop token, ended)
        self.stop_token = stop

    # ------------------------------------------------------------------ RQ hooks

    def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
        return self.lease

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """Take a task only while the model server answers."""
        self.wait_for_model_server()
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def _start_scheduler(self, burst, logging_level, date_format, log_format) -> None:
        """RQ's scheduler, on Redis's clock, started when this worker takes its lock (this
        worker never runs in burst mode)."""
        self.scheduler = CheckedScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level,
            date_format=date_format,
            log_format=log_format,
            serializer=self.serializer,
        )
        self.scheduler.checked = self.queue_class
        self.scheduler.acquire_locks(auto_start=True)

    def clean_registries(self) -> None:
        """RQ's maintenance (one worker at a time), on Redis's clock."""
        for queue in self.queues:
            if queue.acquire_maintenance_lock():
                self.queue_class.refuse_planted(queue)
                clean_registries(self, queue)
                queue.release_maintenance_lock()
        self.last_cleaned_at = now()

    def execute_job(self, job, queue) -> None:
        """Take the task's leases and workspace, run it with heartbeats, or leave it. (RQ hands
        over only jobs queue_guard.py found to be tasks.)"""
        where = job.kwargs["payload"]["workspace"]
        try:
            workspace = self.workspace_for(job.id, where)
            leases = self.take_leases(job.id, workspace if "path" in where else None)
        except Refused as exc:
            self.give_back(job, queue, exc)
            return
        self.say(f"worker: start {job.id} in {workspace}: {job.description}")
        execution = self.prepare_execution(job)
        self.current = (job, workspace, StopToken(self.stop_token), threading.Event())
        beat = threading.Thread(target=self.keep_alive, args=(job, execution, leases), daemon=True)
        beat.start()
        try:
            self.perform_job(job, queue, execution)
        finally:
            self.current[3].set()
            beat.join()
            self.current = None
            self.release(leases)

    def request_stop(self, signum=None, frame=None):
        """SIGINT/SIGTERM: the running task is interrupted (and taken up again later)."""
        self.stop_token.stop("the worker is shutting down")
        super().request_stop(signum, frame)

    # ------------------------------------------------------------------ the model server

    def wait_for_model_server(self) -> None:
        """While the model server does not answer, take no task (they stay queued): say so
        once, note it for --scheduler-status, keep this worker alive in Redis, and ask again
        after 1, 2, 4 … MODEL_BACKOFF seconds."""
        url, since, delay = self.config.llm_url, None, 1.0
        while not probe_model(self.config).reachable:
            if since is None:
                since = queue_time(self.connection)
                self.say(f"worker: no model server answers at {url}; tasks stay queued")
            note_unreachable(self.connection, self.name, url, since, self.worker_ttl + 60)
            self.heartbeat()
            if self.should_run_maintenance_tasks:
                self.run_maintenance_tasks()
            if self.stop_token.wait(delay):
                raise StopRequested()
            delay = min(delay * 2, MODEL_BACKOFF)
        if since is not None:
            note_unreachable(self.connection, self.name, url, None)
            self.say(f"worker: the model server at {url} answers again; taking tasks")

    # ------------------------------------------------------------------ leases

    def take_leases(self, task_id: str, shared: Path | None) -> list:
        """The task's lease, and its workspace path's; Refused (busy) when either is held, or
        when a run holds a workspace inside this one or around it (its sandbox could swap this
        workspace, or a folder of it, for a link out of the roots before this run mounts it).
        Each run checks after taking its own lease, so of two nested runs at least one sees the
        other."""
        names = [f"task:{task_id}"]
        if shared is not None:
            names.append(f"workspace:{shared}")
        taken = []
        for name in names:
            lease = self.connection.lock(LOCK_PREFIX + name, timeout=self.lease, thread_local=False)
            if not lease.acquire(blocking=True, blocking_timeout=BUSY_WAIT):
                self.release(taken)
                raise Refused(f"{name.split(':', 1)[0]} in use by another run", counts=False)
            taken.append(lease)
        if shared is not None and (other := self.nested_run(shared)):
            self.release(taken)
            self.stop_token.wait(BUSY_WAIT)  # paced as a busy workspace is
            raise Refused(f"workspace in use by another run (in {other})", counts=False)
        return taken

    def nested_run(self, workspace: Path) -> str | None:
        """The workspace of a running task that holds this one or lies in it, if any."""
        prefix = LOCK_PREFIX + "workspace:"
        for key in self.connection.scan_iter(prefix + "*"):
            other = Path(key.decode("utf-8", "replace")[len(prefix) :])
            if other in workspace.parents or workspace in other.parents:
                return str(other)
        return None

    @staticmethod
    def release(leases: list) -> None:
        for lease in leases:
            with contextlib.suppress(Exception):
                lease.release()

    def keep_alive(self, job, execution, leases: list) -> None:
        """Renew RQ's heartbeat and the leases until the run ends; a lost lease stops it."""
        _, _, run_stop, done = self.current
        while not done.wait(max(0.3, self.lease / 3)):
            try:
                self.maintain_heartbeats(job, execution)
                for lease in leases:
                    lease.reacquire()
            except Exception as exc:  # Redis restarting: try again next beat
                if isinstance(exc, LockNotOwnedError):
                    run_stop.stop(f"lost the lease of task {job.id}")
                self.say(f"worker: heartbeat failed: {type(exc).__name__}: {exc}")

    def give_back(self, job, queue, refused: Refused) -> None:
        """Return a task this worker cannot run to the queue (after GIVE_BACK_DELAY), noting
        why; failed once MAX_TRIES workers could not reach its workspace."""
        reasons = job.meta.setdefault("refused", [])
        if refused.counts:
            reasons.append(f"{self.name}: {refused}")
        if len(reasons) >= MAX_TRIES:
            self.fail(job, queue, "no worker could run it: " + "; ".join(reasons))
            return
        self.say(f"worker: left {job.id} for another worker: {refused}")
        job.save_meta()
        with self.connection.pipeline() as pipeline:
            pipeline.multi()  # first: RQ's enqueue_job opens it otherwise, after lrem (an error)
            self.leave_taken(job, queue, pipeline)
            if refused.counts:  # offered again a little later, by the queue's clock
                when = queue_time(self.connection) + timedelta(seconds=GIVE_BACK_DELAY)
                queue.schedule_job(job, when, pipeline=pipeline)
            else:  # only busy: BUSY_WAIT has paced it; to the back of the queue at once
                queue.enqueue_job(job, pipeline=pipeline)
            pipeline.execute()

    def fail(self, job, queue, error: str) -> None:
        """Move a task that cannot run to RQ's failed-job registry, with the reason (also in
        the run history)."""
        self.say(f"worker: failed {job.id}: {error}")
        job.save_meta()
        with self.connection.pipeline() as pipeline:
            self.leave_taken(job, queue, pipeline)
            record_job_failure(job, error, pipeline)
            pipeline.execute()
        record_outcome(
            self.connection,
            {"task_id": job.id, "status": "failed", "worker": self.name, "error": error},
        )

    def leave_taken(self, job, queue, pipeline) -> None:
        """Take a task this worker will not start off RQ's list of taken tasks, with the time
        RQ first saw it there: kept, that stamp would make another worker's maintenance call
        the task stuck the next time it is taken (a try lost per minute of a busy workspace)."""
        taken = QueueClockIntermediateQueue(queue.key, self.connection)
        pipeline.lrem(taken.key, 1, job.id)
        pipeline.delete(taken.get_first_seen_key(job.id))

    # ------------------------------------------------------------------ workspaces

    def workspace_for(self, task_id: str, where: dict) -> Path:
        """The directory the task runs in here; Refused when this worker cannot or may not
        use it."""
        if "path" in where:
            return accepted_path(where["path"], self.roots, self.config.workspace)
        from lmagent.scheduler.git_workspace import GitError, check_out, check_remote

        try:
            check_remote(where["git"], [*self.roots, self.config.workspace])
            return check_out(self.config.workspace, task_id, where["git"], where["branch"])
        except GitError as exc:
            raise Refused(str(exc)) from None

    def runtime_for(self, config: Config):
        if config.workspace not in self.runtimes:
            from lmagent.runtime import Runtime

            self.runtimes[config.workspace] = Runtime(config).start()
        return self.runtimes[config.workspace]

    def end_sandboxes(self, workspace: Path) -> None:
        """A git task's sandboxes end with the task, however it ends: its runtime is closed,
        every sandboxed process of its work tree killed (whoever started it) and its Docker
        container removed. What cannot be done is said, not raised: the push reads the work
        tree by descriptor, so nothing left alive could make it send a file from outside."""
        from lmagent.sandbox.docker import docker_engine_expected, remove_containers
        from lmagent.sandbox.select import quiesce

        runtime = self.runtimes.pop(workspace, None)
        try:
            if runtime is not None:
                runtime.close()
            stopped = quiesce(workspace)
            if docker_engine_expected():
                remove_containers(workspace=workspace.resolve())
        except Exception as exc:  # the engine or a process table out of reach: said, not fatal
            self.say(f"worker: the sandbox of {workspace} may still be running: {exc}")
            return
        if stopped:
            self.say(f"worker: stopped what the task left running: {', '.join(stopped)[:300]}")

    def close(self) -> None:
        for runtime in self.runtimes.values():
            with contextlib.suppress(Exception):
                runtime.close()

    # ------------------------------------------------------------------ one task

    def run_current(self, payload: dict) -> dict:
        """Run the task, push a git workspace's result, record the outcome: each step kept on
        the job, so a retry (a dead worker, a failed push, a lost Redis reply) redoes only what
        is missing. A git task's sandboxes end with its run, however it ends."""
        job, workspace, _, _ = self.current
        git_task = "git" in payload["workspace"]
        try:
            outcome = self.outcome_of(job, payload, workspace)
        finally:
            if git_task:
                self.end_sandboxes(workspace)
        if git_task and "branch" not in outcome:
            from lmagent.scheduler.git_workspace import push_result

            self.keep(job, {**outcome, "branch": push_result(self.config.workspace, job.id)})
        if not job.meta.get("recorded"):
            record_outcome(self.connection, job.meta["outcome"])
            job.meta["recorded"] = True
            job.save_meta()
            self.say(
                f"worker: {outcome['status']} {job.id} in {workspace} "
                f"(session {outcome['session_id']})"
            )
        return job.meta["outcome"]

    def outcome_of(self, job, payload: dict, workspace: Path) -> dict:
        """The run's outcome, kept on the job (the one kept there by an earlier try); raises
        for RQ to try again when the model server went away or the run was interrupted."""
        outcome = job.meta.get("outcome")
        if isinstance(outcome, dict):
            return outcome
        outcome = self.timed_run(job, payload, workspace)
        if outcome.pop("unreachable"):  # back on the queue, without spending a try
            job.retries_left = (job.retries_left or 0) + 1
            self.say(f"worker: put {job.id} back on the queue: {outcome['error']}")
            raise RuntimeError(f"the model server stopped answering: {outcome['error']}")
        if outcome["status"] == STATUS_INTERRUPTED:
            raise RuntimeError(f"interrupted: {outcome['error']}")  # RQ retries it
        self.keep(job, outcome)
        return outcome

    @staticmethod
    def keep(job, outcome: dict) -> None:
        job.meta["outcome"] = outcome
        job.save_meta()

    def timed_run(self, job, payload: dict, workspace: Path) -> dict:
        config = self.config.with_changes(workspace=workspace)
        started = queue_time(self.connection)
        outcome = self.run_session(job, payload, config)
        outcome["started"] = started.isoformat()  # by the queue's clock, as every record
        outcome["duration_s"] = round((queue_time(self.connection) - started).total_seconds(), 3)
        return outcome

    def run_session(self, job, payload: dict, config: Config) -> dict:
        from lmagent.loop.run import run_agent

        store = SessionStore(config.workspace)
        outcome = {"task_id": job.id, "worker": self.name, "workspace": str(config.workspace)}
        outcome["unreachable"] = False
        if payload.get("wake") and not still_waiting(store, payload):
            return {**outcome, "status": "skipped", "session_id": payload["session_id"]}
        task, session_id, session = payload.get("task"), job.meta.get("session_id"), None
        if session_id:  # an earlier try started: resume its transcript
            task = None
            resume_after_kill(store, session_id)
        else:  # named on the job before the session is made: a retry resumes, not redoes
            session_id = payload.get("session_id") or new_session_id()
            job.meta["session_id"] = session_id
            job.save_meta()
        if not session_exists(store, session_id):
            if payload.get("session_id"):
                error = f"no session {session_id} in {config.workspace} (see --list-sessions)"
                return {**outcome, "status": STATUS_ERROR, "session_id": None, "error": error}
            task = task or payload.get("task")
            session = store.create(
                task, source="scheduler", mode=payload["mode"], session_id=session_id
            )
        result = run_agent(
            config,
            task,
            session_id=None if session else session_id,
            session=session,
            gate=PermissionGate(payload["mode"]),
            stop=self.current[2],
            source="scheduler",
            **self.runtime_for(config).run_options(),
        )
        if result.status == STATUS_WAITING and result.wait_until:
            self.queue_wake(payload, result.session_id, result.wait_until)
        error = result.message if result.status in (STATUS_ERROR, STATUS_INTERRUPTED) else None
        return {
            **outcome,
            "status": result.status,
            "session_id": result.session_id,
            "iterations": result.iterations,
            "tokens": result.tokens,
            "error": error,
            "unreachable": bool(result.extra.get("unreachable")),
        }

    def queue_wake(self, payload: dict, session_id: str, wait_until: str) -> None:
        """The session asked to be woken: a scheduled task any free worker takes after the
        same wait by the queue's clock (`wait_until` is by this machine's)."""
        wake = {**payload, "task": None, "session_id": session_id, "wake": wait_until}
        wait = parse_time(wait_until) - datetime.now(timezone.utc)
        enqueue(rq_queue(self.connection), wake, queue_time(self.connection) + wait)


def workspace_roots(config: Config) -> list[Path]:
    """QUEUE_WORKSPACE_ROOTS (default: the worker's WORKSPACE), symlinks resolved."""
    return [Path(os.path.realpath(r)) for r in config.queue_workspace_roots or [config.workspace]]


def accepted_path(path: str, roots: list[Path], own: Path) -> Path:
    """A task's workspace path, symlinks resolved, when this worker may work in it: a
    directory under one of `roots`, not inside an agent's data directory (`.lmagent/`), and
    not holding this worker's own WORKSPACE (where its git tasks' work trees are). Refused
    with the reason otherwise."""
    if not os.path.isabs(path):
        raise Refused(f"workspace {path!r} is not an absolute path")
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise Refused(f"workspace {path} is not a directory on this worker")
    root = next((r for r in roots if r == real or r in real.parents), None)
    if root is None:
        listed = ":".join(map(str, roots))
        raise Refused(f"workspace {path} is outside this worker's QUEUE_WORKSPACE_ROOTS ({listed})")
    if ".lmagent" in real.relative_to(root).parts:
        raise Refused(f"workspace {path} is inside an agent's own data directory (.lmagent)")
    if real in Path(os.path.realpath(own)).parents:
        raise Refused(f"workspace {path} holds this worker's own WORKSPACE")
    return real


def still_waiting(store: SessionStore, payload: dict) -> bool:
    meta = read_json(store.directory / f"{payload['session_id']}.meta.json", {})
    if not isinstance(meta, dict) or meta.get("status") != STATUS_WAITING:
        return False
    try:
        return parse_time(meta["wait_until"]) == parse_time(payload["wake"])
    except (KeyError, TypeError, ValueError):
        return False


def session_exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.resolve(session_id)
    except SessionNotFound:
        return False
    return True


def resume_after_kill(store: SessionStore, session_id: str) -> None:
    """A session its killed worker left `running` is marked interrupted, so it resumes."""
    with contextlib.suppress(SessionBusy, SessionNotFound, KeyError, RuntimeError, OSError):
        store.mark_ended(session_id, STATUS_INTERRUPTED, KILLED)


# --------------------------------------------------------------------------- the process


def clock_note(connection) -> str | None:
    """One line when this machine's clock differs from the queue's by more than the tolerance."""
    offset = (datetime.now(timezone.utc) - queue_time(connection)).total_seconds()
    if abs(offset) <= CLOCK_TOLERANCE:
        return None
    side = "ahead of" if offset > 0 else "behind"
    return (
        f"worker: this machine's clock is {abs(offset):.0f} s {side} the queue's; scheduled "
        "starts, wake-ups and heartbeats use the queue's clock, session times this machine's"
    )


def run_worker(config: Config, log: Callable[[str], None], stop: StopToken) -> None:
    """Work until `stop`: a worker that quits on a lost connection is started again."""
    global ACTIVE
    connection = connect(config.scheduler_queue)
    if note := clock_note(connection):
        log(note)
    while not stop.stopped:
        worker = AgentWorker(config, connection, log, stop)
        ACTIVE = worker
        log(f"worker {worker.name}: taking tasks from {shown(config.scheduler_queue)}")
        try:
            worker.work(with_scheduler=True, logging_level="WARNING")
        except QueueError as exc:
            log(f"worker: {exc}")
        finally:
            worker.close()
        if not stop.stopped:
            stop.wait(1.0)  # Redis went away: try again
