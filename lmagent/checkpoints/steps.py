"""Each session's changing steps, and restoring the workspace to before one of them.

A step that can change files is bracketed by two snapshots (shadow.py); when they differ the
step is recorded in `<workspace>/.lmagent/checkpoints/sessions/<session_id>.jsonl`, one JSON
line: step (1, 2, ... per session), time, ns (its clock in nanoseconds), kind ("tool" or
"restore"), tool, call_id, agent_id, before and after (snapshot commits), changed (paths) and
notes. Paths are the names on disk: one that is not UTF-8 is kept with its bytes as surrogate
escapes (the log is ASCII JSON), so a restore makes exactly that name again. Diffs are not
stored: they are computed from the two snapshots when asked for. A call whose checkpoint was
lost (a snapshot failed) leaves a line with kind "failed", its tool and cause (no step number).

The checkpoint lock is held from a step's first snapshot to its second (recorder.py), so a
step's change list holds only what happened during it, even with two runs on one workspace.

A restore to before step N puts back only the files that the session's steps from N on changed,
as they were before step N; other files, other sessions' changes among them, stay. It is refused
when one of those files changed since the last snapshot (the user edited it) or was changed by
another session after step N, unless forced; forced, those changes stay in a snapshot and the
undo returns them. A restore is recorded like a step (kind "restore", before = the workspace as
it was), so the next undo takes it back; a restore that failed and changed nothing is recorded
with "failed", and undoing it does nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lmagent.checkpoints.objects import shown
from lmagent.checkpoints.shadow import CheckpointError, RestoreFailed, ShadowRepo, Snapshot
from lmagent.core.files import locked, utc_now

LOCK_WAIT = 60  # seconds to wait for another snapshot (or step) of the same workspace
_HELD: dict[str, tuple[int, int]] = {}  # lock path -> (thread holding it, depth)
_HELD_LOCK = threading.Lock()


class RestoreRefused(Exception):
    """A restore that was not done; the text says why and what to do instead."""


@dataclass
class RestorePlan:
    session_id: str
    step: dict
    files: list[str]  # what the restore would change
    edited: list[str]  # changed since the last snapshot (by someone other than the agent)


class Checkpoints:
    """The checkpoints of one workspace."""

    def __init__(self, workspace):
        self.repo = ShadowRepo(workspace)
        self.directory = self.repo.home / "sessions"

    @contextmanager
    def locked(self, wait: float = LOCK_WAIT) -> Iterator[None]:
        """One snapshot, step or restore at a time in this workspace (threads and processes);
        the thread holding it may take it again."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"cannot create {self.directory}: {exc.strerror}") from exc
        path = str(self.repo.home / "lock")
        me = threading.get_ident()
        with _HELD_LOCK:
            holder, depth = _HELD.get(path, (0, 0))
            if holder == me:
                _HELD[path] = (me, depth + 1)
        if holder == me:
            try:
                yield
            finally:
                with _HELD_LOCK:
                    _HELD[path] = (me, _HELD[path][1] - 1)
            return
        with locked(self.repo.home / "lock", wait) as got:
            if not got:
                raise CheckpointError(f"another checkpoint took over {int(wait)} s")
            with _HELD_LOCK:
                _HELD[path] = (me, 1)
            try:
                yield
            finally:
                with _HELD_LOCK:
                    _HELD.pop(path, None)

    # ------------------------------------------------------------------ taking

    def take(self, message: str) -> Snapshot:
        with self.locked():
            return self.repo.snapshot(message)

    def record(self, session_id: str, before: Snapshot, after: Snapshot, **fields) -> dict | None:
        """Record a step of `session_id` when it changed something; the record, or None."""
        changed = before.tree != after.tree and self.repo.changed(before.tree, after.tree)
        if not changed:
            return None
        with self.locked():
            record = {
                "step": len(self.steps(session_id)) + 1,
                "time": utc_now(),
                "ns": time.time_ns(),
                "kind": "tool",
                **fields,
                "before": before.commit,
                "after": after.commit,
                "changed": changed,
            }
            self.append(session_id, record)
            self.repo.keep(session_id, [before.commit, after.commit])
        return record

    def append(self, session_id: str, record: dict) -> None:
        """One line to the session's log, in ASCII: a path that is not UTF-8 keeps its bytes as
        surrogate escapes (`\\udcff`), which json.loads gives back exactly."""
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(self.log_path(session_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def note_failure(self, session_id: str, cause: str, **fields) -> None:
        """Leave in the session's log that a call's checkpoint was lost (`fields`: its tool,
        call_id, agent_id), so the session never reads as one that changed no files."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            record = {"kind": "failed", "time": utc_now(), **fields, "cause": cause}
            self.append(session_id, record)
        except OSError:
            pass  # the log itself cannot be written: the status line said it

    # ------------------------------------------------------------------ reading

    def log_path(self, session_id: str):
        return self.directory / f"{session_id}.jsonl"

    def records(self, session_id: str) -> list[dict]:
        """Every line of the session's log, oldest first (a damaged line is skipped)."""
        path = self.log_path(session_id)
        if not path.is_file():  # none yet (or not a file to read: a device never ends)
            return []
        found = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def steps(self, session_id: str) -> list[dict]:
        """The session's recorded steps, oldest first."""
        return [r for r in self.records(session_id) if isinstance(r.get("step"), int)]

    def failures(self, session_id: str) -> list[str]:
        """Why the session's checkpoints could not be kept, when they could not."""
        return [str(r.get("cause")) for r in self.records(session_id) if r.get("kind") == "failed"]

    def lost(self, record: dict) -> bool:
        """Whether a step's snapshots are gone from the shadow repository."""
        try:
            with self.repo.reading():
                self.repo.tree_of(record["before"])
                self.repo.tree_of(record["after"])
        except (CheckpointError, KeyError, ValueError):
            return True
        return False

    def step(self, session_id: str, number: int | None = None) -> dict:
        """Step `number` of the session (its last when None), or RestoreRefused."""
        steps = self.steps(session_id)
        if not steps:
            failures = self.failures(session_id)
            if failures:
                raise RestoreRefused(
                    f"session {session_id}'s checkpoints could not be kept ({failures[-1]}): "
                    "its steps cannot be undone"
                )
            raise RestoreRefused(f"session {session_id} has no checkpoints: it changed no files")
        if number is None:
            return steps[-1]
        for record in steps:
            if record["step"] == number:
                return record
        numbers = ", ".join(str(r["step"]) for r in steps)
        raise RestoreRefused(f"session {session_id} has no step {number} (its steps: {numbers})")

    def diff(self, record: dict) -> str:
        try:
            return self.repo.diff(record["before"], record["after"], record.get("changed"))
        except CheckpointError as exc:
            return f"({exc})\n"

    # ------------------------------------------------------------------ restoring

    def plan(self, session_id: str, number: int | None = None) -> RestorePlan:
        """What restoring to before step `number` would change, without changing anything."""
        record = self.step(session_id, number)
        with self.locked():
            now = self.repo.stage_tree()
            changes = self.changes(session_id, record, now)
            return RestorePlan(session_id, record, sorted(changes), self.edited(changes, now))

    def restore(self, session_id: str, number: int | None = None, force: bool = False) -> dict:
        """Put back the files the session's steps from `number` on (the last step when None)
        changed, as they were before it, and record the restore as a step of the session."""
        record = self.step(session_id, number)
        if record.get("failed") and not record["changed"]:
            return {**record, "undone": False}  # a failed restore changed nothing to undo
        with self.locked():
            self.repo.check()
            now = self.repo.stage_tree()
            changes = self.changes(session_id, record, now)
            self.refuse_over_others(session_id, record, changes, self.edited(changes, now), force)
            current = self.repo.commit(now, f"before restoring {session_id} step {record['step']}")
            try:
                self.repo.write(changes)
            except RestoreFailed as exc:
                return self.failed_restore(session_id, record, current, exc)
            return self.record_restore(session_id, record, current, sorted(changes))

    def changes(self, session_id: str, record: dict, now: Snapshot) -> dict:
        """`path -> (mode, blob) or None` that puts back the files changed from `record` on."""
        paths = set()
        for step in self.steps(session_id):
            if step["step"] >= record["step"]:
                paths.update(step.get("changed") or [])
        try:
            with self.repo.reading():
                target = self.repo.tree_of(record["before"])
                found = {path: self.repo.entry(target, path) for path in sorted(paths)}
                return {p: e for p, e in found.items() if e != self.repo.entry(now.tree, p)}
        except CheckpointError as exc:
            raise RestoreRefused(
                f"step {record['step']} of session {session_id} cannot be restored: {exc}"
            ) from None

    def edited(self, changes: dict, now: Snapshot) -> list[str]:
        """Which of the files changed since the last snapshot (by someone other than a run)."""
        latest = self.repo.latest()
        if not latest or not changes:
            return []
        with self.repo.reading():
            tree = self.repo.tree_of(latest)
            return [p for p in changes if self.repo.entry(tree, p) != self.repo.entry(now.tree, p)]

    def refuse_over_others(self, session_id, record, changes, edited, force) -> None:
        if not changes:
            raise RestoreRefused(f"the files are already as before step {record['step']}")
        if force:
            return
        if edited:
            raise RestoreRefused(
                f"{len(edited)} file(s) changed since the agent's last step: "
                f"{_listed(edited)}. Restoring would overwrite them; use --force to restore "
                "anyway (undoing the restore brings them back)"
            )
        later = self.changed_by_others(session_id, record, set(changes))
        if later:
            names = sorted({path for _, paths in later for path in paths})
            raise RestoreRefused(
                f"session {later[0][0]} changed {_listed(names)} after step {record['step']}; "
                "restoring would drop its change. Use --force to restore anyway (undoing the "
                "restore brings it back)"
            )

    def changed_by_others(self, session_id: str, record: dict, paths: set[str]) -> list:
        """(session, paths) of other sessions' steps after `record` that touched `paths`."""
        since = record.get("ns", 0)
        found = []
        for log in sorted(self.directory.glob("*.jsonl")):
            other = log.stem
            if other == session_id:
                continue
            for step in self.steps(other):
                touched = paths.intersection(step.get("changed") or [])
                if touched and step.get("ns", 0) > since:
                    found.append((other, sorted(touched)))
        return found

    def record_restore(
        self, session_id: str, record: dict, before: Snapshot, files: list, failed: str = ""
    ) -> dict:
        after = self.repo.snapshot(f"restored {session_id} step {record['step']}")
        restore = {
            "step": len(self.steps(session_id)) + 1,
            "time": utc_now(),
            "ns": time.time_ns(),
            "kind": "restore",
            "tool": "restore",
            "restored_step": record["step"],
            "before": before.commit,
            "after": after.commit,
            "changed": files if after.tree != before.tree else [],
            **({"failed": failed} if failed else {}),
        }
        self.append(session_id, restore)
        self.repo.keep(session_id, [before.commit, after.commit])
        return restore

    def failed_restore(self, session_id, record, current, exc: RestoreFailed) -> dict:
        """Record a restore that failed, then raise CheckpointError saying what state the files
        are in. Rolled back: nothing changed, nothing to undo. Not: undoing it puts them back."""
        if exc.untouched:
            self.record_restore(session_id, record, current, [], failed=exc.cause)
            raise CheckpointError(
                f"{exc.cause}; every file is exactly as it was before the restore, so there is "
                "no need to undo it"
            )
        self.record_restore(session_id, record, current, list(exc.stuck))
        raise CheckpointError(
            f"{exc.cause}, and these files could not be put back as they were: "
            f"{_listed(exc.stuck)}; undo it to get the files back as they were"
        )


def _listed(paths: list[str], limit: int = 10) -> str:
    names = ", ".join(shown(path) for path in paths[:limit])
    return names + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
