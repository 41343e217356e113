"""The scheduler after kill -9: whatever moment the daemon dies, a restart leaves every task
recorded exactly once, nothing in processing/, no session saying `running`, no empty metadata.

The daemon runs for real (`agent_main.py --scheduler` in a subprocess, or `start_background`)
against the scripted LLM server; the leftovers a kill can leave are also made by hand, one at a
time, to show how each is recovered.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from lmagent.core.files import utc_now
from lmagent.scheduler.inbox import Paths, submit
from lmagent.scheduler.service import start_background
from lmagent.sessions.store import SessionStore, new_session_id
from tests.conftest import make_config, wait_for
from tests.scripted_llm import ScriptedLLM, text, tool_call
from tests.test_scheduler import DONE, files, history, runs, start_daemon

FINAL = ("done", "failed")


@pytest.fixture
def background(workspace, llm):
    handles = []

    def start(**options):
        handle = start_background(make_config(workspace, llm), **options)
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        handle.stop()


def outcomes(workspace: Path) -> dict[str, list[dict]]:
    """Final history records by task (its file name without the extension, which a requeue
    changes)."""
    found: dict[str, list[dict]] = {}
    for record in history(workspace):
        if record.get("outcome") in FINAL:
            found.setdefault(record["task_file"].rsplit(".", 1)[0], []).append(record)
    return found


def assert_nothing_left_behind(workspace: Path) -> None:
    """Once the daemon's bookkeeping of a finished task is over (its claim markers go last,
    after the history line and the move), nothing of it remains."""
    paths = Paths(workspace)
    wait_for(lambda: os.listdir(paths.processing) == [], timeout=10, what="the claim markers")
    assert files(paths.inbox) == []
    for path in paths.sessions.glob("*.meta.json"):
        meta = json.loads(path.read_text())  # never empty, never half written
        assert meta["status"] != "running", meta


def one_step_then_done(rng: random.Random):
    """A model that adds a todo, then finishes; each reply a little late, so kills land
    during runs as well as between them."""

    def reply(body: dict) -> dict:
        delay = rng.uniform(0.0, 0.15)
        if body["messages"][-1]["role"] == "tool":
            return text("done\nTASK_COMPLETE", delay=delay)
        return tool_call("todo_add", {"description": "step"}, delay=delay)

    return reply


def test_kill_9_at_random_moments_then_a_restart_leaves_every_task_done_once(workspace, daemons):
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    with ScriptedLLM([one_step_then_done(rng)] * 2000, chunk_size=1000) as llm:
        config = make_config(workspace, llm)
        submitted = {submit(config, f"task {n}").stem for n in range(40)}
        for _ in range(20):
            daemon = start_daemon(workspace, llm, "--max-concurrent", "4")
            daemons.append(daemon)
            with contextlib.suppress(subprocess.TimeoutExpired):  # a random moment of its life
                daemon.wait(timeout=rng.uniform(0.0, 0.8))
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(10)
        daemons.append(start_daemon(workspace, llm, "--max-concurrent", "4"))
        paths = Paths(workspace)
        idle = lambda: not files(paths.inbox) and not paths.claimed()  # noqa: E731
        wait_for(idle, timeout=120, what="the queue to empty")
        daemons[-1].send_signal(signal.SIGTERM)
        assert daemons[-1].wait(30) == 0

    why = f"(random seed {seed})"
    finals = outcomes(workspace)
    assert set(finals) == submitted, why
    assert all(len(records) == 1 for records in finals.values()), why
    for (record,) in finals.values():
        assert record["status"] == "completed" or "died while running" in record["error"], why
    assert_nothing_left_behind(workspace)
    sessions = SessionStore(workspace).list()
    per_task = Counter(m["task"] for m in sessions)
    assert set(per_task) <= {f"task {n}" for n in range(40)}, why
    assert max(per_task.values()) == 1, f"a task was started in two sessions {why}"
    done = {r["session_id"] for (r,) in finals.values() if r["status"] == "completed"}
    assert {m["id"] for m in sessions if m["status"] == "completed"} == done, why


# --------------------------------------------------------------------------- each leftover


def claimed_task(workspace: Path, task: str, **fields) -> tuple[Paths, str]:
    """A task file in processing/, as the daemon's claim leaves it."""
    paths = Paths(workspace)
    paths.ensure()
    name = f"{time.time_ns():020d}-1-claimed.json"
    (paths.processing / name).write_text(json.dumps({"task": task, **fields}))
    return paths, name


