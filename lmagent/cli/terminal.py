"""Terminal front end: the IO object for all terminal output (TerminalIO), one-shot runs and
session listing; the REPL is cli/repl.py."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator

from lmagent.cli.display import (
    approval_lines,
    escape,
    progress_text,
    result_lines,
    result_summary,
)
from lmagent.core.config import Config
from lmagent.core.stop import StopToken
from lmagent.core.text import counted, shortened
from lmagent.core.workspace import Workspace
from lmagent.llm.probe import unreachable_message
from lmagent.loop.permissions import NobodyToAsk, PermissionGate
from lmagent.loop.run import RunResult, run_agent
from lmagent.runtime import shared_runtime
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore
from lmagent.tools.files import change_preview

EXIT_CODES = {
    "completed": 0,
    "waiting": 0,
    "max_iterations": 2,
    "interrupted": 130,
    "error": 1,
    "blocked": 3,
}
ANSWERS = {"y": "allow", "yes": "allow", "allow": "allow", "a": "auto", "auto": "auto"}
DECISIONS = ("allow", "deny", "auto")
PROGRESS_EVERY = 10.0  # seconds between two progress lines when output is not a terminal


def _colours(enabled: bool) -> dict[str, str]:
    if not enabled:
        return dict.fromkeys(("dim", "red", "green", "yellow", "cyan", "bold", "reset"), "")
    import colorama

    colorama.just_fix_windows_console()
    return {
        "dim": colorama.Style.DIM,
        "red": colorama.Fore.RED,
        "green": colorama.Fore.GREEN,
        "yellow": colorama.Fore.YELLOW,
        "cyan": colorama.Fore.CYAN,
        "bold": colorama.Style.BRIGHT,
        "reset": colorama.Style.RESET_ALL,
    }


def one_line(text: object) -> str:
    return " ".join(str(text).split())


class TerminalIO:
    """Renders loop events for a person, or as JSON lines for scripts; asks permissions.

    `answers` is who answers permission requests: "terminal" (a person types y/n/a), "json"
    (one JSON line per request on stdin) or None (nobody: a request ends the run blocked,
    except that an auto-mode plan is carried out as shown)."""

    def __init__(
        self, as_json: bool = False, out=None, err=None, inp=None, answers: str | None = "terminal"
    ):
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.inp = inp or sys.stdin
        self.answers = answers
        self.mode = "normal"  # the permission mode, named when nobody can answer
        self.workspace: Workspace | None = None  # where a write or edit would change a file
        self.session_id: str | None = None
        self.live = not as_json and getattr(self.out, "isatty", lambda: False)()
        self.c = _colours(self.live)
        self.mid_line = False
        self.progress_shown = False  # the updating progress line is on the screen
        self.progress_due = 0.0  # without a terminal: when the next progress line is printed
        self.asking = False  # a prompt is waiting for stdin (Ctrl+C must not wait for Enter)
        self.answer_source: Callable[[], str] | None = None  # where answers come from meanwhile
        self.lock = threading.RLock()

    def write(self, text: str, colour: str = "") -> None:
        with self.lock:
            self.clear_progress()
            text = escape(text)  # what the model chose never drives the terminal
            self.out.write(f"{self.c.get(colour, '')}{text}{self.c['reset'] if colour else ''}")
            self.out.flush()

    def line(self, text: str, colour: str = "") -> None:
        with self.lock:
            if self.mid_line:
                self.write("\n")
                self.mid_line = False
            self.write(text + "\n", colour)

    def error(self, text: str) -> None:
        """One line on stderr: the cause of a failure a user can act on."""
        self.err.write(f"error: {escape(one_line(text))}\n")
        self.err.flush()

    def notice(self, text: str) -> None:
        """A start-up line: on stdout for a person, on stderr beside JSON events."""
        if self.as_json:
            self.err.write(f"· {escape(text)}\n")
            self.err.flush()
        else:
            self.line(f"· {text}", "yellow" if text.startswith("warning") else "dim")

    def event(self, event: dict) -> None:
        if event["type"] == "session" and not event.get("agent_id"):
            self.session_id = event["session_id"]
        if self.as_json:
            with self.lock:  # escape() keeps JSON valid and bidi controls out of a terminal
                self.out.write(escape(json.dumps(event, ensure_ascii=False, default=str)) + "\n")
                self.out.flush()
            return
        handler = getattr(self, f"on_{event['type']}", None)
        if handler:
            handler(event)

    def _prefix(self, event: dict) -> str:
        return f"[{event['agent_id']}] " if event.get("agent_id") else ""

    def on_session(self, event: dict) -> None:
        if not event.get("agent_id"):
            how = "resumed" if event.get("resumed") else "new"
            self.line(f"· session {event['session_id']} ({how}, mode {event.get('mode')})", "dim")

    def on_token(self, event: dict) -> None:
        if event.get("agent_id"):
            return  # sub-agent text is summarised by its tool rows
        self.write(event["text"])
        self.mid_line = not event["text"].endswith("\n")

    def on_thinking(self, event: dict) -> None:
        if not event.get("agent_id"):
            self.write(event["text"], "dim")
            self.mid_line = True

    def on_tool_call(self, event: dict) -> None:
        args = event.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        self.line(f"{self._prefix(event)}→ {event['name']} {shortened(text, 200)}", "cyan")

    def on_tool_result(self, event: dict) -> None:
        result = event.get("result") or {}
        if event.get("success"):
            found = result_summary(result)
            summary = f" — {found}" if found else ""
            self.line(shortened(f"{self._prefix(event)}  ✓ {event['name']}{summary}", 400), "green")
        else:
            error = one_line(result.get("error", ""))
            self.line(shortened(f"{self._prefix(event)}  ✗ {event['name']}: {error}", 400), "red")
        for text, colour in result_lines(event):
            self.line(f"{self._prefix(event)}{text}", colour)

    def on_progress(self, event: dict) -> None:
        """On a terminal one line, redrawn in place and wiped when the phase ends; without one
        a line now and then (at the start of a wait, then every PROGRESS_EVERY seconds)."""
        if event.get("agent_id"):
            return
        with self.lock:
            if event.get("done"):
                self.clear_progress()
                self.progress_due = 0.0
            elif self.live and not self.asking:
                if self.mid_line:
                    self.write("\n")
                    self.mid_line = False
                text = f"· {progress_text(event)}"
                self.out.write(f"\r\x1b[2K{self.c['dim']}{text}{self.c['reset']}")
                self.out.flush()
                self.progress_shown = True
            elif not self.live and float(event.get("elapsed") or 0) >= self.progress_due:
                self.progress_due = float(event.get("elapsed") or 0) + PROGRESS_EVERY
                self.line(f"· {progress_text(event)}", "dim")

    def clear_screen(self) -> None:
        """`clear` at the REPL: the terminal's own clear (nothing without a terminal)."""
        if self.live:
            with self.lock:
                self.out.write("\x1b[H\x1b[2J\x1b[3J")
                self.out.flush()

    def clear_progress(self) -> None:
        if self.progress_shown:
            self.progress_shown = False
            self.out.write("\r\x1b[2K")
            self.out.flush()

    def on_process(self, event: dict) -> None:
        """A background process started or ended: its id, and how to see or stop it."""
        pid = event.get("process_id")
        if event.get("state") == "running":
            self.line(
                f"{self._prefix(event)}· {pid} started in the background: {event.get('command')}"
                f" (output: {event.get('log')}; /ps lists it, /kill {pid} stops it)",
                "yellow",
            )
        else:
            ended = f"{event.get('state')} (exit code {event.get('exit_code')})"
            self.line(f"{self._prefix(event)}· {pid} {ended}", "yellow")

    def on_status(self, event: dict) -> None:
        self.line(f"{self._prefix(event)}· {event['message']}", "yellow")

    def on_error(self, event: dict) -> None:
        if event.get("agent_id"):  # the main run's error is reported once, by the front end
            self.line(f"{self._prefix(event)}error: {one_line(event['message'])}", "red")

    def on_done(self, event: dict) -> None:
        if event.get("agent_id"):
            return  # a sub-agent's "finished" status line already says how it ended
        colour = "green" if event["status"] == "completed" else "yellow"
        # the main run's error is on stderr already, once
        self.line(f"— {ending_line(event, cause=False)} · session {event['session_id']}", colour)

    def ask(self, tool: str, arguments: dict) -> str:
        """Permission prompt: y = allow, n = deny, a = auto for the rest of the run."""
        if self.answers is None:
            return self.nobody_answers(tool, arguments)
        if self.answers == "json":
            return self.ask_json(tool, arguments)
        if tool == "plan":  # the plan itself was just streamed as the model's reply
            self.line("? carry out this plan  [y]es / [n]o", "bold")
        else:
            change = change_preview(self.workspace, tool, arguments) if self.workspace else ""
            preview = approval_lines(tool, arguments, change)
            for text, colour in preview:
                self.line(text, colour)
            summary = (
                "" if preview else " " + shortened(json.dumps(arguments, ensure_ascii=False), 300)
            )
            self.line(f"? allow {tool}{summary}  [y]es / [n]o / [a]uto", "bold")
        answer = self.read_answer()
        if not answer:
            return "deny"  # no one is there to answer
        return ANSWERS.get(answer.strip().lower(), "deny")

    def read_answer(self) -> str:
        """One line of stdin ("" when it closed), marked as asked for meanwhile; from the
        REPL's reader of typed-ahead lines while one reads the terminal."""
        self.asking = True
        try:
            return self.answer_source() if self.answer_source else self.inp.readline()
        finally:
            self.asking = False

    def nobody_answers(self, tool: str, arguments: dict) -> str:
        """No terminal and no answer channel: never act on a guess."""
        if tool == "plan" and self.mode == "auto":
            self.notice("auto mode: carrying out the plan without asking")
            return "allow"
        what = "the plan needs approval" if tool == "plan" else f"{tool} needs permission"
        raise NobodyToAsk(
            f"{what} in {self.mode} mode and there is no terminal to ask; run with "
            "--permission auto to allow it, or with --json and answer on stdin "
            '({"type": "permission", "request_id": ..., "decision": "allow"|"deny"|"auto"})'
        )

    def ask_json(self, tool: str, arguments: dict) -> str:
        """Emit a permission_request event and wait for its answer: one JSON line on stdin."""
        request_id = uuid.uuid4().hex[:12]
        self.event(
            {
                "type": "permission_request",
                "session_id": self.session_id,
                "request_id": request_id,
                "tool": tool,
                "arguments": arguments,
            }
        )
        while True:
            line = self.read_answer()
            if not line:
                raise NobodyToAsk(
                    f"{tool} needs permission and stdin closed before an answer came; run with "
                    "--permission auto to allow it"
                )
            decision, problem = parse_answer(line, request_id)
            if decision:
                return decision
            self.event({"type": "status", "session_id": self.session_id, "message": problem})


