"""Auto permission mode with SANDBOX_BACKEND=process runs every command unisolated on the host
without asking: every front end refuses that pair unless the user confirms it, and once it is
confirmed their banners and status say so."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest
import requests

from lmagent.web.app import create_app
from tests.cli_process import Running, cli, cli_env
from tests.conftest import ROOT, free_port, make_config
from tests.scripted_llm import text, tool_call

PIN = "13572468"
REFUSED = "auto permission mode with SANDBOX_BACKEND=process would run every command unisolated"
SCHEDULER_REFUSED = "the scheduler (its tasks run in auto permission mode) with SANDBOX_BACKEND"
CONFIRMED = "commands run unisolated on the host (SANDBOX_BACKEND=process), in auto mode without"
UNCONFIRMED = "commands run unisolated on the host (SANDBOX_BACKEND=process); auto mode is refused"


def unconfirmed_env(workspace, llm, **extra: str) -> dict:
    return cli_env(workspace, llm, ALLOW_UNSANDBOXED_AUTO="false", **extra)


@pytest.fixture
def started():
    """Running agent processes, killed if a test leaves one behind."""
    processes: list[Running] = []
    yield processes
    for process in processes:
        process.kill()


# --------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    "args",
    [["--permission", "auto", "create notes.txt"], ["create notes.txt"], []],
    ids=["one-shot with --permission", "one-shot with PERMISSION_MODE", "REPL"],
)
def test_cli_refuses_auto_mode_without_a_sandbox(workspace, llm, args):
    done = cli(workspace, llm, *args, input="quit\n", env=unconfirmed_env(workspace, llm))
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {REFUSED}") and done.stderr.count("\n") == 1
    assert "--allow-unsandboxed-auto" in done.stderr and "ALLOW_UNSANDBOXED_AUTO" in done.stderr
    assert done.stdout == ""
    assert llm.requests == []  # refused before anything starts
    assert not (workspace / ".lmagent" / "sessions").exists()


def test_scheduler_refuses_without_a_sandbox_in_any_mode(workspace, llm):
    env = unconfirmed_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli(workspace, llm, "--scheduler", env=env)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {SCHEDULER_REFUSED}") and done.stderr.count("\n") == 1
    submitted = cli(workspace, llm, "--submit", "later", env=env)  # queuing runs nothing
    assert submitted.returncode == 0, submitted.stderr


def test_repl_in_normal_mode_without_a_sandbox_refuses_auto_and_hosting_the_scheduler(
    workspace, llm
):
    env = unconfirmed_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli(workspace, llm, input="/mode auto\n/mode\nquit\n", env=env)
    assert done.returncode == 0, done.stderr
    banner, _, rest = done.stdout.partition("/mode auto\n")
    assert f"warning: {UNCONFIRMED}" in banner
    assert f"scheduler: not started here: {SCHEDULER_REFUSED}" in banner
    refusal, _, mode = rest.partition("/mode\n")
    assert refusal.startswith(REFUSED)
    assert mode.startswith("permission mode: normal\n")


def test_confirmed_one_shot_runs(workspace, llm):
    llm.add(tool_call("shell", {"command": "echo hi > made.txt"}), text("Done.\nTASK_COMPLETE"))
    env = unconfirmed_env(workspace, llm)
    done = cli(workspace, llm, "--allow-unsandboxed-auto", "--permission", "auto", "go", env=env)
    assert done.returncode == 0, done.stderr
    assert (workspace / "made.txt").read_text() == "hi\n"
    llm.assert_all_used()


def test_confirmed_repl_banner_and_status_say_commands_are_unisolated(workspace, llm):
    done = cli(workspace, llm, input="/status\nquit\n", env=cli_env(workspace, llm))
    assert done.returncode == 0, done.stderr
    banner, _, status = done.stdout.partition("/status\n")
    assert f"warning: {CONFIRMED}" in banner and "scheduler: running here" in banner
    assert f"warning: {CONFIRMED}" in status


def test_confirmed_scheduler_says_so_when_it_starts(workspace, llm, started):
    env = unconfirmed_env(workspace, llm, PERMISSION_MODE="normal")
    daemon = Running(workspace, llm, "--scheduler", "--allow-unsandboxed-auto", env=env)
    started.append(daemon)
    daemon.wait_for("scheduler: watching")
    assert any(f"scheduler: warning: {CONFIRMED}" in line for line in daemon.seen)
    daemon.proc.send_signal(signal.SIGTERM)
    code, stderr = daemon.finish(timeout=60)
    assert code == 0, stderr


# --------------------------------------------------------------------------- web


def web(workspace, llm, *args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "agent_web.py"), "--host", "127.0.0.1", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=workspace,
    )


def test_web_server_refuses_auto_mode_without_a_sandbox(workspace, llm):
    port = str(free_port())
    server = web(workspace, llm, "--port", port, env=unconfirmed_env(workspace, llm))
    try:
        stdout, stderr = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 1
    assert stderr.startswith(f"error: {REFUSED}") and stderr.count("\n") == 1
    assert stdout == ""


def test_confirmed_web_server_banner_and_status_say_commands_are_unisolated(workspace, llm):
    port = free_port()
    env = unconfirmed_env(workspace, llm, AGENT_TOKEN=PIN)
    server = web(workspace, llm, "--port", str(port), "--allow-unsandboxed-auto", env=env)
    try:
        banner = []
        for line in server.stdout:
            banner.append(line)
            if line.startswith("Press Ctrl+C"):
                break
        assert any(f"warning: {CONFIRMED}" in line for line in banner), banner
        status = requests.get(
            f"http://127.0.0.1:{port}/api/status",
            headers={"Authorization": f"Bearer {PIN}"},
            timeout=5,
        ).json()
        assert status["mode"] == "auto" and status["sandbox_warning"].startswith(CONFIRMED)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
        server.stderr.close()


def signed_in(config):
    client = create_app(config, {"PIN": PIN}).test_client()
    assert client.post("/api/login", json={"pin": PIN}).status_code == 200
    return client


def page_warning(client) -> str | None:
    found = re.search(r'id="sandbox-warning"[^>]*>([^<]*)<', client.get("/").get_data(as_text=True))
    return found.group(1) if found else None


def test_web_without_a_sandbox_refuses_switching_to_auto_and_warns(workspace):
    config = make_config(workspace, sandbox_backend="process", permission_mode="normal")
    client = signed_in(config.with_changes(allow_unsandboxed_auto=False))
    refused = client.post("/api/mode", json={"mode": "auto"})
    assert refused.status_code == 400 and refused.get_json()["error"].startswith(REFUSED)
    assert client.get("/api/mode").get_json()["mode"] == "normal"
    assert client.post("/api/mode", json={"mode": "manual"}).status_code == 200
    assert client.get("/api/status").get_json()["sandbox_warning"].startswith(UNCONFIRMED)
    assert page_warning(client).startswith(f"Warning: {UNCONFIRMED}")


def test_confirmed_web_switches_to_auto_and_says_commands_are_unisolated(workspace):
    config = make_config(workspace, sandbox_backend="process", permission_mode="normal")
    client = signed_in(config.with_changes(allow_unsandboxed_auto=True))
    assert client.post("/api/mode", json={"mode": "auto"}).status_code == 200
    assert client.get("/api/status").get_json()["sandbox_warning"].startswith(CONFIRMED)
    assert page_warning(client).startswith(f"Warning: {CONFIRMED}")


def test_web_with_a_sandbox_shows_no_warning(workspace):
    client = signed_in(make_config(workspace, sandbox_backend="bwrap"))
    assert client.get("/api/status").get_json()["sandbox_warning"] is None
    assert page_warning(client) is None
    assert client.post("/api/mode", json={"mode": "auto"}).status_code == 200
