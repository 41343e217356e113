"""Sessions that survive faults: damaged files, a full disk, and calls cut off by kill -9.

Damaged sessions are made by writing the files as a crash, a full disk or a careless hand
leaves them; the CLI is run as a user runs it (a subprocess against the scripted server).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lmagent.loop.history import CALL_CUT_OFF
from lmagent.loop.run import run_agent
from lmagent.scheduler.inbox import Malformed, job_from_dict
from lmagent.sessions.store import Session, SessionNotFound, SessionStore
from tests.cli_process import Running, cli, cli_env
from tests.conftest import make_config, need
from tests.scripted_llm import call, text, tool_call, tool_calls
from tests.test_compaction import assert_paired

DONE = text("Done.\nTASK_COMPLETE")
LS = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def saved_session(workspace: Path) -> Session:
    """A session as a finished run leaves it: task, a call and its result, a reply, a todo."""
    session = SessionStore(workspace).create("count the files")
    for message in (
        {"role": "user", "content": "count the files"},
        {"role": "assistant", "content": "", "tool_calls": [LS]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"success": true, "entries": []}'},
        {"role": "assistant", "content": "None yet."},
    ):
        session.append(message)
    session.state.todos.append({"id": 1, "description": "count", "status": "pending"})
    session.save_state()
    session.save_meta(status="completed")
    session.close()
    return session


def edit_meta(session: Session, **changes) -> None:
    meta = json.loads(session.meta_path.read_text())
    meta.update(changes)
    session.meta_path.write_text(json.dumps(meta))


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


# --------------------------------------------------------------------------- damaged records


BAD_RECORDS = [
    ({"message": "hello"}, "a message that is a string, not an object"),
    ({"message": {"content": "who said this?"}}, "a message with no known role (None)"),
    (
        {"message": {"role": "assistant", "content": "", "tool_calls": "ls"}},
        "an assistant message whose tool_calls is not a list",
    ),
    (
        {"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}},
        "a tool call without an id, a name or its arguments",
    ),
    ({"compact": 3}, "a compaction that is a number, not an object"),
    (
        {"compact": {"start": 0, "end": 99, "summary": {"role": "user", "content": "x"}}},
        "a compaction of messages 0-99 of 4",
    ),
    ({"compact": {"start": "a", "end": None}}, "a compaction without whole-number start and end"),
    ([1, 2], "a list, not an object"),
    ({"note": "x"}, "neither a message nor a compaction"),
]


def test_damaged_transcript_records_are_skipped_and_named_and_the_rest_resumes(workspace, llm):
    session = saved_session(workspace)
    with session.transcript_path.open("a") as handle:
        handle.write("{not json\n")
        for record, _ in BAD_RECORDS:
            handle.write(json.dumps(record) + "\n")
    llm.add(DONE)
    done = cli(workspace, llm, "--resume", session.id, "go on")

    no_traceback(done)
    assert done.returncode == 0
    (warning,) = [line for line in done.stdout.splitlines() if "warning: session" in line]
    expected = ["line 5: not valid JSON"]
    expected += [f"line {n}: {problem}" for n, (_, problem) in enumerate(BAD_RECORDS[:4], 6)]
    assert warning == (
        f"· warning: session {session.id}: {session.id}.jsonl: skipped damaged records "
        f"({'; '.join(expected)}; and 5 more)"
    )
    sent = llm.requests[0]["messages"][1:]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["count the files", "go on"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]


@pytest.mark.parametrize(("record", "problem"), BAD_RECORDS)
def test_each_damaged_record_is_named_with_what_is_wrong(workspace, record, problem):
    session = saved_session(workspace)
    with session.transcript_path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    opened = SessionStore(workspace).open(session.id)
    assert opened.problems == [f"{session.id}.jsonl: skipped damaged records (line 5: {problem})"]
    assert opened.transcript == opened.history == SessionStore(workspace).open(session.id).history
    assert [m["role"] for m in opened.history] == ["user", "assistant", "tool", "assistant"]


def test_a_torn_last_line_is_no_damage_but_a_torn_line_before_others_is(workspace):
    session = saved_session(workspace)
    with session.transcript_path.open("a") as handle:
        handle.write('{"message": {"role": "assistant", "content": "half')  # a crash mid-write
    assert SessionStore(workspace).open(session.id).problems == []
    reopened = SessionStore(workspace).open(session.id)
    reopened.append({"role": "user", "content": "next"})  # ends the torn line first
    reopened.close()
    again = SessionStore(workspace).open(session.id)
    assert again.problems == [
        f"{session.id}.jsonl: skipped damaged records (line 5: not valid JSON)"
    ]
    assert again.transcript[-1] == {"role": "user", "content": "next"}


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ("[1]", "it holds a list, not an object; starting without it"),
        (
            '{"todos": "x", "plan": [1], "task_state": []}',
            "'task_state' is not an object; dropped; 'todos' is not a list; dropped; "
            "1 of its 'plan' entries are damaged; dropped",
        ),
        ("", "it is empty; starting without it"),
    ],
)
def test_a_damaged_state_file_is_reported_and_the_session_resumes(workspace, llm, state, problem):
    session = saved_session(workspace)
    session.state_path.write_text(state)
    llm.add(DONE)
    done = cli(workspace, llm, "--resume", session.id)

    no_traceback(done)
    assert done.returncode == 0
    assert f"warning: session {session.id}: {session.id}.state.json: {problem}" in done.stdout
    assert "Todos:" not in llm.requests[0]["messages"][0]["content"]


def test_null_counters_are_counted_from_zero_again_and_said_so(workspace, llm):
    session = saved_session(workspace)
    edit_meta(session, iterations=None, tokens="many", messages=-1)
    assert "   0 it  count the files" in cli(workspace, llm, "--list-sessions").stdout
    llm.add(text("Done.\nTASK_COMPLETE", usage={"total_tokens": 7, "prompt_tokens": 5}))
    done = cli(workspace, llm, "--resume", session.id)

    no_traceback(done)
    assert done.returncode == 0
    assert f"'iterations' in {session.id}.meta.json was None; counting from 0" in done.stdout
    assert "'tokens' in" in done.stdout and "'messages' in" in done.stdout
    meta = json.loads(session.meta_path.read_text())
    assert (meta["iterations"], meta["tokens"], meta["messages"]) == (1, 7, 6)


# --------------------------------------------------------------------------- damaged metadata


METADATA = {
    "no id": (lambda s: edit_meta(s, id=None), "the id in {id}.meta.json (None) does not match"),
    "an id leading out": (
        lambda s: edit_meta(s, id="../../.."),
        "the id in {id}.meta.json ('../../..') does not match its name",
    ),
    "a list": (lambda s: s.meta_path.write_text("[1, 2]"), "{id}.meta.json holds a list"),
    "empty": (lambda s: s.meta_path.write_text(""), "{id}.meta.json: it is empty"),
    "not JSON": (lambda s: s.meta_path.write_text('{"id": '), "{id}.meta.json: it is not valid"),
    "a task that is no text": (
        lambda s: edit_meta(s, task=["x"]),
        "{id}.meta.json has a damaged 'task'",
    ),
    "no status": (lambda s: edit_meta(s, status=None), "{id}.meta.json has a damaged 'status'"),
}


@pytest.mark.parametrize("damage", sorted(METADATA))
def test_unusable_metadata_is_one_clear_error_naming_the_session(workspace, llm, damage):
    session = saved_session(workspace)
    spoil, problem = METADATA[damage]
    spoil(session)
    around = _visible(workspace.parent) + _visible(workspace)
    done = cli(workspace, llm, "--resume", session.id)

    no_traceback(done)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: session {session.id} cannot be used: ")
    assert problem.format(id=session.id) in done.stderr
    assert done.stderr.endswith("restore its files from a backup or delete them\n")
    assert done.stderr.count("\n") == 1
    assert llm.requests == []
    assert _visible(workspace.parent) + _visible(workspace) == around  # nothing written outside


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != ".lmagent")


def test_list_sessions_lists_the_good_ones_and_marks_the_damaged(workspace, llm):
    good = saved_session(workspace)
    damaged = {}
    for spoil, problem in METADATA.values():
        session = saved_session(workspace)
        spoil(session)
        damaged[session.id] = problem.format(id=session.id)
    (SessionStore(workspace).directory / "notes.txt").write_text("not a session")

    done = cli(workspace, llm, "--list-sessions")
    no_traceback(done)
    assert done.returncode == 0
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert set(lines) == {good.id, *damaged}
    assert lines[good.id].split()[1] == "completed"
    for session_id, problem in damaged.items():
        assert lines[session_id].startswith(f"{session_id}  damaged  ")
        assert problem in lines[session_id]

    as_json = [
        json.loads(line)
        for line in cli(workspace, llm, "--list-sessions", "--json").stdout.splitlines()
    ]
    assert {m["id"]: m["status"] for m in as_json} == {
        good.id: "completed",
        **dict.fromkeys(damaged, "damaged"),
    }


# --------------------------------------------------------------------------- ids in paths


@pytest.mark.parametrize("bad", ["../../..", "../x", "a/b", "a\\b", ".hidden", "", "x" * 101, "é"])
def test_no_path_is_built_from_a_text_that_is_not_a_session_id(workspace, bad):
    store = SessionStore(workspace)
    saved_session(workspace)
    before = sorted(str(p) for p in workspace.parent.rglob("*"))
    for attempt in (
        lambda: store.open(bad),
        lambda: store.resolve(bad),
        lambda: store.create("t", session_id=bad),
        lambda: store.mark_ended(bad, "interrupted", "x"),
        lambda: store.lock(bad).__enter__(),
        lambda: Session(store.directory, bad, {}),
    ):
        with pytest.raises(SessionNotFound, match="invalid session id"):
            attempt()
    assert store.is_busy(bad) is False
    with pytest.raises(Malformed, match="is not a session id"):
        job_from_dict("x.json", {"session_id": bad, "task": "continue"})
    assert sorted(str(p) for p in workspace.parent.rglob("*")) == before


def test_a_session_made_under_a_reserved_id_keeps_it_and_a_taken_id_is_refused(workspace):
    store = SessionStore(workspace)
    session = store.create("t", session_id="20300101-000000-reserved")
    assert store.open("20300101-000000-reserved").meta["task"] == "t"
    with pytest.raises(FileExistsError):
        store.create("u", session_id=session.id)
    assert [p.name for p in store.directory.iterdir()] == [session.meta_path.name]


# --------------------------------------------------------------------------- disk full


def _mount_tmpfs(path: Path, size: str) -> None:
    need(os.geteuid() == 0, "mounting a small tmpfs as the workspace needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    need(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")


def test_a_command_filling_the_disk_ends_the_run_saved_and_resumable(workspace, llm):
    _mount_tmpfs(workspace, "2m")
    try:
        config = make_config(workspace, llm, sandbox_backend="process")
        fill = "dd if=/dev/zero of=fill bs=64k 2>&1; seq 1 30000"  # then a long output to save
        llm.add(tool_call("shell", {"command": fill, "timeout": 60}))
        result = run_agent(config, "make a big file")

        assert result.status == "error"
        assert result.message.startswith("the disk is full (ENOSPC: No space left on device")
        assert result.message.endswith(
            f"Free some space on the workspace's disk, then continue it with --resume "
            f"{result.session_id}"
        )
        meta = json.loads(
            SessionStore(workspace).directory.joinpath(f"{result.session_id}.meta.json").read_text()
        )
        assert (meta["status"], meta["error"]) == ("error", result.message)

        (workspace / "fill").unlink()
        llm.add(DONE)
        done = cli(workspace, llm, "--resume", result.session_id)
        assert done.returncode == 0, done.stderr
        sent = llm.requests[1]["messages"]
        assert_paired(llm.requests[1])
        (cut,) = [json.loads(m["content"]) for m in sent if m["role"] == "tool"]
        assert (cut["error"], cut["tool"], cut["arguments"]["command"]) == (
            CALL_CUT_OFF,
            "shell",
            fill,
        )
        assert SessionStore(workspace).open(result.session_id).meta["status"] == "completed"
    finally:
        subprocess.run(["umount", "-l", str(workspace)], check=False)


def test_a_failed_counter_write_does_not_stop_the_status_write_that_supersedes_it(workspace):
    session = SessionStore(workspace).create("task")
    session.meta["odd"] = object()
    session.save_meta(durable=False)  # this snapshot cannot be written
    del session.meta["odd"]
    deadline = time.monotonic() + 5
    while session._disk._meta_error is None:  # the writer thread has met the failure
        assert time.monotonic() < deadline, "the background write never failed"
        time.sleep(0.005)
    session.save_meta(status="completed")  # newer: written whatever became of the snapshot
    session.close()
    assert json.loads(session.meta_path.read_text())["status"] == "completed"


# --------------------------------------------------------------------------- kill -9 mid-call


def _wait_for_file(path: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while not path.is_file() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)
    return path.read_text().strip()


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


SLOW = "echo $$ > shell.pid; echo ran >> side.txt; sleep 60"


@pytest.mark.parametrize("form", ["native", "text"])
def test_calls_cut_off_by_kill_9_are_told_as_may_have_run_with_name_and_arguments(
    workspace, llm, form
):
    write = {"path": "a.txt", "content": "1"}
    if form == "native":
        llm.add(tool_calls(call("write", write), call("shell", {"command": SLOW})))
    else:
        written = [
            {"name": "write", "arguments": write},
            {"name": "shell", "arguments": {"command": SLOW}},
        ]
        llm.add(text("".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in written)))
    running = Running(workspace, llm, "write a, then run the slow command")
    try:
        shell_pid = int(_wait_for_file(workspace / "shell.pid"))
        _wait_for_file(workspace / "side.txt")
        os.kill(running.proc.pid, signal.SIGKILL)
        running.proc.wait(10)
    finally:
        running.kill()
    assert _gone(shell_pid), "the command outlived the agent that ran it"
    session_id = SessionStore(workspace).list()[0]["id"]

    llm.add(DONE)
    done = cli(workspace, llm, "--resume", session_id, env=cli_env(workspace, llm))
    assert done.returncode == 0, done.stderr
    sent = llm.requests[1]["messages"]
    assert "stopped unexpectedly" in sent[-1]["content"]
    results = [
        {"error": CALL_CUT_OFF, "success": False, "tool": "write", "arguments": write},
        {"error": CALL_CUT_OFF, "success": False, "tool": "shell", "arguments": {"command": SLOW}},
    ]
    if form == "native":
        assert_paired(llm.requests[1])
        assert [json.loads(m["content"]) for m in sent if m["role"] == "tool"] == results
    else:
        told = re.findall(r'<tool_result name="(\w+)">(.*?)</tool_result>', sent[-2]["content"])
        assert [(name, json.loads(body)) for name, body in told] == [
            (r["tool"], r) for r in results
        ]
    assert (workspace / "side.txt").read_text() == "ran\n"  # and it was not run again
