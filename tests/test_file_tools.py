"""read, write, edit, glob, grep, ls and mkdir through the real Toolset."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

import lmagent.tools.files as file_tools
from lmagent.tools.toolset import build_toolset


@pytest.fixture
def run(ctx):
    tools = build_toolset()
    return lambda name, **args: tools.execute(ctx, name, args)


def failed(result: dict, *fragments: str) -> bool:
    assert result["success"] is False, result
    for fragment in fragments:
        assert fragment in result["error"], (fragment, result["error"])
    return True


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


# --------------------------------------------------------------------------- read


def test_read_returns_the_text_and_its_line_count(run, workspace):
    write(workspace / "notes.md", "# Title\nsome text\n")
    result = run("read", path="notes.md")
    assert result == {
        "path": "notes.md",
        "content": "# Title\nsome text\n",
        "total_lines": 2,
        "lines": "1-2",
        "success": True,
    }


def test_read_a_window_with_offset_and_limit(run, workspace):
    write(workspace / "ten.txt", "".join(f"line {n}\n" for n in range(1, 11)))
    result = run("read", path="ten.txt", offset=3, limit=2)
    assert result["content"] == "line 3\nline 4\n"
    assert (result["lines"], result["next_offset"], result["truncated"]) == ("3-4", 5, True)
    assert result["total_lines"] == 10
    tail = run("read", path="ten.txt", offset=9, limit=50)
    assert tail["content"] == "line 9\nline 10\n" and "next_offset" not in tail


def test_reading_a_large_file_window_by_window_gives_back_every_line(run, workspace):
    text = "".join(f"{n:05d} " + "x" * 94 + "\n" for n in range(5000))  # 500 KB, 5000 lines
    write(workspace / "big.log", text)
    pieces, offset, reads = [], 1, 0
    while offset is not None:
        result = run("read", path="big.log", offset=offset)
        assert len(result["content"]) <= file_tools.READ_MAX_CHARS
        assert result["total_lines"] == 5000
        pieces.append(result["content"])
        offset, reads = result.get("next_offset"), reads + 1
    assert "".join(pieces) == text
    assert reads > 5000 * 101 // file_tools.READ_MAX_CHARS  # the character cap applied


def test_read_caps_the_number_of_lines(run, workspace):
    write(workspace / "many.txt", "x\n" * 2500)
    result = run("read", path="many.txt", limit=100000)
    assert result["content"] == "x\n" * file_tools.READ_MAX_LINES
    assert result["next_offset"] == file_tools.READ_MAX_LINES + 1
    assert result["total_lines"] == 2500


def test_an_overlong_line_is_cut_and_reading_continues_after_it(run, workspace):
    write(workspace / "min.js", "a" * 300_000 + "\nsecond\n")
    first = run("read", path="min.js")
    assert first["content"].startswith("a" * file_tools.READ_MAX_CHARS)
    assert "rest of this long line not shown" in first["content"]
    assert first["next_offset"] == 2 and first["total_lines"] == 2
    assert run("read", path="min.js", offset=2)["content"] == "second\n"


def test_read_refuses_binary_files_and_directories(run, workspace):
    write(workspace / "logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (workspace / "src").mkdir()
    assert failed(run("read", path="logo.png"), "binary file")
    assert failed(run("read", path="src"), "is a directory", "ls")


def test_read_of_a_missing_file_suggests_ls_or_glob(run):
    assert failed(run("read", path="nope/missing.py"), "file not found", "ls", "glob")


@pytest.mark.parametrize(("offset", "limit"), [(0, 10), (-3, 10), (1, 0), (1, -1)])
def test_read_rejects_nonsense_windows(run, workspace, offset, limit):
    write(workspace / "a.txt", "a\n")
    assert failed(run("read", path="a.txt", offset=offset, limit=limit), "bad arguments")


def test_read_past_the_end_says_how_long_the_file_is(run, workspace):
    write(workspace / "a.txt", "a\nb\n")
    assert failed(run("read", path="a.txt", offset=5), "bad arguments", "(2 lines)")


def test_read_an_empty_file_and_undecodable_bytes(run, workspace):
    write(workspace / "empty.txt", "")
    assert run("read", path="empty.txt")["content"] == ""
    write(workspace / "latin.txt", b"caf\xe9\n")
    assert run("read", path="latin.txt")["content"] == "caf\ufffd\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_read_refuses_a_fifo_instead_of_hanging(run, workspace):
    os.mkfifo(workspace / "pipe")
    assert failed(run("read", path="pipe"), "not a regular file")
    assert failed(run("edit", path="pipe", search="a", replace="b"), "not a regular file")


# --------------------------------------------------------------------------- write


def test_write_creates_parent_folders_and_reports_creation(run, workspace):
    result = run("write", path="a/b/c/new.py", content="print('héllo')\n")
    assert result == {"path": "a/b/c/new.py", "bytes": 16, "created": True, "success": True}
    assert (workspace / "a/b/c/new.py").read_text(encoding="utf-8") == "print('héllo')\n"
    assert run("write", path="a/b/c/new.py", content="")["created"] is False
    assert (workspace / "a/b/c/new.py").read_bytes() == b""


def test_write_keeps_the_mode_and_leaves_no_temporary_files(run, workspace):
    script = write(workspace / "run.sh", "#!/bin/sh\necho 1\n")
    script.chmod(0o750)
    for n in range(5):
        assert run("write", path="run.sh", content=f"#!/bin/sh\necho {n}\n")["success"]
    assert run("edit", path="run.sh", search="echo 4", replace="echo 5")["success"]
    assert script.stat().st_mode & 0o777 == 0o750
    assert script.read_text() == "#!/bin/sh\necho 5\n"
    assert sorted(p.name for p in workspace.iterdir()) == [".lmagent", "run.sh"]


def test_a_failed_write_leaves_no_temporary_files(run, workspace):
    write(workspace / "blocker", "a file, not a folder")
    assert failed(run("write", path="blocker/inside.txt", content="x"), "in the way")
    assert failed(run("write", path="sub/", content="x"), "is a directory")
    (workspace / "dir").mkdir()
    assert failed(run("write", path="dir", content="x"), "is a directory")
    assert sorted(p.name for p in workspace.iterdir()) == [".lmagent", "blocker", "dir"]


def test_a_reader_never_sees_a_partial_file_while_writes_happen(run, workspace):
    old, new = "a" * 2_000_000, "b" * 2_000_000
    target = write(workspace / "data.txt", old)
    seen, done = set(), threading.Event()

    def reader():
        while not done.is_set():
            seen.add(target.read_text())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(20):
            assert run("write", path="data.txt", content=new if n % 2 == 0 else old)["success"]
    finally:
        done.set()
        thread.join()
    assert seen == {old, new}  # reads happened throughout, and none saw a partial file
    assert sorted(p.name for p in workspace.iterdir()) == [".lmagent", "data.txt"]


def test_write_replaces_unencodable_characters_instead_of_failing(run, workspace):
    assert run("write", path="odd.txt", content="ok \ud800 ok")["success"]
    assert (workspace / "odd.txt").read_text() == "ok ? ok"


# --------------------------------------------------------------------------- edit

CODE = """def total(items):
    result = 0
    for item in items:
        result += item.price
    return result
