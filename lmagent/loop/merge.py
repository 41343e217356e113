"""A Python file block that holds only some of the file's functions and classes: those are
replaced, the rest kept. A small model asked to fix one function writes that function alone
under the file's name (measured on Qwen2.5-Coder-1.5B: calc.py lost mul when it fixed add);
written as it is, the file would lose everything else.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def merge_python(old: str, new: str) -> tuple[str, list[str]] | None:
    """(merged text, names kept from `old`) when `new` holds only imports and top-level
    definitions, and lacks some of `old`'s; None when `new` should replace the file as it is
    (a whole file, other code, or either text is not valid Python)."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return None
    old_spans, new_spans = _spans(old_tree), _spans(new_tree)
    kept = [name for name in old_spans if name not in new_spans]
    if not new_spans or not kept or not _only_definitions(new_tree):
        return None
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    merged = list(old_lines)
    appended: list[str] = []
    for name, (start, end) in sorted(new_spans.items(), key=lambda item: -item[1][0]):
        if name not in old_spans:
            appended = ["\n\n", *_ended(new_lines[start:end]), *appended]
    for name, (start, end) in sorted(old_spans.items(), key=lambda item: -item[1][0]):
        if name in new_spans:
            new_start, new_end = new_spans[name]
            merged[start:end] = _ended(new_lines[new_start:new_end])
    imports = [line for line in _import_lines(new_tree, new_lines) if line not in old_lines]
    at = _after_imports(old_tree)
    merged[at:at] = imports
    return "".join(merged + appended), kept


def merged_block(arguments: dict, look: Callable[[str, dict], dict]) -> tuple[dict, str]:
    """A write of a Python file block holding only some of the file's definitions, merged into
    the file as it is (`look` reads it); a note saying so, blank when written as it is."""
    path = arguments["path"]
    old = look("read", {"path": path}) if path.endswith(".py") else {}
    if not old.get("success") or old.get("truncated"):
        return arguments, ""
    merged = merge_python(str(old.get("content", "")), arguments["content"])
    if merged is None:
        return arguments, ""
    kept = ", ".join(merged[1])
    note = f"your block held only part of {path}: its definitions replaced those in the file; "
    return {**arguments, "content": merged[0]}, note + f"{kept} kept as they were"


def _spans(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """Top-level definitions: name -> (first line with its decorators, end), 0-based."""
    spans = {}
    for node in tree.body:
        if isinstance(node, DEFINITIONS):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans[node.name] = (first - 1, node.end_lineno or node.lineno)
    return spans


def _only_definitions(tree: ast.Module) -> bool:
    return all(
        isinstance(node, (*DEFINITIONS, ast.Import, ast.ImportFrom)) or _is_docstring(node)
        for node in tree.body
    )


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _import_lines(tree: ast.Module, lines: list[str]) -> list[str]:
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += _ended(lines[node.lineno - 1 : node.end_lineno or node.lineno])
    return found


def _after_imports(tree: ast.Module) -> int:
    """The line after the file's leading imports and docstring (0-based)."""
    at = 0
    for node in tree.body:
        if not (isinstance(node, (ast.Import, ast.ImportFrom)) or _is_docstring(node)):
            break
        at = node.end_lineno or node.lineno
    return at


def _ended(lines: list[str]) -> list[str]:
    """`lines` with a line break after the last."""
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines
