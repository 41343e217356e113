"""Checkpoints under faults: a disk that fills up during a restore, a folder swapped for a link
to a host folder while restores and snapshots run, two runs at once on one workspace, and a
shadow repository damaged in each way it can be (objects, stat cache, ref, the whole git dir)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from lmagent.checkpoints.recorder import StepRecorder
from lmagent.checkpoints.shadow import SESSIONS, CheckpointError
from lmagent.checkpoints.steps import Checkpoints, RestoreRefused
from lmagent.cli.undo import RestoreFailed, checkpoint_lines, restore
from lmagent.loop.restore import restore_session, steps_of
from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from tests.cli_process import cli, only_session
from tests.conftest import make_config, wait_for
from tests.scripted_llm import ScriptedLLM, text, tool_call
from tests.test_race import GUARD, Race, _host_state, _plant

pytest_plugins = ["tests.sandbox_fixtures"]

SWAPPER = Path(__file__).with_name("race_swapper.py")
RESTORES = 200
# the first of two runs at once: it tells its step has begun (in .lmagent/sandbox/, which no
# checkpoint sees); the other run writes while it sleeps, or after its step if held up
FIRST_RUNS_COMMAND = "touch .lmagent/sandbox/first-started && sleep 1.5 && echo one > a.txt"
CANARY = b"CANARY-checkpoints-7f3e"


def tree_state(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` (outside .lmagent/) with its content or link target."""
    found: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel.split(os.sep)[0] == ".lmagent":
            dirs.clear()
            continue
        for name in dirs + files:
            path = Path(folder) / name
            key = os.path.normpath(os.path.join(rel, name))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = path.read_bytes()
            else:
                found[key] = "dir"
    return found


@contextlib.contextmanager
def small_disk(where: Path, size: str, inodes: int | None = None):
    """A tmpfs of `size` mounted at `where` for the block (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def recorded_step(root: Path, session: str, change) -> dict:
    """One changing step as a run records it: snapshot, the change, snapshot, record."""
    recorder = StepRecorder(root, session)
    before = recorder.before("shell")
    change()
    record = recorder.after(before, "shell", "call_1")
    if recorder.upkeep:
        recorder.upkeep.join(60)  # its packing done, as a run's is long before it ends
    return record


def fill_inodes(filler: Path, leave: int) -> None:
    """Use up the file system's inodes until `leave` are free."""
    filler.mkdir()
    n = 0
    while os.statvfs(filler).f_favail > leave:
        (filler / f"f{n}").touch()
        n += 1


# --------------------------------------------------------------------------- a full disk


def test_a_restore_without_the_space_it_needs_is_refused_before_writing(tmp_path):
    with small_disk(tmp_path / "disk", "16m") as disk:
        root = disk / "ws"
        root.mkdir()
        (root / "big.bin").write_bytes(os.urandom(5_000_000))
        session = "s-space"
        recorded_step(root, session, lambda: (root / "big.bin").unlink())
        (disk / "filler").write_bytes(b"\0" * (os.statvfs(disk).f_bavail * 4096 - 3_000_000))
        before = tree_state(root)
        with pytest.raises(CheckpointError) as failed:
            Checkpoints(root).restore(session)
        message = str(failed.value)
        assert "not enough free space" in message
        assert "every file is exactly as it was before the restore" in message
        assert tree_state(root) == before  # nothing half-written, no temporary file left

        (disk / "filler").unlink()
        Checkpoints(root).restore(session, 1)  # not refused as a user edit
        assert (root / "big.bin").stat().st_size == 5_000_000


def test_a_disk_that_fills_up_during_a_restore_rolls_every_file_back(tmp_path):
    with small_disk(tmp_path / "disk", "16m", inodes=400) as disk:
        root = disk / "ws"
        root.mkdir()
        (root / "a.txt").write_text("first a\n")
        (root / "sub").mkdir()
        (root / "sub" / "b.txt").write_text("first b\n")
        (root / "c.txt").write_text("first c\n")
        session = "s-full"

        def change():
            (root / "a.txt").write_text("second a\n")
            (root / "sub" / "b.txt").unlink()
            (root / "sub").rmdir()
            (root / "c.txt").unlink()
            (root / "d.txt").write_text("new d\n")

        step = recorded_step(root, session, change)
        assert step["changed"] == ["a.txt", "c.txt", "d.txt", "sub/b.txt"]
        before = tree_state(root)
        # staging a.txt, c.txt and sub/b.txt takes the last three inodes: making sub/ fails
        fill_inodes(disk / "filler", leave=3)
        with pytest.raises(CheckpointError) as failed:
            Checkpoints(root).restore(session)
        assert str(failed.value).startswith(  # said once
            "the restore stopped part way (No space left on device) and was rolled back; every "
            "file is exactly as it was before the restore"
        ), failed.value
        assert tree_state(root) == before

        for name in os.listdir(disk / "filler"):
            (disk / "filler" / name).unlink()
        Checkpoints(root).restore(session, 1)  # a failed restore is no user edit
        assert (root / "a.txt").read_text() == "first a\n"
        assert (root / "sub" / "b.txt").read_text() == "first b\n"
        assert (root / "c.txt").read_text() == "first c\n"
        assert not (root / "d.txt").exists()


