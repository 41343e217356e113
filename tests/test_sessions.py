"""Durable sessions: crash safety, resume after every ending, metadata, listing at scale."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from lmagent.core.stop import StopToken
from lmagent.loop.history import CALL_CUT_OFF
from lmagent.loop.run import AgentRun, run_agent
from lmagent.sessions.store import SessionBusy, SessionNotFound, SessionStore, new_session_id
from lmagent.sessions.waiting import WaitingIndex
from lmagent.tools.registry import make_tool
from lmagent.tools.toolset import build_toolset
from tests.cli_process import Running, cli, cli_env, only_session
from tests.conftest import make_config
from tests.scripted_llm import call, error, text, tool_call, tool_calls
from tests.test_compaction import assert_paired

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def test_kill_9_mid_run_leaves_a_session_resume_completes(workspace, llm):
    llm.add(
        tool_call("write", {"path": "part1.txt", "content": "one"}),
        text("still thinking", delay=60),
    )
    proc = Running(workspace, llm, "write two parts")
    try:
        llm.wait_for_requests(2, timeout=15)
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.proc.wait(timeout=10)
    finally:
        proc.kill()
    meta = only_session(workspace)
    assert meta["status"] == "running"  # nobody had the chance to record an ending

    llm.add(tool_call("write", {"path": "part2.txt", "content": "two"}), text("TASK_COMPLETE"))
    done = cli(workspace, llm, "--resume", meta["id"])
    assert done.returncode == 0, done.stderr
    assert (workspace / "part1.txt").exists() and (workspace / "part2.txt").exists()
    resumed = llm.requests[2]["messages"]
    assert resumed[1]["content"] == "write two parts"
    assert any(m["role"] == "tool" and "part1.txt" in m["content"] for m in resumed)
    assert "stopped unexpectedly" in resumed[-1]["content"]
    assert only_session(workspace)["status"] == "completed"


def test_every_message_is_on_disk_before_the_next_request(workspace, llm, config):
    store = SessionStore(workspace)

    def on_disk(body):
        (meta,) = store.list()
        lines = store.directory.joinpath(f"{meta['id']}.jsonl").read_text().splitlines()
        assert len(lines) == len(body["messages"]) - 1  # everything but the system prompt

    llm.add(
        tool_call("todo_add", {"description": "a"}, expect=on_disk),
        tool_call("todo_list", expect=on_disk),
        text("TASK_COMPLETE", expect=on_disk),
    )
    run_agent(config, "work")
    llm.assert_all_used()


def _interrupt(config, llm, task):
    stop = StopToken()
    llm.add(text("slow", delay=30))
    threading.Thread(
        target=lambda: (llm.wait_for_requests(1, timeout=10), stop.stop("interrupted")),
        daemon=True,
    ).start()
    return run_agent(config, task, stop=stop)


ENDINGS = {
    "completed": lambda config, llm: run_agent(config, "t", **_add(llm, text("TASK_COMPLETE"))),
    "error": lambda config, llm: run_agent(config, "t", **_add(llm, error(400))),
    "max_iterations": lambda config, llm: run_agent(
        config, "t", max_iterations=1, **_add(llm, tool_call("todo_list"))
    ),
    "waiting": lambda config, llm: run_agent(
        config, "t", **_add(llm, text("WAIT: 2099-01-01T00:00:00Z: later"))
    ),
    "interrupted": lambda config, llm: _interrupt(config, llm, "t"),
    "blocked": lambda config, llm: run_agent(config, "t", **_add(llm, text("BLOCKED: no key"))),
}


def _add(llm, *turns) -> dict:
    llm.add(*turns)
    return {}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_resume_works_after_every_ending(workspace, llm, config, ending):
    first = ENDINGS[ending](config, llm)
    assert first.status == ending
    asked_before = len(llm.requests)
    llm.add(text("Carried on.\nTASK_COMPLETE"))
    second = run_agent(config, session_id=first.session_id)
    llm.assert_all_used()
    assert second.status == "completed"
    assert second.session_id == first.session_id
    last = llm.requests[asked_before]["messages"][-1]
    assert last["role"] == "user"
    if ending == "waiting":
        assert "You asked to wait until 2099-01-01T00:00:00+00:00" in last["content"]
    else:
        assert f"after it ended as '{ending}'" in last["content"]
    assert_paired(llm.requests[asked_before])
    meta = SessionStore(config.workspace).open(first.session_id).meta
    assert (meta["status"], meta["wait_until"], meta["error"]) == ("completed", None, None)


def test_max_iterations_is_per_run_not_per_session(workspace, llm):
    config = make_config(workspace, llm, max_iterations=2)
    llm.add(tool_call("todo_list"), tool_call("todo_list"))
    first = run_agent(config, "long job")
    assert (first.status, first.iterations) == ("max_iterations", 2)
    llm.add(tool_call("todo_add", {"description": "x"}), text("TASK_COMPLETE"))
    second = run_agent(config, session_id=first.session_id)
    llm.assert_all_used()
    assert (second.status, second.iterations) == ("completed", 2)
    meta = SessionStore(workspace).open(first.session_id).meta
    assert meta["iterations"] == 4
    assert meta["tokens"] == first.tokens + second.tokens  # results count their own run


def test_metadata_is_correct_after_each_save(workspace, llm, config):
    store = SessionStore(workspace)
    parent = store.create("the parent task")

    def saved(iterations, tokens):
        def check(body):
            # the per-step counters are written in the background: within moments, not at once
            deadline = time.monotonic() + 5
            while True:
                (meta,) = [m for m in store.list() if m["id"] != parent.id]
                if meta["iterations"] == iterations or time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            assert meta["status"] == "running"
            assert meta["iterations"] == iterations
            assert meta["tokens"] == tokens
            assert meta["messages"] == len(body["messages"]) - 1
            assert meta["created"] <= meta["updated"]

        return check

    llm.add(
        tool_call("todo_add", {"description": "a"}, usage=USAGE, expect=saved(0, 0)),
        tool_call("todo_list", usage=USAGE, expect=saved(1, 110)),
        text("Done.\nTASK_COMPLETE", usage=USAGE, expect=saved(2, 220)),
    )
    result = run_agent(config, "  the task  ", parent_id=parent.id, source="web")
    llm.assert_all_used()
    meta = store.open(result.session_id).meta
    assert meta["task"] == "the task"
    assert meta["parent_id"] == parent.id
    assert meta["source"] == "web"
    assert meta["status"] == "completed"
    assert (meta["iterations"], meta["tokens"], result.tokens) == (3, 330, 330)
    assert meta["messages"] == 6
    assert meta["created"] < meta["updated"]
    assert meta["last_message"] == "Done."


def test_listing_1000_sessions_reads_no_transcript(workspace):
    store = SessionStore(workspace)
    template = store.create("template").meta
    statuses = ["completed", "error", "waiting", "blocked", "interrupted"]
    expected = {}
    for n in range(1000):  # the on-disk format, written without fsync to keep the test fast
        session_id = f"20240101-{n:06d}-cafe{n:04d}"
        meta = {**template, "id": session_id, "task": f"task {n}", "status": statuses[n % 5]}
        meta["created"] = f"2024-01-01T00:00:{n % 60:02d}.{n:03d}+00:00"
        store.directory.joinpath(f"{session_id}.meta.json").write_text(json.dumps(meta))
        transcript = store.directory.joinpath(f"{session_id}.jsonl")
        if n % 2:  # half the transcripts are garbage, the other half are gone
            transcript.write_bytes(b"\x00garbage{{{")
        expected[session_id] = statuses[n % 5]
    expected[template["id"]] = "running"
    listed = store.list()
    assert {m["id"]: m["status"] for m in listed} == expected
    assert [m["created"] for m in listed] == sorted((m["created"] for m in listed), reverse=True)


def test_new_sessions_never_share_an_id(workspace):
    store = SessionStore(workspace)
    ids = {store.create(f"task {n}").id for n in range(50)}
    assert len(ids) == 50
    assert len({new_session_id() for _ in range(20_000)}) == 20_000


def test_a_torn_last_line_is_ignored_and_later_records_survive(workspace, llm, config):
    llm.add(tool_call("todo_add", {"description": "a"}), text("TASK_COMPLETE"))
    first = run_agent(config, "work")
    path = SessionStore(workspace).directory / f"{first.session_id}.jsonl"
    whole = path.read_bytes().count(b"\n")
    with path.open("ab") as handle:
        handle.write(b'{"message": {"role": "assistant", "content": "half wri')  # crash here
    llm.add(text("Resumed fine.\nTASK_COMPLETE"))
    second = run_agent(config, session_id=first.session_id)
    assert second.status == "completed"
    assert all("half wri" not in json.dumps(m) for m in llm.requests[-1]["messages"])
    session = SessionStore(workspace).open(first.session_id)
    assert len(session.transcript) == whole + 2  # the resume message and the reply
    assert session.transcript[-1]["content"] == "Resumed fine.\nTASK_COMPLETE"


def test_a_call_left_without_result_by_a_crash_is_repaired_on_resume(workspace, llm, config):
    store = SessionStore(workspace)
    session = store.create("two reads")
    session.append({"role": "user", "content": "two reads"})
    session.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        }
    )
    session.append({"role": "tool", "tool_call_id": "c1", "content": '{"success": true}'})
    session.close()  # the process died before c2's result was written

    llm.add(text("TASK_COMPLETE"))
    run_agent(config, session_id=session.id)
    llm.assert_all_used()
    messages = llm.requests[0]["messages"]
    assert_paired(llm.requests[0])
    repaired = json.loads(next(m for m in messages if m.get("tool_call_id") == "c2")["content"])
    assert repaired == {
        "success": False,
        "error": CALL_CUT_OFF,
        "tool": "ls",
        "arguments": {},
    }
    assert "may or may not have taken effect" in CALL_CUT_OFF


def test_a_damaged_older_transcript_is_still_sent_paired(workspace, llm, config):
    store = SessionStore(workspace)
    session = store.create("old")
    calls = [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    for message in (
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "", "tool_calls": calls},  # its result never written
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "stray", "content": "{}"},  # answers nothing
        {"role": "user", "content": "and now?"},
    ):
        session.append(message)
    session.close()
    llm.add(text("TASK_COMPLETE"))
    run_agent(config, session_id=session.id)
    llm.assert_all_used()
    assert_paired(llm.requests[0])
    assert all(m.get("tool_call_id") != "stray" for m in llm.requests[0]["messages"])


def test_calls_cut_off_by_a_stop_are_answered_before_resume(workspace, llm):
    config = make_config(workspace, llm, permission_mode="normal")
    stop = StopToken()

    def ask(tool, arguments):
        stop.stop("interrupted")  # the user presses Ctrl+C at the first prompt
        return "deny"

    llm.add(
        tool_calls(
            call("write", {"path": "a.txt", "content": "1"}),
            call("write", {"path": "b.txt", "content": "2"}),
        )
    )
    first = run_agent(config, "two files", ask=ask, stop=stop)
    assert first.status == "interrupted"
    llm.add(text("TASK_COMPLETE"))
    run_agent(config.with_changes(permission_mode="auto"), session_id=first.session_id)
    llm.assert_all_used()
    assert_paired(llm.requests[1])
    assert not (workspace / "b.txt").exists()


def test_open_by_prefix_and_unknown_ids(workspace):
    store = SessionStore(workspace)
    session = store.create("x")
    assert store.open(session.id[:-2]).id == session.id
    for bad in ("nope", "../etc", ""):
        with pytest.raises(SessionNotFound):
            store.open(bad)


def test_resume_from_the_cli_with_a_new_instruction(workspace, llm):
    llm.add(text("Done.\nTASK_COMPLETE"), text("Added tests.\nTASK_COMPLETE"))
    assert cli(workspace, llm, "write code").returncode == 0
    session_id = only_session(workspace)["id"]
    done = cli(workspace, llm, "--resume", session_id, "now add tests", env=cli_env(workspace, llm))
    assert done.returncode == 0
    assert llm.requests[1]["messages"][-1]["content"] == "now add tests"


# --------------------------------------------------------------------------- one run at a time


def held(release: threading.Event, reply: dict):
    """A scripted turn that answers only once `release` is set."""

    def turn(body: dict) -> dict:
        release.wait(20)
        return reply

    return turn


def test_two_runs_of_one_session_at_once_the_second_is_refused(workspace, llm, config):
    llm.add(text("Started.\nTASK_COMPLETE"))
    first = run_agent(config, "start")
    release = threading.Event()
    llm.add(held(release, text("Still mine.\nTASK_COMPLETE")))
    results = []
    holder = threading.Thread(
        target=lambda: results.append(run_agent(config, "go on", session_id=first.session_id))
    )
    holder.start()
    llm.wait_for_requests(2)

    with pytest.raises(SessionBusy, match=f"session {first.session_id} is in use"):
        run_agent(config, "me too", session_id=first.session_id[:17])  # a prefix names it too
    refused = cli(workspace, llm, "--resume", first.session_id, "me too")
    release.set()
    holder.join(10)

    assert refused.returncode == 1
    assert refused.stderr.startswith("error: session") and refused.stderr.count("\n") == 1
    assert results[0].status == "completed"
    session = SessionStore(workspace).open(first.session_id)
    assert [m["content"] for m in session.transcript if m["role"] == "user"] == ["start", "go on"]
    assert session.meta["messages"] == len(session.transcript) == 4
    llm.add(text("Now it is free.\nTASK_COMPLETE"))
    assert run_agent(config, "me too", session_id=first.session_id).status == "completed"
    llm.assert_all_used()


def test_a_session_opened_before_another_run_added_to_it_is_reread(workspace, llm, config):
    llm.add(text("One.\nTASK_COMPLETE"), text("Two.\nTASK_COMPLETE"), text("Three.\nTASK_COMPLETE"))
    first = run_agent(config, "one")
    opened_early = SessionStore(workspace).open(first.session_id)  # as the web UI does
    run_agent(config, "two", session_id=first.session_id)
    run_agent(config, "three", session=opened_early, session_id=first.session_id)

    sent = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "user"]
    assert sent == ["one", "two", "three"]
    assert SessionStore(workspace).open(first.session_id).meta["messages"] == 6


# --------------------------------------------------------------------------- the waiting index


def test_a_run_keeps_the_waiting_index_in_step_with_its_session(workspace, llm, config):
    llm.add(text("WAIT: 2099-01-01T00:00:00Z: next year"), text("Done early.\nTASK_COMPLETE"))
    parked = run_agent(config, "park it", source="repl")
    assert WaitingIndex(workspace).load() == {
        parked.session_id: {
            "wait_until": "2099-01-01T00:00:00+00:00",
            "reason": "next year",
            "mode": "auto",
        }
    }
    run_agent(config, "do it now", session_id=parked.session_id)  # resumed before its time
    assert WaitingIndex(workspace).load() == {}


# --------------------------------------------------------------------------- tool names


def test_a_tool_name_that_is_not_a_string_is_an_unknown_tool(workspace, config):
    run = AgentRun(config, SessionStore(workspace).create("t"))
    for name in (5, None, ["read"], {"name": "read"}):
        result = run.calls.run({"id": "c1", "name": name, "arguments": {}})
        assert result["success"] is False
        assert result["error"].startswith("unknown tool"), name


def test_a_failed_background_write_is_reported_not_swallowed_and_nothing_is_lost(workspace):
    store = SessionStore(workspace)
    session = store.create("task")
    session.append({"role": "user", "content": "first"})
    session.meta_path.unlink()
    session.meta_path.mkdir()  # the metadata file can no longer be replaced
    session.save_meta(durable=False)  # per-step counters: written in the background
    with pytest.raises(OSError):
        session.close()  # writes what is pending: the error comes out here at the latest
    session.meta_path.rmdir()
    session.append({"role": "user", "content": "second"})  # the problem is gone: go on
    session.save_meta(status="interrupted")
    session.close()
    reopened = store.open(session.id)
    assert [m["content"] for m in reopened.transcript] == ["first", "second"]
    assert reopened.meta["status"] == "interrupted"


def test_closing_a_session_leaves_no_writer_thread_behind(workspace):
    session = SessionStore(workspace).create("task")
    for index in range(20):
        session.append({"role": "user", "content": f"message {index}"})
        session.save_meta(durable=False)
    session.close()
    deadline = time.monotonic() + 5
    while any(t.name == f"lmagent-sync-{session.id}" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the session's writer thread is still running"
        time.sleep(0.01)
    assert json.loads(session.meta_path.read_text())["messages"] == 20


def test_every_call_is_in_the_transcript_before_its_tool_runs(workspace, llm, config):
    """A kill during a tool loses nothing the model said: the call is written first, whether
    the tool changes things (then it is also synced first) or only reads."""
    store = SessionStore(workspace)
    seen: dict[str, bool] = {}

    def written(ctx, call_id: str) -> bool:
        path = store.directory / f"{ctx.session.id}.jsonl"
        return call_id in path.read_text(encoding="utf-8")

    def tool_change(ctx, label: str) -> dict:
        """Change something."""
        seen["change"] = written(ctx, "call_change")
        return {}

    def tool_look(ctx, label: str) -> dict:
        """Only look."""
        seen["look"] = written(ctx, "call_look")
        return {}

    tools = [make_tool(tool_change, changes_things=True), make_tool(tool_look)]
    llm.add(
        tool_call("change", {"label": "a"}, id="call_change"),
        tool_call("look", {"label": "b"}, id="call_look"),
        text("TASK_COMPLETE"),
    )
    result = run_agent(config, "work", toolset=build_toolset().plus(tools))
    llm.assert_all_used()
    assert seen == {"change": True, "look": True}
    roles = [m["role"] for m in store.open(result.session_id).transcript]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_thinking_is_kept_in_the_transcript_but_never_sent_back(workspace, llm, config):
    llm.add(
        tool_call("todo_list", reasoning="First look at the todos."),
        text("<think>All clear.</think>Nothing to do.\nTASK_COMPLETE", reasoning="Check."),
    )
    result = run_agent(config, "work")
    llm.assert_all_used()
    replies = [
        m
        for m in SessionStore(workspace).open(result.session_id).transcript
        if m["role"] == "assistant"
    ]
    assert [m.get("reasoning") for m in replies] == [
        "First look at the todos.",
        "Check.\n\nAll clear.",
    ]
    assert replies[1]["content"] == "Nothing to do.\nTASK_COMPLETE"
    sent = json.dumps(llm.requests[1]["messages"])
    assert "First look" not in sent and "reasoning" not in sent


def test_metadata_that_is_not_json_is_reported_and_the_writer_keeps_working(workspace):
    session = SessionStore(workspace).create("task")
    session.meta["odd"] = object()
    session.save_meta(durable=False)
    with pytest.raises(TypeError):
        session.close()
    del session.meta["odd"]
    session.append({"role": "user", "content": "next"})
    session.save_meta(durable=False)
    session.close()
    reopened = SessionStore(workspace).open(session.id)
    assert [m["content"] for m in reopened.transcript] == ["next"]
    assert reopened.meta["messages"] == 1
