"""The built-in tool set: files, todos, plan, task state, time, shell and git.

Registry mechanics live in tool_registry.py, file handlers in file_tools.py; this module holds
the remaining handlers and assembles what an agent is offered.

The git tools never run a program the repository names (a repository is data: a cloned or
downloaded one may carry a `.git/config` that runs commands), so git_status and git_diff stay
read-only and need no permission. The settings are neutralised rather than asked about, on
every call, in git's command scope, which beats every configuration file:
- fixed settings (`GIT_NEUTRAL_CONFIG`): fsmonitor, hooks (core.hooksPath below /dev/null),
  editors, askpass, ssh, credential helpers, signing, automatic gc, transports (a partial
  clone's lazy fetch), submodule recursion; `--no-pager` covers core.pager and pager.<cmd>;
- settings whose names the repository chooses are found first, with includes followed, by
  `git config --get-regexp` run the same way: each filter driver is emptied (git then filters
  nothing), each configured hook disabled, each named protocol forbidden; a name that `-c`
  cannot express (not UTF-8, or with "=") or a listing too long to check refuses the call;
- diff drivers and diff.external: git_diff passes `--no-ext-diff --no-textconv`; no tool
  merges, so merge drivers never run; aliases cannot replace the built-in commands used here;
- submodules have configuration of their own, which is not checked, so nothing looks inside
  them: status and diff pass `--ignore-submodules=dirty`, and git_commit refuses when nothing
  is staged (git's "nothing to commit" report would look).
The listing and the command are two sandbox runs: only a process already running in the
sandbox (code the user allowed) could change the configuration between them.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Annotated as A
from typing import Literal

from agent_core import STATUS_COMPLETED
from file_tools import FILE_TOOLS
from tool_registry import (
    ArgumentError,
    Services,
    Tool,
    ToolContext,
    ToolError,
    Toolset,
    make_tool,
    sandbox_config,
)

__all__ = [
    "Services",
    "Tool",
    "ToolContext",
    "ToolError",
    "Toolset",
    "base_tools",
    "default_toolset",
    "sandbox_config",
]

SHELL_DEFAULT_TIMEOUT = 30
SHELL_MAX_TIMEOUT = 120
SHELL_MAX_MEMORY_MB = 2048
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


# --------------------------------------------------------------------------- shell and git


def _sandbox(ctx: ToolContext):
    import sandboxed_shell

    try:
        return ctx.services.sandbox()
    except sandboxed_shell.SandboxUnavailable as exc:
        raise ToolError(f"no sandbox to run commands in: {exc}") from None


def run_in_sandbox(
    ctx: ToolContext, command: str, timeout: float, max_memory_mb: int | None = None
) -> dict:
    sandbox = _sandbox(ctx)
    result = sandbox.run(command, timeout=timeout, max_memory_mb=max_memory_mb, stop=ctx.stop.event)
    return result.to_tool_result()


def tool_shell(
    ctx: ToolContext,
    command: A[str, "sh command line, run in the workspace inside the sandbox"],
    timeout: A[int, "seconds (default 30, max 120)"] = SHELL_DEFAULT_TIMEOUT,
    max_memory_mb: A[int | None, "memory limit in MB (max 2048)"] = None,
) -> dict:
    """Run a shell command in the workspace, inside the sandbox."""
    import sandboxed_shell

    if not command.strip():
        raise ArgumentError("command must not be empty")
    if not 1 <= timeout <= SHELL_MAX_TIMEOUT:
        raise ArgumentError(f"timeout must be between 1 and {SHELL_MAX_TIMEOUT} seconds")
    if max_memory_mb is not None and not 16 <= max_memory_mb <= SHELL_MAX_MEMORY_MB:
        raise ArgumentError(f"max_memory_mb must be between 16 and {SHELL_MAX_MEMORY_MB}")
    if ctx.config.shell_workspace_only:
        refusal = sandboxed_shell.check_command_paths(command, ctx.workspace.root)
        if refusal:
            raise ToolError(refusal)
    return run_in_sandbox(ctx, command, timeout, max_memory_mb)


# Every git tool call runs with these settings in git's command scope, which no repository,
# include or global file can override. Each names a program git could run, or a way to one.
GIT_NEUTRAL_CONFIG = (
    ("core.fsmonitor", ""),  # off both where it is a boolean (2.36+) and where a hook path
    ("core.hooksPath", "/dev/null"),  # nothing can exist below /dev/null: no hook file runs
    ("core.editor", ":"),  # ":" tells git not to start an editor
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gc.auto", "0"),  # no automatic gc after a commit (gc.recentObjectsHook, pre-auto-gc)
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),  # a partial clone fetches missing objects through a transport
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    ("safe.bareRepository", "explicit"),
)
GIT_NEUTRAL_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}
# Settings whose middle part the repository names (`filter.<driver>.clean`): every name found in
# the effective configuration (includes followed) gets all of its section's values here.
GIT_NAMED_OVERRIDES = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},  # "" = no filter
    "hook": {"enabled": "false"},  # hooks configured as hook.<name>.command (git 2.54+)
    "protocol": {"allow": "never"},
}


def _git(ctx: ToolContext, *args: str, timeout: float = 60) -> dict:
    """Run one git command in the sandbox with every executable setting neutralised."""
    command = _git_command(args, _named_overrides(ctx))
    return run_in_sandbox(ctx, command, timeout)


def _git_command(args: tuple[str, ...], named: list[tuple[str, str]]) -> str:
    """The sh command line: the environment, git, and every setting as `-c key=value`."""
    words = [f"{name}={value}" for name, value in GIT_NEUTRAL_ENV.items()] + ["git", "--no-pager"]
    for key, value in [*GIT_NEUTRAL_CONFIG, *named]:
        words += ["-c", shlex.quote(f"{key}={value}")]
    return " ".join([*words, *map(shlex.quote, args)])


def _named_overrides(ctx: ToolContext) -> list[tuple[str, str]]:
    """Overrides for every filter driver, configured hook and protocol the configuration names."""
    pattern = "^(" + "|".join(GIT_NAMED_OVERRIDES) + r")\."  # no ".": it skips invalid UTF-8
    listing = ("config", "--name-only", "-z", "--get-regexp", pattern)
    found = run_in_sandbox(ctx, _git_command(listing, []), timeout=30)
    if found["exit_code"] not in (0, 1):  # 1: nothing matched
        detail = found["output"].strip() or found["error"]
        raise ToolError(f"cannot read the git configuration: {detail}")
    if found.get("truncated_bytes"):
        raise ToolError(
            "the git configuration names too many filters, hooks and protocols to check; "
            "look at it with the shell tool"
        )
    overrides = {}
    for key in filter(None, found["output"].split("\0")):
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if section not in GIT_NAMED_OVERRIDES or not dot:
            continue
        if "\ufffd" in name or "=" in name:  # `-c` cannot name it
            raise ToolError(
                f"the git configuration names a {section} that git tools cannot switch off "
                f"({key!r}: not UTF-8, or with '='); look at it with the shell tool"
            )
        for setting, value in GIT_NAMED_OVERRIDES[section].items():
            overrides[f"{section}.{name}.{setting}"] = value
    return list(overrides.items())


def _git_paths(ctx: ToolContext, paths: list[str]) -> list[str]:
    return [ctx.workspace.resolve(p) for p in paths]


def tool_git_status(ctx: ToolContext) -> dict:
    """Show the git status of the workspace repository."""
    return _git(ctx, "status", "--short", "--branch", "--ignore-submodules=dirty")


def tool_git_diff(
    ctx: ToolContext,
    path: A[str | None, "limit the diff to this path"] = None,
    staged: A[bool, "show staged changes instead of unstaged ones"] = False,
) -> dict:
    """Show changes in the workspace repository."""
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"]
    args += ["--staged"] if staged else []
    if path:
        args += ["--", *_git_paths(ctx, [path])]
    return _git(ctx, *args)


def tool_git_add(ctx: ToolContext, paths: A[list[str], "paths to stage"]) -> dict:
    """Stage files for the next commit."""
    if not paths:
        raise ArgumentError("paths must list at least one path")
    return _git(ctx, "add", "--", *_git_paths(ctx, paths))


def tool_git_commit(
    ctx: ToolContext,
    message: A[str, "commit message"],
    allow_empty: A[bool, "allow a commit with no changes"] = False,
) -> dict:
    """Commit the staged changes."""
    if not message.strip():
        raise ArgumentError("message must not be empty")
    if allow_empty:
        return _git(ctx, "commit", "--allow-empty", "-m", message)
    if _git(ctx, "diff", "--staged", "--quiet")["exit_code"] == 0:  # no submodule report
        raise ToolError("nothing is staged to commit: stage changes with git_add first")
    return _git(ctx, "commit", "-m", message)


def tool_git_branch(
    ctx: ToolContext,
    name: A[str | None, "branch name (omit to list branches)"] = None,
    create: A[bool, "create the branch"] = False,
    switch: A[bool, "switch to the branch"] = False,
) -> dict:
    """List, create or switch git branches."""
    if not name:
        return _git(ctx, "branch", "--list", "--no-color")
    if name.startswith("-") or any(ch in name for ch in " ~^:?*[\\") or ".." in name:
        raise ArgumentError(f"invalid branch name {name!r}")
    if create and switch:
        return _git(ctx, "switch", "-c", name)
    if create:
        return _git(ctx, "branch", name)
    if switch:
        return _git(ctx, "switch", name)
    raise ArgumentError("with a name, set create and/or switch")


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

COMMAND_TOOLS = [
    make_tool(tool_shell, changes_things=True),
    make_tool(tool_git_status),
    make_tool(tool_git_diff),
    make_tool(tool_git_add, changes_things=True),
    make_tool(tool_git_commit, changes_things=True),
    make_tool(tool_git_branch, changes_things=True),
]


def base_tools() -> list[Tool]:
    """Every built-in tool of the contract except the sub-agent ones."""
    return [*FILE_TOOLS, *STATE_TOOLS, *COMMAND_TOOLS]


def default_toolset(services: Services | None = None) -> Toolset:
    extra = services.extra_tools if services else []
    return Toolset([*base_tools(), *extra])
