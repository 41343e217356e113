"""The sub-agent exchange on disk, and the fixed template a child's task is written in.

`<workspace>/.lmagent/agents/<agent_id>/brief.json` is written before a child starts and
`result.json` when it ends (by its report_result, or for it when it never reported). Both are
written atomically. The file tools refuse writes under `.lmagent/` and a deliverable path there
is refused, so a child's work and these files never overwrite each other.
"""

from __future__ import annotations

import json
import secrets
import shutil
import stat
import time
from pathlib import Path

from lmagent.core.files import read_json, utc_now, write_json
from lmagent.core.workspace import PathError, Workspace
from lmagent.subagents.manifest import TaskSpec

RESULT_VERSION = 1  # format of result.json; raise it when a field changes meaning
RESULT_STATUSES = ("ok", "partial", "blocked", "error")
ARTIFACT_TEXT_LIMIT = 4000  # characters of one artifact copied into a dependant's brief
SUMMARY_LIMIT = 1500
DATA_LIMIT = 3000


# --------------------------------------------------------------------------- places


def agents_dir(workspace: Workspace) -> Path:
    return workspace.data_dir / "agents"


def agent_dir(workspace: Workspace, agent_id: str) -> Path:
    if not agent_id or "/" in agent_id or "\\" in agent_id or agent_id.startswith("."):
        raise ValueError(f"invalid agent id {agent_id!r}")
    return agents_dir(workspace) / agent_id


def new_agent_id(task_id: str = "") -> str:
    """A fresh id, readable in event prefixes: `css-3f9a2c`, or `sub-3f9a2c` for a delegate."""
    slug = "".join(c if c.isalnum() else "-" for c in task_id.lower()).strip("-")[:24]
    return f"{slug or 'sub'}-{secrets.token_hex(3)}"


# --------------------------------------------------------------------------- brief.json


def make_brief(
    spec: TaskSpec,
    *,
    agent_id: str,
    parent_id: str,
    depth: int,
    max_depth: int,
    session_id: str,
    parent_objective: str,
    dependencies: list[dict],
) -> dict:
    """The brief: exactly the fields of the contract. `parent_id` is the parent's session id."""
    return {
        "agent_id": agent_id,
        "parent_id": parent_id,
        "depth": depth,
        "max_depth": max_depth,
        "session_id": session_id,
        "objective": spec.objective,
        "deliverable": {
            "type": spec.deliverable_type,
            "description": spec.deliverable_description,
            "path": spec.deliverable_paths[0] if len(spec.deliverable_paths) == 1 else None,
            "paths": list(spec.deliverable_paths),
            "format": spec.deliverable_format or None,
        },
        "data": {"hint": spec.data_hint or None, "dependencies": dependencies},
        "constraints": list(spec.constraints),
        "parent_objective": parent_objective[:SUMMARY_LIMIT],
        "created_at": utc_now(),
    }


def write_brief(workspace: Workspace, brief: dict) -> Path:
    directory = agent_dir(workspace, brief["agent_id"])
    directory.mkdir(parents=True, exist_ok=False)  # a fresh id: never reuse another agent's dir
    write_json(directory / "brief.json", brief)
    return directory / "brief.json"


def read_brief(workspace: Workspace, agent_id: str) -> dict | None:
    brief = read_json(agent_dir(workspace, agent_id) / "brief.json")
    return brief if isinstance(brief, dict) else None


BRIEF_TEMPLATE = """\
You are sub-agent {agent_id} (depth {depth} of at most {max_depth}). A parent agent wrote you \
this brief. You do not see its conversation: everything you get is below (also in \
.lmagent/agents/{agent_id}/brief.json).

## Objective
{objective}

## Deliverable
{deliverable}

## Constraints
{constraints}

## Data
{data}

## The parent's own objective (context only; do not do it)
{parent_objective}

## How to finish
Work with tools inside the workspace and check your work. Then call report_result exactly once:
- status: ok (done), partial (partly done), blocked (cannot proceed), error (failed)
- summary: what you did and what the parent needs to know, in a few sentences
- artifacts: workspace-relative paths of the files you produced (only files that exist)
- data: the answer itself, when the deliverable is data or a report
- error: what went wrong, when the status is not ok
report_result ends your work. Replying TASK_COMPLETE instead reports nothing to the parent."""


def brief_prompt(brief: dict) -> str:
    """The child's task: the brief in the fixed template."""
    return BRIEF_TEMPLATE.format(
        agent_id=brief["agent_id"],
        depth=brief["depth"],
        max_depth=brief["max_depth"],
        objective=brief["objective"],
        deliverable=_deliverable_text(brief["deliverable"]),
        constraints="\n".join(f"- {c}" for c in brief["constraints"]) or "(none beyond the above)",
        data=_data_text(brief["data"]),
        parent_objective=brief["parent_objective"] or "(none given)",
    )


def _deliverable_text(deliverable: dict) -> str:
    lines = [f"type: {deliverable['type']}", f"description: {deliverable['description']}"]
    if deliverable["paths"]:
        lines.append("path(s): " + ", ".join(deliverable["paths"]))
    if deliverable["format"]:
        lines.append(f"format: {deliverable['format']}")
    return "\n".join(lines)


