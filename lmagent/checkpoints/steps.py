"""Each session's changing steps, and restoring the workspace to before one of them.

A step that can change files is bracketed by two snapshots (shadow.py); when they differ the
step is recorded in `<workspace>/.lmagent/checkpoints/sessions/<session_id>.jsonl`, one JSON
line: step (1, 2, ... per session), time, kind ("tool" or "restore"), tool, call_id, agent_id,
before and after (snapshot commits), changed (paths) and notes. Diffs are not stored: they
are computed from the two snapshots when asked for.

A restore is recorded like a step (kind "restore", before = the workspace as it was), so the
next undo takes it back. It is refused when files changed since the last snapshot (the user
edited them) unless forced; forced, those edits stay in a snapshot and the undo returns them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lmagent.checkpoints.shadow import CheckpointError, ShadowRepo, Snapshot
from lmagent.core.files import locked, utc_now

LOCK_WAIT = 60  # seconds to wait for another snapshot of the same workspace


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
    def locked(self) -> Iterator[None]:
        """One snapshot or restore at a time in this workspace (threads and processes)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"cannot create {self.directory}: {exc.strerror}") from exc
        with locked(self.repo.home / "lock", LOCK_WAIT) as got:
            if not got:
                raise CheckpointError(f"another checkpoint took over {LOCK_WAIT} s")
            yield

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
                "kind": "tool",
                **fields,
                "before": before.commit,
                "after": after.commit,
                "changed": changed,
            }
            self.append(session_id, record)
        return record

    def append(self, session_id: str, record: dict) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        fd = os.open(self.log_path(session_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ reading

    def log_path(self, session_id: str):
        return self.directory / f"{session_id}.jsonl"

    def steps(self, session_id: str) -> list[dict]:
        """The session's recorded steps, oldest first (a damaged line is skipped)."""
        path = self.log_path(session_id)
        if not path.is_file():  # none yet (or not a file to read: a device never ends)
            return []
        lines = path.read_text(errors="replace").splitlines()
        steps = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                steps.append(record)
        return steps

    def step(self, session_id: str, number: int | None = None) -> dict:
        """Step `number` of the session (its last when None), or RestoreRefused."""
        steps = self.steps(session_id)
        if not steps:
            raise RestoreRefused(f"session {session_id} has no checkpoints: it changed no files")
        if number is None:
            return steps[-1]
        for record in steps:
            if record["step"] == number:
                return record
        numbers = ", ".join(str(r["step"]) for r in steps)
        raise RestoreRefused(f"session {session_id} has no step {number} (its steps: {numbers})")

    def diff(self, record: dict) -> str:
        return self.repo.diff(record["before"], record["after"])

    # ------------------------------------------------------------------ restoring

    def plan(self, session_id: str, number: int | None = None) -> RestorePlan:
        """What restoring to before step `number` would change, without changing anything."""
        record = self.step(session_id, number)
        with self.locked():
            now = self.repo.stage_tree()
            return RestorePlan(
                session_id,
                record,
                self.repo.changed(now.tree, record["before"]),
                self.edited_since(now),
            )

    def restore(self, session_id: str, number: int | None = None, force: bool = False) -> dict:
        """Put the workspace back as it was before step `number` (the last when None) and
        record the restore as a step of the session; its record."""
        record = self.step(session_id, number)
        with self.locked():
            now = self.repo.stage_tree()
            edited = self.edited_since(now)
            if edited and not force:
                raise RestoreRefused(
                    f"{len(edited)} file(s) changed since the agent's last step: "
                    f"{_listed(edited)}. Restoring would overwrite them; use --force to restore "
                    "anyway (undoing the restore brings them back)"
                )
            files = self.repo.changed(now.tree, record["before"])
            if not files:
                raise RestoreRefused(f"the files are already as before step {record['step']}")
            current = self.repo.commit(now, f"before restoring {session_id} step {record['step']}")
            try:
                self.repo.restore(record["before"])
            except CheckpointError as exc:
                self.record_restore(session_id, record, current, files)  # so undo can go back
                raise CheckpointError(
                    f"the restore stopped part way ({exc}); undo it to get the files back as "
                    "they were"
                ) from exc
            return self.record_restore(session_id, record, current, files)

    def record_restore(self, session_id: str, record: dict, before: Snapshot, files: list) -> dict:
        after = self.repo.snapshot(f"restored {session_id} step {record['step']}")
        restore = {
            "step": len(self.steps(session_id)) + 1,
            "time": utc_now(),
            "kind": "restore",
            "tool": "restore",
            "restored_step": record["step"],
            "before": before.commit,
            "after": after.commit,
            "changed": files,
        }
        self.append(session_id, restore)
        return restore

    def edited_since(self, now: Snapshot) -> list[str]:
        latest = self.repo.latest()
        return self.repo.changed(latest, now.tree) if latest else []


def _listed(paths: list[str], limit: int = 10) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
