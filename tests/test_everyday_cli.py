"""Everyday use of `agent_main.py` as a new user meets it: what a start says, --help, runs
without a terminal (cron, CI, pipes, --json), and the scheduler's command line."""

from __future__ import annotations

import json
import re

import pytest

from lmagent.loop.permissions import NobodyToAsk, PermissionGate
from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from tests.cli_process import Running, cli, cli_env, only_session
from tests.conftest import make_config
from tests.pty_terminal import cli_with_terminal
from tests.scripted_llm import call, error, text, tool_call, tool_calls


def write_a(content: str = "A"):
    return tool_call("write", {"path": "a.txt", "content": content})


# --------------------------------------------------------------------------- what a start says


def test_a_one_shot_says_where_and_how_it_works_in_two_lines(workspace, llm):
    llm.add(text("Done.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "say hi")
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert f"workspace {workspace}" in first and "sandbox process" in first
    assert "permission mode auto" in first
    assert f"at {llm.url}" in second and second.startswith("· model ")
    assert done.stdout.count(f"workspace {workspace}") == 1


def test_with_json_the_start_lines_go_to_stderr_and_stdout_stays_json(workspace, llm):
    llm.add(text("Done.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "--json", "say hi")
    assert done.returncode == 0, done.stderr
    assert all(json.loads(line) for line in done.stdout.splitlines())
    assert f"workspace {workspace}" in done.stderr and f"at {llm.url}" in done.stderr


def test_the_repl_without_a_server_says_so_once(workspace):
    done = cli(workspace, None, input="/status\nquit\n")
    assert done.returncode == 0, done.stderr
    banner, _, status = done.stdout.partition("/status\n")
    assert banner.count("cannot reach the LLM server") == 1
    assert "tool calls: not known yet" in banner  # no claim about a server never reached
    assert "takes tool definitions" not in banner
    assert banner.count(f"workspace {workspace}") == 1 and "permission mode auto" in banner
    assert status.count(f"workspace {workspace}") == 1 and status.count("· context") == 1
    assert "permission mode auto" in status


def test_an_error_is_printed_once(workspace, llm):
    llm.add(error(400, {"error": {"message": "bad request body"}}))
    done = cli(workspace, llm, "do it")
    assert done.returncode == 1
    assert (done.stdout + done.stderr).count("bad request body") == 1


def test_a_blocked_run_says_why(workspace, llm):
    llm.add(text("BLOCKED: the API key is missing"))
    done = cli(workspace, llm, "do it")
    assert done.returncode == 3
    assert "blocked: the API key is missing" in done.stdout


# --------------------------------------------------------------------------- --help and flags


def test_help_lists_defaults_variables_and_exit_codes(workspace):
    done = cli(workspace, None, "--help")
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())
    for expected in (
        "WORKSPACE the only directory the agent may touch; blank = the folder lmagent is started "
        "in (default: blank)",
        "LLM_URL",
        "http://localhost:1234/v1/chat/completions",
        "LLM_MODEL",
        "PERMISSION_MODE",
        "--url URL",
        "--model NAME",
        "auto: never ask; normal: ask before changing files",
        "0 completed",
        "1 error",
        "2 the iteration limit",
        "3 blocked",
        "130 interrupted",
    ):
        assert expected in help_text


def test_url_and_model_flags_override_the_environment(workspace, llm):
    llm.add(text("Done.\nTASK_COMPLETE"))
    env = cli_env(workspace, None, LLM_MODEL="from-the-environment")  # LLM_URL: a closed port
    done = cli(workspace, llm, "--url", llm.url, "--model", "qwen-test", "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert llm.requests[0]["model"] == "qwen-test"
    assert "model qwen-test at" in done.stdout


@pytest.mark.parametrize("url", ["localhost:1234", "ftp://host/v1", "http://host:99999/v1"])
def test_a_bad_url_flag_is_one_line_naming_the_flag(workspace, url):
    done = cli(workspace, None, "--url", url, "hi")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: --url={url!r} is not valid")


# --------------------------------------------------------------------------- without a terminal


@pytest.mark.parametrize("mode", ["normal", "manual"])
def test_without_a_terminal_the_first_request_blocks_the_run(workspace, llm, mode):
    llm.add(write_a(), write_a("again"))
    env = cli_env(workspace, llm, PERMISSION_MODE=mode)
    done = cli(workspace, llm, "make a.txt", env=env)  # stdin is a pipe, as in cron or CI
    assert done.returncode == 3, done.stderr
    assert len(llm.requests) == 1  # stopped at the request, not after the model moved on
    assert not (workspace / "a.txt").exists()
    meta = only_session(workspace)
    assert meta["status"] == "blocked"
    assert f"write needs permission in {mode} mode and there is no terminal" in done.stdout
    assert "--permission auto" in done.stdout


def test_without_a_terminal_the_later_calls_of_the_same_reply_are_not_run(workspace, llm):
    write = call("write", {"path": "a.txt", "content": "A"})
    llm.add(tool_calls(write, call("mkdir", {"path": "d"})))
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli(workspace, llm, "make things", env=env)
    assert done.returncode == 3
    assert not (workspace / "a.txt").exists() and not (workspace / "d").exists()


def test_a_plan_in_auto_mode_without_a_terminal_is_carried_out(workspace, llm):
    llm.add(text("1. Write a.txt\n2. Check it"), write_a(), text("TASK_COMPLETE"))
    done = cli(workspace, llm, "--plan", "--permission", "auto", "make a.txt")
    llm.assert_all_used()
    assert done.returncode == 0, done.stderr
    assert "1. Write a.txt" in done.stdout and "carrying out the plan" in done.stdout
    assert (workspace / "a.txt").read_text() == "A"


def test_a_plan_in_normal_mode_without_a_terminal_blocks_with_the_reason(workspace, llm):
    llm.add(text("1. Write a.txt"))
    done = cli(workspace, llm, "--plan", "--permission", "normal", "make a.txt")
    assert done.returncode == 3
    assert "the plan needs approval in normal mode and there is no terminal" in done.stdout
    assert len(llm.requests) == 1 and not (workspace / "a.txt").exists()


@pytest.mark.parametrize(("answer", "written"), [("y", True), ("n", False), ("", False)])
def test_at_a_terminal_the_person_is_asked(workspace, llm, answer, written):
    llm.add(write_a(), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli_with_terminal(workspace, "make a.txt", typed=answer + "\n", env=env)
    assert done.returncode == 0, done.stderr
    assert "? allow write" in done.stdout
    assert (workspace / "a.txt").exists() is written


def permission_answer(request: dict, decision: str) -> str:
    return json.dumps(
        {"type": "permission", "request_id": request["request_id"], "decision": decision}
    )


def next_event(proc: Running, kind: str) -> dict:
    return json.loads(proc.wait_for(f'"type": "{kind}"'))


def test_with_json_a_request_is_answered_by_one_stdin_line(workspace, llm, running):
    llm.add(write_a(), tool_call("mkdir", {"path": "d"}), write_a("B"), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    proc = running(workspace, llm, "--json", "make things", env=env)
    first = next_event(proc, "permission_request")
    assert first["tool"] == "write" and first["arguments"] == {"path": "a.txt", "content": "A"}
    assert first["session_id"] == next(e for e in map(json.loads, proc.seen) if e)["session_id"]
    proc.send(permission_answer(first, "allow"))
    second = next_event(proc, "permission_request")
    assert second["request_id"] != first["request_id"]
    proc.send(permission_answer(second, "deny"))
    third = next_event(proc, "permission_request")
    proc.send(permission_answer(third, "auto"))
    code, stderr = proc.finish()
    assert code == 0, stderr
    assert (workspace / "a.txt").read_text() == "B" and not (workspace / "d").exists()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("yes please", "not JSON"),
        ('["permission"]', "not a permission answer"),
        ('{"type": "permission", "request_id": "other", "decision": "allow"}', "'other'"),
        ('{"type": "permission", "request_id": "ID", "decision": "maybe"}', "'maybe'"),
    ],
)
def test_with_json_a_bad_answer_line_is_reported_and_ignored(workspace, llm, running, line, why):
    llm.add(write_a(), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    proc = running(workspace, llm, "--json", "make a.txt", env=env)
    request = next_event(proc, "permission_request")
    proc.send(line.replace('"ID"', json.dumps(request["request_id"])))
    status = next_event(proc, "status")
    assert why in status["message"] and request["request_id"] in status["message"]
    proc.send(permission_answer(request, "allow"))
    code, stderr = proc.finish()
    assert code == 0, stderr
    assert (workspace / "a.txt").exists()


def test_with_json_and_stdin_closed_the_run_blocks(workspace, llm):
    llm.add(write_a())
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli(workspace, llm, "--json", "make a.txt", env=env)
    assert done.returncode == 3
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "blocked"
    assert "--permission auto" in events[-1]["message"]
    assert not (workspace / "a.txt").exists()


# --------------------------------------------------------------------------- scheduler CLI


def test_not_before_without_submit_is_an_error_and_runs_nothing(workspace, llm):
    done = cli(workspace, llm, "--not-before", "2030-01-01T00:00:00", "y")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "--not-before only applies to --submit" in line
    assert llm.requests == [] and SessionStore(workspace).list() == []


def test_submit_names_the_task_and_says_that_no_scheduler_runs(workspace, llm):
    done = cli(workspace, llm, "--submit", "tidy up")
    assert done.returncode == 0, done.stderr
    path = done.stdout.strip()
    assert re.search(r"task (\S+) queued", done.stderr).group(1) in path
    assert "no scheduler is running on this workspace" in done.stderr
    assert "--scheduler" in done.stderr


def test_submit_says_when_a_scheduler_runs_on_the_workspace(workspace, llm, running):
    daemon = running(workspace, llm, "--scheduler")
    daemon.wait_for("scheduler: watching")
    done = cli(workspace, llm, "--submit", '{"task": "later"}', "--not-before", "2099-01-01T00:00Z")
    assert done.returncode == 0, done.stderr
    assert f"scheduler running on this workspace (pid {daemon.proc.pid})" in done.stderr


# --------------------------------------------------------------------------- the loop itself


def nobody(tool: str, arguments: dict) -> str:
    raise NobodyToAsk(f"{tool}: nobody can answer")


def test_the_loop_ends_blocked_when_nobody_can_answer_and_resumes_cleanly(workspace, llm):
    config = make_config(workspace, llm, permission_mode="normal")
    write = call("write", {"path": "a.txt", "content": "A"})
    llm.add(tool_calls(call("read", {"path": "."}), write, call("mkdir", {"path": "d"})))
    result = run_agent(config, "work", gate=PermissionGate("normal", nobody))
    assert result.status == "blocked" and result.message == "write: nobody can answer"
    assert not (workspace / "a.txt").exists() and not (workspace / "d").exists()
    session = SessionStore(workspace).open(result.session_id)
    results = [m for m in session.transcript if m.get("role") == "tool"]
    assert len(results) == 3  # every call has its result: the session resumes without gaps
    llm.add(text("TASK_COMPLETE"))
    resumed = run_agent(config, "go on", session_id=result.session_id, ask=lambda t, a: "allow")
    assert resumed.status == "completed"
