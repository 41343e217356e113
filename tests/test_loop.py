"""The loop (`run_agent`) against the scripted server: completion protocol, bad input
from the model, and loop detection."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from tests.scripted_llm import text, tool_call


def run(config, task="do the task", **kw):
    events: list[dict] = []
    result = run_agent(config, task, sink=events.append, **kw)
    return result, events


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def last_result(request: dict) -> dict:
    """The newest tool result the model was sent in this request."""
    return json.loads(tool_messages(request)[-1]["content"])


def last_user(request: dict) -> str:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


# --------------------------------------------------------------------------- completion protocol


def test_task_complete_on_its_own_line_completes_after_the_work(config, llm, workspace):
    llm.add(
        tool_call("write", {"path": "hello.txt", "content": "hi"}),
        text("I wrote hello.txt.\nTASK_COMPLETE"),
    )
    result, events = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert result.message == "I wrote hello.txt."
    assert (workspace / "hello.txt").read_text() == "hi"
    assert last_result(llm.requests[1])["success"] is True
    assert events[-1]["type"] == "done" and events[-1]["status"] == "completed"


def test_blocked_line_ends_the_run_as_blocked_with_its_reason(config, llm):
    llm.add(text("I looked around.\nBLOCKED: the API key is missing"))
    result, _ = run(config)
    llm.assert_all_used()
    assert (result.status, result.message) == ("blocked", "the API key is missing")


def _local(naive: datetime) -> datetime:
    return naive.astimezone().astimezone(timezone.utc)


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2099-03-04T05:06:07Z", datetime(2099, 3, 4, 5, 6, 7, tzinfo=timezone.utc)),
        ("2099-03-04T10:06:07+05:00", datetime(2099, 3, 4, 5, 6, 7, tzinfo=timezone.utc)),
        ("2099-03-04T10:06:07+0500", datetime(2099, 3, 4, 5, 6, 7, tzinfo=timezone.utc)),
        ("2099-03-04T05:06:07", _local(datetime(2099, 3, 4, 5, 6, 7))),
        ("2099-03-04 05:06", _local(datetime(2099, 3, 4, 5, 6))),
    ],
)
def test_wait_parks_the_session_until_the_time_in_utc(config, llm, workspace, stamp, expected):
    llm.add(text(f"The build runs overnight.\nWAIT: {stamp}: check the nightly build"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "waiting"
    assert result.wait_until == expected.isoformat()
    meta = SessionStore(workspace).open(result.session_id).meta
    assert meta["status"] == "waiting"
    assert meta["wait_until"] == expected.isoformat()
    assert meta["wait_reason"] == "check the nightly build"


def test_wait_in_the_past_is_not_parked_the_model_is_told_to_continue(config, llm):
    past = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat(timespec="seconds")
    llm.add(text(f"WAIT: {past}: later"), text("Done now.\nTASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert "already passed" in last_user(llm.requests[1])


def test_unreadable_wait_time_is_reprompted_not_completed(config, llm):
    llm.add(text("WAIT: tomorrow morning: check again"), text("TASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert "ISO-8601" in last_user(llm.requests[1])


def test_reply_announcing_work_does_not_end_the_run(config, llm, workspace):
    llm.add(
        text("Sure. I'll now write index.html"),
        tool_call("write", {"path": "index.html", "content": "<h1>hi</h1>"}),
        text("Done.\nTASK_COMPLETE"),
    )
    result, _ = run(config, "make a web page")
    llm.assert_all_used()
    assert result.status == "completed"
    assert (workspace / "index.html").exists()
    assert "did not call a tool" in last_user(llm.requests[1])


def test_an_answer_offering_more_help_is_no_announced_step(config, llm):
    answer = "The capital of France is Paris. I'll be happy to help with anything else."
    llm.add(text(answer))
    result, _ = run(config, "what is the capital of France?")
    assert (result.status, result.message) == ("completed", answer)
    assert len(llm.requests) == 1


def test_model_that_only_keeps_announcing_ends_blocked_not_completed(config, llm):
    llm.add(*[text("Let me write the file now.") for _ in range(4)])
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "blocked"
    assert len(llm.requests) == 4


def test_plain_answer_without_markers_completes(config, llm):
    llm.add(text("The capital of France is Paris."))
    result, _ = run(config, "what is the capital of France?")
    llm.assert_all_used()
    assert (result.status, result.message) == ("completed", "The capital of France is Paris.")


def test_commands_shown_in_a_code_block_instead_of_run_get_one_nudge(config, llm, workspace):
    """A small model often "runs" commands by writing them, with made-up output, in a code
    block. That is not the end of the task: it is told once to use the shell tool."""
    pretended = "```bash\necho hi > hello.txt\n```\nOutput:\n```\nhi\n```"
    llm.add(
        text(pretended),
        tool_call("write", {"path": "hello.txt", "content": "hi"}),
        text("Created hello.txt.\nTASK_COMPLETE"),
    )
    result, _ = run(config, "create hello.txt containing hi")
    llm.assert_all_used()
    assert result.status == "completed"
    assert "not run" in last_user(llm.requests[1])
    assert (workspace / "hello.txt").read_text() == "hi"


def test_a_code_block_after_real_work_or_a_second_time_ends_the_run(config, llm):
    llm.add(tool_call("todo_list"), text("Run it with:\n```sh\nmake test\n```"))
    result, _ = run(config, "set up the tests")
    assert (result.status, len(llm.requests)) == ("completed", 2)
    llm.add(text("```bash\nls\n```"), text("```bash\nls -l\n```"))
    result, _ = run(config, "how do I list files?")
    llm.assert_all_used()
    assert result.status == "completed" and "ls -l" in result.message


def test_a_looping_reply_is_cut_recorded_once_and_the_model_is_told(config, llm, workspace):
    looped = "Writing it now.\n" + "hello hello " * 1000
    llm.add(text(looped, chunk_size=24), text("Sorry.\nTASK_COMPLETE"))
    result, _ = run(config, "write hello.txt")
    llm.assert_all_used()
    assert result.status == "completed"
    retry = llm.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Writing it now.\nhello"}  # one copy
    assert "repeating" in retry[-1]["content"]


def test_a_model_that_keeps_looping_ends_blocked(config, llm):
    llm.add(*[text("again " * 500, chunk_size=30) for _ in range(4)])
    result, _ = run(config)
    llm.assert_all_used()
    assert (result.status, len(llm.requests)) == ("blocked", 4)
    assert "repeating itself" in result.message


def test_open_todos_get_exactly_one_nudge(config, llm):
    llm.add(
        tool_call("todo_add", {"description": "write tests"}),
        text("All finished."),
        text("Really finished."),
    )
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert result.message == "Really finished."
    assert "still open" in last_user(llm.requests[2])


# ------------------------------------------------------------------------ bad input from the model


def test_malformed_json_arguments_become_an_error_result_and_the_run_continues(config, llm):
    llm.add(
        tool_call("write", '{"path": "a.txt", "content": '),
        text("TASK_COMPLETE"),
    )
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    seen = last_result(llm.requests[1])
    assert seen["success"] is False
    assert "not valid JSON" in seen["error"]
    assert seen["arguments_received"] == '{"path": "a.txt", "content": '
    # what goes back to the server as the assistant's call is still a JSON object
    call = llm.requests[1]["messages"][-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {}


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("frobnicate", {}, "unknown tool 'frobnicate'"),
        ("write", {"path": "a.txt"}, "missing required argument(s) for write: content"),
        ("read", {"path": "a.txt", "colour": "red"}, "unknown argument(s) colour"),
        ("read", {"path": "a.txt", "limit": "many"}, "argument 'limit' must be of type integer"),
    ],
)
def test_bad_tool_calls_become_error_results_the_model_sees(
    config, llm, workspace, name, arguments, expected
):
    (workspace / "a.txt").write_text("keep")
    llm.add(tool_call(name, arguments), text("TASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    seen = last_result(llm.requests[1])
    assert seen["success"] is False
    assert expected in seen["error"]
    assert (workspace / "a.txt").read_text() == "keep"


@pytest.mark.parametrize(
    "written",
    [
        '<tool_call>{"name": "write", "arguments": {"path": "t.txt", "content": "hi"}}</tool_call>',
        "Writing it.\n<function=write><parameter=path>t.txt</parameter>"
        "<parameter=content>hi</parameter></function>",
        'Here:\n```json\n{"name": "write", "arguments": {"path": "t.txt", "content": "hi"}}\n```',
    ],
)
def test_tool_calls_written_as_text_are_executed_and_answered(config, llm, workspace, written):
    llm.add(text(written), text("TASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert (workspace / "t.txt").read_text() == "hi"
    answer = llm.requests[1]["messages"][-1]
    assert answer["role"] == "user"
    assert answer["content"].startswith('<tool_result name="write">')
    assert '"success": true' in answer["content"]


def test_unreadable_text_call_is_reprompted_three_times_then_the_run_fails(config, llm):
    bad = text('<tool_call>{"name": "write", "arguments": {"path": </tool_call>')
    llm.add(bad, bad, bad, bad)
    result, events = run(config)
    llm.assert_all_used()
    assert result.status == "error"
    assert len(llm.requests) == 4
    for request in llm.requests[1:]:
        assert "could not be read" in last_user(request) or "invalid" in last_user(request)
        assert len(last_user(request)) < 400  # a short format hint, not a lecture
    assert any(e["type"] == "error" for e in events)


def test_format_errors_are_forgiven_after_a_good_call(config, llm, workspace):
    bad = text("<tool_call>{not json}</tool_call>")
    llm.add(
        bad,
        bad,
        bad,
        tool_call("write", {"path": "ok.txt", "content": "1"}),
        bad,
        text("TASK_COMPLETE"),
    )
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert (workspace / "ok.txt").exists()


def test_empty_replies_do_not_loop_forever(config, llm):
    # an empty stream is asked again without streaming, then the turn again without tools:
    # four requests per empty step
    llm.add(*[text("") for _ in range(16)])
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "error"
    assert ["tools" in r for r in llm.requests[:4]] == [True, True, False, False]
    assert "Your reply was empty" in last_user(llm.requests[4])


def test_a_server_that_only_answers_without_tools_still_finishes(config, llm):
    """llama-cpp-python's function calling returns an empty text reply while tools are offered."""
    llm.add(text(""), text(""), text("All done.\nTASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert "tools" not in llm.requests[-1]


# --------------------------------------------------------------------------- loop detection


def _warnings(llm) -> list[str]:
    found = []
    for request in llm.requests:
        for message in tool_messages(request):
            warning = json.loads(message["content"]).get("warning")
            if warning and warning not in found:
                found.append(warning)
    return found


def test_reading_eight_different_files_is_not_a_loop(config, llm, workspace):
    for n in range(8):
        (workspace / f"f{n}.txt").write_text(str(n))
        llm.add(tool_call("read", {"path": f"f{n}.txt"}))
    llm.add(text("Read them all.\nTASK_COMPLETE"))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert _warnings(llm) == []


def test_same_call_warns_at_three_and_stops_at_five(config, llm, workspace):
    (workspace / "a.txt").write_text("same")
    llm.add(*[tool_call("read", {"path": "a.txt"}) for _ in range(5)], text("unused"))
    result, _ = run(config)
    assert result.status == "blocked"
    assert "loop" in result.message
    assert len(llm.requests) == 5  # the sixth turn is never asked for
    assert "warning" not in last_result(llm.requests[2])
    assert "3 times" in last_result(llm.requests[3])["warning"]
    assert "4 times" in last_result(llm.requests[4])["warning"]


def test_arguments_are_normalised_before_comparing(config, llm, workspace):
    (workspace / "a.txt").write_text("same")
    variants = ['{"path": "a.txt"}', '{ "path" :  "a.txt" }', '{"path":"a.txt"}']
    for raw in variants + variants[:2]:
        llm.add(tool_call("read", raw))
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "blocked"


def test_a_changing_write_between_identical_reads_resets_the_count(config, llm, workspace):
    (workspace / "a.txt").write_text("v1")
    reads = [tool_call("read", {"path": "a.txt"}) for _ in range(4)]
    llm.add(
        *reads,
        tool_call("write", {"path": "a.txt", "content": "v2"}),
        *reads,
        text("Stable now.\nTASK_COMPLETE"),
    )
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "completed"
    assert (workspace / "a.txt").read_text() == "v2"


def test_the_same_write_repeated_is_a_loop(config, llm):
    write = tool_call("write", {"path": "a.txt", "content": "same"})
    llm.add(*[write for _ in range(5)])
    result, _ = run(config)
    llm.assert_all_used()
    assert result.status == "blocked"
