"""A recorded session as the events a live run sends, so the page draws a reopened session with
the renderer that draws a live one (static/js/log.js `draw`).

From the transcript: the user's messages as `user` events; an assistant message as `thinking`
and `token` events, then a `tool_call` per call; its results as `tool_result` events (from
"tool" messages, or from the one user message that carries every result of calls written as
text: `<tool_result name=…>…</tool_result>`); and what the agent told the model in a user
message of its own (a restore: `note` in the record) as a `note` event, never as the user's.
Each reply starts with an `iteration` event, as live.
"""

from __future__ import annotations

import json
import re
from functools import cache

from lmagent.llm.toolcalls import FormatError, extract_text_calls
from lmagent.loop.history import RESULT_TAG, TEXT_FIELDS
from lmagent.tools.toolset import base_tools
from lmagent.web.runs import shrink_event

_TAG = re.escape(RESULT_TAG)
TEXT_RESULT = re.compile(_TAG + r' name="([^"]*)">(.*?)</tool_result>(?=\n' + _TAG + r"|\Z)", re.S)
# restore notes recorded before they carried `note` (loop/restore.py restore_note)
OLD_RESTORE_NOTE = "[The user restored the workspace files to how they were before step "


def transcript_events(transcript: list[dict]) -> list[dict]:
    """The events that draw `transcript` as the live run drew it."""
    events: list[dict] = []
    calls: dict[str, str] = {}  # native call id -> tool name
    text_calls: list[dict] = []  # the calls the last assistant message wrote as text
    for index, message in enumerate(transcript):
        role, content = message.get("role"), _text(message.get("content"))
        if role == "assistant":
            events.append({"type": "iteration"})
            events.extend(_assistant(message, content, calls))
            text_calls = [] if message.get("tool_calls") else _written_calls(content)
        elif role == "tool":
            name = calls.get(str(message.get("tool_call_id")), "?")
            events.append(_result(str(message.get("tool_call_id")), name, _decoded(content)))
        elif role == "user" and (results := _text_results(content)):
            events.extend(_answered(index, text_calls, results))
        elif role == "user" and _is_note(message, content):
            events.append({"type": "note", "text": content, "note": message.get("note", "")})
        elif role == "user":
            events.append({"type": "user", "text": content})
    return [shrink_event(event) for event in events]


def _assistant(message: dict, content: str, calls: dict[str, str]) -> list[dict]:
    events = []
    if message.get("reasoning"):
        events.append({"type": "thinking", "text": _text(message["reasoning"])})
    if content.strip():
        events.append({"type": "token", "text": content})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls[call.get("id")] = function.get("name", "?")
        events.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name", "?"),
                "arguments": function.get("arguments", ""),
            }
        )
    return events


def _answered(index: int, written: list[dict], results: list[tuple[str, object]]) -> list[dict]:
    """tool_call and tool_result events for calls written as text: their arguments from the
    reply when it reads as the same calls, else only their names."""
    names = [name for name, _ in results]
    same = [call.get("name") for call in written] == names
    events = []
    for number, (name, result) in enumerate(results):
        call_id = f"m{index}_{number}"
        arguments = written[number].get("arguments", "") if same else ""
        events.append({"type": "tool_call", "id": call_id, "name": name, "arguments": arguments})
        events.append(_result(call_id, name, result))
    return events


def _result(call_id: str, name: str, result: object) -> dict:
    success = isinstance(result, dict) and bool(result.get("success"))
    return {
        "type": "tool_result",
        "id": call_id,
        "name": name,
        "result": result,
        "success": success,
    }


def _is_note(message: dict, content: str) -> bool:
    return bool(message.get("note")) or content.startswith(OLD_RESTORE_NOTE)


def _text_results(content: str) -> list[tuple[str, object]]:
    """The results in a user message that carries the results of calls written as text (one
    tag after another, a line apart: loop/history.py), or [] when it is not one."""
    if not content.startswith(RESULT_TAG):
        return []
    found, end = [], -1
    for match in TEXT_RESULT.finditer(content):
        if match.start() != end + 1:
            return []
        found.append((match.group(1), _decoded(match.group(2))))
        end = match.end()
    return found if end == len(content) else []


def _decoded(text: str) -> object:
    """A recorded result: its JSON object, or the form a text-calling model reads (the other
    fields as JSON, then `output:` or `content:` and the text as it is), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    head, _, rest = text.partition("\n")
    field, _, body = rest.partition(":\n")
    try:
        fields = json.loads(head)
    except ValueError:
        return text
    if not isinstance(fields, dict) or field not in TEXT_FIELDS:
        return text
    return {**fields, field: body}


def _written_calls(content: str) -> list[dict]:
    try:
        return extract_text_calls(content, _parameters(), blocks=True)
    except FormatError:
        return []


@cache
def _parameters() -> dict[str, list[str]]:
    return {tool.name: list(tool.parameters.get("properties", {})) for tool in base_tools()}


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # a message with images: its text parts
        return "\n".join(str(p.get("text", "")) for p in value if isinstance(p, dict))
    return ""
