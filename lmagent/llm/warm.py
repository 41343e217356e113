"""The embedded model server kept loaded between runs, as Ollama keeps a model loaded: a
one-shot `--embedded` run uses the server an earlier run left (EMBEDDED_KEEP_WARM minutes after
the last run using it ended) and skips the process's start and the model's load.

The files of one model, in `folder` (0700; the user's cache):
- `<name>.json` (0600): where the server is (port, pid), what it runs (`identity`: the model
  file, window, threads, speculation, llama.cpp's version) and its key: the server answers only
  requests that carry it (another user of the machine cannot talk to it, nor read its slots);
- `<name>.lock`: finding or starting the server is done under it, so two runs starting
  together share one server;
- `<name>.clients/<pid>-<start time>`: one lease per process using the server. The server
  exits once no lease's process is alive and the last ended `minutes` ago; a client killed
  with SIGKILL holds nothing, as its process is gone.

This file is imported by the server's own process (embedded.py run as a script): it imports
only lmagent.core.files of lmagent.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from lmagent.core import files

POLL = 1.0  # seconds between two looks at the leases (a directory listing)
STOP_WAIT = 30.0  # seconds a replaced server has to end before its successor loads


def lease_name(pid: int) -> str:
    """A process named by its pid and start time: a reused pid is another process."""
    return f"{pid}-{psutil.Process(pid).create_time():.2f}"


def holder_alive(name: str) -> bool:
    pid, _, started = name.partition("-")
    try:
        return lease_name(int(pid)) == f"{pid}-{started}"
    except (psutil.Error, ValueError):
        return False


def live_leases(clients: Path) -> list[Path]:
    """The leases whose process still runs; the others are deleted."""
    alive = []
    for lease in clients.glob("*") if clients.is_dir() else []:
        if holder_alive(lease.name):
            alive.append(lease)
        else:
            lease.unlink(missing_ok=True)
    return alive


def watch_idle(clients: Path, minutes: float, done: threading.Event) -> None:
    """Set `done` once no client has held a lease in `clients` for `minutes` and the server
    has retired (the server's exit)."""
    warm = WarmServer.of_clients(clients)
    idle_since: float | None = None
    while not done.wait(POLL):
        if live_leases(clients):
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= minutes * 60 and warm.retire(os.getpid()):
            done.set()


class WarmServer:
    """The record of the kept-warm server of one model (`name`) in `folder`."""

    def __init__(self, folder: Path, name: str):
        self.folder = folder
        self.name = name

    @property
    def record_file(self) -> Path:
        return self.folder / f"{self.name}.json"

    @property
    def clients(self) -> Path:
        return self.folder / f"{self.name}.clients"

    @property
    def log_file(self) -> Path:
        return self.folder / f"{self.name}.log"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.clients.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        with files.locked(self.folder / f"{self.name}.lock"):
            yield

    def take_lease(self) -> Path:
        """This process uses the server (held until `release`, or its end)."""
        lease = self.clients / lease_name(os.getpid())
        lease.touch()
        return lease

    def read(self) -> dict | None:
        """The record of a server whose process still runs, else None (the record deleted)."""
        try:
            record = json.loads(self.record_file.read_text())
            pid = int(record["pid"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            record, pid = None, 0
        if record is None or not self._serves(pid):
            self.record_file.unlink(missing_ok=True)
            return None
        return record

    def _serves(self, pid: int) -> bool:
        """`pid` is a server of these leases (not a process that took an ended one's pid)."""
        try:
            return str(self.clients) in psutil.Process(pid).cmdline()
        except psutil.Error:
            return False

    @classmethod
    def of_clients(cls, clients: Path) -> WarmServer:
        return cls(clients.parent, clients.name.removesuffix(".clients"))

    def write(self, port: int, pid: int, identity: dict, key: str) -> None:
        record = {"port": port, "pid": pid, "identity": identity, "key": key}
        temporary = self.record_file.with_suffix(".tmp")
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            json.dump(record, file)
        os.replace(temporary, self.record_file)

    def in_use(self, besides: Path | None = None) -> bool:
        """Whether a run other than the one holding `besides` holds a lease."""
        return any(lease != besides for lease in live_leases(self.clients))

    def stop(self, record: dict, wait: float = STOP_WAIT) -> bool:
        """Stop the server of `record` (as `read` gave it: checked to serve these leases) and
        forget it; wait up to `wait` seconds for it to end. Whether it was signalled."""
        try:
            server = psutil.Process(record["pid"])
            server.terminate()
        except psutil.Error:
            return False
        self.forget(record["pid"])
        if wait:
            with contextlib.suppress(psutil.Error):  # TimeoutExpired too: its own minutes end it
                server.wait(timeout=wait)
        return True

    def retire(self, pid: int) -> bool:
        """The server `pid`, idle, leaves: under the lock, so a run that took a lease and
        read the record meanwhile keeps it (False), and one coming after finds no record."""
        with self.locked():
            if live_leases(self.clients):
                return False
            self.forget(pid)
            return True

    def forget(self, pid: int) -> None:
        """The server `pid` ends: its record goes, unless another server's replaced it."""
        with contextlib.suppress(OSError, ValueError):
            if json.loads(self.record_file.read_text()).get("pid") == pid:
                self.record_file.unlink()
