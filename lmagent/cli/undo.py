"""Review and undo from the command line: `--checkpoints`, `--undo`, `--restore` and the REPL's
/checkpoints and /undo. Each returns the text to print; a refusal is RestoreFailed, one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lmagent.checkpoints.objects import shown
from lmagent.checkpoints.shadow import CheckpointError
from lmagent.checkpoints.steps import Checkpoints
from lmagent.loop.restore import RestoreRefused, latest_session, restore_session
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore


class RestoreFailed(Exception):
    """Why the listing or restore was not done, as one line for the user."""


def checkpoint_lines(workspace: Path, session_id: str | None, as_json: bool = False) -> list[str]:
    """One line per changing step of the session (the newest when None), step number first,
    and a line for each call whose checkpoint was lost, in the order they ran."""
    with _refusals():
        session_id = SessionStore(workspace).resolve(session_id or latest_session(workspace))
    checkpoints = Checkpoints(workspace)
    steps = checkpoints.steps(session_id)
    if as_json:
        return [json.dumps(step) for step in steps]  # ASCII: safe for a terminal, valid JSON
    if not steps:
        failures = checkpoints.failures(session_id)
        if failures:
            return [f"session {session_id}'s checkpoints could not be kept ({failures[-1]})"]
        return [f"session {session_id} changed no files: it has no checkpoints"]
    lost = "  (lost: the checkpoint history was damaged; this step cannot be restored)"
    lines = []
    for record in checkpoints.records(session_id):
        if isinstance(record.get("step"), int):
            lines.append(step_line(record) + (lost if checkpoints.lost(record) else ""))
        elif record.get("kind") == "failed":
            lines.append(lost_line(record))
    return lines


def checkpoint_size(workspace: Path, max_mb: int) -> str:
    """How much disk the checkpoints take, and their cap."""
    size = Checkpoints(workspace).repo.size() / 2**20
    cap = f"cap {max_mb} MB, CHECKPOINT_MAX_MB" if max_mb else "no cap: CHECKPOINT_MAX_MB=0"
    return f"checkpoints: {size:.1f} MB on disk ({cap})"


def step_line(step: dict) -> str:
    tool = step.get("tool", "?")
    if step.get("kind") == "restore":
        tool = f"restore (to before step {step.get('restored_step')})"
    files = [shown(path) for path in step.get("changed") or []]
    names = ", ".join(files[:6]) + (f" (+{len(files) - 6} more)" if len(files) > 6 else "")
    return f"{step['step']:<3} {_when(step)}  {tool:<10}  {names}"


def lost_line(record: dict) -> str:
    """A call whose checkpoint was lost: no step number, it cannot be restored."""
    tool = str(record.get("tool", "?"))
    return f"{'-':<3} {_when(record)}  {tool:<10}  checkpoint lost: {record.get('cause')}"


def _when(record: dict) -> str:
    return str(record.get("time", ""))[:19].replace("T", " ")


def restore(workspace: Path, session_id: str | None, step: int | None, force: bool) -> str:
    """Restore to before `step` (the session's last changing step when None); what was done."""
    with _refusals():
        session_id = session_id or latest_session(workspace)
        record = restore_session(workspace, session_id, step, force)
    files = [shown(path) for path in record["changed"]]
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