def parse_answer(line: str, request_id: str) -> tuple[str | None, str]:
    """(decision, "") for a valid answer to `request_id`, else (None, why the line is ignored)."""
    expected = (
        f'expected {{"type": "permission", "request_id": "{request_id}", '
        '"decision": "allow"|"deny"|"auto"}'
    )
    try:
        answer = json.loads(line)
    except ValueError:
        return None, f"ignored a stdin line that is not JSON; {expected}"
    if not isinstance(answer, dict) or answer.get("type") != "permission":
        return None, f"ignored a stdin line that is not a permission answer; {expected}"
    if answer.get("request_id") != request_id:
        return None, f"ignored an answer to request {answer.get('request_id')!r}; {expected}"
    if answer.get("decision") not in DECISIONS:
        return None, f"ignored an answer with decision {answer.get('decision')!r}; {expected}"
    return answer["decision"], ""


@contextlib.contextmanager
def stop_on_signals(
    stop: StopToken, io: TerminalIO, signums: tuple = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM stop the run (saved as interrupted). A signal that
    arrives at a permission prompt, or a second one, interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if io.asking or stop.stopped:
            raise KeyboardInterrupt
        # stopping takes locks (an Event's, a token's) that the main thread, interrupted here,
        # may hold: the scheduler, stopped from its own wake.wait(), waited for itself forever
        threading.Thread(target=stop.stop, args=("interrupted",), daemon=True).start()

    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def answer_channel(as_json: bool) -> str | None:
    """Who answers permission requests: a terminal, JSON lines on stdin (one-shot --json), or
    nobody (stdin is not a terminal: cron, CI, a pipe)."""
    if as_json:
        return "json"
    return "terminal" if sys.stdin.isatty() else None


def one_shot(config: Config, task: str, args, runtime=None) -> int:
    """Run one task (or resume a session) to its end; the exit code tells how it ended."""
    io = TerminalIO(as_json=args.json, answers=answer_channel(args.json))
    io.mode = config.permission_mode
    io.workspace = Workspace(config.workspace)
    stop = StopToken()
    try:
        with stop_on_signals(stop, io), shared_runtime(config, runtime) as runtime:
            if not runtime.model.reachable:  # no server at all: say so now, not after retries
                io.error(unreachable_message(config.llm_url))
                return 1
            for line in runtime.banner_lines(config.permission_mode):
                io.notice(line)
            result = run_agent(
                config,
                task or None,
                session_id=args.resume,
                sink=io.event,
                gate=PermissionGate(config.permission_mode, io.ask),
                stop=stop,
                plan_first=args.plan,
                source="cli",
                **runtime.run_options(),
            )
    except (SessionNotFound, SessionBusy) as exc:
        io.error(exc.args[0])
        return 1
    return report(result, config, io)


def report(result: RunResult, config: Config, io: TerminalIO) -> int:
    if result.status == "error":
        io.error(explain_error(result, config))
    elif result.status == "blocked" and not io.as_json:
        io.line(f"blocked: {one_line(result.message)}", "yellow")
    return EXIT_CODES.get(result.status, 1)


def explain_error(result: RunResult, config: Config) -> str:
    if result.extra.get("unreachable"):
        return unreachable_message(config.llm_url)
    return one_line(result.message)


def list_sessions(config: Config, as_json: bool = False, write: Callable | None = None) -> int:
    """Print the saved sessions (newest first), one per line; JSON objects with as_json."""
    write = write or (lambda text: print(escape(text)))
    sessions = SessionStore(config.workspace).list()
    if as_json:
        for meta in sessions:
            write(json.dumps(meta, ensure_ascii=False))
        return 0
    if not sessions:
        write(f"no sessions in {config.workspace}")
        return 0
    for meta in sessions:
        if meta["status"] == "damaged":
            write(f"{meta['id']}  damaged        {one_line(meta['error'])}")
            continue
        task = shortened(one_line(meta.get("task", "")), 60)
        write(
            f"{meta['id']}  {meta.get('status', '?'):<14} {str(meta.get('updated', ''))[:19]}  "
            f"{meta.get('iterations', 0):>4} it  {task}"
        )
    return 0


def ending_line(done: dict, cause: bool = True) -> str:
    """How a run ended, in one line: status, wait, error, what it did, iterations, tokens."""
    text = done["status"]
    if done.get("wait_until"):
        text += f" until {done['wait_until']}"
    if done["status"] == "error" and cause:
        text += f": {shortened(one_line(done['message']), 200)}"
    if done.get("summary"):
        text += f" · {done['summary']}"
    steps = counted(done["iterations"], "iteration")
    return f"{text} · {steps} · {counted(done['tokens'], 'token')}"
