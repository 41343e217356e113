"""Snapshots of the workspace in a shadow git repository of their own.

The repository's git directory is `<workspace>/.lmagent/checkpoints/git` (in `.lmagent/`, which
no sandboxed process can see). A snapshot never runs git on the workspace: the tree is read by
descriptor and written as git objects in-process (scan.py, objects.py), then committed (the
latest is `refs/checkpoints/latest`). The snapshots a session's steps name are kept reachable by
that session's ref (`refs/checkpoints/sessions/<id>`, a chain of commits whose parents are the
step's snapshots), and a delegate step's first snapshot by a pending ref while its sub-agents
work, so pruning drops only snapshots no step needs, and dropping a session's ref (to keep the
repository under CHECKPOINT_MAX_MB) drops its history. Changed paths and
diffs are computed from the trees (diff.py); a restore writes by descriptor, all or nothing
(writer.py). git itself runs only on the git directory: to create it, to read packed objects
(`cat-file --batch`) and to pack it (`repack`, `prune`) as it grows, always with a neutral
environment (no system or global configuration, no hooks) and never on a work tree. The user's
own `.git` is never read or written.

Each process keeps one Scanner per workspace (the tree as last seen, inotify watches, the stat
cache), shared by its runs and restores under a thread lock; the checkpoint lock (steps.py)
orders processes.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lmagent.checkpoints import diff as diffs
from lmagent.checkpoints.objects import MissingObject, ObjectStore, commit_bytes
from lmagent.checkpoints.scan import MAX_FILE_BYTES, Scanner
from lmagent.checkpoints.writer import RestoreFailed, apply
from lmagent.core.workspace import DATA_DIR, PROJECT_FILE

__all__ = ["MAX_FILE_BYTES", "CheckpointError", "RestoreFailed", "ShadowRepo", "Snapshot"]

GIT_TIMEOUT = 120
PACK_LOOSE = 2000  # loose objects (estimated) that make the next repository open pack them
PRUNE_AFTER = "1.hour.ago"  # unreachable objects younger than this may belong to a snapshot
SHADOW_CONFIG = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.autocrlf", "false"),
    ("core.symlinks", "true"),
    ("commit.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
LATEST = "refs/checkpoints/latest"
SESSIONS = "refs/checkpoints/sessions"
PENDING = "refs/checkpoints/pending"


class CheckpointError(Exception):
    """A snapshot or restore could not be made; the text says why and what to do."""


@dataclass
class Snapshot:
    commit: str
    tree: str
    notes: list[str] = field(default_factory=list)  # files left out, and why


class _Shared:
    """What one process knows of one workspace's shadow repository."""

    def __init__(self, repo: ShadowRepo):
        self.lock = threading.RLock()
        self.store = ObjectStore(repo.git_dir, repo.env)
        self.scanner = Scanner(repo.workspace, self.store, repo.home / "stat-cache.json")
        self.last: tuple[str, str] | None = None  # (commit, tree) of the last snapshot made here


_SHARED: dict[Path, _Shared] = {}  # oldest first; each holds an inotify instance
_SHARED_LOCK = threading.Lock()
MAX_SHARED = 8  # workspaces watched at once by one process (inotify instances are few)


