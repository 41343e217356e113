"""The shadow repository's object store, written and read in-process.

Git's object format is small and fixed: an object is `zlib("<kind> <length>\\0" + data)`, stored
at `objects/<first 2 hex>/<other 38 hex>` under the sha1 of the uncompressed bytes. A tree is a
list of `<octal mode> <name>\\0<20-byte sha>` entries sorted as git sorts them (a folder's name as
if it ended in "/"). Writing them here costs a hash and a small file per new object, against a
process start per git command. Objects packed by `git repack` are read with one long-lived
`git cat-file --batch`; the object store is in `.lmagent/`, which no sandboxed process can see.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import subprocess
import threading
import zlib
from pathlib import Path

FILE, EXECUTABLE, LINK, FOLDER, GITLINK = "100644", "100755", "120000", "40000", "160000"
RECENT_BLOBS, RECENT_BYTES = 64, 256 * 1024  # blobs kept in memory for the next diffs
BLOCK = 4096  # what a small file takes on disk at least
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(32), 127)}


class MissingObject(Exception):
    """An object the shadow repository should hold is gone (its history was damaged)."""


class ObjectStore:
    """Loose objects written and read by this process; packed ones read through git."""

    def __init__(self, git_dir: Path, env: dict[str, str]):
        self.objects = git_dir / "objects"
        self.env = env
        self.present: set[str] = set()  # written or seen by this process
        self.trees: dict[str, dict[str, tuple[str, str]]] = {}  # parsed trees (immutable)
        self.recent: dict[str, bytes] = {}  # small blobs written lately (the next diff's)
        self.batch: subprocess.Popen | None = None
        self.batch_lock = threading.Lock()  # one request and answer at a time
        self.written = 0  # bytes of disk the loose objects written by this process take

    # ------------------------------------------------------------------ writing

    def write(self, kind: str, data: bytes) -> str:
        digest = hashlib.sha1(f"{kind} {len(data)}\0".encode())
        digest.update(data)
        sha = digest.hexdigest()
        if sha not in self.present:
            path = self.objects / sha[:2] / sha[2:]
            if not path.exists():
                packed = zlib.compress(f"{kind} {len(data)}\0".encode() + data, 1)
                self._write_loose(path, packed)
                self.written += -(-len(packed) // BLOCK) * BLOCK
            self.present.add(sha)
        return sha

    def _write_loose(self, path: Path, packed: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.parent / f"tmp_{secrets.token_hex(6)}"
        with open(staged, "xb") as handle:
            handle.write(packed)
        try:
            os.replace(staged, path)
        except OSError:
            with contextlib.suppress(OSError):
                staged.unlink()
            raise

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """A tree of `name -> (mode, sha)` entries; its sha."""
        sha = self.write("tree", encode_tree(entries))
        self.trees[sha] = dict(entries)
        return sha

    def write_blob(self, data: bytes) -> str:
        """A file's content; kept in memory a while when small (diffs read it next)."""
        sha = self.write("blob", data)
        if len(data) <= RECENT_BYTES:
            self.recent[sha] = data
            while len(self.recent) > RECENT_BLOBS:
                del self.recent[next(iter(self.recent))]
        return sha

    # ------------------------------------------------------------------ reading

    def read(self, sha: str) -> tuple[str, bytes]:
        """(kind, data) of an object, or MissingObject."""
        try:
            packed = (self.objects / sha[:2] / sha[2:]).read_bytes()
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return self._read_packed(sha)
        except OSError as exc:
            raise MissingObject(f"object {sha[:12]} cannot be read: {exc.strerror}") from exc
        try:
            raw = zlib.decompress(packed)
            header, _, data = raw.partition(b"\0")
            kind, size = header.decode().split(" ")
        except (zlib.error, ValueError, UnicodeDecodeError) as exc:
            raise MissingObject(f"object {sha[:12]} is damaged") from exc
        if int(size) != len(data):
            raise MissingObject(f"object {sha[:12]} is damaged")
        return kind, data

    def read_blob(self, sha: str, recent: bool = True) -> bytes:
        """A blob's bytes (recent=False: from the repository only, as a restore wants)."""
        if recent and sha in self.recent:
            return self.recent[sha]
        kind, data = self.read(sha)
        if kind != "blob":
            raise MissingObject(f"object {sha[:12]} is a {kind}, not a file's content")
        return data

    def read_tree(self, sha: str) -> dict[str, tuple[str, str]]:
        if sha not in self.trees:
            kind, data = self.read(sha)
            if kind != "tree":
                raise MissingObject(f"object {sha[:12]} is a {kind}, not a folder")
            self.trees[sha] = decode_tree(data)
        return self.trees[sha]

    def files(self, tree: str) -> dict[str, tuple[str, str]]:
        """Every file, link and gitlink of a tree: `path -> (mode, sha)` (walked from a stack,
        so a tree of any depth)."""
        found: dict[str, tuple[str, str]] = {}
        stack = [(tree, "")]
        while stack:
            sha, prefix = stack.pop()
            for name, (mode, entry) in self.read_tree(sha).items():
                if mode == FOLDER:
                    stack.append((entry, f"{prefix}{name}/"))
                else:
                    found[prefix + name] = (mode, entry)
        return found

    def commit_tree(self, commit: str) -> str:
        kind, data = self.read(commit)
        if kind != "commit" or not data.startswith(b"tree "):
            raise MissingObject(f"object {commit[:12]} is not a checkpoint")
        return data[5:45].decode()

    def _read_packed(self, sha: str) -> tuple[str, bytes]:
        with self.batch_lock:
            return self._ask_batch(sha)

    def _ask_batch(self, sha: str) -> tuple[str, bytes]:
        batch = self._batch()
        try:
            batch.stdin.write(sha.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if len(header) != 3:
                raise MissingObject(f"object {sha[:12]} is missing")
            data = batch.stdout.read(int(header[2]) + 1)[:-1]
        except (OSError, ValueError) as exc:
            self._close_batch()
            raise MissingObject(f"object {sha[:12]} cannot be read") from exc
        return header[1].decode(), data

    def _batch(self) -> subprocess.Popen:
        if self.batch is None or self.batch.poll() is not None:
            if not self.objects.is_dir():
                raise MissingObject("the checkpoint history is gone")
            self.batch = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                cwd=self.objects.parent,
            )
        return self.batch

    def close(self) -> None:
        with self.batch_lock:
            self._close_batch()

    def _close_batch(self) -> None:
        if self.batch is not None:
            with contextlib.suppress(OSError):
                self.batch.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.batch.wait(5)
            if self.batch.poll() is None:
                self.batch.kill()
                self.batch.wait()
            self.batch.stdout.close()
            self.batch = None


