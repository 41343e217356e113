"""Runs started from the browser: one at a time, in a background thread, on the shared loop.

`RunManager` turns the loop's events into numbered SSE frames (events.EventHub), answers
the loop's permission questions from POST /api/permission, and stops a run on POST /api/stop.
It also keeps, per run, what a page needs to pick up after missing events: the text of the
reply being streamed and the questions still waiting for an answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lmagent.core.config import PERMISSION_MODES, Config
from lmagent.core.status import STATUS_ERROR, STATUS_RUNNING
from lmagent.core.stop import StopToken
from lmagent.core.workspace import Workspace
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import run_agent
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import sandbox_summary
from lmagent.sessions.store import Session, SessionBusy, SessionStore
from lmagent.tools.files import change_preview
from lmagent.tools.registry import Services
from lmagent.web.events import EventHub, frame
from lmagent.web.server import trim_memory

log = logging.getLogger("lmagent.web")

DECISIONS = ("allow", "deny", "auto")
PARTIAL_LIMIT = 200_000  # characters of the reply in progress kept for a resyncing page
EVENT_FIELD_LIMIT = 24_000  # characters of a tool's arguments/result sent over the stream


class Busy(Exception):
    """A run is already active."""

    def __init__(self, run: Run):
        super().__init__("a run is already active; wait for it to finish or stop it")
        self.run = run


@dataclass
class Question:
    """A permission request waiting for the browser."""

    request_id: str
    tool: str
    arguments: object
    diff: str = ""  # what a write or edit would change, for the card
    answered: threading.Event = field(default_factory=threading.Event)
    decision: str = ""

    def as_event(self, session_id: str) -> dict:
        return {
            "type": "permission_request",
            "session_id": session_id,
            "request_id": self.request_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "diff": self.diff,
        }


class Run:
    """One browser-started run of the loop over one session."""

    def __init__(self, session: Session, message: str, mode: str, ask, *, resumed: bool):
        self.run_id = secrets.token_hex(6)
        self.session = session
        self.message = message
        self.resumed = resumed
        self.base_messages = len(session.transcript)
        self.gate = PermissionGate(mode, ask)
        self.stop = StopToken()
        self.started = time.time()
        self.ended: float | None = None
        self.client_id = ""
        self.first_event = 0
        self.iterations = 0
        self.max_iterations = 0
        self.status = STATUS_RUNNING
        self.ending: dict | None = None
        self.partial = ""
        self.thinking = ""
        self.questions: dict[str, Question] = {}
        self.finished = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.status == STATUS_RUNNING

    @property
    def elapsed(self) -> float:
        """Seconds the run has taken: until now, or until it ended."""
        return round((self.ended or time.time()) - self.started, 3)

    def info(self) -> dict:
        return {
            "run_id": self.run_id,
            "session_id": self.session.id,
            "status": self.status,
            "active": self.active,
            "started": datetime.fromtimestamp(self.started, timezone.utc).isoformat(),
            "elapsed": self.elapsed,
            "iterations": self.iterations,
            "max_iterations": self.max_iterations,
            "mode": self.gate.mode,
            "base_messages": self.base_messages,
            "client_id": self.client_id,
            "ending": self.ending,
            "pending": [q.as_event(self.session.id) for q in self.questions.values()],
        }

    def track(self, event: dict) -> None:
        """Follow the main agent's progress (sub-agent events carry an agent_id)."""
        if event.get("agent_id"):
            return
        kind = event.get("type")
        if kind == "token":
            self.partial = (self.partial + str(event.get("text", "")))[-PARTIAL_LIMIT:]
        elif kind == "thinking":
            self.thinking = (self.thinking + str(event.get("text", "")))[-PARTIAL_LIMIT:]
        elif kind in ("iteration", "tool_call"):
            self.partial = self.thinking = ""
            if kind == "iteration":
                self.iterations = int(event.get("n") or 0)
                self.max_iterations = int(event.get("max") or 0)
        elif kind == "done":
            self.status = str(event.get("status") or STATUS_ERROR)
            self.ended = self.started + float(event["elapsed"])
            keys = ("status", "message", "wait_until", "summary", "iterations", "tokens", "elapsed")
            self.ending = {k: event.get(k) for k in keys}


