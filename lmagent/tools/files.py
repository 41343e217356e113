"""File tools: read, write, edit, glob, grep, ls, mkdir — all confined to the workspace.

Every path is opened, created, listed and walked beneath the workspace by descriptor
(`workspace.Workspace`): symlinks inside are followed by the agent itself, never by the kernel,
so a link swapped in at any moment cannot lead a tool outside. The walks behind glob and grep
never step into a symlinked directory and leave out links whose target is outside.
"""

from __future__ import annotations

import difflib
import errno
import itertools
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from typing import Annotated as A
from typing import BinaryIO

import regex

from lmagent.core.workspace import READ_FLAGS, PathError, WalkItem, Workspace, shown_path
from lmagent.tools.registry import (
    EXISTING_DIR,
    EXISTING_FILE,
    ArgumentError,
    ToolContext,
    ToolError,
    make_tool,
)

READ_MAX_LINES = 2000
READ_MAX_CHARS = 60_000
READ_LINE_BYTES = 4 * READ_MAX_CHARS  # longer lines are cut when read
MAX_FILE_BYTES = 10 * 1024 * 1024  # edit and grep leave bigger files alone
BINARY_PROBE = 8192  # a NUL byte in the first 8 KiB marks a binary file
GREP_MAX_RESULTS = 200
GREP_LINE_CHARS = 400
GREP_TIME_LIMIT = 5.0  # seconds of matching per call: a catastrophic pattern ends here
FUZZY_MAX_BYTES = 512 * 1024  # larger files get exact and whitespace-tolerant matching only
GLOB_MAX_RESULTS = 500
LS_MAX_ENTRIES = 500
MAX_PATTERN_CHARS = 4096
SKIPPED_DIRS = frozenset({".git", ".lmagent"})
PATH_CHOICES = 200  # a workspace with more entries leaves constrained path arguments free
FUZZY_MIN_RATIO = 0.85
FUZZY_MARGIN = 0.02  # a rival this close to the best fuzzy match makes it ambiguous


# --------------------------------------------------------------------------- paths and errors


def _os_error(action: str, shown: str, exc: OSError) -> ToolError:
    """The ToolError for an OSError met while using `shown`, in the model's terms."""
    shown = shown if len(shown) <= 120 else shown[:120] + "…"
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"not found: {shown}; use ls or glob to find it")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"cannot {action} '{shown}': a file is in the way of its folder")
    return ToolError(f"cannot {action} '{shown}': {exc.strerror or exc}")


