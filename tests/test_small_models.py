"""Small local models (issue 24): a first request that fits a budget, requests that extend each
other byte for byte (the server's prompt cache), a window that is never overflowed, the call
form chosen from what the model writes, tools on demand, and no giving up at the first error.

The model is the scripted server; the server's probe (llama.cpp's /props) reports its window.
"""

from __future__ import annotations

import itertools
import json

import lmagent.llm.embedded as embedded_llm
from lmagent.llm.tokens import estimate_tokens
from lmagent.loop.run import run_agent
from lmagent.runtime import shared_runtime
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text, tool_call

FIRST_REQUEST_BUDGET = 1200  # tokens, as the project estimates them (bench/: the real tokenizer)
WINDOW = 4096


def llama_cpp(turns: list[dict]) -> ScriptedLLM:
    """A scripted llama.cpp server whose model is loaded with a WINDOW-token context."""
    return ScriptedLLM(turns, models=False, props=WINDOW)


def embedded_config(workspace, llm, **changes):
    """The settings --embedded runs the default model with, against the scripted server."""
    config = make_config(workspace, llm, enable_mcp=False, **changes)
    return config.with_changes(**embedded_llm.embedded_settings(config, llm.url))


def run(config, task: str, events: list | None = None, **options):
    with shared_runtime(config) as runtime:
        sink = (events if events is not None else []).append
        return run_agent(config, task, sink=sink, **runtime.run_options(), **options)


def request_tokens(body: dict) -> int:
    """The project's estimate of a request: its messages and any tool schemas."""
    tools = json.dumps(body.get("tools", []))
    return estimate_tokens(body["messages"]) + len(tools) // 4


def test_the_first_request_of_the_default_embedded_model_fits_the_budget(workspace):
    with llama_cpp([text("Hello.\nTASK_COMPLETE")]) as llm:
        result = run(embedded_config(workspace, llm), "say hello")
        first = llm.requests[0]
    assert result.status == "completed"
    assert "tools" not in first  # calls are read as text: no schemas in the request
    assert request_tokens(first) <= FIRST_REQUEST_BUDGET, request_tokens(first)
    system = first["messages"][0]["content"]
    for name in ("read", "write", "edit", "shell"):
        assert f"{name}(" in system  # named, with its arguments
    for name in ("git_commit", "delegate", "process_kill", "todo_add", "task_state_update"):
        assert name not in system  # on demand: run when called, not named to a text caller


def test_the_first_request_to_a_4096_token_window_fits_the_budget_with_native_calls(workspace):
    with llama_cpp([text("Hello.\nTASK_COMPLETE")]) as llm:  # defaults: auto, native calls
        run(make_config(workspace, llm, enable_mcp=False), "say hello")
        first = llm.requests[0]
    assert {t["function"]["name"] for t in first["tools"]} == {
        "read",
        "write",
        "edit",
        "ls",
        "grep",
        "shell",
    }
    assert request_tokens(first) <= FIRST_REQUEST_BUDGET, request_tokens(first)


def test_the_full_tool_set_would_not_fit(workspace):
    """The budget test above can fail: the full tool set in native calls is far larger."""
    with llama_cpp([text("Hello.\nTASK_COMPLETE")]) as llm:
        run(make_config(workspace, llm, enable_mcp=False, tool_set="full"), "say hello")
        assert request_tokens(llm.requests[0]) > 2 * FIRST_REQUEST_BUDGET


def assert_each_extends_the_last(requests: list[dict]) -> None:
    for before, after in itertools.pairwise(requests):
        sent = before["messages"]
        assert after["messages"][: len(sent)] == sent, "a request rewrote what the last one sent"
        assert json.dumps(after["messages"])[: len(json.dumps(sent)) - 1] == (json.dumps(sent)[:-1])
        assert after.get("tools") == before.get("tools")


def test_requests_extend_each_other_byte_for_byte_also_when_todos_change(workspace):
    (workspace / "a.txt").write_text("alpha\n")
    turns = [
        text('<tool_call>{"name": "todo_add", "arguments": {"description": "copy a"}}</tool_call>'),
        text('<tool_call>{"name": "read", "arguments": {"path": "a.txt"}}</tool_call>'),
        text('<tool_call>{"name": "read", "arguments": {"path": "missing.txt"}}</tool_call>'),
        text(
            '<tool_call>{"name": "write", "arguments": {"path": "b.txt", "content": "alpha"}}'
            "</tool_call>"
        ),
        text('<tool_call>{"name": "todo_complete", "arguments": {"todo_id": 1}}</tool_call>'),
        text("Copied.\nTASK_COMPLETE"),
    ]
    with llama_cpp(turns) as llm:
        config = embedded_config(workspace, llm)
        result = run(config, "copy a.txt to b.txt")
        llm.assert_all_used()
        assert result.status == "completed"
        assert_each_extends_the_last(llm.requests)
        llm.add(text("Nothing to do.\nTASK_COMPLETE"))
        run(config, "another task, in a new session")
        first_of_next = llm.requests[-1]["messages"][0]
    assert first_of_next == llm.requests[0]["messages"][0]  # a new task reuses the system prompt
    assert (workspace / "b.txt").read_text() == "alpha"


