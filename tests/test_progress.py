"""Never silent: while the model reads the prompt (before its first token) and while a tool runs,
every front end shows what it waits for, how big the prompt is and for how long; with a server
that reports its reading (llama.cpp's `return_progress`), a bar and the time left."""

from __future__ import annotations

import json

import pytest

from lmagent.cli.display import progress_text
from lmagent.loop.run import run_agent
from tests.cli_process import cli, cli_env
from tests.conftest import make_config
from tests.pty_terminal import Terminal
from tests.scripted_llm import error, text, tool_call
from tests.test_web_browser import browser, tab, web  # noqa: F401 - the fixtures

SLOW = 3.0  # seconds the scripted server holds its first token back
READING = [
    {"total": 1000, "cache": 0, "processed": 250, "time_ms": 500},
    {"total": 1000, "cache": 0, "processed": 500, "time_ms": 1000},
]


def slow_answer(content: str = "Hello there.", **kw) -> dict:
    return text(content + "\nTASK_COMPLETE", delay=SLOW, **kw)


def events_of(workspace, llm, task: str = "say hi", **changes) -> list[dict]:
    events: list[dict] = []
    run_agent(make_config(workspace, llm, **changes), task, sink=events.append)
    return events


# --------------------------------------------------------------------------- the loop's events


def test_the_prompt_phase_ticks_until_the_first_token_then_ends(workspace, llm):
    llm.add(slow_answer())
    events = events_of(workspace, llm)
    progress = [e for e in events if e["type"] == "progress"]
    first_token = next(i for i, e in enumerate(events) if e["type"] == "token")
    assert progress[0]["phase"] == "prompt" and progress[0]["elapsed"] < 1
    assert progress[0]["tokens"] > 100  # the system prompt and the task, estimated
    assert any(e["elapsed"] >= 2 for e in progress if not e.get("done"))
    assert progress[-1]["done"] is True
    assert events.index(progress[-1]) < first_token  # the line is gone before the text comes


def test_a_fast_reply_still_says_it_was_reading(workspace, llm):
    llm.add(text("Hi.\nTASK_COMPLETE"))
    progress = [e for e in events_of(workspace, llm) if e["type"] == "progress"]
    said = [e.get("done", False) for e in progress]  # one line a second while it reads
    assert said[0] is False and said[-1] is True and said.count(True) == 1


def test_the_servers_reading_gives_a_fraction_and_the_time_left(workspace, llm):
    llm.add(text("Hi.\nTASK_COMPLETE", progress=READING, progress_delay=0.3))
    events = events_of(workspace, llm)
    assert llm.requests[0]["return_progress"] is True
    reported = [e for e in events if e["type"] == "progress" and e.get("total")]
    assert [(e["processed"], e["total"]) for e in reported[:2]] == [(250, 1000), (500, 1000)]
    assert 0.9 <= reported[1]["eta"] <= 1.0  # 500 tokens read in 1 s: the other 500 take 1 s
    assert "[##########----------] 50% · 500/1,000 tokens" in progress_text(reported[1])


def test_a_server_that_rejects_the_progress_field_is_asked_without_it(workspace, llm):
    llm.add(
        error(400, {"error": {"message": "unknown field: return_progress"}}),
        text("Hi.\nTASK_COMPLETE"),
    )
    events = events_of(workspace, llm)
    assert events[-1]["status"] == "completed"
    assert "return_progress" not in llm.requests[1]


def test_a_long_tool_call_ticks_with_its_name(workspace, llm):
    llm.add(
        tool_call("shell", {"command": "sleep 2.5"}),
        text("Slept.\nTASK_COMPLETE"),
    )
    events = events_of(workspace, llm, sandbox_backend="process", allow_unsandboxed_auto=True)
    tool = [e for e in events if e["type"] == "progress" and e["phase"] == "tool"]
    assert tool and tool[0]["name"] == "shell" and tool[0]["elapsed"] >= 1
    assert tool[-1]["done"] is True
    call = next(i for i, e in enumerate(events) if e["type"] == "tool_call")
    result = next(i for i, e in enumerate(events) if e["type"] == "tool_result")
    assert call < events.index(tool[0]) < events.index(tool[-1]) < result


def test_a_quick_tool_call_shows_no_progress(workspace, llm):
    llm.add(tool_call("ls", {}), text("Listed.\nTASK_COMPLETE"))
    events = events_of(workspace, llm)
    assert not [e for e in events if e["type"] == "progress" and e["phase"] == "tool"]


# --------------------------------------------------------------------------- the terminal


def test_the_one_shot_cli_shows_one_updating_line_on_a_terminal(workspace, llm):
    llm.add(slow_answer())
    terminal = Terminal(["say hi"], cwd=workspace, env=cli_env(workspace, llm))
    try:
        llm.wait_for_requests(1, timeout=20)  # sent: the line is due at once
        shown = terminal.expect("reading the prompt · ~", timeout=5)
        assert "Hello there" not in shown
        later = terminal.expect("tokens · 2 s")
        assert "Hello there" not in later
        assert terminal.finish() == 0
    finally:
        terminal.close()
    assert "Hello there." in terminal.shown
    # the line is redrawn in place (carriage returns), never one new line per second
    assert terminal.shown.count("\n· reading the prompt") <= 1


