"""The web API of the background-processes panel: the agent's processes with the end of their
output, and stopping one (the user's call, whichever run started it)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from lmagent.tools.processes import ProcessError, kill_process, process_views
from lmagent.tools.registry import Services


def processes_blueprint(services: Services) -> Blueprint:
    app = Blueprint("processes", __name__)

    @app.get("/api/processes")
    def processes():
        return jsonify({"processes": process_views(services)})

    @app.post("/api/processes/<process_id>/kill")
    def kill(process_id: str):
        try:
            return jsonify({"message": kill_process(services, process_id)})
        except ProcessError as exc:
            return jsonify({"error": str(exc)}), 404

    return app
