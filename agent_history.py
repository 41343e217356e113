"""The conversation as recorded and as sent: assistant and tool-result messages built from a
reply, the view that keeps every tool call paired with its result (servers reject orphans),
and the repair of calls a crash left without a result."""

from __future__ import annotations

import json

from agent_sessions import Session
from llm_client import Reply

TOOL_RESULT_CHARS = 30_000  # a longer result is cut in the middle
CALL_CUT_OFF = "the run stopped before this call finished"


def assistant_message(reply: Reply, native_calls: list[dict]) -> dict:
    """The reply as recorded. Its thinking is kept for the transcript (`reasoning`); requests
    never carry it (llm_client.clean_message)."""
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning"] = reply.reasoning
    if native_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": _history_arguments(c)},
            }
            for c in native_calls
        ]
    return message


def result_messages(calls: list[dict], results: list[dict], native: bool) -> list[dict]:
    """The history messages carrying tool results: one per native call, or one user message
    with every result of calls written as text."""
    pairs = zip(calls, results, strict=True)
    if native:
        return [
            {"role": "tool", "tool_call_id": call["id"], "content": _result_text(result)}
            for call, result in pairs
        ]
    text = "\n".join(
        f'<tool_result name="{call["name"]}">{_result_text(result)}</tool_result>'
        for call, result in pairs
    )
    return [{"role": "user", "content": text}]


def _history_arguments(call: dict) -> str:
    """Arguments as stored for the server: a JSON object text (servers reject anything else)."""
    arguments = call["arguments"]
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return "{}"
    return arguments if isinstance(value, dict) else "{}"


def _result_text(result: dict) -> str:
    text = json.dumps(result, ensure_ascii=False)
    if len(text) > TOOL_RESULT_CHARS:
        half = TOOL_RESULT_CHARS // 2
        text = text[:half] + f" …[{len(text) - TOOL_RESULT_CHARS} characters cut]… " + text[-half:]
    return text


def _missing_result(call_id: str) -> dict:
    content = json.dumps({"success": False, "error": CALL_CUT_OFF})
    return {"role": "tool", "tool_call_id": call_id, "content": content}


class PairedHistory:
    """The history as sent: every assistant tool call directly followed by its result (a missing
    one is filled in), and no tool message without its call. Servers reject either.

    Only messages appended since the last call are examined, so a step costs the same at step
    500 as at step 10; a rewrite of the history (compaction) starts over."""

    def __init__(self):
        self.revision: int | None = None
        self.seen = 0
        self.out: list[dict] = []
        self.waiting: list[str] = []  # ids of the latest calls still without a result

    def __call__(self, session: Session) -> list[dict]:
        history = session.history
        if session.revision != self.revision or self.seen > len(history):
            self.__init__()
            self.revision = session.revision
        for message in history[self.seen :]:
            self.add(message)
        self.seen = len(history)
        return self.out + [_missing_result(call_id) for call_id in self.waiting]

    def add(self, message: dict) -> None:
        if message.get("role") == "tool":
            if message.get("tool_call_id") in self.waiting:
                self.waiting.remove(message["tool_call_id"])
                self.out.append(message)
            return
        if self.waiting:
            self.out.extend([_missing_result(call_id) for call_id in self.waiting])
        self.out.append(message)
        calls = message.get("tool_calls")
        self.waiting = [c["id"] for c in calls] if calls else []


def repair_history(session: Session) -> None:
    """Record a result for every call of the last step that has none (a crash cut it short)."""
    history = session.history
    index = len(history) - 1
    while index >= 0 and history[index].get("role") == "tool":
        index -= 1
    if index < 0 or not history[index].get("tool_calls"):
        return
    answered = {m.get("tool_call_id") for m in history[index + 1 :]}
    for call in history[index]["tool_calls"]:
        if call["id"] not in answered:
            session.append(_missing_result(call["id"]))
