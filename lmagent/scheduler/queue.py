"""How task files move: inbox → processing (the claim) → done/ or failed/, or back to the inbox
when a run is cut short. Every move is an atomic rename forced to disk, so a task is never lost
or doubled, even by a power cut.

Each step leaves the disk in a state a restarted daemon can finish from (`recover`): the session
a task runs in is named beside it before that session is made, and a finished task's outcome is
written beside it before it goes to the history, so a killed daemon never runs a task twice,
never loses an outcome, never records one twice and leaves no session saying `running`."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from lmagent.core.files import atomic_write, move_durably, read_json, utc_now
from lmagent.core.status import FINAL_STATUSES, STATUS_ERROR, STATUS_INTERRUPTED
from lmagent.scheduler.inbox import History, Job, Malformed, Paths, parse_job, read_history
from lmagent.sessions.store import SessionStore, is_session_id, new_session_id

MAX_ATTEMPTS = 3  # times a task may be cut short by a dying daemon before it is failed
KILLED = "the scheduler running it was stopped before it finished"


# a session in one of these has had its run end (interrupted ones are run again)
RUN_ENDINGS = tuple(status for status in FINAL_STATUSES if status != STATUS_INTERRUPTED)


class TaskQueue:
    """The task files of one workspace, moved by one daemon (it holds the daemon lock)."""

    def __init__(self, paths: Paths, history: History, log: Callable[[str], None]):
        self.paths = paths
        self.history = history
        self.log = log
        self.sessions = SessionStore(paths.workspace)

    def claim(self, job: Job) -> bool:
        """Take a task out of the inbox; False when it is already gone."""
        try:
            move_durably(self.paths.inbox / job.name, self.paths.processing / job.name)
        except FileNotFoundError:
            return False
        return True

    def reserve_session(self, job: Job) -> str:
        """A new session id for a claimed task, written beside it before the session is made."""
        session_id = new_session_id()
        atomic_write(self.paths.marker(job.name), session_id)
        return session_id

    def complete(self, job: Job, record: dict) -> None:
        """Record a finished task's outcome and move it to done/ (or failed/, with the error
        beside it). The outcome is kept beside the task until both are done (`recover`)."""
        record = {"time": utc_now(), **record}  # stamped once: a repeat is recognised
        atomic_write(self.paths.outcome(job.name), json.dumps(record, ensure_ascii=False))
        self.history.append(record)
        self._move_on(job.name, record)

    def _move_on(self, name: str, record: dict) -> None:
        failed = record.get("outcome") == "failed"
        directory = self.paths.failed if failed else self.paths.done
        if failed:
            atomic_write(directory / f"{name}.reason", f"{record.get('error') or 'failed'}\n")
        move_durably(self.paths.processing / name, directory / name)
        self._drop(self.paths.marker(name), self.paths.outcome(name))

    def reject(self, name: str, reason: str) -> None:
        """Move a malformed inbox file to failed/ with its reason: kept, and never retried."""
        atomic_write(self.paths.failed / f"{name}.reason", reason + "\n")
        with contextlib.suppress(FileNotFoundError):
            move_durably(self.paths.inbox / name, self.paths.failed / name)
            self.history.append({"task_file": name, "status": "malformed", "error": reason})
            self.log(f"scheduler: rejected {name}: {reason}")

    def put_back(self, job: Job) -> None:
        """Return a claimed task, untouched and in its place, to the inbox (it could not start)."""
        move_durably(self.paths.processing / job.name, self.paths.inbox / job.name)
        self._drop(self.paths.marker(job.name))

    def requeue(self, job: Job, session_id: str | None, crashed: bool) -> None:
        """Put a cut-short task back in the inbox (same position); it resumes its session."""
        again = Job(
            name=job.name.rsplit(".", 1)[0] + ".json",
            task=None if session_id else job.task,
            session_id=session_id or job.session_id,
            mode=job.mode,
            attempt=job.attempt + (1 if crashed else 0),
            wake=None if session_id else job.wake,  # not started yet: still only a wake-up
        )
        self.to_inbox(again.name, again.dump())
        self._drop(self.paths.processing / job.name, self.paths.marker(job.name))

    def to_inbox(self, name: str, data: str) -> None:
        """Put a task file in the inbox, whole: it is written beside the claimed tasks first
        (where a restart removes what a kill left half written), then renamed into the inbox."""
        draft = self.paths.processing / f".{name}.draft"
        atomic_write(draft, data)
        move_durably(draft, self.paths.inbox / name)

    # ------------------------------------------------------------------ after a killed daemon

    def recover(self) -> None:
        """Finish what a killed daemon left in processing/: record and move on a task whose
        outcome was written, requeue any other (resuming its session, if it has one), mark the
        sessions it left `running` as interrupted, and remove files left beside no task."""
        recorded = read_history(self.paths.history)
        for name in self.paths.claimed():
            outcome = read_json(self.paths.outcome(name))
            if isinstance(outcome, dict):
                if outcome not in recorded:
                    self.history.append(outcome)
                self._move_on(name, outcome)
            else:
                self._recover(name)
        self._drop_leftovers()
        self.sessions.end_orphans(("scheduler",), KILLED)

    def _recover(self, name: str) -> None:
        try:
            job = parse_job(name, (self.paths.processing / name).read_bytes())
        except Malformed as exc:
            job, reason = Job(name), str(exc)
        else:
            reason = ""
            if job.attempt + 1 >= MAX_ATTEMPTS:
                reason = f"the scheduler died while running this task {MAX_ATTEMPTS} times"
        session_id = self._session_of(name, job.session_id)
        ended = self._ending_of(session_id)
        if ended is not None:  # the run ended; only the scheduler's bookkeeping was cut short
            status, error = ended
            outcome = "failed" if status == STATUS_ERROR else "done"
            record = {"task_file": name, "status": status, "outcome": outcome, "error": error}
            self.complete(job, {**record, "session_id": session_id})
            return
        if reason:
            self._end_session(session_id, STATUS_ERROR, reason)
            record = {"task_file": name, "status": "failed", "outcome": "failed", "error": reason}
            self.complete(job, {**record, "session_id": session_id})
            return
        self._end_session(session_id or job.session_id, STATUS_INTERRUPTED, KILLED)
        self.history.append({"task_file": name, "status": "recovered", "session_id": session_id})
        self.requeue(job, session_id, crashed=True)
        self.log(f"scheduler: requeued {name} left by a stopped scheduler")

    def _session_of(self, name: str, resumed: str | None) -> str | None:
        """The session a claimed task runs in, when it exists: the one named beside it (it
        may not be made yet), else the one it resumes (`resumed`, from the task file: a
        requeued task's run that ended before the kill is recorded as it ended, not run again
        or failed as "died while running")."""
        try:
            session_id = self.paths.marker(name).read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            session_id = resumed or ""
        if not is_session_id(session_id):
            return None
        return session_id if (self.paths.sessions / f"{session_id}.meta.json").is_file() else None

    def _ending_of(self, session_id: str | None) -> tuple[str, str | None] | None:
        """How the task's session ended and its error, when its run did end (a daemon killed
        after the run wrote its ending, before the outcome was recorded, or after a recovery
        ended it "died while running", before that was recorded); None while it still has to
        run."""
        if not session_id:
            return None
        meta = read_json(self.paths.sessions / f"{session_id}.meta.json", {})
        status = meta.get("status") if isinstance(meta, dict) else None
        return (status, meta.get("error")) if status in RUN_ENDINGS else None

    def _end_session(self, session_id: str | None, status: str, reason: str) -> None:
        if session_id:
            with contextlib.suppress(KeyError, RuntimeError, OSError):  # busy, gone or damaged
                self.sessions.mark_ended(session_id, status, reason)

    def _drop_leftovers(self) -> None:
        """Markers and outcomes whose task has moved on, and temporary files of cut writes."""
        claimed = set(self.paths.claimed())
        for entry in os.scandir(self.paths.processing):
            task = entry.name.rsplit(".", 1)[0]
            if entry.name.startswith(".") or (entry.name not in claimed and task not in claimed):
                self._drop(Path(entry.path))

    @staticmethod
    def _drop(*paths: Path) -> None:
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
