"""The queue's git workspaces against a hostile work tree: everything a sandboxed model could
plant in its clone (hooks, configuration, attributes, nested repositories) with a marker file,
then the worker's own git fetches, commits and pushes to a real bare remote; no marker may
appear, and the work lands on `lmagent/<task id>`."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from lmagent.scheduler.git_workspace import (
    GitError,
    TaskRepository,
    check_out,
    check_remote,
    push_result,
)

HOOKS = (  # noqa: SIM905
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit "
    "prepare-commit-msg commit-msg post-commit pre-rebase post-checkout post-merge pre-push "
    "pre-receive update proc-receive post-receive post-update reference-transaction "
    "push-to-checkout pre-auto-gc post-rewrite sendemail-validate fsmonitor-watchman "
    "p4-changelist p4-prepare-changelist p4-post-changelist p4-pre-submit post-index-change"
).split()
TASK = "task-20260101-000000-0badc0de"


def run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    return done.stdout


@pytest.fixture
def origin(tmp_path) -> Path:
    return make_origin(tmp_path)


def make_origin(directory: Path) -> Path:
    """A real bare remote with one commit on main, in `directory`."""
    origin, seed = directory / "remote" / "origin.git", directory / "seed"
    run("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    run("clone", "--quiet", str(origin), str(seed))
    (seed / "README").write_text("hello\n")
    run("add", "README", cwd=seed)
    run("commit", "--quiet", "-m", "seed", cwd=seed)
    run("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    return origin


def plant(work: Path, markers: Path) -> None:
    """What a model can write in its work tree, each thing touching a marker when run."""
    markers.mkdir()

    def script(name: str) -> str:
        path = markers.parent / "scripts" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f'#!/bin/sh\ntouch "{markers / name}"\ncat >/dev/null\nexit 0\n')
        path.chmod(0o755)
        return str(path)

    own = work / ".git"
    for directory in (own / "hooks", own / "evil-hooks"):
        directory.mkdir(exist_ok=True)
        for hook in HOOKS:
            target = directory / hook
            target.write_text(f'#!/bin/sh\nexec {script(f"{directory.name}-{hook}")} "$@"\n')
            target.chmod(0o755)
    included = work / "included.cfg"
    included.write_text(f"[core]\n\tfsmonitor = {script('included-fsmonitor')}\n")
    with open(own / "config", "a", encoding="utf-8") as config:
        config.write(
            f"[core]\n\tfsmonitor = {script('fsmonitor')}\n\thooksPath = {own / 'evil-hooks'}\n"
            f"\tpager = {script('pager')}\n\tsshCommand = {script('ssh')}\n"
            f"\teditor = {script('editor')}\n\taskPass = {script('askpass')}\n"
            f"\tgitProxy = {script('proxy')}\n\tuntrackedCache = true\n"
            f'[filter "evil"]\n\tclean = {script("clean")}\n\tsmudge = {script("smudge")}\n'
            f"\tprocess = {script('process')}\n\trequired = true\n"
            f'[diff "evil"]\n\ttextconv = {script("textconv")}\n\tcommand = {script("diffcmd")}\n'
            f'[merge "evil"]\n\tdriver = {script("merge")}\n'
            f"[diff]\n\texternal = {script('external')}\n"
            f"[alias]\n\tadd = !{script('alias-add')}\n\tpush = !{script('alias-push')}\n"
            f"\tcommit-tree = !{script('alias-commit-tree')}\n"
            f"[credential]\n\thelper = !{script('credential')}\n"
            f"[gpg]\n\tprogram = {script('gpg')}\n[commit]\n\tgpgSign = true\n"
            f"[uploadpack]\n\tpackObjectsHook = {script('pack-objects')}\n"
            f"[include]\n\tpath = {included}\n"
            f'[remote "origin"]\n\turl = ext::{script("ext-remote")}\n'
        )
    (work / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    nested = work / "sub"
    nested.mkdir()
    run("init", "--quiet", str(nested))
    (nested / "inside.txt").write_text("nested\n")
    run("add", "inside.txt", cwd=nested)
    run("commit", "--quiet", "-m", "nested", cwd=nested)
    run("config", "core.fsmonitor", script("nested-fsmonitor"), cwd=nested)
    (work / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n')


def test_nothing_planted_in_the_work_tree_runs_and_the_work_is_pushed(tmp_path, origin):
    root = tmp_path / "worker"
    work = check_out(root, TASK, str(origin), "main")
    markers = tmp_path / "markers"
    plant(work, markers)
    (work / "result.txt").write_text("42\n")
    (work / ".lmagent").mkdir()
    (work / ".lmagent" / "session.jsonl").write_text("private\n")

    assert push_result(root, TASK) == f"lmagent/{TASK}"

    assert sorted(p.name for p in markers.iterdir()) == []
    pushed = f"lmagent/{TASK}"
    assert run("--git-dir", str(origin), "show", f"{pushed}:result.txt") == "42\n"
    files = run("--git-dir", str(origin), "ls-tree", "-r", "--name-only", pushed).split()
    assert "result.txt" in files and "README" in files
    assert not [f for f in files if f.startswith((".git/", ".lmagent"))]
    # the plant is live: git run the ordinary way in the work tree starts it
    with contextlib.suppress(subprocess.TimeoutExpired):  # the planted process filter hangs
        subprocess.run(["git", "status"], cwd=work, capture_output=True, timeout=10)
    assert {"fsmonitor", "included-fsmonitor"} & {p.name for p in markers.iterdir()}


def test_the_workers_repository_is_outside_the_work_tree(tmp_path, origin):
    root = tmp_path / "worker"
    work = check_out(root, TASK, str(origin), "main")
    repo = TaskRepository(root, TASK)
    assert work == repo.work_tree
    assert work not in repo.git_dir.parents
    assert (root / ".lmagent") in repo.git_dir.parents  # hidden from any sandbox of `root`
    # the model's own clone is on the result branch and knows the remote's history
    assert run("rev-parse", "--abbrev-ref", "HEAD", cwd=work).strip() == f"lmagent/{TASK}"
    assert run("status", "--porcelain", cwd=work) == ""


def test_a_task_taken_again_keeps_its_work_tree(tmp_path, origin):
    root = tmp_path / "worker"
    work = check_out(root, TASK, str(origin), "main")
    (work / "half-done.txt").write_text("step 1\n")
    assert check_out(root, TASK, str(origin), "main") == work
    assert (work / "half-done.txt").read_text() == "step 1\n"


@pytest.mark.parametrize(
    "url, reason",
    [
        ("-uhost:x", "is not a URL"),
        ("relative/repo.git", "must be an absolute path"),
        ("{roots}/shared/repo.git", "where sandboxed tasks can write"),
        ("file://{roots}/shared/repo.git", "where sandboxed tasks can write"),
        ("{roots}/link/repo.git", "where sandboxed tasks can write"),
    ],
)
def test_a_remote_a_sandbox_could_write_is_refused(tmp_path, url, reason):
    roots = tmp_path / "roots"
    (roots / "shared").mkdir(parents=True)
    (roots / "link").symlink_to(roots / "shared")
    with pytest.raises(GitError, match=reason):
        check_remote(url.format(roots=roots), [roots.resolve()])


def test_remotes_elsewhere_are_accepted(tmp_path, origin):
    roots = (tmp_path / "roots").resolve()
    for url in (str(origin), f"file://{origin}", "git@example.org:p.git", "https://h/p.git"):
        check_remote(url, [roots])


def test_other_transports_and_bad_branches_are_refused(tmp_path, origin):
    marker = tmp_path / "ext-ran"
    with pytest.raises(GitError):
        check_out(tmp_path / "w", TASK, f"ext::sh -c touch% {marker}", "main")
    assert not marker.exists()
    for branch in ("--upload-pack=touch", "a..b", ""):
        with pytest.raises(GitError, match="is not a branch name"):
            check_out(tmp_path / "w2", TASK, str(origin), branch)


def test_the_pushed_tree_is_what_git_add_all_would_stage(tmp_path, origin):
    """Read by descriptor, the work tree is committed as git itself would: ignored files left
    out unless tracked, links kept as links, the executable bit, deletions, a submodule that
    was never checked out left as it was."""
    seed = tmp_path / "seed"
    (seed / ".gitignore").write_text("*.log\nbuild/\n")
    (seed / "kept.log").write_text("tracked though ignored\n")
    (seed / "build").mkdir()
    (seed / "build" / "tracked.txt").write_text("tracked in an ignored folder\n")
    (seed / "gone.txt").write_text("to be deleted\n")
    run("add", "--force", ".", cwd=seed)
    run("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},lib", cwd=seed)
    run("commit", "--quiet", "-m", "more", cwd=seed)
    run("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    reference = tmp_path / "reference"
    run("clone", "--quiet", str(origin), str(reference))
    root = tmp_path / "worker"
    work = check_out(root, TASK, str(origin), "main")
    for tree in (work, reference):
        (tree / "kept.log").write_text("changed\n")
        (tree / "new.log").write_text("ignored\n")
        (tree / "build" / "tracked.txt").write_text("changed too\n")
        (tree / "build" / "new.txt").write_text("ignored\n")
        (tree / "gone.txt").unlink()
        (tree / "run.sh").write_text("#!/bin/sh\n")
        (tree / "run.sh").chmod(0o755)
        (tree / "to-readme").symlink_to("README")
        (tree / "outside").symlink_to(tmp_path)
    run("add", "--all", cwd=reference)
    expected = run("write-tree", cwd=reference).strip()

    push_result(root, TASK)

    pushed = f"lmagent/{TASK}"
    assert run("--git-dir", str(origin), "rev-parse", f"{pushed}^{{tree}}").strip() == expected
    files = run("--git-dir", str(origin), "ls-tree", "-r", "--name-only", pushed).split()
    assert {"kept.log", "build/tracked.txt", "lib", "to-readme"} <= set(files)
    assert run("--git-dir", str(origin), "show", f"{pushed}:build/tracked.txt") == "changed too\n"


def test_files_too_large_to_push_are_named_in_the_commit_and_none_is_deleted(tmp_path, origin):
    from lmagent.checkpoints.scan import MAX_FILE_BYTES

    root = tmp_path / "worker"
    work = check_out(root, TASK, str(origin), "main")
    big = b"x" * (MAX_FILE_BYTES + 1)
    (work / "README").write_bytes(big)  # tracked: its committed version stays
    (work / "data.bin").write_bytes(big)  # untracked: left out
    (work / "result.txt").write_text("42\n")

    push_result(root, TASK)

    pushed = f"lmagent/{TASK}"
    assert run("--git-dir", str(origin), "show", f"{pushed}:README") == "hello\n"
    files = run("--git-dir", str(origin), "ls-tree", "-r", "--name-only", pushed).split()
    assert files == ["README", "result.txt"]
    message = run("--git-dir", str(origin), "log", "-1", "--format=%B", pushed)
    assert "README: larger than 10 MB; its last committed version is kept" in message
    assert "data.bin: larger than 10 MB, not kept" in message
