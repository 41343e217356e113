"""The workspace boundary, enforced by descriptor: no path operation can be led outside.

A path is never handed to the kernel whole. It is walked one component at a time from a
descriptor of the workspace root: each directory is opened relative to the previous one with
`O_NOFOLLOW | O_DIRECTORY`, and a symlink met on the way is read (`readlinkat`) and resolved the
same way — a relative target from the directory holding it, an absolute one from the root when
it names a place inside the workspace — or refused. The kernel therefore never follows a link
for us, so a process in the sandbox that swaps a directory with a symlink to a host directory
(`renameat2(RENAME_EXCHANGE)` in a loop) changes only which workspace entry we reach, never
whether we stay inside. Files are opened, created and renamed relative to the descriptor of
their parent found this way, with `O_NOFOLLOW` on the last component (a link swapped in at that
moment makes the open fail with ELOOP and the lookup is retried); directory walks go by
descriptor too (`Workspace.walk`). Lookups and walks go from an explicit stack holding at most
OPEN_FOLDERS descriptors (`_Chain`), so no tree the model makes, however deep, makes them recurse
or run out of descriptors. A name that is not UTF-8 is shown with \\xNN escapes (`shown_path`),
and a lookup finds it by what was shown.

It relies on the *at() system calls and `O_NOFOLLOW`/`O_DIRECTORY` (POSIX.1-2008: every Linux
and macOS); `openat2(RESOLVE_BENEATH)` is not needed. Where Python cannot pass `dir_fd` (Windows)
the file tools refuse to run rather than fall back to checking names.

Protection: `.lmagent/` and `.lmagent.md` are never written, and nothing under `.lmagent/` is
read except the folders in READABLE_DATA (images MCP tools returned, for the vision tool): the
agent's sessions, sub-agent briefs and results, and `mcp.json` (which may hold tokens) stay out
of the model's reach. The checks apply to the path as resolved, links included.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = ".lmagent"
PROJECT_FILE = ".lmagent.md"
PROTECTED_NAMES = (DATA_DIR, PROJECT_FILE)
READABLE_DATA = ("mcp_images",)  # folders of .lmagent/ the model may read
MAX_LINKS = 40  # as the kernel's own limit on links in one lookup
MAX_RETRIES = 50  # lookups retried when a link is swapped in under an open
MAX_PATH_BYTES = 4096  # as PATH_MAX: longer paths are refused, not walked
_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")  # a byte of a name shown_path wrote
OPEN_FOLDERS = 32  # descriptors a lookup or a walk holds at most, however deep it goes

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)  # no FIFO hangs


class PathError(ValueError):
    """A path the agent may not use; the message says why and what to do instead."""


class _Swapped(Exception):
    """The last component turned into a symlink under an open: look it up again."""


@dataclass
class Entry:
    """An entry found beneath the root: its parent's descriptor (owned), its name, its path."""

    parent: int
    name: str  # "." for the root itself
    rel: str  # canonical path relative to the root, "." for the root

    def close(self) -> None:
        os.close(self.parent)


