"""Shared parts of the sandbox: configuration, results, and the channel to the in-sandbox runner.

Every backend (Docker, bwrap, bare process group) starts the same small server,
``sandbox/runner.py``, once and then sends it one JSON request per command. This module holds the
host side of that conversation (`Channel`) and the backend-independent `RunnerSandbox.run`.
The public names are re-exported by ``sandboxed_shell``; import them from there.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import secrets
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lmagent.core.config import Config
from lmagent.sandbox.runner import at_unix_path, peer_pid
from lmagent.sandbox.supervise import Watcher, find_in_trees, kill_trees

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 512
MAX_MEMORY_MB = 2048
PIDS_LIMIT = 128
OUTPUT_KEEP = 15_000  # bytes kept from the start and from the end of a command's output
SANDBOX_HOME = "/home/sandbox"  # HOME inside the container / bwrap (a tmpfs)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUNNER_SOURCE = (Path(__file__).resolve().parent / "runner.py").read_text()
REPLY_GRACE = 10.0  # seconds the host waits beyond a command's timeout before giving up on it
STOP_POLL = 0.1  # how often a waiting run() looks at its stop event
MAX_PROCESSES = 4  # background processes running at once in one sandbox (so one workspace)
PROCESS_GRACE = 2.0  # seconds a stopped background process has between SIGTERM and SIGKILL
FIRST_OUTPUT_WAIT = 1.0  # seconds a background start waits for the process's first output
PROCESS_LOGS = "processes"  # folder in .lmagent/sandbox/ with each background process's log
JOB_REPLY_TIMEOUT = 30.0  # seconds the host waits for the job server (a kill waits out grace)


@dataclass(frozen=True)
class SandboxConfig:
    """Where and how sandboxed commands run."""

    workspace: Path
    """Absolute, resolved host path: the only writable (and bind-mounted) directory."""
    backend: str = "auto"
    """auto / docker / bwrap / process. auto never picks process (it has no isolation)."""
    image: str = "lmagent-sandbox:latest"
    """Image for the Docker backend (built by `python sandboxed_shell.py --build`)."""
    network: str = "none"
    """none / bridge: network for sandboxed commands (bwrap and process ignore bridge/none)."""
    allowed_env: tuple[str, ...] = ()
    """Names of host environment variables that may pass into commands. Nothing else does."""
    git_name: str = "LMAgent"
    """Commit author/committer name used by git inside the sandbox."""
    git_email: str = "lmagent@localhost"
    """Commit author/committer e-mail used by git inside the sandbox."""
    user: str | None = None
    """uid:gid commands run as in the container; None = the host user's uid:gid."""
    idle_minutes: float = 30
    """Minutes a Docker container with no runner in it keeps running (0: until stopped)."""

    debian_mirror: str = ""
    """Debian archive the image is built from when `docker build` cannot pull (blank: the first
    one in this machine's apt sources)."""

    @classmethod
    def from_config(cls, config: Config) -> SandboxConfig:
        """The sandbox settings of the one Config (so .env files count, as everywhere)."""
        return cls(
            workspace=config.workspace,
            backend=config.sandbox_backend,
            image=config.sandbox_image,
            network=config.sandbox_network,
            idle_minutes=config.sandbox_idle_minutes,
            debian_mirror=config.sandbox_debian_mirror,
        )

    def uid_gid(self) -> str:
        return self.user or f"{os.getuid()}:{os.getgid()}"


@dataclass
class CommandResult:
    """What one command did. `error` is a sandbox-level problem, not the command failing."""

    output: str
    exit_code: int | None  # None when timed out, interrupted or the sandbox failed
    timed_out: bool = False
    interrupted: bool = False
    truncated_bytes: int = 0
    error: str | None = None

    @property
    def success(self) -> bool:
        return self.exit_code == 0 and not (self.error or self.timed_out or self.interrupted)

    def to_tool_result(self) -> dict:
        result: dict = {"success": self.success, "output": self.output, "exit_code": self.exit_code}
        if self.truncated_bytes:
            result["truncated_bytes"] = self.truncated_bytes
        if not self.success:
            result["error"] = self.error or f"command exited with code {self.exit_code}"
        return result


