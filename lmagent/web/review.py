"""The web API of review and undo: a session's checkpoints with their diffs, what restoring a
step would change (for the confirmation), and the restore itself (refused while a run is
active on the workspace, or over files edited since unless forced)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from lmagent.checkpoints.objects import shown
from lmagent.checkpoints.shadow import CheckpointError
from lmagent.checkpoints.steps import Checkpoints
from lmagent.core.workspace import Workspace
from lmagent.loop.restore import RestoreRefused, plan_restore, restore_session, steps_of
from lmagent.sessions.store import SessionBusy, SessionNotFound


def review_blueprint(workspace: Workspace) -> Blueprint:
    """The routes; their refusals are JSON errors (409 refused, 404 unknown session)."""
    app = Blueprint("review", __name__)
    root = workspace.root

    @app.get("/api/sessions/<session_id>/checkpoints")
    def checkpoints(session_id: str):
        steps = steps_of(root, session_id)
        shadow = Checkpoints(root)
        return jsonify({"steps": [{**_shown(step), "diff": shadow.diff(step)} for step in steps]})

    @app.get("/api/sessions/<session_id>/checkpoints/<int:step>")
    def restore_plan(session_id: str, step: int):
        plan = plan_restore(root, session_id, step)
        files, edited = _names(plan.files), _names(plan.edited)
        return jsonify({"step": _shown(plan.step), "files": files, "edited": edited})

    @app.post("/api/restore")
    def restore():
        body = request.get_json(silent=True) or {}
        session_id, step = body.get("session_id"), body.get("step")
        if not isinstance(session_id, str) or not session_id:
            return _error("session_id is required", 400)
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            return _error("step must be a step number (see the session's checkpoints)", 400)
        record = restore_session(root, session_id, step, force=body.get("force") is True)
        return jsonify(_shown(record))

    @app.errorhandler(RestoreRefused)
    def refused(exc: RestoreRefused):
        return _error(str(exc), 409)

    @app.errorhandler(SessionBusy)
    def busy(exc: SessionBusy):
        return _error(str(exc), 409)

    @app.errorhandler(SessionNotFound)
    def unknown(exc: SessionNotFound):
        return _error(exc.args[0], 404)

    @app.errorhandler(CheckpointError)
    def failed(exc: CheckpointError):
        return _error(f"checkpoints failed: {exc}", 500)

    return app


def _shown(step: dict) -> dict:
    """A step with its paths as text (a name that is not UTF-8 with its odd bytes as \\xNN)."""
    return {**step, "changed": _names(step.get("changed") or [])}


def _names(paths: list[str]) -> list[str]:
    return [shown(path) for path in paths]


def _error(message: str, status: int) -> tuple[Response, int]:
    return jsonify({"error": message}), status
