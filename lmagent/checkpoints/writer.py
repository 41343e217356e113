"""Writing a restore into the workspace: all or nothing, never through a symbolic link.

Every folder is opened from the workspace root one component at a time with `O_NOFOLLOW |
O_DIRECTORY`, relative to its parent's descriptor, and every file is created, renamed or removed
relative to the descriptor of its folder (openat, symlinkat, renameat, unlinkat, mkdirat). A
sandboxed process that swaps a folder for a link to a host folder makes an open fail (ELOOP or
ENOTDIR): the restore then rolls back; it can never write outside.

The order makes it all or nothing:
1. read every content from the object store (a missing object stops it here);
2. check the free space against the bytes to write;
3. stage each new content beside its target under a temporary name (in the deepest folder of
   its path that exists now; a full disk stops it here, the staged files are removed);
4. swap: move each file to be replaced or removed aside (renamed to a temporary name at the
   top of the workspace, not deleted), remove the folders that become empty, make the folders
   needed, rename each staged file into place;
5. on any failure, undo step 4 in reverse (renames back, folders made again or removed), so the
   files are exactly as before; otherwise remove what was moved aside.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import secrets
import stat

from lmagent.checkpoints.objects import EXECUTABLE, GITLINK, LINK, MissingObject, ObjectStore
from lmagent.core.workspace import DATA_DIR, DIR_FLAGS, PROJECT_FILE

SPARE_BYTES = 1 << 20  # free space left over after a restore, beyond what it writes
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class RestoreFailed(Exception):
    """The restore did not happen; `state` says exactly what the files are like now."""

    def __init__(self, cause: str, untouched: bool, stuck: list[str] | None = None):
        self.cause, self.untouched, self.stuck = cause, untouched, stuck or []
        if untouched:
            state = "every file is exactly as it was before the restore"
        else:
            state = f"these could not be put back as they were: {', '.join(self.stuck[:10])}"
        super().__init__(f"{cause}; {state}")


class Folders:
    """Descriptors of workspace folders by path ("" = the root), each opened by its parent's."""

    def __init__(self, root):
        self.fds = {"": os.open(root, DIR_FLAGS)}

    def open(self, prefix: str) -> int:
        """The folder `prefix` ("a/b"); OSError when missing or not a real folder. Opened from
        its deepest folder already open, one component at a time (no recursion on depth)."""
        missing = []
        while prefix not in self.fds:
            prefix, _, name = prefix.rpartition("/")
            missing.append(name)
        for name in reversed(missing):
            child = f"{prefix}/{name}" if prefix else name
            self.fds[child] = os.open(name, DIR_FLAGS, dir_fd=self.fds[prefix])
            prefix = child
        return self.fds[prefix]

    def deepest(self, prefix: str) -> str:
        """The deepest folder on the way to `prefix` that exists as a real folder now."""
        reached = ""
        for part in prefix.split("/") if prefix else []:
            step = f"{reached}/{part}" if reached else part
            try:
                self.open(step)
            except OSError:
                break
            reached = step
        return reached

    def forget(self, prefix: str) -> None:
        for known in [p for p in self.fds if p == prefix or p.startswith(prefix + "/")]:
            os.close(self.fds.pop(known))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def apply(root, store: ObjectStore, changes: dict[str, tuple[str, str] | None]) -> None:
    """Make each path hold its (mode, blob) or be removed (None); RestoreFailed otherwise."""
    for path in changes:
        _check_path(path)
    changes = {p: e for p, e in changes.items() if not (e and e[0] == GITLINK)}
    contents = _read_all(store, changes)
    _raise_fd_limit()
    folders = Folders(root)
    try:
        _check_space(folders.fds[""], sum(len(c) for c in contents.values()))
        _Swap(folders, changes, contents).run()
    finally:
        folders.close()


def _check_path(path: str) -> None:
    parts = path.split("/")
    bad = any(p in ("", ".", "..") or p.casefold() == ".git" for p in parts)
    if bad or parts[0] in (DATA_DIR, PROJECT_FILE):
        raise RestoreFailed(f"the checkpoint names a path it may not ({path!r})", True)


def _read_all(store: ObjectStore, changes: dict) -> dict[str, bytes]:
    contents = {}
    for path, entry in changes.items():
        if entry is not None:
            try:
                contents[path] = store.read_blob(entry[1], recent=False)
            except MissingObject as exc:
                raise RestoreFailed(
                    f"the checkpoint's copy of {path} is missing ({exc}: the checkpoint history "
                    "was damaged)",
                    True,
                ) from exc
    return contents


