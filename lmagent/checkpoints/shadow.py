"""Snapshots of the workspace in a shadow git repository of their own.

The repository's git directory is `<workspace>/.lmagent/checkpoints/git`; the workspace is its
work tree. Every command runs the real `git` with a neutral environment (no system or global
configuration, HOME elsewhere, no hooks, no filters: none is configured), so nothing of the
user's own repository is read or written: their `.git` (HEAD, index, refs, stash, config) stays
byte-identical, and git never looks inside a `.git` directory of the work tree.

A snapshot is `git add -A` on the shadow index (only files whose stat data changed are read
again), `write-tree` and `commit-tree`: with 10,000 files and one change it costs a few tens of
milliseconds. It honours `.gitignore`, never holds `.lmagent/` or `.lmagent.md` (the agent's
configuration, the user's to change), and skips files larger than
MAX_FILE_BYTES with a note. Git stores a symbolic link as a link and never follows one, neither
when it reads the tree nor when a restore writes it back.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from lmagent.core.workspace import DATA_DIR, PROJECT_FILE

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files are left out of snapshots, with a note
MAX_FILE_DIFF = 20_000  # characters of one file's diff shown; more is summarised
MAX_DIFF = 200_000  # characters of one step's diff in all
GIT_TIMEOUT = 120
SHADOW_CONFIG = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "true"),
    ("core.splitIndex", "true"),  # a snapshot rewrites the few changed entries, not the index
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.quotePath", "false"),
    ("core.symlinks", "true"),
    ("commit.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("diff.noprefix", "false"),
)
AUTHOR = {
    "GIT_AUTHOR_NAME": "lmagent",
    "GIT_AUTHOR_EMAIL": "lmagent@localhost",
    "GIT_COMMITTER_NAME": "lmagent",
    "GIT_COMMITTER_EMAIL": "lmagent@localhost",
}
LATEST = "refs/checkpoints/latest"


class CheckpointError(Exception):
    """A snapshot or restore could not be made; the text says why and what to do."""


@dataclass
class Snapshot:
    commit: str
    tree: str
    notes: list[str] = field(default_factory=list)  # files left out, and why


class ShadowRepo:
    """The shadow repository of one workspace."""

    def __init__(self, workspace: Path | str):
        self.workspace = Path(workspace)
        self.home = self.workspace / DATA_DIR / "checkpoints"
        self.git_dir = self.home / "git"
        self.env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.workspace),
            "LC_ALL": "C",
            **AUTHOR,
        }

    # ------------------------------------------------------------------ running git

    def git(self, *args: str, ok: tuple[int, ...] = (0,), stdin: bytes = b"") -> str:
        """Run one git command in the workspace; its stdout, or CheckpointError."""
        try:
            done = subprocess.run(
                ["git", *args],
                input=stdin,
                cwd=self.workspace,
                env=self.env,
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except FileNotFoundError as exc:
            raise CheckpointError("git is not installed; install git to get checkpoints") from exc
        except subprocess.TimeoutExpired as exc:
            raise CheckpointError(f"git {args[0]} took over {GIT_TIMEOUT} s") from exc
        except OSError as exc:
            raise CheckpointError(f"git {args[0]} could not start: {exc}") from exc
        if done.returncode not in ok:
            problem = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git {args[0]} failed: {' / '.join(problem[-3:]) or '?'}")
        return done.stdout.decode(errors="replace")

    def ensure(self) -> None:
        """Create the shadow repository the first time (again if a crash cut it short: its
        exclude file, written last, marks it complete)."""
        exclude = self.git_dir / "info" / "exclude"
        if exclude.is_file():
            return
        try:
            self.git_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"cannot create {self.git_dir}: {exc.strerror}") from exc
        self.git("init", "-q", "--template=")
        for key, value in SHADOW_CONFIG:
            self.git("config", key, value)
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text(f"/{DATA_DIR}/\n/{PROJECT_FILE}\n")

    # ------------------------------------------------------------------ snapshots

    def latest(self) -> str | None:
        """The last snapshot taken (any session), or None before the first. The ref is read
        as a file: the shadow repository is never packed (no gc runs in it)."""
        try:
            return (self.git_dir / LATEST).read_text().strip() or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read the last checkpoint: {exc.strerror}") from exc

    def snapshot(self, message: str) -> Snapshot:
        """Record the workspace as it is now; the caller holds the checkpoint lock."""
        return self.commit(self.stage_tree(), message)

    def stage_tree(self) -> Snapshot:
        """The workspace as a tree, not yet committed (commit is "")."""
        self.ensure()
        notes = self.stage()
        return Snapshot("", self.git("write-tree").strip(), notes)

    def commit(self, staged: Snapshot, message: str) -> Snapshot:
        """Commit a staged tree after the latest snapshot and make it the latest."""
        parent = self.latest()
        parents = ["-p", parent] if parent else []
        commit = self.git("commit-tree", staged.tree, *parents, "-m", message).strip()
        self.set_latest(commit)
        return Snapshot(commit, staged.tree, staged.notes)

    def set_latest(self, commit: str) -> None:
        """Point the latest ref at `commit`, written as git writes a loose ref (one process
        less per snapshot than `git update-ref`; the caller holds the checkpoint lock)."""
        ref = self.git_dir / LATEST
        staged = self.git_dir / "latest.new"
        ref.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(commit + "\n")
        os.replace(staged, ref)

    def stage(self) -> list[str]:
        """Bring the shadow index in line with the workspace, minus new files too large to
        keep (a kept file that grows past the limit stays kept); the notes name the files
        left out."""
        out = self.git("ls-files", "-z", "--others", "--exclude-standard")
        large = sorted(path for path in set(filter(None, out.split("\0"))) if self.too_large(path))
        pathspecs = [".", *(f":(exclude,literal){path}" for path in large)]
        try:
            self.git("add", "-A", "--ignore-errors", "--pathspec-from-file=-",
                     "--pathspec-file-nul", stdin="\0".join(pathspecs).encode())  # fmt: skip
            problems = []
        except CheckpointError as exc:  # an unreadable file: the rest is still staged
            problems = [f"not every file could be kept: {exc}"]
        size = MAX_FILE_BYTES // 2**20
        return [f"{path}: larger than {size} MB, not kept" for path in large] + problems

    def too_large(self, path: str) -> bool:
        try:
            info = os.lstat(self.workspace / path)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size > MAX_FILE_BYTES

    # ------------------------------------------------------------------ comparing

    def changed(self, old: str, new: str) -> list[str]:
        """Paths (relative to the workspace) that differ between two snapshots or trees."""
        out = self.git("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
        return [path for path in out.split("\0") if path]

    def diff(self, old: str, new: str) -> str:
        """The unified diff between two snapshots; a binary file is one line, a very large
        file's diff a note of its size, and the whole is capped at MAX_DIFF characters."""
        text = self.git(
            "diff-tree", "-p", "-r", "--no-renames", "--no-ext-diff", "--no-textconv",
            "--no-color", "--src-prefix=a/", "--dst-prefix=b/", old, new,
        )  # fmt: skip
        return summarised(text)

    # ------------------------------------------------------------------ restoring

    def restore(self, commit: str) -> None:
        """Make the workspace's kept files those of `commit`: files it holds are written back,
        files kept since and absent from it are removed; ignored and oversized files stay.
        The shadow index must match the workspace (a snapshot was just taken)."""
        self.git("read-tree", "--reset", "-u", commit)


def summarised(text: str) -> str:
    """A diff with each very large file's part replaced by a note, capped as a whole."""
    parts = []
    for chunk in _file_chunks(text):
        if len(chunk) > MAX_FILE_DIFF:
            header = chunk.split("\n", 1)[0]
            lines = chunk.count("\n")
            chunk = f"{header}\n(diff of {lines} lines not shown: too large)\n"
        parts.append(chunk)
    joined = "".join(parts)
    if len(joined) > MAX_DIFF:
        joined = joined[:MAX_DIFF] + f"\n(diff cut at {MAX_DIFF} characters)\n"
    return joined


def _file_chunks(text: str) -> list[str]:
    chunks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not chunks:
            chunks.append([])
        chunks[-1].append(line)
    return ["".join(chunk) for chunk in chunks]
