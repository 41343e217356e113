"""How task files move: inbox → processing (the claim) → done/ or failed/, or back to the inbox
when a run is cut short. Every move is an atomic rename forced to disk, so a task is never lost
or doubled, even by a power cut."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from agent_core import atomic_write, move_durably
from scheduler_files import History, Job, Malformed, Paths, parse_job

MAX_ATTEMPTS = 3  # times a task may be cut short by a dying daemon before it is failed


class TaskQueue:
    """The task files of one workspace, moved by one daemon (it holds the daemon lock)."""

    def __init__(self, paths: Paths, history: History, log: Callable[[str], None]):
        self.paths = paths
        self.history = history
        self.log = log

    def claim(self, job: Job) -> bool:
        """Take a task out of the inbox; False when it is already gone."""
        try:
            move_durably(self.paths.inbox / job.name, self.paths.processing / job.name)
        except FileNotFoundError:
            return False
        return True

    def finish(self, job: Job, failed: bool = False, reason: str | None = None) -> None:
        """Move a claimed task to done/ (or failed/, with its reason beside it)."""
        directory = self.paths.failed if failed else self.paths.done
        if reason:
            atomic_write(directory / f"{job.name}.reason", reason + "\n")
        move_durably(self.paths.processing / job.name, directory / job.name)
        self._drop(self.paths.marker(job.name))

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
        atomic_write(self.paths.inbox / again.name, again.dump())
        self._drop(self.paths.processing / job.name)
        self._drop(self.paths.marker(job.name))

    def recover(self) -> None:
        """Requeue what a killed daemon left in processing/ (resuming its session if it had one)."""
        for path in sorted(self.paths.processing.iterdir()):
            if not path.name.endswith(".session") and not path.name.startswith("."):
                self._recover(path)

    def _recover(self, path: Path) -> None:
        marker = self.paths.marker(path.name)
        session_id = marker.read_text().strip() if marker.is_file() else None
        try:
            job = parse_job(path.name, path.read_bytes())
        except Malformed as exc:
            job, reason = Job(path.name), str(exc)
        else:
            reason = ""
            if job.attempt + 1 >= MAX_ATTEMPTS:
                reason = f"the scheduler died while running this task {MAX_ATTEMPTS} times"
        if reason:
            self.finish(job, failed=True, reason=reason)
            self.history.append({"task_file": path.name, "status": "failed", "error": reason})
            return
        self.requeue(job, session_id, crashed=True)
        self.history.append(
            {"task_file": path.name, "status": "recovered", "session_id": session_id}
        )
        self.log(f"scheduler: requeued {path.name} left by a stopped scheduler")

    @staticmethod
    def _drop(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
