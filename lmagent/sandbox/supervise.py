"""The host's own view of sandboxed processes: what commands cannot reach or stop.

A command runs with the same uid as the runner that sweeps up after it, so it can stop
(`kill -STOP $PPID`) or kill that runner. Everything here runs on the host, outside the
sandbox's PID namespace, and works on host pids read from the host's /proc: the state of a
runner or job server, the processes of a Docker container (by its cgroup) or of a bwrap sandbox
(the bwrap process's descendants), and killing a whole tree so that nothing in it can fork away
meanwhile (`kill_trees`: stop every member first, then SIGKILL them all).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

from lmagent.sandbox.runner import subtree

STOPPED_STATES = ("T", "t")  # stopped by a signal, or stopped under a tracer
FREEZE_PATIENCE = 5.0  # seconds kill_trees waits for a tree to stop growing at most
CGROUP2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")  # unified, and hybrid set-ups


@dataclass(frozen=True)
class HostProcess:
    pid: int
    ppid: int
    state: str
    name: str
    start: int  # clock ticks after boot


def host_process(pid: int) -> HostProcess | None:
    """pid's parent, state and name from the host's /proc (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode("utf-8", "replace")
    fields = stat[stat.rfind(b")") + 2 :].split()
    return HostProcess(pid, int(fields[1]), fields[0].decode(), name, int(fields[19]))


def host_processes() -> dict[int, HostProcess]:
    """Every process the host's /proc shows."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            process = host_process(int(entry))
            if process is not None:
                table[process.pid] = process
    return table


def process_uid(pid: int) -> int | None:
    """pid's real uid as the host sees it (its /proc entry's owner says root when it is not
    dumpable, so the status file's Uid line is read), None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_stopped(pid: int) -> bool:
    process = host_process(pid)
    return process is not None and process.state in STOPPED_STATES


def descendants(table: dict[int, HostProcess], roots: set[int]) -> set[int]:
    """`roots` still alive and everything below them."""
    return subtree({p.pid: (p.ppid, 0) for p in table.values()}, roots)


def namespace_pid(pid: int) -> int | None:
    """pid as the innermost PID namespace it lives in sees it (the NSpid line's last field)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def find_in_trees(roots: set[int], inner_pid: int) -> int | None:
    """The host pid of the process below `roots` that its own namespace calls `inner_pid`."""
    table = host_processes()
    for pid in sorted(descendants(table, roots)):
        if namespace_pid(pid) == inner_pid:
            return pid
    return None


def kill_trees(roots: set[int], processes=host_processes) -> set[int]:
    """SIGKILL `roots` and all their descendants; the pids killed.

    Each member is stopped (SIGSTOP) first and the tree looked at again until it has stopped
    growing, so a process forking meanwhile cannot leave a child behind; then all are killed.
    `processes()` gives the table to look at (default: every host process).
    """
    frozen: set[int] = set()
    give_up = time.monotonic() + FREEZE_PATIENCE
    while roots and time.monotonic() < give_up:
        table = processes()
        new = descendants(table, roots | frozen) - frozen
        if not new and all(table[pid].state in "TtZX" for pid in frozen if pid in table):
            break
        for pid in new:
            signal_quietly(pid, signal.SIGSTOP)
        frozen |= new
        time.sleep(0.002)
    for pid in frozen:
        signal_quietly(pid, signal.SIGKILL)
    return frozen


def still_alive(pids: set[int], patience: float = 2.0) -> set[int]:
    """Those of `pids` (just sent SIGKILL) that have not died within `patience` seconds."""
    give_up = time.monotonic() + patience
    while True:
        alive = {pid for pid in pids if (p := host_process(pid)) and p.state not in "ZX"}
        if not alive or time.monotonic() > give_up:
            return alive
        time.sleep(0.005)


def signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def cgroup_members(pid: int) -> set[int] | None:
    """The pids in `pid`'s pids cgroup (a Docker container's: everything started in it, by
    exec too), read from cgroup.procs; None if that cannot be read."""
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle]
    except OSError:
        return None
    paths = [f"/sys/fs/cgroup/pids{path}" for _, kinds, path in lines if "pids" in kinds.split(",")]
    paths += [f"{root}{path}" for _, kinds, path in lines if kinds == "" for root in CGROUP2_ROOTS]
    for path in paths:
        try:
            with open(f"{path}/cgroup.procs") as handle:
                return {int(line) for line in handle if line.strip()}
        except (OSError, ValueError):
            continue
    return None


def container_processes_exist() -> bool:
    """Whether any host process is in a Docker container's cgroup (checked when no engine
    answers: its containers may still run)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cgroup", "rb") as handle:
                if b"docker" in handle.read():
                    return True
        except OSError:
            continue
    return False


def processes_of(pids: set[int]) -> dict[int, HostProcess]:
    """host_process() of each of `pids` still there."""
    found = {pid: host_process(pid) for pid in pids}
    return {pid: process for pid, process in found.items() if process is not None}


def bwrap_sandboxes(workspace: str, table: dict[int, HostProcess]) -> set[int]:
    """The outermost bwrap processes that bind `workspace` writable (any agent's sandboxes)."""
    found = set()
    wanted = ["--bind", workspace, workspace]
    for process in table.values():
        if process.name != "bwrap":
            continue
        try:
            with open(f"/proc/{process.pid}/cmdline", "rb") as handle:
                argv = handle.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if any(argv[i : i + 3] == wanted for i in range(len(argv))):
            found.add(process.pid)
    return {pid for pid in found if table[pid].ppid not in found}


WATCH_INTERVAL = 0.1  # seconds between the host's looks at the runners and job servers


class Watcher:
    """Looks at host pids every WATCH_INTERVAL from a thread of the host.

    `on_stopped` runs once a watched process is stopped or traced, `on_gone` once it has exited;
    either way it is no longer watched. Commands cannot reach this thread.
    """

    def __init__(self):
        self._watched: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int, on_stopped, on_gone=None) -> None:
        with self._lock:
            self._watched[pid] = (on_stopped, on_gone)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="sandbox-watcher", daemon=True
                )
                self._thread.start()

    def pids(self) -> set[int]:
        with self._lock:
            return set(self._watched)

    def forget(self, pid: int | None) -> None:
        with self._lock:
            self._watched.pop(pid, None)

    def check(self) -> None:
        """One look at every watched process (the thread's step; also called directly)."""
        with self._lock:
            watched = list(self._watched.items())
        for pid, (on_stopped, on_gone) in watched:
            process = host_process(pid)
            stopped = process is not None and process.state in STOPPED_STATES
            gone = process is None or process.state in "ZX"
            if not (stopped or gone):
                continue
            with self._lock:
                if self._watched.pop(pid, None) is None:
                    continue
            if stopped:
                on_stopped()
            elif on_gone is not None:
                on_gone()

    def _loop(self) -> None:
        while not self._closed.wait(WATCH_INTERVAL):
            self.check()

    def close(self) -> None:
        self._closed.set()
