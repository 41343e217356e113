"""How many tokens messages take: a cheap estimate, used until the server reports usage."""

from __future__ import annotations


def message_chars(message: dict) -> int:
    size = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        size += len(function.get("name", "")) + len(str(function.get("arguments", "")))
    return size


def estimate_tokens(messages: list[dict]) -> int:
    """A cheap estimate (4 characters a token, plus framing); server usage figures win."""
    return sum(message_chars(m) // 4 + 4 for m in messages)