def test_a_4096_token_window_is_never_exceeded(workspace):
    turns = []
    for n in range(8):  # each file alone is a third of the window
        (workspace / f"part{n}.txt").write_text(f"part {n}: " + "lorem ipsum dolor " * 300)
        turns.append(tool_call("read", {"path": f"part{n}.txt"}))
    turns.append(text("Read them all.\nTASK_COMPLETE"))
    with llama_cpp(turns) as llm:
        result = run(make_config(workspace, llm, enable_mcp=False), "read every part")
        llm.assert_all_used()
    assert result.status == "completed"
    sizes = [request_tokens(body) for body in llm.requests]
    assert max(sizes) <= WINDOW, sizes
    assert sum(sizes) > 3 * WINDOW  # the run did have more to say than one window holds


def test_auto_turns_to_text_calls_when_the_model_writes_them(workspace):
    doubled = '{{"name": "write", "arguments": {"path": "x.py", "content": "print(1)"}}}'
    done = text("Done.\nTASK_COMPLETE")  # twice: a program written and never run is questioned
    turns = [text(doubled), done, done, text("Again.\nTASK_COMPLETE")]
    with llama_cpp(turns) as llm:  # a template that knows tools: native first
        config = make_config(workspace, llm, enable_mcp=False)
        events: list[dict] = []
        result = run(config, "write x.py", events)
        run(config, "a second run in the same process")
        llm.assert_all_used()
    assert result.status == "completed"
    assert (workspace / "x.py").read_text() == "print(1)"  # the doubled braces were a call
    assert "tools" in llm.requests[0]
    assert "tools" not in llm.requests[1] and "tools" not in llm.requests[2]
    assert "- write(path, content)" in llm.requests[1]["messages"][0]["content"]
    assert any("as text" in e.get("message", "") for e in events if e["type"] == "status")


def test_a_set_mode_is_kept_when_calls_come_as_text(workspace):
    turns = [
        text('<tool_call>{"name": "ls", "arguments": {}}</tool_call>'),
        text("Listed.\nTASK_COMPLETE"),
    ]
    with llama_cpp(turns) as llm:
        run(make_config(workspace, llm, enable_mcp=False, tool_call_mode="native"), "list")
        llm.assert_all_used()
    assert all("tools" in body for body in llm.requests)


def test_a_tool_on_demand_runs_when_called(workspace):
    turns = [
        text('<tool_call>{"name": "todo_add", "arguments": {"description": "x"}}</tool_call>'),
        text("Noted.\nTASK_COMPLETE"),
    ]
    with llama_cpp(turns) as llm:
        events: list[dict] = []
        run(embedded_config(workspace, llm), "note x", events)
    results = [e for e in events if e["type"] == "tool_result"]
    assert [(r["name"], r["success"]) for r in results] == [("todo_add", True)]


def blocked_run(workspace, turns: list[dict]):
    with llama_cpp(turns) as llm:
        result = run(make_config(workspace, llm, enable_mcp=False), "fix the configuration")
        llm.assert_all_used()
        return result, llm.requests


def test_blocked_right_after_a_failed_call_gets_one_nudge(workspace):
    result, requests = blocked_run(
        workspace,
        [
            tool_call("read", {"path": "config.ini"}),
            text("BLOCKED: config.ini does not exist"),
            tool_call("write", {"path": "config.ini", "content": "[main]\n"}),
            text("Created it.\nTASK_COMPLETE"),
        ],
    )
    assert result.status == "completed"
    assert "Read the error" in requests[2]["messages"][-1]["content"]
    assert (workspace / "config.ini").read_text() == "[main]\n"


def test_blocked_twice_after_a_failure_is_accepted(workspace):
    result, _ = blocked_run(
        workspace,
        [
            tool_call("read", {"path": "config.ini"}),
            text("BLOCKED: config.ini does not exist"),
            text("BLOCKED: I really cannot find config.ini"),
        ],
    )
    assert (result.status, result.message) == ("blocked", "I really cannot find config.ini")


def test_blocked_after_a_call_that_worked_is_accepted_at_once(workspace):
    (workspace / "config.ini").write_text("[main]\n")
    result, requests = blocked_run(
        workspace,
        [tool_call("read", {"path": "config.ini"}), text("BLOCKED: the password is not in it")],
    )
    assert (result.status, len(requests)) == ("blocked", 2)


