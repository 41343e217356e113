"""Backends without Docker: bubblewrap (real isolation) and a bare process group (none).

Both start ``sandbox/runner.py`` once as a child process and talk to it over pipes.
"""

from __future__ import annotations

import concurrent.futures
import errno
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmagent.sandbox.base import (
    EMPTY,
    EMPTY_SIZE,
    PIDS_LIMIT,
    READ_ONLY,
    RUNNER_SOURCE,
    SANDBOX_HOME,
    SYSTEM_PATH,
    Channel,
    RunnerSandbox,
    SandboxConfig,
    SandboxUnavailable,
    workspace_mounts,
)
from lmagent.sandbox.seccomp import filter_program
from lmagent.sandbox.supervise import (
    bwrap_sandboxes,
    find_in_trees,
    host_processes,
    kill_trees,
    still_alive,
)

# /etc entries a sandboxed command may read; everything else there (shadow, ssh keys, ...) is absent
ETC_ALLOWED = (
    "passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "localtime", "timezone",
    "gitconfig", "bash.bashrc", "profile", "inputrc", "mime.types", "os-release", "debian_version",
    "python3", "python3.11", "python3.12", "python3.13",
)  # fmt: skip
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
TMP_SIZE = 256 * 1024 * 1024
HOME_SIZE = 64 * 1024 * 1024
EXTRA_BIN = "/opt/lmagent/bin"  # last on a bwrap command's PATH: `python` for a host with python3


# Runners are started from this one thread, which lives as long as the agent: bwrap's
# --die-with-parent fires when the thread that started it ends, not the process (a web run's
# thread ending would take the sandbox, and its background processes, with it).
SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sandbox-spawner")


class PipeTransport:
    """The runner as a child process, spoken to over its stdin/stdout."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: str, cgroup_procs=None, pass_fds=()
    ):
        self.cgroup_procs = cgroup_procs  # removed with the runner, when nothing is left in it
        self.proc = SPAWNER.submit(
            subprocess.Popen,
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # Ctrl+C in the agent's terminal must not reach it
            preexec_fn=(lambda: join_cgroup(cgroup_procs)) if cgroup_procs else None,
            pass_fds=pass_fds,
        ).result()
        os.set_blocking(self.proc.stderr.fileno(), False)

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_some(self) -> bytes:
        chunk = os.read(self.fileno(), 262144)
        if not chunk:
            raise EOFError("the sandbox runner exited" + self._stderr_tail())
        return chunk

    def _stderr_tail(self) -> str:
        try:
            detail = (self.proc.stderr.read() or b"").decode("utf-8", "replace").strip()
        except OSError:
            detail = ""
        return f": {detail[-500:]}" if detail else ""

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.cgroup_procs is not None:
            remove_cgroup(self.cgroup_procs.parent)


# --- bubblewrap ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _bwrap_help() -> str:
    try:
        done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def bwrap_python() -> str | None:
    """A system Python the sandbox can see (only /usr and friends are mounted)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return candidate if candidate.startswith("/usr/") else real
    return None


def bwrap_argv(workspace: Path, home: str = SANDBOX_HOME) -> list[str]:
    """bwrap options: system read-only, only the workspace writable, nothing shared."""
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    argv += ["--clearenv", "--cap-drop", "ALL", "--hostname", "lmagent-sandbox"]
    if "--disable-userns" in _bwrap_help():
        argv += ["--disable-userns"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--dir", "/etc"]
    for name in ETC_ALLOWED:
        if os.path.exists(f"/etc/{name}"):
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(TMP_SIZE), "--tmpfs", "/tmp", "--size", str(HOME_SIZE), "--tmpfs", home]
    argv += ["--dir", "/var", "--symlink", "../tmp", "/var/tmp"]
    python = bwrap_python()
    if python:
        argv += ["--dir", EXTRA_BIN, "--symlink", os.path.realpath(python), f"{EXTRA_BIN}/python"]
    argv += workspace_options(workspace)
    argv += ["--chdir", str(workspace)]
    argv += ["--remount-ro", "/"]  # bwrap's own root tmpfs: not a place to write either
    return argv


def workspace_options(workspace: Path) -> list[str]:
    """The workspace_mounts() as bwrap options; an EMPTY one is made read-only once the
    mounts inside it are in place."""
    argv, empty = [], []
    for path, kind in workspace_mounts(workspace):
        if kind == EMPTY:
            argv += ["--perms", "0555", "--size", str(EMPTY_SIZE), "--tmpfs", path]
            empty.append(path)
        else:
            argv += ["--ro-bind" if kind == READ_ONLY else "--bind", path, path]
    for path in empty:
        argv += ["--remount-ro", path]
    return argv


