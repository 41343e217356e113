"""`agent_main.py` as a subprocess, for tests: the environment of a user's shell without their
LMAgent settings (cli_env), one run to its end (cli), or a process read line by line while it
runs (Running; the `running` fixture in conftest.py kills what it started)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from lmagent.core.config import describe_settings
from lmagent.sessions.store import SessionStore
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {name for name, _, _ in describe_settings()}


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1/chat/completions"


def cli_env(workspace: Path, llm=None, **extra: str) -> dict:
    """The environment of a user's shell, without their LMAgent settings, plus test settings."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    env.update(
        WORKSPACE=str(workspace),
        LLM_URL=llm.url if llm else closed_port_url(),
        PERMISSION_MODE="auto",
        LLM_RETRY_DELAY="0.01",
        LLM_RETRIES="1",
        ENABLE_MCP="false",
        SANDBOX_BACKEND="process",
        ALLOW_UNSANDBOXED_AUTO="true",  # the tests' commands are their own
        PYTHONUNBUFFERED="1",
        EMBEDDED_KEEP_WARM="0",  # a test's embedded server ends with its run
    )
    env.update(extra)
    return env


def cli(workspace, llm, *args, input="", env=None, timeout=30):
    return subprocess.run(
        [sys.executable, str(ROOT / "agent_main.py"), *args],
        cwd=workspace,
        env=env or cli_env(workspace, llm),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Running:
    """A CLI subprocess whose stdout is read line by line while it runs."""

    def __init__(self, workspace, llm, *args, env=None):
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "agent_main.py"), *args],
            cwd=workspace,
            env=env or cli_env(workspace, llm),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, fragment: str, timeout: float = 15) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no {fragment!r} in output:\n{''.join(self.seen)}")

    def finish(self, timeout: float = 15) -> tuple[int, str]:
        code = self.proc.wait(timeout=timeout)
        return code, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def only_session(workspace: Path) -> dict:
    (meta,) = SessionStore(workspace).list()
    return meta
