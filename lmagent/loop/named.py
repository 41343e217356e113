"""The files and folders a task names, shown to the model with the task, as a user attaches
them: a small model that sees calc.py fixes it; one that must first think of reading it
guesses what it holds instead (measured on Qwen2.5-Coder-1.5B: it "fixed" a calc.py it never
read, four times). They are read with the read and ls tools, so the workspace's rules hold.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable

from lmagent.llm.toolcalls import LANGUAGE_SUFFIXES

# a word with a file extension (calc.py, logs/app.log) or a folder written with its slash (src/)
NAMED_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]+|(?:[\w-][\w.-]*/)+)(?![\w/-])"
)
NUMBER = re.compile(r"[\d.]+")  # 1.0 to 1.1: a version, not a file
EXAMPLE_BEFORE = re.compile(r"\b(?:like|e\.g\.|such as|for example|for instance)[\s:,]*$", re.I)
MAX_NAMED = 6  # paths looked at
SHOWN_CHARS = 3000  # of file contents in all (about 800 tokens): the rest are named only
OUTLINE_CHARS = 1200  # of a Python file too long to show: its imports and its first test
MAX_KEPT = 3  # files a run changed, shown again after a compaction (the last changed)
LISTED_ENTRIES = 30
COUNTED_LINES = 10  # a file longer than this is shown with its line count: a small model
# counts 17 lines as 1 or 32, and takes the count of a short file for the answer to its task
FOLDER_FILES = 10  # of a named folder's files, shown while the budget lasts
RESEMBLES = 0.5  # share of lines in common that makes a block a new version of a file
TOP_LEVEL_DEFINITION = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)", re.M)
METHOD = re.compile(r"^[ \t]+(?:async\s+)?def\s+(\w+)\s*\(\s*(?:self|cls)\b", re.M)

Look = Callable[[str, dict], dict]  # runs a tool by name with arguments, returns its result


def named_paths(task: str) -> list[str]:
    """The paths a task names, in order, each once."""
    found = [m.group(1) for m in NAMED_PATH.finditer(task) if not NUMBER.fullmatch(m.group(1))]
    return list(dict.fromkeys(path.removeprefix("./") for path in found))[:MAX_NAMED]


def example_paths(task: str) -> set[str]:
    """The named paths given as examples of a form ("its name (like src/x.py)"): never files
    the task asks for."""
    return {
        match.group(1).removeprefix("./")
        for match in NAMED_PATH.finditer(task)
        if EXAMPLE_BEFORE.search(task[max(0, match.start() - 20) : match.start()])
    }


def absent_named(task: str, look: Look) -> list[str]:
    """The files a task names when none of the paths it names is in the workspace (examples
    aside): then it may have been given in another folder than the one holding them. Judged
    by what exists, never by the task's words."""
    examples = example_paths(task)
    named = [path for path in named_paths(task) if path not in examples]
    missing = [path for path in named if can_create(path.rstrip("/"), look)]
    if len(missing) < len(named):
        return []  # some are here: this is their folder
    return [path for path in missing if not path.endswith("/")]


def not_in_workspace(paths: list[str], root: object) -> str:
    """What the user is told when the files a task names are not in the workspace: which
    workspace, and how to work in another (the model is told nothing of the kind)."""
    names = " and ".join([", ".join(paths[:-1]), paths[-1]] if len(paths) > 1 else paths)
    verb, them = ("are", "them") if len(paths) > 1 else ("is", "it")
    return (
        f"{names}, named in the task, {verb} not in the workspace {root}. If another folder "
        f"holds {them}, start lmagent there, or pass --workspace DIR (or set WORKSPACE)"
    )


class TaskAsks:
    """The paths a task names (`named`), those of them not there when it was given
    (`to_create`: a program block without a path may be for one of them) and, when none of
    them is in the workspace, those (`not_here`). A resumed run knows only `named`: the rest
    were judged when the task was given, against the files as they were then."""

    def __init__(self, task: str, look: Look | None = None):
        self.named = named_paths(task)
        self.to_create: list[str] = []
        self.not_here: list[str] = []
        if look is not None:
            examples = example_paths(task)
            self.to_create = [p for p in self.named if p not in examples and can_create(p, look)]
            self.not_here = absent_named(task, look)


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


def changed_files_message(paths: list[str], look: Look) -> str:
    """The files a run changed (the last MAX_KEPT), as they are now, within SHOWN_CHARS, for
    a summary that replaces the history: it keeps a line per step, not the code being fixed
    (the 1.5B model, compacted while fixing clock.py, no longer had it); blank for none."""
    parts, budget = [], SHOWN_CHARS
    for path in paths[-MAX_KEPT:]:
        shown, budget = _file(path, look("read", {"path": path}), budget)
        parts += [shown] if shown else []
    if not parts:
        return ""
    return "The files changed in this task, as they are now:\n\n" + "\n\n".join(parts)


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
        lines = f"{read.get('total_lines', '?')}{'+' * bool(read.get('truncated'))} lines"
        outline = outline_of(content) if path.endswith(".py") else ""
        if outline and len(outline) <= budget:
            shown = f"{path}: {lines}, too long to show whole; its imports and first test:"
            return f"{shown}\n{fenced(outline)}", budget - len(outline)
        return f"{path}: {lines}, too long to show here", budget
    lines = read.get("total_lines", 0)
    counted = f"\n({lines} lines)" if lines > COUNTED_LINES else ""
    return f"{path}\n{fenced(content)}{counted}", budget - len(content)


