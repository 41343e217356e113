"""Checkpoints: snapshots of the workspace in a shadow repository before each changing step,
the diffs a run reports, and restoring (undo) — also in a workspace that is a git repository
of its own, whose `.git` must stay byte-identical."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from lmagent.checkpoints.shadow import MAX_FILE_BYTES, CheckpointError, ShadowRepo
from lmagent.checkpoints.steps import Checkpoints, RestoreRefused
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.restore import restore_session, steps_of
from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from lmagent.subagents.tools import agent_toolset
from lmagent.tools.registry import Services
from tests.conftest import make_config
from tests.scripted_llm import text, tool_call

pytest_plugins = ["tests.sandbox_fixtures"]


def run(config, task="do the task", **kw):
    events: list[dict] = []
    result = run_agent(config, task, sink=events.append, **kw)
    return result, events


def results(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "tool_result"]


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def hashes(directory: Path) -> dict[str, str]:
    """Every file under `directory` (a .git) with its content hash, and every entry's mode."""
    found = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[str(path.relative_to(directory))] = (info.st_mode, hashlib.sha256(data).hexdigest())
    return found


# --------------------------------------------------------------------------- a run's steps


def test_write_edit_and_undo_through_a_run(config, llm, workspace):
    (workspace / "app.py").write_text("print('one')\n")
    llm.add(
        tool_call("write", {"path": "notes.txt", "content": "first\n"}),
        tool_call("edit", {"path": "app.py", "search": "one", "replace": "two"}),
        tool_call("read", {"path": "app.py"}),
        text("done\nTASK_COMPLETE"),
    )
    result, events = run(config)
    assert result.status == "completed"
    write, edit, read = results(events)
    assert write["changed"] == ["notes.txt"] and write["step"] == 1
    assert "+++ b/notes.txt\n@@ -0,0 +1 @@\n+first\n" in write["diff"]
    assert edit["changed"] == ["app.py"] and edit["step"] == 2
    assert "-print('one')\n+print('two')\n" in edit["diff"]
    assert "a/app.py" in edit["diff"] and str(workspace) not in edit["diff"]
    assert "diff" not in read and "checkpoint" not in read  # reading is not a changing step
    steps = steps_of(workspace, result.session_id)
    assert [(s["step"], s["tool"], s["changed"]) for s in steps] == [
        (1, "write", ["notes.txt"]),
        (2, "edit", ["app.py"]),
    ]

    restore_session(workspace, result.session_id)  # undo: before the last changing step
    assert (workspace / "app.py").read_text() == "print('one')\n"
    assert (workspace / "notes.txt").read_text() == "first\n"
    restore_session(workspace, result.session_id, 1)
    assert not (workspace / "notes.txt").exists()


def test_a_restore_is_noted_for_the_model_and_can_itself_be_undone(config, llm, workspace):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "new\n"}),
        text("TASK_COMPLETE"),
    )
    first, _ = run(config)
    record = restore_session(workspace, first.session_id)
    assert not (workspace / "a.txt").exists()
    assert record["kind"] == "restore" and record["changed"] == ["a.txt"]

    restore_session(workspace, first.session_id)  # the last step is now the restore
    assert (workspace / "a.txt").read_text() == "new\n"

    llm.add(text("noted\nTASK_COMPLETE"))
    run(config, "go on", session_id=first.session_id)
    told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert any("restored the workspace files" in m and "a.txt" in m for m in told)


def test_restore_refuses_files_edited_since_unless_forced(config, llm, workspace):
    llm.add(tool_call("write", {"path": "a.txt", "content": "agent\n"}), text("TASK_COMPLETE"))
    result, _ = run(config)
    (workspace / "a.txt").write_text("the user's edit\n")
    with pytest.raises(RestoreRefused, match=r"a\.txt.*--force"):
        restore_session(workspace, result.session_id)
    assert (workspace / "a.txt").read_text() == "the user's edit\n"

    restore_session(workspace, result.session_id, force=True)
    assert not (workspace / "a.txt").exists()
    restore_session(workspace, result.session_id)  # the undo brings the user's edit back
    assert (workspace / "a.txt").read_text() == "the user's edit\n"


