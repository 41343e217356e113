"""The one toolset builder: what every agent and sub-agent is offered.

The built-in tools (files, state, shell, git), the process's extra tools (MCP servers', vision),
and the sub-agent tools the agent may use at its depth. TOOL_SET=compact (also auto when the
model's context window is small) sends the schemas of a few core tools and keeps the others on
demand (named in the prompt, run when called); tiny keeps only files and shell for tiny models
(a long list of tools makes them pick at random). A new built-in tool is listed here, in the
module of its kind's list.
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
# compact: the schemas of these go to the model; every other tool is named in one line of the
# prompt and runs when called (a small model given 30 schemas wanders off to todo and git tools,
# and they cost 2,900 of a 4,096-token window)
CORE_TOOLS = ("read", "write", "edit", "ls", "grep", "shell", "report_result")
# not named in that line either (they still run when called): todo, plan and task-state tools
# drew the 1.5B model into bookkeeping calls instead of finishing (see STATE_TOOLS)
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
    `agent_tools` (delegate, decompose, report_result as its depth allows), as TOOL_SET has
    them: all offered (full), the core offered and the rest on demand (compact), or only the
    tiny set (tiny). MCP tools are always offered."""
    tools = [*base_tools(), *(services.extra_tools if services else ()), *agent_tools]
    tool_set = effective_tool_set(services.config.tool_set if services else "auto", context_length)
    if tool_set == "tiny":
        tools = [t for t in tools if t.name in TINY_TOOLS or t.name.startswith("mcp_")]
    if tool_set != "compact":
        return Toolset(tools)
    offered = [t.name for t in tools if t.name in CORE_TOOLS or t.name.startswith("mcp_")]
    return Toolset(tools, offered, unnamed=[t.name for t in STATE_TOOLS])


def effective_tool_set(tool_set: str, context_length: int | None) -> str:
    """full, compact or tiny: auto is compact below SMALL_CONTEXT tokens of context."""
    if tool_set == "auto":
        small = bool(context_length) and context_length < SMALL_CONTEXT
        return "compact" if small else "full"
    return tool_set


def kept_tools(tool_set: str, context_length: int | None) -> tuple[str, ...] | None:
    """The built-in tools whose schemas TOOL_SET offers (None: all)."""
    return {"compact": CORE_TOOLS, "tiny": TINY_TOOLS}.get(
        effective_tool_set(tool_set, context_length)
    )
