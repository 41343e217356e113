"""Undoing a small model's attempt (rule fresh_start, lmagent.loop.attempts decides when): its
files put back as they were at a checkpoint of the session, as a step of the session that
undoing reverses, and the history the model is sent cut back to the attempt's opening (the
note that says so is the transcript's, not sent). A run that ends unfinished leaves the files
of its closest check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lmagent.checkpoints.recorder import StepRecorder
from lmagent.checkpoints.shadow import CheckpointError
from lmagent.loop.attempts import Attempts
from lmagent.loop.endings import Blocked, LimitsExceeded, RunEnded
from lmagent.loop.history import UNSENT_NOTE
from lmagent.loop.prompts import closest_note, fresh_start_note
from lmagent.loop.restore import RestoreRefused, undo_steps_since
from lmagent.sessions.store import Session
from lmagent.tools.processes import stop_run_processes
from lmagent.tools.registry import ToolContext


class AttemptUndo:
    """Putting an attempt's files back, for one run: `afresh` resets what the run has noted of
    the attempt (its nudges, checks, progress) when the task is begun again."""

    def __init__(
        self,
        workspace: Path,
        session: Session,
        ctx: ToolContext,
        checkpoints: StepRecorder,
        attempts: Attempts,
        say: Callable[[str], None],
    ):
        self.workspace, self.session, self.ctx = workspace, session, ctx
        self.checkpoints, self.attempts, self.say = checkpoints, attempts, say

    def steps_taken(self) -> int:
        """The session's checkpoint steps so far (the last one's number)."""
        steps = self.checkpoints.checkpoints.steps(self.session.id)
        return steps[-1]["step"] if steps else 0

    def start_again(self, afresh: Callable[[], None], why: str = "") -> bool:
        """Undo the attempt whose check keeps failing (or that went nowhere: `why`) and begin
        the task again from the history it began with; False when its files cannot be put back
        (the run goes on as it was)."""
        attempts = self.attempts
        why = why or f"its check kept failing ({attempts.failed.last_line()})"
        start, revision = attempts.opening
        try:
            if revision != self.session.revision:  # compacted since: its start is gone
                raise RestoreRefused("the history was compacted during the attempt")
            put_back, tree = self.put_back_since(attempts.steps_before)
        except (RestoreRefused, CheckpointError) as exc:
            self.say(f"cannot begin the task again ({exc}); going on with this attempt")
            attempts.give_up()
            return False
        self.checkpoints.tree = tree or self.checkpoints.tree
        told = fresh_start_note(why, put_back)
        note = {"role": "user", "content": told, "note": UNSENT_NOTE}  # for the transcript
        self.session.record_compaction(start, len(self.session.history), note)
        attempts.restarted(self.session.revision, self.steps_taken())
        afresh()
        self.say(f"{why}: attempt undone, task begun again")
        return True

    def closest_left(self, ended: RunEnded) -> RunEnded:
        """A small model's run that ends unfinished (blocked, not verified, out of steps) leaves
        the files as they were at its closest check, not as a later, worse attempt left them."""
        closest = self.attempts.closest_step()
        if closest is None or not isinstance(ended, (Blocked, LimitsExceeded)):
            return ended
        check, step = closest
        try:
            put_back, _ = self.put_back_since(step)
        except (RestoreRefused, CheckpointError) as exc:
            self.say(f"the files stay as the last attempt left them ({exc})")
            return ended
        if put_back:
            note = closest_note(check.last_line(), put_back)
            self.say(note)
            ended.message = f"{ended.message}; {note}"
        return ended

    def put_back_since(self, step: int) -> tuple[list[str], str]:
        """Stop the run's background processes and put the files back as they were at the
        session's checkpoint `step`, as a step of the session (lmagent.loop.restore): what was
        put back, and the new tree. Raises RestoreRefused or CheckpointError."""
        stop_run_processes(self.ctx)
        return undo_steps_since(self.workspace, self.session.id, step)