def test_restore_is_refused_while_a_run_is_active(config, llm, workspace):
    llm.add(tool_call("write", {"path": "a.txt", "content": "x"}), text("TASK_COMPLETE"))
    result, _ = run(config)
    store = SessionStore(workspace)
    other = store.create("another task")
    with store.lock(other.id), pytest.raises(RestoreRefused, match="a run is active"):
        restore_session(workspace, result.session_id)
    assert (workspace / "a.txt").read_text() == "x"


def test_bad_steps_and_sessions_are_refused_with_the_steps_there_are(config, llm, workspace):
    llm.add(tool_call("read", {"path": "."}), text("TASK_COMPLETE"))
    quiet, _ = run(config)
    with pytest.raises(RestoreRefused, match="no checkpoints"):
        restore_session(workspace, quiet.session_id)
    llm.add(tool_call("write", {"path": "a.txt", "content": "x"}), text("TASK_COMPLETE"))
    busy, _ = run(config)
    with pytest.raises(RestoreRefused, match=r"no step 7 \(its steps: 1\)"):
        restore_session(workspace, busy.session_id, 7)


def test_shell_made_changes_are_listed_and_undone(workspace, llm, require_backend):
    require_backend("bwrap")
    config = make_config(workspace, llm, sandbox_backend="bwrap")
    (workspace / "keep.txt").write_text("keep\n")
    (workspace / "gone.txt").write_text("bye\n")
    llm.add(
        tool_call(
            "shell", {"command": "echo made > made.txt && rm gone.txt && echo more >> keep.txt"}
        ),
        text("TASK_COMPLETE"),
    )
    result, events = run(config)
    (shell,) = results(events)
    assert shell["success"] and shell["changed"] == ["gone.txt", "keep.txt", "made.txt"]
    assert "+more\n" in shell["diff"] and "-bye\n" in shell["diff"]

    restore_session(workspace, result.session_id)
    assert (workspace / "gone.txt").read_text() == "bye\n"
    assert (workspace / "keep.txt").read_text() == "keep\n"
    assert not (workspace / "made.txt").exists()


def test_undoing_a_delegate_step_restores_what_the_sub_agent_changed(config, llm, workspace):
    llm.add(
        tool_call(
            "delegate",
            {
                "objective": "Write hello.txt",
                "deliverable_type": "file",
                "deliverable_description": "a greeting",
                "deliverable_path": "hello.txt",
            },
        ),
        tool_call("write", {"path": "hello.txt", "content": "hello\n"}),
        tool_call("report_result", {"status": "ok", "summary": "ok", "artifacts": ["hello.txt"]}),
        text("TASK_COMPLETE"),
    )
    services = Services(config)
    toolset = agent_toolset(config, services)
    gate = PermissionGate("auto")
    result, events = run(config, toolset=toolset, services=services, gate=gate)
    llm.assert_all_used()
    parent_steps = steps_of(workspace, result.session_id)
    assert [(s["tool"], s["changed"]) for s in parent_steps] == [("delegate", ["hello.txt"])]
    child_write = next(e for e in events if e["type"] == "tool_result" and e.get("depth"))
    assert child_write["changed"] == ["hello.txt"]  # the child's own step, in its own session
    delegated = next(e for e in events if e["type"] == "tool_result" and e["name"] == "delegate")
    child_steps = steps_of(workspace, delegated["result"]["session_id"])
    assert [(s["tool"], s["changed"]) for s in child_steps] == [("write", ["hello.txt"])]

    restore_session(workspace, result.session_id)
    assert not (workspace / "hello.txt").exists()


# --------------------------------------------------------------------------- what a snapshot holds


