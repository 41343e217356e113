"""What a terminal shows of a tool result besides its ✓/✗ line: the end of a command's output
(dimmed when it succeeded, with a note of how much was cut) and the diff of what a step
changed, coloured. Long output never floods the screen; all of it stays in the transcript."""

from __future__ import annotations

import re

OUTPUT_LINES = 12  # last lines of a command's output shown
DIFF_LINES = 60  # lines of a step's diff shown
LINE_CHARS = 300
CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
GUTTER = "    │ "


def result_lines(event: dict) -> list[tuple[str, str]]:
    """(text, colour) lines to print under a tool result."""
    result = event.get("result") or {}
    lines = []
    output = result.get("output") if isinstance(result, dict) else None
    if isinstance(output, str) and output.strip():
        lines += output_tail(output, failed=not event.get("success"))
    if event.get("diff"):
        lines += diff_lines(event["diff"])
    return lines


def output_tail(output: str, failed: bool) -> list[tuple[str, str]]:
    """The last OUTPUT_LINES lines, dimmed unless the command failed."""
    lines = output.rstrip("\n").splitlines()
    shown = lines[-OUTPUT_LINES:]
    colour = "" if failed else "dim"
    result = []
    if len(lines) > len(shown):
        cut = len(lines) - len(shown)
        result.append(
            (f"{GUTTER}… {cut} earlier line(s) not shown (kept in the transcript)", "dim")
        )
    return result + [(GUTTER + clean(line), colour) for line in shown]


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """The diff with added lines green, removed red and hunk headers cyan, capped."""
    lines = diff.rstrip("\n").splitlines()
    result = [(GUTTER + clean(line), diff_colour(line)) for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        more = len(lines) - DIFF_LINES
        result.append((f"{GUTTER}… {more} more diff line(s); see --checkpoints", "dim"))
    return result


def approval_lines(tool: str, arguments: dict) -> list[tuple[str, str]]:
    """What a permission prompt shows before asking: the change a write or edit would make
    (as diff lines) or the command a shell call would run; nothing for other tools."""
    path, command = arguments.get("path"), arguments.get("command")
    if tool == "write" and isinstance(arguments.get("content"), str):
        added = ["+" + line for line in arguments["content"].splitlines()]
        return diff_lines("\n".join([f"+++ {path} (whole new content)", *added]))
    if tool == "edit" and isinstance(arguments.get("search"), str):
        removed = ["-" + line for line in arguments["search"].splitlines()]
        added = ["+" + line for line in str(arguments.get("replace", "")).splitlines()]
        return diff_lines("\n".join([f"--- {path}", f"+++ {path}", *removed, *added]))
    if tool == "shell" and isinstance(command, str):
        return [(f"{GUTTER}$ {clean(line)}", "bold") for line in command.splitlines()]
    return []


def diff_colour(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git", "index ")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return "cyan" if line.startswith("@@") else ""


def clean(line: str) -> str:
    """A line safe to print: no terminal escapes or control characters, cut to LINE_CHARS."""
    line = CONTROL.sub("", line.replace("\t", "    "))
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " …"