"""


def test_edit_exact_match(run, workspace):
    write(workspace / "shop.py", CODE)
    result = run("edit", path="shop.py", search="item.price", replace="item.price * item.qty")
    assert (result["match"], result["line"]) == ("exact", 4)
    assert (workspace / "shop.py").read_text() == CODE.replace(
        "item.price", "item.price * item.qty"
    )


def test_edit_tolerates_different_indentation_and_reindents_the_replacement(run, workspace):
    write(workspace / "shop.py", CODE)
    search = "for item in items:\n    result += item.price"  # indented 0 instead of 4
    replace = "for item in items:\n    if item.price:\n        result += item.price"
    result = run("edit", path="shop.py", search=search, replace=replace)
    assert (result["match"], result["line"]) == ("whitespace-tolerant", 3)
    assert (workspace / "shop.py").read_text() == (
        "def total(items):\n"
        "    result = 0\n"
        "    for item in items:\n"
        "        if item.price:\n"
        "            result += item.price\n"
        "    return result\n"
    )


def test_edit_tolerates_whitespace_inside_lines(run, workspace):
    write(workspace / "cfg.py", "x  =   1\ny = 2\n")
    result = run("edit", path="cfg.py", search="x = 1", replace="x = 10")
    assert result["match"] == "whitespace-tolerant"
    assert (workspace / "cfg.py").read_text() == "x = 10\ny = 2\n"


def test_edit_fuzzy_match_fixes_a_small_typo_in_search(run, workspace):
    write(workspace / "shop.py", CODE)
    result = run("edit", path="shop.py", search="    retrun result", replace="    return -result")
    assert (result["match"], result["line"]) == ("fuzzy", 5)
    assert (workspace / "shop.py").read_text() == CODE.replace("return result", "return -result")


def test_edit_fuzzy_never_widens_a_fragment_to_the_whole_line(run, workspace):
    write(workspace / "a.py", "total = compute(alpha, beta, gamma)\n")
    result = run("edit", path="a.py", search="compute(alpha, beta, gama)", replace="compute()")
    assert failed(result, "not found", "closest text is at line 1")
    assert (workspace / "a.py").read_text() == "total = compute(alpha, beta, gamma)\n"


def test_edit_refuses_an_ambiguous_exact_match(run, workspace):
    write(workspace / "a.py", "x = 1\ny = 2\nx = 1\n")
    assert failed(run("edit", path="a.py", search="x = 1", replace="x = 3"), "2 times", "1, 3")
    assert (workspace / "a.py").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_edit_refuses_an_ambiguous_whitespace_tolerant_match(run, workspace):
    text = "def a():\n    if ready:\n        go()\ndef b():\n        if ready:\n            go()\n"
    write(workspace / "a.py", text)
    result = run("edit", path="a.py", search="if ready:\n    go()", replace="stop()")
    assert failed(result, "2 places", "lines 2, 5")
    assert (workspace / "a.py").read_text() == text


def test_edit_refuses_an_ambiguous_fuzzy_match(run, workspace):
    text = "alpha = compute(1)\nother = 0\nalpha = compute(2)\n"
    write(workspace / "a.py", text)
    result = run("edit", path="a.py", search="alpha = compute(3)", replace="alpha = 0")
    assert failed(result, "ambiguous", "1, 3")
    assert (workspace / "a.py").read_text() == text


def test_edit_not_found_shows_the_closest_line(run, workspace):
    write(workspace / "shop.py", CODE)
    result = run("edit", path="shop.py", search="result = compute_tax(items)", replace="x")
    assert failed(result, "not found", "closest text is at line 4", "result += item.price")
    assert (workspace / "shop.py").read_text() == CODE


def test_edit_with_search_and_replace_swapped_says_so(run, workspace):
    """A small model gave edit hello.py 'print("Hello, world!")' 'Hello, world!'."""
    write(workspace / "hello.py", "Hello, world!\n")
    result = run("edit", path="hello.py", search='print("Hello, world!")', replace="Hello, world!")
    assert failed(result, "the replace text is in 'hello.py'", "Were they swapped?")
    assert (workspace / "hello.py").read_text() == "Hello, world!\n"


def test_edit_argument_mistakes(run, workspace):
    write(workspace / "a.py", "x = 1\n")
    assert failed(run("edit", path="a.py", search="x = 1", replace="x = 1"), "bad arguments")
    assert failed(run("edit", path="a.py", search="", replace="y"), "bad arguments")
    assert failed(run("edit", path="new.py", search="a", replace="b"), "not found", "write")
    assert (workspace / "a.py").read_text() == "x = 1\n"


def test_edit_keeps_crlf_line_endings(run, workspace):
    write(workspace / "win.txt", "first\r\n    second\r\nthird\r\n")
    result = run("edit", path="win.txt", search="first\nsecond", replace="one\ntwo\nthree")
    assert result["match"] == "whitespace-tolerant"
    assert (workspace / "win.txt").read_bytes() == b"one\r\ntwo\r\nthree\r\nthird\r\n"
    run("edit", path="win.txt", search="two\r\n", replace="2\r\n")
    assert (workspace / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\nthird\r\n"


def test_edit_of_an_lf_file_with_crlf_text_stays_lf(run, workspace):
    write(workspace / "unix.txt", "a\nb\nc\n")
    assert run("edit", path="unix.txt", search="a\r\nb", replace="A\r\nB")["success"]
    assert (workspace / "unix.txt").read_bytes() == b"A\nB\nc\n"


def test_edit_keeps_other_bytes_exactly(run, workspace):
    write(workspace / "latin.txt", b"caf\xe9 = 1\nvalue = 2\n")
    assert run("edit", path="latin.txt", search="value = 2", replace="value = 3")["success"]
    assert (workspace / "latin.txt").read_bytes() == b"caf\xe9 = 1\nvalue = 3\n"


def test_edit_keeps_the_final_newline_and_can_delete(run, workspace):
    write(workspace / "a.py", "a = 1\n  last = 2\n")
    run("edit", path="a.py", search="last = 2", replace="last = 3")
    assert (workspace / "a.py").read_text() == "a = 1\n  last = 3\n"
    run("edit", path="a.py", search="a = 1\n", replace="")
    assert (workspace / "a.py").read_text() == "  last = 3\n"


# --------------------------------------------------------------------------- glob


@pytest.fixture
def tree(workspace: Path) -> Path:
    for name in ("README.md", "setup.py", "src/app.py", "src/util/io.py", "docs/guide.md"):
        write(workspace / name, "text\n")
    write(workspace / ".git/config", "[core]\n")
    write(workspace / "src/.git/HEAD", "ref\n")
    return workspace


def test_glob_matches_relative_paths_recursively_and_per_folder(run, tree):
    assert run("glob", pattern="**/*.py")["matches"] == ["setup.py", "src/app.py", "src/util/io.py"]
    assert run("glob", pattern="*.py")["matches"] == ["setup.py"]
    assert run("glob", pattern="src/*")["matches"] == ["src/app.py", "src/util/"]
    assert run("glob", pattern="*.{md,py}")["matches"] == ["README.md", "setup.py"]
    assert run("glob", pattern="src/**/[a-i]*.py")["matches"] == ["src/app.py", "src/util/io.py"]
    assert run("glob", pattern="./docs/guide.md")["matches"] == ["docs/guide.md"]
    assert run("glob", pattern=f"{tree}/src/*.py")["matches"] == ["src/app.py"]


def test_glob_skips_git_and_lmagent_unless_named(run, tree):
    everything = run("glob", pattern="**/*")["matches"]
    assert not [m for m in everything if ".git" in m or ".lmagent" in m]
    assert run("glob", pattern=".git/*")["matches"] == [".git/config"]
    assert run("glob", pattern="**/.git/*")["matches"] == [".git/config", "src/.git/HEAD"]
    assert "agent's own data" in run("glob", pattern=".lmagent/**/*.json")["error"]


def test_glob_caps_its_results(run, workspace):
    for n in range(file_tools.GLOB_MAX_RESULTS + 20):
        write(workspace / "many" / f"f{n:04d}.txt", "")
    result = run("glob", pattern="many/*.txt")
    assert result["count"] == file_tools.GLOB_MAX_RESULTS and result["truncated"] is True
    assert result["matches"][0] == "many/f0000.txt"


def test_glob_with_no_match_and_bad_patterns(run, tree):
    assert run("glob", pattern="**/*.rs") == {
        "pattern": "**/*.rs",
        "matches": [],
        "count": 0,
        "success": True,
    }
    assert failed(run("glob", pattern="  "), "bad arguments")
    assert failed(run("glob", pattern="[z-a]*"), "bad arguments", "invalid glob")


# --------------------------------------------------------------------------- grep


def test_grep_finds_lines_with_numbers(run, workspace):
    write(workspace / "a.py", "import os\n\ndef main():\n    os.exit(1)\n")
    write(workspace / "b/c.py", "def helper():\n    pass\n")
    result = run("grep", pattern=r"^\s*def \w+\(")
    assert result["matches"] == [
        {"file": "a.py", "line": 3, "text": "def main():"},
        {"file": "b/c.py", "line": 1, "text": "def helper():"},
    ]
    assert result["count"] == 2 and result["files_searched"] == 2


def test_grep_plain_text_patterns(run, workspace):
    write(workspace / "a.txt", "x = 1\nneedle = 2\nNEEDLE\n")
    write(workspace / "b.txt", "nothing here\n")
    assert [m["line"] for m in run("grep", pattern="needle")["matches"]] == [2]
    assert [m["line"] for m in run("grep", pattern="Needle", ignore_case=True)["matches"]] == [
        2,
        3,
    ]


def test_grep_reports_each_matching_line_once(run, workspace):
    write(workspace / "a.txt", "aaa\nb\naXa\r\n")
    result = run("grep", pattern="a")
    assert [(m["line"], m["text"]) for m in result["matches"]] == [(1, "aaa"), (3, "aXa")]


def test_grep_matches_within_one_line_like_grep(run, workspace):
    write(workspace / "a.py", "x = 1\n\n\ndef f():\n    pass\nend\n")
    assert [m["line"] for m in run("grep", pattern=r"^\s*def")["matches"]] == [4]
    assert run("grep", pattern=r"pass\s+end")["count"] == 0  # spans two lines
    assert [m["line"] for m in run("grep", pattern=r"1$")["matches"]] == [1]
    assert [m["line"] for m in run("grep", pattern=r"^$")["matches"]] == [2, 3]
    write(workspace / "empty.txt", "")
    assert run("grep", pattern=r"^", paths=["empty.txt"])["count"] == 0


def test_grep_invalid_regex_is_a_clear_argument_error(run):
    assert failed(run("grep", pattern="foo("), "bad arguments", "invalid regular expression")
    assert failed(run("grep", pattern=""), "bad arguments")


def test_grep_ignore_case_for_ascii_escapes_and_other_scripts(run, workspace):
    write(workspace / "a.txt", "Hello World\nÉTÉ chaud\nnothing\n")
    assert run("grep", pattern="hello", ignore_case=True)["count"] == 1
    assert run("grep", pattern="hello")["count"] == 0
    escaped = run("grep", pattern=r"O\WWORLD", ignore_case=True)
    assert [m["line"] for m in escaped["matches"]] == [1]
    assert run("grep", pattern=r"[A-Z]ELLO", ignore_case=True)["count"] == 1
    assert run("grep", pattern=r"\x48ello", ignore_case=True)["count"] == 1
    assert [m["line"] for m in run("grep", pattern="été", ignore_case=True)["matches"]] == [2]
    assert run("grep", pattern="été")["count"] == 0


def test_grep_skips_binary_files_git_and_lmagent(run, workspace):
    write(workspace / "app.py", "sesame = 1\n")
    write(workspace / "blob.bin", b"sesame\x00\x01\x02")
    write(workspace / ".git/objects/x", "sesame\n")
    write(workspace / ".lmagent/notes", "sesame\n")
    assert [m["file"] for m in run("grep", pattern="sesame")["matches"]] == ["app.py"]
    named = run("grep", pattern="sesame", paths=[".lmagent"])
    assert named["success"] is False and "agent's own data" in named["error"]
    git = run("grep", pattern="sesame", paths=[".git"])
    assert [m["file"] for m in git["matches"]] == [".git/objects/x"]


def test_grep_paths_filter_by_file_folder_and_glob(run, workspace):
    for name in ("src/a.py", "src/b.txt", "tests/t.py", "top.py"):
        write(workspace / name, "needle\n")

    def files(paths):
        return [m["file"] for m in run("grep", pattern="needle", paths=paths)["matches"]]

    assert files(["src"]) == ["src/a.py", "src/b.txt"]
    assert files(["top.py"]) == ["top.py"]
    assert files(["**/*.py"]) == ["top.py", "src/a.py", "tests/t.py"]
    assert files(["src/*.py", "src"]) == ["src/a.py", "src/b.txt"]  # each file once
    assert files(["src/*.rs"]) == []
    assert failed(run("grep", pattern="needle", paths=["nope"]), "path not found: nope")


def test_grep_caps_results(run, workspace):
    write(workspace / "a.txt", "hit\n" * (file_tools.GREP_MAX_RESULTS + 50))
    result = run("grep", pattern="hit")
    assert result["count"] == file_tools.GREP_MAX_RESULTS and result["truncated"] is True
    assert result["matches"][-1]["line"] == file_tools.GREP_MAX_RESULTS


# Directory listings made by this process, recorded through Python's audit hooks (PEP 578): a
# real observation of what grep does, no patching. Hooks cannot be removed, so it is installed
# once and records only while a test sets LISTED to a list.
LISTED: list | None = None


def _audit(event: str, args: tuple) -> None:
    if LISTED is not None and event == "os.scandir":
        LISTED.append(args[0])


sys.addaudithook(_audit)


def test_grep_stops_at_its_cap_without_listing_the_rest_of_the_tree(run, workspace):
    global LISTED
    for n in range(file_tools.GREP_MAX_RESULTS + 50):
        write(workspace / "d000" / f"f{n:03d}.txt", "hit\n")
    for d in range(1, 60):
        for n in range(20):
            write(workspace / f"d{d:03d}" / f"f{n:03d}.txt", "hit\n")
    LISTED = []
    try:
        capped = run("grep", pattern="hit")
        listed_for_cap, LISTED = LISTED, []
        full = run("grep", pattern="no such text")
        listed_for_full = LISTED
    finally:
        LISTED = None
    assert capped["truncated"] is True
    assert capped["files_searched"] == file_tools.GREP_MAX_RESULTS + 1
    assert len(listed_for_cap) == 2  # the workspace and d000, listed by descriptor
    assert full["files_searched"] == file_tools.GREP_MAX_RESULTS + 50 + 59 * 20
    assert len(listed_for_full) == 1 + 60


def test_grep_stops_when_the_run_is_stopped(run, ctx, workspace):
    for n in range(20):
        write(workspace / f"f{n}.txt", "hit\n")
    ctx.stop.stop()
    result = run("grep", pattern="hit")
    assert (result["success"], result["count"], result["files_searched"]) == (True, 0, 0)


def test_grep_does_not_follow_symlinked_folders_or_block_on_fifos(run, workspace):
    write(workspace / "src/a.txt", "needle\n")
    (workspace / "src/loop").symlink_to(workspace)  # a cycle back to the root
    (workspace / "also.txt").symlink_to(workspace / "src/a.txt")  # a link to a file inside
    if hasattr(os, "mkfifo"):
        os.mkfifo(workspace / "src/pipe")
        assert failed(run("grep", pattern="x", paths=["src/pipe"]), "not a regular file")
    result = run("grep", pattern="needle")
    assert sorted(m["file"] for m in result["matches"]) == ["also.txt", "src/a.txt"]


# --------------------------------------------------------------------------- ls and mkdir


def test_ls_lists_folders_first_with_sizes(run, workspace):
    write(workspace / "b.txt", "12345")
    write(workspace / "a.txt", "1")
    (workspace / "zdir").mkdir()
    (workspace / "adir").mkdir()
    (workspace / "link").symlink_to(workspace / "a.txt")
    result = run("ls")
    assert result["path"] == "."
    assert result["entries"] == [
        {"name": ".lmagent", "type": "dir"},
        {"name": "adir", "type": "dir"},
        {"name": "zdir", "type": "dir"},
        {"name": "a.txt", "type": "file", "size": 1},
        {"name": "b.txt", "type": "file", "size": 5},
        {"name": "link", "type": "link"},
    ]
    assert run("ls", path="adir")["entries"] == []


def test_ls_errors_and_cap(run, workspace):
    write(workspace / "a.txt", "1")
    assert failed(run("ls", path="missing"), "directory not found")
    assert failed(run("ls", path="a.txt"), "is a file", "read")
    for n in range(file_tools.LS_MAX_ENTRIES + 5):
        write(workspace / "many" / f"{n:04d}", "")
    result = run("ls", path="many")
    assert len(result["entries"]) == file_tools.LS_MAX_ENTRIES
    assert (result["count"], result["truncated"]) == (file_tools.LS_MAX_ENTRIES + 5, True)


def test_mkdir_creates_nested_folders_once(run, workspace):
    assert run("mkdir", path="a/b/c") == {"path": "a/b/c", "created": True, "success": True}
    assert (workspace / "a/b/c").is_dir()
    assert run("mkdir", path="a/b/c")["created"] is False
    write(workspace / "file", "x")
    assert failed(run("mkdir", path="file"), "in the way")
    assert failed(run("mkdir", path="file/sub"), "in the way")


# --------------------------------------------------------------------------- hostile input


def test_a_catastrophic_grep_pattern_stops_at_its_deadline_and_never_freezes_the_process(
    run, workspace, monkeypatch
):
    monkeypatch.setattr(file_tools, "GREP_TIME_LIMIT", 1.0)
    write(workspace / "a.txt", "fine\n")
    write(workspace / "b.txt", "x" * 5000 + "\n")
    ticks = []
    done = threading.Event()

    def other_thread():  # stands for the web server or the REPL's input thread
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    thread = threading.Thread(target=other_thread)
    thread.start()
    started = time.monotonic()
    try:
        result = run("grep", pattern="(x+x+)+y")
    finally:
        done.set()
        thread.join()
    elapsed = time.monotonic() - started
    assert result["success"] is True and result["truncated"] is True
    assert "backtracks" in result["note"] and "b.txt" in result["note"]
    assert elapsed < 10, elapsed  # the deadline held (a frozen search runs for hours)
    assert len(ticks) > 100  # matching let the other thread run all along


def test_an_inexact_edit_of_a_huge_file_is_refused_instead_of_matched_fuzzily(run, workspace):
    lines = [f"def function_{n}(argument):\n    return argument * {n}\n" for n in range(150_000)]
    write(workspace / "big.py", "".join(lines))
    result = run("edit", path="big.py", search="def functoin_7(argument):", replace="x")
    assert failed(result, "too large", "copy them exactly")
    exact = run("edit", path="big.py", search="def function_7(argument):", replace="def f7(a):")
    assert exact["success"] is True and exact["match"] == "exact"
