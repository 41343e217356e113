"""Checkpoints survive whatever a model makes in the workspace: a name that is not UTF-8, a tree
thousands of folders deep (deeper than PATH_MAX as a string), a file that changes size while a
snapshot reads it, a run that grows the checkpoints past CHECKPOINT_MAX_MB. Each is made by the
model's shell call in a real sandbox (Docker and bwrap); the run ends completed, and `--undo`
puts back the file the same call deleted."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lmagent.checkpoints.inotify import HEADER, LIBC
from lmagent.checkpoints.steps import Checkpoints
from tests.cli_process import cli, cli_env, only_session
from tests.conftest import make_config, wait_for
from tests.scripted_llm import text, tool_call
from tests.test_web_support import WebHarness

pytest_plugins = ["tests.sandbox_fixtures"]

KEPT = "keep me\n"
DEPTH = 2100  # "d/" * 2100 is 4,200 characters: longer than PATH_MAX
DEEP_TREE = (
    "python3 -c \"import os\nfor _ in range(2100): os.mkdir('d'); os.chdir('d')\n"
    "open('f', 'w').write('deep')\""
)
IN_OPEN = 0x20
GUARD = 300  # seconds: a hang detector only; every wait here ends on an event


@pytest.fixture(params=["docker", "bwrap"])
def agent(request, require_backend, test_workspaces, sandbox_image, workspace, llm):
    """Run `agent_main.py` in the workspace (holding important.txt) with this backend."""
    backend = request.param
    require_backend(backend)
    test_workspaces.append(workspace)  # its container goes at the end of the session
    (workspace / "important.txt").write_text(KEPT)
    env = cli_env(workspace, llm, SANDBOX_BACKEND=backend, SANDBOX_IMAGE=sandbox_image)

    def run(*args: str, **settings: str):
        return cli(workspace, llm, *args, env={**env, **settings}, timeout=240)

    yield run
    # a deep tree an undo did not remove: rm walks it by descriptor (shutil.rmtree recurses)
    subprocess.run(["rm", "-rf", str(workspace / "d")], check=True)


def shell_steps(llm, *commands: str) -> None:
    llm.add(*(tool_call("shell", {"command": c, "timeout": 120}) for c in commands))
    llm.add(text("Done.\nTASK_COMPLETE"))


def events_of(done) -> list[dict]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def tool_results(events: list[dict]) -> list[dict]:
    return [event for event in events if event["type"] == "tool_result"]


def test_a_name_that_is_not_utf8_is_checkpointed_shown_and_undone(agent, workspace, llm):
    shell_steps(llm, """rm important.txt; printf x > "$(printf 'bad\\377name')" """)
    (result,) = tool_results(events_of(agent("--json", "make a file")))
    assert result["changed"] == ["bad\\xffname", "important.txt"]  # shown with its byte written
    assert "diff --git a/bad\\xffname b/bad\\xffname\nnew file mode 100644" in result["diff"]

    listed = agent("--checkpoints")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("1 ") and "bad\\xffname, important.txt" in listed.stdout
    session_id = only_session(workspace)["id"]
    with WebHarness(make_config(workspace, llm)) as web:
        shown = web.session().get(f"{web.base}/api/sessions/{session_id}/checkpoints").json()
    assert shown["steps"][0]["changed"] == ["bad\\xffname", "important.txt"]

    undone = agent("--undo")
    assert undone.returncode == 0, undone.stderr
    assert "bad\\xffname" in undone.stdout
    assert (workspace / "important.txt").read_text() == KEPT
    assert b"bad\xffname" not in os.listdir(bytes(workspace))
    redone = agent("--undo")  # the undo undone: the exact byte name comes back
    assert redone.returncode == 0, redone.stderr
    assert (Path(os.fsdecode(bytes(workspace) + b"/bad\xffname"))).read_text() == "x"


def test_a_tree_deeper_than_path_max_is_checkpointed_and_undone(agent, workspace, llm):
    shell_steps(llm, f"rm important.txt && {DEEP_TREE}")
    (result,) = tool_results(events_of(agent("--json", "make a deep tree")))
    assert result["changed"] == ["d/" * DEPTH + "f", "important.txt"]

    undone = agent("--undo")
    assert undone.returncode == 0, undone.stderr
    assert (workspace / "important.txt").read_text() == KEPT
    assert not (workspace / "d").exists()


def test_checkpoint_max_mb_holds_during_a_run(agent, workspace, llm):
    big = "head -c 600000 /dev/urandom > big{}.bin"  # incompressible: 0.6 MB in the repository
    shell_steps(llm, f"rm important.txt; {big.format(1)}", *(big.format(n) for n in (2, 3, 4)))
    events = events_of(agent("--json", "make big files", CHECKPOINT_MAX_MB="1"))
    steps = [result.get("step") for result in tool_results(events)]
    assert steps == [1, 2, None, None]  # the third call finds the repository over its cap
    statuses = [event["message"] for event in events if event["type"] == "status"]
    lost = "checkpoint failed (this session's checkpoints reached CHECKPOINT_MAX_MB=1; "
    assert sum(message.startswith(lost) for message in statuses) == 2
    assert Checkpoints(workspace).repo.size() < 1.9 * 2**20  # two files' worth, not four

    listed = agent("--checkpoints").stdout.splitlines()
    assert [line[:2] for line in listed] == ["1 ", "2 ", "- ", "- "]
    assert "checkpoint lost: this session's checkpoints reached CHECKPOINT_MAX_MB=1" in listed[2]
    assert agent("--undo").returncode == 0  # to before step 2: big2.bin goes
    assert not (workspace / "big2.bin").exists() and (workspace / "big3.bin").exists()
    assert agent("--restore", only_session(workspace)["id"], "1").returncode == 0
    assert (workspace / "important.txt").read_text() == KEPT


def grow_when_opened(folder: Path, trigger: str, target: Path, size: int) -> threading.Thread:
    """A thread that makes `target` `size` bytes long (sparse) as soon as anything opens
    `trigger` in `folder`: a snapshot listed `target` small, and reads it after `trigger`."""
    watch = LIBC.inotify_init1(os.O_CLOEXEC)
    assert watch >= 0 and LIBC.inotify_add_watch(watch, bytes(folder), IN_OPEN) >= 0

    def wait() -> None:
        try:
            while True:
                data = os.read(watch, 4096)
                names = []
                at = 0
                while at < len(data):
                    *_, length = HEADER.unpack_from(data, at)
                    names.append(data[at + HEADER.size : at + HEADER.size + length].rstrip(b"\0"))
                    at += HEADER.size + length
                if trigger.encode() in names:
                    os.truncate(target, size)
                    return
        finally:
            os.close(watch)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_a_file_that_grows_while_a_snapshot_reads_it_is_never_read_by_its_size(workspace):
    for n in range(2000):  # read one by one after the listing, before zz.bin
        (workspace / f"a{n:04}.txt").write_text(f"{n}\n")
    (workspace / "zz.bin").write_bytes(b"")  # listed as 0 bytes ...
    grown = grow_when_opened(workspace, "a0000.txt", workspace / "zz.bin", 2**40)  # ... 1 TB
    checkpoints = Checkpoints(workspace)
    checkpoints.repo.ensure()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = int(Path("/proc/self/status").read_text().split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, hard))  # a read sized by fstat fails
    try:
        snapshot = checkpoints.take("a file grows while it is read")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    grown.join(10)
    assert not grown.is_alive(), "zz.bin was never grown"
    assert "zz.bin: larger than 10 MB, not kept" in snapshot.notes
    kept = checkpoints.repo.git("ls-tree", "--name-only", snapshot.commit).split()
    assert "zz.bin" not in kept and "a1999.txt" in kept


SWAP_FILES = """
import os, sys
sys.path.insert(0, sys.argv[1])
from race_swapper import exchange_function
exchange = exchange_function()
open("swapping", "w").close()
while not os.path.exists("stop-swapping"):
    for _ in range(200):
        exchange(b"x.txt", b"y.txt")