def test_snapshots_honour_gitignore_skip_lmagent_and_note_large_files(workspace):
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.bin").write_text("generated")
    (workspace / "big.dat").write_bytes(b"\0" * (MAX_FILE_BYTES + 1))
    (workspace / "src.py").write_text("x = 1\n")
    checkpoints = Checkpoints(workspace)
    snapshot = checkpoints.take("test")
    kept = checkpoints.repo.git("ls-tree", "-r", "--name-only", snapshot.commit).split()
    assert kept == [".gitignore", "src.py"]
    assert snapshot.notes == ["big.dat: larger than 10 MB, not kept"]
    latest = checkpoints.repo.git("rev-parse", "--verify", "refs/checkpoints/latest")
    assert latest.strip() == snapshot.commit  # git reads the ref: every snapshot is reachable

    (workspace / "src.py").write_text("x = 2\n")
    (workspace / "build" / "out.bin").write_text("changed")
    checkpoints.repo.restore(snapshot.commit)
    assert (workspace / "src.py").read_text() == "x = 1\n"
    assert (workspace / "build" / "out.bin").read_text() == "changed"  # ignored: left alone
    assert (workspace / "big.dat").stat().st_size == MAX_FILE_BYTES + 1


def test_symlinks_are_kept_as_links_and_never_followed_out(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside\n")
    (workspace / "link").symlink_to(outside)
    checkpoints = Checkpoints(workspace)
    snapshot = checkpoints.take("test")
    listing = checkpoints.repo.git("ls-tree", "-r", snapshot.commit)
    assert listing.startswith("120000 blob") and "secret" not in listing

    (workspace / "link").unlink()
    (workspace / "link").mkdir()
    (workspace / "link" / "secret.txt").write_text("inside\n")
    later = checkpoints.take("test")
    (workspace / "link" / "secret.txt").unlink()
    (workspace / "link").rmdir()
    (workspace / "link").symlink_to(outside)
    checkpoints.repo.git("read-tree", "--reset", snapshot.commit)  # the index matches the link
    checkpoints.repo.restore(later.commit)  # writes link/secret.txt: never through the link
    assert (outside / "secret.txt").read_text() == "outside\n"
    assert (workspace / "link" / "secret.txt").read_text() == "inside\n"
    assert not (workspace / "link").is_symlink()


def test_diffs_summarise_binary_and_very_large_files(workspace):
    checkpoints = Checkpoints(workspace)
    before = checkpoints.take("before")
    (workspace / "image.png").write_bytes(b"\x89PNG\0\1\2" * 100)
    (workspace / "huge.txt").write_text("".join(f"line {n}\n" for n in range(20_000)))
    (workspace / "small.txt").write_text("hello\n")
    after = checkpoints.take("after")
    diff = checkpoints.repo.diff(before.commit, after.commit)
    assert "Binary files /dev/null and b/image.png differ" in diff
    assert "diff --git a/huge.txt b/huge.txt\n(diff of" in diff and "line 19999" not in diff
    assert "+hello\n" in diff


# --------------------------------------------------------------------------- the user's own git


@pytest.mark.parametrize("state", ["uncommitted", "detached", "stale_lock"])
def test_a_users_git_repository_stays_byte_identical(config, llm, workspace, state):
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "config", "user.email", "u@example.com")
    git(workspace, "config", "user.name", "u")
    (workspace / "tracked.txt").write_text("one\n")
    git(workspace, "add", "tracked.txt")
    git(workspace, "commit", "-q", "-m", "first")
    (workspace / "tracked.txt").write_text("two\n")
    git(workspace, "commit", "-q", "-am", "second")
    if state == "uncommitted":
        (workspace / "tracked.txt").write_text("uncommitted\n")
        git(workspace, "stash", "-q")
        (workspace / "tracked.txt").write_text("work in progress\n")
        git(workspace, "add", "tracked.txt")
        (workspace / "tracked.txt").write_text("more work\n")
    elif state == "detached":
        git(workspace, "checkout", "-q", "--detach", "HEAD~1")
    else:
        (workspace / ".git" / "index.lock").write_text("")
    status = git(workspace, "status", "--porcelain") if state != "stale_lock" else ""
    before = hashes(workspace / ".git")

    llm.add(
        tool_call("write", {"path": "tracked.txt", "content": "agent\n"}),
        tool_call("write", {"path": "new.txt", "content": "new\n"}),
        text("TASK_COMPLETE"),
    )
    result, events = run(config)
    assert [r["changed"] for r in results(events)] == [["tracked.txt"], ["new.txt"]]
    restore_session(workspace, result.session_id, 1)
    assert not (workspace / "new.txt").exists()
    assert hashes(workspace / ".git") == before
    if state != "stale_lock":  # the agent's own folder aside, git sees what it saw before
        assert git(workspace, "status", "--porcelain").replace("?? .lmagent/\n", "") == status
    expected = {"uncommitted": "more work\n", "detached": "one\n", "stale_lock": "two\n"}
    assert (workspace / "tracked.txt").read_text() == expected[state]


