"""Permission modes through the real loop: who is asked, what a denial does, and "auto"."""

from __future__ import annotations

import json

import pytest

from lmagent.loop.run import run_agent
from tests.cli_process import cli, cli_env
from tests.conftest import make_config
from tests.pty_terminal import cli_with_terminal
from tests.scripted_llm import call, text, tool_call, tool_calls

READ_ONLY = [
    call("read", {"path": "a.txt"}),
    call("ls", {}),
    call("grep", {"pattern": "keep"}),
    call("glob", {"pattern": "*.txt"}),
    call("todo_add", {"description": "check"}),
    call("todo_list", {}),
]
FILE_CHANGES = [
    call("write", {"path": "new.txt", "content": "x"}),
    call("edit", {"path": "a.txt", "search": "keep", "replace": "kept"}),
    call("mkdir", {"path": "sub"}),
]
COMMANDS = [
    call("shell", {"command": "ls"}),
    call("git_add", {"paths": ["a.txt"]}),
    call("git_commit", {"message": "save"}),
    call("git_branch", {"name": "feature", "create": True}),
]
COMMAND_NAMES = {"shell", "git_add", "git_commit", "git_branch"}


class Asker:
    """The front end's permission callback: records what it was asked, answers from a rule."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, tool: str, arguments: dict) -> str:
        self.asked.append(tool)
        return self.answer(tool) if callable(self.answer) else self.answer


def results(request: dict) -> dict[str, dict]:
    calls = {}
    for message in request["messages"]:
        for c in message.get("tool_calls") or ():
            calls[c["id"]] = c["function"]["name"]
    return {
        calls[m["tool_call_id"]]: json.loads(m["content"])
        for m in request["messages"]
        if m["role"] == "tool"
    }


@pytest.fixture
def a_file(workspace):
    (workspace / "a.txt").write_text("keep")
    return workspace / "a.txt"


def test_normal_mode_asks_before_changes_and_commands_but_not_reads(workspace, llm, a_file):
    config = make_config(workspace, llm, permission_mode="normal")
    # commands are denied, so nothing runs in a sandbox
    ask = Asker(lambda tool: "deny" if tool in COMMAND_NAMES else "allow")
    llm.add(tool_calls(*READ_ONLY, *FILE_CHANGES, *COMMANDS), text("TASK_COMPLETE"))
    result = run_agent(config, "work", ask=ask)
    llm.assert_all_used()
    assert ask.asked == ["write", "edit", "mkdir", "shell", "git_add", "git_commit", "git_branch"]
    seen = results(llm.requests[1])
    assert all(seen[c["name"]]["success"] for c in READ_ONLY + FILE_CHANGES)
    for name in COMMAND_NAMES:
        assert seen[name]["success"] is False
        assert "denied" in seen[name]["error"]
    assert a_file.read_text() == "kept"
    assert result.status == "completed"


def test_manual_mode_asks_for_everything(workspace, llm, a_file):
    config = make_config(workspace, llm, permission_mode="manual")
    ask = Asker("allow")
    llm.add(tool_calls(*READ_ONLY, *FILE_CHANGES), text("TASK_COMPLETE"))
    run_agent(config, "work", ask=ask)
    llm.assert_all_used()
    assert ask.asked == [c["name"] for c in READ_ONLY + FILE_CHANGES]


def test_auto_mode_never_asks(workspace, llm, a_file):
    config = make_config(workspace, llm, permission_mode="auto")
    ask = Asker("deny")
    llm.add(tool_calls(*READ_ONLY, *FILE_CHANGES), text("TASK_COMPLETE"))
    run_agent(config, "work", ask=ask)
    assert ask.asked == []
    assert (workspace / "new.txt").exists()


def test_denied_write_leaves_the_file_untouched_and_the_model_is_told(workspace, llm, a_file):
    config = make_config(workspace, llm, permission_mode="normal")
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "overwritten"}),
        text("I could not write it.\nTASK_COMPLETE"),
    )
    result = run_agent(config, "work", ask=Asker("deny"))
    llm.assert_all_used()
    assert a_file.read_text() == "keep"
    seen = results(llm.requests[1])["write"]
    assert seen["success"] is False
    assert "denied" in seen["error"]
    assert result.status == "completed"


def test_answering_auto_switches_the_rest_of_the_run(workspace, llm, a_file):
    config = make_config(workspace, llm, permission_mode="manual")
    ask = Asker("auto")
    llm.add(
        tool_call("write", {"path": "one.txt", "content": "1"}),
        tool_call("write", {"path": "two.txt", "content": "2"}),
        tool_call("read", {"path": "a.txt"}),
        text("TASK_COMPLETE"),
    )
    run_agent(config, "work", ask=ask)
    llm.assert_all_used()
    assert ask.asked == ["write"]
    assert (workspace / "one.txt").exists() and (workspace / "two.txt").exists()


def test_calls_with_bad_arguments_are_refused_before_anyone_is_asked(workspace, llm):
    config = make_config(workspace, llm, permission_mode="manual")
    ask = Asker("allow")
    llm.add(tool_call("write", {"path": "x.txt"}), text("TASK_COMPLETE"))
    run_agent(config, "work", ask=ask)
    assert ask.asked == []
    assert "missing required" in results(llm.requests[1])["write"]["error"]


def test_without_anyone_to_ask_changes_are_refused_with_a_hint(workspace, llm):
    config = make_config(workspace, llm, permission_mode="normal")
    llm.add(tool_call("write", {"path": "x.txt", "content": "1"}), text("TASK_COMPLETE"))
    run_agent(config, "work")
    assert not (workspace / "x.txt").exists()
    assert "--permission auto" in results(llm.requests[1])["write"]["error"]


# --------------------------------------------------------------------------- the CLI's prompt


@pytest.mark.parametrize(
    ("answer", "written"),
    [("y", True), ("yes", True), ("n", False), ("", False), ("whatever", False)],
)
def test_cli_asks_on_stdin_in_normal_mode(workspace, llm, answer, written):
    llm.add(tool_call("write", {"path": "a.txt", "content": "A"}), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli_with_terminal(workspace, "make a.txt", typed=answer + "\n", env=env)
    llm.assert_all_used()
    assert done.returncode == 0
    assert "? allow write" in done.stdout
    assert (workspace / "a.txt").exists() == written
    assert results(llm.requests[1])["write"]["success"] is written


def test_cli_answer_auto_stops_asking(workspace, llm):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "A"}),
        tool_call("write", {"path": "b.txt", "content": "B"}),
        text("TASK_COMPLETE"),
    )
    env = cli_env(workspace, llm, PERMISSION_MODE="normal")
    done = cli_with_terminal(workspace, "make files", typed="a\n", env=env)
    assert done.returncode == 0
    assert done.stdout.count("? allow") == 1
    assert (workspace / "b.txt").exists()


def test_cli_manual_mode_asks_for_a_read_and_a_closed_stdin_denies(workspace, llm, a_file):
    llm.add(tool_call("read", {"path": "a.txt"}), text("TASK_COMPLETE"))
    env = cli_env(workspace, llm)
    done = cli_with_terminal(
        workspace, "--permission", "manual", "read a.txt", typed="\x04", env=env
    )
    assert done.returncode == 0
    assert "? allow read" in done.stdout
    assert "denied" in results(llm.requests[1])["read"]["error"]


def test_cli_json_mode_sends_a_permission_request_event(workspace, llm):
    llm.add(tool_call("mkdir", {"path": "d"}))
    done = cli(workspace, llm, "--json", "--permission", "normal", "make d", input="y\n")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (request,) = [e for e in events if e["type"] == "permission_request"]
    assert request["tool"] == "mkdir" and request["arguments"] == {"path": "d"}
    assert request["request_id"] and request["session_id"] == events[0]["session_id"]
    assert done.returncode == 3  # "y" is no JSON answer; then stdin closed: nobody answered
    assert not (workspace / "d").exists()
