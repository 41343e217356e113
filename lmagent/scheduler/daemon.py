"""The scheduler daemon: claims inbox tasks, runs each once with the shared loop (a thread per
task, up to its concurrency), turns due waits into wake-up tasks, and records every outcome."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from lmagent.core.config import Config
from lmagent.core.files import atomic_write, read_json
from lmagent.core.status import STATUS_ERROR, STATUS_INTERRUPTED, STATUS_WAITING
from lmagent.core.stop import StopToken
from lmagent.llm.probe import probe_model
from lmagent.loop.permissions import PermissionGate
from lmagent.runtime import shared_runtime
from lmagent.scheduler.inbox import DaemonLock, History, Job, Malformed, Paths, names, parse_job
from lmagent.scheduler.queue import TaskQueue
from lmagent.sessions.store import SessionBusy, SessionStore
from lmagent.sessions.waiting import WaitingIndex, parse_time

FAST_POLL = 0.2  # seconds between inbox scans; SCHEDULER_POLL_INTERVAL caps it and paces rescans
MODEL_BACKOFF = 30.0  # seconds at most between two asks of a model server that does not answer
MODEL_TRUSTED = 2.0  # seconds an answering model server is not asked again before a claim
EMPTY_GRACE = 1.0  # an empty file younger than this may still be being written by hand
Sink = Callable[[dict], None]


@dataclass
class Outcome:
    status: str
    session_id: str | None = None
    tokens: int = 0
    iterations: int = 0
    error: str | None = None
    unreachable: bool = False  # the model server stopped answering during the run


class Scheduler:
    """Claims inbox tasks (atomic rename), runs them with the shared loop, records outcomes."""

    def __init__(
        self,
        config: Config,
        *,
        concurrency: int | None = None,
        sink_factory: Callable[[Job], Sink | None] | None = None,
        runtime=None,
        busy: Callable[[], bool] | None = None,
        log: Callable[[str], None] | None = None,
    ):
        self.config = config
        self.paths = Paths(config.workspace)
        self.concurrency = max(1, int(concurrency or config.scheduler_concurrency))
        self.sink_factory = sink_factory
        self.runtime = runtime  # lmagent.runtime.Runtime: model, tools, MCP, sandbox (shared)
        self.busy = busy or (lambda: False)
        self.log = log or (lambda message: None)
        self.tick_seconds = min(FAST_POLL, config.scheduler_poll_interval)
        self.lock = DaemonLock(self.paths.lock)
        self.history = History(self.paths.history)
        self.queue = TaskQueue(self.paths, self.history, self.log)
        self.waiting = WaitingIndex(config.workspace)
        self.sessions = SessionStore(config.workspace)
        self.stop = StopToken()
        self.wake = threading.Event()
        self.running: dict[str, tuple[Job, threading.Thread, StopToken]] = {}
        self.sessions_busy: set[str] = set()
        self.later: dict[str, datetime] = {}  # inbox names whose not_before is still ahead
        self.woken: dict[str, str] = {}  # session id → the wait_until its wake-up task answers
        self.model = ModelWatch(config, self.paths, self.log)
        # reentrant: a stop signal can arrive while the main thread holds it (SIGTERM's handler
        # stops the scheduler on that same thread, and _stop_all takes it too)
        self._mutex = threading.RLock()

    # ------------------------------------------------------------------ life

    def acquire(self) -> None:
        """Take the workspace's daemon lock (raises SchedulerLocked)."""
        if self.lock.fd is None:
            self.paths.ensure()
            self.lock.acquire()

    def run_forever(self, stop: StopToken | None = None) -> None:
        """Run until `stop` is set; running tasks are then interrupted and requeued."""
        self.acquire()
        self.stop = stop or self.stop
        self.stop.add_callback(self._stop_all)
        try:
            with shared_runtime(self.config, self.runtime) as self.runtime:
                self._watch()
        finally:
            self.lock.release()
            self.log("scheduler: stopped")

    def _watch(self) -> None:
        self.paths.model_note.unlink(missing_ok=True)  # a killed daemon's
        self.queue.recover()
        self.waiting.rescan()
        self.log(f"scheduler: watching {self.paths.inbox} (concurrency {self.concurrency})")
        self.loop()
        self.drain()

    def loop(self) -> None:
        scanned = time.time()
        while not self.stop.stopped:
            if time.time() - scanned >= self.config.scheduler_poll_interval:
                since, scanned = scanned - 2.0, time.time()  # 2 s: coarse file-system clocks
                self._guarded(self.waiting.rescan, since, self.woken)
            self._guarded(self.tick)
            self.wake.wait(self.tick_seconds)
            self.wake.clear()

    def _guarded(self, action: Callable, *args) -> None:
        """A failing scan (disk full, permissions) is logged; the daemon keeps going."""
        try:
            action(*args)
        except Exception as exc:
            self.log(f"scheduler: {action.__name__} failed: {type(exc).__name__}: {exc}")
            self.stop.wait(self.config.scheduler_poll_interval)

    def _stop_all(self) -> None:
        with self._mutex:
            tokens = [token for _, _, token in self.running.values()]
        for token in tokens:
            token.stop("the scheduler is shutting down")
        self.wake.set()

    def drain(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with self._mutex:
            threads = [thread for _, thread, _ in self.running.values()]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ each tick

    def tick(self) -> None:
        now = datetime.now(timezone.utc)
        for session_id, entry in self.waiting.due(now):
            self.queue_wake(session_id, entry)
        free = self.concurrency - len(self.running)
        if free > 0 and not self.busy():
            self.claim_some(free, now)

    def queue_wake(self, session_id: str, entry: dict) -> None:
        """Turn a due wait into an inbox task; the fixed name makes a repeat harmless."""
        when = parse_time(entry["wait_until"])
        stamp = int(when.timestamp() * 1e9)
        job = Job("", session_id=session_id, mode=entry.get("mode") or "auto")
        job.wake = entry["wait_until"]
        self.queue.to_inbox(f"{stamp:020d}-wake-{session_id}.json", job.dump())
        self.woken[session_id] = job.wake
        self.waiting.remove(session_id)

    def claim_some(self, free: int, now: datetime) -> None:
        inbox = names(self.paths.inbox)
        self.later = {n: t for n, t in self.later.items() if n in set(inbox)}
        for name in inbox:
            if free <= 0 or self.stop.stopped:
                return
            if name in self.later and self.later[name] > now:
                continue
            job = self.read_inbox(name, now)
            if job is None or self.session_busy(job.session_id):
                continue  # a busy session's task waits in the inbox for the next tick
            if not self.model.answers():
                return  # tasks stay in the inbox
            if self.queue.claim(job):
                self.start(job)
                free -= 1

    def read_inbox(self, name: str, now: datetime) -> Job | None:
        """The parsed job when it may start now; rejects malformed files."""
        path = self.paths.inbox / name
        try:
            raw = path.read_bytes()
            age = time.time() - path.stat().st_mtime
        except (FileNotFoundError, IsADirectoryError):
            return None
        try:
            job = parse_job(name, raw)
        except Malformed as exc:
            if not raw.strip() and age < EMPTY_GRACE:
                return None  # perhaps still being written by hand
            self.queue.reject(name, str(exc))
            return None
        if job.not_before and parse_time(job.not_before) > now:
            self.later[name] = parse_time(job.not_before)
            return None
        return job

    def session_busy(self, session_id: str | None) -> bool:
        """Run here already, or held by another run (REPL, web, another process)."""
        if not session_id:
            return False
        with self._mutex:
            if any(s.startswith(session_id) for s in self.sessions_busy):
                return True
        return self.sessions.is_busy(session_id)

    def start(self, job: Job) -> None:
        token = StopToken()
        thread = threading.Thread(
            target=self.work, args=(job, token), name=f"scheduler:{job.name}", daemon=True
        )
        with self._mutex:
            self.running[job.name] = (job, thread, token)
            if job.session_id:
                self.sessions_busy.add(job.session_id)
        if self.stop.stopped:
            token.stop("the scheduler is shutting down")
        thread.start()

    # ------------------------------------------------------------------ one task

    def work(self, job: Job, token: StopToken) -> None:
        started = time.time()
        outcome = Outcome("busy", job.session_id)
        try:
            outcome = self.attempt(job, token)
            if outcome.status != "busy":
                self.settle(job, outcome, started)
        except Exception as exc:  # the file stays in processing/ and is recovered on restart
            self.log(f"scheduler: could not record {job.name}: {type(exc).__name__}: {exc}")
        finally:
            with self._mutex:
                self.running.pop(job.name, None)
                self.sessions_busy.discard(job.session_id)
                self.sessions_busy.discard(outcome.session_id)
            self.wake.set()

    def attempt(self, job: Job, token: StopToken) -> Outcome:
        """Run the job; a session held by another run sends it back to the inbox."""
        self.log(f"scheduler: start {job.name}: {job.summary()}")
        try:
            return self.execute(job, token)
        except SessionBusy as exc:
            self.queue.put_back(job)
            self.log(f"scheduler: {job.name} waits in the inbox: {exc}")
            return Outcome("busy", job.session_id)
        except Exception as exc:
            return Outcome("failed", job.session_id, error=f"{type(exc).__name__}: {exc}")

    def execute(self, job: Job, token: StopToken) -> Outcome:
        from lmagent.loop.run import run_agent

        if job.wake and not self._still_waiting(job):
            return Outcome("skipped", job.session_id, error="the session is no longer waiting")
        session = None
        if not job.session_id:  # named beside the task first: after a crash it is resumed
            reserved = self.queue.reserve_session(job)
            session = self.sessions.create(
                job.task, source="scheduler", mode=job.mode, session_id=reserved
            )
        result = run_agent(
            self.config,
            job.task,
            session_id=job.session_id,
            session=session,
            sink=self._sink(job),
            gate=PermissionGate(job.mode),
            stop=token,
            source="scheduler",
            **self.runtime.run_options(),
        )
        error = result.message if result.status == STATUS_ERROR else None
        unreachable = bool(result.extra.get("unreachable"))
        return Outcome(
            result.status, result.session_id, result.tokens, result.iterations, error, unreachable
        )

    def _sink(self, job: Job) -> Sink:
        """Notes which session the task runs in, then passes events to the front end's sink."""
        front_end = self.sink_factory(job) if self.sink_factory else None

        def sink(event: dict) -> None:
            if event.get("type") == "session" and "agent_id" not in event:
                with self._mutex:
                    self.sessions_busy.add(event["session_id"])
            if front_end is not None:
                with contextlib.suppress(Exception):
                    front_end(event)

        return sink

    def _still_waiting(self, job: Job) -> bool:
        meta = read_json(self.paths.sessions / f"{job.session_id}.meta.json", {})
        if not isinstance(meta, dict) or meta.get("status") != STATUS_WAITING:
            return False
        try:
            return parse_time(meta["wait_until"]) == parse_time(job.wake)
        except (KeyError, TypeError, ValueError):
            return False

    def settle(self, job: Job, outcome: Outcome, started: float) -> None:
        """Record the outcome and move the task file where it belongs (the run itself has
        already indexed a wait it ended with)."""
        if outcome.unreachable or (outcome.status == STATUS_INTERRUPTED and self.stop.stopped):
            where = "requeued"
        elif outcome.status in (STATUS_ERROR, "failed"):
            where = "failed"
        else:
            where = "done"
        record = {
            "task_file": job.name,
            "task": job.summary(),
            "session_id": outcome.session_id,
            "status": outcome.status,
            "outcome": where,
            "started": datetime.fromtimestamp(started, timezone.utc).isoformat(),
            "duration_s": round(time.time() - started, 3),
            "tokens": outcome.tokens,
            "iterations": outcome.iterations,
            "error": outcome.error,
            "attempt": job.attempt,
        }
        if where == "requeued":
            self.history.append(record)
            self.queue.requeue(job, outcome.session_id, crashed=False)
            if outcome.unreachable:
                self.model.lost()
                self.log(f"scheduler: put {job.name} back in the inbox: {outcome.error}")
        else:
            self.queue.complete(job, record)
        if job.wake:
            self.woken.pop(job.session_id, None)
        self.log(f"scheduler: {outcome.status} {job.name} (session {outcome.session_id})")


class ModelWatch:
    """Whether the model server answers, asked before a task is claimed: while it does not,
    tasks stay in the inbox; said once (and noted for --scheduler-status), asked again after
    1, 2, 4 … MODEL_BACKOFF seconds."""

    def __init__(self, config: Config, paths: Paths, log: Callable[[str], None]):
        self.config, self.paths, self.log = config, paths, log
        self.down_since: datetime | None = None
        self.asked, self.delay = -math.inf, 1.0

    def answers(self) -> bool:
        waited = time.monotonic() - self.asked
        if waited < (self.delay if self.down_since else MODEL_TRUSTED):
            return self.down_since is None
        self.asked = time.monotonic()
        url = self.config.llm_url
        if probe_model(self.config).reachable:
            if self.down_since:
                self.paths.model_note.unlink(missing_ok=True)
                self.log(f"scheduler: the model server at {url} answers again; taking tasks")
            self.down_since, self.delay = None, 1.0
            return True
        if self.down_since is None:
            self.down_since = datetime.now(timezone.utc)
            note = {"url": url, "since": self.down_since.isoformat()}
            atomic_write(self.paths.model_note, json.dumps(note))
            self.log(f"scheduler: no model server answers at {url}; tasks stay in the inbox")
        else:
            self.delay = min(self.delay * 2, MODEL_BACKOFF)
        return False

    def lost(self) -> None:
        """A run found the server gone: ask again before the next claim."""
        self.asked = -math.inf