def test_undo_after_a_failed_restore_says_there_is_nothing_to_undo(workspace):
    session = SessionStore(workspace).create("a task").id
    (workspace / "a.txt").write_text("first\n")
    recorded_step(workspace, session, lambda: (workspace / "a.txt").write_text("second\n"))
    checkpoints = Checkpoints(workspace)
    first = checkpoints.step(session, 1)["before"]
    blob = checkpoints.repo.git("rev-parse", f"{first}:a.txt").strip()
    (checkpoints.repo.git_dir / "objects" / blob[:2] / blob[2:]).unlink()
    with pytest.raises(RestoreFailed, match=r"a\.txt is missing .*exactly as it was"):
        restore(workspace, session, None, False)
    said = restore(workspace, session, None, False)
    assert said == (
        f"step 2 of session {session} is a restore that failed and changed no file: "
        "there is nothing to undo"
    )
    assert (workspace / "a.txt").read_text() == "second\n"


# --------------------------------------------------------------------------- the symlink race


def restore_repeatedly(workspace: Path, session: str, snapshots=False) -> tuple[int, int]:
    """(done, refused) of RESTORES forced restores to before step 1 of `session`; with
    snapshots, a snapshot of another session's empty step after each."""
    done = refused = 0
    for n in range(RESTORES):
        try:
            Checkpoints(workspace).restore(session, 1, force=True)
            done += 1
        except (CheckpointError, RestoreRefused):
            refused += 1
        if snapshots:
            recorded_step(workspace, f"{session}-{n}", lambda: None)  # a snapshot mid-swap
    return done, refused


def objects_hold(git_dir: Path, needle: bytes) -> bool:
    for folder in (git_dir / "objects").iterdir():
        if len(folder.name) == 2:
            for item in folder.iterdir():
                if needle in zlib.decompress(item.read_bytes()):
                    return True
    return False


def test_restores_and_snapshots_never_reach_through_a_swapped_folder(workspace, tmp_path):
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside, first\n")
    session = "s-race"
    recorded_step(workspace, session, lambda: (workspace / "d" / "f.txt").write_text("second\n"))
    with _swapping(workspace, tmp_path) as outside:
        outside_before = tree_state(outside)
        done, refused = restore_repeatedly(workspace, session, snapshots=True)
        assert tree_state(outside) == outside_before  # nothing written, removed or changed
    print(f"restores={RESTORES} done={done} refused={refused}")
    assert done + refused == RESTORES and done > 0
    assert not objects_hold(Checkpoints(workspace).repo.git_dir, CANARY)  # nothing read


def test_a_link_swapped_for_a_folder_while_it_is_read_costs_no_other_file(workspace, tmp_path):
    """A folder read while a process swapped its link `l` for a folder: the link's target could
    not be read, and every entry after it (pytest.ini, test_calc.py, ...) was left out of the
    snapshot; a run's restore to that snapshot then deleted them."""
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside\n")
    kept = {"a.txt", "m.txt", "z.txt"}
    for name in kept:
        (workspace / name).write_text(f"{name}\n")
    with _swapping(workspace, tmp_path):
        trees = {Checkpoints(workspace).take("a first look").tree for _ in range(20)}
    repo = Checkpoints(workspace).repo
    for tree in trees:
        names = set(repo.git("ls-tree", "--name-only", tree).split())
        assert kept | {"swapping"} <= names, names


