"""Constrained tool calls: the request carries a JSON schema (`response_format`) that admits
exactly one call of one offered tool with arguments valid for it, or a final answer, so the
server itself cannot produce anything else (TOOL_CALL_MODE=constrained).

The reply is one JSON object, either {"name": TOOL, "arguments": {...}} (the shape the prompt
already teaches for calls written as text) or {"answer": TEXT}. `AnswerStream` pulls the answer's
text out of the streamed JSON as it arrives, so the user sees prose, not JSON; `read_reply` turns
the finished object into a native-looking tool call or the answer text, so the history sent back
stays in the normal chat form.

Tool schemas are converted to what the servers' JSON-schema grammars support (types, properties,
required, items, enum, const, anyOf/oneOf, bounds; local $refs written out). A tool whose schema
cannot be expressed that way (a recursive $ref, allOf, not, pattern properties, ...) keeps its
name constrained and takes any object as arguments: the tool registry still checks them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ANSWER = "answer"
# keywords that only describe: left out of the grammar
_ANNOTATIONS = {"description", "title", "default", "examples", "$schema", "$comment", "format"}
_BOUNDS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")
_TYPES = {"string", "integer", "number", "boolean", "null", "array", "object"}
ANY_OBJECT = {"type": "object"}


class Unexpressible(ValueError):
    """A tool's parameter schema uses what the servers' grammars cannot express."""


# --------------------------------------------------------------------------- the schema


def reply_schema(tools: list[dict], calls: bool = True, answer: bool = True) -> dict:
    """The schema of a reply: one call of one of `tools` (OpenAI function definitions) with
    valid arguments, or {"answer": text}; without `calls` only the answer, without `answer`
    only a call (when there is a tool to call)."""
    functions = [tool["function"] for tool in tools if tool.get("type") == "function"]
    options = [_call_schema(function) for function in functions] if calls else []
    if options and not answer:
        return {"anyOf": options}
    reply = {
        "type": "object",
        "properties": {ANSWER: {"type": "string", "minLength": 1}},
        "required": [ANSWER],
        "additionalProperties": False,
    }
    return {"anyOf": [*options, reply]}


def _call_schema(function: dict) -> dict:
    try:
        parameters = function.get("parameters") or ANY_OBJECT
        arguments = _convert(parameters, _definitions(parameters))
    except Unexpressible:
        arguments = ANY_OBJECT  # this tool alone loses its argument grammar
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _definitions(schema: dict) -> dict:
    """The named sub-schemas a tool's schema refers to ($defs; pydantic writes them)."""
    found = schema.get("$defs") or schema.get("definitions") or {}
    return found if isinstance(found, dict) else {}


def _convert(schema: object, defs: dict, seen: tuple[str, ...] = ()) -> dict:
    """A JSON schema in the subset grammars support, references to `defs` written out;
    Unexpressible when that loses meaning (or a reference refers back to itself)."""
    if schema is True or schema == {}:
        return {}
    if not isinstance(schema, dict):
        raise Unexpressible(f"not a schema: {schema!r}")
    if "$ref" in schema:
        return _referred(schema["$ref"], defs, seen)
    out: dict = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS or key in ("$defs", "definitions"):
            continue
        if key == "type":
            out[key] = _checked_type(value)
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_convert(option, defs, seen) for option in value]
        elif key == "properties":
            out[key] = {name: _convert(sub, defs, seen) for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs, seen)
        elif key in ("required", "enum", "const", *_BOUNDS):
            out[key] = value
        elif key == "additionalProperties" and isinstance(value, bool):
            continue  # decided below: no invented argument names
        else:
            raise Unexpressible(f"{key} is not supported")
    if "properties" in out:
        out["additionalProperties"] = False
    return out


def _referred(ref: object, defs: dict, seen: tuple[str, ...]) -> dict:
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
    local = isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))
    if not local or name not in defs or name in seen:
        raise Unexpressible(f"the reference {ref!r} cannot be written out")
    return _convert(defs[name], defs, (*seen, name))


def _checked_type(value: object) -> str | list[str]:
    kinds = value if isinstance(value, list) else [value]
    if not kinds or any(kind not in _TYPES for kind in kinds):
        raise Unexpressible(f"unknown type {value!r}")
    return value


# --------------------------------------------------------------------------- the streamed answer