class RunManager:
    """Starts, tracks, stops and answers the browser's runs (one at a time)."""

    def __init__(self, config: Config, hub: EventHub, runtime=None):
        """`runtime` (lmagent.runtime.Runtime) supplies the tool set, client and services every
        front end shares; without it runs get the loop's defaults."""
        self.config = config
        self.hub = hub
        self.runtime = runtime
        self.services = runtime.services if runtime is not None else Services(config)
        self.mode = config.permission_mode
        self.active: Run | None = None
        self.last: Run | None = None
        self._lock = threading.RLock()
        self._model: str | None = None
        self._probing = False

    # ------------------------------------------------------------------ events

    def _sink(self, run: Run, event: dict) -> None:
        event = shrink_event(event)
        if event.get("type") == "session" and not event.get("agent_id"):
            event = {**event, "resumed": run.resumed}  # we create new sessions ourselves
        if event.get("type") == "done" and not event.get("agent_id"):
            event = {**event, "elapsed": round(time.time() - run.started, 3)}  # the run's time
        with self._lock:
            run.track(event)
            if event.get("type") == "done" and not event.get("agent_id"):
                if self.active is run:
                    self.active = None  # a new chat may start as soon as the page sees "done"
                for question in run.questions.values():
                    question.answered.set()
            self.hub.publish(event)

    # ------------------------------------------------------------------ runs

    def start(
        self, message: str, session_id: str | None = None, *, plan: bool = False, client_id=""
    ) -> Run:
        """Start a run (KeyError: no such session; Busy: one is active)."""
        message = message.strip()
        if not message:
            raise ValueError("the message is empty")
        previous = self.last
        if previous is not None and self.active is None:
            previous.finished.wait(5)  # its thread is only closing the session file
        with self._lock:
            if self.active is not None:
                raise Busy(self.active)
            workspace = Workspace(self.config.workspace)
            workspace.ensure()
            store = SessionStore(workspace)
            if session_id:
                session = store.open(session_id)
            else:
                session = store.create(message, source="web", mode=self.mode)
            run = Run(session, message, self.mode, None, resumed=bool(session_id))
            run.gate.ask = lambda tool, arguments: self.ask(run, tool, arguments)
            run.client_id = str(client_id or "")[:64]
            run.first_event = self.hub.publish(
                {
                    "type": "run",
                    "session_id": session.id,
                    "run_id": run.run_id,
                    "message": message,
                    "client_id": run.client_id,
                    "resumed": run.resumed,
                    "base_messages": run.base_messages,
                    "mode": run.gate.mode,
                    "plan": plan,
                }
            )
            self.active = self.last = run
        run.thread = threading.Thread(
            target=self._drive, args=(run, plan), name=f"web-run-{run.run_id}", daemon=True
        )
        run.thread.start()
        return run

    def _drive(self, run: Run, plan: bool) -> None:
        try:
            options = self.runtime.run_options() if self.runtime is not None else {}
            options.setdefault("services", self.services)
            run_agent(
                self.config,
                run.message,
                session=run.session,
                session_id=run.session.id if run.resumed else None,
                sink=lambda event: self._sink(run, event),
                gate=run.gate,
                stop=run.stop,
                plan_first=plan,
                source="web",
                **options,
            )
        except SessionBusy as exc:  # another process runs this session: leave its files alone
            self._fail(run, str(exc), save=False)
        except Exception as exc:  # a bug below us: the page still gets a clear ending
            log.exception("the run %s failed", run.run_id)
            self._fail(run, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                if self.active is run:
                    self.active = None
            run.partial = run.thinking = ""
            trim_memory()
            run.finished.set()

    def _fail(self, run: Run, message: str, save: bool = True) -> None:
        if save:
            with contextlib.suppress(Exception):
                run.session.save_meta(status=STATUS_ERROR, error=message)
        if run.active:
            base = {"session_id": run.session.id}
            self._sink(run, {**base, "type": "error", "message": message})
            self._sink(
                run,
                {
                    **base,
                    "type": "done",
                    "status": STATUS_ERROR,
                    "message": message,
                    "iterations": run.iterations,
                    "tokens": run.session.meta.get("tokens", 0),
                    "wait_until": None,
                },
            )

    def stop(self) -> bool:
        """Stop the active run: the LLM stream, any command and pending questions end."""
        with self._lock:
            run = self.active
            if run is None:
                return False
        run.stop.stop("stopped by the user")
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        run = self.active
        if run is not None:
            run.stop.stop("the web server is shutting down")
            run.finished.wait(timeout)
        self.hub.close()
        with contextlib.suppress(Exception):
            if self.runtime is not None:
                self.runtime.close()
            else:
                self.services.close()

    # ------------------------------------------------------------------ permissions

    def ask(self, run: Run, tool: str, arguments: object) -> str:
        """Called by the loop: publish a permission_request and wait for the browser."""
        change = change_preview(Workspace(self.config.workspace), tool, arguments)
        question = Question(secrets.token_hex(8), tool, _jsonable(arguments), change)
        with self._lock:
            run.questions[question.request_id] = question
            self.hub.publish(shrink_event(question.as_event(run.session.id)))
        with run.stop.on_stop(question.answered.set):
            question.answered.wait()
        decision = question.decision if not run.stop.stopped else "deny"
        decision = decision or "deny"
        with self._lock:
            run.questions.pop(question.request_id, None)
            self.hub.publish(
                {
                    "type": "permission_answered",
                    "session_id": run.session.id,
                    "request_id": question.request_id,
                    "decision": decision,
                }
            )
            if decision == "auto":
                self.hub.publish({"type": "mode", "session_id": run.session.id, "mode": "auto"})
        return decision

    def answer(self, request_id: str, decision: str) -> bool:
        """Answer a pending question; False when there is no such question (any more)."""
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}")
        with self._lock:
            run = self.active
            question = run.questions.get(request_id) if run else None
            if question is None or question.answered.is_set():
                return False
            question.decision = decision
            question.answered.set()
            return True

    def set_mode(self, mode: str) -> str:
        """Mode for the next runs, and for the active run from now on."""
        if mode not in PERMISSION_MODES:
            raise ValueError(f"mode must be one of {', '.join(PERMISSION_MODES)}")
        with self._lock:
            self.mode = mode
            session_id = None
            if self.active is not None:
                self.active.gate.mode = mode
                session_id = self.active.session.id
            self.hub.publish({"type": "mode", "session_id": session_id, "mode": mode})
        return mode

    # ------------------------------------------------------------------ state for pages

    def status(self) -> dict:
        with self._lock:
            active, last = self.active, self.last
            return {
                "mode": active.gate.mode if active else self.mode,
                "default_mode": self.mode,
                "model": self.model_name(),
                "llm_url": self.config.llm_url,
                "workspace": str(self.config.workspace),
                "run": active.info() if active else None,
                "last_run": last.info() if last else None,
                "streams": self.hub.streams,
                "last_event_id": self.hub.event_id(self.hub.last),
            }

    def model_name(self) -> str:
        """The configured model, or the one the server reports (probed once, in the background)."""
        if self.config.llm_model:
            return self.config.llm_model
        if self.runtime is not None:
            return self.runtime.model.name
        if self._model is None and not self._probing:
            self._probing = True
            threading.Thread(target=self._probe, name="web-model-probe", daemon=True).start()
        return self._model or ""

    def details(self) -> list[str]:
        """Longer status lines (sandbox, MCP, vision) for the /status command."""
        if self.runtime is not None:
            return self.runtime.status_lines()
        return [f"sandbox {sandbox_summary(SandboxConfig.from_config(self.config))}"]

    def _probe(self) -> None:
        from lmagent.llm.probe import probe_model

        try:
            self._model = probe_model(self.config, timeout=2.0).name
        except Exception:
            self._model = ""

    def open_stream(self, last_event_id: str | None, from_run: bool) -> tuple[int, bytes]:
        """(cursor, prelude) for a new stream: replay from the client's last event, or from the
        start of the newest run, or a `resync` when those events are no longer held."""
        with self._lock:
            if last_event_id:
                number = self.hub.parse_id(last_event_id)
                if number is not None and self.hub.holds_after(number):
                    return number, b""
                return self._resync("gap" if number is not None else "restart")
            run = self.active or self.last  # the newest run, even if it just ended
            if from_run and run is not None:
                if self.hub.holds_after(run.first_event - 1):
                    return run.first_event - 1, b""
                return self._resync("gap")
            return self.hub.last, b""

    def resync(self) -> tuple[bytes, int]:
        with self._lock:
            cursor, data = self._resync("gap")
            return data, cursor

    def _resync(self, reason: str) -> tuple[int, bytes]:
        """Tell the page to load the session from disk, plus the reply still in progress."""
        cursor = self.hub.last
        run = self.active or self.last
        event: dict = {"type": "resync", "reason": reason, "run": None, "session_id": None}
        if run is not None:
            transcript = run.session.transcript
            partial = run.partial if run.active else ""
            if partial and transcript and transcript[-1].get("role") == "assistant":
                recorded = str(transcript[-1].get("content") or "").strip()
                if recorded and recorded.endswith(partial.strip()[-200:]):
                    partial = ""  # already part of the transcript
            event.update(
                run=run.info(),
                session_id=run.session.id,
                messages=len(transcript),
                partial=partial,
                thinking=run.thinking if run.active else "",
            )
        return cursor, frame(event, self.hub.event_id(cursor))


def shrink_event(event: dict) -> dict:
    """Keep huge tool arguments/results out of the stream (the transcript has them whole)."""
    kind = event.get("type")
    if kind not in ("tool_call", "tool_result", "permission_request"):
        return event
    key = "result" if kind == "tool_result" else "arguments"
    value = event.get(key)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= EVENT_FIELD_LIMIT:
        return event
    cut = text[:EVENT_FIELD_LIMIT] + f"… [{len(text) - EVENT_FIELD_LIMIT} characters more]"
    if kind == "tool_result":
        result = value if isinstance(value, dict) else {}
        shrunk = {"success": result.get("success"), "truncated": True, "preview": cut}
        if result.get("error"):
            shrunk["error"] = str(result["error"])[:2000]
        return {**event, "result": shrunk}
    return {**event, key: cut}


def _jsonable(value: object) -> object:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)
