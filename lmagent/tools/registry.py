"""The tool registry: typed functions whose JSON schemas are derived from their signatures.

A tool never raises into the loop: bad arguments, refused paths and failures all come back as
`{"success": false, "error": ...}` that the model can act on.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import threading
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from lmagent.core.config import Config
from lmagent.core.stop import StopToken
from lmagent.core.workspace import PathError, Workspace
from lmagent.llm.toolcalls import MAX_NESTING, nesting_depth
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import open_sandbox
from lmagent.sessions.store import Session


class ToolError(Exception):
    """The tool ran but failed; the message is shown to the model."""


class ArgumentError(ToolError):
    """The model's arguments were wrong (missing, unknown, wrong type)."""


class Services:
    """Long-lived parts shared by every run of one process (the sandbox, MCP servers)."""

    def __init__(self, config: Config):
        self.config = config
        self._lock = threading.Lock()
        self._sandbox = None
        self.extra_tools: list[Tool] = []  # e.g. MCP tools, added by the front end at start-up

    def sandbox(self):
        """The sandbox for this workspace, started on first use (raises SandboxUnavailable)."""
        with self._lock:
            if self._sandbox is None:
                self._sandbox = open_sandbox(SandboxConfig.from_config(self.config))
            return self._sandbox

    def running_sandbox(self):
        """The sandbox if one has been started, else None (never starts one)."""
        return self._sandbox

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None


@dataclass
class ToolContext:
    """What a tool may use while it runs."""

    config: Config
    workspace: Workspace
    session: Session
    services: Services
    stop: StopToken = field(default_factory=StopToken)
    emit: Callable[[dict], None] = lambda event: None
    ask: Callable[[str, dict], str] | None = None
    depth: int = 0
    agent_id: str = "main"
    extras: dict = field(
        default_factory=dict
    )  # front-end specific (e.g. the run's permission mode)


@dataclass(frozen=True)
class Existing:
    """Marks a path parameter that names an existing file or folder (in its Annotated
    metadata): constrained calls choose its value among the workspace's (Toolset.choosing)."""

    kind: str  # "file" | "dir"


EXISTING_FILE, EXISTING_DIR = Existing("file"), Existing("dir")


@dataclass
class Tool:
    name: str
    function: Callable[..., dict]
    description: str
    parameters: dict
    changes_things: bool = False  # asks permission in normal mode
    existing: dict[str, str] = field(default_factory=dict)  # parameter -> "file" | "dir"

    def schema(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


# --------------------------------------------------------------------------- schema derivation

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


def _json_schema(annotation: Any) -> dict:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        base, *meta = typing.get_args(annotation)
        schema = _json_schema(base)
        descriptions = [m for m in meta if isinstance(m, str)]
        if descriptions:
            schema["description"] = descriptions[0]
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_schema(options[0])
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(annotation))}
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": _json_schema(item)}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    return {}


def make_tool(function: Callable[..., dict], changes_things: bool = False, name: str = "") -> Tool:
    """Build a Tool from a typed function whose first parameter is the ToolContext."""
    hints = typing.get_type_hints(function, include_extras=True)
    properties, required, existing = {}, [], {}
    for param in list(inspect.signature(function).parameters.values())[1:]:
        hint = hints.get(param.name, str)
        properties[param.name] = _json_schema(hint)
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        for marker in getattr(hint, "__metadata__", ()):
            if isinstance(marker, Existing):
                existing[param.name] = marker.kind
    doc = inspect.getdoc(function) or ""
    return Tool(
        name=name or function.__name__.removeprefix("tool_"),
        function=function,
        description=doc.strip(),
        parameters={"type": "object", "properties": properties, "required": required},
        changes_things=changes_things,
        existing=existing,
    )


# --------------------------------------------------------------------------- argument handling


TOO_DEEP = (
    f"arguments are nested more than {MAX_NESTING} levels deep; send a flatter JSON object "
    'like {"path": "file.txt"}'
)


