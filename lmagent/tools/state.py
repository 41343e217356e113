"""The state tools: todos, the plan, task state and the time; kept in the session."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from typing import Annotated as A
from typing import Literal

from lmagent.core.status import STATUS_COMPLETED
from lmagent.tools.registry import (
    ArgumentError,
    ToolContext,
    ToolError,
    make_tool,
)

TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled")


# --------------------------------------------------------------------------- todos and plan


def _save(ctx: ToolContext) -> None:
    ctx.session.save_state()


def _find_todo(ctx: ToolContext, todo_id: int) -> dict:
    for todo in ctx.session.state.todos:
        if todo["id"] == todo_id:
            return todo
    known = ", ".join(str(t["id"]) for t in ctx.session.state.todos) or "none yet"
    raise ToolError(f"no todo #{todo_id}; existing ids: {known}")


def tool_todo_add(
    ctx: ToolContext,
    description: A[str, "what needs doing"],
    notes: A[str, "optional details"] = "",
) -> dict:
    """Add an item to the task's todo list."""
    if not description.strip():
        raise ArgumentError("description must not be empty")
    todos = ctx.session.state.todos
    todo = {
        "id": max((t["id"] for t in todos), default=0) + 1,
        "description": description.strip(),
        "status": "pending",
        "notes": notes,
    }
    todos.append(todo)
    _save(ctx)
    return {"todo": todo}


def tool_todo_complete(ctx: ToolContext, todo_id: A[int, "id of the todo"]) -> dict:
    """Mark a todo as completed."""
    todo = _find_todo(ctx, todo_id)
    todo["status"] = "completed"
    _save(ctx)
    return {"todo": todo, "open": len(ctx.session.state.open_todos())}


def tool_todo_update(
    ctx: ToolContext,
    todo_id: A[int, "id of the todo"],
    status: A[Literal["pending", "in_progress", "completed", "cancelled"], "new status"],
    notes: A[str, "optional notes"] = "",
) -> dict:
    """Change a todo's status (and optionally its notes)."""
    todo = _find_todo(ctx, todo_id)
    todo["status"] = status
    if notes:
        todo["notes"] = notes
    _save(ctx)
    return {"todo": todo}


def tool_todo_list(ctx: ToolContext) -> dict:
    """List the todos with their status."""
    todos = ctx.session.state.todos
    return {"todos": todos, "open": len(ctx.session.state.open_todos())}


def tool_plan_complete_step(
    ctx: ToolContext,
    step_id: A[int, "number of the plan step"],
    verification_notes: A[str, "how you checked the step is done"] = "",
) -> dict:
    """Mark a step of the approved plan as completed."""
    plan = ctx.session.state.plan
    if not plan:
        raise ToolError("there is no plan in this session")
    for step in plan:
        if step["id"] == step_id:
            step["status"] = STATUS_COMPLETED
            step["verification_notes"] = verification_notes
            _save(ctx)
            remaining = [s["id"] for s in ctx.session.state.open_steps()]
            return {"step": step, "remaining_steps": remaining}
    raise ToolError(f"no plan step {step_id}; steps are {[s['id'] for s in plan]}")


# --------------------------------------------------------------------------- task state


def tool_task_state_update(
    ctx: ToolContext,
    objective: A[str | None, "the overall objective"] = None,
    total_count: A[int | None, "how many items there are in total"] = None,
    processed_count: A[int | None, "how many items are done"] = None,
    remaining_queue: A[list[str] | None, "items still to do"] = None,
    next_action: A[str | None, "what you will do next"] = None,
    last_error: A[str | None, "the last error met, if any"] = None,
) -> dict:
    """Record progress on a long task; it stays visible to you even after context compaction."""
    changes = {
        "objective": objective,
        "total_count": total_count,
        "processed_count": processed_count,
        "remaining_queue": remaining_queue,
        "next_action": next_action,
        "last_error": last_error,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        raise ArgumentError("give at least one field to update")
    for key in ("total_count", "processed_count"):
        if changes.get(key, 0) < 0:
            raise ArgumentError(f"{key} must not be negative")
    ctx.session.state.task_state.update(changes)
    _save(ctx)
    return {"task_state": ctx.session.state.task_state}


def tool_task_state_get(ctx: ToolContext) -> dict:
    """Return the recorded task state."""
    return {"task_state": ctx.session.state.task_state}


def tool_task_reconcile(ctx: ToolContext) -> dict:
    """Check the task state for contradictions (counts versus the remaining queue)."""
    state = ctx.session.state.task_state
    total, done = _count(state, "total_count"), _count(state, "processed_count")
    queue = state.get("remaining_queue") or []
    queue = queue if isinstance(queue, list) else [queue]
    problems = [f"{key} is not a whole number" for key in _bad_counts(state)]
    if total is not None and done is not None:
        if done > total:
            problems.append(f"processed_count {done} exceeds total_count {total}")
        elif "remaining_queue" in state and done + len(queue) != total:
            problems.append(
                f"processed_count {done} + remaining {len(queue)} != total_count {total}"
            )
    duplicates = sorted(item for item, n in Counter(map(str, queue)).items() if n > 1)
    if duplicates:
        problems.append(f"remaining_queue has duplicates: {', '.join(duplicates[:10])}")
    finished = total is not None and done == total and not queue
    return {
        "consistent": not problems,
        "problems": problems,
        "finished": finished,
        "task_state": state,
    }


def _count(state: dict, key: str) -> int | None:
    value = state.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bad_counts(state: dict) -> list[str]:
    keys = ("total_count", "processed_count")
    return [key for key in keys if state.get(key) is not None and _count(state, key) is None]


def tool_get_time(ctx: ToolContext) -> dict:
    """Current date and time (local with zone, and UTC)."""
    now = time.time()
    local = datetime.fromtimestamp(now).astimezone()
    return {
        "local": local.isoformat(timespec="seconds"),
        "utc": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
        "timezone": local.tzname(),
        "weekday": local.strftime("%A"),
        "unix": int(now),
    }


STATE_TOOLS = [
    make_tool(tool_todo_add),
    make_tool(tool_todo_complete),
    make_tool(tool_todo_update),
    make_tool(tool_todo_list),
    make_tool(tool_plan_complete_step),
    make_tool(tool_task_state_update),
    make_tool(tool_task_state_get),
    make_tool(tool_task_reconcile),
    make_tool(tool_get_time),
]