def test_a_nested_git_directory_is_never_read_into_snapshots(workspace):
    (workspace / "lib").mkdir()
    git(workspace / "lib", "init", "-q")
    (workspace / "lib" / "code.py").write_text("x\n")
    checkpoints = Checkpoints(workspace)
    snapshot = checkpoints.take("test")
    kept = checkpoints.repo.git("ls-tree", "-r", "--name-only", snapshot.commit).split()
    assert not any(".git/" in path for path in kept)


# --------------------------------------------------------------------------- failures


def test_a_full_disk_is_reported_and_the_step_still_runs(config, llm, workspace):
    log = workspace / ".lmagent" / "checkpoints" / "sessions"
    log.mkdir(parents=True)
    store = SessionStore(workspace)
    session = store.create("write a file")
    (log / f"{session.id}.jsonl").symlink_to("/dev/full")  # every write: ENOSPC
    llm.add(tool_call("write", {"path": "a.txt", "content": "x"}), text("TASK_COMPLETE"))
    result, events = run(config, session_id=session.id)
    assert result.status == "completed"
    assert (workspace / "a.txt").read_text() == "x"
    (written,) = results(events)
    assert written["success"] and "diff" not in written
    statuses = [e["message"] for e in events if e["type"] == "status"]
    assert (
        "checkpoint failed (No space left on device); the step runs, but it cannot be undone"
        in (statuses)
    )


def test_an_unusable_checkpoint_folder_is_reported_and_the_step_still_runs(config, llm, workspace):
    (workspace / ".lmagent").mkdir()
    (workspace / ".lmagent" / "checkpoints").write_text("not a folder")
    llm.add(tool_call("write", {"path": "a.txt", "content": "x"}), text("TASK_COMPLETE"))
    result, events = run(config)
    assert result.status == "completed" and (workspace / "a.txt").read_text() == "x"
    failures = [e["message"] for e in events if "checkpoint failed" in e.get("message", "")]
    assert (
        len(failures) == 1 and "cannot create" in failures[0] and "Not a directory" in failures[0]
    )


def test_a_restore_cut_short_is_recorded_so_undo_brings_the_files_back(config, llm, workspace):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "first\n"}),
        tool_call("write", {"path": "a.txt", "content": "second\n"}),
        text("TASK_COMPLETE"),
    )
    result, _ = run(config)
    checkpoints = Checkpoints(workspace)
    first = checkpoints.step(result.session_id, 2)["before"]
    blob = checkpoints.repo.git("rev-parse", f"{first}:a.txt").strip()
    objects = checkpoints.repo.git_dir / "objects"
    (objects / blob[:2] / blob[2:]).unlink()  # the content to restore is gone
    # said once, not "the restore stopped part way (the checkpoint's copy …)"
    message = r"^the checkpoint's copy of a\.txt is missing .* exactly as it was .*undo it"
    with pytest.raises(CheckpointError, match=message):
        restore_session(workspace, result.session_id, 2)
    restore_session(workspace, result.session_id)  # the undo
    assert (workspace / "a.txt").read_text() == "second\n"


def test_git_missing_is_reported_with_what_to_install(workspace):
    repo = ShadowRepo(workspace)
    repo.env["PATH"] = str(workspace)  # no git there
    with pytest.raises(Exception, match="git is not installed"):
        repo.snapshot("test")