def recorded_done_in(workspace: Path, paths: Paths, session_id: str) -> None:
    """Once the task moves on: its one outcome is completed, done, in `session_id`."""
    wait_for(lambda: files(paths.done), what="the task to move on")
    ((record,),) = outcomes(workspace).values()
    assert (record["status"], record["outcome"], record["session_id"]) == (
        "completed",
        "done",
        session_id,
    )


def finished_record(name: str, session_id: str) -> dict:
    return {
        "time": utc_now(),
        "task_file": name,
        "task": "t",
        "session_id": session_id,
        "status": "completed",
        "outcome": "done",
        "duration_s": 0.5,
        "error": None,
        "attempt": 0,
    }


@pytest.mark.parametrize("recorded", [False, True], ids=["not yet recorded", "recorded"])
def test_an_outcome_left_beside_its_task_is_recorded_once_and_the_task_moved_on(
    workspace, llm, background, recorded
):
    paths, name = claimed_task(workspace, "finished just before the kill")
    record = finished_record(name, "20300101-000000-aaaa")
    paths.outcome(name).write_text(json.dumps(record))
    paths.marker(name).write_text(record["session_id"])
    if recorded:
        paths.history.write_text(json.dumps(record) + "\n")

    background()
    wait_for(lambda: files(paths.done), what="the task to move on")
    assert_nothing_left_behind(workspace)  # the markers go after the move
    assert history(workspace) == [record]
    assert files(paths.done) == [name]
    assert llm.requests == []  # not run again


@pytest.mark.parametrize("attempt", [0, 2], ids=["first try", "last try"])
def test_a_run_that_ended_before_its_outcome_was_recorded_is_recorded_not_run_again(
    workspace, llm, background, attempt
):
    """Killed after the run wrote its ending, before the outcome: the session's ending is the
    outcome (before, it was run again, or failed while its session said completed)."""
    paths, name = claimed_task(workspace, "finished just before the kill", attempt=attempt)
    session = SessionStore(workspace).create("finished just before the kill", source="scheduler")
    session.save_meta(status="completed")
    session.close()
    paths.marker(name).write_text(session.id)

    background()
    recorded_done_in(workspace, paths, session.id)
    assert SessionStore(workspace).list()[0]["status"] == "completed"
    assert llm.requests == []  # not run again
    assert_nothing_left_behind(workspace)


@pytest.mark.parametrize("attempt", [0, 2], ids=["first try", "last try"])
def test_a_resumed_run_that_ended_before_its_outcome_was_recorded_is_recorded_as_it_ended(
    workspace, llm, background, attempt
):
    """A requeued task resumes its session (named in the task file, with no marker beside
    it); killed after that run wrote its ending, before the outcome, the task is recorded as
    the session ended. Before, recovery looked only at the marker: on the last try it failed
    as "died while running 3 times" while its session said completed (a random kill test
    found it), on an earlier one it was run again."""
    session = SessionStore(workspace).create("resumed, then finished", source="scheduler")
    session.save_meta(status="completed")
    session.close()
    paths, _ = claimed_task(workspace, None, session_id=session.id, attempt=attempt)

    background()
    recorded_done_in(workspace, paths, session.id)
    assert llm.requests == []  # not run again
    assert_nothing_left_behind(workspace)


def test_a_recovery_cut_short_after_ending_the_session_is_finished_with_its_reason(
    workspace, llm, background
):
    """A recovery that ended a task's session "died while running 3 times" and was killed
    before recording it: the next one records that, with the reason (the random kill test
    met a record with the session's status and no error)."""
    died = "the scheduler died while running this task 3 times"
    session = SessionStore(workspace).create("killed three times", source="scheduler")
    session.save_meta(status="error", error=died)
    session.close()
    paths, _ = claimed_task(workspace, None, session_id=session.id, attempt=2)

    background()
    wait_for(lambda: files(paths.failed), what="the task to move on")
    ((record,),) = outcomes(workspace).values()
    assert (record["status"], record["outcome"], record["error"]) == ("error", "failed", died)
    assert llm.requests == []
    assert_nothing_left_behind(workspace)


