"""The web front end: a Flask app on the LAN that drives the same loop as the REPL.

`create_app(config, test_config=None)` builds the app; lmagent/web/main.py serves it. The API
is described in the project's contract (Web API); helpers: auth.py (sign-in, Host and origin
checks), events.py (the event stream), runs.py (runs and questions), files.py (the workspace
browser), server.py (the threaded server and its connection limits).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from flask import Flask, Response, jsonify, render_template, request, send_file

from lmagent.commands import COMMANDS
from lmagent.core.config import VERSION, Config
from lmagent.core.workspace import Workspace
from lmagent.runtime import unisolated_warning, unsandboxed_auto_refusal
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import sandbox_summary
from lmagent.scheduler.overview import overview, overview_lines
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore
from lmagent.sessions.waiting import WaitingIndex
from lmagent.web.auth import APP_CSP, COOKIE, PREVIEW_CSP, SAFE_METHODS, Guard, new_pin
from lmagent.web.events import EventHub, stream
from lmagent.web.files import FileProblem, describe_file, list_directory, raw_file, save_upload
from lmagent.web.health import ServerHealth
from lmagent.web.processes import processes_blueprint
from lmagent.web.replay import transcript_events
from lmagent.web.review import review_blueprint
from lmagent.web.runs import Busy, RunManager
from lmagent.web.server import MAX_STREAMS

ROOT = Path(__file__).resolve().parent
PUBLIC_ENDPOINTS = ("static", "login", "index")
NO_VISION = (
    "no vision model is loaded, so the agent cannot look at this image (it can still use the "
    "file); load a vision-capable model in your server, or set VISION_ENABLED=true if yours is one"
)
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
DEFAULTS = {
    "PIN": "",
    "ALLOWED_HOSTS": [],
    "UPLOAD_MAX_BYTES": 10 * 1024 * 1024,
    "SSE_HEARTBEAT": 15.0,
    "EVENT_BUFFER": 4096,
    "EVENT_BUFFER_BYTES": 8 << 20,
    "MAX_STREAMS": MAX_STREAMS,
    "MAX_FAILURES": 5,
    "FAILURE_WINDOW": 15 * 60,
    "SERVER_RECHECK": 2.0,  # seconds between probes of the LLM server for the page's header
}


@dataclass
class WebState:
    """Everything one app instance holds (app.extensions["lmagent"])."""

    config: Config
    guard: Guard
    hub: EventHub
    runs: RunManager
    workspace: Workspace

    def shutdown(self) -> None:
        self.runs.shutdown()


def create_app(config: Config, test_config: dict | None = None, *, runtime=None) -> Flask:
    """The app. `runtime` (lmagent.runtime.Runtime) gives runs the same tools, model client and
    services as the REPL; main() passes one, tests may leave it out."""
    app = Flask(__name__, root_path=str(ROOT))
    app.json.sort_keys = False  # objects keep their order, as in the event stream
    app.config.update(DEFAULTS)
    app.config.update(test_config or {})
    app.config["MAX_CONTENT_LENGTH"] = app.config["UPLOAD_MAX_BYTES"] + 64 * 1024
    app.config["PIN"] = app.config["PIN"] or config.agent_token or new_pin()
    guard = Guard(
        app.config["PIN"],
        [*app.config["ALLOWED_HOSTS"], *config.agent_allowed_hosts],
        max_failures=app.config["MAX_FAILURES"],
        window=app.config["FAILURE_WINDOW"],
        sessions_file=Workspace(config.workspace).data_dir / "web_sessions.json",
    )
    hub = EventHub(
        app.config["EVENT_BUFFER"], app.config["EVENT_BUFFER_BYTES"], app.config["MAX_STREAMS"]
    )
    runs = RunManager(config, hub, runtime)
    state = WebState(config, guard, hub, runs, Workspace(config.workspace))
    app.extensions["lmagent"] = state
    _install_checks(app, state)
    _install_pages(app, state)
    _install_api(app, state)
    _install_files(app, state)
    _install_everyday(app, state, ServerHealth(config, app.config["SERVER_RECHECK"]))
    app.register_blueprint(review_blueprint(state.workspace))
    app.register_blueprint(processes_blueprint(state.runs.services))
    return app


def _error(message: str, status: int, **extra) -> tuple[Response, int]:
    return jsonify({"error": message, **extra}), status


def _client() -> str:
    return request.remote_addr or "unknown"


# --------------------------------------------------------------------------- request checks


def _install_checks(app: Flask, state: WebState) -> None:
    guard = state.guard

    @app.before_request
    def check_request():
        if not guard.host_allowed(request.host):
            return _error("unknown host name; use the address the server printed", 400)
        origin, site = request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site")
        if not guard.same_origin(request.method, request.host, origin, site):
            return _error("cross-origin request refused", 403)
        simple_form = request.mimetype in FORM_TYPES  # what a cross-site form could send
        if request.method not in SAFE_METHODS and request.endpoint != "upload" and simple_form:
            return _error("send JSON (Content-Type: application/json)", 415)
        if request.endpoint in PUBLIC_ENDPOINTS:
            return None
        if guard.session_valid(request.cookies.get(COOKIE)):
            return None
        token = guard.bearer_token(request.headers.get("Authorization"))
        if token is None:
            return _error("sign in first", 401)
        wait = guard.retry_after(_client())
        if wait:
            return _locked(wait)
        if guard.pin_matches(token):
            return None
        guard.record_failure(_client())  # a wrong Bearer token is a failed sign-in
        return _error("wrong PIN", 401)

    @app.after_request
    def security_headers(response: Response) -> Response:
        headers = response.headers
        headers.setdefault("Content-Security-Policy", APP_CSP)
        headers.setdefault("X-Frame-Options", "DENY")
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "no-referrer"
        headers["Cross-Origin-Opener-Policy"] = "same-origin"
        headers["Cross-Origin-Resource-Policy"] = "same-origin"
        headers["Permissions-Policy"] = "camera=(), microphone=(), geolocation=()"
        if request.path.startswith("/api/") and "Cache-Control" not in headers:
            headers["Cache-Control"] = "no-store"
        return response


def _locked(wait: int) -> tuple[Response, int]:
    response, status = _error(
        f"too many failed sign-ins; try again in {wait} s", 429, retry_after=wait
    )
    response.headers["Retry-After"] = str(wait)
    return response, status


# --------------------------------------------------------------------------- pages and sign-in


def _install_pages(app: Flask, state: WebState) -> None:
    guard = state.guard

    @app.get("/")
    def index():
        if not guard.session_valid(request.cookies.get(COOKIE)):
            return render_template("login.html", version=VERSION)
        warning = unisolated_warning(state.config)
        return render_template("index.html", version=VERSION, sandbox_warning=warning)

    @app.post("/api/login")
    def login():
        wait = guard.retry_after(_client())
        if wait:
            return _locked(wait)
        body = request.get_json(silent=True)
        pin = body.get("pin") if isinstance(body, dict) else None
        if not guard.pin_matches(pin):
            guard.record_failure(_client())
            return _error("wrong PIN", 401)
        guard.clear_failures(_client())
        response = jsonify({"ok": True})
        response.set_cookie(
            COOKIE,
            guard.new_session(),
            max_age=int(guard.session_ttl),
            httponly=True,
            samesite="Strict",
            secure=request.is_secure,
            path="/",
        )
        return response

    @app.post("/api/logout")
    def logout():
        body = request.get_json(silent=True)
        if isinstance(body, dict) and body.get("everywhere") is True:
            guard.end_all_sessions()  # every device, this one included
        else:
            guard.end_session(request.cookies.get(COOKIE))
        response = jsonify({"ok": True})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict")
        return response


# --------------------------------------------------------------------------- runs and sessions


def _install_api(app: Flask, state: WebState) -> None:
    _install_run_routes(app, state.runs)
    _install_session_routes(app, state)
    _install_stream(app, state)


def _install_run_routes(app: Flask, runs: RunManager) -> None:
    """Start, stop and steer the one active run."""

    @app.post("/api/chat")
    def chat():
        body = request.get_json(silent=True) or {}
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            return _error("message is required", 400)
        session_id = body.get("session_id") or None
        if session_id is not None and not isinstance(session_id, str):
            return _error("session_id must be a string", 400)
        try:
            run = runs.start(
                message,
                session_id,
                plan=bool(body.get("plan")),
                client_id=str(body.get("client_id") or ""),
            )
        except Busy as exc:
            return _error(str(exc), 429, run_id=exc.run.run_id, session_id=exc.run.session.id)
        except KeyError as exc:
            return _error(str(exc.args[0] if exc.args else exc), 404)
        return jsonify({"run_id": run.run_id, "session_id": run.session.id}), 202

    @app.post("/api/stop")
    def stop():
        return jsonify({"stopping": runs.stop()})

    @app.post("/api/permission")
    def permission():
        body = request.get_json(silent=True) or {}
        try:
            answered = runs.answer(str(body.get("request_id") or ""), str(body.get("decision")))
        except ValueError as exc:
            return _error(str(exc), 400)
        if not answered:
            return _error("no such pending permission request", 404)
        return jsonify({"ok": True})

    @app.route("/api/mode", methods=["GET", "POST"])
    def mode():
        if request.method == "POST":
            body = request.get_json(silent=True) or {}
            refusal = unsandboxed_auto_refusal(runs.config, str(body.get("mode")))
            if refusal:
                return _error(refusal, 400)
            try:
                runs.set_mode(str(body.get("mode")))
            except ValueError as exc:
                return _error(str(exc), 400)
        return jsonify({"mode": runs.status()["mode"], "default_mode": runs.mode})

    @app.get("/api/status")
    def status():
        info = {"version": VERSION, **runs.status()}
        info["sandbox_warning"] = unisolated_warning(runs.config)
        if request.args.get("detail") == "1":
            info["details"] = runs.details() + overview_lines(runs.config)
        return jsonify(info)

    @app.get("/api/commands")
    def commands():
        """The slash commands the chat box takes: the REPL's table (lmagent/commands.py)."""
        table = [{"name": c.name, "title": c.title, "help": c.help} for c in COMMANDS]
        return jsonify({"commands": table})

    @app.get("/api/scheduler")
    def scheduler():
        """The scheduler panel: the directory inbox's state, or the distributed queue's."""
        return jsonify(overview(runs.config))