class Workspace:
    """The only directory the agent may touch; every operation goes through a descriptor walk."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser().resolve()

    @property
    def data_dir(self) -> Path:
        return self.root / DATA_DIR

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)

    def relative(self, real: Path | str) -> str:
        """A host path inside the root as the workspace-relative form the model sees."""
        rel = Path(real).relative_to(self.root).as_posix()
        return rel or "."

    # ------------------------------------------------------------------ lookups

    def resolve(self, path: str, *, write: bool = False) -> str:
        """The canonical workspace-relative path (links inside resolved), or PathError."""
        entry = self.lookup(path, write=write)
        entry.close()
        return entry.rel

    def lookup(self, path: str, *, write: bool = False, make_parents: bool = False) -> Entry:
        """The entry `path` names (it may not exist yet), its parent open by descriptor.

        With make_parents, missing folders on the way are created. Raises PathError for a path
        outside the workspace or protected, OSError when a folder on the way is missing or not
        a folder.
        """
        parts = self._parts(path)
        self._check(os.path.normpath("/".join(parts)), path, write)  # plainly protected
        entry = _Walk(self, parts, path, write, make_parents).run()
        try:
            self._check(entry.rel, path, write)
        except PathError:
            entry.close()
            raise
        return entry

    def _parts(self, path: str) -> list[str]:
        if not isinstance(path, str) or not path.strip():
            raise PathError("path must be a non-empty string")
        if "\x00" in path:
            raise PathError("path contains a NUL byte")
        text = path.strip()
        if text.startswith("~"):
            raise PathError(
                f"'{path}' points into a home directory; use a path inside the workspace"
            )
        if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
            raise OSError(errno.ENAMETOOLONG, "path too long")
        if text.startswith("/"):
            inside = self._inside(text)
            if inside is None:
                raise self._outside(path)
            text = inside
        if os.path.normpath(text).split("/")[0] == "..":
            raise self._outside(path)  # plainly outside, whatever exists on the way
        return text.split("/")

    def _inside(self, absolute: str) -> str | None:
        """The part of an absolute path below the root, "." for the root, None when outside."""
        root = self.root.as_posix()
        normal = os.path.normpath(absolute)
        if normal == root:
            return "."
        if normal.startswith(root.rstrip("/") + "/"):
            return absolute[len(root) :].lstrip("/") or "."
        return None

    def _outside(self, path: str) -> PathError:
        return PathError(f"'{path}' is outside the workspace {self.root}; use a path inside it")

    def _check(self, rel: str, shown: str, write: bool) -> None:
        first, _, rest = rel.partition("/")
        if first.casefold() not in PROTECTED_NAMES:
            return
        if write:
            raise PathError(
                f"'{shown}' is the agent's own configuration (.lmagent/, .lmagent.md); "
                "it cannot be changed by the agent"
            )
        if first.casefold() == DATA_DIR and rest and rest.split("/")[0] not in READABLE_DATA:
            raise PathError(
                f"'{shown}' is the agent's own data (.lmagent/: sessions, settings); "
                "it cannot be read by the agent"
            )
        if first.casefold() == DATA_DIR and not rest:
            raise PathError(f"'{shown}' is the agent's own data folder; it cannot be listed")

    # ------------------------------------------------------------------ operations

    def open(self, path: str, flags: int = READ_FLAGS) -> tuple[int, str]:
        """(descriptor, canonical path) of an existing entry opened without following a link."""
        for _ in range(MAX_RETRIES):
            entry = self.lookup(path)
            try:
                return _open_last(entry, flags), entry.rel
            except _Swapped:
                continue
            finally:
                entry.close()
        raise PathError(f"'{path}' keeps changing under the agent; try again")

    def open_dir(self, path: str) -> tuple[int, str]:
        return self.open(path, DIR_FLAGS)

    def stat(self, path: str) -> tuple[os.stat_result | None, str]:
        """(lstat of the entry, canonical path); None when nothing is there."""
        entry = self.lookup(path)
        try:
            return _lstat(entry.parent, entry.name), entry.rel
        finally:
            entry.close()

    def write(self, path: str, payload: bytes, durable: bool = True) -> tuple[str, bool]:
        """Replace (or create) a file atomically; (canonical path, created)."""
        entry = self.lookup(path, write=True, make_parents=True)
        try:
            before = _lstat(entry.parent, entry.name)
            if before is not None and stat.S_ISDIR(before.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory")
            mode = stat.S_IMODE(before.st_mode) if _is_file(before) else 0o644
            _replace_at(entry.parent, entry.name, payload, mode, durable)
            return entry.rel, before is None
        finally:
            entry.close()

    def create(self, path: str, payload: bytes) -> str:
        """Create a new file (never replacing one); FileExistsError when the name is taken."""
        entry = self.lookup(path, write=True, make_parents=True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
            fd = os.open(entry.name, flags, 0o644, dir_fd=entry.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
            return entry.rel
        finally:
            entry.close()

    def mkdir(self, path: str) -> tuple[str, bool]:
        """Create a folder and its parents; (canonical path, created)."""
        entry = self.lookup(path, write=True, make_parents=True)
        try:
            if entry.name == ".":
                return entry.rel, False
            try:
                os.mkdir(entry.name, 0o777, dir_fd=entry.parent)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(entry.name, dir_fd=entry.parent).st_mode):
                    raise
                return entry.rel, False
            return entry.rel, True
        finally:
            entry.close()

    def read_bytes(self, path: str, limit: int) -> tuple[bytes, str]:
        """The content of a regular file of at most `limit` bytes; (bytes, canonical path)."""
        fd, rel = self.open(path)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
            if info.st_size > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes")
            return handle.read(limit + 1)[:limit], rel

    def walk(
        self, start: str, skip: frozenset[str] = frozenset(), max_depth: int | None = None
    ) -> Iterator[WalkItem]:
        """Every entry below `start` (not itself), depth first, names sorted, by descriptor.

        Folders reached through a symlink are not entered; a link to a file inside the
        workspace is listed (its kind resolved by a lookup), one leading outside is left out.
        The items' descriptors are valid only until the next item is taken.
        """
        fd, rel = self.open_dir(start)
        yield from _walk_fd(self, fd, "" if rel == "." else rel + "/", skip, max_depth)


@dataclass
class WalkItem:
    parent: int  # descriptor of the folder holding it (borrowed)
    name: str
    rel: str
    is_dir: bool
    is_link: bool = False


def _walk_fd(
    ws: Workspace, fd: int, prefix: str, skip: frozenset[str], max_depth: int | None
) -> Iterator[WalkItem]:
    """A folder's own entries first, then its subfolders' in turn, from an explicit stack: a
    tree of any depth is walked with at most OPEN_FOLDERS descriptors and no recursion."""
    chain = _Chain(fd)
    try:
        subdirs = yield from _listed(ws, fd, prefix, skip, max_depth is None or max_depth > 1)
        todo = [list(reversed(subdirs))]  # per folder of the chain: subfolders still to enter
        while todo:
            if not todo[-1]:
                todo.pop()
                if todo:
                    chain.up()
                continue
            name, rel = todo[-1].pop()
            try:
                chain.enter(name)
            except OSError:
                continue  # swapped for a link or removed since it was listed: not entered
            deeper = max_depth is None or len(todo) < max_depth - 1
            subdirs = yield from _listed(ws, chain.top(), rel + "/", skip, deeper)
            todo.append(list(reversed(subdirs)))
    finally:
        chain.close()


def _listed(
    ws: Workspace, fd: int, prefix: str, skip: frozenset[str], deeper: bool
) -> Iterator[WalkItem]:
    """Yield a folder's entries (names sorted); return its subfolders to enter when `deeper`."""
    try:
        with os.scandir(fd) as listing:
            entries = sorted((e.name, _kind(e)) for e in listing if not _hidden(prefix, e, skip))
    except OSError:
        return []  # a folder removed or unreadable while walking
    subdirs = []
    for name, kind in entries:
        rel = prefix + name
        if kind == "dir":
            yield WalkItem(fd, name, rel, True)
            if deeper:
                subdirs.append((name, rel))
        elif kind == "file":
            yield WalkItem(fd, name, rel, False)
        elif kind == "link":
            linked = _link_kind(ws, rel)
            if linked is not None:
                yield WalkItem(fd, name, rel, linked, is_link=True)
    return subdirs


