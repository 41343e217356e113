"""A task's workspace as a git remote and branch: the worker fetches it, the task runs in a work
tree of its own, and the result is pushed as the branch `lmagent/<task id>`. Credentials are the
worker's own git configuration; the queue holds only the URL.

The host's git never runs anything the sandbox could have written, and never reads the work
tree once a sandbox has used it. The repository the worker fetches, commits and pushes from
(`<WORKSPACE>/.lmagent/queue/git/<task id>.git`) lies outside the task's work tree
(`<WORKSPACE>/.lmagent/queue/work/<task id>`), where no sandbox sees it; every call names it
explicitly (never discovery), and overrides in git's command scope what could start a program
(hooks, fsmonitor, pager, other transports, signing, submodule recursion). git checks the work
tree out before any sandbox exists; the result is read by descriptor, as checkpoints are
(checkpoints/scan.py: folders opened without following links, links stored as links, files
read from the descriptor opened), written as objects into the worker's repository, and
committed with plumbing (`commit-tree`, `update-ref`) and pushed with no work tree at all. A
process still alive in the work tree can change which of the work tree's own entries are read,
never make a host file be read. No filter, hook, editor or template runs. The work tree's own
`.git` (a clone made for the model before the run, for its own git use) is never read by the
host.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from lmagent.checkpoints.objects import (
    EXECUTABLE,
    FILE,
    FOLDER,
    GITLINK,
    LINK,
    MissingObject,
    ObjectStore,
)
from lmagent.checkpoints.scan import MAX_FILE_BYTES, Scanner, read_regular

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


class GitError(RuntimeError):
    """The remote cannot be cloned, fetched or pushed from this worker; one line."""


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git with every program-starting setting neutralised; its stdout."""
    command = ["git", "--no-pager"]
    for setting in NEUTRAL:
        command += ["-c", setting]
    try:
        done = subprocess.run(
            [*command, *args],
            cwd=cwd or "/",
            env=environment(),
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


def environment(**extra: str) -> dict[str, str]:
    """The worker's environment for git: no location variable, no prompt."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    return {**env, "GIT_TERMINAL_PROMPT": "0", **extra}


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
        """git on the repository alone: no work tree."""
        return git(f"--git-dir={self.git_dir}", *args, cwd=self.git_dir)

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
    repo.git("remote", "add", "origin", url)
    fetched = f"refs/remotes/origin/{branch}"
    repo.git("fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{branch}:{fetched}")
    where = (f"--git-dir={repo.git_dir}", f"--work-tree={repo.work_tree}")
    git(*where, "checkout", "--quiet", "-B", repo.branch, fetched, cwd=repo.work_tree)
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
    """Commit what the work tree holds (not `.git`, `.lmagent/`), read by descriptor, on top of
    the result branch and push it as `lmagent/<task id>`; returns that name. What was left out
    (a file too large or unreadable) is said in the commit's message."""
    repo = TaskRepository(root, task_id)
    head = repo.git("rev-parse", "HEAD^{tree}").strip()
    tree, notes = read_work_tree(repo, head)
    if tree != head:
        message = "\n".join([f"lmagent task {task_id}", *(["", *notes] if notes else [])])
        commit = repo.git(*identity(repo), "commit-tree", tree, "-p", "HEAD", "-m", message).strip()
        repo.git("update-ref", f"refs/heads/{repo.branch}", commit)
    repo.git("push", "--quiet", "origin", f"refs/heads/{repo.branch}:refs/heads/{repo.branch}")
    return repo.branch


def read_work_tree(repo: TaskRepository, head: str) -> tuple[str, list[str]]:
    """(the work tree's tree id, notes on what was left out), its objects written into the
    worker's repository: what `git add --all` would have staged against `head`, read by
    descriptor. The scan leaves out what .gitignore matches; a file `head` holds stays
    tracked all the same (git ignores only untracked files), as does a submodule's gitlink
    whose folder was never checked out."""
    store = ObjectStore(repo.git_dir, environment(GIT_DIR=str(repo.git_dir)))
    scanner = Scanner(repo.work_tree, store, repo.git_dir / "lmagent-stat-cache.json")
    try:
        scanned, notes = scanner.tree()
        found = store.files(scanned)
        tracked = {
            path: entry
            for path, committed in store.files(head).items()
            if path not in found and (entry := still_tracked(scanner, path, committed, notes))
        }
        if not tracked:
            return scanned, notes
        return write_tree_of(store, merged(found, tracked)), notes
    except (OSError, MissingObject) as exc:
        raise GitError(f"cannot read the work tree of {repo.branch}: {exc}") from None
    finally:
        scanner.close()
        store.close()


def still_tracked(
    scanner: Scanner, path: str, committed: tuple[str, str], notes: list[str]
) -> tuple[str, str] | None:
    """The entry a committed path the scan left out keeps, read by descriptor: None when it
    is gone (or a folder now); its committed entry, noted, when it cannot be read."""
    prefix, _, name = path.rpartition("/")
    try:
        fd = scanner.open_folder(prefix + "/" if prefix else "")
    except OSError:
        return None  # a folder on the way is gone, or a link now
    try:
        return entry_at(scanner.store, fd, name, committed)
    except OSError as exc:
        notes[:] = [note for note in notes if not note.startswith(path + ": ")]
        notes.append(f"{path}: {exc.strerror or exc}; its last committed version is kept")
        return committed
    finally:
        os.close(fd)


def entry_at(
    store: ObjectStore, fd: int, name: str, committed: tuple[str, str]
) -> tuple[str, str] | None:
    """(mode, sha) of entry `name` of the folder open as `fd`, its object written; None when
    it is gone or a folder (a submodule's folder: its committed gitlink); OSError when it
    cannot be read."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return committed if committed[0] == GITLINK else None
    if stat.S_ISLNK(info.st_mode):
        return LINK, store.write("blob", os.readlink(os.fsencode(name), dir_fd=fd))
    data = read_regular(fd, name, info.st_ino) if stat.S_ISREG(info.st_mode) else None
    if data is None:
        raise OSError("not a regular file, or changed while read")
    if len(data) > MAX_FILE_BYTES:
        raise OSError(f"larger than {MAX_FILE_BYTES // 2**20} MB")
    return (EXECUTABLE if info.st_mode & stat.S_IXUSR else FILE), store.write_blob(data)


def merged(
    found: dict[str, tuple[str, str]], tracked: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """The scanned files and the tracked ones the scan left out, but where a path is a file
    in one and a folder in the other (the work tree changed between the two looks): the scan's."""
    folders = {parent for path in found for parent in parents(path)}
    kept = {
        path: entry
        for path, entry in tracked.items()
        if path not in folders and not any(parent in found for parent in parents(path))
    }
    return {**found, **kept}


def parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def write_tree_of(store: ObjectStore, files: dict[str, tuple[str, str]]) -> str:
    """The tree holding `path -> (mode, sha)` entries, written into `store`; its id."""
    top: dict = {}
    for path, entry in files.items():
        *folders, name = path.split("/")
        node = top
        for folder in folders:
            node = node.setdefault(folder, {})
        node[name] = entry

    def write(node: dict) -> str:
        entries = {
            name: (FOLDER, write(value)) if isinstance(value, dict) else value
            for name, value in node.items()
        }
        return store.write_tree(entries)

    return write(top)


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
