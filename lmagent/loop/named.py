"""The files and folders a task names, shown to the model with the task, as a user attaches
them: a small model that sees calc.py fixes it; one that must first think of reading it
guesses what it holds instead (measured on Qwen2.5-Coder-1.5B: it "fixed" a calc.py it never
read, four times). They are read with the read and ls tools, so the workspace's rules hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# a word with a file extension (calc.py, logs/app.log) or a folder written with its slash (src/)
NAMED_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]+|(?:[\w-][\w.-]*/)+)(?![\w/-])"
)
MAX_NAMED = 6  # paths looked at
SHOWN_CHARS = 3000  # of file contents in all (about 800 tokens): the rest are named only
LISTED_ENTRIES = 30
FOLDER_FILES = 10  # of a named folder's files, shown while the budget lasts

Look = Callable[[str, dict], dict]  # runs a tool by name with arguments, returns its result


def named_paths(task: str) -> list[str]:
    """The paths a task names, in order, each once."""
    found = [match.group(1) for match in NAMED_PATH.finditer(task)]
    return list(dict.fromkeys(path.removeprefix("./") for path in found))[:MAX_NAMED]


def named_files_message(task: str, look: Look) -> str:
    """A user message showing the files (whole, within SHOWN_CHARS) and folders (listed) the
    task names that exist in the workspace; blank when it names none."""
    parts, budget = [], SHOWN_CHARS
    for path in named_paths(task):
        shown, budget = _shown(path.rstrip("/"), look, budget)
        if shown:
            parts.append(shown)
    if not parts:
        return ""
    return "The files and folders named in the task, as they are now:\n\n" + "\n\n".join(parts)


def _shown(path: str, look: Look, budget: int) -> tuple[str, int]:
    """(what is shown of `path`, the budget left): a file whole; a folder listed, and its
    files shown too while they fit (a small folder is read as a whole)."""
    read = look("read", {"path": path})
    if read.get("success"):
        return _file(path, read, budget)
    listed, files = _listed(path, look)
    parts = [listed] if listed else []
    for name in files:
        shown, budget = _file(f"{path}/{name}", look("read", {"path": f"{path}/{name}"}), budget)
        if shown and budget > 0:
            parts.append(shown)
    return "\n\n".join(parts), budget


def _file(path: str, read: dict, budget: int) -> tuple[str, int]:
    if not read.get("success"):
        return "", budget
    content = str(read.get("content", ""))
    if read.get("truncated") or len(content) > budget:
        return f"{path}: {read.get('total_lines', '?')}+ lines, too long to show here", budget
    return f"{path}\n{_fenced(content)}", budget - len(content)


def _fenced(content: str) -> str:
    fence = "````" if "```" in content else "```"
    ending = "" if content.endswith("\n") else "\n"
    return f"{fence}\n{content}{ending}{fence}"


def _listed(path: str, look: Look) -> tuple[str, list[str]]:
    """(the folder's listing, the names of the files in it when there are few)."""
    listed = look("ls", {"path": path})
    if not listed.get("success"):
        return "", []
    entries = listed.get("entries") or []
    names = [e["name"] + ("/" if e.get("type") == "dir" else "") for e in entries]
    more = listed.get("count", len(names)) - len(names[:LISTED_ENTRIES])
    text = f"{path}/ holds: " + (", ".join(names[:LISTED_ENTRIES]) or "nothing")
    files = [e["name"] for e in entries if e.get("type") == "file"]
    return text + (f" and {more} more" if more > 0 else ""), files[:FOLDER_FILES]
