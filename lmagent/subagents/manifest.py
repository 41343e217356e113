"""Sub-agent task specs: the decompose manifest, read leniently and validated strictly.

A manifest may arrive as an object or as a JSON string (code fences and trailing commas are
tolerated). Every problem found is reported at once, phrased so the model can fix it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from lmagent.core.workspace import PathError, Workspace

MAX_TASKS = 8
DELIVERABLE_TYPES = ("file", "files", "data", "report")
TASK_KEYS = (
    "task_id",
    "objective",
    "depends_on",
    "deliverable_type",
    "deliverable_path",
    "deliverable_description",
    "deliverable_format",
    "constraints",
    "data_hint",
)
EXAMPLE = (
    '{"tasks": [{"task_id": "css", "objective": "Write style.css", "depends_on": [], '
    '"deliverable_type": "file", "deliverable_path": "style.css"}, {"task_id": "html", '
    '"objective": "Write index.html using style.css", "depends_on": ["css"]}]}'
)


class ManifestError(ValueError):
    """The tasks cannot be run; the message lists every problem and how to fix it."""


@dataclass(frozen=True)
class TaskSpec:
    """One unit of sub-agent work: a decompose task, or the single task of a delegate."""

    task_id: str
    objective: str
    deliverable_type: str = "report"
    deliverable_description: str = ""
    deliverable_paths: tuple[str, ...] = ()  # workspace-relative
    deliverable_format: str = ""
    constraints: tuple[str, ...] = ()
    data_hint: str = ""
    depends_on: tuple[str, ...] = ()


# --------------------------------------------------------------------------- one task


def task_spec(fields: dict, where: str, workspace: Workspace) -> tuple[TaskSpec | None, list[str]]:
    """(spec, []) for valid fields, else (None, problems). Shared by delegate and decompose."""
    problems: list[str] = []
    task_id = _text(fields.get("task_id"))
    objective = _text(fields.get("objective"))
    if not objective:
        problems.append(f"{where}: objective is missing; say what the sub-agent must achieve")
    paths = _deliverable_paths(fields.get("deliverable_path"), where, workspace, problems)
    kind = _text(fields.get("deliverable_type")).lower() or ("file" if paths else "report")
    if kind not in DELIVERABLE_TYPES:
        problems.append(
            f"{where}: deliverable_type {kind!r} is not one of {', '.join(DELIVERABLE_TYPES)}"
        )
    depends_on = _string_list(fields.get("depends_on"), f"{where}: depends_on", problems)
    constraints = _string_list(fields.get("constraints"), f"{where}: constraints", problems)
    if problems:
        return None, problems
    spec = TaskSpec(
        task_id=task_id,
        objective=objective,
        deliverable_type=kind,
        deliverable_description=_text(fields.get("deliverable_description")) or objective,
        deliverable_paths=tuple(paths),
        deliverable_format=_text(fields.get("deliverable_format")),
        constraints=tuple(constraints),
        data_hint=_text(fields.get("data_hint")),
        depends_on=tuple(depends_on),
    )
    return spec, []


def _text(value: object) -> str:
    if value is None:
        return ""
    return (value if isinstance(value, str) else str(value)).strip()


def _string_list(value: object, label: str, problems: list[str]) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str | int):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        problems.append(f"{label} must be a list of strings")
        return []
    return [str(v).strip() for v in value if str(v).strip()]


def _deliverable_paths(value: object, where: str, ws: Workspace, problems: list[str]) -> list[str]:
    """Workspace-relative paths; several may be given as a list or separated by commas."""
    raw = value if isinstance(value, list) else re.split(r"[,\n]", _text(value))
    paths = []
    for path in filter(None, (_text(p) for p in raw)):
        try:
            rel = ws.resolve(path, write=True)
        except (PathError, OSError) as exc:
            problems.append(f"{where}: deliverable_path {path!r} cannot be used: {exc}")
            continue
        if rel == ".":
            problems.append(f"{where}: deliverable_path must name a file or folder, not '.'")
            continue
        paths.append(rel + ("/" if path.endswith("/") else ""))
    return paths


# --------------------------------------------------------------------------- the manifest


def parse_manifest(raw: object, workspace: Workspace) -> list[TaskSpec]:
    """The manifest's tasks in the given order, or ManifestError naming every problem."""
    items = _task_items(load_manifest(raw))
    problems: list[str] = []
    if not items:
        problems.append("the manifest has no tasks")
    if len(items) > MAX_TASKS:
        problems.append(
            f"the manifest has {len(items)} tasks; at most {MAX_TASKS} are allowed — merge "
            "related tasks, or give a group of them to one sub-agent as a single task"
        )
    specs = []
    for number, item in enumerate(items, 1):
        spec = _manifest_task(item, number, workspace, problems)
        if spec is not None:
            specs.append(spec)
    problems += _duplicate_ids(items)
    if not problems:
        problems += check_graph(specs)
    if problems:
        raise ManifestError(
            "the manifest cannot be run:\n- " + "\n- ".join(problems) + f"\nExample: {EXAMPLE}"
        )
    return specs


