"""Workspace files for the web UI: a directory listing, previews and image uploads.

Every path is opened beneath the workspace by descriptor (`workspace.Workspace`), so `..`,
absolute paths and symlinks that lead outside are refused exactly as they are for the agent's
own tools, whatever a process in the sandbox swaps in meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO

from lmagent.core.workspace import PathError, Workspace, shown_path

MAX_ENTRIES = 2000
PREVIEW_BYTES = 512 * 1024
UPLOAD_DIR = "uploads"
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png", "png"),
    (b"\xff\xd8\xff", "image/jpeg", "jpg"),
    (b"GIF87a", "image/gif", "gif"),
    (b"GIF89a", "image/gif", "gif"),
)


class FileProblem(Exception):
    """A request about a file that cannot be served; `status` is the HTTP status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def sniff_image(head: bytes) -> tuple[str, str] | None:
    """(mime type, extension) when the bytes start like a PNG, JPEG, GIF or WebP image."""
    for signature, mime, ext in IMAGE_SIGNATURES:
        if head.startswith(signature):
            return mime, ext
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp", "webp"
    return None


@contextlib.contextmanager
def _refusals(workspace: Workspace) -> Iterator[None]:
    """PathError and OSError as FileProblem with the HTTP status that fits."""
    try:
        yield
    except PathError as exc:
        raise FileProblem(str(exc).replace(str(workspace.root), "the workspace"), 403) from None
    except (FileNotFoundError, NotADirectoryError):
        raise FileProblem("not found", 404) from None
    except OSError as exc:
        raise FileProblem(f"cannot open it: {exc.strerror or exc}", 400) from None


def list_directory(workspace: Workspace, path: str | None) -> dict:
    """One level of the tree: directories first, then files, names sorted case-insensitively."""
    with _refusals(workspace):
        info, _ = workspace.stat(path or ".")
        if info is None:
            raise FileProblem("no such directory", 404)
        if not stat.S_ISDIR(info.st_mode):
            raise FileProblem("not a directory", 400)
        fd, rel = workspace.open_dir(path or ".")
    try:
        with os.scandir(fd) as scan:
            entries = [_entry(workspace, rel, entry) for entry in scan]
    finally:
        os.close(fd)
    entries.sort(key=lambda e: (e["type"] != "dir", e["name"].casefold()))
    listed = entries[:MAX_ENTRIES]
    return {"path": shown_path(rel), "entries": listed, "truncated": len(entries) > MAX_ENTRIES}


def _entry(workspace: Workspace, folder: str, entry: os.DirEntry) -> dict:
    rel = entry.name if folder == "." else f"{folder}/{entry.name}"
    item = {"name": shown_path(entry.name), "path": shown_path(rel)}
    try:
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            info, _ = workspace.stat(rel)  # followed inside the workspace only
    except PathError:
        return {**item, "type": "outside"}  # a link leading out (or protected): never opened
    except OSError:
        info = None
    if info is None:
        return {**item, "type": "broken"}
    if stat.S_ISDIR(info.st_mode):
        return {**item, "type": "dir"}
    return {**item, "type": "file", "size": info.st_size}


def _open_file(workspace: Workspace, path: str | None) -> tuple[BinaryIO, str]:
    """(open handle, canonical path) of a regular file."""
    if not path:
        raise FileProblem("path is required", 400)
    with _refusals(workspace):
        fd, rel = workspace.open(path)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileProblem("not a file", 400)
    return os.fdopen(fd, "rb"), rel


def describe_file(workspace: Workspace, path: str | None) -> dict:
    """What the page needs to preview a file: text content, or how to show it raw."""
    handle, rel = _open_file(workspace, path)
    with handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(PREVIEW_BYTES)
    name = PurePosixPath(rel).name
    info = {"path": shown_path(rel), "name": shown_path(name), "size": size}
    image = sniff_image(head)
    if image:
        return {**info, "kind": "image", "mime": image[0]}
    if b"\x00" in head[:8192]:
        return {**info, "kind": "binary"}
    text = head.decode("utf-8", errors="replace")
    kind = "html" if PurePosixPath(name).suffix.lower() in HTML_SUFFIXES else "text"
    return {**info, "kind": kind, "content": text, "truncated": size > len(head)}


@dataclass
class RawFile:
    handle: BinaryIO  # open, positioned at the start; the response closes it
    mimetype: str
    sandboxed: bool  # served under the sandbox CSP (may be a document)


def raw_file(workspace: Workspace, path: str | None) -> RawFile:
    """A file to send as it is: images by their content, HTML as a sandboxed document,
    anything else as plain text (never as something the browser would run)."""
    handle, rel = _open_file(workspace, path)
    image = sniff_image(handle.read(16))
    handle.seek(0)
    if image:
        return RawFile(handle, image[0], False)
    if PurePosixPath(rel).suffix.lower() in HTML_SUFFIXES:
        return RawFile(handle, "text/html; charset=utf-8", True)
    return RawFile(handle, "text/plain; charset=utf-8", True)


def save_upload(workspace: Workspace, filename: str, data: bytes) -> dict:
    """Store an image under <workspace>/uploads/ with the extension its content shows."""
    image = sniff_image(data[:16])
    if image is None:
        raise FileProblem("only PNG, JPEG, GIF or WebP images can be uploaded", 415)
    mime, ext = image
    stem = PurePosixPath((filename or "").replace("\\", "/")).stem
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-")[:40] or "image"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        suffix = f"-{attempt}" if attempt else ""
        with _refusals(workspace), contextlib.suppress(FileExistsError):
            rel = workspace.create(f"{UPLOAD_DIR}/{stamp}-{stem}{suffix}.{ext}", data)
            return {"path": rel, "mime": mime, "size": len(data)}
    raise FileProblem("could not pick a free file name", 500)