def _open_text(ws: Workspace, shown: str, hint: str = "use ls or glob to find it") -> tuple:
    """(open binary handle on a regular text file, its canonical path), or a ToolError."""
    try:
        fd, rel = ws.open(shown)
    except FileNotFoundError:
        raise ToolError(f"file not found: {shown}; {hint}") from None
    except OSError as exc:
        raise _os_error("read", shown, exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ToolError(f"'{shown}' is a directory; use ls to list it")
        raise ToolError(f"'{shown}' is not a regular file")
    handle = os.fdopen(fd, "rb")
    if b"\x00" in handle.read(BINARY_PROBE):
        handle.close()
        raise ToolError(f"'{shown}' is a binary file; only text files can be read or edited")
    handle.seek(0)
    return handle, rel


def _write_file(ws: Workspace, shown: str, payload: bytes) -> tuple[str, bool]:
    """(canonical path, created) after replacing the file atomically."""
    try:
        return ws.write(shown, payload)
    except IsADirectoryError:
        raise ToolError(f"'{shown}' is a directory; give a file path") from None
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot write '{shown}': a file is in the way of its folder") from None
    except OSError as exc:
        raise _os_error("write", shown, exc) from None


# --------------------------------------------------------------------------- read


def tool_read(
    ctx: ToolContext,
    path: A[str, "file path, relative to the workspace", EXISTING_FILE],
    offset: A[int, "first line to return, 1-based"] = 1,
    limit: A[int, "number of lines to return"] = READ_MAX_LINES,
) -> dict:
    """Read a text file from the workspace (a window of lines for large files)."""
    if offset < 1 or limit < 1:
        raise ArgumentError("offset (1-based first line) and limit (lines) must be 1 or more")
    handle, rel = _open_text(ctx.workspace, path)
    with handle:
        window, next_offset, total = _read_window(handle, offset, min(limit, READ_MAX_LINES))
        if next_offset is not None:
            total += _count_lines(handle)
    if offset > max(total, 1):
        raise ArgumentError(f"offset {offset} is past the end of '{path}' ({total} lines)")
    result = {
        "path": shown_path(rel),
        "content": "".join(window),
        "total_lines": total,
        "lines": f"{offset}-{offset + len(window) - 1}" if window else "none",
    }
    if next_offset is not None:
        result.update(truncated=True, next_offset=next_offset)
    return result


def _read_window(handle: BinaryIO, offset: int, limit: int) -> tuple[list[str], int | None, int]:
    """(lines from `offset`, within `limit` and READ_MAX_CHARS; the next line number when more
    follow; how many lines were consumed)."""
    window: list[str] = []
    chars = number = 0
    for number, (raw, cut) in enumerate(_lines(handle), 1):
        if number < offset:
            continue
        line = raw.decode("utf-8", "replace")
        if cut or len(line) > READ_MAX_CHARS:
            line = line[:READ_MAX_CHARS] + " …[rest of this long line not shown]\n"
        if len(window) >= limit or (window and chars + len(line) > READ_MAX_CHARS):
            return window, number, number
        window.append(line)
        chars += len(line)
    return window, None, number


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Physical lines of a binary file; an overlong line comes back cut (flag True)."""
    while line := handle.readline(READ_LINE_BYTES):
        if line.endswith(b"\n") or len(line) < READ_LINE_BYTES:
            yield line, False
            continue
        rest = line
        while rest and not rest.endswith(b"\n"):
            rest = handle.readline(READ_LINE_BYTES)
        yield line, True


def _count_lines(handle: BinaryIO) -> int:
    """Lines from the handle's position to the end (the last may lack a newline)."""
    count, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


# --------------------------------------------------------------------------- write and edit


def tool_write(
    ctx: ToolContext,
    path: A[str, "file path, relative to the workspace"],
    content: A[str, "the complete new file content"],
) -> dict:
    """Create or overwrite a file in the workspace with the given content."""
    if path.rstrip().endswith("/"):
        raise ToolError(f"'{path}' is a directory; give a file path")
    payload = content.encode("utf-8", "replace")
    rel, created = _write_file(ctx.workspace, path, payload)
    return {"path": shown_path(rel), "bytes": len(payload), "created": created}


def tool_edit(
    ctx: ToolContext,
    path: A[str, "file path, relative to the workspace", EXISTING_FILE],
    search: A[str, "the existing text to replace (include enough lines to be unique)"],
    replace: A[str, "the new text"],
) -> dict:
    """Replace one occurrence of `search` with `replace` in a file."""
    if not search:
        raise ArgumentError("search must not be empty; use write to create a file")
    if search == replace:
        raise ArgumentError("search and replace are identical; nothing would change")
    ctx.workspace.resolve(path, write=True)  # refused before anything is read
    handle, _ = _open_text(ctx.workspace, path, hint="use write to create a new file")
    with handle:
        if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
            raise ToolError(f"'{path}' is larger than {MAX_FILE_BYTES >> 20} MB; use write")
        text = handle.read().decode("utf-8", "surrogateescape")  # bytes survive unchanged
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    if crlf or "\r\n" not in text:  # match and write in the file's own line endings
        text, search, replace = (s.replace("\r\n", "\n") for s in (text, search, replace))
    try:
        new_text, how, line = apply_edit(text, search, replace)
    except ToolError as exc:
        if not (replace.strip() and replace in text):
            raise
        raise ToolError(  # a small model gave (path, new text, old text)
            f"search text not found, but the replace text is in '{path}': search is the text "
            "there now, replace the new text. Were they swapped?"
        ) from exc
    if new_text == text:
        raise ToolError(f"the edit leaves '{path}' unchanged (the text at line {line} is the same)")
    if crlf:
        new_text = new_text.replace("\n", "\r\n")
    rel, _ = _write_file(ctx.workspace, path, new_text.encode("utf-8", "surrogateescape"))
    return {"path": shown_path(rel), "match": how, "line": line}


def change_preview(workspace: Workspace, tool: str, arguments: dict) -> str:
    """The diff a write or edit call would make, worked out without making it, for a permission
    prompt ("" for other tools, or when it cannot be worked out: the call will say why)."""
    path = arguments.get("path")
    if tool not in ("write", "edit") or not isinstance(path, str):
        return ""
    try:
        data, rel = workspace.read_bytes(path, MAX_FILE_BYTES)
        old: str | None = data.decode("utf-8", "surrogateescape").replace("\r\n", "\n")
    except FileNotFoundError:
        old, rel = None, path
    except (OSError, PathError):
        return ""
    new, rel = _previewed(tool, old, arguments), shown_path(rel)
    if new is None:
        return ""
    if new == old:
        return f"diff --git a/{rel} b/{rel}\n(no change: {rel} already holds exactly this)\n"
    return _unified(rel, old, new)


def _previewed(tool: str, old: str | None, arguments: dict) -> str | None:
    """The file's text after the call (None when the call would fail)."""
    if tool == "write":
        content = arguments.get("content")
        return content if isinstance(content, str) else None
    search, replace = arguments.get("search"), arguments.get("replace")
    if old is None or not isinstance(search, str) or not search or not isinstance(replace, str):
        return None
    try:
        return apply_edit(old, search.replace("\r\n", "\n"), replace.replace("\r\n", "\n"))[0]
    except ToolError:
        return None


def _unified(rel: str, old: str | None, new: str) -> str:
    """A git-style diff of one file (old None: a new file)."""
    before = [] if old is None else old.splitlines(keepends=True)
    lines = difflib.unified_diff(
        before,
        new.splitlines(keepends=True),
        "/dev/null" if old is None else f"a/{rel}",
        f"b/{rel}",
    )
    body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return f"diff --git a/{rel} b/{rel}\n{body}"


def apply_edit(text: str, search: str, replace: str) -> tuple[str, str, int]:
    """(new text, how it matched, first line): exact, whitespace-tolerant, then fuzzy.

    An ambiguous match is refused at every stage; nothing close enough raises a ToolError that
    shows the closest text.
    """
    count = text.count(search)
    if count > 1:
        where = _occurrence_lines(text, search)
        raise ToolError(
            f"search text occurs {count} times (lines {where}); "
            "include more surrounding lines to make it unique"
        )
    if count == 1:
        start = text.index(search)
        new_text = text[:start] + replace + text[start + len(search) :]
        return new_text, "exact", text.count("\n", 0, start) + 1
    lines = _split_lines(text)
    wanted = [line for line in search.split("\n") if line.strip()]
    if not wanted:
        raise ToolError("search text (only whitespace) not found")
    numbered = [i for i, line in enumerate(lines) if line.strip()]  # non-blank lines
    span, how = _tolerant_span(lines, numbered, wanted), "whitespace-tolerant"
    if span is None and len(text) > FUZZY_MAX_BYTES:
        raise ToolError(
            f"search text not found exactly, and the file is too large ({len(text) >> 10} KB) "
            "for fuzzy matching; read the lines you want to change and copy them exactly"
        )
    if span is None:
        span, how = _fuzzy_span(lines, numbered, wanted), "fuzzy"
    start, end = span
    block = _reindent(replace, lines[start], wanted[0])
    if block and lines[end - 1].endswith("\n") and not block.endswith("\n"):
        block += "\n"
    return "".join(lines[:start]) + block + "".join(lines[end:]), how, start + 1


def _split_lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _occurrence_lines(text: str, search: str, limit: int = 5) -> str:
    lines, start = [], text.find(search)
    while start != -1 and len(lines) < limit:
        lines.append(str(text.count("\n", 0, start) + 1))
        start = text.find(search, start + 1)
    return ", ".join(lines)


def _squash(line: str) -> str:
    return " ".join(line.split())


def _tolerant_span(lines: list[str], numbered: list[int], wanted: list[str]) -> tuple | None:
    """The one block whose non-blank lines equal `wanted` up to whitespace, or None."""
    want = [_squash(w) for w in wanted]
    keys = [_squash(lines[i]) for i in numbered]
    size = len(want)
    found = [
        k for k in range(len(keys) - size + 1) if keys[k] == want[0] and keys[k : k + size] == want
    ]
    if len(found) > 1:
        where = ", ".join(str(numbered[k] + 1) for k in found[:5])
        raise ToolError(
            f"search text matches {len(found)} places when whitespace is ignored "
            f"(lines {where}); include more surrounding lines to pick one"
        )
    if not found:
        return None
    return numbered[found[0]], numbered[found[0] + size - 1] + 1


def _fuzzy_span(lines: list[str], numbered: list[int], wanted: list[str]) -> tuple[int, int]:
    """The one block of non-blank lines most similar to `wanted` (a typo or two)."""
    size = len(wanted)
    keys = [lines[i].strip() for i in numbered]
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(w.strip() for w in wanted))
    scores: list[tuple[float, int]] = []
    best = 0.0
    for k in range(len(keys) - size + 1):
        matcher.set_seq1("\n".join(keys[k : k + size]))
        floor = best - FUZZY_MARGIN  # cheap upper bounds first: most windows stop here
        if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
            continue
        scores.append((matcher.ratio(), k))
        best = max(best, scores[-1][0])
    if not scores:
        raise ToolError("search text not found; read the file and copy the exact text")
    ratio, k = max(scores)
    if ratio < FUZZY_MIN_RATIO or not _same_size(keys[k : k + size], wanted):
        closest = "\n".join(line[:200] for line in keys[k : k + min(size, 3)])
        raise ToolError(
            f"search text not found; the closest text is at line {numbered[k] + 1} "
            f"({ratio:.0%} similar):\n{closest}\nread the file and copy the exact text"
        )
    rivals = [j for r, j in scores if abs(j - k) >= size and r >= ratio - FUZZY_MARGIN]
    if rivals:
        where = ", ".join(str(numbered[j] + 1) for j in sorted([k, *rivals])[:5])
        raise ToolError(
            f"search text is ambiguous: similar text at lines {where}; include more lines"
        )
    return numbered[k], numbered[k + size - 1] + 1