class SandboxUnavailable(Exception):
    """No usable sandbox; the message says how to fix it."""


class Sandbox(Protocol):
    name: str

    def run(
        self,
        command: str,
        timeout: float = DEFAULT_TIMEOUT,
        max_memory_mb: int | None = None,
        stop: threading.Event | None = None,
        cwd: str | None = None,
    ) -> CommandResult: ...

    def close(self) -> None: ...


class ChannelLost(Exception):
    """The runner went away or stopped answering."""


class Channel:
    """Host end of the runner protocol over a transport with fileno/write/read_some/close."""

    def __init__(self, transport):
        self.transport = transport
        self.buffer = bytearray()
        self.ready: dict = {}
        self.host_pid: int | None = None  # the runner's pid on the host (the watcher's)
        self.killed = ""  # why the host killed the runner, if it did

    def send(self, message: dict) -> None:
        try:
            self.transport.write(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise ChannelLost(f"cannot write to the sandbox runner: {exc}") from exc

    def receive(self, deadline: float, on_stop=None, stop=None) -> tuple[dict, bytes]:
        """Wait for one answer; call `on_stop` once if `stop` gets set meanwhile."""
        while True:
            answer = self._parse()
            if answer is not None:
                return answer
            if stop is not None and on_stop is not None and stop.is_set():
                on_stop()
                on_stop = None
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelLost("the sandbox runner stopped answering")
            wait = min(left, STOP_POLL) if on_stop is not None else left
            if select.select([self.transport], [], [], wait)[0]:
                try:
                    self.buffer += self.transport.read_some()
                except EOFError as exc:
                    raise ChannelLost(str(exc)) from None

    def alive(self) -> bool:
        """False if the runner has gone away while idle (it never speaks unasked)."""
        try:
            while select.select([self.transport], [], [], 0)[0]:
                self.transport.read_some()
        except (EOFError, OSError):
            return False
        self.buffer.clear()
        return True

    def _parse(self) -> tuple[dict, bytes] | None:
        end = self.buffer.find(b"\n")
        if end < 0:
            return None
        try:
            header = json.loads(self.buffer[:end])
        except ValueError:  # not the runner speaking: e.g. the engine saying why exec failed
            line = bytes(self.buffer[:end]).decode("utf-8", "replace").strip()
            raise ChannelLost(f"the sandbox runner did not start: {line[:300]}") from None
        size = int(header.get("head", 0)) + int(header.get("tail", 0))
        if len(self.buffer) < end + 1 + size:
            return None
        payload = bytes(self.buffer[end + 1 : end + 1 + size])
        del self.buffer[: end + 1 + size]
        return header, payload

    def hello(self, greeting: dict, timeout: float = 30.0) -> dict:
        self.send({"op": "hello", **greeting})
        header, _ = self.receive(time.monotonic() + timeout)
        if header.get("op") != "ready":
            raise ChannelLost(f"unexpected greeting from the sandbox runner: {header}")
        return header

    def close(self) -> None:
        self.transport.close()


PROJECT_CONTEXT_STUB = (
    "<!-- Project context for LMAgent: what you write here is added to the agent's instructions."
    " The agent can read this file but never change it. -->\n"
)


WRITABLE, READ_ONLY, EMPTY = "rw", "ro", "empty"
EMPTY_SIZE = 64 * 1024  # bytes of the tmpfs that hides .lmagent/ (it only holds mount points)


def workspace_mounts(workspace: Path) -> list[tuple[str, str]]:
    """(path, kind) mounts at the same path inside the sandbox, parents first.

    kind is WRITABLE or READ_ONLY (a bind mount of the host path) or EMPTY (an empty, read-only
    tmpfs). The workspace is writable, but nothing of the agent's own data is there to see or
    change: `.lmagent/` (sessions, briefs and results, mcp.json with its tokens, .soul.md) is
    an EMPTY mount with only `.lmagent/sandbox/` (writable, the runner's socket) and
    `.lmagent/mcp_images/` (read-only, images MCP tools returned) bound into it; `.lmagent.md`
    is read-only. Missing directories are created, and a `.lmagent.md` holding only a comment,
    as mount points.
    """
    data = workspace / ".lmagent"
    scratch, images = data / "sandbox", data / "mcp_images"
    for directory in (scratch, images):
        directory.mkdir(parents=True, exist_ok=True)
    project = workspace / ".lmagent.md"
    if not project.exists():
        project.write_text(PROJECT_CONTEXT_STUB)
    return [
        (str(workspace), WRITABLE),
        (str(data), EMPTY),
        (str(project), READ_ONLY),
        (str(scratch), WRITABLE),
        (str(images), READ_ONLY),
    ]


def workspace_identity(workspace: Path) -> tuple[int, int]:
    """(device, inode) of the workspace directory: what tells a moved or re-created one apart."""
    try:
        info = os.stat(workspace)
    except OSError as exc:
        raise SandboxUnavailable(
            f"the workspace {workspace} is gone ({exc.strerror}); create it again, or start the "
            "agent on the directory it was moved to"
        ) from None
    return info.st_dev, info.st_ino


# What git inside the sandbox ignores in every repository: the agent's own files, so that
# `git status` and `git add .` do not offer the `.lmagent.md` mount point (a comment-only
# file when the user has none) or `.lmagent/` for committing. A tracked `.lmagent.md` stays
# tracked: ignore rules only apply to untracked files.
SANDBOX_GITIGNORE = "/.lmagent.md\n/.lmagent/\n"
SANDBOX_GITIGNORE_NAME = ".gitignore_lmagent"  # in the sandbox's HOME


def gitconfig_text(cfg: SandboxConfig) -> str:
    return (
        f"[user]\n\tname = {cfg.git_name}\n\temail = {cfg.git_email}\n"
        "[safe]\n\tdirectory = *\n[init]\n\tdefaultBranch = main\n"
        f"[core]\n\tpager = cat\n\texcludesFile = ~/{SANDBOX_GITIGNORE_NAME}\n"
    )


def clamp(value: float | None, default: float, maximum: float) -> float:
    if value is None or value <= 0:
        return default
    return min(float(value), maximum)


class RunnerSandbox:
    """run()/close() for every backend; subclasses start a runner (`_connect`).

    Up to `max_runners` commands run at once, each on its own runner (parallel sub-agents need
    this); a runner is kept for the next command when its command ends, so state a command
    leaves (files in /tmp, background jobs) is there for the next one as long as only one
    runner is in use. Backends whose runners do not share /tmp and processes keep one.

    The sandbox serves the workspace directory it started on. When that directory has been
    moved or re-created since (same path, another directory), the next command restarts the
    sandbox on the current one first and its result says so.
    """

    name = "runner"
    home = SANDBOX_HOME
    max_procs: int | None = None  # the runner's watchdog kills beyond this many processes
    rss_watchdog = False  # ... and beyond the memory limit (for sandboxes without cgroups)
    max_runners = 1

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.workspace = Path(cfg.workspace)
        if not self.workspace.is_absolute() or not self.workspace.is_dir():
            raise SandboxUnavailable(f"the workspace {self.workspace} is not an existing directory")
        self._pool = threading.Condition()
        self._idle: list[Channel] = []  # runners waiting for a command, the latest used last
        self._lent = 0  # runners running a command (or starting)
        self._generation = 0  # retiring runners bumps it: those lent out are not kept
        self._memory_lock = threading.Lock()
        self._memory: list[int] = []  # the memory limits (MB) of the commands running now
        self._ids = itertools.count(1)
        self.identity = workspace_identity(self.workspace)  # the directory the sandbox serves
        self._restart_lock = threading.Lock()
        self.watcher = Watcher()  # the host's eye on the runners and the job server
        self.processes = Processes(self)

    # --- for subclasses ------------------------------------------------------------------------
    def _connect(self) -> Channel:
        raise NotImplementedError

    def _restart(self) -> None:
        """Hook: leave nothing running on the old workspace directory (the idle runners are
        already gone; Docker replaces its container)."""

    def _runner_host_pid(self, channel: Channel) -> int | None:
        """Hook: the runner's pid on the host (None: not known, not watched)."""
        return None

    def _kill_runner(self, channel: Channel) -> None:
        """Hook: kill a runner and everything it started, from the host."""
        kill_trees({channel.host_pid})

    def _after_loss(self, pid: int | None = None) -> None:
        """Hook: a runner or job server (host `pid`, if known) died or was killed; leave
        nothing it started."""

    def sweep(self) -> list[str]:
        """From the host, kill what no runner of the sandbox would (Docker adds stopped runners
        and job servers, orphans); the processes killed, described. Idle runners end their
        waiting shells (a command could have written one's memory) and what else they spare
        but the job server."""
        self.watcher.check()
        self._rest_idle_runners()
        return []

    def _rest_idle_runners(self) -> None:
        """Ask each idle runner to rest; one that does not answer is lost (killed, swept)."""
        with self._pool:
            idle, self._idle = self._idle, []
            self._lent += len(idle)
            generation = self._generation
        for channel in idle:
            try:
                channel.send({"op": "rest"})
                channel.receive(time.monotonic() + JOB_REPLY_TIMEOUT)
            except ChannelLost:
                self._lost(channel)
                channel = None
            self._give_back(channel, generation)

    def _start_channel(self, transport, **extra) -> Channel:
        """Greet a freshly started runner (it writes HOME/.gitconfig and the ignore file); close
        it if that fails.

        The runner's "ready" answer is kept as `channel.ready`.
        """
        channel = Channel(transport)
        greeting = {
            "home": self.home,
            "gitconfig": gitconfig_text(self.cfg),
            "gitignore": [SANDBOX_GITIGNORE_NAME, SANDBOX_GITIGNORE],
            **extra,
        }
        greeting["workspace"] = str(self.workspace)
        greeting.update(max_procs=self.max_procs, max_rss_mb=self._rss_limit(DEFAULT_MEMORY_MB))
        try:
            channel.ready = channel.hello(greeting)
            if "seccomp" in extra and channel.ready.get("seccomp") is not True:
                problem = channel.ready.get("seccomp")
                raise ChannelLost(f"the runner could not install the syscall filter: {problem}")
        except (ChannelLost, OSError, ValueError):
            channel.close()
            raise
        self._watch_runner(channel)
        return channel

    def _watch_runner(self, channel: Channel) -> None:
        """Have the watcher kill the runner, with all it started, once a command stops it."""
        channel.host_pid = self._runner_host_pid(channel)
        if channel.host_pid is None:
            return

        def stopped() -> None:
            channel.killed = (
                "a command stopped the sandbox runner, so the host killed the runner and every "
                "process it had started"
            )
            self._kill_runner(channel)
            self._after_loss(channel.host_pid)

        gone = functools.partial(self._after_loss, channel.host_pid)
        self.watcher.watch(channel.host_pid, stopped, on_gone=gone)

    def _base_env(self) -> dict[str, str]:
        return {"PATH": SYSTEM_PATH}

    def _memory_needed(self, memory_mb: int) -> None:
        """Hook: the commands running now need this much memory in all (Docker sizes the
        container's limit, which backs each command's own)."""

    # --- public --------------------------------------------------------------------------------
    def run(
        self,
        command: str,
        timeout: float = DEFAULT_TIMEOUT,
        max_memory_mb: int | None = None,
        stop: threading.Event | None = None,
        cwd: str | None = None,
    ) -> CommandResult:
        timeout = clamp(timeout, DEFAULT_TIMEOUT, MAX_TIMEOUT)
        memory_mb = int(clamp(max_memory_mb, DEFAULT_MEMORY_MB, MAX_MEMORY_MB))
        try:
            workdir = self.resolve_cwd(cwd)
            notice = self._follow_workspace()
        except (ValueError, SandboxUnavailable) as exc:
            return CommandResult("", None, error=str(exc))
        request = {"op": "run", "cmd": command, "cwd": workdir, "env": self.command_env()}
        request.update(timeout=timeout, mem_mb=memory_mb, cap=OUTPUT_KEEP)
        request.update(max_rss_mb=self._rss_limit(memory_mb), id=next(self._ids))
        result = self._run_on_a_runner(request, stop, memory_mb)
        result.output = notice + result.output
        return result

    def close(self) -> None:
        self.sweep()
        self.processes.close()
        self._retire_runners()
        self.watcher.close()

    def resolve_cwd(self, cwd: str | None) -> str:
        """The absolute working directory for a command; must be inside the workspace."""
        path = Path(os.path.normpath(self.workspace / (cwd or ".")))
        if path != self.workspace and self.workspace not in path.parents:
            raise ValueError(f"cwd {cwd!r} is outside the workspace {self.workspace}")
        return str(path)

    def command_env(self) -> dict[str, str]:
        """The complete environment of a command: fixed values plus allowed host variables."""
        env = self._base_env()
        env.update(HOME=self.home, LANG="C.UTF-8", TERM="dumb", PAGER="cat", GIT_PAGER="cat")
        env.update(TMPDIR="/tmp", GIT_TERMINAL_PROMPT="0", MALLOC_ARENA_MAX="2")
        # no __pycache__ folders written into the user's workspace by the model's runs (each
        # was a changed file the model was shown, and was left behind)
        env.update(PYTHONDONTWRITEBYTECODE="1")
        # output is read, not shown on a terminal: pytest cut its lines of failures at 80
        # columns ("FAILED test_x.py::test_input_base_is_zero - Asse..." hid the error)
        env.update(COLUMNS="160")
        env.update(GIT_AUTHOR_NAME=self.cfg.git_name, GIT_COMMITTER_NAME=self.cfg.git_name)
        env.update(GIT_AUTHOR_EMAIL=self.cfg.git_email, GIT_COMMITTER_EMAIL=self.cfg.git_email)
        for name in self.cfg.allowed_env:
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    # --- internals -----------------------------------------------------------------------------
    def _run_on_a_runner(self, request: dict, stop, memory_mb: int) -> CommandResult:
        lent = self._borrow(stop)
        if lent is None:
            return CommandResult("", None, interrupted=True, error="interrupted before start")
        channel, generation = lent
        try:
            self._reserve_memory(memory_mb)
            channel = self._send(channel, request)
            result, healthy = self._exchange(channel, request, stop, memory_mb)
            if not healthy:
                self._lost(channel)
                channel = None
            return result
        except SandboxUnavailable as exc:
            channel = None
            return CommandResult("", None, error=str(exc))
        finally:
            self._release_memory(memory_mb)
            self._give_back(channel, generation)

    def _follow_workspace(self) -> str:
        """A notice when the workspace directory was moved or re-created since the sandbox
        started: then the sandbox has just been restarted on the current one. Else ""."""
        current = workspace_identity(self.workspace)
        if current == self.identity:
            return ""
        with self._restart_lock:
            if current == self.identity:  # another command restarted it meanwhile
                return ""
            self._retire_runners()
            self._restart()
            self.identity = current
        return WORKSPACE_REPLACED.format(workspace=self.workspace)

    def _retire_runners(self) -> None:
        """End the idle runners; those running a command now end when it does."""
        with self._pool:
            idle, self._idle = self._idle, []
            self._generation += 1
        for channel in idle:
            self._discard(channel)

    def _rss_limit(self, memory_mb: int) -> int | None:
        return memory_mb + 64 if self.rss_watchdog else None

    def _borrow(self, stop) -> tuple[Channel | None, int] | None:
        """A free runner (None: start a new one) once fewer than max_runners are busy; None
        when `stop` is set first."""
        with self._pool:
            while not self._idle and self._lent >= self.max_runners:
                if stop is not None and stop.is_set():
                    return None
                self._pool.wait(STOP_POLL)
            if stop is not None and stop.is_set():
                return None
            self._lent += 1
            return (self._idle.pop() if self._idle else None), self._generation

    def _give_back(self, channel: Channel | None, generation: int) -> None:
        with self._pool:
            self._lent -= 1
            keep = channel is not None and generation == self._generation
            if keep:
                self._idle.append(channel)
            self._pool.notify()
        if channel is not None and not keep:
            self._discard(channel)

    def _reserve_memory(self, memory_mb: int) -> None:
        with self._memory_lock:
            self._memory.append(memory_mb)
            self._memory_needed(max(DEFAULT_MEMORY_MB, sum(self._memory)))

    def _release_memory(self, memory_mb: int) -> None:
        with self._memory_lock:
            self._memory.remove(memory_mb)
            self._memory_needed(max(DEFAULT_MEMORY_MB, sum(self._memory)))

    def _send(self, channel: Channel | None, request: dict) -> Channel:
        """Send on the runner; if it died since its last command, start a new one once."""
        for attempt in (1, 2):
            if channel is not None and not channel.alive():
                self._lost(channel)
                channel = None
            if channel is None:
                channel = self._connect_checked()
            try:
                channel.send(request)
                return channel
            except ChannelLost:
                self._lost(channel)
                channel = None
                if attempt == 2:
                    raise SandboxUnavailable("cannot reach the sandbox runner") from None
        raise AssertionError("unreachable")

    def _exchange(
        self, channel: Channel, request: dict, stop, memory_mb: int
    ) -> tuple[CommandResult, bool]:
        """(the command's result, whether its runner can take another command)."""

        def kill() -> None:
            channel.send({"op": "kill", "id": request["id"]})

        try:
            deadline = time.monotonic() + request["timeout"] + REPLY_GRACE
            header, payload = channel.receive(deadline, on_stop=kill, stop=stop)
        except (ChannelLost, OSError, ValueError) as exc:
            interrupted = stop is not None and stop.is_set()
            error = f"{channel.killed or exc}; the sandbox restarts on the next command"
            return CommandResult("", None, interrupted=interrupted, error=error), False
        return result_from_reply(header, payload, request["timeout"], memory_mb), True

    def _ask_a_runner(self, request: dict) -> tuple[dict, int | None]:
        """Send one request that is not a command to a runner; its answer and the runner's
        host pid."""
        channel, generation = self._borrow(None)
        try:
            channel = self._send(channel, request)
            header, _ = channel.receive(time.monotonic() + REPLY_GRACE)
            return header, channel.host_pid
        except (ChannelLost, OSError, ValueError) as exc:
            self._lost(channel)
            channel = None
            raise ChannelLost(str(exc)) from exc
        finally:
            self._give_back(channel, generation)

    def _open_job_server(self) -> socket.socket:
        """Have a runner start the job server (background processes); connect to it.

        The runner listens on the job server's socket and then forks the job server, so the
        socket's peer (the process that called listen) is that runner. Any other peer is a
        socket a sandboxed process put at the path: refused before it hears the token.
        """
        plan = socket_plan(self.workspace)
        if plan is None:
            raise ChannelLost(f"cannot make {self.workspace}/.lmagent/sandbox/")
        answer, runner_pid = self._ask_a_runner(
            {"op": "jobs", **plan, "max_running": MAX_PROCESSES}
        )
        if not answer.get("ok"):
            raise ChannelLost(f"the job server did not start: {answer.get('error')}")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(JOB_REPLY_TIMEOUT)
            at_unix_path(conn.connect, plan["path"])
            if runner_pid is None or peer_pid(conn) != runner_pid:
                raise ChannelLost(
                    "the socket at the job server's path is not the job server's (a sandboxed "
                    "process put its own there); refused"
                )
            conn.sendall(plan["token"].encode() + b"\n")
        except (OSError, ChannelLost):
            conn.close()
            raise
        return conn

    def _connect_checked(self) -> Channel:
        try:
            return self._connect()
        except SandboxUnavailable:
            raise
        except (ChannelLost, OSError) as exc:
            raise SandboxUnavailable(f"cannot start the {self.name} sandbox: {exc}") from exc

    def _lost(self, channel: Channel) -> None:
        """A runner that died or stopped answering: close it, and leave nothing it started."""
        self._discard(channel)
        self._after_loss(channel.host_pid)

    def _discard(self, channel: Channel) -> None:
        self.watcher.forget(channel.host_pid)
        try:
            channel.close()
        except OSError:
            pass


def socket_plan(workspace: Path) -> dict | None:
    """A unix socket path in the workspace's .lmagent/sandbox/ and a token proving the host.

    The workspace is the one directory the host and the sandbox see at the same path. None if
    .lmagent/sandbox/ cannot be made.
    """
    path = workspace / ".lmagent" / "sandbox" / f"{secrets.token_hex(6)}.sock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return {"path": str(path), "token": secrets.token_hex(16)}


class ProcessError(Exception):
    """A background-process request failed; the message says why and what to do."""


class Processes:
    """Host end of a sandbox's background processes (the runner's job server).

    Every process runs under a keeper inside the sandbox that kills whatever it leaves behind
    when it ends; output is kept head + tail in memory there and in full (up to 16 MB) in
    `.lmagent/sandbox/processes/<started>-<id>.log`. The job server goes, with every process,
    when the sandbox is closed or the agent dies. A process started with an `owner` is seen
    only by calls with that owner (or with none: the user's /ps and /kill).
    """

    def __init__(self, sandbox: RunnerSandbox):
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._buffer = b""
        self._ids = itertools.count(1)
        self._owners: dict[str, str | None] = {}
        self._server_pid: int | None = None  # the job server's pid on the host

    def start(
        self,
        command: str,
        cwd: str | None = None,
        max_memory_mb: int | None = None,
        owner: str | None = None,
    ) -> dict:
        """Start `command` in the background; its description and first output."""
        try:
            workdir = self.sandbox.resolve_cwd(cwd)
            self.sandbox._follow_workspace()
        except (ValueError, SandboxUnavailable) as exc:
            raise ProcessError(str(exc)) from None
        process_id = f"p{next(self._ids)}"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        logs = self.sandbox.workspace / ".lmagent" / "sandbox" / PROCESS_LOGS
        logs.mkdir(parents=True, exist_ok=True)
        memory_mb = int(clamp(max_memory_mb, DEFAULT_MEMORY_MB, MAX_MEMORY_MB))
        request = {"op": "start", "id": process_id, "cmd": command, "cwd": workdir}
        request.update(env=self.sandbox.command_env(), mem_mb=memory_mb)
        request["log"] = str(logs / f"{stamp}-{process_id}.log")
        started = self.request(request)
        if started.get("error") == "limit":
            raise ProcessError(
                f"{MAX_PROCESSES} background processes are running already (the most at once); "
                "stop one with process_kill first"
            )
        if not started.get("ok"):
            raise ProcessError(f"the background process did not start: {started.get('error')}")
        self._owners[process_id] = owner
        return self.first_output(process_id)

    def first_output(self, process_id: str) -> dict:
        """Its output once it has written some or ended, or after FIRST_OUTPUT_WAIT seconds."""
        give_up = time.monotonic() + FIRST_OUTPUT_WAIT
        while True:
            answer = self.output(process_id)
            if answer["output"] or not answer["running"] or time.monotonic() > give_up:
                return answer
            time.sleep(0.05)

    def output(self, process_id: str, since: int = 0, owner: str | None = None) -> dict:
        self.check_owner(process_id, owner)
        return self.ask({"op": "output", "id": process_id, "since": since})

    def write(self, process_id: str, text: str, owner: str | None = None) -> dict:
        self.check_owner(process_id, owner)
        answer = self.request({"op": "input", "id": process_id, "text": text})
        problem = answer.get("error")
        if problem == "finished":
            raise ProcessError(
                f"process {process_id} has ended (exit code {answer.get('exit_code')}); "
                "it reads no more input"
            )
        if problem == "closed":
            raise ProcessError(f"process {process_id} has closed its input")
        if problem == "full":
            raise ProcessError(
                f"process {process_id} is not reading its input: only {answer['written']} of "
                f"{len(text.encode())} bytes were taken; try again once it has read them"
            )
        return self.known(answer, process_id)

    def kill(self, process_id: str, grace: float = PROCESS_GRACE, owner: str | None = None) -> dict:
        self.check_owner(process_id, owner)
        answer = self.request({"op": "kill", "ids": [process_id], "grace": grace})
        return self.known(answer, process_id)["processes"][0]

    def list(self, owner: str | None = None) -> list[dict]:
        """The background processes (running or ended) of `owner`, or all of them."""
        if self._conn is None:
            return []
        listed = self.request({"op": "list"}).get("processes", [])
        return [p for p in listed if owner is None or self._owners.get(p["process_id"]) == owner]

    def stop_all(self, owner: str | None = None) -> list[dict]:
        """Stop the running processes of `owner` (or all); the descriptions of those stopped."""
        running = [p["process_id"] for p in self.list(owner) if p["running"]]
        if not running:
            return []
        return self.request({"op": "kill", "ids": running, "grace": PROCESS_GRACE})["processes"]

    def check_owner(self, process_id: str, owner: str | None) -> None:
        if owner is not None and self._owners.get(process_id, owner) != owner:
            raise ProcessError(f"there is no background process {process_id!r} in this run")

    def ask(self, request: dict) -> dict:
        return self.known(self.request(request), request["id"])

    @staticmethod
    def known(answer: dict, process_id: str) -> dict:
        if not answer.get("ok"):
            raise ProcessError(f"there is no background process {process_id!r}")
        return answer

    def request(self, message: dict) -> dict:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self.sandbox._open_job_server()
                    self._buffer = b""
                    greeting = json.loads(self._read_line())  # it took the token
                    self._watch(greeting.get("pid"))
                self._conn.sendall(json.dumps(message).encode() + b"\n")
                return json.loads(self._read_line())
            except (OSError, ValueError, ChannelLost, SandboxUnavailable) as exc:
                self._drop()
                raise ProcessError(
                    f"the sandbox's background processes are gone ({exc}); any that ran were "
                    "stopped - start them again"
                ) from None

    def _read_line(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._conn.recv(262144)
            if not chunk:
                raise ChannelLost("the job server exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _watch(self, inner_pid: int | None) -> None:
        """Have the watcher kill the job server, with every process it keeps, once something
        stops it (it would never stop them itself)."""
        runners = self.sandbox.watcher.pids()
        host_pid = find_in_trees(runners, inner_pid) if inner_pid and runners else None
        if host_pid is None:
            return
        self._server_pid = host_pid

        def stopped() -> None:
            kill_trees({host_pid})
            self.sandbox._after_loss(host_pid)

        gone = functools.partial(self.sandbox._after_loss, host_pid)
        self.sandbox.watcher.watch(host_pid, stopped, on_gone=gone)

    def _drop(self) -> None:
        self.sandbox.watcher.forget(self._server_pid)
        self._server_pid = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Stop every background process (the job server stops them when the host goes)."""
        with self._lock:
            self._drop()


def result_from_reply(
    header: dict, payload: bytes, timeout: float, memory_mb: int
) -> CommandResult:
    head, tail = payload[: header["head"]], payload[header["head"] :]
    cut = int(header["total"]) - len(payload)
    output = header.get("notice") or ""
    output += head.decode("utf-8", "replace")
    if cut > 0:
        output += f"\n[... {cut} bytes of output cut ...]\n"
    output += tail.decode("utf-8", "replace")
    result = CommandResult(output=output, exit_code=header.get("exit"), truncated_bytes=max(cut, 0))
    reason = header.get("reason")
    if reason:
        result.exit_code = None
        result.error = KILL_REASONS[reason].format(timeout=timeout, mb=memory_mb, procs=PIDS_LIMIT)
        result.timed_out = reason == "timeout"
        result.interrupted = reason == "stopped"
    elif header.get("oom_kills"):
        result.error = (
            f"{header['oom_kills']} process(es) killed for exceeding the sandbox memory limit "
            f"({memory_mb} MB)"
        )
    elif header.get("signal") == 9:
        result.error = f"killed by SIGKILL (most likely the {memory_mb} MB memory limit)"
    return result


WORKSPACE_REPLACED = (
    "sandbox: the workspace {workspace} was moved or re-created since the sandbox started; the "
    "sandbox was restarted on the directory there now (its /tmp and background processes are "
    "gone)\n"
)
KILL_REASONS = {
    "timeout": "timed out after {timeout:g} s (process tree killed)",
    "stopped": "interrupted by a stop request (process tree killed)",
    "procs": "too many processes in the sandbox (limit {procs}; fork bomb?) - all killed",
    "memory": "the sandbox went over its memory limit of {mb} MB - all its processes killed",
}
