"""What a terminal shows of a tool result: a few words on its ✓ line (what ls, glob, grep or read
found), and under it the end of a command's output (dimmed when it succeeded, with a note of how
much was cut) and the diff of what a step changed, coloured. Long output never floods the screen;
all of it stays in the transcript."""

from __future__ import annotations

OUTPUT_LINES = 12  # last lines of a command's output shown
DIFF_LINES = 60  # lines of a step's diff shown
LINE_CHARS = 300
SUMMARY_NAMES = 8  # names a ✓ line lists of what ls, glob or grep found
# what a terminal would act on rather than show: C0 controls but newline and tab, DEL, C1
# controls, and the bidirectional controls that reorder what a line seems to say
CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# C0 as \x1b; DEL, C1 and bidi as \u009b, which JSON reads as the same character (JSON output
# holds no raw C0: its encoder escapes them), so JSON stays valid when shown through escape()
ESCAPES = {code: f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}" for code in CONTROLS + BIDI}
GUTTER = "    │ "
BAR_WIDTH = 20


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


def result_summary(result: object) -> str:
    """A few words on what a file tool found, for its ✓ line: ls's entries, glob's and grep's
    matches, read's lines ("" for other results)."""
    if not isinstance(result, dict):
        return ""
    if isinstance(result.get("entries"), list):
        names = [_entry_name(entry) for entry in result["entries"] if isinstance(entry, dict)]
        return _counted(result.get("count", len(names)), "entry", "entries", names)
    if isinstance(result.get("matches"), list):
        names = [_match_name(match) for match in result["matches"]]
        return _counted(result.get("count", len(names)), "match", "matches", names)
    if isinstance(result.get("process_id"), str) and "running" in result:
        state = "running" if result["running"] else f"exited {result.get('exit_code')}"
        return f"{clean(result['process_id'])} {state} in the background"
    if "total_lines" in result:
        return f"{result.get('path')}, lines {result.get('lines')} of {result['total_lines']}"
    return ""


def _entry_name(entry: dict) -> str:
    return f"{entry.get('name')}{'/' if entry.get('type') == 'dir' else ''}"


def _match_name(match: object) -> str:
    return f"{match.get('file')}:{match.get('line')}" if isinstance(match, dict) else str(match)


def _counted(count: object, one: str, many: str, names: list[str]) -> str:
    listed = ", ".join(clean(name) for name in names[:SUMMARY_NAMES])
    more = ", …" if len(names) > SUMMARY_NAMES or count != len(names) else ""
    return f"{count} {one if count == 1 else many}" + (f": {listed}{more}" if listed else "")


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


def approval_lines(tool: str, arguments: dict, preview: str = "") -> list[tuple[str, str]]:
    """What a permission prompt shows before asking: the change a write or edit would make
    (`preview`, the diff against the file as it is), or the command a shell call would run;
    nothing for other tools."""
    command = arguments.get("command")
    if preview:
        return diff_lines(preview)
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


def escape(text: str) -> str:
    """`text` as a terminal shows it, never acts on it: every control character but newline and
    tab (ESC, CR, backspace, C1, bidi controls) written out as \\x1b, \\u202e. The one function
    every terminal output goes through: names, commands, tool output and model text are the
    model's to choose."""
    return text.replace("\r\n", "\n").translate(ESCAPES)  # CRLF only ends a line


def clean(line: str) -> str:
    """One line safe to print: escaped, tabs as spaces, cut to LINE_CHARS."""
    line = escape(line.replace("\t", "    "))
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " …"


def progress_text(event: dict) -> str:
    """One line for a `progress` event: what is being waited for, for how long, and, when the
    server reports its reading of the prompt, a bar and the time left."""
    elapsed = clock(event.get("elapsed") or 0)
    if event.get("phase") == "tool":
        return f"running {clean(str(event.get('name')))} · {elapsed}"
    total, processed = event.get("total"), event.get("processed") or 0
    if not total:
        return f"reading the prompt · ~{event.get('tokens') or 0:,} tokens · {elapsed}"
    filled = round(BAR_WIDTH * processed / total)
    bar = "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]"
    left = f" · ~{clock(event['eta'])} left" if event.get("eta") is not None else ""
    return (
        f"reading the prompt {bar} {100 * processed // total}% · {processed:,}/{total:,} tokens"
        f" · {elapsed}{left}"
    )


def clock(seconds: float) -> str:
    """12 s, 3 min 05 s."""
    seconds = int(seconds)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"
