"""A Python file block that holds only some of the file's functions and classes (or of a
class's methods): those are replaced, the rest kept. A small model asked to fix one function
writes that function alone under the file's name (measured on Qwen2.5-Coder-1.5B: calc.py lost
mul when it fixed add); written as it is, the file would lose everything else. A definition
written as a placeholder (only `pass`, `...` or a docstring, its comment saying "your existing
code goes here") where the file has a real one keeps the file's. Example lines a block adds at
the top level of a module that runs no code itself (`print(f(1))` under "# Example usage") go
under `if __name__ == "__main__":`: saved as written, importing the module ran them, and the
1.5B model's example raised there, so every check was one import error and no test ran.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
KEPT_NAMED = 6  # of the definitions kept, named in the note
MAIN_GUARD = 'if __name__ == "__main__":'


def merge_python(old: str, new: str) -> tuple[str, list[str]] | None:
    """(merged text, names kept from `old`) when `new` holds only imports and top-level
    definitions, and lacks some of `old`'s, or some methods of a class `old` has (the 1.5B model
    wrote one test method in its class under the test file's name, and the file lost its other
    tests and its imports); None when `new` should replace the file as it is (a whole file,
    other code, or either text is not valid Python)."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
        new = _methods_in_their_classes(old_tree, new_tree, new)
        new_tree = ast.parse(new)
    except (SyntaxError, ValueError):
        return None
    if not _spans(new_tree.body) or not _only_definitions(new_tree.body):
        return None
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    merged, kept = _merged(
        old_lines, old_tree.body, new_lines, new_tree.body, len(old_lines), "\n\n"
    )
    if not kept:
        return None
    imports = [line for line in _import_lines(new_tree, new_lines) if line not in old_lines]
    at = _after_imports(old_tree)
    merged[at:at] = imports
    text = "".join(merged)
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):  # a method indented otherwise than the class's
        return None
    return text, kept


def _merged(
    old_lines: list[str], old_body: list, new_lines: list[str], new_body: list, end: int, gap: str
) -> tuple[list[str], list[str]]:
    """`old_lines` with the definitions of `new_body` put in place of those of `old_body` and
    the new ones added at `end` (after the container's last line), each after `gap`; with the
    names kept. A class in both whose new body holds only some of its methods is merged the
    same way, inside it."""
    old_nodes, new_nodes = _named(old_body), _named(new_body)
    old_spans, new_spans = _spans(old_body), _spans(new_body)
    for name in set(old_spans) & set(new_spans):
        if _placeholder(new_nodes[name]) and not _placeholder(old_nodes[name]):
            del new_spans[name]  # "# your existing code goes here": the file's is kept
    kept = [name for name in old_spans if name not in new_spans]
    edits: list[tuple[int, int, list[str]]] = []
    added = [_ended(new_lines[a:b]) for name, (a, b) in new_spans.items() if name not in old_spans]
    if added:
        edits.append((end, end, [line for lines in added for line in [gap, *lines]]))
    for name, (start, stop) in old_spans.items():
        if name not in new_spans:
            continue
        inner = _class_merge(old_lines, old_nodes[name], new_lines, new_nodes[name])
        if inner is None:
            new_start, new_stop = new_spans[name]
            edits.append((start, stop, _ended(new_lines[new_start:new_stop])))
        else:
            lines, inner_kept = inner  # the class's lines changed, the rest as they were
            edits.append((start, stop, lines[start : stop + len(lines) - len(old_lines)]))
            kept += [f"{name}.{method}" for method in inner_kept]
    merged = list(old_lines)
    for start, stop, lines in sorted(edits, key=lambda edit: -edit[0]):
        merged[start:stop] = lines
    return merged, kept


def _class_merge(
    old_lines: list[str], old: ast.stmt, new_lines: list[str], new: ast.stmt
) -> tuple[list[str], list[str]] | None:
    """Two classes of one name: the old one's lines with the new one's methods merged in, when
    the new body holds only methods and lacks some of the old one's; else None."""
    both = isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef)
    if not both or not _only_definitions(new.body):
        return None
    if set(_spans(old.body)) <= set(_spans(new.body)):  # no method left out: a whole class
        return None
    end = old.end_lineno or old.lineno
    return _merged(old_lines, old.body, new_lines, new.body, end, "\n")


def _methods_in_their_classes(old_tree: ast.Module, new_tree: ast.Module, new: str) -> str:
    """`new` with each function taking self or cls that the file has as the method of one
    class (and not at its top level) put in a class of that name, indented as that class's
    methods are: a small model writes the method it changed alone."""
    owners: dict[str, ast.ClassDef] = {}
    for node in old_tree.body:
        for method in node.body if isinstance(node, ast.ClassDef) else []:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owners[method.name] = node if method.name not in owners else None
    top = set(_spans(old_tree.body))
    lines = new.splitlines(keepends=True)
    moved: dict[str, list[str]] = {}
    for node in reversed(new_tree.body):
        name = getattr(node, "name", "")
        owner = owners.get(name) if name not in top else None
        if owner is None or not _takes_self(node):
            continue
        start, stop = _spans([node])[node.name]
        indent = " " * owner.body[0].col_offset
        block = [indent + line if line.strip() else line for line in lines[start:stop]]
        moved[owner.name] = _ended(block) + moved.get(owner.name, [])
        del lines[start:stop]
    classes = [f"\n\nclass {name}:\n{''.join(body)}" for name, body in moved.items()]
    return "".join(lines).rstrip("\n") + "".join(classes) + "\n" if moved else new