def parse_arguments(raw: object) -> dict:
    """Arguments as a dict; a JSON string (even one encoded twice) is decoded. Arguments that
    nest more than MAX_NESTING levels (or more than the decoder can) are refused."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    value = raw
    for _ in range(2):  # small models sometimes send '"{\\"path\\": ...}"'
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except RecursionError:
            raise ArgumentError(TOO_DEEP) from None
        except ValueError as exc:
            raise ArgumentError(
                f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
                'send a JSON object like {"path": "file.txt"}'
            ) from None
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments must be a JSON object, not {type(value).__name__}")
    if nesting_depth(value) > MAX_NESTING:
        raise ArgumentError(TOO_DEEP)
    return value


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _coerce(name: str, value: Any, schema: dict) -> Any:
    """The value in the schema's type; the lenient conversions a small model needs."""
    kind = schema.get("type")
    try:
        value = _convert(name, kind, value, schema)
    except (ValueError, TypeError):
        raise ArgumentError(
            f"argument '{name}' must be of type {kind}, got {value!r:.60}"
        ) from None
    if "enum" in schema:
        options = {str(option).casefold(): option for option in schema["enum"]}
        if str(value).casefold() not in options:
            raise ArgumentError(
                f"argument '{name}' must be one of {', '.join(map(str, schema['enum']))}, "
                f"got {value!r:.60}"
            )
        value = options[str(value).casefold()]
    return value


def _convert(name: str, kind: str | None, value: Any, schema: dict) -> Any:
    if isinstance(value, bool) and kind in ("integer", "number"):
        raise TypeError  # True is not a count
    if kind == "integer":
        if isinstance(value, int):
            return value
        text = str(value).strip()
        with contextlib.suppress(ValueError):
            return int(text)
        number = float(text)  # "5.0" and 5.0 are fine, 5.5 is not
        if not number.is_integer():
            raise ValueError
        return int(number)
    if kind == "number":
        number = value if isinstance(value, int | float) else float(str(value).strip())
        if not math.isfinite(number):
            raise ValueError
        return number
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError
    if kind == "string":
        if isinstance(value, dict | list):
            raise TypeError
        return _valid_text(value if isinstance(value, str) else str(value))
    if kind == "array":
        if isinstance(value, str):  # '["a", "b"]' or a single item such as "src"
            parsed = _json_list(value)
            value = [value] if parsed is None else parsed
        if not isinstance(value, list):
            raise TypeError
        items = schema.get("items", {})
        return [_coerce(f"{name}[{i}]", item, items) for i, item in enumerate(value)]
    if kind == "object":
        value = json.loads(value) if isinstance(value, str) else value
        if not isinstance(value, dict):
            raise TypeError
    return value


