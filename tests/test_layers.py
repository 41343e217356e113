"""The package's layers: each part of lmagent/ imports only parts below it, no module imports
the repository's root scripts, and no two modules import each other (directly or in a circle).

Every import counts, also one inside a function or under `if TYPE_CHECKING:`: a circle that is
only "lazy" is still a circle a reader has to untangle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lmagent"

# lowest first; parts on one line are independent of each other
LAYERS = [
    ("core",),
    ("llm", "sandbox"),
    ("sessions", "checkpoints"),
    ("tools",),
    ("loop",),
    ("subagents",),
    ("runtime",),
    ("scheduler",),
    ("commands",),
    ("cli", "web"),
    ("__main__",),
]
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}
ROOT_SCRIPTS = {path.stem for path in ROOT.glob("*.py")}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def part_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {
    name: {m for m in imports_of(path) if m in MODULES and m != name}
    for name, path in MODULES.items()
}


def test_every_part_has_a_place_in_the_layers():
    parts = {part_of(name) for name in MODULES} - {""}
    unplaced = sorted(parts - LEVEL.keys())
    assert not unplaced, f"add {unplaced} to LAYERS (and to docs/ARCHITECTURE.md)"


def test_the_package_root_imports_nothing_of_its_own():
    assert not GRAPH["lmagent"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_own_part_or_parts_below(name):
    part = part_of(name)
    upward = sorted(
        target
        for target in GRAPH[name]
        if part_of(target) not in ("", part) and LEVEL[part_of(target)] >= LEVEL.get(part, -1)
    )
    assert not upward, f"{name} ({part}) imports a part on its own level or above: {upward}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_the_root_scripts(name):
    roots = sorted(m for m in imports_of(MODULES[name]) if m.split(".")[0] in ROOT_SCRIPTS)
    assert not roots, f"{name} imports root scripts {roots}; import from lmagent instead"


def test_no_import_circles():
    """Depth-first search for a back edge; the message shows the circle."""
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH[name]):
            if state.get(target) == "open":
                circle = [*trail[trail.index(target) :], target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(MODULES):
        if name not in state:
            visit(name, [name])


def test_the_checker_sees_an_upward_import(tmp_path):
    """The rule itself: a tools module importing the loop is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from lmagent.loop.run import run_agent\n")
    assert "lmagent.loop.run" in imports_of(bad)
    assert LEVEL[part_of("lmagent.loop.run")] >= LEVEL["tools"]


def test_architecture_doc_shows_every_part_and_module():
    """docs/ARCHITECTURE.md's tree names every folder and module of the package."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    tree = doc.split("## The tree", 1)[1].split("## Layers", 1)[0]
    for name in MODULES:
        parts = name.split(".")[1:]
        if not parts or parts[-1] == "__main__":
            continue
        if len(parts) == 1:
            assert f"{parts[0]}/" in tree or f"{parts[0]}.py" in tree, f"{parts[0]} missing"
        else:
            assert f"{parts[0]}/" in tree, f"{parts[0]}/ missing from the tree"
            assert f"{parts[-1]}.py" in tree or parts[-1] == "__init__", f"{name} missing"


@pytest.mark.parametrize("facade", ["agent_core", "agent_tools", "agent_llm", "agent_bca"])
def test_root_facades_import_and_name_real_paths(facade):
    """The card's module names stay as facades: they import, and every lmagent/ path their
    docstring names exists."""
    module = __import__(facade)
    named = re.findall(r"lmagent/[\w/]+(?:\.py)?", module.__doc__)
    assert named, f"{facade} names no place in the package"
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"{facade} names paths that do not exist: {missing}"
    assert all(hasattr(module, name) for name in module.__all__)