def _takes_self(node: ast.stmt) -> bool:
    is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return is_function and bool(node.args.args) and node.args.args[0].arg in ("self", "cls")


def _named(body: list) -> dict[str, ast.stmt]:
    return {node.name: node for node in body if isinstance(node, DEFINITIONS)}


def merged_block(arguments: dict, look: Callable[[str, dict], dict]) -> tuple[dict, str]:
    """A write of a Python file block into the file as it is (`look` reads it): its example
    lines guarded, and when it holds only some of the file's definitions, merged; a note
    saying what was done, blank when it is written as it is."""
    path = arguments["path"]
    old = look("read", {"path": path}) if path.endswith(".py") else {}
    if not old.get("success") or old.get("truncated"):
        return arguments, ""
    old_text = str(old.get("content", ""))
    content, examples = examples_apart(old_text, arguments["content"])
    merged = merge_python(old_text, content)
    notes = []
    if merged is not None:
        content, names = merged
        kept = ", ".join(names[:KEPT_NAMED]) + (
            f" and {len(names) - KEPT_NAMED} more" * (len(names) > KEPT_NAMED)
        )
        notes.append(
            f"your block held only part of {path}: its definitions replaced those in the file; "
            f"{kept} kept as they were (left out of your block, or only a placeholder in it)"
        )
    if examples:
        content = content.rstrip("\n") + f"\n\n\n{MAIN_GUARD}\n" + textwrap.indent(examples, "    ")
        notes.append(
            f"the lines of your block that run code at the top level are under "
            f"`{MAIN_GUARD}` at the end, so importing {path} does not run them"
        )
    if not notes:
        return arguments, ""
    return {**arguments, "content": content}, "; ".join(notes)


def examples_apart(old: str, new: str) -> tuple[str, str]:
    """(`new` without its example lines, those lines dedented): the top-level statements that
    run code (an expression such as a call, or a statement calling print or something the
    module defines; its own `__main__` guard's body), with the comment lines just above
    them, when `old` is a module that runs no code itself and `new` defines something; else
    (`new`, ""). Constants (`WHITE = "W"`) stay where they are."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return new, ""
    defined = {*_spans(old_tree.body), *_spans(new_tree.body), "print"}
    examples = [node for node in new_tree.body if _runs_code(node, defined)]
    library = not any(_runs_code(node, defined) or _main_guard(node) for node in old_tree.body)
    if not (examples and library and _spans(new_tree.body)):
        return new, ""
    lines = new.splitlines(keepends=True)
    taken, kept_out = [], set()
    for node in examples:
        start, stop = node.lineno - 1, node.end_lineno or node.lineno
        while start and lines[start - 1].lstrip().startswith("#"):
            start -= 1  # "# Example usage"
        kept_out |= set(range(start, stop))
        first = node.body[0].lineno - 1 if _main_guard(node) else start
        taken.append(textwrap.dedent("".join(_ended(lines[first:stop]))))
    rest = "".join(line for index, line in enumerate(lines) if index not in kept_out)
    return rest.rstrip("\n") + "\n", "".join(taken)


def _runs_code(node: ast.stmt, defined: set[str]) -> bool:
    """A top-level statement that runs code when the module is imported: an expression (not a
    docstring), the module's `__main__` guard, or one that calls something in `defined`."""
    if isinstance(node, (*DEFINITIONS, ast.Import, ast.ImportFrom)) or _is_docstring(node):
        return False
    if isinstance(node, ast.Expr) or _main_guard(node):
        return True
    calls = (n.func for n in ast.walk(node) if isinstance(n, ast.Call))
    return any(isinstance(f, ast.Name) and f.id in defined for f in calls)


def _main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _spans(body: list) -> dict[str, tuple[int, int]]:
    """A body's definitions: name -> (first line with its decorators, end), 0-based."""
    spans = {}
    for node in body:
        if isinstance(node, DEFINITIONS):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans[node.name] = (first - 1, node.end_lineno or node.lineno)
    return spans


def _placeholder(node: ast.stmt) -> bool:
    """A definition with no code: only `pass`, `...` or a docstring in its body."""
    return all(isinstance(n, ast.Pass) or _is_docstring(n) for n in node.body)


def _only_definitions(body: list) -> bool:
    return all(
        isinstance(node, (*DEFINITIONS, ast.Import, ast.ImportFrom)) or _is_docstring(node)
        for node in body
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