def test_the_repl_shows_the_progress_line_over_a_pty(workspace, llm):
    llm.add(slow_answer("Hi from the REPL."))
    terminal = Terminal([], cwd=workspace, env=cli_env(workspace, llm))
    try:
        terminal.expect("Type a task")
        terminal.type("say hi")
        llm.wait_for_requests(1, timeout=10)
        shown = terminal.expect("reading the prompt · ~", timeout=5)
        assert "Hi from the REPL" not in shown
        terminal.expect("Hi from the REPL.")
        terminal.type("quit")
        assert terminal.finish() == 0
    finally:
        terminal.close()


def test_without_a_terminal_the_cli_prints_a_progress_line_now_and_then(workspace, llm):
    llm.add(slow_answer())
    done = cli(workspace, llm, "say hi")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "reading the prompt" in line]
    assert len(lines) == 1 and lines[0].startswith("· reading the prompt · ~")
    assert "\r" not in done.stdout and "\x1b" not in done.stdout


def test_json_carries_the_progress_events(workspace, llm):
    llm.add(slow_answer())
    done = cli(workspace, llm, "--json", "say hi")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    progress = [e for e in events if e["type"] == "progress"]
    assert progress[0]["phase"] == "prompt" and progress[-1]["done"] is True
    assert len(progress) >= 3  # at once, each second, and at the end


@pytest.mark.browser
def test_the_web_chat_shows_the_progress_line_until_the_reply(tab, llm):  # noqa: F811
    llm.add(slow_answer("Hi from the web.", progress=READING, progress_delay=1.0))
    tab.sign_in()
    tab.send("say hi")
    llm.wait_for_requests(1, timeout=10)
    tab.wait_text(".progress-line", "reading the prompt", timeout=1_000)
    assert "Hi from the web" not in tab.assistant_text()
    tab.wait_text(".progress-line", "50% · 500/1,000 tokens")
    assert tab.page.is_visible(".progress-line progress")
    tab.page.wait_for_selector(".ending.completed")
    assert "Hi from the web." in tab.assistant_text()
    assert tab.page.query_selector(".progress-line") is None


# --------------------------------------------------------------------------- honest endings


def test_an_answer_without_tools_says_nothing_was_done_and_exits_0(workspace, llm):
    llm.add(text("def add(a, b):\n    return a + b\nTASK_COMPLETE"))
    done = cli(workspace, llm, "write an add function")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("— completed · answered without using any tool: no file changed, ")
    assert "no command run" in last


def test_the_ending_names_the_files_changed_and_commands_run(workspace, llm):
    llm.add(
        tool_call("write", {"path": "a.py", "content": "print(1)\n"}),
        tool_call("shell", {"command": "python a.py"}),
        text("Wrote and ran it.\nTASK_COMPLETE"),
    )
    done = cli(workspace, llm, "--json", "write a.py and run it")
    assert done.returncode == 0, done.stderr
    ending = json.loads(done.stdout.splitlines()[-1])
    assert ending["type"] == "done" and ending["status"] == "completed"
    assert ending["files_changed"] == ["a.py"] and ending["commands_run"] == 1
    assert ending["processes_started"] == []
    assert ending["summary"] == "changed 1 file (a.py), ran 1 command"


def test_a_run_that_only_read_says_which_tools_and_that_nothing_changed(workspace, llm):
    (workspace / "notes.txt").write_text("the word is kiwi\n")
    llm.add(tool_call("read", {"path": "notes.txt"}), text("The word is kiwi.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "--json", "what is the word")
    ending = json.loads(done.stdout.splitlines()[-1])
    assert ending["summary"] == "used 1 tool call (read), no file changed, no command run"
    assert ending["files_changed"] == [] and ending["commands_run"] == 0


def test_a_background_start_is_in_the_ending(workspace, llm):
    llm.add(
        tool_call("shell", {"command": "sleep 30", "background": True}),
        text("Started.\nTASK_COMPLETE"),
    )
    done = cli(workspace, llm, "start a sleeper")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert "ran 1 command, started 1 background process (p1)" in last


def test_the_summary_says_what_happened_before_what_did_not():
    from lmagent.loop.outcome import Outcome

    outcome = Outcome()
    outcome.record("shell", {"command": "pytest"}, {"success": False, "exit_code": 1}, {})
    outcome.record("shell", {"command": "rm x"}, {"success": False, "error": "denied"}, {})
    assert outcome.summary() == "ran 1 command, no file changed"  # a denied call ran nothing
    outcome.record("write", {"path": "b"}, {"success": True}, {"changed": ["b", "c", "d", "e"]})
    assert outcome.summary() == "changed 4 files (b, c, d, …), ran 1 command"