def outline_of(content: str) -> str:
    """A long Python test file's import lines and its first test whole, with its class line
    and the helpers it calls on self: what the code under test must provide and how it is
    called (the 1.5B model, shown only a long test file's name, never read it, and wrote a
    module without the names the tests import); blank for other files or over OUTLINE_CHARS."""
    try:
        tree = ast.parse(content)
    except (SyntaxError, ValueError):
        return ""
    lines = content.splitlines(keepends=True)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    parts = ["".join(_source(lines, node)) for node in imports]
    for node in tree.body:
        if _is_test(node):
            parts.append("\n" + "".join(_source(lines, node)))
            break
        methods = node.body if isinstance(node, ast.ClassDef) else []
        test = next((m for m in methods if _is_test(m)), None)
        if test is not None:
            helpers = [m for m in methods if _calls_on_self(test, getattr(m, "name", ""))]
            header = "".join(lines[node.lineno - 1 : node.body[0].lineno - 1])
            body = "\n".join("".join(_source(lines, m)) for m in [*helpers, test])
            parts.append(f"\n{header}{body}")
            break
    else:
        return ""
    outline = "".join(parts)
    return outline if len(outline) <= OUTLINE_CHARS else ""


def _is_test(node: ast.stmt) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
        "test"
    )


def _calls_on_self(test: ast.stmt, name: str) -> bool:
    """Whether `test` calls self.`name`(...)."""
    return any(
        isinstance(n, ast.Attribute) and n.attr == name and getattr(n.value, "id", "") == "self"
        for n in ast.walk(test)
    )


def _source(lines: list[str], node: ast.stmt) -> list[str]:
    """A statement's lines, its decorators and a line break after it included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    found = lines[first - 1 : node.end_lineno or node.lineno]
    return [*found[:-1], found[-1] if found[-1].endswith("\n") else found[-1] + "\n"]


def fenced(content: str) -> str:
    """`content` in a fenced block, a longer fence when it holds one."""
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


def file_for_block(
    content: str, language: str, named: list[str], to_create: list[str], look: Look
) -> str:
    """The named file a code block without a path is for: a small model shown app.py answers
    with app.py changed and no path over it ("Now it looks like this:"), and one asked to
    create hello.py answers with a ```python block. The file it resembles (below), else the
    one file of the block's language that the task named and that did not exist when it was
    given (`to_create`: the model may have made it since, wrongly); "" when that is not one
    file. (A block unlike a file the user had may be an example of its use.)"""
    resembled = resembled_file(content, named, look)
    if resembled:
        return resembled
    suffixes = LANGUAGE_SUFFIXES.get(language, ())
    of_language = [path for path in named if suffixes and path.endswith(suffixes)]
    return of_language[0] if len(of_language) == 1 and of_language[0] in to_create else ""


def can_create(path: str, look: Look) -> bool:
    """A named path that is not there yet and could be made in the workspace (not a host
    path, not up and out, not the agent's own data)."""
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or parts[0] in (".lmagent", ".lmagent.md"):
        return False
    read = look("read", {"path": path})  # "not found", not refused (a link leading out)
    missing = not read.get("success") and "not found" in str(read.get("error", ""))
    return missing and not look("ls", {"path": path}).get("success")


def resembled_file(content: str, paths: list[str], look: Look) -> str:
    """The file whose lines the block shares most, at least RESEMBLES of them, else the one
    Python file defining a function or class the block defines; "" when none does, or two do
    equally (an example or a new program is not a changed file)."""
    new = content.splitlines()
    texts = {}
    for path in paths:
        read = look("read", {"path": path})
        if read.get("success") and not read.get("truncated") and len(new) > 1:
            texts[path] = str(read.get("content", ""))
    scores = {
        path: difflib.SequenceMatcher(None, text.splitlines(), new, autojunk=False).ratio()
        for path, text in texts.items()
    }
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    if not ranked or ranked[0][1] < RESEMBLES:
        return _defining_file(content, texts)
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return ""
    return ranked[0][0]


def _defining_file(content: str, texts: dict[str, str]) -> str:
    """The one Python file defining at its top level a function or class the block defines,
    or a method of that name: a stub filled in shares too few lines to resemble it (`def
    abbreviate(words): pass`, and the 1.5B model's 15 lines of it were never written), and a
    method written alone was dropped, three times (lmagent.loop.merge puts it in its class)."""
    names = set(TOP_LEVEL_DEFINITION.findall(content))
    holders = [
        path for path, text in texts.items() if path.endswith(".py") and names & _definitions(text)
    ]
    return holders[0] if len(holders) == 1 else ""


def _definitions(text: str) -> set[str]:
    """The functions and classes a Python file defines at its top level, and its methods."""
    return set(TOP_LEVEL_DEFINITION.findall(text)) | set(METHOD.findall(text))