def _data_text(data: dict) -> str:
    parts = [data["hint"]] if data.get("hint") else []
    for dep in data.get("dependencies") or ():
        lines = [f"### Result of task {dep['task_id']!r} ({dep['status']})", dep["summary"]]
        if dep["artifacts"]:
            lines.append("Artifacts: " + ", ".join(dep["artifacts"]))
        if dep.get("data") is not None:
            lines.append("Data: " + json.dumps(dep["data"], ensure_ascii=False))
        for path, text in dep["contents"].items():
            lines.append(f"--- {path} ---\n{text}\n--- end of {path} ---")
        if dep["not_included"]:
            lines.append("Not copied here (read them with the read tool): ")
            lines[-1] += ", ".join(dep["not_included"])
        parts.append("\n".join(lines))
    return "\n\n".join(parts) or "(none)"


# --------------------------------------------------------------------------- result.json


def make_result(
    agent_id: str,
    *,
    status: str,
    summary: str,
    artifacts: list[str],
    data: object,
    error: str | None,
    iterations: int,
    ended_because: str,
) -> dict:
    """The contract's fields plus `version` and `ended_because` (reported, no_report,
    max_iterations, time_budget, interrupted, error, crashed)."""
    return {
        "version": RESULT_VERSION,
        "agent_id": agent_id,
        "status": status,
        "summary": summary,
        "artifacts": artifacts,
        "data": data,
        "error": error,
        "iterations": iterations,
        "created_at": utc_now(),
        "ended_because": ended_because,
    }


def write_result(workspace: Workspace, result: dict) -> Path:
    path = agent_dir(workspace, result["agent_id"]) / "result.json"
    write_json(path, result)
    return path


def read_result(workspace: Workspace, agent_id: str) -> dict | None:
    result = read_json(agent_dir(workspace, agent_id) / "result.json")
    return result if isinstance(result, dict) and result.get("status") else None


def check_artifacts(workspace: Workspace, paths: list[str]) -> list[dict]:
    """For each claimed artifact: inside the workspace, exists, non-empty."""
    checks = []
    for path in paths:
        entry = {"path": path, "inside_workspace": False, "exists": False, "non_empty": False}
        try:
            info, rel = workspace.stat(str(path))
        except PathError:
            checks.append({**entry, "ok": False})
            continue
        except OSError:
            info = None
        entry.update(inside_workspace=True, exists=info is not None)
        if info is not None and stat.S_ISREG(info.st_mode):
            entry.update(non_empty=info.st_size > 0, bytes=info.st_size)
        elif info is not None and stat.S_ISDIR(info.st_mode):
            entry["non_empty"] = next(workspace.walk(rel, max_depth=1), None) is not None
        entry["ok"] = entry["exists"] and entry["non_empty"]
        checks.append(entry)
    return checks


# --------------------------------------------------------------------------- dependencies


def dependency_results(workspace: Workspace, results: list[dict], budget: int) -> list[dict]:
    """What a dependant needs from the tasks it depends on, within `budget` characters:
    status, summary, artifacts and data first, then small text artifacts copied in."""
    entries = []
    for result in results:
        data = result.get("data")
        if data is not None and len(json.dumps(data, ensure_ascii=False)) > DATA_LIMIT:
            data = _clip(json.dumps(data, ensure_ascii=False), DATA_LIMIT)
        entries.append(
            {
                "task_id": result["task_id"],
                "agent_id": result.get("agent_id"),
                "status": result["status"],
                "summary": _clip(result.get("summary") or "", SUMMARY_LIMIT),
                "artifacts": list(result.get("artifacts") or []),
                "data": data,
                "contents": {},
                "not_included": [],
            }
        )
    left = budget - len(json.dumps(entries, ensure_ascii=False))
    for entry in entries:
        for path in entry["artifacts"]:
            text = _small_text(workspace, path, min(ARTIFACT_TEXT_LIMIT, left))
            if text is None:
                entry["not_included"].append(path)
            else:
                entry["contents"][path] = text
                left -= len(text) + len(path) + 8
    return entries


def _small_text(workspace: Workspace, path: str, limit: int) -> str | None:
    try:
        raw, _ = workspace.read_bytes(path, limit * 4)
    except (PathError, OSError):
        return None
    if b"\x00" in raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    return text if len(text) <= limit else None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- clean-up


def cleanup_agent_dirs(workspace: Workspace, older_than_days: float, now: float | None = None):
    """Delete the directories of finished agents (result.json present) older than the limit.
    A directory without result.json belongs to a running agent and is never touched."""
    removed = []
    if older_than_days <= 0 or not agents_dir(workspace).is_dir():
        return removed
    cutoff = (now if now is not None else time.time()) - older_than_days * 86400
    for directory in sorted(agents_dir(workspace).iterdir()):
        result = directory / "result.json"
        try:
            finished_at = result.stat().st_mtime
        except OSError:
            continue
        if directory.is_dir() and not directory.is_symlink() and finished_at < cutoff:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory.name)
    return removed
