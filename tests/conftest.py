"""Shared fixtures: a temporary workspace, a config pointing at it, and the scripted LLM server."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from lmagent.core.config import Config
from lmagent.core.workspace import Workspace
from lmagent.llm import toolmode
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import Services, ToolContext
from tests.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent

IN_CI = os.environ.get("CI", "").lower() == "true"


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    """The first true value `predicate()` returns, asked every 50 ms; AssertionError naming
    `what` when `timeout` seconds pass without one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (just now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def need(available: bool, reason: str) -> None:
    """Skip on a user's machine without a component; fail loudly in CI, where it must exist."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def daemons():
    """Scheduler daemon processes a test started (each with a `log` file); killed after it."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.log.close()


@pytest.fixture(autouse=True)
def no_tool_mode_outlives_its_server():
    """A tool mode decided for one test's server must not reach the next test's server at the
    same address: ports are reused (CI failed on a 'text' decision left by an earlier test)."""
    yield
    toolmode.forget()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


def make_config(workspace: Path, llm: ScriptedLLM | None = None, **changes) -> Config:
    environ = {
        "WORKSPACE": str(workspace),
        "LLM_URL": llm.url if llm else "http://127.0.0.1:9/v1/chat/completions",
        "PERMISSION_MODE": "auto",
        "LLM_RETRY_DELAY": "0.01",
        "LLM_RETRIES": "3",
        "SANDBOX_BACKEND": os.environ.get("TEST_SANDBOX_BACKEND", "auto"),
        "EMBEDDED_KEEP_WARM": "0",  # a test's server ends with it
    }
    config = Config.load(environ=environ, cwd=workspace)
    return config.with_changes(**changes) if changes else config


@pytest.fixture
def config(workspace: Path, llm: ScriptedLLM) -> Config:
    return make_config(workspace, llm)


def tool_context(config: Config, *, session=None, services=None, **extra) -> ToolContext:
    """A ToolContext over the config's workspace, as a run hands one to its tools."""
    return ToolContext(
        config=config,
        workspace=Workspace(config.workspace),
        session=session or SessionStore(config.workspace).create("t"),
        services=services or Services(config),
        **extra,
    )


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    """A tool context for `workspace`, with a test config."""
    return tool_context(make_config(workspace))


@pytest.fixture
def running():
    """Start `agent_main.py` processes (tests.cli_process.Running); all are killed at the end."""
    from tests.cli_process import Running

    started: list[Running] = []

    def start(*args, **kw) -> Running:
        started.append(Running(*args, **kw))
        return started[-1]

    yield start
    for proc in started:
        proc.kill()


# --------------------------------------------------------------------------- containers


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_container_outlives_the_session(tmp_path_factory):
    """Docker sandboxes persist per workspace by design; every test workspace lies under this
    session's base temporary folder, so their containers are removed when the session ends
    (also for tests that reach Docker through the loop, the web UI or a queue worker)."""
    yield
    base = str(tmp_path_factory.getbasetemp()) + os.sep
    try:
        import docker

        client = docker.from_env(timeout=30)
        found = client.containers.list(all=True, filters={"label": "lmagent.sandbox=1"})
    except Exception:  # no engine, no package: nothing was started there
        return
    for container in found:
        if container.labels.get("lmagent.workspace", "").startswith(base):
            with contextlib.suppress(Exception):
                container.remove(force=True)


# --------------------------------------------------------------------------- attack counts

ATTACK_LINE = re.compile(r"\b\d[\d,]* (?:restore )?attempts\b|\brestores=\d+")
attack_lines: list[str] = []


def pytest_runtest_logreport(report) -> None:
    """Keep the lines where an attack test (race, restore race, runner stopping) says how many
    attempts it made, so a plain `pytest -q` run (CI) still shows them at its end."""
    if report.when == "call" and report.passed:
        for line in report.capstdout.splitlines():
            if ATTACK_LINE.search(line):
                attack_lines.append(f"{report.nodeid.split('::')[0]}: {line.strip()}")


def pytest_terminal_summary(terminalreporter) -> None:
    if attack_lines:
        terminalreporter.section("attack attempts (0 escapes in each, or the test failed)")
        for line in attack_lines:
            terminalreporter.write_line(line)
