"""Checkpoints around the calls of one run: a snapshot before each call that can change files,
another after it, and the step recorded with what it changed.

A checkpoint that cannot be made (disk full, permission denied, no git) is reported through
`report` and the call runs anyway: the step is never lost, it just cannot be undone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from lmagent.checkpoints.shadow import CheckpointError, Snapshot
from lmagent.checkpoints.steps import Checkpoints

# tools that change files without being marked so: their sub-agents do the changing
THROUGH_SUBAGENTS = frozenset({"delegate", "decompose"})


def needs_checkpoint(tool_name: str, changes_things: bool) -> bool:
    return changes_things or tool_name in THROUGH_SUBAGENTS


class StepRecorder:
    """The checkpoints of one run of one session. The checkpoint lock is held from a step's
    first snapshot to its second, so another run's changes never land in this step's list
    (delegate and decompose excepted: their sub-agents take it for their own steps)."""

    def __init__(
        self,
        workspace: Path | str,
        session_id: str,
        agent_id: str = "main",
        report: Callable[[str], None] = lambda text: None,
        max_mb: int = 0,
    ):
        self.checkpoints = Checkpoints(workspace)
        self.max_bytes = max_mb * 1024 * 1024  # 0: no cap on the shadow repository
        self.session_id = session_id
        self.agent_id = agent_id
        self.report = report
        self.noted: set[str] = set()  # notes already reported in this run
        self.held = ExitStack()  # the checkpoint lock, from before() to after()
        self.checked = False
        self.tree: str | None = None  # the workspace's files at the last snapshot, if known
        self.lost = False
        self.found: list[str] = []  # notes of the upkeep thread, reported by the next step
        self.upkeep: threading.Thread | None = None
        if self.checkpoints.repo.git_dir.is_dir():  # a workspace with checkpoints already
            self.upkeep = threading.Thread(target=self.keep_up, name="checkpoints", daemon=True)
            self.upkeep.start()

    def keep_up(self) -> None:
        """While the model is asked for its first reply: take the run's first look at the tree
        (the first changing step then finds it done; inotify keeps it current), pack the
        shadow repository when it has grown, and drop the oldest sessions' histories while it
        is over the cap (under the lock: no step is between its snapshots then)."""
        repo = self.checkpoints.repo
        with contextlib.suppress(CheckpointError, OSError):
            repo.stage_tree()
            repo.pack()
            if self.max_bytes and repo.size() > self.max_bytes:
                with self.checkpoints.locked():
                    dropped = repo.cap(self.max_bytes, self.session_id)
                cap = self.max_bytes // 2**20
                if dropped:
                    self.found.append(
                        f"the oldest {len(dropped)} session(s)' histories were dropped to keep "
                        f"the checkpoints under CHECKPOINT_MAX_MB={cap}"
                    )

    def before(self, tool: str) -> Snapshot | None:
        """The snapshot before a call of `tool`, or None when it could not be made."""
        self.held.close()  # a call that never reached after() (interrupted)
        self.note(list(self.found))
        try:
            if not self.checked:
                self.startup()
            if tool not in THROUGH_SUBAGENTS:
                self.held.enter_context(self.checkpoints.locked())
            snapshot = self.checkpoints.take(f"before {tool} in session {self.session_id}")
            if tool in THROUGH_SUBAGENTS:  # its sub-agents take the lock: keep it from pruning
                self.checkpoints.repo.hold(self.session_id, snapshot.commit)
                self.held.callback(self.checkpoints.repo.hold, self.session_id, None)
        except (CheckpointError, OSError) as exc:
            self.held.close()
            self.tree = None
            self.failed(exc)
            return None
        self.note(snapshot.notes)
        self.tree = snapshot.tree
        return snapshot

    def after(self, before: Snapshot | None, tool: str, call_id: str) -> dict:
        """What the call changed, as fields of its tool_result event: checkpoint (the snapshot
        before it), and when files changed: step, changed (paths) and diff (unified)."""
        if before is None:
            return {}
        fields: dict = {"checkpoint": before.commit}
        try:
            self.tree = None
            after = self.checkpoints.take(f"after {tool} in session {self.session_id}")
            self.tree = after.tree
            record = self.checkpoints.record(
                self.session_id, before, after, tool=tool, call_id=call_id, agent_id=self.agent_id
            )
            if record:
                diff = self.checkpoints.diff(record)
                fields.update(step=record["step"], changed=record["changed"], diff=diff)
        except (CheckpointError, OSError) as exc:
            self.failed(exc)
        finally:
            self.held.close()
        return fields

    def startup(self) -> None:
        """Once per run, before its first snapshot: heal a damaged shadow repository."""
        repo = self.checkpoints.repo
        with self.checkpoints.locked():
            repo.check()
        self.checked = True
        self.note(repo.damage)

    def failed(self, exc: Exception) -> None:
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.report(f"checkpoint failed ({cause}); the step runs, but it cannot be undone")
        if not self.lost:
            self.lost = True
            self.checkpoints.note_failure(self.session_id, cause)

    def note(self, notes: list[str]) -> None:
        for text in notes:
            if text not in self.noted:
                self.noted.add(text)
                self.report(f"checkpoint: {text}")