class AnswerStream:
    """Reads streamed JSON and hands back, as it arrives, the decoded text of the top-level
    "answer" string; everything else (braces, keys, a call) shows nothing."""

    def __init__(self):
        self.depth = 0
        self.in_string = False
        self.escape = ""  # an escape sequence being read ("\\", "\\u00")
        self.high = ""  # the first half of a surrogate pair, waiting for the second
        self.key = ""  # the last key read at the top level
        self.string = ""  # the string being read (a key) when not the answer
        self.expect_key = False
        self.in_answer = False

    def feed(self, text: str) -> str:
        shown = []
        for char in text:
            if self.in_string:
                piece = self._string_char(char)
                if piece and self.in_answer:
                    shown.append(piece)
            else:
                self._structure_char(char)
        return "".join(shown)

    def _structure_char(self, char: str) -> None:
        if char in "{[":
            self.depth += 1
            self.expect_key = char == "{" and self.depth == 1
        elif char in "}]":
            self.depth -= 1
        elif char == "," and self.depth == 1:
            self.expect_key = True
        elif char == '"':
            self.in_string, self.string = True, ""
            self.in_answer = self.depth == 1 and not self.expect_key and self.key == ANSWER

    def _string_char(self, char: str) -> str:
        """The decoded text `char` completes ("" inside an escape or at the closing quote)."""
        if self.escape:
            self.escape += char
            piece = _unescape(self.escape)
            if piece is None:
                return ""
            self.escape = ""
            piece, self.high = _pair(self.high, piece)
        elif char == "\\":
            self.escape = char
            return ""
        elif char == '"':
            self.in_string = False
            if self.depth == 1 and self.expect_key:
                self.key, self.expect_key = self.string, False
            return ""
        else:
            piece = char
        self.string += piece
        return piece


def _pair(high: str, piece: str) -> tuple[str, str]:
    """(text to show, surrogate still waiting): two escaped halves make one character."""
    if "\ud800" <= piece <= "\udbff":
        return high, piece
    if high and "\udc00" <= piece <= "\udfff":
        return (high + piece).encode("utf-16", "surrogatepass").decode("utf-16"), ""
    return high + piece, ""


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(sequence: str) -> str | None:
    """The text of a complete escape sequence; None while it is incomplete."""
    if sequence[1] != "u":
        return _ESCAPES.get(sequence[1], sequence[1])
    if len(sequence) < 6:
        return None
    try:
        return chr(int(sequence[2:6], 16))
    except ValueError:
        return sequence


# --------------------------------------------------------------------------- the finished reply


@dataclass
class Read:
    """What a constrained reply said: a call (name, arguments as JSON text) or an answer."""

    answer: str = ""
    name: str = ""
    arguments: str = ""


class CutOff(ValueError):
    """The reply is JSON that ended before it was complete (max_tokens)."""


class NotConstrained(ValueError):
    """The reply is not the schema's JSON at all: the server ignored the schema."""


def read_reply(text: str) -> Read:
    """The call or answer in a constrained reply. CutOff for JSON that stops early;
    NotConstrained for anything the schema would not have allowed."""
    text = text.strip()
    if not text.startswith("{"):
        raise NotConstrained("the reply is not a JSON object")
    try:
        data = json.loads(text)
    except ValueError:
        if _unfinished(text):
            raise CutOff("the reply stopped before its JSON was complete") from None
        raise NotConstrained("the reply is not valid JSON") from None
    if isinstance(data, dict) and set(data) == {ANSWER} and isinstance(data[ANSWER], str):
        return Read(answer=data[ANSWER])
    if (
        isinstance(data, dict)
        and set(data) == {"name", "arguments"}
        and isinstance(data["name"], str)
        and isinstance(data["arguments"], dict)
    ):
        return Read(name=data["name"], arguments=json.dumps(data["arguments"], ensure_ascii=False))
    raise NotConstrained("the reply's JSON is neither a call nor an answer")


def partial_answer(text: str) -> str | None:
    """The text of the answer an unfinished reply had begun (None when it began a call)."""
    stream = AnswerStream()
    shown = stream.feed(text)
    return shown if stream.key == ANSWER and stream.depth == 1 else None


def _unfinished(text: str) -> bool:
    """Whether `text` is a prefix of some JSON value (every bracket it opened still open)."""
    stream = AnswerStream()
    stream.feed(text)
    return stream.depth > 0 or stream.in_string