class ShadowRepo:
    """The shadow repository of one workspace."""

    def __init__(self, workspace: Path | str):
        self.workspace = Path(workspace).expanduser().resolve()
        self.home = self.workspace / DATA_DIR / "checkpoints"
        self.git_dir = self.home / "git"
        self.damage: list[str] = []  # what was found broken and rebuilt
        self.env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.home / "no-work-tree"),  # empty: git never sees the workspace
            "LC_ALL": "C",
        }
        self.shared = _shared_for(self)

    @property
    def store(self) -> ObjectStore:
        return self.shared.store

    # ------------------------------------------------------------------ running git

    def git(self, *args: str, ok: tuple[int, ...] = (0,), stdin: bytes = b"") -> str:
        """Run one git command on the shadow repository; its stdout, or CheckpointError."""
        try:
            done = subprocess.run(
                ["git", *args],
                input=stdin,
                cwd=self.home if self.home.is_dir() else None,
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
        """Create the shadow repository the first time, again when it was deleted or a crash
        cut its creation short (its exclude file, written last, marks it complete)."""
        exclude = self.git_dir / "info" / "exclude"
        if exclude.is_file() and (self.git_dir / "objects").is_dir():
            return
        try:
            self.git_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"cannot create {self.git_dir}: {exc.strerror}") from exc
        if self.shared.last is not None:
            self.damage.append("the checkpoint repository was deleted; it was made again")
        self.forget()  # the stat cache names objects of a repository that is no more
        self.git("init", "-q", "--template=")
        for key, value in SHADOW_CONFIG:
            self.git("config", key, value)
        (self.home / "no-work-tree").mkdir(exist_ok=True)
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text(f"/{DATA_DIR}/\n/{PROJECT_FILE}\n")

    def forget(self) -> None:
        """Drop what this process knew of the repository (its objects went)."""
        with self.shared.lock:
            self.shared.scanner.forget()
            self.shared.last = None

    # ------------------------------------------------------------------ health

    def check(self) -> None:
        """Rebuild what is damaged: a ref naming nothing readable is dropped, and when the
        objects this process relies on are gone everything is read again. Each finding is
        added to `damage`."""
        self.ensure()
        latest = self.latest()
        if latest is None and self.shared.last is None:
            self.forget()  # a stat cache without a history to hold its objects is not trusted
            return
        try:
            if latest:
                self.tree_of(latest)
            if self.shared.last:
                self.store.read_tree(self.shared.last[1])
        except MissingObject:
            self.damage.append("the checkpoint history was damaged (objects missing)")
            self.forget()
            self.drop_latest()
        finally:
            self.store.close()

    def latest(self) -> str | None:
        """The last snapshot taken (any session), or None before the first (or when the ref
        holds something else than an object id: it is noted as damage and replaced)."""
        try:
            text = (self.git_dir / LATEST).read_text(errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read the last checkpoint: {exc.strerror}") from exc
        if _is_sha(text):
            return text
        if text:
            self.damage.append("the latest checkpoint ref was damaged; it was reset")
        self.drop_latest()
        return None

    def drop_latest(self) -> None:
        try:
            (self.git_dir / LATEST).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise CheckpointError(f"cannot reset the last checkpoint: {exc.strerror}") from exc

    def size(self) -> int:
        """Bytes the shadow repository takes on disk."""
        total = 0
        for folder, _, files in os.walk(self.git_dir):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
                except OSError:
                    pass
        return total

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, message: str) -> Snapshot:
        """Record the workspace as it is now; the caller holds the checkpoint lock."""
        return self.commit(self.stage_tree(), message)

    def stage_tree(self) -> Snapshot:
        """The workspace as a tree, not yet committed (commit is "")."""
        self.ensure()
        with self.shared.lock:
            try:
                tree, notes = self.shared.scanner.tree()
            except OSError as exc:
                raise CheckpointError(f"cannot read the workspace: {exc.strerror or exc}") from exc
            except Exception as exc:  # whatever the workspace holds, never a crash of the caller
                self.forget()  # what was known of the tree may be half updated
                cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                raise CheckpointError(f"cannot read the workspace ({cause})") from exc
        return Snapshot("", tree, notes)

    def commit(self, staged: Snapshot, message: str) -> Snapshot:
        """Commit a staged tree and make it the latest (the latest itself when it already
        holds that tree)."""
        latest = self.latest()
        last = self.shared.last
        if latest and last and last[0] == latest and last[1] == staged.tree:
            return Snapshot(latest, staged.tree, staged.notes)
        try:
            commit = self.store.write("commit", commit_bytes(staged.tree, [], message, _now()))
            self.set_ref(LATEST, commit)
        except OSError as exc:
            raise CheckpointError(f"cannot write a checkpoint: {exc.strerror or exc}") from exc
        self.shared.last = (commit, staged.tree)
        return Snapshot(commit, staged.tree, staged.notes)

    def set_ref(self, name: str, commit: str) -> None:
        """Point a loose ref at `commit`. An existing ref is overwritten in place: its 41 bytes
        go in one write within one sector (renaming over it costs a flush on ext4, ~2 ms); a
        new one is made beside and renamed in."""
        ref = self.git_dir / name
        line = (commit + "\n").encode()
        try:
            fd = os.open(ref, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            staged = ref.with_name(ref.name + ".new")
            ref.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(line)
            os.replace(staged, ref)
            return
        try:
            if os.fstat(fd).st_size != len(line):
                os.ftruncate(fd, len(line))
            os.pwrite(fd, line, 0)
        finally:
            os.close(fd)

    def ref(self, name: str) -> str | None:
        try:
            text = (self.git_dir / name).read_text(errors="replace").strip()
        except OSError:
            return None
        return text if _is_sha(text) else None

    def keep(self, session_id: str, commits: list[str]) -> None:
        """Keep `commits` reachable as long as the session's history is kept."""
        name = f"{SESSIONS}/{session_id}"
        chain = [c for c in (self.ref(name), *commits) if c]
        empty = self.store.write_tree({})
        data = commit_bytes(empty, chain, f"steps of session {session_id}", _now())
        self.set_ref(name, self.store.write("commit", data))

    def hold(self, session_id: str, commit: str | None) -> None:
        """Keep a step's first snapshot while the step runs without the lock (None: let go)."""
        if commit:
            self.set_ref(f"{PENDING}/{session_id}", commit)
        else:
            (self.git_dir / PENDING / session_id).unlink(missing_ok=True)

    def pack(self) -> None:
        """Pack loose objects and prune unreachable old ones when there are many (git works
        on the object database only; safe beside snapshots being written)."""
        try:
            loose = len(os.listdir(self.git_dir / "objects" / "00")) * 256
        except OSError:
            return
        if loose >= PACK_LOOSE:
            self.git("repack", "-d", "-q", "--window=0", "--no-write-bitmap-index")
            self.git("prune", f"--expire={PRUNE_AFTER}")

    def cap(self, max_bytes: int, keep: str) -> list[str]:
        """Drop the oldest sessions' histories (not `keep`'s) while the repository is over
        `max_bytes`; the sessions dropped. The caller holds the checkpoint lock, so no step of
        another run is between its snapshots (a delegate step's first snapshot has a pending
        ref)."""
        dropped: list[str] = []
        found = (self.git_dir / SESSIONS).glob("*")
        sessions = sorted((ref for ref in found if ref.name != keep), key=_mtime)
        while max_bytes and self.size() > max_bytes and sessions:
            oldest = sessions.pop(0)
            oldest.unlink(missing_ok=True)
            dropped.append(oldest.name)
            self.git("repack", "-a", "-d", "-q", "--no-write-bitmap-index")
            self.git("prune", "--expire=now")
        return dropped

    # ------------------------------------------------------------------ comparing

    def tree_of(self, name: str) -> str:
        """The tree of a snapshot (a commit id; a tree id is itself)."""
        kind, _ = self.store.read(name)
        if kind == "tree":
            return name
        return self.store.commit_tree(name)

    def changed(self, old: str, new: str) -> list[str]:
        """Paths (relative to the workspace) that differ between two snapshots or trees."""
        with self.reading():
            return diffs.changed_paths(self.store, self.tree_of(old), self.tree_of(new))

    def diff(self, old: str, new: str, paths: list[str] | None = None) -> str:
        """The unified diff between two snapshots (of `paths` when known)."""
        with self.reading():
            old_tree, new_tree = self.tree_of(old), self.tree_of(new)
            if paths is None:
                paths = diffs.changed_paths(self.store, old_tree, new_tree)
            return diffs.unified(self.store, old_tree, new_tree, paths)

    def entry(self, tree: str, path: str) -> tuple[str, str] | None:
        return diffs.entry_at(self.store, tree, path)

    def reading(self):
        """Object reads that say "history lost" for a missing object, never git's text."""
        return _Reading(self)

    # ------------------------------------------------------------------ restoring

    def restore(self, commit: str) -> None:
        """Make the workspace's kept files those of `commit`: files it holds are written back,
        files kept since and absent from it are removed; ignored and oversized files stay."""
        now = self.stage_tree()
        with self.reading():
            target = self.tree_of(commit)
            paths = diffs.changed_paths(self.store, now.tree, target)
            self.write({path: self.entry(target, path) for path in paths})

    def write(self, changes: dict[str, tuple[str, str] | None]) -> None:
        """Write `path -> (mode, blob) or None (remove)` into the workspace, all or nothing
        (RestoreFailed says what state the files are in)."""
        with self.shared.lock:
            try:
                apply(self.workspace, self.store, changes)
            finally:
                self.store.close()


def _shared_for(repo: ShadowRepo) -> _Shared:
    """This process's state of the workspace, the most recently used last; the least recently
    used beyond MAX_SHARED lets its watches go (it walks again if used again)."""
    with _SHARED_LOCK:
        shared = _SHARED.pop(repo.workspace, None) or _Shared(repo)
        _SHARED[repo.workspace] = shared
        while len(_SHARED) > MAX_SHARED:
            oldest = _SHARED.pop(next(iter(_SHARED)))
            with oldest.lock:
                oldest.scanner.close()
        return shared


def _now() -> int:
    return int(time.time())


def _is_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class _Reading:
    def __init__(self, repo: ShadowRepo):
        self.repo = repo

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, trace):
        self.repo.store.close()
        if isinstance(exc, MissingObject):
            raise CheckpointError(f"the checkpoint history was lost or damaged ({exc})") from exc
        return False
