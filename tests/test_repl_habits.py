"""The REPL as a person types at it (a real pty): bare words typed out of habit are not tasks,
text typed during a run is shown as queued and can be cancelled, a background start says its
process id and first output, and /kill agrees with /ps."""

from __future__ import annotations

import contextlib

from tests.cli_process import cli, cli_env
from tests.pty_terminal import Terminal
from tests.scripted_llm import text, tool_call


@contextlib.contextmanager
def repl(workspace, llm, leave: str = "quit", **env):
    """The REPL on a pty, ready for a task; `leave` is typed at the end, and it must exit 0."""
    terminal = Terminal([], cwd=workspace, env=cli_env(workspace, llm, **env))
    try:
        terminal.expect("Type a task")
        yield terminal
        terminal.type(leave)
        assert terminal.finish() == 0
    finally:
        terminal.close()


def test_habits_are_handled_and_never_sent_to_the_model(workspace, llm):
    with repl(workspace, llm, leave="exit") as terminal:
        terminal.type("help")
        terminal.expect("/checkpoints [ID]")
        terminal.type("clear")
        terminal.type("ls")
        terminal.expect("'ls' looks like a shell command, so it was not sent to the agent")
    assert llm.requests == []
    assert "\x1b[2J" in terminal.raw.decode()  # clear cleared the screen


def test_a_shell_word_typed_twice_is_sent_as_a_task(workspace, llm):
    llm.add(text("Here are the files.\nTASK_COMPLETE"))
    done = cli(workspace, llm, input="pwd\npwd\nquit\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("looks like a shell command") == 1
    assert [m["content"] for m in llm.requests[0]["messages"] if m["role"] == "user"] == ["pwd"]


def test_text_typed_during_a_run_is_queued_then_run(workspace, llm):
    llm.add(text("First done.\nTASK_COMPLETE", delay=2.5), text("Second done.\nTASK_COMPLETE"))
    with repl(workspace, llm) as terminal:
        terminal.type("first task")
        terminal.expect("reading the prompt")
        terminal.type("second task")
        terminal.expect("· queued: second task (runs when this task ends; /cancel drops it)")
        terminal.expect("Second done.")
    asked = [r["messages"][-1]["content"] for r in llm.requests]
    assert asked == ["first task", "second task"]


def test_queued_text_can_be_cancelled(workspace, llm):
    llm.add(text("Only this.\nTASK_COMPLETE", delay=2.5))
    with repl(workspace, llm) as terminal:
        terminal.type("first task")
        terminal.expect("reading the prompt")
        terminal.type("oops, not this")
        terminal.expect("· queued: oops, not this")
        terminal.type("/cancel")
        terminal.expect("· dropped 1 queued line(s)")
        terminal.expect("Only this.")
    assert len(llm.requests) == 1


def test_a_permission_prompt_during_a_run_still_takes_its_answer(workspace, llm):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "A\n"}),
        text("Wrote it.\nTASK_COMPLETE"),
    )
    with repl(workspace, llm, PERMISSION_MODE="normal") as terminal:
        terminal.type("write a.txt")
        terminal.expect("? allow write")
        terminal.type("y")
        terminal.expect("— completed")
    assert (workspace / "a.txt").read_text() == "A\n"
    assert "queued: y" not in terminal.shown  # the answer went to the prompt


def test_a_background_start_shows_its_id_and_first_output_and_kill_agrees_with_ps(workspace, llm):
    llm.add(
        tool_call("shell", {"command": "echo hello; echo world; sleep 30", "background": True}),
        text("Started.\nTASK_COMPLETE"),
    )
    done = cli(workspace, llm, input="start it\n/ps\n/kill p1\nquit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "· p1 started in the background: echo hello; echo world; sleep 30" in out
    assert "/kill p1 stops it" in out
    assert "✓ shell — p1 running in the background" in out
    assert "    │ hello\n    │ world\n" in out
    after = out.partition("/ps")[2]
    assert "p1   exited 143" in after
    assert "p1 has already ended (exit code 143); nothing to stop" in after
