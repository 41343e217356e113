"""A task's workspace as a git remote and branch: the worker fetches it, the task runs in a work
tree of its own, and the result is pushed as the branch `lmagent/<task id>`. Credentials are the
worker's own git configuration; the queue holds only the URL.

The host's git never runs anything the sandbox could have written. The repository the worker
fetches, commits and pushes from (`<WORKSPACE>/.lmagent/queue/git/<task id>.git`) lies outside
the task's work tree (`<WORKSPACE>/.lmagent/queue/work/<task id>`), where no sandbox sees it;
every call names it and the work tree explicitly (never discovery), and overrides in git's
command scope what could start a program (hooks, fsmonitor, pager, other transports, signing,
submodule recursion). Only the worker's own configuration (system, global, and this repository's,
which only the worker writes) can define filter or diff drivers that the work tree's
`.gitattributes` may name. The work tree's own `.git` (a clone made for the model before the run,
for its own git use) is never read by the host. The commit is plumbing (`write-tree`,
`commit-tree`, `update-ref`): no hook, editor or template runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

RESULT_PREFIX = "lmagent/"
GIT_TIMEOUT = 300
# overridden in git's command scope, which beats every configuration file
NEUTRAL = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=false",
    "commit.gpgSign=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "diff.ignoreSubmodules=all",
    "protocol.allow=never",  # then only these transports
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.ssh.allow=always",
    "protocol.http.allow=always",
    "protocol.https.allow=always",
)
LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)
EXCLUDED = "/.lmagent/\n/.lmagent.md\n"  # sessions and checkpoints stay on the worker


class GitError(RuntimeError):
    """The remote cannot be cloned, fetched or pushed from this worker; one line."""


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git with every program-starting setting neutralised; its stdout."""
    command = ["git", "--no-pager"]
    for setting in NEUTRAL:
        command += ["-c", setting]
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        done = subprocess.run(
            [*command, *args],
            cwd=cwd or "/",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {verb(args)} failed: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise GitError(f"git {verb(args)} failed: {lines[-1]}")
    return done.stdout


def verb(args: tuple[str, ...]) -> str:
    return next((a for a in args if not a.startswith("-")), "?")


class TaskRepository:
    """Where a git task lives on this worker: its private repository and its work tree."""

    def __init__(self, root: Path, task_id: str):
        state = Path(root) / ".lmagent" / "queue"
        self.git_dir = state / "git" / f"{task_id}.git"
        self.work_tree = state / "work" / task_id
        self.branch = RESULT_PREFIX + task_id

    def git(self, *args: str) -> str:
        where = (f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}")
        return git(*where, *args, cwd=self.work_tree)

    @property
    def ready(self) -> bool:
        return (self.git_dir / "lmagent-ready").is_file()


def check_out(root: Path, task_id: str, url: str, branch: str) -> Path:
    """The task's work tree on its result branch (made from `branch` of `url` the first time;
    a task taken up again keeps the work tree it has)."""
    repo = TaskRepository(root, task_id)
    if repo.ready:
        return repo.work_tree
    check_branch(branch)
    for leftover in (repo.git_dir, repo.work_tree):  # a first try cut short
        shutil.rmtree(leftover, ignore_errors=True)
    repo.work_tree.mkdir(parents=True)
    git("init", "--quiet", "--bare", str(repo.git_dir))
    (repo.git_dir / "info" / "exclude").write_text(EXCLUDED, encoding="utf-8")
    repo.git("remote", "add", "origin", url)
    fetched = f"refs/remotes/origin/{branch}"
    repo.git("fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{branch}:{fetched}")
    repo.git("checkout", "--quiet", "-B", repo.branch, fetched)
    give_model_a_clone(repo)
    (repo.git_dir / "lmagent-ready").write_text("", encoding="utf-8")
    return repo.work_tree


def give_model_a_clone(repo: TaskRepository) -> None:
    """The work tree's own `.git` for the model's git use, made before any sandbox exists:
    a copy (no hard links shared with the worker's repository) on the result branch."""
    own = repo.work_tree / ".git"
    git("clone", "--quiet", "--bare", "--no-hardlinks", "--", str(repo.git_dir), str(own))
    git(f"--git-dir={own}", "config", "core.bare", "false")
    git(f"--git-dir={own}", f"--work-tree={repo.work_tree}", "reset", "--quiet")


def check_branch(branch: str) -> None:
    if branch.startswith("-") or not branch:
        raise GitError(f"branch {branch!r} is not a branch name")
    try:
        git("check-ref-format", f"refs/heads/{branch}")
    except GitError:
        raise GitError(f"branch {branch!r} is not a branch name") from None


def push_result(root: Path, task_id: str) -> str:
    """Commit what the work tree holds (not `.git`, `.lmagent/`) on top of the result branch
    and push it as `lmagent/<task id>`; returns that name. Call it only when no sandboxed
    process of the work tree can be alive."""
    repo = TaskRepository(root, task_id)
    repo.git("add", "--all")
    tree = repo.git("write-tree").strip()
    if tree != repo.git("rev-parse", "HEAD^{tree}").strip():
        message = f"lmagent task {task_id}"
        commit = repo.git(*identity(repo), "commit-tree", tree, "-p", "HEAD", "-m", message).strip()
        repo.git("update-ref", f"refs/heads/{repo.branch}", commit)
    repo.git("push", "--quiet", "origin", f"refs/heads/{repo.branch}:refs/heads/{repo.branch}")
    return repo.branch


def identity(repo: TaskRepository) -> list[str]:
    """The worker's own git identity; a fallback only where it has none."""
    try:
        repo.git("config", "user.email")
        return []
    except GitError:
        return ["-c", "user.name=lmagent", "-c", "user.email=lmagent@localhost"]


# --------------------------------------------------------------------------- remotes


SCP_LIKE = re.compile(r"^[^/]*:")  # host:path — git's ssh shorthand (no slash before the colon)


def local_remote(url: str) -> Path | None:
    """The directory a remote URL names on this machine (a path or file://), else None."""
    if url.startswith("file://"):
        return Path(urlsplit(url).path)
    if "://" in url or SCP_LIKE.match(url):
        return None
    return Path(url)


def check_remote(url: str, private: list[Path]) -> None:
    """GitError unless `url` is a remote this worker may fetch from and push to: no option
    look-alike, and a local repository only when it is outside every directory in `private`
    (where sandboxes write: pushing runs the receiving repository's hooks on this machine)."""
    if not url or url.startswith("-"):
        raise GitError(f"git remote {url!r} is not a URL")
    path = local_remote(url)
    if path is None:
        return
    if not path.is_absolute():
        raise GitError(f"git remote {url!r}: a local repository must be an absolute path")
    real = Path(os.path.realpath(path))
    for directory in private:
        if real == directory or directory in real.parents:
            raise GitError(
                f"git remote {url!r} is inside {directory}, where sandboxed tasks can write; "
                "a local remote must be outside QUEUE_WORKSPACE_ROOTS and WORKSPACE"
            )
