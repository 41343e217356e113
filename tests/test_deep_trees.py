"""No tree or name a model makes in the workspace takes the file tools away.

One shell call makes folders nested 1,500 deep (`mkdir -p d/d/d/...`), another a file whose name
is not UTF-8 (`printf x > "$(printf 'bad\\xffname')"`). Walking such a tree must not recurse once
per folder (RecursionError) nor hold a descriptor per folder (EMFILE under a common limit of
1,024), and a name that is not UTF-8 is shown with \\xNN escapes (and found again by what is
shown) instead of breaking the JSON a result, an event or the web listing is sent as. The tools
run here under a descriptor limit of 256.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
from pathlib import Path

import pytest

from lmagent.core.workspace import OPEN_FOLDERS, Workspace
from lmagent.tools.toolset import build_toolset
from lmagent.web.app import create_app
from tests.conftest import make_config

DEPTH = 1500
DEEP_DIR = "/".join(["d"] * DEPTH)
DEEP_FILE = DEEP_DIR + "/deep.txt"
BAD_NAME = b"bad\xffname.txt"
SHOWN_BAD_NAME = "bad\\xffname.txt"
DESCRIPTORS = 256
PIN = "24681357"


@contextlib.contextmanager
def few_descriptors():
    """The process may hold only DESCRIPTORS open files meanwhile."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(DESCRIPTORS, soft), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_below(root: Path) -> int:
    """This process's descriptors open on `root` or inside it: what another thread of the
    test process opens meanwhile (a server's socket, a log) is not the walk's."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(root))
    return count


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """A workspace with a file at the bottom of a 1,500-deep chain and a non-UTF-8 name, both
    made by shell commands as a model would; removed with rm -rf (shutil.rmtree recurses)."""
    root = tmp_path_factory.mktemp("deep").resolve()
    make = f'mkdir -p {DEEP_DIR} && echo "needle at the bottom" > {DEEP_FILE}'
    subprocess.run(["sh", "-c", make], cwd=root, check=True)
    subprocess.run(
        ["sh", "-c", "echo 'needle in a bad name' > \"$(printf 'bad\\377name.txt')\""],
        cwd=root,
        check=True,
    )
    assert BAD_NAME in os.listdir(os.fsencode(root))
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=True)


@pytest.fixture
def workspace(deep):
    return deep


@pytest.fixture
def run(ctx):
    tools = build_toolset()

    def call(name: str, **args) -> dict:
        with few_descriptors():
            return tools.execute(ctx, name, args)

    return call


def test_glob_finds_the_file_at_the_bottom_and_shows_a_non_utf8_name(run, deep):
    result = run("glob", pattern="**/*.txt")
    assert result["success"], result
    assert sorted(result["matches"]) == sorted([SHOWN_BAD_NAME, DEEP_FILE])
    assert run("glob", pattern="bad\\xff*")["matches"] == [SHOWN_BAD_NAME]


def test_grep_finds_the_text_at_the_bottom_and_in_a_non_utf8_name(run, deep):
    result = run("grep", pattern="needle")
    assert result["success"], result
    found = {(m["file"], m["text"]) for m in result["matches"]}
    assert found == {(DEEP_FILE, "needle at the bottom"), (SHOWN_BAD_NAME, "needle in a bad name")}


def test_ls_and_read_reach_the_bottom_and_a_non_utf8_name(run, deep):
    top = run("ls", path=".")
    assert {e["name"] for e in top["entries"]} == {".lmagent", "d", SHOWN_BAD_NAME}
    bottom = run("ls", path=DEEP_DIR)
    assert bottom["entries"] == [{"name": "deep.txt", "type": "file", "size": 21}]
    read = run("read", path=DEEP_FILE)
    assert read["content"] == "needle at the bottom\n", read
    read = run("read", path=SHOWN_BAD_NAME)
    assert (read["path"], read["content"]) == (SHOWN_BAD_NAME, "needle in a bad name\n")
    down_and_up = "d/" * 600 + "../" * 600 + SHOWN_BAD_NAME  # up through folders let go
    assert run("read", path=down_and_up)["path"] == SHOWN_BAD_NAME


def test_the_web_file_listing_shows_the_top_and_a_non_utf8_name(deep):
    client = create_app(make_config(deep), {"PIN": PIN}).test_client()
    assert client.post("/api/login", json={"pin": PIN}).status_code == 200
    with few_descriptors():
        listing = client.get("/api/files?path=.").json
        preview = client.get("/api/file", query_string={"path": SHOWN_BAD_NAME}).json
        bottom = client.get("/api/files", query_string={"path": DEEP_DIR}).json
    entries = {e["name"]: (e["path"], e["type"]) for e in listing["entries"]}
    assert entries[SHOWN_BAD_NAME] == (SHOWN_BAD_NAME, "file") and entries["d"] == ("d", "dir")
    assert (preview["name"], preview["content"]) == (SHOWN_BAD_NAME, "needle in a bad name\n")
    assert [e["path"] for e in bottom["entries"]] == [DEEP_FILE]


def test_a_deep_walk_keeps_its_order_and_holds_few_descriptors(tmp_path):
    """Every level holds a folder `e` besides `d`: the walk comes back up through all 1,500
    levels, opening again the folders it let go, and lists what a plain walk lists."""
    root = tmp_path / "ws"
    root.mkdir()
    try:
        fd = os.open(root, os.O_RDONLY)
        for _ in range(DEPTH):
            os.mkdir("e", dir_fd=fd)
            os.close(os.open("e/f.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
            os.close(parent)
        os.close(fd)
        seen, most = [], 0
        with few_descriptors():
            for item in Workspace(root).walk("."):
                seen.append(item.rel + "/" * item.is_dir)
                most = max(most, open_below(root))
        levels = ["d/" * level for level in range(DEPTH)]
        going_down = [name for above in levels for name in (above + "d/", above + "e/")]
        assert seen == going_down + [above + "e/f.txt" for above in reversed(levels)]
        assert most <= OPEN_FOLDERS + 2
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)