@contextlib.contextmanager
def _swapping(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(CANARY)
    (outside / "other.txt").write_bytes(CANARY)
    started = subprocess.Popen([sys.executable, str(SWAPPER), str(outside)], cwd=workspace)
    try:
        swapping = workspace / "swapping"
        wait_for(lambda: swapping.exists() or started.poll() is not None, GUARD, "the swapper")
        assert swapping.exists(), f"the swapper ended before swapping ({started.returncode})"
        yield outside
    finally:
        (workspace / "stop-swapping").touch()
        try:
            started.wait(GUARD)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()
    # swaps.txt is written only once it is told to stop: it swapped through every restore
    assert "swaps=" in (workspace / "swaps.txt").read_text()


# --------------------------------------------------------------------------- two runs at once


def test_two_runs_at_once_keep_their_own_changes_and_undo_keeps_the_other(
    workspace, require_backend
):
    require_backend("bwrap")
    with ScriptedLLM() as first, ScriptedLLM() as second:
        first.add(
            tool_call("shell", {"command": FIRST_RUNS_COMMAND}),
            text("TASK_COMPLETE"),
        )
        second.add(tool_call("write", {"path": "b.txt", "content": "two\n"}), text("TASK_COMPLETE"))
        ran: dict[int, object] = {}

        def run_first() -> None:
            config = make_config(workspace, first, sandbox_backend="bwrap")
            ran[1] = run_agent(config, "make a.txt", sink=lambda e: None)

        thread = threading.Thread(target=run_first)
        thread.start()
        started = workspace / ".lmagent" / "sandbox" / "first-started"
        try:
            wait_for(lambda: started.exists() or not thread.is_alive(), GUARD, "the first run")
            ran[2] = run_agent(make_config(workspace, second), "make b.txt", sink=lambda e: None)
        finally:
            thread.join(GUARD)
    one, two = ran[1].session_id, ran[2].session_id
    assert [s["changed"] for s in steps_of(workspace, one)] == [["a.txt"]]
    assert [s["changed"] for s in steps_of(workspace, two)] == [["b.txt"]]

    restore_session(workspace, one)  # undo the first run's last step
    assert not (workspace / "a.txt").exists()
    assert (workspace / "b.txt").read_text() == "two\n"


def test_undo_refuses_to_drop_another_sessions_later_change_unless_forced(workspace):
    store = SessionStore(workspace)
    one, two = store.create("one").id, store.create("two").id
    recorded_step(workspace, one, lambda: (workspace / "a.txt").write_text("one\n"))
    recorded_step(workspace, two, lambda: (workspace / "a.txt").write_text("two\n"))
    refusal = rf"session {two} changed a\.txt after step 1.*--force"
    with pytest.raises(RestoreRefused, match=refusal):
        restore_session(workspace, one)
    assert (workspace / "a.txt").read_text() == "two\n"
    restore_session(workspace, one, force=True)
    assert not (workspace / "a.txt").exists()


# --------------------------------------------------------------------------- a damaged repository


def delete_objects(git_dir: Path) -> None:
    for folder, _, files in os.walk(git_dir / "objects"):
        for name in files:
            os.unlink(os.path.join(folder, name))


def truncate_caches(git_dir: Path) -> None:
    """Cut the stat cache (and git's index, which older versions kept) to a few bytes."""
    for path in (git_dir.parent / "stat-cache.json", git_dir / "index"):
        if path.exists():
            path.write_bytes(path.read_bytes()[:10])


DAMAGE = {
    "objects deleted": (delete_objects, True),
    "index and stat cache truncated": (truncate_caches, False),
    "garbage in the ref": (
        lambda git_dir: (git_dir / "refs" / "checkpoints" / "latest").write_text("garbage\n"),
        False,
    ),
    "git dir deleted": (lambda git_dir: shutil.rmtree(git_dir), True),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_shadow_repository_heals_and_says_what_was_lost(workspace, llm, kind):
    damage, history_lost = DAMAGE[kind]
    llm.add(tool_call("write", {"path": "a.txt", "content": "a\n"}), text("TASK_COMPLETE"))
    assert cli(workspace, llm, "write a").returncode == 0
    first = only_session(workspace)["id"]
    damage(workspace / ".lmagent" / "checkpoints" / "git")

    llm.add(tool_call("write", {"path": "b.txt", "content": "b\n"}), text("TASK_COMPLETE"))
    later = cli(workspace, llm, "--json", "write b")
    assert later.returncode == 0, later.stderr
    events = [json.loads(line) for line in later.stdout.splitlines()]
    (written,) = [e for e in events if e["type"] == "tool_result"]
    assert written["changed"] == ["b.txt"] and written["step"] == 1  # checkpointed again
    assert not any("checkpoint failed" in e.get("message", "") for e in events)

    listed = cli(workspace, llm, "--checkpoints", first)
    assert listed.returncode == 0 and listed.stdout.startswith("1 ")
    assert ("cannot be restored" in listed.stdout) == history_lost
    assert "changed no files" not in listed.stdout
    assert "MB on disk (cap 1000 MB, CHECKPOINT_MAX_MB)" in listed.stderr

    restored = cli(workspace, llm, "--restore", first, "1")
    if history_lost:
        assert restored.returncode == 1
        assert len(restored.stderr.splitlines()) == 1 and "lost or damaged" in restored.stderr
        assert "fatal" not in restored.stderr and (workspace / "a.txt").exists()
    else:
        assert restored.returncode == 0, restored.stderr
        assert not (workspace / "a.txt").exists()
    second = next(s["id"] for s in SessionStore(workspace).list() if s["id"] != first)
    assert cli(workspace, llm, "--undo", second).returncode == 0
    assert not (workspace / "b.txt").exists()


# --------------------------------------------------------------------------- growth


def test_the_repository_is_packed_as_it_grows_and_kept_under_its_cap(workspace):
    store = SessionStore(workspace)
    old, new = store.create("old").id, store.create("new").id
    for n in range(2500):  # enough loose objects to be packed
        (workspace / f"f{n}.txt").write_text(f"file {n}\n")
    (workspace / "big.bin").write_bytes(os.urandom(3_000_000))
    recorded_step(workspace, old, lambda: (workspace / "big.bin").unlink())
    recorded_step(workspace, new, lambda: (workspace / "a.txt").write_text("new\n"))
    repo = Checkpoints(workspace).repo
    # the sessions a minute apart, as runs are: written within one clock tick, the two refs had
    # the same mtime, and the cap could take the new one for the oldest (a CI run failed so)
    minute_ago = time.time() - 60
    os.utime(repo.git_dir / SESSIONS / old, (minute_ago, minute_ago))
    full = repo.size()

    notes: list[str] = []
    recorder = StepRecorder(workspace, store.create("third").id, report=notes.append, max_mb=2)
    recorder.upkeep.join(60)  # packing and capping run while the model is first asked
    recorder.after(recorder.before("write"), "write", "call_1")
    assert list((repo.git_dir / "objects" / "pack").glob("*.pack"))  # packed
    assert repo.size() < 2 * 1024 * 1024 < full
    assert any("histories were dropped" in n and "CHECKPOINT_MAX_MB=2" in n for n in notes)
    lines = checkpoint_lines(workspace, old)
    assert lines[0].startswith("1 ") and "cannot be restored" in lines[0]

    restore_session(workspace, new)  # its history is kept, read from the pack
    assert not (workspace / "a.txt").exists()


def test_a_session_whose_checkpoints_failed_never_reads_as_one_that_changed_nothing(
    config, llm, workspace
):
    (workspace / ".lmagent" / "checkpoints").mkdir(parents=True)
    (workspace / ".lmagent" / "checkpoints" / "git").write_text("not a folder")
    llm.add(tool_call("write", {"path": "a.txt", "content": "x"}), text("TASK_COMPLETE"))
    result = run_agent(config, "write a", sink=lambda event: None)
    assert result.status == "completed" and (workspace / "a.txt").read_text() == "x"
    (line,) = checkpoint_lines(workspace, result.session_id)
    assert line.startswith(f"session {result.session_id}'s checkpoints could not be kept (")
    assert "cannot create" in line and "changed no files" not in line
    with pytest.raises(RestoreRefused, match=r"could not be kept .* cannot be undone"):
        restore_session(workspace, result.session_id)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_restores_never_write_through_a_folder_a_sandboxed_swapper_swaps(
    backend, make_sandbox, tmp_path
):
    workspace, host = (tmp_path / "ws").resolve(), (tmp_path / "host").resolve()
    workspace.mkdir()
    _plant(workspace, host)
    session = "s-sandboxed-race"
    recorded_step(workspace, session, lambda: (workspace / "d" / "file.txt").write_text("two\n"))
    before = _host_state(host)
    race = Race(workspace, host, backend, make_sandbox)
    # a background process of the sandbox: no command timeout ends it while the restores run,
    # however slow the machine; its swaps.txt, written only once the restores are over and it is
    # told to stop, shows it swapped through all of them
    race.start("detached")
    try:
        done, refused = restore_repeatedly(workspace, session)
    finally:
        swaps = race.stop()
    print(f"{backend}: restores={RESTORES} done={done} refused={refused} swaps={swaps}")
    assert swaps > 0 and done + refused == RESTORES
    assert _host_state(host) == before  # nothing outside written, removed or changed
