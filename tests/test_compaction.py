"""Context compaction in the real loop: what must survive, tool-call pairing on every request,
and the context-overflow retry."""

from __future__ import annotations

import itertools
import json

from lmagent.loop.compaction import SUMMARY_MARK
from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config
from tests.scripted_llm import context_overflow, error, text, tool_call

TASK = "TASK-MARKER: read every chapter and record progress"
PROJECT = "PROJECT-CONTEXT-MARKER: chapters are in plain text"


def assert_paired(request: dict) -> None:
    """Every assistant tool call is answered right after it; no tool message stands alone."""
    messages = request["messages"]
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message["role"] != "tool", f"orphan tool message at {index}: {message}"
        index += 1
        wanted = [c["id"] for c in message.get("tool_calls") or ()]
        answered = []
        while index < len(messages) and messages[index]["role"] == "tool":
            answered.append(messages[index]["tool_call_id"])
            index += 1
        assert answered == wanted, f"calls {wanted} answered by {answered}"


def chapters(workspace, count: int, size: int = 1600) -> list[dict]:
    turns = []
    for n in range(count):
        (workspace / f"chapter{n}.txt").write_text(f"chapter {n} " + "lorem ipsum " * (size // 12))
        turns.append(tool_call("read", {"path": f"chapter{n}.txt"}))
    return turns


def low_threshold_config(workspace, llm, extra_tokens: int):
    schemas = len(json.dumps(build_toolset().schemas())) // 4
    return make_config(workspace, llm, summarization_threshold=schemas + 400 + extra_tokens)


def test_compaction_keeps_system_task_project_context_and_pinned_state(workspace, llm):
    (workspace / ".lmagent.md").write_text(PROJECT)
    config = low_threshold_config(workspace, llm, extra_tokens=2500)
    state = {"objective": "OBJECTIVE-MARKER", "total_count": 14}
    llm.add(tool_call("task_state_update", state), *chapters(workspace, 14))
    llm.add(text("All chapters read.\nTASK_COMPLETE"))
    result = run_agent(config, TASK)
    llm.assert_all_used()
    assert result.status == "completed"

    sizes = [len(r["messages"]) for r in llm.requests]
    compacted = [r for r in llm.requests if SUMMARY_MARK in r["messages"][1]["content"]]
    assert compacted, f"no compaction happened; message counts {sizes}"
    assert max(sizes) < 2 + 2 * 15, "history grew without bound"
    shrinks = sum(1 for before, after in itertools.pairwise(sizes) if after < before)
    assert shrinks <= len(sizes) // 3, f"compacted on nearly every step: {sizes}"
    for request in llm.requests:
        system, first = request["messages"][0], request["messages"][1]
        assert system["role"] == "system"
        assert PROJECT in system["content"]
        assert first["role"] == "user" and first["content"].startswith(TASK)
        assert_paired(request)
    for request in llm.requests[1:]:  # in the call's result, then in the summary
        assert "OBJECTIVE-MARKER" in json.dumps(request["messages"][1:])
    assert "OBJECTIVE-MARKER" in compacted[-1]["messages"][1]["content"]
    assert len({r["messages"][0]["content"] for r in llm.requests}) == 1  # the cache stays
    summary = compacted[-1]["messages"][1]["content"]
    assert "you called read" in summary
    assert len(summary) < 6000
    session = SessionStore(workspace).open(result.session_id)
    assert len(session.transcript) > len(session.history)  # the transcript keeps everything
    assert session.history[0]["content"].startswith(TASK)


def test_compaction_never_splits_a_multi_call_step(workspace, llm):
    from tests.scripted_llm import call, tool_calls

    config = low_threshold_config(workspace, llm, extra_tokens=1500)
    for n in range(10):
        (workspace / f"a{n}.txt").write_text("x" * 900)
        (workspace / f"b{n}.txt").write_text("y" * 900)
        llm.add(
            tool_calls(call("read", {"path": f"a{n}.txt"}), call("read", {"path": f"b{n}.txt"}))
        )
    llm.add(text("TASK_COMPLETE"))
    result = run_agent(config, TASK)
    llm.assert_all_used()
    assert result.status == "completed"
    assert any(SUMMARY_MARK in r["messages"][1]["content"] for r in llm.requests)
    for request in llm.requests:
        assert_paired(request)


def test_context_overflow_compacts_and_retries_exactly_once(workspace, llm, config):
    llm.add(*chapters(workspace, 6, size=200), context_overflow(), text("Done.\nTASK_COMPLETE"))
    result = run_agent(config, TASK)
    llm.assert_all_used()
    assert result.status == "completed"
    overflowed, retried = llm.requests[6], llm.requests[7]
    assert len(retried["messages"]) < len(overflowed["messages"])
    assert SUMMARY_MARK in retried["messages"][1]["content"]
    assert retried["messages"][1]["content"].startswith(TASK)
    assert_paired(retried)


def test_a_second_overflow_ends_the_run_as_error_without_more_retries(workspace, llm, config):
    llm.add(*chapters(workspace, 6, size=200), context_overflow(), context_overflow())
    llm.add(text("never asked for"))
    result = run_agent(config, TASK)
    assert result.status == "error"
    assert "context" in result.message
    assert len(llm.requests) == 8


def test_overflow_with_nothing_to_compact_fails_without_retrying(workspace, llm, config):
    llm.add(context_overflow(), text("never asked for"))
    result = run_agent(config, TASK)
    assert result.status == "error"
    assert len(llm.requests) == 1


def test_other_400_errors_are_not_retried(workspace, llm, config):
    llm.add(error(400, {"error": {"message": "invalid message format"}}), text("never"))
    result = run_agent(config, TASK)
    assert result.status == "error"
    assert "invalid message format" in result.message
    assert len(llm.requests) == 1
