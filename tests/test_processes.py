"""No command leaves a process behind; background processes are started, watched, fed, stopped.

Every test runs on Docker and on bubblewrap (the `sandbox` fixture).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from lmagent.loop.run import run_agent
from lmagent.sandbox.base import MAX_PROCESSES, PROCESS_GRACE, ProcessError, SandboxConfig
from lmagent.sandbox.select import open_sandbox
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import Services
from lmagent.tools.toolset import build_toolset
from tests.cli_process import cli, cli_env
from tests.conftest import make_config, tool_context, wait_for
from tests.scripted_llm import text, tool_call
from tests.test_web_browser import Page, browser  # noqa: F401 (a fixture)
from tests.test_web_support import WebHarness

pytest_plugins = ["tests.sandbox_fixtures"]  # sandbox, shared_sandbox, make_sandbox, ...

COUNT_PROCESSES = "n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done; echo $n"  # forks nothing
LIST_PROCESSES = "for p in /proc/[0-9]*; do cut -d' ' -f1-4 $p/stat; done 2>/dev/null"
FIND = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '{}'"


def count_matching(sandbox, pattern: str) -> int:
    """How many processes in the sandbox have `pattern` in their command line."""
    return int(sandbox.run(FIND.format(pattern) + " || true").output.split()[0])


def process_count(sandbox) -> int:
    return int(sandbox.run(COUNT_PROCESSES, timeout=10).output)


def ended_output(sandbox, process_id: str) -> dict | None:
    """process_output of a process that has ended, else None."""
    answer = sandbox.processes.output(process_id)
    return None if answer["running"] else answer


# --- no leftovers of a foreground command ------------------------------------------------------
def test_detached_processes_go_with_their_command(sandbox):
    command = (
        "nohup sleep 7771 >/dev/null 2>&1 & (setsid sleep 7772 &); "
        "(bash -c 'sleep 7773 & disown' &); setsid bash -c 'setsid sleep 7774 &'; echo ok"
    )
    result = sandbox.run(command)
    assert (result.output, result.exit_code) == ("ok\n", 0)
    assert count_matching(sandbox, "sleep 777[1-4]") == 0


def test_a_timed_out_fork_bomb_is_gone_when_the_command_returns(sandbox):
    baseline = process_count(sandbox)
    result = sandbox.run("b() { b | b & }; b; sleep 60", timeout=3)
    assert result.error and ("timed out" in result.error or "too many processes" in result.error)
    count = process_count(sandbox)  # the next look, at once: nothing of it is left
    assert count <= baseline, sandbox.run(LIST_PROCESSES).output
    assert sandbox.run("echo next").output == "next\n"


def test_fork_bomb_outliving_a_timeout_wrapper_is_gone(sandbox):
    """The measured case: `timeout` ends the bomb's shell, the command returns, the bomb is gone."""
    baseline = process_count(sandbox)
    result = sandbox.run("timeout 2 bash -c ':(){ :|:& };:'; echo returned", timeout=20)
    assert "returned" in result.output or "too many processes" in (result.error or "")
    assert process_count(sandbox) <= baseline
    assert sandbox.run("echo next").output == "next\n"


def test_runner_killed_mid_command_leaves_nothing(sandbox):
    """A command that kills the runner itself: its detached child is reaped on the next start."""
    result = sandbox.run("(setsid sleep 7775 &); kill -9 $PPID; sleep 5", timeout=20)
    if sandbox.name == "bwrap":  # the runner is PID 1 there: the kernel ignores the kill
        assert result.exit_code == 0 and result.error is None
    else:
        assert result.error
    assert sandbox.run("echo next").output == "next\n"
    assert count_matching(sandbox, "sleep 777[5]") == 0


# --- background processes ----------------------------------------------------------------------
def test_dev_server_round_trip(sandbox):
    server = sandbox.processes.start("echo serving; exec python3 -m http.server 8765")
    assert server["running"]
    printed = lambda: sandbox.processes.output(server["process_id"])["output"]  # noqa: E731
    assert wait_for(printed, what="its first line") == "serving\n"  # (a busy machine: late)
    fetch = "python3 -c \"import urllib.request as u; print(u.urlopen('http://localhost:8765/').status)\""
    reply = wait_for(lambda: sandbox.run(fetch).output.strip() == "200")
    assert reply
    seen = wait_for(lambda: sandbox.processes.output(server["process_id"], since=8)["output"])
    assert '"GET / HTTP/1.1" 200' in seen
    assert [p["process_id"] for p in sandbox.processes.list()] == [server["process_id"]]
    stopped = sandbox.processes.kill(server["process_id"])
    assert (stopped["running"], stopped["exit_code"]) == (False, 128 + signal.SIGTERM)
    assert sandbox.run(fetch).exit_code != 0
    log = Path(server["log"]).read_text()  # the host sees the full log
    assert log.startswith("serving\n") and "GET /" in log


