"""What changed between two snapshots: the paths, and the unified diff git would print.

Both are computed in-process from the trees: subtrees with the same id are skipped, so the cost
follows the change, not the workspace. The diff has git's headers (`diff --git`, `new file
mode`, `index`, `---`/`+++`), a binary file is one line, a very large file's diff a note of its
size, and the whole is capped at MAX_DIFF characters. A name that is not UTF-8 is shown with
its odd bytes as `\\xNN` (objects.shown).
"""

from __future__ import annotations

import difflib

from lmagent.checkpoints.objects import FOLDER, GITLINK, ObjectStore, shown

MAX_FILE_DIFF = 20_000  # characters of one file's diff shown; more is summarised
MAX_DIFF = 200_000  # characters of one step's diff in all
MAX_DIFFED_BYTES = 2 * 1024 * 1024  # larger files are summarised without being compared
NO_NEWLINE = "\\ No newline at end of file\n"


def changed_paths(store: ObjectStore, old: str | None, new: str | None) -> list[str]:
    """Files, links and gitlinks that differ between two trees (None: empty), sorted. The
    trees are compared with a stack of folders to look at, never by recursion: a workspace
    may be any number of folders deep."""
    found: list[str] = []
    pending = [(old, new, "")]
    while pending:
        old, new, prefix = pending.pop()
        a = store.read_tree(old) if old else {}
        b = store.read_tree(new) if new else {}
        for name in set(a) | set(b):
            left, right = a.get(name), b.get(name)
            if left == right:
                continue
            left_tree = left[1] if left and left[0] == FOLDER else None
            right_tree = right[1] if right and right[0] == FOLDER else None
            if left_tree or right_tree:
                pending.append((left_tree, right_tree, f"{prefix}{name}/"))
            if (left and not left_tree) or (right and not right_tree):
                found.append(prefix + name)
    return sorted(found)


def entry_at(store: ObjectStore, tree: str, path: str) -> tuple[str, str] | None:
    """(mode, sha) of a file, link or gitlink in a tree; None when absent."""
    *folders, name = path.split("/")
    for part in folders:
        entry = store.read_tree(tree).get(part)
        if not entry or entry[0] != FOLDER:
            return None
        tree = entry[1]
    entry = store.read_tree(tree).get(name)
    return entry if entry and entry[0] != FOLDER else None


def unified(store: ObjectStore, old: str, new: str, paths: list[str]) -> str:
    parts = [file_diff(store, p, entry_at(store, old, p), entry_at(store, new, p)) for p in paths]
    return summarised("".join(parts))


def file_diff(store: ObjectStore, path: str, old, new) -> str:
    path = shown(path)  # a diff is read by people and the model: a name as text
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append(f"new file mode {new[0]}\n")
    elif new is None:
        head.append(f"deleted file mode {old[0]}\n")
    elif old[0] != new[0]:
        head += [f"old mode {old[0]}\n", f"new mode {new[0]}\n"]
    same_mode = f" {new[0]}" if old and new and old[0] == new[0] else ""
    ids = [(entry[1] if entry else "0" * 40)[:7] for entry in (old, new)]
    head.append(f"index {ids[0]}..{ids[1]}{same_mode}\n")
    if old and new and old[1] == new[1]:
        return "".join(head[:-1])  # only the mode changed
    before, after = _content(store, old), _content(store, new)
    a_name = f"a/{path}" if old else "/dev/null"
    b_name = f"b/{path}" if new else "/dev/null"
    if len(before) > MAX_DIFFED_BYTES or len(after) > MAX_DIFFED_BYTES:
        lines = max(before.count(b"\n"), after.count(b"\n"))
        return "".join(head) + f"(diff of {lines} lines not shown: too large)\n"
    if b"\0" in before[:8000] or b"\0" in after[:8000]:
        return "".join(head) + f"Binary files {a_name} and {b_name} differ\n"
    body = difflib.unified_diff(_lines(before), _lines(after), a_name, b_name, lineterm="\n")
    text = "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in body)
    return "".join(head) + text


def _content(store: ObjectStore, entry) -> bytes:
    if entry is None:
        return b""
    if entry[0] == GITLINK:
        return f"Subproject commit {entry[1]}\n".encode()
    return store.read_blob(entry[1])


def _lines(data: bytes) -> list[str]:
    """Lines as git splits them: at "\n" only, each keeping it (the last may lack one)."""
    pieces = data.decode("utf-8", errors="replace").split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def summarised(text: str) -> str:
    """A diff with each very large file's part replaced by a note, capped as a whole."""
    parts = []
    for chunk in _file_chunks(text):
        if len(chunk) > MAX_FILE_DIFF:
            header = chunk.split("\n", 1)[0]
            lines = chunk.count("\n")
            chunk = f"{header}\n(diff of {lines} lines not shown: too large)\n"
        parts.append(chunk)
    joined = "".join(parts)
    if len(joined) > MAX_DIFF:
        joined = joined[:MAX_DIFF] + f"\n(diff cut at {MAX_DIFF} characters)\n"
    return joined


def _file_chunks(text: str) -> list[str]:
    chunks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not chunks:
            chunks.append([])
        chunks[-1].append(line)
    return ["".join(chunk) for chunk in chunks]