def test_files_left_beside_no_task_are_removed(workspace, llm, background):
    paths = Paths(workspace)
    paths.ensure()
    leftovers = ["gone.task.session", "gone.task.outcome", ".gone.task.session.x1.tmp"]
    for name in leftovers:
        (paths.processing / name).write_text("x")
    logs: list[str] = []
    background(log=logs.append)
    wait_for(lambda: any("watching" in m for m in logs), what="the recovery")
    assert os.listdir(paths.processing) == []


def test_a_task_whose_session_was_named_but_not_made_runs_once_in_a_new_session(
    workspace, llm, background
):
    paths, name = claimed_task(workspace, "killed before its session existed")
    reserved = new_session_id()
    paths.marker(name).write_text(reserved)
    llm.add(DONE)

    background()
    wait_for(lambda: runs(workspace, "completed"), what="the run")
    (run,) = runs(workspace)
    assert run["session_id"] != reserved
    (meta,) = SessionStore(workspace).list()
    assert (meta["id"], meta["task"], meta["status"]) == (
        run["session_id"],
        "killed before its session existed",
        "completed",
    )
    assert_nothing_left_behind(workspace)
    llm.assert_all_used()


def test_a_session_made_but_never_started_runs_its_own_task(workspace, llm, background):
    paths, name = claimed_task(workspace, "killed before the first message")
    session = SessionStore(workspace).create(
        "killed before the first message", source="scheduler", session_id=new_session_id()
    )
    paths.marker(name).write_text(session.id)
    llm.add(DONE)

    background()
    wait_for(lambda: runs(workspace, "completed"), what="the run")
    (run,) = runs(workspace)
    assert run["session_id"] == session.id
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert users == [{"role": "user", "content": "killed before the first message"}]
    assert_nothing_left_behind(workspace)


def test_sessions_a_killed_daemon_left_running_are_marked_interrupted(workspace, llm, background):
    store = SessionStore(workspace)
    orphan = store.create("scheduled", source="scheduler")
    child = store.create("its sub-agent", source="sub-agent", parent_id=orphan.id)
    cli_run = store.create("a killed CLI run", source="cli")
    held = store.create("running elsewhere", source="scheduler")
    logs: list[str] = []
    with store.lock(held.id):
        background(log=logs.append)
        wait_for(lambda: any("watching" in m for m in logs), what="the recovery")
    statuses = {m["id"]: m["status"] for m in store.list()}
    assert statuses == {
        orphan.id: "interrupted",
        child.id: "interrupted",
        cli_run.id: "running",  # not the scheduler's: its resume says it stopped unexpectedly
        held.id: "running",  # a live run holds it
    }
    assert store.open(orphan.id).meta["last_message"].startswith("the scheduler running it")


def test_a_task_cut_short_too_often_fails_and_its_session_says_why(workspace, llm, background):
    session = SessionStore(workspace).create("crashes the daemon", source="scheduler")
    paths, name = claimed_task(workspace, "crashes the daemon", session_id=session.id, attempt=2)
    paths.marker(name).write_text(session.id)

    background()
    # the reason is written beside it first, then the task file moves (not a temporary file)
    wait_for(lambda: (paths.failed / name).exists(), what="the task to fail")
    (record,) = outcomes(workspace)[name.rsplit(".", 1)[0]]
    assert record["error"] == "the scheduler died while running this task 3 times"
    assert (paths.failed / f"{name}.reason").read_text() == record["error"] + "\n"
    meta = SessionStore(workspace).open(session.id).meta
    assert (meta["status"], meta["error"]) == ("error", record["error"])
    assert_nothing_left_behind(workspace)
    assert llm.requests == []


def test_empty_metadata_found_is_tolerated_and_never_made(workspace, llm, background):
    store = SessionStore(workspace)
    store.directory.mkdir(parents=True)
    (store.directory / "20200101-000000-empty.meta.json").write_text("")
    llm.add(DONE)
    submit(make_config(workspace, llm), "work beside a damaged session")

    background()
    wait_for(lambda: runs(workspace, "completed"), what="the run")
    listed = {m["id"]: m["status"] for m in store.list()}
    assert listed.pop("20200101-000000-empty") == "damaged"
    assert list(listed.values()) == ["completed"]
    sizes = [p.stat().st_size for p in store.directory.glob("*.meta.json")]
    assert sorted(sizes)[0] == 0 and all(sorted(sizes)[1:])


