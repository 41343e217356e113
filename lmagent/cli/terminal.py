"""Terminal front end: the IO object for all terminal output, one-shot runs and the REPL."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from lmagent.cli.display import (
    approval_lines,
    escape,
    progress_text,
    result_lines,
    result_summary,
)
from lmagent.cli.undo import RestoreFailed, checkpoint_lines, restore
from lmagent.commands import NAMES, help_lines
from lmagent.core.config import PERMISSION_MODES, Config
from lmagent.core.stop import StopToken
from lmagent.core.workspace import Workspace
from lmagent.llm.probe import unreachable_message
from lmagent.loop.permissions import NobodyToAsk, PermissionGate
from lmagent.loop.run import RunResult, run_agent
from lmagent.runtime import shared_runtime
from lmagent.scheduler.inbox import SchedulerLocked
from lmagent.scheduler.service import BackgroundScheduler, start_background, status_lines
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore
from lmagent.tools.files import change_preview
from lmagent.tools.processes import ProcessError, kill_process, process_lines

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
SHELL_HABITS = ("ls", "ll", "dir", "pwd", "cd", "whoami", "cat", "vim", "nano", "top", "git")
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
        self.line(f"{self._prefix(event)}→ {event['name']} {text[:200]}", "cyan")

    def on_tool_result(self, event: dict) -> None:
        result = event.get("result") or {}
        if event.get("success"):
            found = result_summary(result)
            summary = f" — {found}" if found else ""
            self.line(f"{self._prefix(event)}  ✓ {event['name']}{summary}"[:400], "green")
        else:
            error = one_line(result.get("error", ""))
            self.line(f"{self._prefix(event)}  ✗ {event['name']}: {error}"[:400], "red")
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
        self.line(f"— {_ending(event, cause=False)} · session {event['session_id']}", colour)

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
            summary = "" if preview else " " + json.dumps(arguments, ensure_ascii=False)[:300]
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
        stop.stop("interrupted")

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
        task = one_line(meta.get("task", ""))[:60]
        write(
            f"{meta['id']}  {meta.get('status', '?'):<14} {str(meta.get('updated', ''))[:19]}  "
            f"{meta.get('iterations', 0):>4} it  {task}"
        )
    return 0


class TypedAhead:
    """While a REPL task runs at a terminal, the lines typed meanwhile: whole lines only (the
    terminal hands them over at Enter, so nothing is taken from the prompt after the run), each
    an answer to a permission prompt that waits, or else queued as the next task and shown so;
    "/cancel" drops the queue."""

    def __init__(self, io: TerminalIO, fd: int):
        self.io = io
        self.fd = fd
        self.queued: list[str] = []
        self.answers: queue.Queue[str] = queue.Queue()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, name="typed-ahead", daemon=True)

    def __enter__(self) -> TypedAhead:
        self.io.answer_source = self.answers.get
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.done.set()
        self.thread.join(timeout=2)
        self.io.answer_source = None

    def _read(self) -> None:
        while not self.done.is_set():
            if not select.select([self.fd], [], [], 0.1)[0]:
                continue
            data = os.read(self.fd, 65536)
            if not data:  # the terminal closed: a waiting prompt gets "" (deny)
                self.answers.put("")
                return
            for line in data.decode(errors="replace").splitlines():
                self.take(line.strip())

    def take(self, line: str) -> None:
        if self.io.asking:
            self.answers.put(line + "\n")
        elif line == "/cancel":
            dropped, self.queued[:] = len(self.queued), []
            self.io.line(f"· dropped {dropped} queued line(s)", "yellow")
        elif line:
            self.queued.append(line)
            self.io.line(f"· queued: {line} (runs when this task ends; /cancel drops it)", "yellow")


class Repl:
    """Interactive loop: each line continues the current session; slash commands as cmd_*."""

    PROMPT = "› "

    def __init__(self, config: Config, args, io: TerminalIO | None = None, runtime=None):
        self.config = config
        self.args = args
        # a pipe on stdin holds the next tasks, not answers: nobody answers permission prompts
        self.io = io or TerminalIO(answers=answer_channel(False))
        self.io.workspace = Workspace(config.workspace)
        self.mode = config.permission_mode
        self.session_id: str | None = getattr(args, "resume", None)
        self.plan_next = bool(getattr(args, "plan", False))
        self.runtime = runtime
        self.owned = contextlib.ExitStack()  # the runtime, when the REPL started it
        self.stop: StopToken | None = None
        self.running = False  # a task of the REPL's own is running (the scheduler waits)
        self.scheduler: BackgroundScheduler | None = None
        self.last_habit = ""  # a shell-like line held back once (typed again, it is sent)
        self.queued: list[str] = []  # lines typed during a run, to handle next

    def loop(self) -> int:
        Workspace(self.config.workspace).ensure()
        self.runtime = self.owned.enter_context(shared_runtime(self.config, self.runtime))
        history = _setup_readline(self.config.workspace) if self._interactive() else None
        self.io.line("LMAgent", "bold")
        for line in self.runtime.banner_lines(self.mode):
            self.io.line(f"  {line}", "yellow" if line.startswith("warning") else "dim")
        self.start_scheduler()
        self.io.line("Type a task, /help for commands, quit to leave.", "dim")
        try:
            while True:
                try:
                    line = self.read_line()
                    if line is None or not self.handle(line.strip()):
                        break
                except KeyboardInterrupt:
                    self.io.line("(Ctrl+C: type quit to leave)", "dim")
        finally:
            _save_readline(history)
            if self.scheduler is not None:
                self.scheduler.stop()  # running scheduled tasks are requeued
            self.owned.close()
        return 0

    def start_scheduler(self) -> None:
        """Host the scheduler in the background while the REPL runs, unless one already runs
        on this workspace (a daemon, the web UI or another REPL): then that one does the work."""
        from lmagent.runtime import SCHEDULER_RUNS_AUTO, unsandboxed_auto_refusal

        refusal = unsandboxed_auto_refusal(self.config, "auto", SCHEDULER_RUNS_AUTO)
        if refusal:
            self.io.line(f"  scheduler: not started here: {refusal}", "yellow")
            return
        try:
            self.scheduler = start_background(
                self.config, self.scheduled_sink, runtime=self.runtime, busy=lambda: self.running
            )
        except SchedulerLocked:
            self.io.line("  scheduler: already running for this workspace elsewhere", "dim")
            return
        except OSError as exc:  # e.g. a read-only workspace: the REPL still works
            self.io.line(f"  warning: the scheduler cannot start: {one_line(exc)}", "yellow")
            return
        concurrency = self.scheduler.scheduler.concurrency
        self.io.line(f"  scheduler: running here ({concurrency} at a time)", "dim")

    def scheduled_sink(self, job) -> Callable[[dict], None]:
        """One line when a scheduled run starts and one when it ends, apart from the chat."""

        def sink(event: dict) -> None:
            if event.get("agent_id"):
                return
            prefix = f"[scheduled] session {event['session_id']}"
            if event["type"] == "session":
                self.io.line(f"{prefix} started: {job.summary()}", "dim")
            elif event["type"] == "done":
                self.io.line(f"{prefix} {_ending(event)}", "dim")

        return sink

    def _interactive(self) -> bool:
        return self.io.inp is sys.stdin and sys.stdin.isatty()

    def read_line(self) -> str | None:
        """The next input line (one typed during the last run first), or None at the end."""
        if self.queued:
            line = self.queued.pop(0)
            self.io.line(f"{self.PROMPT}{line}  (queued)")
            return line
        if self._interactive():
            try:
                return input(self.PROMPT)
            except EOFError:
                return None
        with self.io.lock:
            self.io.write(self.PROMPT)
            self.io.mid_line = True  # a scheduled run's line starts below the prompt
        line = self.io.inp.readline()
        with self.io.lock:
            self.io.write(line if line.endswith("\n") else line + "\n")  # input is not echoed
            self.io.mid_line = False
        return line or None

    def handle(self, line: str) -> bool:
        """Act on one input line; False means leave the REPL."""
        if not line:
            return True
        if line in ("quit", "exit", "/quit", "/exit"):
            return False
        if self.habit(line):
            return True
        if line.startswith("/"):
            name, _, rest = line[1:].partition(" ")
            command = getattr(self, f"cmd_{name.lower()}", None) if name.lower() in NAMES else None
            if command is None:
                self.io.line(f"unknown command /{name}; /help lists them", "red")
                return True
            try:
                command(rest.strip())
            except (OSError, ValueError, KeyError) as exc:
                self.io.line(f"/{name} failed: {one_line(exc)}", "red")
            return True
        self.run_task(line)
        return True

    def habit(self, line: str) -> bool:
        """A bare word typed out of habit is not a task: help and clear are done here; a shell
        command (ls, pwd, cd ...) is sent to the model only when typed twice in a row."""
        word = line.lower()
        typed_twice, self.last_habit = self.last_habit == line, ""
        if word in ("help", "?"):
            self.cmd_help("")
        elif word in ("clear", "cls", "reset"):
            self.io.clear_screen()
        elif word.split(" ", 1)[0] in SHELL_HABITS and len(word.split()) <= 2 and not typed_twice:
            self.last_habit = line
            self.io.line(
                f"{line!r} looks like a shell command, so it was not sent to the agent. Ask in "
                'words (e.g. "list the files here"), or type it again to send it as a task.',
                "yellow",
            )
        else:
            return False
        return True

    def run_task(self, task: str) -> RunResult | None:
        """Run one task in the current session; Ctrl+C stops it and returns to the prompt."""
        self.stop = StopToken()
        gate = PermissionGate(self.mode, self.io.ask)
        self.running = True
        typed = TypedAhead(self.io, sys.stdin.fileno()) if self._interactive() else None
        try:
            ahead = typed or contextlib.nullcontext()
            with stop_on_signals(self.stop, self.io, (signal.SIGINT,)), ahead:
                result = run_agent(
                    self.config,
                    task,
                    session_id=self.session_id,
                    sink=self.io.event,
                    gate=gate,
                    stop=self.stop,
                    plan_first=self.plan_next,
                    source="repl",
                    **self.runtime.run_options(),
                )
        except SessionNotFound as exc:
            self.io.line(f"error: {exc.args[0]}", "red")
            self.session_id = None
            return None
        except SessionBusy as exc:
            self.io.line(f"error: {exc.args[0]}", "red")
            return None
        finally:
            self.running = False
            self.queued += typed.queued if typed else []
        self.plan_next = False
        self.session_id = result.session_id
        if result.status == "error":
            self.io.line(f"error: {explain_error(result, self.config)}", "red")
        return result

    # ------------------------------------------------------------------ slash commands

    def cmd_help(self, arg: str) -> None:
        """Show the commands."""
        for line in help_lines():
            self.io.line(line)
        self.io.line("quit, exit  leave the REPL; help and clear work without the slash")

    def cmd_sessions(self, arg: str) -> None:
        """List saved sessions."""
        list_sessions(self.config, write=self.io.line)

    def cmd_mode(self, arg: str) -> None:
        """Show or set the permission mode: /mode auto|normal|manual."""
        if arg:
            if arg.lower() not in PERMISSION_MODES:
                self.io.line("usage: /mode auto|normal|manual", "red")
                return
            from lmagent.runtime import unsandboxed_auto_refusal

            refusal = unsandboxed_auto_refusal(self.config, arg.lower())
            if refusal:
                self.io.line(refusal, "red")
                return
            self.mode = arg.lower()
        self.io.line(f"permission mode: {self.mode}")

    def cmd_plan(self, arg: str) -> None:
        """Plan the next task and ask for approval before acting."""
        self.plan_next = True
        self.io.line("the next task starts with a plan for your approval")

    def cmd_checkpoints(self, arg: str) -> None:
        """List the changing steps of this session (or of /checkpoints SESSION_ID)."""
        try:
            for line in checkpoint_lines(self.config.workspace, arg or self.session_id):
                self.io.line(line)
        except RestoreFailed as exc:
            self.io.line(str(exc), "red")

    def cmd_undo(self, arg: str) -> None:
        """Restore the files to before this session's last changing step (/undo force)."""
        if arg not in ("", "force"):
            self.io.line("usage: /undo, or /undo force to overwrite files edited since", "red")
            return
        try:
            self.io.line(restore(self.config.workspace, self.session_id, None, arg == "force"))
        except RestoreFailed as exc:
            self.io.line(str(exc).replace("--force", "/undo force"), "red")

    def cmd_todo(self, arg: str) -> None:
        """Show the todos and plan of the current session."""
        session = self._current()
        if session is None:
            return
        state = session.state
        if not state.todos and not state.plan:
            self.io.line("no todos or plan in this session")
        for step in state.plan:
            self.io.line(f"step {step['id']} [{step['status']}] {step['description']}")
        for todo in state.todos:
            self.io.line(f"#{todo['id']} [{todo['status']}] {todo['description']}")

    def cmd_ps(self, arg: str) -> None:
        """List the background processes (running and ended) and their logs."""
        for line in process_lines(self.runtime.services) or ["no background processes"]:
            self.io.line(line)

    def cmd_kill(self, arg: str) -> None:
        """Stop a background process: /kill ID (see /ps)."""
        if not arg:
            self.io.line("usage: /kill ID (the ids are in /ps)", "red")
            return
        try:
            self.io.line(kill_process(self.runtime.services, arg))
        except ProcessError as exc:
            self.io.line(str(exc), "red")

    def cmd_status(self, arg: str) -> None:
        """Show model, workspace, mode, sandbox, MCP, the session and the scheduler."""
        session = self._current(quiet=True)
        meta = session.meta if session is not None else None
        for line in self.runtime.status_lines(meta, self.mode):
            self.io.line(line)
        for line in status_lines(self.config, recent=5):
            self.io.line(line)

    def cmd_soul(self, arg: str) -> None:
        """Show the personality file (.lmagent/.soul.md)."""
        path = Path(self.config.workspace) / ".lmagent" / ".soul.md"
        text = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
        self.io.line(text or f"no personality set; write one to {path}")

    def cmd_new(self, arg: str) -> None:
        """Start a new session with the next task."""
        self.session_id = None
        self.io.line("the next task starts a new session")

    def cmd_session(self, arg: str) -> None:
        """Show the current session, or switch: /session ID."""
        if arg:
            try:
                self.session_id = SessionStore(self.config.workspace).open(arg).id
            except SessionNotFound as exc:
                self.io.line(str(exc.args[0]), "red")
                return
        self.io.line(f"session: {self.session_id or '(new)'}")

    def _current(self, quiet: bool = False):
        if not self.session_id:
            if not quiet:
                self.io.line("no session yet; type a task first")
            return None
        return SessionStore(self.config.workspace).open(self.session_id)


def _ending(done: dict, cause: bool = True) -> str:
    """How a run ended, in one line: status, wait, error, what it did, iterations, tokens."""
    text = done["status"]
    if done.get("wait_until"):
        text += f" until {done['wait_until']}"
    if done["status"] == "error" and cause:
        text += f": {one_line(done['message'])[:200]}"
    if done.get("summary"):
        text += f" · {done['summary']}"
    return f"{text} · {done['iterations']} iterations · {done['tokens']} tokens"


def _setup_readline(workspace: Path):
    try:
        import readline
    except ImportError:
        return None
    path = Path(workspace) / ".lmagent" / "repl_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)
    return path


def _save_readline(path) -> None:
    if path is None:
        return
    import readline

    with contextlib.suppress(OSError):
        readline.write_history_file(path)