def load_manifest(raw: object) -> object:
    """Decode a manifest given as an object, or as JSON text (fenced, trailing commas)."""
    if isinstance(raw, dict | list):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        raise ManifestError(f"manifest_json is empty; send an object like {EXAMPLE}")
    text = raw.strip()
    try:
        return json.loads(text)
    except ValueError as exc:
        first = exc
    unfenced = _unfence(text)
    for candidate in (unfenced, re.sub(r",(\s*[}\]])", r"\1", unfenced)):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ManifestError(
        f"manifest_json is not valid JSON ({first.msg} at line {first.lineno} column "
        f"{first.colno}); send an object like {EXAMPLE}"
    )


def _unfence(text: str) -> str:
    fenced = re.search(r"```[\w-]*[ \t]*\n?(.*)```", text, re.S)
    if fenced:
        return fenced.group(1).strip()
    if text[0] not in "{[":
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
        if start >= 0:
            return text[start:]
    return text


def _task_items(data: object) -> list:
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
        if isinstance(data, str):
            data = load_manifest(data)
    if isinstance(data, list):
        return data
    raise ManifestError(f'the manifest must be an object with a "tasks" list, like {EXAMPLE}')


def _manifest_task(item: object, number: int, ws: Workspace, problems: list) -> TaskSpec | None:
    if not isinstance(item, dict):
        problems.append(f"task {number} must be an object with task_id and objective")
        return None
    task_id = _text(item.get("task_id"))
    where = f"task {task_id!r}" if task_id else f"task {number}"
    if not task_id:
        problems.append(f"task {number}: task_id is missing; give a short unique name like 'css'")
    unknown = sorted(set(item) - set(TASK_KEYS))
    if unknown:
        problems.append(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TASK_KEYS)}"
        )
    spec, found = task_spec(item, where, ws)
    problems += found
    return spec if task_id and not unknown else None


def _duplicate_ids(items: list) -> list[str]:
    ids = [_text(item.get("task_id")) for item in items if isinstance(item, dict)]
    twice = sorted({task_id for task_id in ids if task_id and ids.count(task_id) > 1})
    return [
        f"task_id {task_id!r} is used more than once; task ids must be unique" for task_id in twice
    ]


def check_graph(specs: list[TaskSpec]) -> list[str]:
    """Known dependencies, no cycles, no deliverable shared by tasks that may run together."""
    problems, seen = [], {spec.task_id for spec in specs}
    for spec in specs:
        for dep in spec.depends_on:
            if dep == spec.task_id:
                problems.append(f"task {dep!r} depends on itself; remove it from its depends_on")
            elif dep not in seen:
                problems.append(
                    f"task {spec.task_id!r} depends on {dep!r}, which is not a task_id in the "
                    f"manifest (known: {', '.join(sorted(seen))})"
                )
    if problems:
        return problems
    cycle = find_cycle(specs)
    if cycle:
        return [
            f"the dependencies form a cycle: {' → '.join(cycle)}; remove one of these "
            "depends_on entries"
        ]
    return _shared_deliverables(specs)


def find_cycle(specs: list[TaskSpec]) -> list[str]:
    """One dependency cycle as [a, b, ..., a], or [] when there is none."""
    deps = {s.task_id: s.depends_on for s in specs}
    state: dict[str, str] = {}  # "open" while on the current path, "done" once explored

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = "open"
        for dep in deps.get(node, ()):
            if state.get(dep) == "open":
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep, [*path, dep])
                if found:
                    return found
        state[node] = "done"
        return []

    for task_id in deps:
        if task_id not in state:
            found = visit(task_id, [task_id])
            if found:
                return found
    return []


def ancestors(specs: list[TaskSpec]) -> dict[str, set[str]]:
    """Every task's direct and indirect dependencies (the graph must be acyclic)."""
    deps = {s.task_id: s.depends_on for s in specs}
    memo: dict[str, set[str]] = {}

    def of(task_id: str) -> set[str]:
        if task_id not in memo:
            memo[task_id] = set()
            for dep in deps[task_id]:
                memo[task_id] |= {dep, *of(dep)}
        return memo[task_id]

    return {task_id: of(task_id) for task_id in deps}


def _shared_deliverables(specs: list[TaskSpec]) -> list[str]:
    before = ancestors(specs)
    owners: dict[str, str] = {}
    problems = []
    for spec in specs:
        for path in spec.deliverable_paths:
            other = owners.get(path)
            if other and other not in before[spec.task_id]:
                problems.append(
                    f"tasks {other!r} and {spec.task_id!r} both deliver {path!r} and may run at "
                    "the same time; merge them or make one depend on the other"
                )
            owners[path] = spec.task_id
    return problems