def _valid_text(text: str) -> str:
    """The text with lone surrogates (JSON allows "\\ud800"; UTF-8 does not) replaced by "?"."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _json_list(text: str) -> list | None:
    if not text.strip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None  # e.g. the glob "[ab]*.py"
    return value if isinstance(value, list) else None


def bind_arguments(tool: Tool, raw: object) -> dict:
    args = parse_arguments(raw)
    properties = tool.parameters["properties"]
    unknown = sorted(set(args) - set(properties))
    if unknown:
        raise ArgumentError(
            f"unknown argument(s) {', '.join(unknown)} for {tool.name}; "
            f"expected: {', '.join(properties) or 'no arguments'}"
        )
    missing = [name for name in tool.parameters["required"] if args.get(name) is None]
    if missing:
        raise ArgumentError(f"missing required argument(s) for {tool.name}: {', '.join(missing)}")
    return {
        name: _coerce(name, value, properties[name])
        for name, value in args.items()
        if value is not None
    }


# --------------------------------------------------------------------------- tool sets


def _choosing(tool: Tool, paths: dict[str, list[str]]) -> dict:
    schema = tool.schema()
    if tool.existing:
        properties = dict(schema["function"]["parameters"]["properties"])
        for name, kind in tool.existing.items():
            properties[name] = {**properties[name], "enum": paths[kind]}
        schema["function"]["parameters"] = {
            **schema["function"]["parameters"],
            "properties": properties,
        }
    return schema


def _callable(tool: Tool, paths: dict[str, list[str]]) -> bool:
    """Whether every path `tool` needs to exist has something to name."""
    return all(paths.get(kind) for kind in tool.existing.values())


class Toolset:
    """The tools of one agent; anything not in here is refused, even if named. `offered` names
    the tools whose schemas go to the model (default: all); the others are on demand: named in
    one line of the prompt with their arguments, and run when called like any other."""

    def __init__(
        self,
        tools: list[Tool],
        offered: Iterable[str] | None = None,
        unnamed: Iterable[str] = (),
    ):
        self.tools = {tool.name: tool for tool in tools}
        shown = set(self.tools) if offered is None else set(offered)
        self.offered = [name for name in self.tools if name in shown]
        self.unnamed = set(unnamed)  # on demand, but not named in the prompt's line
        self._schemas = [self.tools[name].schema() for name in self.offered]  # one list, reused
        self._every_schema = [tool.schema() for tool in self.tools.values()]

    def __contains__(self, name: str) -> bool:
        return name in self.tools

    def names(self) -> list[str]:
        """Every tool that runs when called (offered or on demand)."""
        return list(self.tools)

    def schemas(self) -> list[dict]:
        """The schemas of the offered tools."""
        return self._schemas

    def on_demand(self) -> list[Tool]:
        return [tool for name, tool in self.tools.items() if name not in self.offered]

    def on_demand_line(self) -> str:
        """One line naming the tools on demand and their arguments (? = optional)."""
        named = [tool for tool in self.on_demand() if tool.name not in self.unnamed]
        return ", ".join(_signature(tool) for tool in named)

    def choosing(self, paths: dict[str, list[str]] | None) -> list[dict]:
        """The schemas with each existing-path parameter limited to the `paths` of its kind
        ("file"/"dir" -> paths): what constrained calls are held to. A tool with nothing to
        name (read in a workspace without files) is left out; no `paths` at all (a large
        workspace) leaves every parameter free. Tools on demand are in it too (a schema held
        to by the server costs no prompt tokens), so the model can call them."""
        if not paths:
            return self._every_schema
        tools = [tool for tool in self.tools.values() if _callable(tool, paths)]
        return [_choosing(tool, paths) for tool in tools]

    def without(self, *names: str) -> Toolset:
        kept = [t for n, t in self.tools.items() if n not in names]
        return Toolset(kept, self.offered, self.unnamed)

    def plus(self, tools: list[Tool]) -> Toolset:
        offered = [*self.offered, *(t.name for t in tools)]
        return Toolset([*self.tools.values(), *tools], offered, self.unnamed)

    def changes_things(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is None or tool.changes_things

    def execute(self, ctx: ToolContext, name: str, raw_arguments: object) -> dict:
        """Run a tool; every failure becomes an error result, never an exception.

        Errors read "bad arguments: ..." when the call was wrong (the model should fix its
        arguments), "<tool> failed: ..." when the tool itself broke, and otherwise say why the
        tool refused or could not do it (path outside the workspace, file not found, ...).
        """
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            shown = name if isinstance(name, str) else repr(name)
            return _failure(f"unknown tool '{shown:.80}'. Available tools: {', '.join(self.tools)}")
        try:
            result = tool.function(ctx, **bind_arguments(tool, raw_arguments))
        except ArgumentError as exc:
            return _failure(f"bad arguments: {exc}")
        except (ToolError, PathError) as exc:
            return _failure(str(exc))
        except Exception as exc:  # a tool bug must not end the user's run
            return _failure(f"{name} failed: {type(exc).__name__}: {exc}")
        return _finish(name, result)


def _signature(tool: Tool) -> str:
    """name(arg, optional?) as the prompt names a tool on demand."""
    required = tool.parameters["required"]
    names = [n if n in required else f"{n}?" for n in tool.parameters["properties"]]
    return f"{tool.name}({', '.join(names)})"


def _failure(error: str) -> dict:
    return {"success": False, "error": error}


def _finish(name: str, result: object) -> dict:
    """The tool's result as a JSON-safe dict with `success` (and `error` when it failed)."""
    if result is None:
        result = {}
    if not isinstance(result, dict):
        return _failure(f"{name} failed: it returned {type(result).__name__}, not an object")
    try:
        text = json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as exc:
        return _failure(f"{name} failed: its result is not JSON ({exc})")
    result = json.loads(_valid_text(text))
    result["success"] = bool(result.get("success", True))
    if not result["success"] and not result.get("error"):
        result["error"] = f"{name} failed without saying why"
    return result
