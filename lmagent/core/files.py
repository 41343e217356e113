"""Files the agent keeps for itself: atomic and durable writes, JSON files, OS file locks."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

# --------------------------------------------------------------------------- files and paths


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def atomic_write(path: Path, data: str | bytes, durable: bool = True) -> None:
    """Write a file so readers see the old or the new content, never a mix. With durable=False
    the data is not forced to disk: a killed process still leaves the whole new file, but a
    power cut may bring back the old one (for files that are cheap to be one step behind)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def move_durably(source: Path, target: Path) -> None:
    """os.replace, then force both directory entries to disk: after a power cut the file is
    in one of the two places, never back in the old one once this returned."""
    os.replace(source, target)
    _fsync_dir(Path(target).parent)
    if Path(source).parent != Path(target).parent:
        _fsync_dir(Path(source).parent)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: Path, data: object, durable: bool = True) -> None:
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=2), durable)


def read_json(path: Path, default: object = None) -> object:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


# --------------------------------------------------------------------------- OS file locks


def try_lock(fd: int, shared: bool = False) -> bool:
    """Take an OS lock on an open file without waiting; False when someone else holds it.
    The kernel drops it when its holder dies, so a crash never leaves a stale lock."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def locked(path: Path, wait: float | None = None) -> Iterator[bool]:
    """Hold an exclusive lock on `path` for the block; yields False when `wait` seconds passed
    without getting it (None: wait as long as it takes). flock locks conflict between threads
    of one process too, since every call opens the file anew."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = None if wait is None else time.monotonic() + wait
    try:
        while not (got := try_lock(fd)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        try:
            yield got
        finally:
            if got:
                unlock(fd)
    finally:
        os.close(fd)