def test_code_instead_of_a_call_is_not_the_end(workspace):
    result, requests = blocked_run(
        workspace,
        [
            text("```python\nwith open('config.ini', 'w') as f:\n    f.write('[main]')\n```"),
            tool_call("write", {"path": "config.ini", "content": "[main]"}),
            text("Written.\nTASK_COMPLETE"),
        ],
    )
    assert result.status == "completed"
    assert "Nothing was done" in requests[1]["messages"][-1]["content"]


def test_an_unreadable_attempted_call_is_a_format_error_not_the_end(workspace):
    broken = '{{"name": "write", "arguments": {"path": "a.py", "content": "print("hi")"}}}'
    fixed = '{"name": "write", "arguments": {"path": "a.py", "content": "print(\\"hi\\")"}}'
    result, requests = blocked_run(
        workspace, [text(broken), text(fixed), *[text("Written.\nTASK_COMPLETE")] * 2]
    )  # the second TASK_COMPLETE: a program written and never run is questioned once
    assert result.status == "completed"
    assert "could not be read" in requests[1]["messages"][-1]["content"]
    assert (workspace / "a.py").read_text() == 'print("hi")'


def test_a_repeated_call_that_worked_is_answered_with_how_to_finish(workspace):
    write = tool_call("write", {"path": "a.txt", "content": "x"})
    result, requests = blocked_run(workspace, [write, write, text("Done.\nTASK_COMPLETE")])
    assert result.status == "completed"
    first, second = (json.loads(r["messages"][-1]["content"]) for r in requests[1:])
    assert "note" not in first
    assert "TASK_COMPLETE" in second["note"]


def test_a_repeated_pair_of_calls_that_change_nothing_is_a_loop(workspace):
    """The 1.5B model re-sent "write hello.py, run it" after both had worked: each call
    'changes things', but the files stay the same, so the repeats count and stop the run."""
    pair = text(
        '<tool_call>{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}'
        "</tool_call>\n"
        '<tool_call>{"name": "shell", "arguments": {"command": "cat a.txt"}}</tool_call>'
    )
    # the 2nd pair follows a change (a.txt made): no repeat; each later one is asked for again
    # once (a sample the same word for word is not asked for again)
    asked = 2 + 2 * 3
    result, requests = blocked_run(workspace, [pair] * asked)
    assert result.status == "blocked" and "stuck in a loop" in result.message
    assert len(requests) == asked


def test_constrained_calls_can_name_a_tool_on_demand(workspace):
    call = {"name": "todo_add", "arguments": {"description": "x"}}
    answer = {"answer": "Noted.\nTASK_COMPLETE"}
    with llama_cpp([text(json.dumps(call)), text(json.dumps(answer))]) as llm:
        config = make_config(
            workspace, llm, enable_mcp=False, tool_set="compact", tool_call_mode="constrained"
        )
        events: list[dict] = []
        result = run(config, "note x", events)
        schema = llm.requests[0]["response_format"]["json_schema"]["schema"]
    names = {option["properties"]["name"]["const"] for option in schema["anyOf"][:-1]}
    assert {"todo_add", "git_commit", "write"} <= names
    assert result.status == "completed"
    assert [e["name"] for e in events if e["type"] == "tool_result"] == ["todo_add"]


def test_a_bare_task_complete_after_a_nudge_with_nothing_done_is_questioned_once(workspace):
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    fix = tool_call("edit", {"path": "calc.py", "search": "a - b", "replace": "a + b"})
    result, requests = blocked_run(
        workspace,
        [
            text("I will look at calc.py and fix the bug."),
            text("TASK_COMPLETE"),
            fix,
            text("Fixed.\nTASK_COMPLETE"),
        ],
    )
    assert result.status == "completed"
    assert "Nothing has been done yet" in requests[2]["messages"][-1]["content"]
    assert "a + b" in (workspace / "calc.py").read_text()


def test_a_bare_task_complete_is_accepted_the_second_time(workspace):
    result, requests = blocked_run(
        workspace,
        [text("I will check."), text("TASK_COMPLETE"), text("TASK_COMPLETE")],
    )
    assert (result.status, len(requests)) == ("completed", 3)


def test_task_complete_over_code_shown_before_any_call_is_questioned_once(workspace):
    claimed = "I renamed it:\n```python\ndef load_data():\n    pass\n```\nTASK_COMPLETE"
    (workspace / "data.py").write_text("def get_data():\n    pass\n")
    fix = tool_call("edit", {"path": "data.py", "search": "get_data", "replace": "load_data"})
    result, requests = blocked_run(workspace, [text(claimed), fix, text("Renamed.\nTASK_COMPLETE")])
    assert result.status == "completed"
    assert "Nothing was done" in requests[1]["messages"][-1]["content"]
    assert "load_data" in (workspace / "data.py").read_text()


def test_an_answer_with_code_and_task_complete_ends_the_second_time(workspace):
    answer = "Use:\n```sh\nls -la\n```\nTASK_COMPLETE"
    result, requests = blocked_run(workspace, [text(answer), text(answer)])
    assert (result.status, len(requests)) == ("completed", 2)
