"""docs/SECURITY.md is the inventory of everything the host does by path: a function of the
package that opens, lists, changes or runs anything on the filesystem (or starts a process) must
be named in one of its rows, with how it is protected and the test that attacks it. A new
host-side operation without a line there fails here; so does a line naming code or a test that
no longer exists.

What counts is found by reading the code (an AST scan), not by running it: calls of open(),
the os and shutil file functions, subprocess, and the pathlib methods that touch the
filesystem. sandbox/runner.py is left out: it runs inside the sandbox.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lmagent"
INVENTORY = ROOT / "docs" / "SECURITY.md"
INSIDE_THE_SANDBOX = {"lmagent.sandbox.runner"}

OS_FILE_CALLS = {
    "open", "stat", "lstat", "listdir", "scandir", "walk", "fwalk", "remove", "unlink", "rename",
    "renames", "replace", "rmdir", "removedirs", "mkdir", "makedirs", "symlink", "link",
    "readlink", "chmod", "chown", "lchown", "utime", "truncate", "access", "mkfifo", "statvfs",
}  # fmt: skip
PATH_CALLS = {
    "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "iterdir",
    "rglob", "touch", "rmdir", "symlink_to", "hardlink_to", "is_file", "is_dir", "exists",
    "is_symlink", "lstat", "chmod",
}  # fmt: skip
PROCESS_MODULES = {"subprocess", "shutil"}
CODE_TOKEN = re.compile(r"`(lmagent(?:\.\w+)+):([\w.*<>]+)`")
TEST_TOKEN = re.compile(r"`(tests/test_\w+\.py)(?:::(\w+))?`")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def host_operation(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "open"
    if not isinstance(func, ast.Attribute):
        return False
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner in PROCESS_MODULES:
        return func.attr != "which"
    if owner == "os":
        return func.attr in OS_FILE_CALLS
    if owner in ("json", "re", "time", "socket", "str", "sys"):
        return False
    return func.attr in PATH_CALLS


class Scan(ast.NodeVisitor):
    """module:function names of the functions (class.method, outer.inner) doing host calls."""

    def __init__(self, module: str):
        self.module, self.stack, self.found = module, [], set()

    def visit_FunctionDef(self, node) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        if host_operation(node):
            self.found.add(f"{self.module}:{'.'.join(self.stack) or '<module>'}")
        self.generic_visit(node)


def scanned() -> set[str]:
    found: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module in INSIDE_THE_SANDBOX:
            continue
        scan = Scan(module)
        scan.visit(ast.parse(path.read_text()))
        found |= scan.found
    return found


def listed() -> set[str]:
    return {f"{module}:{name}" for module, name in CODE_TOKEN.findall(INVENTORY.read_text())}


def covered(name: str, tokens: set[str]) -> bool:
    module = name.split(":")[0]
    return name in tokens or f"{module}:*" in tokens


def test_every_host_side_operation_has_a_line_in_the_inventory():
    tokens = listed()
    missing = sorted(name for name in scanned() if not covered(name, tokens))
    assert not missing, (
        "host-side file or process operations without a line in docs/SECURITY.md (say how each "
        "is protected and which test attacks it): " + ", ".join(missing)
    )


def test_the_inventory_names_only_code_that_exists():
    found = scanned()
    modules = {name.split(":")[0] for name in found}
    stale = sorted(
        token
        for token in listed()
        if not (token in found or (token.endswith(":*") and token.split(":")[0] in modules))
    )
    assert not stale, f"docs/SECURITY.md names code that does no host operation (any more): {stale}"


def test_the_inventory_names_only_tests_that_exist():
    missing = []
    for file, name in TEST_TOKEN.findall(INVENTORY.read_text()):
        path = ROOT / file
        if not path.is_file() or (name and not re.search(rf"def {name}\(", path.read_text())):
            missing.append(f"{file}::{name}" if name else file)
    assert not missing, f"docs/SECURITY.md names tests that do not exist: {missing}"


def test_the_scan_sees_a_planted_operation():
    planted = "def sneaky(workspace):\n    (workspace / 'x').write_text('y')\n"
    scan = Scan("lmagent.tools.sneaky")
    scan.visit(ast.parse(planted))
    assert scan.found == {"lmagent.tools.sneaky:sneaky"}
    assert not covered("lmagent.tools.sneaky:sneaky", listed())
