"""The shell and git tools as the model uses them: through the tool set and the loop, on both
isolating backends (Docker and bubblewrap)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from lmagent.core.stop import StopToken
from lmagent.loop.run import run_agent
from lmagent.tools.registry import Services
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config, tool_context
from tests.scripted_llm import text, tool_call

pytest_plugins = ["tests.sandbox_fixtures"]


@pytest.fixture(params=["docker", "bwrap"])
def shell_env(request, require_backend, workspace, test_workspaces):
    """(toolset, ctx) whose shell runs in a real sandbox of the given backend."""
    require_backend(request.param)
    test_workspaces.append(workspace)
    config = make_config(workspace, sandbox_backend=request.param)
    services = Services(config)
    ctx = tool_context(config, services=services)
    yield build_toolset(services), ctx
    services.close()


def run(env, tool, **args) -> dict:
    toolset, ctx = env
    return toolset.execute(ctx, tool, args)


def test_a_command_that_is_not_found_says_what_to_fix(shell_env):
    result = run(shell_env, "shell", command="no-such-program-xyz --version")
    assert (result["success"], result["exit_code"]) == (False, 127)
    assert "no-such-program-xyz" in result["output"]
    assert "did not find a command" in result["error"]


def test_a_missing_python_is_answered_with_python3(shell_env):
    result = run(shell_env, "shell", command="PATH=/nowhere python hello.py")
    assert result["exit_code"] == 127 and "python: command not found" in result["output"]
    assert result["error"] == "`python` is not installed here: run it as `python3` instead"
    result = run(shell_env, "shell", command="PATH=/nowhere pip install x")
    assert result["error"] == "`pip` is not installed here: run it as `python3 -m pip` instead"


def test_shell_runs_in_the_workspace_and_returns_output_and_exit_code(shell_env, workspace):
    result = run(shell_env, "shell", command="pwd; echo hi > made.txt; id -u; exit 3")
    assert result["success"] is False
    assert result["exit_code"] == 3
    lines = result["output"].splitlines()
    assert lines[0] == str(workspace)
    assert lines[1] == str(os.getuid())
    assert (workspace / "made.txt").read_text() == "hi\n"
    assert (workspace / "made.txt").stat().st_uid == os.getuid()


def test_shell_timeout_is_reported_and_the_next_command_works(shell_env):
    started = time.monotonic()
    result = run(shell_env, "shell", command="sleep 30", timeout=1)
    assert time.monotonic() - started < 10
    assert result["success"] is False and "timed out" in result["error"]
    assert run(shell_env, "shell", command="echo next")["output"].strip() == "next"


def test_bad_shell_arguments_are_refused_before_running(shell_env):
    assert "timeout" in run(shell_env, "shell", command="true", timeout=500)["error"]
    assert "max_memory_mb" in run(shell_env, "shell", command="true", max_memory_mb=999999)["error"]
    assert "empty" in run(shell_env, "shell", command="   ")["error"]


def test_agent_environment_never_reaches_a_command(shell_env, monkeypatch):
    monkeypatch.setenv("LLM_API_KEY", "sk-secret-from-host")
    monkeypatch.setenv("AGENT_TOKEN", "pin-from-host")
    result = run(shell_env, "shell", command="env")
    assert result["success"] is True and "PATH=" in result["output"]
    assert "sk-secret-from-host" not in result["output"]
    assert "pin-from-host" not in result["output"]


def test_workspace_only_check_is_a_second_line_not_a_blocker(shell_env, workspace):
    refused = run(shell_env, "shell", command="cat /etc/shadow")
    assert refused["success"] is False and "outside" in refused["error"]
    ordinary = run(
        shell_env,
        "shell",
        command=f'echo "see https://example.com/a/../b" && ls {workspace} >/dev/null && echo ok',
    )
    assert ordinary["success"] is True, ordinary


def test_stop_interrupts_a_running_command(shell_env):
    toolset, ctx = shell_env
    ctx.stop = StopToken()
    threading.Timer(1.0, ctx.stop.stop).start()
    started = time.monotonic()
    result = toolset.execute(ctx, "shell", {"command": "sleep 60", "timeout": 60})
    assert time.monotonic() - started < 5
    assert result["success"] is False


def test_git_tools_work_in_a_fresh_sandbox(shell_env, workspace):
    assert run(shell_env, "shell", command="git init -q -b main")["success"]
    (workspace / "a.txt").write_text("one\n")
    assert "a.txt" in run(shell_env, "git_status")["output"]
    assert run(shell_env, "git_add", paths=["a.txt"])["success"]
    assert "+one" in run(shell_env, "git_diff", staged=True)["output"]
    committed = run(shell_env, "git_commit", message='first: fix "../" handling')
    assert committed["success"], committed
    (workspace / "a.txt").write_text("two\n")
    assert "+two" in run(shell_env, "git_diff", path="a.txt")["output"]
    assert run(shell_env, "git_branch", name="feature", create=True, switch=True)["success"]
    assert "* feature" in run(shell_env, "git_branch")["output"]
    log = run(shell_env, "shell", command="git log --format='%an|%s'")["output"].strip()
    assert log == 'LMAgent|first: fix "../" handling'


def test_git_arguments_are_checked(shell_env):
    assert "outside" in run(shell_env, "git_add", paths=["../x"])["error"]
    assert (
        "invalid branch name" in run(shell_env, "git_branch", name="--force", create=True)["error"]
    )
    assert "empty" in run(shell_env, "git_commit", message=" ")["error"]


def test_the_loop_runs_shell_commands_the_model_asks_for(
    require_backend, test_workspaces, workspace, llm
):
    require_backend("docker")
    test_workspaces.append(workspace)  # its container is removed at the end of the session
    config = make_config(workspace, llm, sandbox_backend="docker")
    llm.add(
        tool_call("shell", {"command": "echo $((6 * 7)) > answer.txt && cat answer.txt"}),
        text("The answer is 42.\nTASK_COMPLETE"),
    )
    services = Services(config)
    try:
        result = run_agent(config, "compute", services=services)
    finally:
        services.close()
    assert result.status == "completed"
    tool = json.loads(
        next(m for m in llm.requests[-1]["messages"] if m["role"] == "tool")["content"]
    )
    assert tool["success"] is True and tool["output"].strip() == "42"
    assert (workspace / "answer.txt").read_text() == "42\n"
