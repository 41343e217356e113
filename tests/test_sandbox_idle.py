"""A Docker sandbox nobody uses stops by itself, can be stopped at once, and starts again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lmagent.sandbox.docker import container_name, docker_client
from tests.conftest import wait_for

pytest_plugins = ["tests.sandbox_fixtures"]
ROOT = Path(__file__).resolve().parent.parent
GUARD = 600  # seconds: only a last resort on a very busy machine; the wait ends on the event


def status(workspace: Path) -> str:
    container = docker_client().containers.get(container_name(workspace))
    return container.status


def test_an_idle_container_stops_by_itself_and_the_next_run_starts_it(make_sandbox):
    sandbox = make_sandbox("docker", idle_minutes=0.05)  # 3 s alone
    assert sandbox.run("echo one").output == "one\n"
    sandbox.processes.start("sleep 8301")
    sandbox.close()  # the agent goes away: no runner is left in the container
    wait_for(lambda: status(sandbox.workspace) == "exited", GUARD, "the idle container to stop")
    again = make_sandbox("docker", workspace=sandbox.workspace, idle_minutes=0.05)
    assert again.run("echo two").output == "two\n"
    assert status(sandbox.workspace) == "running"


def test_a_container_in_use_keeps_running(make_sandbox):
    sandbox = make_sandbox("docker", idle_minutes=0.05)
    result = sandbox.run("sleep 8; echo still here", timeout=60)  # longer than the idle time
    assert result.output == "still here\n"
    time.sleep(8)  # an agent's idle runner waits for its next command: that is use too
    assert status(sandbox.workspace) == "running"
    assert sandbox.run("echo and here").output == "and here\n"


def test_lmagent_sandbox_stop_stops_the_workspaces_container(make_sandbox):
    sandbox = make_sandbox("docker")
    sandbox.run("true")
    sandbox.close()
    env = dict(os.environ, WORKSPACE=str(sandbox.workspace), SANDBOX_BACKEND="docker")
    argv = [sys.executable, str(ROOT / "sandboxed_shell.py"), "--stop"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert f"stopped the sandbox container of {sandbox.workspace}" in done.stdout
    assert status(sandbox.workspace) == "exited"
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=GUARD)
    assert "no sandbox container is running" in done.stdout
