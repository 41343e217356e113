"""Compaction: the history is summarised deterministically (task, project context and recorded
progress kept) before it overflows the model's context window.
"""

from __future__ import annotations

from lmagent.llm.tokens import estimate_tokens


class Compactor:
    """Keeps the context under a token threshold: the recent tail stays, the head is summarised.

    The original task (first message) is folded into the summary message verbatim, so it is
    never lost; tool results always stay paired with their calls. Given a token budget, the
    tail is cut well below the threshold, so compaction is rare (and a server's prompt cache
    stays useful between steps) instead of trimming a message or two on every step.
    """

    def __init__(self, threshold: int, keep_recent: int = 10):
        self.threshold = threshold
        self.keep_recent = keep_recent  # newest messages always kept (fewer with a budget)

    def too_big(self, tokens: int) -> bool:
        return tokens > self.threshold

    def cut_point(
        self, history: list[dict], budget: int | None = None, keep: int | None = None
    ) -> int | None:
        """Index where the kept tail starts, or None when there is nothing to compact.

        Without a budget the newest `keep_recent` messages are kept; with one, the newest
        messages that fit in `budget` tokens (at least `keep`, default 2). The tail then starts
        at an assistant message: tool results stay with the call that made them, and the
        summary (a user message) is followed by an assistant turn."""
        if budget is None:
            end = len(history) - (self.keep_recent if keep is None else keep)
        else:
            end = _fitting_tail(history, budget, 2 if keep is None else keep)
        end = min(end, len(history) - 1)
        while end > 1 and history[end].get("role") != "assistant":
            end -= 1
        if end <= 1:
            return None
        return end

    def compact(
        self, history: list[dict], budget: int | None = None, keep: int | None = None
    ) -> tuple[int, dict] | None:
        """Return (end, summary message) replacing history[0:end], or None."""
        end = self.cut_point(history, budget, keep)
        if end is None:
            return None
        return end, {"role": "user", "content": summarize(history[:end])}


def _fitting_tail(history: list[dict], budget: int, keep: int) -> int:
    """Start of the longest tail that fits in `budget` tokens, holding at least `keep` messages."""
    end, used = len(history), 0
    while end > 1:
        cost = estimate_tokens([history[end - 1]])
        if len(history) - end >= keep and used + cost > budget:
            break
        used += cost
        end -= 1
    return end


SUMMARY_MARK = "[Earlier progress, compacted to save context]"


def summarize(messages: list[dict], limit: int = 4000) -> str:
    """Deterministic summary: the original task verbatim, then one line per earlier step."""
    task = str(messages[0].get("content") or "")
    if SUMMARY_MARK in task:
        task, _, earlier = task.partition("\n\n" + SUMMARY_MARK + "\n")
        lines = earlier.splitlines()
    else:
        lines = []
    for message in messages[1:]:
        lines.extend(_summary_lines(message))
    text = "\n".join(lines)
    if len(text) > limit:
        text = "…\n" + text[-limit:]
    return f"{task}\n\n{SUMMARY_MARK}\n{text}"


def _summary_lines(message: dict) -> list[str]:
    role = message.get("role")
    content = " ".join(str(message.get("content") or "").split())
    if role == "assistant":
        lines = [
            f"- you called {c['function']['name']}({_short(c['function'].get('arguments'))})"
            for c in message.get("tool_calls") or ()
        ]
        if content:
            lines.insert(0, f"- you said: {_short(content, 160)}")
        return lines
    if role == "tool":
        ok = '"success": true' in content or '"success":true' in content
        return [f"  → {'ok' if ok else 'failed'}: {_short(content, 120)}"]
    if role == "user":
        return [f"- user: {_short(content, 300)}"]
    return []


def _short(value: object, limit: int = 100) -> str:
    text = str(value if value is not None else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"