def _install_session_routes(app: Flask, state: WebState) -> None:
    """Saved sessions, from disk."""

    @app.get("/api/sessions")
    def sessions():
        return jsonify({"sessions": SessionStore(state.workspace).list()})

    @app.get("/api/sessions/<session_id>")
    def session(session_id: str):
        """Its transcript; with ?events=1 instead the events that draw it as a live run drew
        it (the page's view), of its first `messages` messages when given."""
        try:
            found = SessionStore(state.workspace).open(session_id)
        except KeyError as exc:
            return _error(str(exc.args[0] if exc.args else exc), 404)
        found.close()
        answer = {"meta": found.meta, "state": found.state.to_dict()}
        if request.args.get("events") != "1":
            return jsonify({**answer, "transcript": found.transcript})
        shown = found.transcript[: request.args.get("messages", type=int)]
        return jsonify({**answer, "events": transcript_events(shown)})


def _install_stream(app: Flask, state: WebState) -> None:
    """The event stream, with replay from Last-Event-ID."""
    runs = state.runs

    @app.get("/api/stream")
    def events():
        last = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
        cursor, prelude = runs.open_stream(last, request.args.get("from") == "run")
        disconnected = request.environ.get("waitress.client_disconnected") or (lambda: False)
        body = stream(
            state.hub,
            cursor,
            prelude,
            runs.resync,
            heartbeat=float(app.config["SSE_HEARTBEAT"]),
            disconnected=disconnected,
        )
        response = Response(body, mimetype="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"
        return response


# --------------------------------------------------------------------------- files


def _install_files(app: Flask, state: WebState) -> None:
    workspace = state.workspace

    @app.errorhandler(FileProblem)
    def file_problem(exc: FileProblem):
        return _error(str(exc), exc.status)

    @app.errorhandler(413)
    def too_large(exc):
        limit = app.config["UPLOAD_MAX_BYTES"] // (1024 * 1024)
        return _error(f"the upload is too large (limit {limit} MB)", 413)

    @app.get("/api/files")
    def files():
        return jsonify(list_directory(workspace, request.args.get("path")))

    @app.get("/api/file")
    def file():
        path = request.args.get("path")
        if request.args.get("raw") != "1":
            return jsonify(describe_file(workspace, path))
        raw = raw_file(workspace, path)
        download = request.args.get("download") == "1"
        name = download_name(str(path))
        response = send_file(
            raw.handle,
            mimetype=raw.mimetype,
            max_age=0,
            etag=False,
            as_attachment=download,
            download_name=name,
        )
        if not download:
            response.headers["Content-Disposition"] = "inline"
        response.headers["Cache-Control"] = "no-store"
        if raw.sandboxed:
            response.headers["Content-Security-Policy"] = PREVIEW_CSP
            response.headers["X-Frame-Options"] = "SAMEORIGIN"
        return response

    @app.post("/api/upload")
    def upload():
        storage = request.files.get("file")
        if storage is None:
            return _error("send the image as the multipart field 'file'", 400)
        limit = app.config["UPLOAD_MAX_BYTES"]
        data = storage.stream.read(limit + 1)
        if len(data) > limit:
            return too_large(None)
        saved = save_upload(workspace, storage.filename or "", data)
        runtime = state.runs.runtime
        if runtime is None or not runtime.vision_model:
            saved["warning"] = NO_VISION
        return jsonify(saved), 201


def download_name(path: str) -> str:
    """The file's name for Content-Disposition: control characters (a CR/LF would split the
    header) become "_"; send_file writes the rest as RFC 6266 filename* when it is not ASCII."""
    name = "".join("_" if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 else c for c in path)
    return PurePosixPath(name).name or "download"


# --------------------------------------------------------------------------- header, sessions


def _install_everyday(app: Flask, state: WebState, health: ServerHealth) -> None:
    """What the header shows (server, model, workspace, sandbox, vision), and renaming and
    deleting sessions (never while a run holds them)."""
    sandbox: list[str] = []  # described once, on first use (it may ask Docker)

    @app.get("/api/server")
    def server():
        if not sandbox:
            sandbox.append(sandbox_summary(SandboxConfig.from_config(state.config)))
        runtime = state.runs.runtime
        return jsonify(
            {
                **health.current(),
                "workspace": str(state.config.workspace),
                "sandbox": sandbox[0],
                "vision": bool(runtime is not None and runtime.vision_model),
            }
        )

    @app.route("/api/sessions/<session_id>", methods=["PATCH", "DELETE"])
    def change_session(session_id: str):
        store = SessionStore(state.workspace)
        try:
            if request.method == "DELETE":
                store.delete(session_id)
                WaitingIndex(state.config.workspace).remove(session_id)  # never woken once gone
                return jsonify({"deleted": session_id})
            body = request.get_json(silent=True)
            title = body.get("title") if isinstance(body, dict) else None
            if not isinstance(title, str) or not title.strip() or len(title) > 200:
                return _error("title must be text of 1 to 200 characters", 400)
            return jsonify(store.rename(session_id, " ".join(title.split())))
        except SessionBusy:
            return _error("the session is running; stop it first", 409)
        except SessionNotFound as exc:
            return _error(str(exc.args[0]), 404)
