"""Words for people: a count with its noun in the right number, and text shortened at a word
boundary (never mid-word) or at its middle (between lines where it has lines), saying that
something was left out."""

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


def cut_middle(text: str, limit: int, marker: str) -> str:
    """`text` with its middle left out to keep about `limit` characters, `marker` (formatted
    with how many were left out) in their place; where the text has lines, whole lines are
    kept (a cut mid-word, "…gument is not a string", misled a small model)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    head, tail = text[:half], text[-half:]
    line_end, line_start = head.rfind("\n"), tail.find("\n")
    if line_end > half // 2:
        head = head[: line_end + 1]
    if 0 <= line_start < half // 2:
        tail = tail[line_start + 1 :]
    return head + marker.format(len(text) - len(head) - len(tail)) + tail