def test_background_process_survives_foreground_commands_and_its_leftovers_go(sandbox):
    job = sandbox.processes.start("(setsid sleep 7781 &); sleep 7782")
    assert sandbox.run("echo foreground").output == "foreground\n"
    assert count_matching(sandbox, "sleep 778[12]") == 2
    sandbox.processes.kill(job["process_id"])
    assert count_matching(sandbox, "sleep 778[12]") == 0


def test_the_sandbox_outlives_the_thread_that_started_it(sandbox):
    """A web run's thread ends with the run; the sandbox and its processes must not."""
    started = {}
    opener = threading.Thread(target=lambda: started.update(sandbox.processes.start("sleep 300")))
    opener.start()
    opener.join()
    assert sandbox.processes.output(started["process_id"])["running"] is True
    assert sandbox.run("echo still here").output == "still here\n"


def test_a_background_process_gets_no_secret_and_cannot_write_lmagent(sandbox, monkeypatch):
    monkeypatch.setenv("LLM_API_KEY", "sekrit-7f3a")
    job = sandbox.processes.start("env; echo x > .lmagent/planted || echo refused")
    ended = wait_for(lambda: ended_output(sandbox, job["process_id"]))
    assert "sekrit-7f3a" not in ended["output"]
    assert ended["output"].endswith("refused\n")
    assert not (sandbox.workspace / ".lmagent" / "planted").exists()


IMPOSTOR = textwrap.dedent("""
    import json, os, socket, sys, time
    go, swapped, heard = sys.argv[1:]
    while not os.path.exists(go):
        time.sleep(0.01)
    path = open(go).read()
    os.unlink(path)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    open(swapped, "w").close()
    conn = server.accept()[0]
    fake = {"process_id": "p1", "command": "FAKE", "running": True, "exit_code": None}
    reply = {"ok": True, "output": "FAKE", "running": True, "processes": [fake]}
    for line in conn.makefile("rb"):
        with open(heard, "ab") as record:
            record.write(line)
        conn.sendall(json.dumps(reply).encode() + b"\\n")
""")


def start_impostor(sandbox, args: list[str]):
    """Run IMPOSTOR beside the runner the host asks for the job server; a function that waits
    for its end. On Docker it is a command on another runner of the container; bwrap has one
    runner, busy while the host waits for it, so there a host process stands in."""
    if sandbox.max_runners > 1:
        command = threading.Thread(target=sandbox.run, args=(f"python3 {' '.join(args)}",))
        command.start()
        return command.join
    stand_in = subprocess.Popen([sys.executable, *args], cwd=sandbox.workspace)
    return lambda: (stand_in.kill(), stand_in.wait())


def test_a_socket_swapped_in_for_the_job_servers_is_refused(sandbox, monkeypatch):
    """A process that replaces the job server's socket, between the runner starting it and the
    host connecting, hears no token and cannot fake the processes /ps lists."""
    workspace = sandbox.workspace
    go, swapped, heard = (workspace / name for name in ("go", "swapped", "heard"))
    (workspace / "impostor.py").write_text(IMPOSTOR)
    ask = sandbox._ask_a_runner

    def swap_once_started(request: dict):
        answer = ask(request)
        if request["op"] == "jobs" and not go.exists():
            (workspace / "go.tmp").write_text(request["path"])
            (workspace / "go.tmp").replace(go)
            wait_for(swapped.exists, timeout=600, what="the impostor's socket")
        return answer

    monkeypatch.setattr(sandbox, "_ask_a_runner", swap_once_started)
    impostor_ended = start_impostor(sandbox, ["impostor.py", str(go), str(swapped), str(heard)])
    try:
        with pytest.raises(ProcessError, match="not the job server's"):
            sandbox.processes.start("sleep 600")
        real = sandbox.processes.start("sleep 600")
        assert [p["process_id"] for p in sandbox.processes.list()] == [real["process_id"]]
    finally:
        impostor_ended()
    assert not heard.exists()


def test_input_and_exit_code(sandbox):
    job = sandbox.processes.start("read -r name; echo hello $name; exit 3")
    sandbox.processes.write(job["process_id"], "world\n")
    ended = wait_for(lambda: ended_output(sandbox, job["process_id"]))
    assert (ended["output"], ended["exit_code"]) == ("hello world\n", 3)
    with pytest.raises(ProcessError, match="has ended \\(exit code 3\\); it reads no more input"):
        sandbox.processes.write(job["process_id"], "again\n")


