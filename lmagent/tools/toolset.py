"""The one toolset builder: what every agent and sub-agent is offered.

The built-in tools (files, state, shell, git), the process's extra tools (MCP servers', vision),
and the sub-agent tools the agent may use at its depth; fewer by TOOL_SET: a compact set when
the model's context window is small, the tiny set for tiny models (a long list of tools makes
them pick at random). A new built-in tool is listed here, in the module of its kind's list.
"""

from __future__ import annotations

from collections.abc import Iterable

from lmagent.tools.files import FILE_TOOLS
from lmagent.tools.git import (
    tool_git_add,
    tool_git_branch,
    tool_git_commit,
    tool_git_diff,
    tool_git_status,
)
from lmagent.tools.processes import (
    tool_process_input,
    tool_process_kill,
    tool_process_list,
    tool_process_output,
)
from lmagent.tools.registry import (
    Services,
    Tool,
    Toolset,
    make_tool,
)
from lmagent.tools.shell import tool_shell
from lmagent.tools.state import STATE_TOOLS

SMALL_CONTEXT = 8192  # tokens of context below which the compact tool set is offered
COMPACT_TOOLS = (
    "read",
    "write",
    "edit",
    "ls",
    "glob",
    "grep",
    "mkdir",
    "shell",
    "todo_add",
    "todo_complete",
    "todo_list",
    "get_time",
    "report_result",
    "plan_complete_step",
)
TINY_TOOLS = ("read", "write", "edit", "ls", "glob", "grep", "mkdir", "shell", "report_result")

COMMAND_TOOLS = [
    make_tool(tool_shell, changes_things=True),
    make_tool(tool_process_output),
    make_tool(tool_process_input, changes_things=True),
    make_tool(tool_process_kill),
    make_tool(tool_process_list),
    make_tool(tool_git_status),
    make_tool(tool_git_diff),
    make_tool(tool_git_add, changes_things=True),
    make_tool(tool_git_commit, changes_things=True),
    make_tool(tool_git_branch, changes_things=True),
]


def base_tools() -> list[Tool]:
    """Every built-in tool of the contract except the sub-agent ones."""
    return [*FILE_TOOLS, *STATE_TOOLS, *COMMAND_TOOLS]


def build_toolset(
    services: Services | None = None,
    *,
    agent_tools: Iterable[Tool] = (),
    context_length: int | None = None,
) -> Toolset:
    """The tools of one agent: the built-in ones, `services.extra_tools` (MCP, vision) and
    `agent_tools` (delegate, decompose, report_result as its depth allows), narrowed to the
    set TOOL_SET names (MCP tools are always offered)."""
    tools = [*base_tools(), *(services.extra_tools if services else ()), *agent_tools]
    kept = kept_tools(services.config.tool_set if services else "auto", context_length)
    if kept is not None:
        tools = [t for t in tools if t.name in kept or t.name.startswith("mcp_")]
    return Toolset(tools)


def kept_tools(tool_set: str, context_length: int | None) -> tuple[str, ...] | None:
    """The names TOOL_SET keeps (None: all); auto is compact below SMALL_CONTEXT tokens."""
    if tool_set == "auto":
        small = bool(context_length) and context_length < SMALL_CONTEXT
        tool_set = "compact" if small else "full"
    return {"compact": COMPACT_TOOLS, "tiny": TINY_TOOLS}.get(tool_set)
