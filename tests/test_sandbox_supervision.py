"""A run's processes never outlive it, whatever a command does to the process that sweeps them.

A command runs with the runner's uid, so it can stop (`kill -STOP $PPID`) or kill the runner, or
stop the job server of the background processes, after starting a detached survivor. The host
watches them from outside the sandbox and kills what a stopped runner or job server would have
left. Every check looks from the host: on Docker the container's processes as dockerd lists them
(`docker top`), on bwrap the processes under the bwrap sandboxes of the workspace.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from lmagent.core.stop import StopToken
from lmagent.loop.run import run_agent
from lmagent.sandbox.base import ProcessError
from lmagent.tools.registry import Services
from tests.conftest import make_config, wait_for
from tests.scripted_llm import error, text, tool_call

pytest_plugins = ["tests.sandbox_fixtures"]

SURVIVOR = "setsid nohup sleep {n} >/dev/null 2>&1 & sleep 0.3"
JOB_SERVER = "$(cut -d' ' -f4 /proc/$PPID/stat)"  # a background command's keeper's parent


def sandbox_processes(sandbox) -> list[tuple[int, str, str]]:
    """(host pid, state letter, command line) of every process of the sandbox's workspace, as
    the host sees them: the Docker container's by `docker top`, else every process under a
    bwrap that binds the workspace."""
    if sandbox.name == "docker":
        top = sandbox.container.top(ps_args="-eo pid,stat,args")
        return [(int(row[0]), row[1][0], row[2]) for row in top["Processes"] or []]
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] != "bwrap" or str(sandbox.workspace) not in (
            process.info["cmdline"] or []
        ):
            continue
        try:
            members = [process, *process.children(recursive=True)]
        except psutil.Error:  # gone meanwhile
            continue
        for member in members:
            try:
                state = "T" if member.status() in ("stopped", "tracing-stop") else "S"
                found.append((member.pid, state, " ".join(member.cmdline())))
            except psutil.Error:
                continue
    return found


def seen(sandbox, marker: str) -> bool:
    return any(marker in p[2] for p in sandbox_processes(sandbox))


def none_left(sandbox, *markers: str, patience: float = 5.0) -> list[tuple[int, str, str]]:
    """Waits until left_behind() is empty; what it still holds after `patience` seconds."""
    deadline = time.monotonic() + patience
    while (left := left_behind(sandbox, *markers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def left_behind(sandbox, *markers: str) -> list[tuple[int, str, str]]:
    """The sandbox's processes that carry one of `markers`, or are stopped."""
    return [
        p
        for p in sandbox_processes(sandbox)
        if p[1] in "Tt" or any(marker in p[2] for marker in markers)
    ]


ATTACKS = 10  # times each way of attacking the runner is tried


@pytest.mark.parametrize("how", ["kill -STOP $PPID", "kill -STOP -1", "kill -9 $PPID"])
def test_a_command_that_stops_or_kills_its_runner_leaves_nothing(sandbox, how):
    for n in range(ATTACKS):
        if sandbox.name == "bwrap":  # the runner is PID 1 there: the kernel ignores the signal
            result = sandbox.run(f"{SURVIVOR.format(n=8100 + n)}; {how}; echo on", timeout=60)
            assert result.output.endswith("on\n") and result.exit_code == 0, result
        else:
            result = sandbox.run(f"{SURVIVOR.format(n=8100 + n)}; {how}; sleep 60", timeout=60)
            assert result.error and result.exit_code is None
        if "STOP" in how and sandbox.name == "docker":
            assert "a command stopped the sandbox runner" in result.error
        assert none_left(sandbox, f"sleep {8100 + n}", patience=5) == []
        assert sandbox.run("echo next").output == "next\n"
    print(f"{sandbox.name}/{how}: {ATTACKS} attempts, 0 survivors")


def test_commands_cannot_look_into_the_runner_or_the_job_server(sandbox):
    """Not dumpable (and ptrace refused): their descriptors, memory and environment are closed
    to commands of the same uid."""
    sandbox.processes.start("sleep 8150")
    find = "grep -lx lmagent-jobs /proc/[0-9]*/comm | cut -d/ -f3"
    job_server = sandbox.run(find).output.strip()
    assert job_server.isdigit(), job_server
    for target in ("$PPID", job_server):
        for look in ("readlink /proc/{}/fd/0", "cat /proc/{}/environ", "head -c1 /proc/{}/mem"):
            result = sandbox.run(look.format(target))
            assert result.exit_code != 0, (look, result)


