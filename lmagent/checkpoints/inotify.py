"""Which workspace folders changed since the last look: Linux inotify through ctypes.

Each folder of the workspace is watched through the descriptor the snapshot opened it by
(`/proc/self/fd/N`), so a watch is always on the folder that was walked, never on whatever a
path names at that moment. Events of writes made through a bind mount (a sandbox) reach the
host's watches: inotify follows inodes, not mounts. When inotify is missing, its queue overflowed
or the watches ran out, `Watcher.changes` says so (None) and the caller walks the whole tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW = 0x400, 0x800, 0x2000, 0x4000
IN_IGNORED, IN_ONLYDIR, IN_ISDIR = 0x8000, 0x1000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)  # fmt: skip
RESTRUCTURED = IN_MOVE_SELF | IN_UNMOUNT | IN_Q_OVERFLOW  # the folder map is no longer right
HEADER = struct.Struct("iIII")
FIONREAD = 0x541B  # bytes waiting in the queue (the same number on x86_64 and aarch64)


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 (present?)
    except (OSError, AttributeError):
        return None
    return libc


LIBC = _libc()


class Watcher:
    """Watches on folders (by descriptor); `changes` drains what happened since the last call."""

    def __init__(self):
        self.fd = -1
        self.folders: dict[int, str] = {}  # watch descriptor -> folder path ("" = the root)
        self.broken = LIBC is None  # no inotify, or it failed: every look walks everything
        if not self.broken:
            self.fd = LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            self.broken = self.fd < 0

    def watch(self, dir_fd: int, rel: str) -> None:
        """Watch the folder open as `dir_fd`, known as `rel`."""
        if self.broken:
            return
        wd = LIBC.inotify_add_watch(self.fd, f"/proc/self/fd/{dir_fd}".encode(), MASK)
        if wd < 0:
            self.broken = True  # watches exhausted (ENOSPC) or no /proc: fall back to walks
            return
        self.folders[wd] = rel

    def changes(self) -> set[tuple[str, str]] | None:
        """(folder, name) pairs that changed since the last call; None when they cannot be
        told (walk everything) or a folder was moved (the folder map must be rebuilt).

        Only the events queued when the look begins are read: a process writing or renaming
        in a tight loop adds events as fast as they are read, and draining "until empty"
        would never end. What happens after this moment stays queued for the next look."""
        if self.broken:
            return None
        changed: set[tuple[str, str]] = set()
        left = self._queued()
        while left > 0:
            try:
                data = os.read(self.fd, min(left, 65536))
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.broken = True
                return None
            left -= len(data)
            if self._parse(data, changed):
                return None  # the caller walks everything with a new watcher
        return changed

    def _queued(self) -> int:
        """Bytes of events waiting to be read (FIONREAD)."""
        count = ctypes.c_int(0)
        if LIBC.ioctl(self.fd, FIONREAD, ctypes.byref(count)) < 0:
            return 1 << 30  # unknown: read until the queue is empty, at most this much
        return count.value

    def _parse(self, data: bytes, changed: set[tuple[str, str]]) -> bool:
        restructured = False
        at = 0
        while at < len(data):
            wd, mask, _cookie, size = HEADER.unpack_from(data, at)
            name = os.fsdecode(data[at + HEADER.size : at + HEADER.size + size].rstrip(b"\0"))
            at += HEADER.size + size
            if mask & RESTRUCTURED or (mask & IN_ISDIR and mask & (IN_MOVED_FROM | IN_MOVED_TO)):
                restructured = True
            elif mask & IN_IGNORED:
                self.folders.pop(wd, None)
            elif wd in self.folders and name:
                changed.add((self.folders[wd], name))
        return restructured

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = -1
        self.folders.clear()
