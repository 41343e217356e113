"""Sub-agents, the Brief-Contract Architecture: delegate, decompose and report_result.

A child never sees its parent's conversation. It gets a brief in a fixed template (also on disk
as brief.json, see records.py), runs the same loop as every agent (run_agent) in a session of
its own, and ends by calling report_result, which writes result.json. The parent's tool result
is that JSON plus a check of each claimed artifact.

How children are run (slots, scheduling, budgets, events) is in run.py; the files they
exchange with their parent in records.py; the decompose manifest in manifest.py.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Annotated as A
from typing import Literal

from lmagent.core.config import Config
from lmagent.core.workspace import Workspace
from lmagent.subagents.manifest import EXAMPLE, ManifestError, parse_manifest, task_spec
from lmagent.subagents.records import (
    cleanup_agent_dirs,
    make_result,
    read_brief,
    read_result,
    write_result,
)
from lmagent.subagents.run import OK_STATUSES, AgentSlots, BcaSettings, Schedule
from lmagent.tools.registry import (
    ArgumentError,
    Services,
    Tool,
    ToolContext,
    ToolError,
    Toolset,
    make_tool,
)
from lmagent.tools.toolset import build_toolset

DeliverableType = Literal["file", "files", "data", "report"]


def agent_toolset(
    config: Config,
    services: Services,
    depth: int = 0,
    is_child: bool = False,
    context_length: int | None = None,
) -> Toolset:
    """The tools of an agent at `depth`: the built-in ones, MCP tools, delegate/decompose while
    depth < AGENT_MAX_DEPTH (and sub-agents are enabled), report_result for children.
    `context_length` (the model's loaded window) is passed on to the children's loops."""
    settings = BcaSettings.from_config(config)
    if depth == 0 and settings.retention_days > 0:
        cleanup_agent_dirs(Workspace(config.workspace), settings.retention_days)
    team = SubAgents(config, services, settings, context_length=context_length)
    return team.toolset(depth, is_child)


# --------------------------------------------------------------------------- the tools


class SubAgents:
    """The sub-agent tools of one top-level run and all its descendants (sharing the slots)."""

    def __init__(
        self,
        config: Config,
        services: Services,
        settings: BcaSettings,
        context_length: int | None = None,
    ):
        self.config = config
        self.services = services
        self.settings = settings
        self.context_length = context_length
        self.slots = AgentSlots(settings.concurrency)
        decompose = make_tool(self.tool_decompose)
        decompose.parameters["properties"]["manifest_json"] = MANIFEST_SCHEMA
        self.tools = [make_tool(self.tool_delegate), decompose]

    def can_delegate(self, depth: int) -> bool:
        return self.config.enable_sub_agents and depth < self.config.agent_max_depth

    def toolset(self, depth: int, is_child: bool) -> Toolset:
        own = [*(self.tools if self.can_delegate(depth) else ()), *([REPORT_RESULT] * is_child)]
        return build_toolset(self.services, agent_tools=own, context_length=self.context_length)

    def refuse_beyond_depth(self, ctx: ToolContext, name: str) -> None:
        if not self.can_delegate(ctx.depth):
            raise ToolError(
                f"{name} is not available at depth {ctx.depth} (AGENT_MAX_DEPTH="
                f"{self.config.agent_max_depth}); do the work yourself"
            )

    def tool_delegate(
        self,
        ctx: ToolContext,
        objective: A[str, "what the sub-agent must achieve, self-contained"],
        deliverable_type: A[DeliverableType, "file, files, data or report"],
        deliverable_description: A[str, "what exactly must be delivered"],
        deliverable_path: A[
            str | None, "workspace path(s) of the deliverable, comma-separated"
        ] = None,
        deliverable_format: A[str | None, "format of the deliverable, e.g. 'JSON list'"] = None,
        constraints: A[list[str] | None, "rules the sub-agent must follow"] = None,
        data_hint: A[str | None, "facts or inputs the sub-agent needs"] = None,
    ) -> dict:
        """Give one self-contained objective with one deliverable to a sub-agent (it does not
        see this conversation) and wait for its result."""
        self.refuse_beyond_depth(ctx, "delegate")
        fields = {
            "objective": objective,
            "deliverable_type": deliverable_type,
            "deliverable_description": deliverable_description,
            "deliverable_path": deliverable_path,
            "deliverable_format": deliverable_format,
            "constraints": constraints,
            "data_hint": data_hint,
        }
        spec, problems = task_spec(fields, "delegate", ctx.workspace)
        if problems:
            raise ArgumentError("; ".join(problems))
        outcome = Schedule(self, ctx, [spec]).run()[0]
        outcome.pop("task_id", None)
        return verdict(outcome)

    def tool_decompose(
        self,
        ctx: ToolContext,
        manifest_json: A[object, "the manifest"],
    ) -> dict:
        """Split work into up to 8 sub-agent tasks. A task starts when every task in its
        depends_on has finished; tasks that do not depend on each other run in parallel."""
        self.refuse_beyond_depth(ctx, "decompose")
        try:
            specs = parse_manifest(manifest_json, ctx.workspace)
        except ManifestError as exc:
            raise ArgumentError(str(exc)) from None
        outcomes = [verdict(o) for o in Schedule(self, ctx, specs).run()]
        failed = [o for o in outcomes if not o["success"]]
        result = {
            "success": not failed,
            "counts": dict(Counter(o["status"] for o in outcomes)),
            "tasks": outcomes,
        }
        if failed:
            result["error"] = "; ".join(f"{o['task_id']}: {o['error']}" for o in failed)
        return result


MANIFEST_SCHEMA = {
    "description": (
        'The manifest: {"tasks": [{"task_id", "objective", "depends_on": [task ids], '
        '"deliverable_type"?, "deliverable_path"?, "deliverable_description"?}]} as an '
        f"object or a JSON string. Example: {EXAMPLE}"
    ),
    "anyOf": [{"type": "object"}, {"type": "string"}],
}


def verdict(outcome: dict) -> dict:
    """A task's outcome as a tool result: success, and error / warning for the parent."""
    result = {"success": outcome["status"] in OK_STATUSES, **outcome}
    if not result["success"]:
        result["error"] = (
            outcome.get("error")
            or outcome.get("reason")
            or f"the sub-agent reported status {outcome['status']}"
        )
    bad = [c for c in outcome.get("artifact_check", ()) if not c["ok"]]
    if bad:
        result["warning"] = "claimed artifacts failed the check: " + ", ".join(
            f"{c['path']} ({_problem(c)})" for c in bad
        )
    return result


def _problem(check: dict) -> str:
    if not check["inside_workspace"]:
        return "outside the workspace"
    return "missing" if not check["exists"] else "empty"


# --------------------------------------------------------------------------- report_result


def tool_report_result(
    ctx: ToolContext,
    status: A[
        Literal["ok", "partial", "blocked", "error"],
        "ok = done, partial = partly done, blocked = cannot proceed, error = failed",
    ],
    summary: A[str, "what you did and what the parent needs to know"],
    artifacts: A[list[str] | None, "workspace paths of the files you produced"] = None,
    data: A[object, "the answer itself, for a data or report deliverable"] = None,
    error: A[str | None, "what went wrong, when status is not ok"] = None,
) -> dict:
    """Report your result to the parent agent; this ends your work (sub-agents only)."""
    brief = read_brief(ctx.workspace, ctx.agent_id) if ctx.depth > 0 else None
    if brief is None:
        raise ToolError("report_result is only for sub-agents; this agent has no brief")
    if read_result(ctx.workspace, ctx.agent_id) is not None:
        raise ToolError("you have already reported; your work is over")
    if not summary.strip():
        raise ArgumentError("summary must say what you did")
    paths = _reported_artifacts(ctx.workspace, artifacts or [])
    if status == "ok" and brief["deliverable"]["type"] in ("file", "files") and not paths:
        raise ArgumentError(
            "the deliverable is a file: list the file(s) you produced in artifacts, or report "
            "status partial or error"
        )
    result = make_result(
        ctx.agent_id,
        status=status,
        summary=summary.strip(),
        artifacts=paths,
        data=_decoded(data),
        error=(error or "").strip() or (None if status == "ok" else summary.strip()),
        iterations=int(ctx.session.meta.get("iterations", 0)),
        ended_because="reported",
    )
    path = write_result(ctx.workspace, result)
    return {
        "success": True,
        "final": True,
        "status": status,
        "summary": result["summary"],
        "result_path": ctx.workspace.relative(path),
    }


def _reported_artifacts(workspace: Workspace, artifacts: list[str]) -> list[str]:
    """Workspace-relative paths of existing files; anything else is refused with the reason."""
    paths, problems = [], []
    for artifact in artifacts:
        try:
            info, rel = workspace.stat(artifact)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        except OSError:
            info = None
        if info is None:
            problems.append(f"artifact {artifact!r} does not exist; create it or leave it out")
        elif rel not in paths:
            paths.append(rel)
    if problems:
        raise ArgumentError("; ".join(problems))
    return paths


def _decoded(data: object) -> object:
    """Data sent as a JSON string is stored as the object it encodes."""
    if isinstance(data, str) and data.strip()[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return json.loads(data)
    return data


REPORT_RESULT: Tool = make_tool(tool_report_result)
