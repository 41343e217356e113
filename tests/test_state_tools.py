"""Todos, plan steps, task state and time: durable in the session's state file."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lmagent.sessions.store import SessionStore
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config, tool_context


@pytest.fixture
def session(workspace: Path):
    return SessionStore(workspace).create("long task")


@pytest.fixture
def run(workspace: Path, session):
    config = make_config(workspace)
    ctx = tool_context(config, session=session)
    tools = build_toolset()
    return lambda name, **args: tools.execute(ctx, name, args)


def reopened(workspace: Path, session):
    """The state as a new process would see it after `--resume`."""
    session.close()
    return SessionStore(workspace).open(session.id).state


def failed(result: dict, *fragments: str) -> bool:
    assert result["success"] is False, result
    for fragment in fragments:
        assert fragment in result["error"], (fragment, result["error"])
    return True


# --------------------------------------------------------------------------- todos


def test_todos_are_added_completed_updated_and_listed(run):
    first = run("todo_add", description="  write the parser ", notes="start with tests")
    assert first["todo"] == {
        "id": 1,
        "description": "write the parser",
        "status": "pending",
        "notes": "start with tests",
    }
    assert run("todo_add", description="document it")["todo"]["id"] == 2
    assert run("todo_complete", todo_id=1)["open"] == 1
    updated = run("todo_update", todo_id="2", status="in_progress", notes="README first")
    assert updated["todo"]["status"] == "in_progress" and updated["todo"]["notes"] == "README first"
    listing = run("todo_list")
    assert [(t["id"], t["status"]) for t in listing["todos"]] == [
        (1, "completed"),
        (2, "in_progress"),
    ]
    assert listing["open"] == 1


def test_todos_survive_reopening_the_session(run, workspace, session):
    run("todo_add", description="a")
    run("todo_add", description="b")
    run("todo_update", todo_id=2, status="cancelled")
    state = reopened(workspace, session)
    assert [(t["description"], t["status"]) for t in state.todos] == [
        ("a", "pending"),
        ("b", "cancelled"),
    ]
    assert state.open_todos() == [state.todos[0]]


def test_todo_mistakes_are_explained(run):
    assert failed(run("todo_add", description="   "), "bad arguments", "empty")
    assert failed(run("todo_complete", todo_id=7), "no todo #7", "none yet")
    run("todo_add", description="a")
    assert failed(run("todo_complete", todo_id=7), "existing ids: 1")
    assert failed(run("todo_update", todo_id=1, status="finished"), "bad arguments", "pending")
    assert failed(run("todo_complete", todo_id="one"), "bad arguments", "integer")
    assert run("todo_list")["todos"][0]["status"] == "pending"


# --------------------------------------------------------------------------- plan


def test_plan_steps_are_completed_and_persist(run, workspace, session):
    session.state.plan = [
        {"id": 1, "description": "read the code", "status": "pending"},
        {"id": 2, "description": "fix the bug", "status": "pending"},
    ]
    session.save_state()
    result = run("plan_complete_step", step_id="1", verification_notes="read all 3 modules")
    assert result["step"]["status"] == "completed"
    assert result["remaining_steps"] == [2]
    assert failed(run("plan_complete_step", step_id=9), "no plan step 9", "[1, 2]")
    step = reopened(workspace, session).plan[0]
    assert (step["status"], step["verification_notes"]) == ("completed", "read all 3 modules")


def test_completing_a_step_without_a_plan_is_refused(run):
    assert failed(run("plan_complete_step", step_id=1), "no plan")


# --------------------------------------------------------------------------- task state


def test_task_state_updates_merge_and_persist(run, workspace, session):
    run("task_state_update", objective="rename 3 files", total_count=3)
    result = run(
        "task_state_update",
        processed_count="1",
        remaining_queue='["b.txt", "c.txt"]',
        next_action="rename b.txt",
    )
    expected = {
        "objective": "rename 3 files",
        "total_count": 3,
        "processed_count": 1,
        "remaining_queue": ["b.txt", "c.txt"],
        "next_action": "rename b.txt",
    }
    assert result["task_state"] == expected
    assert run("task_state_get")["task_state"] == expected
    assert reopened(workspace, session).task_state == expected


def test_task_state_accepts_a_single_item_and_clearing(run):
    run("task_state_update", remaining_queue="only.txt", last_error="disk full")
    state = run("task_state_update", last_error="")["task_state"]
    assert state == {"remaining_queue": ["only.txt"], "last_error": ""}
    assert run("task_state_update", remaining_queue=[])["task_state"]["remaining_queue"] == []
    run("task_state_update", remaining_queue="x")
    assert run("task_state_update", remaining_queue="[]")["task_state"]["remaining_queue"] == []


def test_task_state_mistakes_are_bad_arguments(run):
    assert failed(run("task_state_update"), "bad arguments", "at least one field")
    assert failed(run("task_state_update", total_count=-1), "bad arguments", "negative")
    assert failed(run("task_state_update", processed_count="many"), "bad arguments")
    assert run("task_state_get")["task_state"] == {}


def test_reconcile_a_consistent_and_a_finished_state(run):
    run("task_state_update", total_count=5, processed_count=2, remaining_queue=["c", "d", "e"])
    assert run("task_reconcile") | {"task_state": None} == {
        "consistent": True,
        "problems": [],
        "finished": False,
        "task_state": None,
        "success": True,
    }
    run("task_state_update", processed_count=5, remaining_queue=[])
    result = run("task_reconcile")
    assert (result["consistent"], result["finished"]) == (True, True)


def test_reconcile_reports_contradictions(run):
    run("task_state_update", total_count=5, processed_count=4, remaining_queue=["x", "y", "x"])
    result = run("task_reconcile")
    assert result["consistent"] is False and result["finished"] is False
    assert result["problems"] == [
        "processed_count 4 + remaining 3 != total_count 5",
        "remaining_queue has duplicates: x",
    ]
    run("task_state_update", processed_count=6)
    assert run("task_reconcile")["problems"][0] == "processed_count 6 exceeds total_count 5"


def test_reconcile_survives_a_hand_edited_state(run, session):
    session.state.task_state = {"total_count": "lots", "processed_count": 2}
    result = run("task_reconcile")
    assert result["consistent"] is False
    assert result["problems"] == ["total_count is not a whole number"]


# --------------------------------------------------------------------------- time


def test_get_time_gives_local_time_with_its_offset_and_utc(run):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    result = run("get_time")
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    local = datetime.fromisoformat(result["local"])
    utc = datetime.fromisoformat(result["utc"])
    assert local.utcoffset() is not None
    assert utc.utcoffset() == timedelta(0)
    assert local == utc  # the same instant, shown in two zones
    assert before <= utc <= after
    assert abs(result["unix"] - time.time()) < 2
    assert result["weekday"] == local.strftime("%A")
    assert result["timezone"]
