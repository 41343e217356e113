"""The registry: schemas match the contract, arguments are checked and coerced, nothing raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import pytest

from lmagent.tools.registry import ArgumentError, ToolError, Toolset, make_tool
from lmagent.tools.toolset import build_toolset

# Tool names and argument names from ../shared/CONTRACT.md: (required, optional).
CONTRACT = {
    "read": (["path"], ["offset", "limit"]),
    "write": (["path", "content"], []),
    "edit": (["path", "search", "replace"], []),
    "glob": (["pattern"], []),
    "grep": (["pattern"], ["paths", "ignore_case"]),
    "ls": ([], ["path"]),
    "mkdir": (["path"], []),
    "shell": (["command"], ["timeout", "max_memory_mb", "background"]),
    "process_output": (["process_id"], ["since"]),
    "process_input": (["process_id", "text"], []),
    "process_kill": (["process_id"], []),
    "process_list": ([], []),
    "git_status": ([], []),
    "git_diff": ([], ["path", "staged"]),
    "git_add": (["paths"], []),
    "git_commit": (["message"], ["allow_empty"]),
    "git_branch": ([], ["name", "create", "switch"]),
    "todo_add": (["description"], ["notes"]),
    "todo_complete": (["todo_id"], []),
    "todo_update": (["todo_id", "status"], ["notes"]),
    "todo_list": ([], []),
    "plan_complete_step": (["step_id"], ["verification_notes"]),
    "task_state_update": (
        [],
        [
            "objective",
            "total_count",
            "processed_count",
            "remaining_queue",
            "next_action",
            "last_error",
        ],
    ),
    "task_state_get": ([], []),
    "task_reconcile": ([], []),
    "get_time": ([], []),
}


@pytest.fixture
def run(ctx):
    tools = build_toolset()
    return lambda name, raw: tools.execute(ctx, name, raw)


def failed(result: dict, *fragments: str) -> bool:
    """The result is a failure whose error mentions every fragment."""
    assert result["success"] is False, result
    assert isinstance(result["error"], str) and result["error"], result
    for fragment in fragments:
        assert fragment in result["error"], (fragment, result["error"])
    return True


# --------------------------------------------------------------------------- schemas


def test_schemas_name_every_contract_tool_and_argument_exactly():
    schemas = {s["function"]["name"]: s["function"] for s in build_toolset().schemas()}
    assert set(schemas) == set(CONTRACT)
    for name, (required, optional) in CONTRACT.items():
        parameters = schemas[name]["parameters"]
        assert parameters["type"] == "object"
        assert list(parameters["properties"]) == required + optional, name
        assert parameters["required"] == required, name
        assert schemas[name]["description"], name


def test_schema_types_follow_the_signatures():
    props = {
        s["function"]["name"]: s["function"]["parameters"]["properties"]
        for s in build_toolset().schemas()
    }
    assert props["read"]["offset"]["type"] == "integer"
    assert props["grep"]["paths"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "files, directories or globs in the workspace (default: all)",
    }
    assert props["grep"]["ignore_case"]["type"] == "boolean"
    assert props["todo_update"]["status"]["enum"] == [
        "pending",
        "in_progress",
        "completed",
        "cancelled",
    ]
    assert props["task_state_update"]["remaining_queue"]["type"] == "array"
    assert all(p.get("description") for tool in props.values() for p in tool.values())


def test_make_tool_derives_schema_and_description_from_a_typed_function():
    def tool_sample(
        ctx,
        name: Annotated[str, "who"],
        count: int = 1,
        mode: Literal["a", "b"] = "a",
        tags: list[str] | None = None,
    ) -> dict:
        """Do a sample thing.

        More detail."""
        return {}

    tool = make_tool(tool_sample, changes_things=True)
    assert tool.name == "sample"
    assert tool.description == "Do a sample thing.\n\nMore detail."
    assert tool.changes_things
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "who"},
            "count": {"type": "integer"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name"],
    }


def test_toolset_without_plus_and_permission_flags():
    tools = build_toolset()
    assert tools.changes_things("write") and tools.changes_things("mkdir")
    assert not tools.changes_things("read") and not tools.changes_things("grep")
    assert tools.changes_things("no_such_tool")  # unknown tools are never waved through
    smaller = tools.without("write", "edit")
    assert "write" not in smaller and "read" in smaller
    bigger = smaller.plus([make_tool(lambda ctx: {}, name="extra")])
    assert "extra" in bigger and "extra" not in smaller


# --------------------------------------------------------------------------- refusals


def test_unknown_tool_lists_the_available_ones(run):
    result = run("delete_everything", {})
    assert failed(result, "unknown tool 'delete_everything'", "read", "grep", "todo_add")


@pytest.mark.parametrize("name", [None, 42, {"name": "read"}, ["read"]])
def test_a_tool_name_that_is_not_a_string_is_refused(run, name):
    assert failed(run(name, {}), "unknown tool", "Available tools", "with shell")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"path": "a.txt"', "not valid JSON"),
        ("path=a.txt", "not valid JSON"),
        ('["a.txt"]', "must be a JSON object"),
        ("42", "must be a JSON object"),
        ('"just text"', "not valid JSON"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_malformed_arguments_are_bad_arguments(run, raw, fragment):
    assert failed(run("read", raw), "bad arguments:", fragment)


def test_missing_required_argument_is_named(run):
    assert failed(run("write", {"path": "a.txt"}), "bad arguments:", "content")
    assert failed(run("write", {"path": "a.txt", "content": None}), "content")


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_every_tool_names_its_missing_and_unknown_arguments(run, name):
    required, optional = CONTRACT[name]
    if required:
        assert failed(run(name, {}), "bad arguments:", "missing", *required)
    unknown = run(name, {"bogus": 1, **{arg: "x" for arg in required}})
    assert failed(unknown, "bad arguments:", "unknown argument(s) bogus")
    expected = ", ".join(required + optional) or "no arguments"
    assert f"expected: {expected}" in unknown["error"]


def test_unknown_argument_lists_the_expected_ones(run):
    result = run("read", {"path": "a.txt", "file": "b.txt"})
    assert failed(result, "bad arguments:", "unknown argument(s) file", "path, offset, limit")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"path": ["a.txt"]}, "'path' must be of type string"),
        ({"path": {"p": 1}}, "'path' must be of type string"),
        ({"path": "a.txt", "offset": "first"}, "'offset' must be of type integer"),
        ({"path": "a.txt", "offset": 1.5}, "'offset' must be of type integer"),
        ({"path": "a.txt", "offset": True}, "'offset' must be of type integer"),
        ({"path": "a.txt", "limit": "inf"}, "'limit' must be of type integer"),
    ],
)
def test_wrong_types_are_bad_arguments(run, args, fragment):
    assert failed(run("read", args), "bad arguments:", fragment)


def test_text_arguments_must_be_text(run):
    assert failed(run("write", {"path": "a.txt", "content": ["line"]}), "'content'")
    assert failed(run("edit", {"path": "a.txt", "search": {"a": 1}, "replace": "b"}), "'search'")
    assert failed(run("glob", {"pattern": "*" * 5000}), "bad arguments", "too long")


def test_wrong_types_in_lists_and_booleans_are_bad_arguments(run):
    assert failed(run("grep", {"pattern": "x", "paths": [["a"]]}), "'paths[0]'")
    assert failed(run("grep", {"pattern": "x", "paths": {"a": 1}}), "'paths'")
    assert failed(run("grep", {"pattern": "x", "ignore_case": "maybe"}), "'ignore_case'")
    assert failed(run("todo_update", {"todo_id": 1, "status": "done-ish"}), "one of pending")


def test_bad_arguments_differ_from_a_tool_that_failed(run):
    bad = run("read", {"path": "a.txt", "offset": "x"})
    missing = run("read", {"path": "a.txt"})
    assert bad["error"].startswith("bad arguments:")
    assert failed(missing, "file not found")
    assert not missing["error"].startswith("bad arguments")


# --------------------------------------------------------------------------- coercion


def test_numbers_and_booleans_sent_as_strings_are_accepted(run, workspace):
    (workspace / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    result = run("read", {"path": "a.txt", "offset": "2", "limit": " 2 "})
    assert result["content"] == "two\nthree\n"
    assert run("read", {"path": "a.txt", "offset": 3.0})["content"] == "three\nfour\n"
    found = run("grep", {"pattern": "TWO", "ignore_case": "true"})
    assert [m["text"] for m in found["matches"]] == ["two"]
    assert run("grep", {"pattern": "TWO", "ignore_case": "false"})["count"] == 0


def test_a_single_string_where_a_list_is_expected(run, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("needle\n")
    (workspace / "b.py").write_text("needle\n")
    single = run("grep", {"pattern": "needle", "paths": "src"})
    assert [m["file"] for m in single["matches"]] == ["src/a.py"]
    encoded = run("grep", {"pattern": "needle", "paths": '["src", "b.py"]'})
    assert [m["file"] for m in encoded["matches"]] == ["src/a.py", "b.py"]
    glob_like = run("grep", {"pattern": "needle", "paths": "[b]*.py"})
    assert [m["file"] for m in glob_like["matches"]] == ["b.py"]


def test_arguments_as_json_text_even_encoded_twice(run, workspace):
    (workspace / "a.txt").write_text("hello\n")
    once = json.dumps({"path": "a.txt"})
    assert run("read", once)["content"] == "hello\n"
    assert run("read", json.dumps(once))["content"] == "hello\n"


def test_empty_or_null_arguments_mean_none_and_null_optionals_are_absent(run, workspace):
    for raw in (None, "", "  ", {}, "{}"):
        assert run("todo_list", raw)["success"] is True
    (workspace / "a.txt").write_text("x\n")
    assert run("read", {"path": "a.txt", "offset": None, "limit": None})["content"] == "x\n"


def test_enum_values_are_matched_without_regard_to_case(run):
    run("todo_add", {"description": "a"})
    result = run("todo_update", {"todo_id": "1", "status": "In_Progress"})
    assert result["todo"]["status"] == "in_progress"


# --------------------------------------------------------------------------- tool failures


def _toolset(*functions) -> Toolset:
    return Toolset([make_tool(f) for f in functions])


def test_a_tool_bug_becomes_an_error_result(ctx):
    def tool_broken(ctx, path: str) -> dict:
        """Always breaks."""
        raise KeyError(path)

    result = _toolset(tool_broken).execute(ctx, "broken", {"path": "x"})
    assert failed(result, "broken failed: KeyError")


def test_argument_and_tool_errors_raised_inside_a_tool(ctx):
    def tool_picky(ctx, value: int) -> dict:
        """Refuses things."""
        if value < 0:
            raise ArgumentError("value must not be negative")
        raise ToolError("the service is down")

    tools = _toolset(tool_picky)
    assert tools.execute(ctx, "picky", {"value": -1})["error"] == (
        "bad arguments: value must not be negative"
    )
    assert tools.execute(ctx, "picky", {"value": 1})["error"] == "the service is down"


def test_odd_results_are_made_into_proper_results(ctx):
    def tool_nothing(ctx) -> dict:
        """Returns None."""

    def tool_listy(ctx) -> dict:
        """Returns a list."""
        return [1, 2]

    def tool_silent_failure(ctx) -> dict:
        """Fails without an error."""
        return {"success": False}

    def tool_paths(ctx) -> dict:
        """Returns a Path and a set."""
        return {"where": Path("a") / "b", "tags": {1}}

    tools = _toolset(tool_nothing, tool_listy, tool_silent_failure, tool_paths)
    assert tools.execute(ctx, "nothing", {}) == {"success": True}
    assert failed(tools.execute(ctx, "listy", {}), "returned list")
    assert failed(tools.execute(ctx, "silent_failure", {}), "silent_failure failed")
    result = tools.execute(ctx, "paths", {})
    assert result == {"where": "a/b", "tags": "{1}", "success": True}


def test_results_and_text_arguments_are_valid_utf8(ctx, run):
    def tool_echo(ctx, text: str) -> dict:
        """Echoes text."""
        return {"text": text, "raw": "\udcff"}

    def tool_circular(ctx) -> dict:
        """Returns a cycle."""
        cycle: dict = {}
        cycle["self"] = cycle
        return cycle

    tools = _toolset(tool_echo, tool_circular)
    echoed = tools.execute(ctx, "echo", '{"text": "a\\ud800b"}')
    assert echoed == {"text": "a?b", "raw": "?", "success": True}
    json.dumps(echoed, ensure_ascii=False).encode("utf-8")
    assert failed(tools.execute(ctx, "circular", {}), "circular failed", "not JSON")
    assert failed(run("read", {"path": "\ud800.txt"}), "file not found: ?.txt")
