"""Words for people: a count with its noun in the right number, and text shortened at a word
boundary (never mid-word), an ellipsis saying that something was left out."""

from __future__ import annotations

ELLIPSIS = "…"


def counted(count: int, one: str, many: str = "") -> str:
    """1 iteration, 2 iterations, 0 tokens; `many` for a plural that is not `one` + s."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def shortened(text: str, limit: int) -> str:
    """`text` whole when it fits in `limit` characters, else cut at the last space before the
    limit (mid-word only for a single word longer than it), with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[: max(1, limit - len(ELLIPSIS))]
    cut = head.rfind(" ")
    if cut > 0 and not text[len(head)].isspace():
        head = head[:cut]
    return head.rstrip(" ,;:(") + ELLIPSIS