@functools.lru_cache(maxsize=4)
def probe_bwrap(workspace: Path) -> tuple[bool, str]:
    """(usable, reason): really starts a sandbox with the options the backend uses."""
    if not shutil.which("bwrap"):
        return False, "bubblewrap is not installed (e.g. sudo apt-get install bubblewrap)"
    try:
        filter_program()
    except SandboxUnavailable as exc:
        return False, str(exc)
    python = bwrap_python()
    if python is None:
        return False, "bubblewrap needs a system python3 under /usr (e.g. apt-get install python3)"
    probe_dir = workspace if workspace.is_dir() else Path(tempfile.gettempdir())
    argv = [*bwrap_argv(probe_dir), python, "-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap does not start: {exc}"
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"bubblewrap cannot create its namespaces here ({detail})"
    return (
        True,
        "bubblewrap: read-only system, only the workspace writable, private /tmp, no network, "
        "syscall filter",
    )


class BwrapSandbox(RunnerSandbox):
    name = "bwrap"
    max_procs = PIDS_LIMIT  # the runner's watchdog, plus a pids cgroup where one can be made
    rss_watchdog = True

    def __init__(self, cfg: SandboxConfig):
        super().__init__(cfg)
        usable, reason = probe_bwrap(self.workspace)
        if not usable:
            raise SandboxUnavailable(reason)
        self.python = bwrap_python()

    def _base_env(self) -> dict[str, str]:
        return {"PATH": f"{SYSTEM_PATH}:{EXTRA_BIN}"}

    def _connect(self) -> Channel:
        """A runner in a bwrap sandbox of its own, under the syscall filter (`--seccomp`)."""
        program_r, program_w = os.pipe()
        try:
            os.write(program_w, filter_program())  # far below a pipe's buffer
            os.close(program_w)
            argv = [*bwrap_argv(self.workspace, self.home), "--seccomp", str(program_r)]
            # the runner is PID 1 (bwrap's own init would be dumpable: a command could write
            # its memory); when it exits, the kernel kills everything left in the sandbox
            argv += ["--as-pid-1"]
            argv += [self.python, "-c", RUNNER_SOURCE]
            cgroup = pids_cgroup(self.workspace)
            transport = PipeTransport(
                argv, {}, str(self.workspace), cgroup_procs=cgroup, pass_fds=(program_r,)
            )
        finally:
            os.close(program_r)
        return self._start_channel(transport)

    def _runner_host_pid(self, channel: Channel) -> int | None:
        return find_in_trees({channel.transport.proc.pid}, channel.ready.get("pid"))

    def _kill_runner(self, channel: Channel) -> None:
        """The bwrap process and so its whole PID namespace."""
        kill_trees({channel.transport.proc.pid})


def quiesce_bwrap(workspace: Path) -> list[str]:
    """Kill every bwrap sandbox of the workspace, whichever agent process started it (each
    takes its whole PID namespace along); the processes killed, described."""
    table = host_processes()
    killed = kill_trees(bwrap_sandboxes(str(workspace), table))
    left = still_alive(killed)
    if left:
        raise SandboxUnavailable(f"processes of {workspace}'s sandboxes survive SIGKILL: {left}")
    return [f"{table[p].name} (host pid {p})" for p in sorted(killed) if p in table]


def pids_cgroup(workspace: Path) -> Path | None:
    """`cgroup.procs` of a pids cgroup (pids.max = the sandbox's limit plus bwrap and runner)
    where this user may make one (root, or a delegated cgroup v1 pids hierarchy); else None and
    the runner's watchdog is the only process limit."""
    base = Path("/sys/fs/cgroup/pids")
    name = "lmagent-" + hashlib.sha256(str(workspace).encode()).hexdigest()[:12]
    group = base / name
    try:
        if not (base / "cgroup.procs").exists():
            return None
        group.mkdir(exist_ok=True)
        (group / "pids.max").write_text(str(PIDS_LIMIT + 4))
    except OSError:
        return None
    return group / "cgroup.procs"


def remove_cgroup(group: Path, patience: float = 1.0) -> None:
    """Remove a pids cgroup once the last process in it is gone (the kernel may still be reaping
    a killed command's tree); leave it to another run of the workspace that still uses it."""
    deadline = time.monotonic() + patience
    while True:
        try:
            os.rmdir(group)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
        time.sleep(0.05)


def join_cgroup(procs: Path) -> None:
    """In the child before exec: move itself (and so all it starts) into the cgroup."""
    try:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        pass  # the watchdog still limits the processes


# --- bare process group ------------------------------------------------------------------------
PROCESS_WARNING = (
    "process backend: NO filesystem or network isolation - commands run as you, can read and "
    "change any of your files and reach the network; only a process group, rlimits and a clean "
    "environment apply (chosen explicitly with SANDBOX_BACKEND=process)"
)


class ProcessSandbox(RunnerSandbox):
    """Commands as plain child processes. Only ever used when asked for by name."""

    name = "process"

    def __init__(self, cfg: SandboxConfig):
        super().__init__(cfg)
        self._home_dir = tempfile.TemporaryDirectory(prefix="lmagent-home-")
        self.home = self._home_dir.name

    def _base_env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH") or os.defpath}

    def _connect(self) -> Channel:
        argv = [sys.executable, "-c", RUNNER_SOURCE]
        env = {"PATH": self._base_env()["PATH"], "HOME": self.home}
        transport = PipeTransport(argv, env=env, cwd=str(self.workspace))
        return self._start_channel(transport)

    def _runner_host_pid(self, channel: Channel) -> int | None:
        return channel.transport.proc.pid

    def close(self) -> None:
        super().close()
        self._home_dir.cleanup()
