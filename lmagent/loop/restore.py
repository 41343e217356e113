"""Restoring the workspace to a session's checkpoint, as every front end asks for it.

A restore is refused while any run is active on the workspace (it would pull files from under
it), stops every sandboxed process of the workspace first (one left behind could swap a folder
for a link out of it while the host writes), holds the session's lock while it works, and is
noted in the session's transcript, so a model that continues the session is told which files
went back.
"""

from __future__ import annotations

from pathlib import Path

from lmagent.checkpoints.objects import shown
from lmagent.checkpoints.steps import Checkpoints, RestorePlan, RestoreRefused
from lmagent.sandbox.select import SandboxUnavailable, quiesce
from lmagent.sessions.store import SessionStore

__all__ = [
    "RestoreRefused",
    "latest_session",
    "plan_restore",
    "restore_session",
    "steps_of",
    "undo_steps_since",
]


def latest_session(workspace: Path | str) -> str:
    """The newest session's id (what `--undo` and `--checkpoints` mean without one)."""
    for meta in SessionStore(workspace).list():
        if meta.get("status") != "damaged":
            return meta["id"]
    raise RestoreRefused("there is no session in this workspace yet")


def steps_of(workspace: Path | str, session_id: str) -> list[dict]:
    """The session's changing steps, oldest first (raises SessionNotFound)."""
    session_id = SessionStore(workspace).resolve(session_id)
    return Checkpoints(workspace).steps(session_id)


def plan_restore(workspace: Path | str, session_id: str, step: int | None = None) -> RestorePlan:
    """What restoring to before `step` would change (for a confirmation)."""
    session_id = SessionStore(workspace).resolve(session_id)
    return Checkpoints(workspace).plan(session_id, step)


def restore_session(
    workspace: Path | str, session_id: str, step: int | None = None, force: bool = False
) -> dict:
    """Restore the workspace to before `step` of the session (its last changing step when
    None); the restore's record. Raises RestoreRefused, SessionNotFound or CheckpointError."""
    store = SessionStore(workspace)
    session_id = store.resolve(session_id)
    refuse_while_running(store)
    with store.lock(session_id, wait=0):
        stopped = stop_sandboxed_processes(workspace)
        record = Checkpoints(workspace).restore(session_id, step, force)
        record["stopped_processes"] = stopped
        if not record["changed"]:
            return record  # a failed restore undone: nothing went back
        session = store.open(session_id)
        try:
            # `note`: told to the model by the agent, not said by the user (never sent: the
            # client sends role and content only); the web page shows it as a note
            session.append({"role": "user", "content": restore_note(record), "note": "restore"})
        finally:
            session.close()
    return record


def refuse_while_running(store: SessionStore, own: str = "") -> None:
    """RestoreRefused while a run other than the session `own`'s is active on the workspace."""
    others = (meta["id"] for meta in store.list() if meta["id"] != own)
    active = [session_id for session_id in others if store.is_busy(session_id)]
    if active:
        raise RestoreRefused(
            f"a run is active on this workspace (session {active[0]}); stop it or wait for "
            "it to finish, then restore"
        )


def undo_steps_since(workspace: Path | str, session_id: str, since: int) -> tuple[list[str], str]:
    """For the run of `session_id` itself (it holds the session): put back the files its steps
    after step `since` changed, as a restore recorded as a step (undoing it brings them back).
    Returns the paths put back and the workspace's tree after; RestoreRefused (or
    CheckpointError) when it cannot be done: another run is active, someone else edited the
    files since the last step, the checkpoints are lost."""
    checkpoints = Checkpoints(workspace)
    steps = checkpoints.steps(session_id)
    first = next((s["step"] for s in steps if s["step"] > since and s.get("changed")), None)
    if first is None or not checkpoints.plan(session_id, first).files:
        return [], ""
    refuse_while_running(SessionStore(workspace), own=session_id)
    stop_sandboxed_processes(workspace)
    record = checkpoints.restore(session_id, first)
    with checkpoints.repo.reading():
        return record["changed"], checkpoints.repo.tree_of(record["after"])


def stop_sandboxed_processes(workspace: Path | str) -> list[str]:
    """No sandboxed process of the workspace may be alive while the host writes there (one left
    behind could swap a folder for a link out of it); those stopped, described."""
    try:
        return quiesce(workspace)
    except SandboxUnavailable as exc:
        raise RestoreRefused(f"cannot make sure no sandboxed process is running: {exc}") from None


def restore_note(record: dict) -> str:
    files = [shown(path) for path in record["changed"]]
    names = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    return (
        f"[The user restored the workspace files to how they were before step "
        f"{record['restored_step']}. These files went back: {names}. Read a file again before "
        "you change it; anything done since that step is undone.]"
    )
