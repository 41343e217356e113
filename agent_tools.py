"""Facade: the tools an agent is offered. It names what lives where:

- the registry (a tool is a typed Python function; arguments checked against its schema):
  lmagent/tools/registry.py
- the one toolset builder, which every agent and sub-agent gets its tools from:
  lmagent/tools/toolset.py
- the tools themselves, one module per kind: files.py (read, write, edit, ls, glob, grep,
  mkdir), state.py (todos, plan, task state, time), shell.py, git.py, mcp.py (MCP servers'
  tools), vision.py, all in lmagent/tools/; the sub-agent tools are in lmagent/subagents/.

A new tool: a function in the module of its kind (or a new one), listed in toolset.py.
"""

from lmagent.tools.registry import Services, Tool, ToolContext, ToolError, Toolset, make_tool
from lmagent.tools.toolset import base_tools, build_toolset

__all__ = [
    "Services",
    "Tool",
    "ToolContext",
    "ToolError",
    "Toolset",
    "base_tools",
    "build_toolset",
    "make_tool",
]