def _same_size(found: list[str], wanted: list[str]) -> bool:
    """A typo changes a few characters; a fragment of a line must not replace the whole line."""
    have, want = len(_squash(" ".join(found))), len(_squash(" ".join(wanted)))
    return abs(have - want) <= max(3, want // 20)


def _reindent(replace: str, file_line: str, search_line: str) -> str:
    """`replace` moved from the search text's indentation to the file's."""
    have = file_line[: len(file_line) - len(file_line.lstrip())]
    given = search_line[: len(search_line) - len(search_line.lstrip())]
    if have == given:
        return replace
    out = []
    for line in replace.splitlines(keepends=True):
        if line.strip() and line.startswith(given):
            line = have + line[len(given) :]
        out.append(line)
    return "".join(out)


# --------------------------------------------------------------------------- walking and globs


class Glob:
    """A glob inside the workspace: `*`, `?`, `[ab]`, `{a,b}` in a name, `**` across folders."""

    def __init__(self, workspace: Workspace, pattern: str):
        self.workspace = workspace
        parts = [p for p in _relative_pattern(workspace, pattern).split("/") if p not in ("", ".")]
        literal = 0
        while literal < len(parts) and not any(ch in parts[literal] for ch in "*?[{"):
            literal += 1
        self.base = "/".join(parts[:literal]) or "."
        rest = parts[literal:]
        try:
            self.regex = re.compile(_translate(rest)) if rest else None
        except re.error as exc:
            raise ArgumentError(f"invalid glob pattern {pattern!r}: {exc}") from None
        self.max_depth = None if "**" in rest else len(rest)
        self.skip = SKIPPED_DIRS - set(parts)  # .git and .lmagent only when named

    def entries(self) -> Iterator[WalkItem]:
        """Every match, lazily, in walk order (descriptors valid until the next one)."""
        try:
            info, rel = self.workspace.stat(self.base)  # the literal part must stay inside too
            if info is not None and stat.S_ISLNK(info.st_mode):
                info = None  # a link to outside or to nothing
        except (FileNotFoundError, NotADirectoryError):
            return
        if info is None:
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        if self.regex is None:
            yield WalkItem(-1, rel.rsplit("/", 1)[-1], rel, is_dir)
            return
        if not is_dir:
            return
        prefix = 0 if rel == "." else len(rel) + 1
        for item in self.workspace.walk(rel, self.skip, self.max_depth):
            if self.regex.fullmatch(shown_path(item.rel[prefix:])):
                yield item


def _relative_pattern(workspace: Workspace, pattern: str) -> str:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ArgumentError("pattern must be a non-empty glob such as **/*.py")
    if "\x00" in pattern or len(pattern) > MAX_PATTERN_CHARS:
        raise ArgumentError("pattern contains a NUL byte or is too long")
    text = pattern.strip()
    root = workspace.root.as_posix()
    if text.startswith(root + "/"):
        text = text[len(root) + 1 :]
    if text.startswith(("/", "~")) or ".." in text.split("/"):
        raise PathError(
            f"pattern '{pattern}' reaches outside the workspace; "
            "use a pattern relative to it, such as src/**/*.py"
        )
    return text


def _translate(parts: list[str]) -> str:
    pieces = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_translate_name(part) + ("" if last else "/"))
    return "".join(pieces)