@pytest.mark.parametrize("how", ["kill -STOP", "kill -9"])
def test_a_background_command_that_stops_or_kills_the_job_server_leaves_nothing(sandbox, how):
    attack = f"echo started; {SURVIVOR.format(n=8102)}; {how} {JOB_SERVER}; sleep 8103"
    assert sandbox.processes.start(attack)["output"] == "started\n"
    gone = wait_for(lambda: job_server_lost(sandbox), 20, "the attack on the job server")
    assert "background processes are gone" in gone
    assert none_left(sandbox, "sleep 8102", "sleep 8103", patience=5) == []
    assert sandbox.processes.start("echo again")["output"] == "again\n"


def job_server_lost(sandbox) -> str:
    """What listing the background processes says once their job server is stopped or gone
    (blank while it answers): the attack runs a moment after "started" is printed."""
    try:
        sandbox.processes.list()
    except ProcessError as exc:
        return str(exc)
    return ""


def stop_when_seen(sandbox, stop: StopToken, marker: str) -> None:
    """Stop the run (as Ctrl+C does) once a process with `marker` runs in the sandbox."""

    def watch() -> None:
        if wait_for(lambda: seen(sandbox, marker), 30):
            stop.stop()

    threading.Thread(target=watch, daemon=True).start()


ENDINGS = ("completed", "error", "interrupted")


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_nothing_a_run_started_outlives_it(
    backend, ending, require_backend, sandbox_image, workspace, test_workspaces, llm
):
    """Whatever ends the run, its survivors, stopped runner and stopped job server are gone."""
    require_backend(backend)
    test_workspaces.append(workspace)
    config = make_config(
        workspace, llm, sandbox_backend=backend, sandbox_image=sandbox_image, llm_retries=0
    )
    background = f"{SURVIVOR.format(n=8111)}; kill -STOP {JOB_SERVER}; sleep 8112"
    llm.add(
        tool_call("shell", {"command": f"{SURVIVOR.format(n=8113)}; sleep 8114", "background": 1}),
        tool_call("shell", {"command": background, "background": True}),
        # (under bwrap the runner is PID 1 and the kernel ignores the STOP: the sleep just ends)
        tool_call("shell", {"command": f"{SURVIVOR.format(n=8115)}; kill -STOP $PPID; sleep 3"}),
    )
    stop = StopToken()
    if ending == "completed":
        llm.add(text("Done.\nTASK_COMPLETE"))
    elif ending == "error":
        llm.add(error(400))
    else:
        llm.add(tool_call("shell", {"command": f"{SURVIVOR.format(n=8116)}; sleep 8117"}))
    services = Services(config)
    try:
        if ending == "interrupted":
            stop_when_seen(services.sandbox(), stop, "sleep 8117")
        result = run_agent(config, "go", services=services, stop=stop)
        assert result.status == ending, result.message
        assert left_behind(services.sandbox(), "sleep 81") == []
    finally:
        services.close()


AGENT = """
import sys, threading, time
from pathlib import Path
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import open_sandbox
cfg = SandboxConfig(workspace=Path(sys.argv[1]), backend=sys.argv[2], image=sys.argv[3])
sandbox = open_sandbox(cfg)
sandbox.processes.start("setsid nohup sleep 8121 >/dev/null 2>&1 & sleep 8122")
threading.Thread(target=sandbox.run, args=("setsid nohup sleep 8123 & sleep 600", 120)).start()
print("started", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_agent_killed_minus_9_leaves_nothing_in_the_sandbox(backend, make_sandbox, tmp_path):
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    sandbox = make_sandbox(backend, workspace=workspace)
    code = textwrap.dedent(AGENT)
    argv = [sys.executable, "-c", code, str(workspace), backend, sandbox.cfg.image]
    agent = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout.readline() == "started\n"
        markers = ("sleep 8121", "sleep 8122", "sleep 8123", "sleep 600")
        assert wait_for(lambda: all(seen(sandbox, m) for m in markers), 20)
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        agent.stdout.close()
    assert none_left(sandbox, *markers, patience=10) == []


def test_docker_first_use_kills_what_a_stopped_runner_and_orphans_left(make_sandbox, tmp_path):
    """An agent killed the moment its runner was stopped leaves a stopped process tree, and a
    runner killed -9 leaves orphans with the container's init; the next agent kills both."""
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    first = make_sandbox("docker", workspace=workspace)
    container = first.container
    first.close()
    user = first.cfg.uid_gid()  # as runners run (the container's own user is its keeper's)
    container.exec_run(["sh", "-c", "sleep 8131 & kill -STOP $$"], detach=True, user=user)
    container.exec_run(["sh", "-c", "setsid sleep 8132 >/dev/null 2>&1 &"], detach=True, user=user)
    assert wait_for(lambda: len(left_behind(first, "sleep 813")) >= 3, 10), left_behind(first)
    second = make_sandbox("docker", workspace=workspace)
    assert none_left(second, "sleep 813", patience=60) == []  # killed: gone once they die
    assert second.run("echo next").output == "next\n"