def test_a_working_directory_outside_the_workspace_is_refused(sandbox):
    with pytest.raises(ProcessError, match="outside the workspace"):
        sandbox.processes.start("true", cwd="../..")


def test_unknown_process_ids_are_refused(sandbox):
    for call in (
        lambda: sandbox.processes.output("p999"),
        lambda: sandbox.processes.write("p999", "x"),
        lambda: sandbox.processes.kill("nope"),
    ):
        with pytest.raises(ProcessError, match="there is no background process"):
            call()


def test_a_process_ignoring_sigterm_is_killed_after_the_grace(sandbox):
    job = sandbox.processes.start("trap '' TERM; echo ready; sleep 1000")
    ready = lambda: sandbox.processes.output(job["process_id"])["output"]  # noqa: E731
    assert wait_for(ready, what="the trap to be set") == "ready\n"
    started = time.monotonic()
    stopped = sandbox.processes.kill(job["process_id"])
    took = time.monotonic() - started
    assert (stopped["running"], stopped["exit_code"]) == (False, 128 + signal.SIGKILL)
    assert PROCESS_GRACE <= took < PROCESS_GRACE + 2
    assert count_matching(sandbox, "sleep 100[0]") == 0


def test_stopping_all_waits_one_grace_for_all(sandbox):
    for _ in range(2):
        sandbox.processes.start("trap '' TERM; sleep 1000", owner="run-a")
    other = sandbox.processes.start("sleep 1000", owner="run-b")
    started = time.monotonic()
    stopped = sandbox.processes.stop_all(owner="run-a")
    assert time.monotonic() - started < PROCESS_GRACE + 1.5
    assert [(p["running"], p["exit_code"]) for p in stopped] == [(False, 137)] * 2
    assert sandbox.processes.output(other["process_id"])["running"] is True


def test_flooding_output_is_bounded(sandbox):
    job = sandbox.processes.start("yes flood")
    wait_for(lambda: sandbox.processes.output(job["process_id"])["output_bytes"] > 20_000_000)
    seen = sandbox.processes.output(job["process_id"])
    assert seen["skipped"] > 0 and len(seen["output"]) < 60_000
    assert seen["output"].startswith("flood\nflood\n")
    sandbox.processes.kill(job["process_id"])
    assert os.path.getsize(job["log"]) < 16 * 1024 * 1024 + 100
    assert Path(job["log"]).read_text().endswith("[log cut: over 16777216 bytes of output]\n")


def test_too_many_background_processes_is_a_clear_error(sandbox):
    jobs = [sandbox.processes.start("sleep 1000") for _ in range(MAX_PROCESSES)]
    listed = sandbox.processes.list()
    assert [p["running"] for p in listed] == [True] * MAX_PROCESSES, listed
    with pytest.raises(ProcessError, match=f"{MAX_PROCESSES} background processes are running"):
        sandbox.processes.start("sleep 1000")
    sandbox.processes.kill(jobs[0]["process_id"])
    assert sandbox.processes.start("echo room")["output"] == "room\n"


def test_the_limit_counts_every_agent_on_a_docker_workspace(make_sandbox, tmp_path):
    workspace = (tmp_path / "shared").resolve()
    workspace.mkdir()
    first, second = (make_sandbox("docker", workspace=workspace) for _ in range(2))
    for _ in range(MAX_PROCESSES - 1):
        first.processes.start("sleep 1000")
    second.processes.start("sleep 1000")
    with pytest.raises(ProcessError, match=f"{MAX_PROCESSES} background processes are running"):
        first.processes.start("sleep 1000")


def test_background_fork_bomb_is_contained(sandbox):
    sandbox.processes.start("b() { b | b & }; b; sleep 100")
    assert wait_for(lambda: not any(p["running"] for p in sandbox.processes.list()), 30)
    assert sandbox.run("echo survived").output == "survived\n"
    assert process_count(sandbox) < 20


AGENT = """
import sys, time
from pathlib import Path
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import open_sandbox
sandbox = open_sandbox(SandboxConfig(workspace=Path(sys.argv[1]), backend=sys.argv[2]))
sandbox.processes.start("(setsid sleep 7791 &); sleep 7792")
print("started", flush=True)
time.sleep(600)
"""


