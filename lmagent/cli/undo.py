"""Review and undo from the command line: `--checkpoints`, `--undo`, `--restore` and the REPL's
/checkpoints and /undo. Each returns the text to print; a refusal is RestoreFailed, one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lmagent.checkpoints.shadow import CheckpointError
from lmagent.checkpoints.steps import Checkpoints
from lmagent.loop.restore import RestoreRefused, latest_session, restore_session, steps_of
from lmagent.sessions.store import SessionBusy, SessionNotFound


class RestoreFailed(Exception):
    """Why the listing or restore was not done, as one line for the user."""


def checkpoint_lines(workspace: Path, session_id: str | None, as_json: bool = False) -> list[str]:
    """One line per changing step of the session (the newest when None), step number first."""
    with _refusals():
        session_id = session_id or latest_session(workspace)
        steps = steps_of(workspace, session_id)
    if as_json:
        return [json.dumps(step) for step in steps]  # ASCII: safe for a terminal, valid JSON
    checkpoints = Checkpoints(workspace)
    if not steps:
        failures = checkpoints.failures(session_id)
        if failures:
            return [f"session {session_id}'s checkpoints could not be kept ({failures[-1]})"]
        return [f"session {session_id} changed no files: it has no checkpoints"]
    lost = "  (lost: the checkpoint history was damaged; this step cannot be restored)"
    return [step_line(step) + (lost if checkpoints.lost(step) else "") for step in steps]


def checkpoint_size(workspace: Path, max_mb: int) -> str:
    """How much disk the checkpoints take, and their cap."""
    size = Checkpoints(workspace).repo.size() / 2**20
    cap = f"cap {max_mb} MB, CHECKPOINT_MAX_MB" if max_mb else "no cap: CHECKPOINT_MAX_MB=0"
    return f"checkpoints: {size:.1f} MB on disk ({cap})"


def step_line(step: dict) -> str:
    when = str(step.get("time", ""))[:19].replace("T", " ")
    tool = step.get("tool", "?")
    if step.get("kind") == "restore":
        tool = f"restore (to before step {step.get('restored_step')})"
    files = step.get("changed") or []
    shown = ", ".join(files[:6]) + (f" (+{len(files) - 6} more)" if len(files) > 6 else "")
    return f"{step['step']:<3} {when}  {tool:<10}  {shown}"


def restore(workspace: Path, session_id: str | None, step: int | None, force: bool) -> str:
    """Restore to before `step` (the session's last changing step when None); what was done."""
    with _refusals():
        session_id = session_id or latest_session(workspace)
        record = restore_session(workspace, session_id, step, force)
    files = record["changed"]
    if record.get("failed"):
        return (
            f"step {record['step']} of session {session_id} is a restore that failed and "
            "changed no file: there is nothing to undo"
        )
    return (
        f"restored the files to before step {record['restored_step']} of session {session_id}: "
        f"{len(files)} file(s) changed back ({', '.join(files[:10])}"
        f"{', ...' if len(files) > 10 else ''}). This restore is step {record['step']} and "
        "can itself be undone"
    )


@contextmanager
def _refusals() -> Iterator[None]:
    """Turn every expected refusal into RestoreFailed with its text."""
    try:
        yield
    except SessionNotFound as exc:
        raise RestoreFailed(exc.args[0]) from None
    except (RestoreRefused, CheckpointError, SessionBusy) as exc:
        raise RestoreFailed(str(exc)) from None