def _hidden(prefix: str, entry: os.DirEntry, skip: frozenset[str]) -> bool:
    """Left out of walks: the skipped names, and the agent's data folder however it is named."""
    return entry.name in skip or (not prefix and entry.name.casefold() == DATA_DIR)


def _kind(entry: os.DirEntry) -> str:
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        return "file" if entry.is_file(follow_symlinks=False) else "other"
    except OSError:
        return "other"


def _link_kind(ws: Workspace, rel: str) -> bool | None:
    """is_dir of what a link inside the walk leads to; None when outside, protected or odd."""
    try:
        info, _ = ws.stat(rel)
    except (PathError, OSError):
        return None
    if info is None or not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return None
    return stat.S_ISDIR(info.st_mode)


# --------------------------------------------------------------------------- the walk


class _Walk:
    """One lookup: the chain of folders entered from the root, the components still to go."""

    def __init__(self, ws: Workspace, parts: list[str], shown: str, write: bool, make: bool):
        self.ws, self.shown, self.write, self.make = ws, shown, write, make
        self.pending = list(reversed(parts))
        self.chain: _Chain | None = None
        self.links = 0

    def run(self) -> Entry:
        self._restart_at_root()
        try:
            while self.pending:
                part = self.pending.pop()
                if part in ("", "."):
                    continue
                if part == "..":
                    self._up()
                elif self._is_last():
                    entry = self._last(part)
                    if entry is not None:
                        return entry
                else:
                    self._enter(part)
            return self._root_entry()
        finally:
            self.chain.close()

    def _is_last(self) -> bool:
        return all(p in ("", ".") for p in self.pending)

    def _restart_at_root(self) -> None:
        if self.chain is not None:
            self.chain.close()
        self.chain = _Chain(os.open(self.ws.root, DIR_FLAGS))

    def _up(self) -> None:
        if not self.chain.names:
            raise self.ws._outside(self.shown)
        self.chain.up()

    def _last(self, part: str) -> Entry | None:
        part = _on_disk(self.chain.top(), part)
        target = _readlink(self.chain.top(), part)
        if target is not None:
            self._follow(target)
            return None
        rel = "/".join([*self.chain.names, part])
        return Entry(self.chain.take(), part, rel)

    def _root_entry(self) -> Entry:
        """The walk ended on a folder: name it by its parent, or the root by itself."""
        names = self.chain.names
        if not names:
            return Entry(self.chain.take(), ".", ".")
        name, rel = names[-1], "/".join(names)
        self.chain.up()
        return Entry(self.chain.take(), name, rel)

    def _enter(self, part: str) -> None:
        if self.write and not self.chain.names:
            self.ws._check(part, self.shown, True)  # refused before anything is made below it
        part = _on_disk(self.chain.top(), part)
        try:
            self.chain.enter(part)
        except OSError as exc:
            target = _readlink(self.chain.top(), part)
            if target is not None:
                self._follow(target)
                return
            if exc.errno == errno.ENOENT and self.make:
                self._make(part)
                return
            raise

    def _make(self, part: str) -> None:
        if self.write:
            self.ws._check("/".join([*self.chain.names, part]), self.shown, True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o777, dir_fd=self.chain.top())
        self.pending.append(part)  # enter it (or whatever now stands there) on the next turn

    def _follow(self, target: str) -> None:
        self.links += 1
        if self.links > MAX_LINKS:
            raise OSError(errno.ELOOP, f"too many symbolic links in '{self.shown}'")
        if target.startswith("/"):
            inside = self.ws._inside(target)
            if inside is None:
                raise PathError(
                    f"'{self.shown}' leads outside the workspace (a symlink points to {target}); "
                    "use a path inside it"
                )
            self._restart_at_root()
            target = inside
        self.pending.extend(reversed(target.split("/")))