def shown(path: str) -> str:
    """A path as a person or the model is shown it: bytes that are not UTF-8 (a name read from
    the disk keeps them as surrogate escapes) and control characters written as `\\xNN`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace").translate(_CONTROLS)


def encode_tree(entries: dict[str, tuple[str, str]]) -> bytes:
    def key(name: str) -> bytes:
        raw = os.fsencode(name)
        return raw + b"/" if entries[name][0] == FOLDER else raw

    parts = []
    for name in sorted(entries, key=key):
        mode, sha = entries[name]
        parts.append(b"%s %s\0%s" % (mode.encode(), os.fsencode(name), bytes.fromhex(sha)))
    return b"".join(parts)


def decode_tree(data: bytes) -> dict[str, tuple[str, str]]:
    entries: dict[str, tuple[str, str]] = {}
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode = data[at:space].decode()
        entries[os.fsdecode(data[space + 1 : nul])] = (mode, data[nul + 1 : nul + 21].hex())
        at = nul + 21
    return entries


def commit_bytes(tree: str, parents: list[str], message: str, when: int) -> bytes:
    who = f"lmagent <lmagent@localhost> {when} +0000"
    lines = [f"tree {tree}", *(f"parent {parent}" for parent in parents)]
    lines += [f"author {who}", f"committer {who}", "", message, ""]
    return "\n".join(lines).encode()