def _translate_name(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        close = part.find("]" if ch == "[" else "}", i + 2) if ch in "[{" else -1
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and close != -1 and part[i + 1 : close] not in ("", "!"):
            body = part[i + 1 : close]
            negate = body.startswith("!")
            body = "".join("\\" + c if c in "\\[]&~|^" else c for c in body[negate:])
            out.append("[" + "^" * negate + body + "]")
            i = close
        elif ch == "{" and close != -1:
            options = part[i + 1 : close].split(",")
            out.append("(?:" + "|".join(_translate_name(o) for o in options) + ")")
            i = close
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def tool_glob(ctx: ToolContext, pattern: A[str, "glob such as **/*.py"]) -> dict:
    """Find files in the workspace whose path matches a glob pattern."""
    matches, truncated = [], False
    for item in Glob(ctx.workspace, pattern).entries():
        if len(matches) >= GLOB_MAX_RESULTS:
            truncated = True
            break
        matches.append(shown_path(item.rel) + ("/" if item.is_dir else ""))
    result = {"pattern": pattern, "matches": matches, "count": len(matches)}
    if truncated:
        result["truncated"] = True
        result["note"] = f"stopped at {GLOB_MAX_RESULTS} matches; use a narrower pattern"
    return result


def existing_paths(workspace: Workspace) -> dict[str, list[str]] | None:
    """The workspace's files and folders by kind ("." among the folders), for constrained calls
    to choose a path among (Toolset.choosing); None with more than PATH_CHOICES entries."""
    walk = workspace.walk(".", SKIPPED_DIRS)
    try:
        items = list(itertools.islice(walk, PATH_CHOICES + 1))
    finally:
        walk.close()
    if len(items) > PATH_CHOICES:
        return None
    files = [shown_path(item.rel) for item in items if not item.is_dir]
    folders = [shown_path(item.rel) for item in items if item.is_dir]
    return {"file": files, "dir": [".", *folders]}


# --------------------------------------------------------------------------- grep


def tool_grep(
    ctx: ToolContext,
    pattern: A[str, "regular expression (Python syntax)"],
    paths: A[
        list[str] | None, "files, directories or globs in the workspace (default: all)"
    ] = None,
    ignore_case: A[bool, "match case-insensitively"] = False,
) -> dict:
    """Search file contents with a regular expression; returns file, line number and line."""
    search = _Search(pattern, ignore_case)
    matches: list[dict] = []
    searched, stopped, slow = 0, ctx.stop.event.is_set, False
    for rel, opener in _grep_targets(ctx.workspace, paths or ["."]):
        if stopped():
            break
        searched += 1
        try:
            for line_no, text in search.hits(opener, GREP_MAX_RESULTS + 1 - len(matches)):
                matches.append({"file": shown_path(rel), "line": line_no, "text": text})
        except TimeoutError:
            slow = True
            break
        if len(matches) > GREP_MAX_RESULTS:
            break  # one match past the cap tells that there are more; nothing more is listed
    result = {"pattern": pattern, "matches": matches[:GREP_MAX_RESULTS]}
    result.update(count=len(result["matches"]), files_searched=searched)
    if len(matches) > GREP_MAX_RESULTS:
        result["truncated"] = True
        result["note"] = f"stopped at {GREP_MAX_RESULTS} matches; narrow the pattern or paths"
    if slow:
        result["truncated"] = True
        result["note"] = (
            f"stopped after {GREP_TIME_LIMIT:g} s of matching in {shown_path(rel)}: the pattern "
            "backtracks too much (nested repetition such as (x+)+); use a simpler pattern"
        )
    return result


Opener = Callable[[], int]


def _grep_targets(workspace: Workspace, specs: list[str]) -> Iterator[tuple[str, Opener]]:
    """(path, how to open it) of each file to search, lazily, each once; an opener is valid
    until the next target is taken."""
    seen: set[str] | None = None if specs == ["."] else set()
    for spec in specs:
        if any(ch in spec for ch in "*?[{"):
            found = Glob(workspace, spec).entries()
        else:
            found = iter([_named_target(workspace, spec)])
        for item in found:
            files = workspace.walk(item.rel, SKIPPED_DIRS) if item.is_dir else [item]
            for file in files:
                if file.is_dir or (seen is not None and file.rel in seen):
                    continue
                if seen is not None:
                    seen.add(file.rel)
                yield file.rel, _opener(workspace, file)


def _opener(workspace: Workspace, item: WalkItem) -> Opener:
    """Open a walked file by its folder's descriptor; a link or a named file by a lookup."""
    if item.parent >= 0 and not item.is_link:
        return lambda: os.open(item.name, READ_FLAGS, dir_fd=item.parent)
    return lambda: workspace.open(item.rel)[0]


def _named_target(workspace: Workspace, spec: str) -> WalkItem:
    """A file or folder named in grep's `paths`."""
    try:
        info, rel = workspace.stat(spec)
    except (FileNotFoundError, NotADirectoryError):
        info = None
    if info is None:
        raise ToolError(f"path not found: {spec}; use ls or glob to find it")
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise ToolError(f"'{spec}' is not a regular file or directory")
    return WalkItem(-1, rel.rsplit("/", 1)[-1], rel, stat.S_ISDIR(info.st_mode))


_FIRST_READ = 65536


class _Search:
    """One compiled pattern, applied to whole files: files without a match cost one search.

    Matching uses the `regex` engine (the same syntax as `re`) because it can stop a match at a
    deadline and lets other threads run meanwhile: a catastrophic pattern such as `(x+x+)+y`
    ends the call after GREP_TIME_LIMIT seconds instead of freezing the process.
    """

    def __init__(self, pattern: str, ignore_case: bool):
        if not pattern:
            raise ArgumentError("pattern must not be empty")
        self.deadline = time.monotonic() + GREP_TIME_LIMIT
        self.text_mode = not pattern.isascii()  # non-ASCII needs str semantics ([é], re.I)
        flags = regex.MULTILINE
        source: str | bytes = pattern if self.text_mode else pattern.encode()
        lowered = _lowered(pattern) if ignore_case and not self.text_mode else None
        self.lower = lowered is not None  # search lower-cased files: much faster than re.I
        if self.lower:
            source = lowered.encode()
        elif ignore_case:
            flags |= regex.IGNORECASE
        try:
            self.regex = regex.compile(source, flags)
        except regex.error as exc:
            raise ArgumentError(f"invalid regular expression {pattern!r}: {exc}") from None
        self.newline = "\n" if self.text_mode else b"\n"
        plain = not self.text_mode and not any(ch in pattern for ch in ".^$*+?{}[]\\|()")
        self.literal = source if plain else None  # bytes.find is twice as fast as the regex

    def hits(self, opener: Opener, limit: int) -> list[tuple[int, str]]:
        """(line number, line) of up to `limit` matching lines of a text file; [] for the rest."""
        data = _read_small_text(opener)
        if data is None:
            return []
        haystack = data.lower() if self.lower else data
        if self.text_mode:
            data = haystack = data.decode("utf-8", "replace")
        if self.literal is not None and haystack.find(self.literal) == -1:
            return []
        match = self._search(haystack, 0, len(haystack))
        return [] if match is None else self._lines(data, haystack, match, limit)

    def _search(self, haystack, start: int, end: int):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("grep ran out of time")
        return self.regex.search(haystack, start, end, concurrent=True, timeout=left)

    def _lines(self, data, haystack, match: regex.Match, limit: int) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        line_no, counted, size, newline = 1, 0, len(haystack), self.newline
        while match is not None and len(found) < limit:
            start = match.start()
            line_start = haystack.rfind(newline, 0, start) + 1
            if line_start == size:
                break  # an empty match after the final newline: there is no such line
            line_end = haystack.find(newline, start)
            line_end = size if line_end == -1 else line_end
            if self._search(haystack, line_start, line_end):  # as grep: within one line
                line_no += haystack.count(newline, counted, line_start)
                counted = line_start
                line = data[line_start:line_end]
                if not self.text_mode:
                    line = line.decode("utf-8", "replace")
                found.append((line_no, line.rstrip("\r")[:GREP_LINE_CHARS]))
            match = self._search(haystack, line_end + 1, size) if line_end < size else None
        return found


def _lowered(pattern: str) -> str | None:
    """The ASCII pattern that finds in lower-cased text what re.I finds in the text, or None.

    Escapes (\\W, \\S, \\B ...) and group syntax keep their case; escapes naming a letter by
    code (\\x41, \\101) and ranges across cases ([A-z]) fall back to re.I.
    """
    if re.search(r"\\(x|0|[1-7][0-7]{2})|(?<![A-Z])-[A-Z]|[A-Z]-(?![A-Z])", pattern):
        return None
    keep = re.compile(r"\\.|\(\?P?[A-Za-z-]*|[A-Z]+", re.DOTALL)
    return keep.sub(lambda m: m[0] if m[0][0] in "\\(" else m[0].lower(), pattern)


def _read_small_text(opener: Opener) -> bytes | None:
    """A file's bytes, or None for binary, unreadable or too large files."""
    try:
        fd = opener()
    except (OSError, PathError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # swapped for something else since it was listed
        data = os.read(fd, _FIRST_READ)
        if data.find(b"\x00", 0, BINARY_PROBE) != -1:
            return None
        if len(data) == _FIRST_READ:
            chunks, size = [data], len(data)
            while chunk := os.read(fd, 1 << 20):
                size += len(chunk)
                if size > MAX_FILE_BYTES:
                    return None
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data


# --------------------------------------------------------------------------- ls and mkdir


def tool_ls(
    ctx: ToolContext, path: A[str, "directory, relative to the workspace", EXISTING_DIR] = "."
) -> dict:
    """List a directory of the workspace (directories first)."""
    try:
        fd, rel = ctx.workspace.open_dir(path)
    except FileNotFoundError:
        raise ToolError(f"directory not found: {path}; use ls on its parent or glob") from None
    except NotADirectoryError:
        raise ToolError(f"'{path}' is a file, not a directory; use read to see it") from None
    except OSError as exc:
        raise _os_error("list", path, exc) from None
    try:
        with os.scandir(fd) as listing:
            found = sorted(listing, key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        entries = [item for item in map(_ls_entry, found[:LS_MAX_ENTRIES]) if item]
    finally:
        os.close(fd)  # the entries' stat() ran relative to it
    result = {"path": shown_path(rel), "entries": entries, "count": len(found)}
    if len(found) > LS_MAX_ENTRIES:
        result["truncated"] = True
    return result


def _ls_entry(entry: os.DirEntry) -> dict | None:
    item = {"name": shown_path(entry.name), "type": _entry_type(entry)}
    if item["type"] == "file":
        try:
            item["size"] = entry.stat(follow_symlinks=False).st_size
        except OSError:
            return None  # removed while listing
    return item


def _entry_type(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def tool_mkdir(ctx: ToolContext, path: A[str, "directory to create (parents too)"]) -> dict:
    """Create a directory (and any missing parents) in the workspace."""
    try:
        rel, created = ctx.workspace.mkdir(path)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create '{path}': a file is in the way") from None
    except OSError as exc:
        raise _os_error("create", path, exc) from None
    return {"path": shown_path(rel), "created": created}


FILE_TOOLS = [
    make_tool(tool_read),
    make_tool(tool_write, changes_things=True),
    make_tool(tool_edit, changes_things=True),
    make_tool(tool_glob),
    make_tool(tool_grep),
    make_tool(tool_ls),
    make_tool(tool_mkdir, changes_things=True),
]
