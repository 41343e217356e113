"""Background processes: `shell` with background=true starts one; these tools watch, feed and
stop it. Each process belongs to the run (session and agent) that started it: another run sees
no such id, and the run's end stops it (`stop_run_processes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated as A

from lmagent.sandbox.base import ProcessError, Processes, SandboxUnavailable
from lmagent.tools.registry import Services, ToolContext, ToolError

SHOWN = ("process_id", "running", "exit_code", "output", "next", "skipped", "log", "written")
PANEL_PROCESSES = 8  # processes the web panel shows at most
PANEL_OUTPUT = 4000  # bytes of the end of each one's output it shows
TIMEOUT_HINT = (
    "; a command that needs longer (a server, a watcher, a long build or test run) can run "
    "with shell background=true and be followed with process_output"
)


def owner(ctx: ToolContext) -> str:
    """Who a background process belongs to: this run's session and agent."""
    return f"{ctx.session.id}/{ctx.agent_id}"


def _processes(ctx: ToolContext) -> Processes:
    try:
        return ctx.services.sandbox().processes
    except SandboxUnavailable as exc:
        raise ToolError(f"no sandbox to run commands in: {exc}") from None


def _shown(ctx: ToolContext, answer: dict) -> dict:
    """What the model is told of a process: its state, new output, and where its log is."""
    result = {"success": True, **{k: answer[k] for k in SHOWN if answer.get(k) is not None}}
    if "log" in result:
        result["log"] = ctx.workspace.relative(result["log"])
    if result.get("skipped"):
        result["note"] = (
            f"{result['skipped']} bytes in the middle were not kept (the first 4 KB and last "
            "16 KB are); the full output is in the log"
        )
    return result


def _call(ctx: ToolContext, action) -> dict:
    try:
        answer = action(_processes(ctx))
    except ProcessError as exc:
        raise ToolError(str(exc)) from None
    if "running" in answer:
        _tell(ctx, answer)
    return _shown(ctx, answer)


def _tell(ctx: ToolContext, process: dict, state: str | None = None) -> None:
    """A `process` event when one starts, is seen to have exited, or is stopped (once each)."""
    told = ctx.extras.setdefault("told_processes", {})
    state = state or ("running" if process["running"] else "exited")
    if told.get(process["process_id"]) in (state, "exited", "stopped"):
        return
    told[process["process_id"]] = state
    event = {"type": "process", "session_id": ctx.session.id, "state": state}
    event.update(process_id=process["process_id"], command=process["command"])
    event.update(exit_code=process.get("exit_code"), log=ctx.workspace.relative(process["log"]))
    ctx.emit(event)


def _failed_if_it_failed(result: dict) -> dict:
    """A process seen to have ended with an error fails as the command would in the
    foreground (told `"success": true` with exit code 2 for `python3 sales.py`, a file that
    did not exist, a 1.5B model wrote 0 as the total the program was to compute)."""
    code = result.get("exit_code")
    if not result.get("running") and isinstance(code, int) and code != 0:
        result.update(success=False, error=f"the process exited with code {code}")
    return result


def start_background(ctx: ToolContext, command: str, max_memory_mb: int | None) -> dict:
    """shell(background=true): start `command`; its id and first output."""
    started = _call(ctx, lambda p: p.start(command, max_memory_mb=max_memory_mb, owner=owner(ctx)))
    return _failed_if_it_failed(started)


def timeout_hint(ctx: ToolContext, result: dict) -> dict:
    """Tell the model once per run, on a timed-out command, that background=true exists."""
    if ctx.extras.get("told_background"):
        return result
    ctx.extras["told_background"] = True
    return dict(result, error=result["error"] + TIMEOUT_HINT)


def tool_process_output(
    ctx: ToolContext,
    process_id: A[str, "id from shell with background=true"],
    since: A[int | None, "byte offset: only output after it (the `next` of the last call)"] = None,
) -> dict:
    """New output of a background process, whether it still runs, and its exit code."""
    return _failed_if_it_failed(
        _call(ctx, lambda p: p.output(process_id, since or 0, owner=owner(ctx)))
    )


