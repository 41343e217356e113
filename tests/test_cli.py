"""`agent_main.py` as a user runs it: a real subprocess against the scripted server."""

from __future__ import annotations

import argparse
import io
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lmagent.cli.repl import Repl
from lmagent.cli.terminal import TerminalIO, stop_on_signals
from lmagent.core.stop import StopToken
from lmagent.scheduler.service import start_background
from lmagent.sessions.store import SessionStore
from tests.cli_process import ROOT, Running, cli, cli_env, only_session
from tests.conftest import wait_for
from tests.pty_terminal import cli_with_terminal
from tests.scripted_llm import error, text, tool_call

# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("turns", "settings", "code", "status"),
    [
        ([text("Done.\nTASK_COMPLETE")], {}, 0, "completed"),
        ([text("WAIT: 2099-01-01T00:00:00Z: the release")], {}, 0, "waiting"),
        (
            [tool_call("todo_list"), tool_call("todo_list")],
            {"MAX_ITERATIONS": "2"},
            2,
            "max_iterations",
        ),
        ([error(400, {"error": {"message": "bad request body"}})], {}, 1, "error"),
        ([text("BLOCKED: the API key is missing")], {}, 3, "blocked"),
    ],
)
def test_exit_code_tells_how_the_run_ended(workspace, llm, turns, settings, code, status):
    llm.add(*turns)
    done = cli(workspace, llm, "do it", env=cli_env(workspace, llm, **settings))
    llm.assert_all_used()
    assert done.returncode == code, done.stderr
    assert only_session(workspace)["status"] == status
    assert "Traceback" not in done.stderr
    if status == "error":
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and "bad request body" in line
    else:
        assert done.stderr == ""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_session_as_interrupted_and_exits_130(workspace, llm, running, signum):
    llm.add(text("slow reply", delay=30))
    proc = running(workspace, llm, "long task")
    llm.wait_for_requests(1, timeout=15)
    proc.proc.send_signal(signum)
    code, stderr = proc.finish()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert only_session(workspace)["status"] == "interrupted"


def test_llm_unreachable_is_one_line_naming_the_url_and_lm_studio(workspace):
    # the default retry settings: with no server at all the answer comes at once, before any
    # session or request (a server that vanishes mid-run is retried: see test_llm_client)
    env = cli_env(workspace, LLM_RETRIES="4", LLM_RETRY_DELAY="0.5")
    done = cli(workspace, None, "hello", env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert env["LLM_URL"] in lines[0]
    assert "LM Studio" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert SessionStore(workspace).list() == []


def test_a_server_that_goes_away_after_start_up_is_reported_the_same_way(workspace, llm):
    llm.add(tool_call("todo_list"))  # one step, then the server is gone
    env = cli_env(workspace, llm)
    proc = Running(workspace, llm, "work", env=env)
    llm.wait_for_requests(1, timeout=15)
    llm.stop()
    code, stderr = proc.finish()
    assert code == 1
    (line,) = stderr.strip().splitlines()
    assert env["LLM_URL"] in line and "LM Studio" in line
    assert only_session(workspace)["status"] == "error"  # kept, and resumable


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("PERMISSION_MODE", "bogus", "allowed: auto, normal, manual"),
        ("MAX_ITERATIONS", "abc", "allowed: a whole number of at least 1"),
    ],
)
def test_a_bad_config_value_is_one_line_naming_the_variable(workspace, variable, value, expected):
    done = cli(workspace, None, "hello", env=cli_env(workspace, **{variable: value}))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert variable in line and expected in line
    assert not (workspace / ".lmagent").exists()  # nothing was started


def test_a_bad_flag_is_one_line_and_exit_1(workspace):
    done = cli(workspace, None, "--permission", "bogus", "hello")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "--permission" in line and "auto" in line


def test_a_workspace_that_is_a_file_is_one_line(workspace, llm):
    blocker = workspace / "file"
    blocker.write_text("")
    done = cli(workspace, llm, "--workspace", str(blocker), "hello")
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- flags