class _Chain:
    """Folders entered one inside the other from a first descriptor, at most OPEN_FOLDERS of them
    open at once: as it deepens the outermost are let go (the first is kept), and when one is
    the innermost again it is opened again from the first, name by name with O_NOFOLLOW as it
    was entered. The open ones are always the first and the innermost few. Every descriptor it
    holds is its own; `take` hands the innermost one over."""

    def __init__(self, fd: int):
        self.fds: list[int | None] = [fd]
        self.names: list[str] = []  # of the folders after the first
        self.held = 1

    def top(self) -> int:
        """The innermost folder's descriptor (opened again if it was let go)."""
        if self.fds[-1] is None:
            self._reopen()
        return self.fds[-1]

    def enter(self, name: str) -> None:
        """Step into the subfolder `name` (never a link); OSError when it cannot be entered."""
        self.fds.append(os.open(name, DIR_FLAGS, dir_fd=self.top()))
        self.names.append(name)
        self.held += 1
        if self.held > OPEN_FOLDERS:
            outermost = len(self.fds) - self.held + 1
            os.close(self.fds[outermost])
            self.fds[outermost] = None
            self.held -= 1

    def up(self) -> None:
        fd = self.fds.pop()
        self.names.pop()
        if fd is not None:
            os.close(fd)
            self.held -= 1

    def take(self) -> int:
        """The innermost folder's descriptor, no longer the chain's to close."""
        fd = self.top()
        self.fds.pop()
        self.held -= 1
        if self.names:
            self.names.pop()
        return fd

    def close(self) -> None:
        for fd in self.fds:
            if fd is not None:
                os.close(fd)
        self.fds, self.held = [], 0

    def _reopen(self) -> None:
        """Open the folders after the first again; the innermost of them stay open, for the
        steps back up that follow."""
        path: list[int] = []
        try:
            for name in self.names:
                path.append(os.open(name, DIR_FLAGS, dir_fd=path[-1] if path else self.fds[0]))
                if len(path) >= OPEN_FOLDERS:
                    os.close(path.pop(0))
        except OSError:
            for fd in path:
                os.close(fd)
            raise
        self.fds[len(self.fds) - len(path) :] = path
        self.held += len(path)


def shown_path(path: str) -> str:
    """A path as text the model, the logs and the browser can carry: the bytes of a name that
    are not UTF-8 (kept by Python as lone surrogates) written as \\xNN escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _on_disk(dir_fd: int, name: str) -> str:
    """The entry `name` means in the folder: itself, or, when only that exists, the name whose
    shown_path it is (the escapes read back as the bytes they stand for)."""
    if "\\x" not in name or _lstat(dir_fd, name) is not None:
        return name
    raw = _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m[1], 16)), name)
    return raw if raw != name and _lstat(dir_fd, raw) is not None else name


def _readlink(dir_fd: int, name: str) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None  # not a link (EINVAL), or nothing there


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _is_file(info: os.stat_result | None) -> bool:
    return info is not None and stat.S_ISREG(info.st_mode)


def _open_last(entry: Entry, flags: int) -> int:
    try:
        return os.open(entry.name, flags | _NOFOLLOW | _CLOEXEC, dir_fd=entry.parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _readlink(entry.parent, entry.name):
            raise _Swapped from None
        raise


def _replace_at(dir_fd: int, name: str, payload: bytes, mode: int, durable: bool) -> None:
    """Write a temporary file beside `name` and rename it over `name`, all by `dir_fd`."""
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            with contextlib.suppress(OSError):
                os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
