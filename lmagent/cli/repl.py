"""The interactive REPL: each line continues the current session, slash commands (the table in
lmagent/commands.py) are `cmd_*` methods, bare words typed out of habit are handled here, and
lines typed while a task runs are queued (TypedAhead). All output goes through TerminalIO."""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from lmagent.cli.terminal import (
    TerminalIO,
    answer_channel,
    ending_line,
    explain_error,
    list_sessions,
    one_line,
    stop_on_signals,
)
from lmagent.cli.undo import RestoreFailed, checkpoint_lines, restore
from lmagent.commands import NAMES, help_lines
from lmagent.core.config import PERMISSION_MODES, Config
from lmagent.core.stop import StopToken
from lmagent.core.workspace import Workspace
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import RunResult, run_agent
from lmagent.runtime import shared_runtime
from lmagent.scheduler.inbox import SchedulerLocked
from lmagent.scheduler.service import BackgroundScheduler, start_background, status_lines
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore
from lmagent.tools.processes import ProcessError, kill_process, process_lines

SHELL_HABITS = ("ls", "ll", "dir", "pwd", "cd", "whoami", "cat", "vim", "nano", "top", "git")


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
        where, *lines = self.runtime.banner_lines(self.mode)
        self.io.line(f"LMAgent · {where}", "bold")  # the first line names the workspace
        for line in lines:
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
                self.io.line(f"{prefix} {ending_line(event)}", "dim")

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