def test_version_imports_nothing_heavy(workspace):
    """What keeps --version fast (its time is measured in bench/, not asserted here)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "agent_main.py"), "--version"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("lmagent ")
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    heavy = {
        "requests",
        "lmagent.loop.run",
        "lmagent.llm.client",
        "lmagent.cli.terminal",
        "colorama",
    }
    assert not imported & heavy


def test_list_sessions_plain_and_json(workspace, llm):
    assert "no sessions" in cli(workspace, llm, "--list-sessions").stdout
    store = SessionStore(workspace)
    first = store.create("first task")
    second = store.create("second task")
    second.save_meta(status="completed")
    done = cli(workspace, llm, "--list-sessions")
    assert done.returncode == 0
    rows = done.stdout.strip().splitlines()
    assert len(rows) == 2
    assert any(first.id in r and "first task" in r and "running" in r for r in rows)
    assert any(second.id in r and "second task" in r and "completed" in r for r in rows)
    listed = [
        json.loads(line)
        for line in cli(workspace, llm, "--list-sessions", "--json").stdout.splitlines()
    ]
    assert {m["id"]: m["status"] for m in listed} == {first.id: "running", second.id: "completed"}


def test_resume_by_unique_prefix_continues_the_session(workspace, llm):
    llm.add(text("First part done.\nTASK_COMPLETE"), text("Nothing left.\nTASK_COMPLETE"))
    assert cli(workspace, llm, "write a poem").returncode == 0
    session_id = only_session(workspace)["id"]
    done = cli(workspace, llm, "--resume", session_id[:-3])
    llm.assert_all_used()
    assert done.returncode == 0, done.stderr
    resumed = llm.requests[1]["messages"]
    assert resumed[1]["content"] == "write a poem"
    assert "resumed" in resumed[-1]["content"]
    assert only_session(workspace)["iterations"] == 2


@pytest.mark.parametrize("session_id", ["nope", "20"])
def test_resume_of_an_unknown_or_ambiguous_id_is_one_line(workspace, llm, session_id):
    store = SessionStore(workspace)
    store.create("a")
    store.create("b")
    done = cli(workspace, llm, "--resume", session_id)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert session_id in line
    assert len(llm.requests) == 0


def test_plan_approved_runs_it(workspace, llm):
    llm.add(
        text("1. Write a.txt\n2. Check it"),
        tool_call("write", {"path": "a.txt", "content": "A"}),
        text("TASK_COMPLETE"),
    )
    done = cli_with_terminal(
        workspace, "--plan", "make a.txt", typed="y\n", env=cli_env(workspace, llm)
    )
    llm.assert_all_used()
    assert done.returncode == 0, done.stderr
    assert "1. Write a.txt" in done.stdout and "carry out this plan" in done.stdout
    assert (workspace / "a.txt").read_text() == "A"
    assert "tools" not in llm.requests[0]  # no tool can run before the plan is approved


def test_plan_declined_ends_without_acting(workspace, llm):
    llm.add(text("1. Delete everything"), tool_call("write", {"path": "a.txt", "content": "A"}))
    done = cli_with_terminal(
        workspace, "--plan", "clean up", typed="n\n", env=cli_env(workspace, llm)
    )
    assert done.returncode == 3
    assert len(llm.requests) == 1
    assert not (workspace / "a.txt").exists()
    assert only_session(workspace)["status"] == "blocked"


def test_json_prints_one_event_per_line(workspace, llm):
    llm.add(tool_call("write", {"path": "a.txt", "content": "A"}), text("Done.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "--json", "make a.txt")
    assert done.returncode == 0
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session" and kinds[-1] == "done"
    assert {"iteration", "token", "tool_call", "tool_result"} <= set(kinds)
    assert events[-1]["status"] == "completed"
    assert {e["session_id"] for e in events} == {only_session(workspace)["id"]}


def test_permission_and_workspace_flags_override_the_environment(workspace, llm, tmp_path):
    other = tmp_path / "other"
    other.mkdir()  # a --workspace that does not exist is an error (tests/test_everyday_truth.py)
    llm.add(tool_call("write", {"path": "a.txt", "content": "A"}), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm, PERMISSION_MODE="manual")
    done = cli(workspace, llm, "--permission", "auto", "--workspace", str(other), "go", env=env)
    assert done.returncode == 0, done.stderr
    assert "? allow" not in done.stdout
    assert (other / "a.txt").exists() and not (workspace / "a.txt").exists()
    assert len(SessionStore(other).list()) == 1


# --------------------------------------------------------------------------- REPL


def test_repl_slash_commands(workspace, llm):
    soul = workspace / ".lmagent" / ".soul.md"
    soul.parent.mkdir()
    soul.write_text("SOUL-MARKER: terse and kind")
    script = "\n".join(
        [
            "/help",
            "/bogus",
            "",
            "/mode manual",
            "/mode",
            "/mode silly",
            "/soul",
            "/todo",
            "/session",
            "/session nope",
            "/sessions",
            "/status",
            "/plan",
            "/new",
            "quit",
            "never run as a task",
        ]
    )
    done = cli(workspace, llm, input=script + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for command in ("/sessions", "/mode", "/plan", "/todo", "/status", "/soul", "/new", "/session"):
        assert command in out
    assert "unknown command /bogus" in out
    assert "permission mode: manual" in out
    assert "usage: /mode auto|normal|manual" in out
    assert "SOUL-MARKER" in out
    assert "no session yet" in out
    assert "no session 'nope'" in out
    assert f"no sessions in {workspace}" in out
    assert "sandbox process" in out
    assert "the next task starts with a plan" in out
    assert "the next task starts a new session" in out
    assert len(llm.requests) == 0  # neither the empty line nor anything after quit ran


def test_repl_tasks_share_a_session_until_new(workspace, llm):
    (workspace / ".lmagent.md").write_text("PROJECT-MARKER: use tabs")
    soul = workspace / ".lmagent" / ".soul.md"
    soul.parent.mkdir()
    soul.write_text("SOUL-MARKER")
    llm.add(
        tool_call("todo_add", {"description": "polish the README"}),
        text("Added.\nTASK_COMPLETE"),
        text("It is about todos.\nTASK_COMPLETE"),
        text("Fresh start.\nTASK_COMPLETE"),
    )
    script = "plan the work\n/todo\n/status\nwhat is it about?\n/new\nsomething else\nexit\n"
    done = cli(workspace, llm, input=script)
    llm.assert_all_used()
    assert done.returncode == 0, done.stderr
    assert "#1 [pending] polish the README" in done.stdout
    system = llm.requests[0]["messages"][0]["content"]
    assert "PROJECT-MARKER" in system and "SOUL-MARKER" in system
    follow_up = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "user"]
    assert follow_up == ["plan the work", "what is it about?"]
    assert [m["content"] for m in llm.requests[3]["messages"][1:]] == ["something else"]
    assert len(SessionStore(workspace).list()) == 2


def test_a_repl_fed_by_a_pipe_never_takes_the_next_task_as_a_permission_answer(workspace, llm):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "A"}),
        text("Second task done.\nTASK_COMPLETE"),
    )
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli(workspace, llm, input="make a.txt\nyes, the second task\nexit\n", env=env)
    llm.assert_all_used()
    assert not (workspace / "a.txt").exists()
    assert "write needs permission in normal mode and there is no terminal" in done.stdout
    asked = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"]
    assert asked[-1] == "yes, the second task"  # the line was a task, not an answer
    assert "Second task done." in done.stdout


def test_repl_ctrl_c_stops_the_task_and_returns_to_the_prompt(workspace, llm, running):
    llm.add(text("slow", delay=30), text("Second task done.\nTASK_COMPLETE"))
    proc = running(workspace, llm)
    proc.send("a slow task")
    llm.wait_for_requests(1, timeout=15)
    proc.proc.send_signal(signal.SIGINT)
    proc.wait_for("— interrupted")
    proc.send("a second task")
    proc.wait_for("— completed")
    proc.send("quit")
    code, stderr = proc.finish()
    llm.assert_all_used()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    statuses = sorted(m["status"] for m in SessionStore(workspace).list())
    assert statuses == ["completed"]  # the second task continued the interrupted session


def test_the_repl_hosts_the_scheduler_and_reports_its_runs_apart(workspace, llm, running):
    release = threading.Event()

    def held(body):
        release.wait(20)
        return text("Chat answer.\nTASK_COMPLETE")

    llm.add(held, text("Scheduled and done.\nTASK_COMPLETE"))
    proc = running(workspace, llm)
    proc.wait_for("scheduler: running here")
    proc.send("a chat task")
    llm.wait_for_requests(1)
    submitted = cli(workspace, llm, "--submit", "tidy the notes")
    assert submitted.returncode == 0, submitted.stderr
    time.sleep(0.6)  # three polls while the REPL is busy: the task waits in the inbox
    assert len(llm.requests) == 1 and Path(submitted.stdout.strip()).exists()
    release.set()
    proc.wait_for("— completed")

    started = proc.wait_for("[scheduled]")
    ended = proc.wait_for("[scheduled]")
    proc.send("/status")
    status = proc.wait_for("scheduler: ")
    proc.send("quit")
    code, stderr = proc.finish()
    llm.assert_all_used()
    assert code == 0, stderr
    scheduled = next(m for m in SessionStore(workspace).list() if m["source"] == "scheduler")
    assert started == f"[scheduled] session {scheduled['id']} started: tidy the notes\n"
    assert ended.startswith(
        f"[scheduled] session {scheduled['id']} completed · answered without using any tool: "
        "no file changed, no command run · 1 iteration · "
    )
    assert status == f"scheduler: running (pid {proc.proc.pid})\n"
    assert scheduled["status"] == "completed"


def test_the_repl_carries_on_when_a_scheduler_already_runs(workspace, llm, config):
    other = start_background(config)
    try:
        llm.add(text("Answered.\nTASK_COMPLETE"))
        _, out = _repl(config, "hello\nquit\n")
    finally:
        other.stop()
    llm.assert_all_used()
    assert "scheduler: already running for this workspace elsewhere" in out.getvalue()
    assert "— completed" in out.getvalue()


def _repl(config, script: str) -> tuple[Repl, io.StringIO]:
    out = io.StringIO()
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO(script))
    repl = Repl(config, argparse.Namespace(resume=None, plan=False), io=terminal)
    assert repl.loop() == 0
    return repl, out


def test_repl_mode_change_applies_to_the_next_task(workspace, llm, config):
    llm.add(tool_call("write", {"path": "a.txt", "content": "A"}), text("TASK_COMPLETE"))
    repl, out = _repl(config, "/mode normal\nmake a.txt\nn\nquit\n")
    llm.assert_all_used()
    assert "? allow write" in out.getvalue()
    assert not (workspace / "a.txt").exists()
    assert repl.mode == "normal"


def test_repl_plan_command_plans_the_next_task_only(workspace, llm, config):
    llm.add(
        text("1. Write a.txt"),
        tool_call("write", {"path": "a.txt", "content": "A"}),
        text("TASK_COMPLETE"),
        text("Second.\nTASK_COMPLETE"),
    )
    repl, out = _repl(config, "/plan\nmake a.txt\ny\n/todo\nanother\nquit\n")
    llm.assert_all_used()
    assert "1. Write a.txt" in out.getvalue()
    assert "step 1 [pending] Write a.txt" in out.getvalue()
    assert "tools" not in llm.requests[0] and "tools" in llm.requests[3]
    assert not repl.plan_next


def test_a_dotenv_in_the_current_directory_is_used_but_the_environment_wins(workspace, llm):
    (workspace / ".env").write_text("MAX_ITERATIONS=1\nPERMISSION_MODE=manual\n")
    llm.add(tool_call("write", {"path": "a.txt", "content": "A"}))
    done = cli(workspace, llm, "make a.txt")  # PERMISSION_MODE=auto is set in the environment
    llm.assert_all_used()
    assert done.returncode == 2  # MAX_ITERATIONS=1 came from .env
    assert "? allow" not in done.stdout
    assert (workspace / "a.txt").exists()


def test_a_stop_signal_never_waits_for_a_lock_the_interrupted_thread_holds():
    """SIGTERM's handler runs on the main thread, between two of its steps: the scheduler,
    stopped while its loop was inside `wake.wait()` (holding the Event's lock), set that Event
    from the handler and waited for itself forever. The stop runs beside the thread it
    interrupts, and happens once that thread lets go."""
    stop, held, took = StopToken(), threading.Lock(), []
    stop.add_callback(lambda: took.append(held.acquire(timeout=30)))
    with stop_on_signals(stop, TerminalIO()):
        with held:
            signal.raise_signal(signal.SIGTERM)  # the handler runs here, `held` held
            assert took == []  # not yet: the lock is this thread's
        stop.event.wait()
    assert wait_for(lambda: took == [True], 30, "the stop's callback to take the lock")
