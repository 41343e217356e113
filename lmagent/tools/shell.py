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

from typing import Annotated as A

from lmagent.sandbox.base import SandboxUnavailable
from lmagent.tools.command_paths import check_command_paths
from lmagent.tools.registry import (
    ArgumentError,
    ToolContext,
    ToolError,
)

SHELL_DEFAULT_TIMEOUT = 30
SHELL_MAX_TIMEOUT = 120
SHELL_MAX_MEMORY_MB = 2048
# --------------------------------------------------------------------------- shell and git


def _sandbox(ctx: ToolContext):

    try:
        return ctx.services.sandbox()
    except SandboxUnavailable as exc:
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

    if not command.strip():
        raise ArgumentError("command must not be empty")
    if not 1 <= timeout <= SHELL_MAX_TIMEOUT:
        raise ArgumentError(f"timeout must be between 1 and {SHELL_MAX_TIMEOUT} seconds")
    if max_memory_mb is not None and not 16 <= max_memory_mb <= SHELL_MAX_MEMORY_MB:
        raise ArgumentError(f"max_memory_mb must be between 16 and {SHELL_MAX_MEMORY_MB}")
    if ctx.config.shell_workspace_only:
        refusal = check_command_paths(command, ctx.workspace.root)
        if refusal:
            raise ToolError(refusal)
    return run_in_sandbox(ctx, command, timeout, max_memory_mb)


# Every git tool call runs with these settings in git's command scope, which no repository,
# include or global file can override. Each names a program git could run, or a way to one.