def test_a_line_torn_in_the_history_does_not_swallow_the_next_record(workspace, llm, background):
    paths = Paths(workspace)
    paths.ensure()
    paths.history.write_text('{"task_file": "x", "status": "compl')  # a power cut mid-line
    llm.add(DONE)
    submit(make_config(workspace, llm), "after the cut")

    background()
    wait_for(lambda: runs(workspace, "completed"), what="the run")
    assert [r["task"] for r in runs(workspace)] == ["after the cut"]


def test_a_session_id_that_is_not_one_is_refused_in_the_inbox(workspace, llm, background):
    inbox = Paths(workspace).inbox
    inbox.mkdir(parents=True)
    (inbox / "escape.json").write_text(json.dumps({"session_id": "../../etc"}))

    background()
    failed = Paths(workspace).failed
    wait_for(lambda: (failed / "escape.json.reason").is_file(), what="the rejection")
    reason = (failed / "escape.json.reason").read_text()
    assert reason == "'session_id' '../../etc' is not a session id (see --list-sessions)\n"
    assert llm.requests == []


def test_a_stop_signal_while_the_scheduler_holds_its_lock_does_not_hang_it(workspace, llm):
    """SIGTERM's handler runs on the main thread, possibly while that thread is inside the
    scheduler's lock (starting a task), and stopping takes the lock too: it must not wait for
    itself. Played on one thread: take the lock, then stop, as the handler would."""
    from lmagent.scheduler.daemon import Scheduler

    scheduler = Scheduler(make_config(workspace, llm))
    scheduler.stop.add_callback(scheduler._stop_all)

    def signal_inside_the_lock() -> None:
        with scheduler._mutex:
            scheduler.stop.stop("interrupted")

    thread = threading.Thread(target=signal_inside_the_lock, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "stopping waited for a lock its own thread holds"
    assert scheduler.wake.is_set()


# --------------------------------------------------------------------------- no model server


def test_tasks_stay_in_the_inbox_while_no_model_server_answers_and_run_when_one_does(
    workspace, llm, background
):
    from lmagent.scheduler.service import status, status_lines

    llm.add(DONE)
    llm.stop()  # down; its URL known
    config = make_config(workspace, llm)
    said: list[str] = []
    background(log=said.append)
    task = submit(config, "needs the model")
    wait_for(lambda: any("no model server answers at" in line for line in said), 10, "the note")
    time.sleep(1.5)  # a scheduler that claimed it would have failed it by now
    assert files(Paths(workspace).inbox) == [task.name] and runs(workspace) == []
    assert status(config)["model_unreachable"]["url"] == llm.url
    assert f"model server: none answers at {llm.url}" in "\n".join(status_lines(config))
    assert sum("no model server answers" in line for line in said) == 1  # said once
    llm.start()
    wait_for(lambda: runs(workspace), 40, "the task to run")
    assert [r["status"] for r in runs(workspace)] == ["completed"]
    assert any("answers again; taking tasks" in line for line in said)
    assert status(config)["model_unreachable"] is None


def test_a_task_whose_model_server_goes_away_mid_run_goes_back_to_the_inbox(
    workspace, llm, background
):
    llm.add(text("working on it", delay=30), DONE)
    said: list[str] = []
    background(log=said.append)
    task = submit(make_config(workspace, llm), "long")
    llm.wait_for_requests(1, timeout=20)
    llm.stop()  # mid-reply
    wait_for(lambda: any(f"put {task.name} back" in line for line in said), 30, "put back")
    llm.start()
    wait_for(lambda: runs(workspace, "completed"), 40, "the task to finish")
    assert [r["outcome"] for r in runs(workspace)] == ["requeued", "done"]  # never failed
    sessions = list(Paths(workspace).sessions.glob("*.meta.json"))
    assert len(sessions) == 1  # the second run resumed the first one's session
    assert_nothing_left_behind(workspace)
