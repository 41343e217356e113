"""Checkpoints around the calls of one run: a snapshot before each call that can change files,
another after it, and the step recorded with what it changed.

A checkpoint that cannot be made (disk full, permission denied, no git, anything the workspace
holds that a snapshot cannot read) is reported through `report`, left in the session's log as a
lost checkpoint of that call, and the call runs anyway: the run goes on, that step just cannot
be undone, and the steps recorded before it still can.

CHECKPOINT_MAX_MB holds during the run: the bytes the snapshots add are counted, and when they
take the shadow repository over the cap the oldest sessions' histories are dropped; when this
session's own history is over it alone, the run's later calls get no checkpoint (each a lost
checkpoint saying so).

Paths go out to events (the model, the terminal, the web) as text (objects.shown): a name that
is not UTF-8 is shown with its odd bytes as `\\xNN`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from lmagent.checkpoints.objects import shown
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
        self.measured: tuple[int, int] | None = None  # (repository bytes, store.written) then
        self.full = False  # this session's own history is over the cap: no more checkpoints
        self.found: list[str] = []  # notes of the upkeep thread, reported by the next step
        self.upkeep: threading.Thread | None = None
        if self.checkpoints.repo.git_dir.is_dir():  # a workspace with checkpoints already
            self.upkeep = threading.Thread(target=self.keep_up, name="checkpoints", daemon=True)
            self.upkeep.start()

    def keep_up(self) -> None:
        """While the model is asked for its first reply: take the run's first look at the tree
        (the first changing step then finds it done; inotify keeps it current), pack the
        shadow repository when it has grown, and keep it under the cap."""
        repo = self.checkpoints.repo
        with contextlib.suppress(CheckpointError, OSError):
            repo.stage_tree()
            with self.checkpoints.locked():  # never beside another run's cap: its repack and
                repo.pack()  # prune, with this one's, lost a session's kept history (CI)
            if self.max_bytes:
                self.cap()

    def cap(self) -> None:
        """Drop the oldest sessions' histories (not this one's) while the repository is over
        the cap, under the lock (no step is between its snapshots then), and measure it."""
        repo = self.checkpoints.repo
        with self.checkpoints.locked():
            dropped = repo.cap(self.max_bytes, self.session_id)
            self.measured = (repo.size(), repo.store.written)
        if dropped:
            self.found.append(
                f"the oldest {len(dropped)} session(s)' histories were dropped to keep "
                f"the checkpoints under CHECKPOINT_MAX_MB={self.max_bytes // 2**20}"
            )

    def over_cap(self) -> bool:
        """Whether the repository is over the cap, by the bytes snapshots added since it was
        last measured (measured again, and capped, when that estimate is over)."""
        if not self.max_bytes:
            return False
        if self.measured and not self.full:
            size, written = self.measured
            if size + self.checkpoints.repo.store.written - written <= self.max_bytes:
                return False
        if not self.full:
            self.cap()
            self.full = self.measured[0] > self.max_bytes
        return self.full

    def before(self, tool: str) -> Snapshot | None:
        """The snapshot before a call of `tool`, or None when it could not be made."""
        self.held.close()  # a call that never reached after() (interrupted)
        self.note(list(self.found))
        try:
            if not self.checked:
                self.startup()
            if tool not in THROUGH_SUBAGENTS:
                self.held.enter_context(self.checkpoints.locked())
            if self.over_cap():
                raise CheckpointError(
                    f"this session's checkpoints reached CHECKPOINT_MAX_MB="
                    f"{self.max_bytes // 2**20}; no more are taken in this run"
                )
            snapshot = self.checkpoints.take(f"before {tool} in session {self.session_id}")
            if tool in THROUGH_SUBAGENTS:  # its sub-agents take the lock: keep it from pruning
                self.checkpoints.repo.hold(self.session_id, snapshot.commit)
                self.held.callback(self.checkpoints.repo.hold, self.session_id, None)
        except Exception as exc:  # a checkpoint never ends the run: the step's is lost
            self.held.close()
            self.tree = None
            self.failed(exc, tool=tool, agent_id=self.agent_id)
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
                changed = [shown(path) for path in record["changed"]]
                diff = self.checkpoints.diff(record)
                fields.update(step=record["step"], changed=changed, diff=diff)
        except Exception as exc:  # a checkpoint never ends the run: the step's is lost
            self.failed(exc, tool=tool, call_id=call_id, agent_id=self.agent_id)
            return {}
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

    def failed(self, exc: Exception, **call) -> None:
        """Report a lost checkpoint and leave it in the session's log (`call`: its tool...)."""
        if isinstance(exc, OSError) and exc.strerror:
            cause = exc.strerror
        elif isinstance(exc, (CheckpointError, OSError)):
            cause = str(exc)
        else:
            cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.report(f"checkpoint failed ({cause}); the step runs, but it cannot be undone")
        self.checkpoints.note_failure(self.session_id, cause, **call)

    def note(self, notes: list[str]) -> None:
        for text in notes:
            if text not in self.noted:
                self.noted.add(text)
                self.report(f"checkpoint: {text}")