def tool_process_input(
    ctx: ToolContext,
    process_id: A[str, "id from shell with background=true"],
    text: A[str, "written to its stdin as is (end a line with \\n)"],
) -> dict:
    """Write text to a background process's stdin."""
    return _call(ctx, lambda p: p.write(process_id, text, owner=owner(ctx)))


def tool_process_kill(
    ctx: ToolContext, process_id: A[str, "id from shell with background=true"]
) -> dict:
    """Stop a background process and all it started (SIGTERM, then SIGKILL after 2 s)."""
    return _call(ctx, lambda p: p.kill(process_id, owner=owner(ctx)))


def tool_process_list(ctx: ToolContext) -> dict:
    """The background processes of this run: id, command, running, exit code."""
    try:
        listed = _processes(ctx).list(owner=owner(ctx))
    except ProcessError as exc:
        raise ToolError(str(exc)) from None
    for process in listed:
        _tell(ctx, process)
    keys = ("process_id", "command", "running", "exit_code")
    return {"success": True, "processes": [{k: p[k] for k in keys} for p in listed]}


def stop_run_processes(ctx: ToolContext) -> list[dict]:
    """At the end of a run: stop its background processes; [{process_id, command}] of those
    that were still running. Starts no sandbox that is not running."""
    sandbox = ctx.services.running_sandbox()
    if sandbox is None:
        return []
    try:
        stopped = sandbox.processes.stop_all(owner=owner(ctx))
    except ProcessError:
        return []  # the job server is gone, and with it every process
    finally:
        sandbox.sweep()  # from the host: nothing stopped or orphaned is left in the sandbox
    for process in stopped:
        _tell(ctx, process, "stopped")
    return [{"process_id": p["process_id"], "command": p["command"]} for p in stopped]


def process_lines(services: Services) -> list[str]:
    """For /ps and /status: one line per background process of this agent's sandbox."""
    sandbox = services.running_sandbox()
    try:
        listed = sandbox.processes.list() if sandbox is not None else []
    except ProcessError as exc:
        return [str(exc)]
    lines = []
    for p in listed:
        state = "running" if p["running"] else f"exited {p['exit_code']}"
        log = Path(p["log"]).relative_to(services.config.workspace)
        lines.append(f"{p['process_id']:<4} {state:<10} {p['command'][:60]}  (log: {log})")
    return lines


def kill_process(services: Services, process_id: str) -> str:
    """For /kill ID and the web panel's Stop: stop a background process (the user's call: any
    run's); what happened, in one line. Raises ProcessError for an unknown id."""
    sandbox = services.running_sandbox()
    listed = sandbox.processes.list() if sandbox is not None else []
    known = next((p for p in listed if p["process_id"] == process_id), None)
    if known is None:  # /ps lists the same processes
        raise ProcessError(f"there is no background process {process_id!r}; /ps lists them")
    if not known["running"]:
        return f"{process_id} has already ended (exit code {known['exit_code']}); nothing to stop"
    stopped = sandbox.processes.kill(process_id)
    return f"{process_id} stopped (exit code {stopped['exit_code']})"


def process_views(services: Services) -> list[dict]:
    """For the web panel: the latest processes, newest first, each with the end of its output."""
    sandbox = services.running_sandbox()
    try:
        listed = sandbox.processes.list() if sandbox is not None else []
        views = []
        for p in reversed(listed[-PANEL_PROCESSES:]):
            since = max(0, p["output_bytes"] - PANEL_OUTPUT)
            output = sandbox.processes.output(p["process_id"], since)["output"]
            log = Path(p["log"]).relative_to(services.config.workspace).as_posix()
            keys = ("process_id", "command", "running", "exit_code")
            views.append({**{k: p[k] for k in keys}, "output": output, "log": log})
    except ProcessError:
        return []
    return views
