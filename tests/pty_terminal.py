"""The CLI as a person at a shell runs it: a real pseudo-terminal (python's pty module), so the
process sees a terminal where the tests' pipes would make it non-interactive."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cli_with_terminal(workspace, *args, typed: str = "", env: dict, timeout: float = 30):
    """agent_main.py with a terminal as stdin (lines in `typed` are what the person types)
    and stdout/stderr captured as text."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), *args],
            cwd=workspace,
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(slave)
        slave = None
        if typed:
            os.write(master, typed.encode())  # typed ahead: the terminal keeps it for the reads
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class Terminal:
    """A process whose stdin, stdout and stderr are one pseudo-terminal: read what it shows,
    type answers when a prompt appears."""

    def __init__(self, args: list[str], *, cwd, env: dict):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), *args],
            cwd=cwd,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.shown = ""  # everything shown so far, colour codes removed
        self.raw = b""  # everything shown so far, as sent

    def expect(self, text: str, timeout: float = 20) -> str:
        """Wait until `text` has been shown; return what was shown up to and including it."""
        deadline = time.monotonic() + timeout
        while text not in self.shown:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{text!r} never shown; the terminal shows:\n{self.shown}")
        return self.shown[: self.shown.index(text) + len(text)]

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\r").encode())

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the process has gone and closed its side
            return False
        self.raw += data
        self.shown += ANSI.sub("", data.decode(errors="replace")).replace("\r\n", "\n")
        return bool(data)

    def finish(self, timeout: float = 30) -> int:
        """Read to the end and return the exit code."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.05):
            pass
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