def host_processes(pattern: str) -> list[psutil.Process]:
    """Processes on this machine (any sandbox's included) whose command line is `pattern`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if re.fullmatch(pattern, " ".join(process.info["cmdline"] or [])):
            found.append(process)
    return found


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_agent_killed_minus_9_leaves_no_process(backend, make_sandbox, tmp_path):
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    make_sandbox(backend, workspace=workspace).close()  # skips without the engine
    agent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(AGENT), str(workspace), backend],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout.readline() == "started\n"
        wait_for(lambda: len(host_processes("sleep 779[12]")) == 2)
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        agent.stdout.close()
    wait_for(lambda: not host_processes("sleep 779[12]"), 5)
    fresh = open_sandbox(SandboxConfig(workspace=workspace, backend=backend))
    try:
        assert fresh.run("echo next").output == "next\n"
    finally:
        fresh.close()


# --- the tools and the loop --------------------------------------------------------------------
@pytest.fixture(params=["docker", "bwrap"])
def tools_env(request, require_backend, workspace, test_workspaces):
    """(toolset, ctx, services) whose commands run in a real sandbox of the given backend."""
    require_backend(request.param)
    test_workspaces.append(workspace)
    config = make_config(workspace, sandbox_backend=request.param)
    services = Services(config)
    yield build_toolset(services), tool_context(config, services=services), services
    services.close()


def test_tools_start_follow_feed_and_stop_a_process(tools_env):
    toolset, ctx, _ = tools_env
    started = toolset.execute(ctx, "shell", {"command": "echo up; cat", "background": True})
    assert started["success"] and started["running"]
    assert started["log"].startswith(".lmagent/sandbox/processes/")
    pid = started["process_id"]
    read = lambda: toolset.execute(ctx, "process_output", {"process_id": pid})  # noqa: E731
    first = wait_for(lambda: (answer := read())["output"] and answer, what="its first line")
    assert first["output"] == "up\n"  # at once when the machine is not busy: started["output"]
    fed = toolset.execute(ctx, "process_input", {"process_id": pid, "text": "ping\n"})
    assert fed["success"], fed
    since = first["next"]
    echoed = wait_for(
        lambda: toolset.execute(ctx, "process_output", {"process_id": pid, "since": since})[
            "output"
        ]
    )
    assert echoed == "ping\n"
    listed = toolset.execute(ctx, "process_list", {})["processes"]
    assert listed == [
        {"process_id": pid, "command": "echo up; cat", "running": True, "exit_code": None}
    ]
    killed = toolset.execute(ctx, "process_kill", {"process_id": pid})
    assert (killed["running"], killed["exit_code"]) == (False, 143)


def test_a_background_process_that_ended_with_an_error_fails_as_a_command_would(tools_env):
    """A 1.5B model, told `"success": true` for a background `python3 sales.py` that could not
    open the file (exit code 2), wrote 0 as the total the program was to compute."""
    toolset, ctx, _ = tools_env

    def ended(command: str) -> tuple[dict, dict]:
        started = toolset.execute(ctx, "shell", {"command": command, "background": True})
        arguments = {"process_id": started["process_id"]}
        read = lambda: toolset.execute(ctx, "process_output", arguments)  # noqa: E731
        return started, wait_for(lambda: (a := read())["running"] is False and a, what="an end")

    started, failed = ended("exit 3")
    assert started["success"] is bool(started["running"])  # failed, unless seen running
    assert failed["success"] is False and failed["exit_code"] == 3
    assert failed["error"] == "the process exited with code 3"
    _, worked = ended("true")
    assert worked["success"] is True and worked["exit_code"] == 0


def test_another_runs_process_ids_are_refused(tools_env):
    toolset, ctx, services = tools_env
    pid = toolset.execute(ctx, "shell", {"command": "sleep 100", "background": True})["process_id"]
    other = tool_context(ctx.config, services=services)  # another session, same sandbox
    for tool, args in (
        ("process_output", {}),
        ("process_input", {"text": "x"}),
        ("process_kill", {}),
    ):
        refused = toolset.execute(other, tool, {"process_id": pid, **args})
        assert refused["error"] == f"there is no background process {pid!r} in this run"
    assert toolset.execute(other, "process_list", {})["processes"] == []
    unknown = toolset.execute(ctx, "process_output", {"process_id": "p77"})
    assert unknown["error"] == "there is no background process 'p77'"
    assert toolset.execute(ctx, "process_output", {"process_id": pid})["running"] is True


def test_a_timeout_suggests_background_once(tools_env):
    toolset, ctx, _ = tools_env
    first = toolset.execute(ctx, "shell", {"command": "sleep 30", "timeout": 1})
    assert "shell background=true" in first["error"]
    second = toolset.execute(ctx, "shell", {"command": "sleep 30", "timeout": 1})
    assert second["error"] == "timed out after 1 s (process tree killed)"


ENDINGS = {
    "TASK_COMPLETE": "completed",
    "BLOCKED: no way on": "blocked",
    "WAIT: 2099-01-01T00:00:00: later": "waiting",
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_runs_background_processes_stop_when_it_ends(
    ending, require_backend, workspace, test_workspaces, llm
):
    require_backend("docker")
    test_workspaces.append(workspace)
    config = make_config(workspace, llm, sandbox_backend="docker")
    llm.add(
        tool_call("shell", {"command": "exec python3 -m http.server 8766", "background": True}),
        text(ending),
    )
    events: list[dict] = []
    services = Services(config)
    try:
        result = run_agent(config, "serve", services=services, sink=events.append)
        assert result.status == ENDINGS[ending]
        done = next(e for e in events if e["type"] == "done")
        assert done["stopped_processes"] == [
            {"process_id": "p1", "command": "exec python3 -m http.server 8766"}
        ]
        assert services.sandbox().processes.list()[0]["running"] is False
        meta = SessionStore(workspace).open(result.session_id).meta
        assert meta["stopped_processes"] == done["stopped_processes"]
    finally:
        services.close()


# --- front ends --------------------------------------------------------------------------------
def agent_main(workspace: Path, llm, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """agent_main.py on `workspace` with the bwrap sandbox, as a user runs it."""
    env = cli_env(workspace, llm, SANDBOX_BACKEND="bwrap")
    return cli(workspace, llm, *args, input=stdin, env=env, timeout=60)


def test_repl_ps_kill_and_status(require_backend, workspace, llm):
    require_backend("bwrap")
    llm.add(
        tool_call("shell", {"command": "echo up; sleep 300", "background": True}),
        text("Started.\nTASK_COMPLETE"),
    )
    script = "start it\n/ps\n/kill p1\n/kill p9\n/kill\n/status\nquit\n"
    done = agent_main(workspace, llm, stdin=script)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    log = re.search(r"p1   exited 143 echo up; sleep 300  \(log: (\S+)\)", out)
    assert log, out
    assert (workspace / log[1]).read_text() == "up\n"
    assert "p1 has already ended (exit code 143); nothing to stop" in out  # as /ps said
    assert "there is no background process 'p9'" in out
    assert "usage: /kill ID (the ids are in /ps)" in out
    assert "process p1   exited 143 echo up; sleep 300" in out.partition("/status")[2]


def test_json_events_tell_process_start_and_stop(require_backend, workspace, llm):
    require_backend("bwrap")
    llm.add(
        tool_call("shell", {"command": "echo up; sleep 300", "background": True}),
        text("Started.\nTASK_COMPLETE"),
    )
    done = agent_main(workspace, llm, "--json", "start it")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    told = [(e["state"], e["process_id"], e["exit_code"]) for e in events if e["type"] == "process"]
    assert told == [("running", "p1", None), ("stopped", "p1", 143)]
    finished = [e for e in events if e["type"] == "done"]
    assert finished[0]["stopped_processes"] == [
        {"process_id": "p1", "command": "echo up; sleep 300"}
    ]


TICKER = "for i in $(seq 1 600); do echo tick-$i; sleep 0.1; done"


@pytest.mark.browser
def test_web_panel_shows_live_output_and_stops_a_process(browser, require_backend, workspace, llm):  # noqa: F811
    require_backend("bwrap")
    llm.add(
        tool_call("shell", {"command": TICKER, "background": True}),
        text("Stopped waiting.\nTASK_COMPLETE", delay=60),  # the run stays active meanwhile
    )
    with WebHarness(make_config(workspace, llm, sandbox_backend="bwrap")) as web:
        tab = Page(browser, web, viewport={"width": 1280, "height": 800})
        try:
            tab.sign_in()
            tab.send("start the ticker")
            tab.wait_text("#processes .process.running .process-output", "tick-3")
            tab.wait_text("#processes .process-output", "tick-20")  # it follows the output
            assert tab.page.text_content("#processes .pill") == "p1"
            tab.page.click("#processes .process-stop")
            tab.wait_text("#processes .process-state", "exited 143")
            assert tab.page.locator("#processes .process-stop").count() == 0
            http = web.session()
            assert http.post(web.base + "/api/stop", timeout=5).json()["stopping"]
            web.wait_idle()
            missing = http.post(web.base + "/api/processes/p9/kill", timeout=5)
            assert (missing.status_code, missing.json()) == (
                404,
                {"error": "there is no background process 'p9'; /ps lists them"},
            )
            assert tab.console == []
        finally:
            tab.close()