def _check_space(root_fd: int, needed: int) -> None:
    info = os.fstatvfs(root_fd)
    free = info.f_bavail * info.f_frsize
    if needed + SPARE_BYTES > free:
        mb = 1024 * 1024
        raise RestoreFailed(
            f"not enough free space: the restore writes {needed / mb:.1f} MB and "
            f"{free / mb:.1f} MB are free; free some space and restore again",
            True,
        )


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _Swap:
    """Stage, swap and (on failure) roll back; the journal lists what step 4 did."""

    def __init__(self, folders: Folders, changes: dict, contents: dict[str, bytes]):
        self.folders, self.changes, self.contents = folders, changes, contents
        self.token = secrets.token_hex(4)
        self.staged: dict[str, tuple[str, str]] = {}  # path -> (folder, temporary name)
        self.journal: list[tuple] = []

    def temp_name(self, kind: str, n: int) -> str:
        return f".lmagent-restore-{self.token}-{kind}{n}"

    def run(self) -> None:
        try:
            self.stage()
        except OSError as exc:
            self.unstage()
            cause = f"the restore could not write ({exc.strerror or exc})"
            raise RestoreFailed(cause, True) from exc
        try:
            self.swap()
        except OSError as exc:
            stuck = self.roll_back()
            self.unstage()
            cause = f"the restore stopped part way ({exc.strerror or exc})"
            cause += "" if stuck else " and was rolled back"
            raise RestoreFailed(cause, not stuck, stuck) from exc
        self.finish()

    # ------------------------------------------------------------------ 3. staging

    def stage(self) -> None:
        for n, (path, data) in enumerate(sorted(self.contents.items())):
            folder = self.folders.deepest(path.rpartition("/")[0])
            name = self.temp_name("s", n)
            fd = self.folders.open(folder)
            mode = self.changes[path][0]
            if mode == LINK:
                os.symlink(data, name, dir_fd=fd)
            else:
                self.staged[path] = (folder, name)  # before writing: removed if the write fails
                _write_new(fd, name, data, 0o755 if mode == EXECUTABLE else 0o644)
            self.staged[path] = (folder, name)

    def unstage(self) -> None:
        for folder, name in self.staged.values():
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.folders.open(folder))

    # ------------------------------------------------------------------ 4. swapping

    def swap(self) -> None:
        paths = sorted(self.changes, key=lambda p: (-p.count("/"), p))
        for n, path in enumerate(paths):
            self.move_aside(path, n)
        self.remove_emptied(paths)
        for path in sorted(self.staged):
            parent, _, name = path.rpartition("/")
            self.make_folders(parent)
            folder, temp = self.staged.pop(path)
            os.rename(temp, name, src_dir_fd=self.folders.open(folder),
                      dst_dir_fd=self.folders.open(parent))  # fmt: skip
            self.journal.append(("placed", parent, name, folder, temp))

    def move_aside(self, path: str, n: int) -> None:
        parent, _, name = path.rpartition("/")
        try:
            fd = self.folders.open(parent)
        except OSError as exc:
            if exc.errno == errno.ENOENT or self.replaced_above(path):
                return  # nothing there to move (a link or file on the way goes itself)
            raise
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            return  # a folder where a file goes: emptied below, or the swap fails
        backup = self.temp_name("b", n)  # at the top, so its folder can be removed if emptied
        os.rename(name, backup, src_dir_fd=fd, dst_dir_fd=self.folders.open(""))
        self.journal.append(("moved", parent, name, backup))

    def replaced_above(self, path: str) -> bool:
        parts = path.split("/")
        return any("/".join(parts[:i]) in self.changes for i in range(1, len(parts)))

    def remove_emptied(self, paths: list[str]) -> None:
        """Remove folders left empty by the removals (git keeps no empty folder), deepest first;
        a folder where a file must go has to be empty by now."""
        candidates = set()
        for path in paths:
            if self.changes[path] is None:
                parts = path.split("/")[:-1]
                candidates |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
        candidates |= {p for p in self.staged if self._is_folder(p)}
        for folder in sorted(candidates, key=lambda p: (-p.count("/"), p)):
            parent, _, name = folder.rpartition("/")
            try:
                fd = self.folders.open(parent)
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if folder in self.staged:
                    raise  # a file must go where a folder stays
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR):
                    continue
                raise
            self.folders.forget(folder)
            self.journal.append(("rmdir", parent, name, stat.S_IMODE(mode)))

    def _is_folder(self, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        try:
            info = os.stat(name, dir_fd=self.folders.open(parent), follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISDIR(info.st_mode)

    def make_folders(self, prefix: str) -> None:
        reached = ""
        for part in prefix.split("/") if prefix else []:
            step = f"{reached}/{part}" if reached else part
            try:
                self.folders.open(step)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=self.folders.open(reached))
                self.journal.append(("mkdir", reached, part))
                self.folders.open(step)
            reached = step

    # ------------------------------------------------------------------ 5. rolling back

    def roll_back(self) -> list[str]:
        """Undo the swap in reverse; the paths that could not be put back."""
        stuck = []
        for action, parent, name, *rest in reversed(self.journal):
            path = f"{parent}/{name}" if parent else name
            try:
                fd = self.folders.open(parent)
                if action == "moved":
                    os.rename(rest[0], name, src_dir_fd=self.folders.open(""), dst_dir_fd=fd)
                elif action == "placed":
                    os.unlink(name, dir_fd=fd)
                elif action == "mkdir":
                    self.folders.forget(path)
                    os.rmdir(name, dir_fd=fd)
                else:
                    os.mkdir(name, rest[0], dir_fd=fd)
            except OSError:
                stuck.append(path)
        self.journal.clear()
        return stuck

    def finish(self) -> None:
        for action, _parent, _name, *rest in self.journal:
            if action == "moved":
                with contextlib.suppress(OSError):
                    os.unlink(rest[0], dir_fd=self.folders.open(""))


def _write_new(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    fd = os.open(name, _CREATE, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
