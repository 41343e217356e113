"""The workspace as a git tree, read by descriptor and kept up to date by inotify.

The first look walks the whole workspace: every folder is opened relative to its parent's
descriptor with `O_NOFOLLOW | O_DIRECTORY`, listed with `os.scandir(fd)` (lstat entries), and
watched (inotify.py). Only regular files are read, each opened relative to its folder with
`O_NOFOLLOW | O_NONBLOCK` and checked with fstat; a symbolic link is stored as a link (its target
read with readlinkat), never followed. So a sandboxed process that swaps a folder for a link to a
host folder while we look only changes which workspace entry we reach: nothing outside is read.

Later looks read only the entries inotify named; a file whose size, times, inode and mode match
the stat cache (kept in `.lmagent/checkpoints/stat-cache.json`) is not read again. Folders are
git trees built in memory, their ids recomputed only along the changed paths.

What is kept is what `git add -A` kept: `.gitignore` files are honoured (pathspec's
GitIgnoreSpec, git's own rules), `.lmagent/` and `.lmagent.md` at the top and every `.git` are
left out, files over MAX_FILE_BYTES are left out with a note, and a folder holding a `.git`
folder of its own (a nested repository) is kept as a gitlink to its HEAD commit.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import stat
import time
from pathlib import Path

from pathspec import GitIgnoreSpec

from lmagent.checkpoints.inotify import Watcher
from lmagent.checkpoints.objects import EXECUTABLE, FILE, FOLDER, GITLINK, LINK, ObjectStore, shown
from lmagent.core.workspace import DATA_DIR, DIR_FLAGS, PROJECT_FILE, READ_FLAGS

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files are left out of snapshots, with a note
RACY_NS = 100_000_000  # a file changed this recently may change again within its timestamp
CACHE_SAVE_EVERY = 30.0  # seconds between saves of the stat cache after small changes
IGNORE_FILE = ".gitignore"
CHUNK = 1 << 20  # bytes read from a file at a time
OPEN_LEVELS = 32  # folders a walk keeps open on its way down (a tree may be any depth)


class Folder:
    """One folder: its files, links and gitlinks (`name -> (mode, sha)`), its subfolders, and
    its tree id (None until computed again after a change)."""

    __slots__ = ("entries", "folders", "sha")

    def __init__(self):
        self.entries: dict[str, tuple[str, str]] = {}
        self.folders: dict[str, Folder] = {}
        self.sha: str | None = None


class _Level:
    """A folder on the walk's stack: its descriptor (-1 while closed), where it is, its
    (st_dev, st_ino) when listed, and the subfolders left to walk into."""

    __slots__ = ("fd", "folder", "ident", "name", "pending", "prefix")

    def __init__(self, fd: int, prefix: str, name: str, folder: Folder):
        self.fd, self.prefix, self.name, self.folder = fd, prefix, name, folder
        self.ident: tuple[int, int] | None = None
        self.pending: list[str] = []


class Scanner:
    """The workspace's current tree, for one process (callers hold its lock)."""

    def __init__(self, root: Path, store: ObjectStore, cache_path: Path):
        self.root = Path(root)
        self.store = store
        self.cache_path = cache_path
        self.cache: dict[str, list] = {}  # path -> [size, mtime_ns, ctime_ns, ino, mode, sha]
        self.top: Folder | None = None
        self.watcher: Watcher | None = None
        self.specs: dict[str, GitIgnoreSpec] = {}  # folder ("" or "a/b/") -> its .gitignore
        self.large: set[str] = set()
        self.nested: dict[str, str | None] = {}  # nested repository folder -> its HEAD
        self.problems: list[str] = []
        self.saved_at = 0.0
        self.cache_changed = False

    # ------------------------------------------------------------------ looking

    def tree(self) -> tuple[str, list[str]]:
        """(the workspace's tree id, notes on what was left out) as it is now."""
        changes = self.watcher.changes() if self.top is not None and self.watcher else None
        if changes is None:
            self.walk_all()
        elif changes:
            self.update(changes)
        self.refresh_nested()
        self.save_cache()
        size = MAX_FILE_BYTES // 2**20
        notes = [f"{shown(path)}: larger than {size} MB, not kept" for path in sorted(self.large)]
        return self.tree_id(self.top) or self.store.write_tree({}), notes + self.problems

    def forget(self) -> None:
        """Drop everything known (the object store was damaged): the next look reads all."""
        if self.watcher:
            self.watcher.close()
        self.top, self.watcher, self.cache, self.cache_changed = None, None, {}, False
        with contextlib.suppress(OSError):
            self.cache_path.unlink()
        self.store.present.clear()
        self.store.trees.clear()
        self.store.recent.clear()

    def walk_all(self) -> None:
        if self.watcher:
            self.watcher.close()
        if not self.cache:
            self.cache = self.load_cache()
        self.watcher = Watcher()
        self.specs, self.large, self.nested, self.problems = {}, set(), {}, []
        seen: set[str] = set()
        collecting = gc.isenabled()
        gc.disable()  # a walk makes many small objects: collections would rescan them all
        try:
            self.top = self.walk(os.open(self.root, DIR_FLAGS), "", seen)
        finally:
            if collecting:
                gc.enable()
        self.cache = {path: self.cache[path] for path in seen if path in self.cache}
        self.cache_changed, self.saved_at = True, 0.0

    def walk(self, fd: int, prefix: str, seen: set[str] | None = None) -> Folder:
        """A folder open as `fd` (closed here), known as `prefix` ("" or "a/b/"), with all
        below it. The folders being walked are a stack, never a recursion, so a tree of any
        depth is walked; only the OPEN_LEVELS deepest of them (and the first) stay open, one
        closed is opened again from the deepest open one above it when it is needed."""
        top = Folder()
        stack = [_Level(fd, prefix, "", top)]
        try:
            self.look_into(stack[0], seen)
            while stack:
                level = stack[-1]
                if not level.pending:
                    _close(stack.pop())
                    continue
                if level.fd < 0:
                    self.reopen(stack)
                    continue
                name = level.pending.pop()
                child = self.open_child(level.fd, level.prefix + name, name)
                if child is not None:
                    folder = level.folder.folders[name] = Folder()
                    stack.append(_Level(child, f"{level.prefix}{name}/", name, folder))
                    self.look_into(stack[-1], seen)
                    if len(stack) > OPEN_LEVELS + 1:
                        _close(stack[-OPEN_LEVELS - 1])
        finally:
            for level in stack:
                _close(level)
        return top

    def look_into(self, level: _Level, seen) -> None:
        """List the level's folder: its files and links go into its Folder, its subfolders to
        walk into its `pending` (the last name first)."""
        fd, prefix, folder = level.fd, level.prefix, level.folder
        try:
            info = os.fstat(fd)
            level.ident = (info.st_dev, info.st_ino)
            if self.watcher:
                self.watcher.watch(fd, prefix)
            with os.scandir(fd) as listing:
                entries = sorted(listed(listing))
            if any(name == IGNORE_FILE for name, _ in entries):
                self.read_ignore(fd, prefix)
            for entry, info in entries:
                if self.add(folder, fd, prefix, entry, info, seen):
                    level.pending.append(entry)
        except OSError as exc:
            self.not_all_kept(prefix, exc)
            level.pending.clear()
        level.pending.reverse()

    def reopen(self, stack: list[_Level]) -> None:
        """Open again the closed folders at the bottom of the stack, each by its parent and
        checked to be the folder that was listed; one that is not (moved or swapped since)
        is left with what was read of it."""
        at = max(i for i, level in enumerate(stack) if level.fd >= 0)
        for parent, level in zip(stack[at:], stack[at + 1 :], strict=False):
            try:
                level.fd = os.open(level.name, DIR_FLAGS, dir_fd=parent.fd)
                info = os.fstat(level.fd)
                if (info.st_dev, info.st_ino) != level.ident:
                    raise FileNotFoundError(errno.ENOENT, "moved while it was read")
            except OSError as exc:
                self.not_all_kept(level.prefix, exc)
                for lost in stack[stack.index(level) :]:
                    lost.pending.clear()
                break
        for level in stack[1 : max(len(stack) - OPEN_LEVELS, 1)]:
            _close(level)

    def not_all_kept(self, prefix: str, exc: OSError) -> None:
        self.problems.append(
            f"{shown(prefix) or '.'}: not every file could be kept ({exc.strerror or exc})"
        )

    def add(self, folder: Folder, fd: int, prefix: str, name: str, info, seen) -> bool:
        """Put entry `name` of the folder into the model (or leave it out, as git would);
        whether it is a folder to walk into."""
        path = prefix + name
        if left_out(prefix, name):
            return False
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR:
            return not self.ignored(path, True)
        if kind in (stat.S_IFREG, stat.S_IFLNK) and not self.ignored(path, False):
            if kind == stat.S_IFLNK:
                self.add_link(folder, fd, path, name)
            elif info.st_size > MAX_FILE_BYTES:
                self.large.add(path)
            else:
                sha = self.blob(fd, name, path, info)
                if sha:
                    mode = EXECUTABLE if info.st_mode & stat.S_IXUSR else FILE
                    folder.entries[name] = (mode, sha)
                    if seen is not None:
                        seen.add(path)
        return False

    def add_link(self, folder: Folder, fd: int, path: str, name: str) -> None:
        """A link, stored as its target; one swapped for another kind of entry since it was
        listed is noted and left out, and the folder's other entries are still read (they were
        all lost: a restore to such a snapshot deleted every file listed after the link)."""
        try:
            target = os.readlink(os.fsencode(name), dir_fd=fd)
        except OSError as exc:
            self.problems.append(f"{shown(path)}: not kept ({exc.strerror or exc})")
            return
        folder.entries[name] = (LINK, self.store.write("blob", target))

    def open_child(self, fd: int, path: str, name: str) -> int | None:
        """A subfolder opened to walk into; None when it is a nested repository (kept as a
        gitlink) or no longer a folder (swapped for a link or removed since it was listed)."""
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            return None
        if _exists(child, ".git"):
            os.close(child)
            self.nested[path] = None  # its HEAD is read by refresh_nested
            return None
        return child

    def blob(self, fd: int, name: str, path: str, info) -> str | None:
        """The blob id of a regular file, from the stat cache or read by descriptor."""
        key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode]
        cached = self.cache.get(path)
        if cached and cached[:5] == key:
            return cached[5]
        try:
            data = read_regular(fd, name, info.st_ino)
        except OSError as exc:
            self.problems.append(f"{shown(path)}: not kept ({exc.strerror or exc})")
            return None
        if data is None:
            return None
        if len(data) > MAX_FILE_BYTES:  # it grew while it was read
            self.large.add(path)
            return None
        sha = self.store.write_blob(data)
        if info.st_mtime_ns < time.time_ns() - RACY_NS:
            self.cache[path] = [*key, sha]
        else:
            self.cache.pop(path, None)  # it may change again without its stat data changing
        self.cache_changed = True
        return sha

    # ------------------------------------------------------------------ ignore rules

    def read_ignore(self, fd: int, prefix: str) -> None:
        try:
            data = read_regular(fd, IGNORE_FILE, None, limit=1 << 20) or b""
        except OSError:
            return
        self.specs[prefix] = GitIgnoreSpec.from_lines(data.decode(errors="replace").splitlines())

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether git would ignore `path`: the deepest .gitignore with a say decides."""
        if not self.specs:
            return False
        decision = None
        base = ""
        for part in path.split("/"):
            spec = self.specs.get(base)
            if spec is not None:
                verdict = spec.check_file(path[len(base) :] + ("/" if is_dir else "")).include
                if verdict is not None:
                    decision = verdict
            base += part + "/"
        return bool(decision)

    # ------------------------------------------------------------------ changes by inotify

    def update(self, changes: set[tuple[str, str]]) -> None:
        """Look again at the entries inotify named (a changed .gitignore: its whole folder)."""
        for prefix, name in sorted(changes):
            if name.casefold() == ".git" and prefix:  # a folder became (or ceased) a repository
                prefix, _, name = prefix[:-1].rpartition("/")
                prefix = prefix + "/" if prefix else ""
            folder = self.find(prefix)
            if folder is None or left_out(prefix, name):
                continue
            try:
                fd = self.open_folder(prefix)
            except OSError:
                continue  # the folder went: its parent's own event removes it
            try:
                self.invalidate(prefix)
                if name == IGNORE_FILE:
                    self.rewalk(folder, fd, prefix)
                else:
                    self.replace(folder, fd, prefix, name)
            finally:
                os.close(fd)

    def replace(self, folder: Folder, fd: int, prefix: str, name: str) -> None:
        path = prefix + name
        folder.entries.pop(name, None)
        folder.folders.pop(name, None)
        self.large.discard(path)
        self.nested.pop(path, None)
        self.forget_below(path + "/")
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            self.cache.pop(path, None)
            return
        if self.add(folder, fd, prefix, name, info, None):
            child = self.open_child(fd, path, name)
            if child is not None:
                folder.folders[name] = self.walk(child, path + "/")

    def rewalk(self, folder: Folder, fd: int, prefix: str) -> None:
        """The folder's ignore rules changed: everything below it is looked at again."""
        self.specs.pop(prefix, None)
        self.forget_below(prefix)
        fresh = self.walk(os.dup(fd), prefix)
        folder.entries, folder.folders = fresh.entries, fresh.folders

    def forget_below(self, prefix: str) -> None:
        for known in (self.specs, self.nested):
            for path in [p for p in known if p.startswith(prefix)]:
                del known[path]
        self.large = {p for p in self.large if not p.startswith(prefix)}

    def find(self, prefix: str) -> Folder | None:
        folder = self.top
        for part in prefix.split("/")[:-1]:
            folder = folder.folders.get(part) if folder else None
        return folder

    def invalidate(self, prefix: str) -> None:
        folder = self.top
        folder.sha = None
        for part in prefix.split("/")[:-1]:
            folder = folder.folders[part]
            folder.sha = None

    def open_folder(self, prefix: str) -> int:
        """A descriptor of a workspace folder, each step opened without following links."""
        fd = os.open(self.root, DIR_FLAGS)
        for part in prefix.split("/")[:-1]:
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            finally:
                os.close(fd)
            fd = child
        return fd

    # ------------------------------------------------------------------ trees, repositories

    def tree_id(self, top: Folder) -> str | None:
        """The folder's tree id; None when it keeps nothing (git records no empty folder).
        Folders whose id is not known are written deepest first, from a stack."""
        pending = [(top, False)]
        while pending:
            folder, ready = pending.pop()
            if folder.sha is not None:
                continue
            if not ready:
                pending.append((folder, True))
                pending += [(sub, False) for sub in folder.folders.values() if sub.sha is None]
                continue
            entries = dict(folder.entries)
            for name, sub in folder.folders.items():
                if sub.sha:
                    entries[name] = (FOLDER, sub.sha)
            folder.sha = self.store.write_tree(entries) if entries else ""
        return top.sha or None

    def refresh_nested(self) -> None:
        """Keep each nested repository as a gitlink to its HEAD (left out without one)."""
        for path, known in list(self.nested.items()):
            head = self.head_of(path)
            if head == known:
                continue
            self.nested[path] = head
            prefix, _, name = path.rpartition("/")
            prefix = prefix + "/" if prefix else ""
            folder = self.find(prefix)
            if folder is None:
                continue
            self.invalidate(prefix)
            if head:
                folder.entries[name] = (GITLINK, head)
            else:
                folder.entries.pop(name, None)

    def head_of(self, path: str) -> str | None:
        try:
            fd = self.open_folder(path + "/.git/")
        except OSError:
            return None
        try:
            return resolve_head(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ the stat cache

    def load_cache(self) -> dict[str, list]:
        try:
            loaded = json.loads(self.cache_path.read_text())
        except (OSError, ValueError):
            return {}  # none yet, or damaged: every file is read once
        good = isinstance(loaded, dict) and loaded.get("version") == 1
        entries = loaded.get("entries") if good else None
        return entries if isinstance(entries, dict) else {}

    def save_cache(self) -> None:
        if not self.cache_changed or time.monotonic() - self.saved_at < CACHE_SAVE_EVERY:
            return
        staged = self.cache_path.with_suffix(".new")
        with contextlib.suppress(OSError):
            staged.write_text(json.dumps({"version": 1, "entries": self.cache}))
            os.replace(staged, self.cache_path)
            self.saved_at, self.cache_changed = time.monotonic(), False

    def close(self) -> None:
        """Save the stat cache and let the watches go (the next look walks again)."""
        self.saved_at = 0.0
        self.save_cache()
        if self.watcher:
            self.watcher.close()
        self.top, self.watcher = None, None


def _close(level: _Level) -> None:
    if level.fd >= 0:
        os.close(level.fd)
        level.fd = -1


def listed(listing) -> list[tuple[str, os.stat_result]]:
    """A folder's entries (name, lstat), leaving out those removed since they were listed."""
    found = []
    for entry in listing:
        with contextlib.suppress(FileNotFoundError):
            found.append((entry.name, entry.stat(follow_symlinks=False)))
    return found


def left_out(prefix: str, name: str) -> bool:
    """Never in a snapshot: the agent's own data and project file, and any .git."""
    return (not prefix and name in (DATA_DIR, PROJECT_FILE)) or name.casefold() == ".git"


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def read_regular(fd: int, name: str, inode: int | None, limit=MAX_FILE_BYTES) -> bytes | None:
    """A regular file's bytes (at most `limit` + 1: more means it is larger than `limit`),
    opened by `fd` without following a link; None when `name` is no longer that regular file
    (swapped, or not a file)."""
    try:
        handle = os.open(name, READ_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.ENXIO):  # swapped, gone
            return None
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or (inode is not None and info.st_ino != inode):
            return None
        chunks, size = [], 0
        while size <= limit:  # never by its size: it may change while it is read
            chunk = os.read(handle, min(CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(handle)


def resolve_head(git_fd: int) -> str | None:
    """The commit a repository's HEAD names (its .git open as `git_fd`), or None."""
    head = (read_regular(git_fd, "HEAD", None, 4096) or b"").decode(errors="replace").strip()
    if not head.startswith("ref: "):
        return head if _is_sha(head) else None
    ref = head[5:].strip()
    if ref.startswith("refs/") and ".." not in ref.split("/"):
        with contextlib.suppress(OSError):
            loose = _read_path(git_fd, ref)
            if loose and _is_sha(loose.strip()):
                return loose.strip()
    packed = (_read_path(git_fd, "packed-refs") or "").splitlines()
    for line in packed:
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _is_sha(sha):
            return sha
    return None


def _read_path(fd: int, path: str) -> str | None:
    parts = path.split("/")
    fds = []
    try:
        for part in parts[:-1]:
            fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            fds.append(fd)
        data = read_regular(fd, parts[-1], None, 1 << 20)
    except OSError:
        return None
    finally:
        for opened in fds:
            os.close(opened)
    return data.decode(errors="replace") if data is not None else None


def _is_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)