"""


def take_into(checkpoints: Checkpoints, taken: list, message: str) -> None:
    taken.append(checkpoints.take(message))


def test_a_process_renaming_in_a_tight_loop_never_stalls_a_snapshot(workspace):
    """Renames queue events as fast as a look can read them: each look reads what was queued
    when it began, so it ends, and it still sees the files written before it."""
    (workspace / "x.txt").write_text("x\n")
    (workspace / "y.txt").write_text("y\n")
    checkpoints = Checkpoints(workspace)
    checkpoints.take("the first look: every folder watched")
    tests_dir = str(Path(__file__).parent)
    swapper = subprocess.Popen([sys.executable, "-c", SWAP_FILES, tests_dir], cwd=workspace)
    try:
        wait_for(
            lambda: (workspace / "swapping").exists() or swapper.poll() is not None,
            GUARD,
            "the swapper",
        )
        assert swapper.poll() is None, "the swapper ended before swapping"
        for n in range(10):
            (workspace / f"note{n}.txt").write_text(f"{n}\n")
            taken: list = []
            look = threading.Thread(target=take_into, args=(checkpoints, taken, f"look {n}"))
            look.start()
            look.join(GUARD)  # a hang detector only: a look takes milliseconds
            assert taken, f"look {n} never ended while another process renamed files"
            kept = checkpoints.repo.git("ls-tree", "--name-only", taken[0].commit).split()
            assert f"note{n}.txt" in kept
    finally:
        (workspace / "stop-swapping").touch()
        swapper.wait(GUARD)
