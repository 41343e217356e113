"""Attacks on the workspace boundary through every path argument of every file tool.

Each attack must fail, change nothing outside the workspace (or in the agent's own
configuration), and leak no outside content into the result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lmagent.sessions.store import SessionStore
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config, tool_context

SECRET = "TOPSECRET-7f3a"
PROTECTED_TEXT = "project context: be careful"


@pytest.fixture
def box(tmp_path: Path, workspace: Path):
    """A workspace with links pointing out of it and into .lmagent, and a secret outside."""
    outside = (tmp_path / "outside").resolve()
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "sub" / "deep.txt").write_text(SECRET + " deep\n")
    config = make_config(workspace)
    session = SessionStore(workspace).create("t")
    (workspace / ".lmagent.md").write_text(PROTECTED_TEXT)
    (workspace / ".lmagent" / "mcp.json").write_text("{}")
    (workspace / "ok.txt").write_text("inside\n")
    (workspace / "link_file").symlink_to(outside / "secret.txt")
    (workspace / "link_dir").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "created-by-attack.txt")
    (workspace / "inner").symlink_to(workspace / ".lmagent")
    (workspace / "md_link").symlink_to(workspace / ".lmagent.md")
    ctx = tool_context(config, session=session)
    tools = build_toolset()
    return {
        "run": lambda name, args: tools.execute(ctx, name, args),
        "outside": outside,
        "workspace": workspace,
    }


def snapshot(directory: Path) -> dict:
    """Every entry below a directory with its type, mode and content."""
    state = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink():
            state[str(path)] = ("link", os.readlink(path))
        elif path.is_dir():
            state[str(path)] = ("dir", path.stat().st_mode)
        else:
            state[str(path)] = ("file", path.stat().st_mode, path.read_bytes())
    return state


def protected(workspace: Path) -> tuple:
    lmagent = {k: v for k, v in snapshot(workspace / ".lmagent").items() if "sessions" not in k}
    return lmagent, (workspace / ".lmagent.md").read_bytes()


def attack(box, tool: str, args: dict, *fragments: str) -> dict:
    """Run an attack; it must fail without touching or revealing anything it should not."""
    before_outside = snapshot(box["outside"])
    before_protected = protected(box["workspace"])
    result = box["run"](tool, args)
    assert result["success"] is False, (tool, args, result)
    for fragment in fragments:
        assert fragment in result["error"], (fragment, result["error"])
    assert SECRET not in json.dumps(result)
    assert snapshot(box["outside"]) == before_outside
    assert protected(box["workspace"]) == before_protected
    return result


OUTSIDE = "outside the workspace"
HOME = "home directory"
OWN_CONFIG = "agent's own configuration"
LONG = "x" * 5000
DEEP = "a/" * 3000 + "f.txt"

READ_ATTACKS = [
    ("../outside/secret.txt", OUTSIDE),
    ("sub/../../outside/secret.txt", OUTSIDE),
    ("{outside}/secret.txt", OUTSIDE),
    ("/etc/passwd", OUTSIDE),
    ("~/.bashrc", HOME),
    ("~", HOME),
    ("link_file", OUTSIDE),
    ("link_dir/secret.txt", OUTSIDE),
    ("link_dir/sub/deep.txt", OUTSIDE),
    ("ok.txt\x00.png", "NUL"),
    ("", "non-empty"),
    ("   ", "non-empty"),
    (LONG, "cannot"),
    (DEEP, "cannot"),
]


def short_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} chars)"


def _fill(path: str, box) -> str:
    return path.replace("{outside}", str(box["outside"]))


@pytest.mark.parametrize(("path", "why"), READ_ATTACKS, ids=short_id)
def test_read_attacks(box, path, why):
    attack(box, "read", {"path": _fill(path, box)}, why)


WRITE_ATTACKS = [
    *READ_ATTACKS,
    ("../outside/new.txt", OUTSIDE),
    ("link_dir/new.txt", OUTSIDE),
    ("link_dir/sub/new/deeper.txt", OUTSIDE),
    ("dangling", OUTSIDE),
    ("~/evil.txt", HOME),
    (".lmagent/mcp.json", OWN_CONFIG),
    (".lmagent/new.json", OWN_CONFIG),
    (".lmagent/sessions/evil.meta.json", OWN_CONFIG),
    (".LMAGENT/x", OWN_CONFIG),
    (".lmagent.md", OWN_CONFIG),
    (".LMAGENT.MD", OWN_CONFIG),
    ("./.lmagent.md", OWN_CONFIG),
    ("sub/../.lmagent/x", OWN_CONFIG),
    ("{workspace}/.lmagent.md", OWN_CONFIG),
    ("inner/mcp.json", OWN_CONFIG),
    ("inner/sessions/x.jsonl", OWN_CONFIG),
    ("md_link", OWN_CONFIG),
]


@pytest.mark.parametrize(("path", "why"), WRITE_ATTACKS, ids=short_id)
def test_write_attacks(box, path, why):
    path = _fill(path, box).replace("{workspace}", str(box["workspace"]))
    attack(box, "write", {"path": path, "content": "pwned"}, why)
    assert not (box["outside"] / "created-by-attack.txt").exists()
    assert not (box["workspace"] / ".LMAGENT").exists()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside/secret.txt", OUTSIDE),
        ("link_file", OUTSIDE),
        ("link_dir/secret.txt", OUTSIDE),
        ("~/secret.txt", HOME),
        (".lmagent.md", OWN_CONFIG),
        ("md_link", OWN_CONFIG),
        ("inner/mcp.json", OWN_CONFIG),
        (".lmagent/mcp.json", OWN_CONFIG),
        ("", "non-empty"),
        ("ok.txt\x00", "NUL"),
    ],
)
def test_edit_attacks(box, path, why):
    search = PROTECTED_TEXT if "md" in path else SECRET
    attack(box, "edit", {"path": path, "search": search, "replace": "pwned"}, why)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside/newdir", OUTSIDE),
        ("link_dir/newdir", OUTSIDE),
        ("{outside}/newdir", OUTSIDE),
        ("~/newdir", HOME),
        (".lmagent/newdir", OWN_CONFIG),
        (".LMAGENT", OWN_CONFIG),
        (".lmagent.md/x", OWN_CONFIG),
        ("inner/newdir", OWN_CONFIG),
        ("", "non-empty"),
        ("new\x00dir", "NUL"),
        (DEEP.removesuffix("/f.txt"), "cannot"),
    ],
    ids=short_id,
)
def test_mkdir_attacks(box, path, why):
    attack(box, "mkdir", {"path": _fill(path, box)}, why)
    assert not (box["workspace"] / ".LMAGENT").exists()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("..", OUTSIDE),
        ("../outside", OUTSIDE),
        ("{outside}", OUTSIDE),
        ("/", OUTSIDE),
        ("link_dir", OUTSIDE),
        ("link_dir/sub", OUTSIDE),
        ("~", HOME),
        ("a\x00", "NUL"),
        (LONG, "cannot"),
    ],
    ids=short_id,
)
def test_ls_attacks(box, path, why):
    attack(box, "ls", {"path": _fill(path, box)}, why)


@pytest.mark.parametrize(
    "pattern",
    [
        "../*",
        "../outside/*",
        "../**/*",
        "**/../../*",
        "src/../../*",
        "/etc/*",
        "/etc/passwd",
        "{outside}/*",
        "~/*",
        "link_dir/*",
        "link_dir/**/*",
        "link_dir/sub/*.txt",
        "*\x00",
    ],
)
def test_glob_attacks(box, pattern):
    attack(box, "glob", {"pattern": _fill(pattern, box)})


@pytest.mark.parametrize(
    "paths",
    [
        ["../"],
        [".."],
        ["/etc/passwd"],
        ["/etc"],
        ["../outside/secret.txt"],
        ["{outside}"],
        ["link_dir"],
        ["link_dir/sub"],
        ["link_file"],
        ["~"],
        ["../*"],
        ["**/../../*"],
        ["/etc/*"],
        ["link_dir/*"],
        ["ok.txt", "../outside/secret.txt"],
        ["ok.txt\x00"],
        [""],
    ],
)
def test_grep_path_attacks(box, paths):
    attack(box, "grep", {"pattern": "TOPSECRET", "paths": [_fill(p, box) for p in paths]})


def test_walking_the_workspace_never_follows_links_outside(box):
    run = box["run"]
    everything = run("grep", {"pattern": "."})
    assert everything["success"] is True
    assert SECRET not in json.dumps(everything)
    files = {m["file"] for m in everything["matches"]}
    assert files == {"ok.txt", ".lmagent.md", "md_link"}  # no link_file, link_dir/*, .lmagent/
    for pattern in ("**/*", "*", "**", "**/*.txt", "link*", "*/*"):
        listing = run("glob", {"pattern": pattern})
        assert listing["success"] is True
        assert not [m for m in listing["matches"] if m.startswith(("link_", "dangling"))]
        assert "secret" not in json.dumps(listing)


def test_the_project_context_is_readable_but_the_agents_data_is_not(box):
    run, workspace = box["run"], box["workspace"]
    assert run("read", {"path": ".lmagent.md"})["content"] == PROTECTED_TEXT
    assert run("read", {"path": "md_link"})["content"] == PROTECTED_TEXT
    (workspace / "mcp_link").symlink_to(workspace / ".lmagent" / "mcp.json")
    (workspace / ".lmagent" / "mcp_images").mkdir()
    (workspace / ".lmagent" / "mcp_images" / "shot.txt").write_text("image stand-in")
    for call in (
        ("read", {"path": ".lmagent/mcp.json"}),
        ("read", {"path": "mcp_link"}),
        ("read", {"path": "sub/../.lmagent/sessions/x.jsonl"}),
        ("ls", {"path": ".lmagent"}),
        ("ls", {"path": ".lmagent/sessions"}),
        ("glob", {"pattern": ".lmagent/*.json"}),
        ("grep", {"pattern": ".", "paths": [".lmagent/mcp.json"]}),
        ("grep", {"pattern": ".", "paths": ["mcp_link"]}),
    ):
        result = run(*call)
        assert result["success"] is False and "agent's own data" in result["error"], call
    assert "mcp_link" not in json.dumps(run("grep", {"pattern": "."}))
    assert run("read", {"path": ".lmagent/mcp_images/shot.txt"})["content"] == "image stand-in"


def test_ordinary_paths_inside_still_work(box):
    run, workspace = box["run"], box["workspace"]
    assert run("write", {"path": f"{workspace}/abs.txt", "content": "a"})["success"]
    assert run("write", {"path": "sub/../rel.txt", "content": "b"})["success"]
    assert run("write", {"path": ".lmagent-notes.md", "content": "c"})["success"]
    assert run("mkdir", {"path": "lmagent/x"})["success"]
    assert run("read", {"path": "./abs.txt"})["content"] == "a"
    assert sorted(p.name for p in workspace.glob("*.txt")) == ["abs.txt", "ok.txt", "rel.txt"]
