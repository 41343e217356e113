"""Durable sessions: the append-only transcript, its metadata and run state on disk, and the
store that creates, opens, lists and locks them under `<workspace>/.lmagent/sessions/`."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from agent_core import (
    STATUS_RUNNING,
    Workspace,
    estimate_tokens,
    locked,
    read_json,
    try_lock,
    unlock,
    utc_now,
    write_json,
)


class SessionNotFound(KeyError):
    """No session matches the id given (or the prefix is ambiguous); args[0] says which."""


class SessionBusy(RuntimeError):
    """Another run, in this process or another, holds the session; args[0] says which."""


def new_session_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(6)}"


@dataclass
class RunState:
    """Todos, plan and task state of a session: pinned, never compacted away."""

    todos: list[dict] = field(default_factory=list)
    plan: list[dict] = field(default_factory=list)
    task_state: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"todos": self.todos, "plan": self.plan, "task_state": self.task_state}

    @classmethod
    def from_dict(cls, data: dict | None) -> RunState:
        data = data or {}
        return cls(
            todos=list(data.get("todos", [])),
            plan=list(data.get("plan", [])),
            task_state=dict(data.get("task_state", {})),
        )

    def open_todos(self) -> list[dict]:
        return [t for t in self.todos if t.get("status") not in ("completed", "cancelled")]

    def open_steps(self) -> list[dict]:
        return [s for s in self.plan if s.get("status") != "completed"]

    def pinned_text(self) -> str:
        """What the model must always see about its own progress, or '' when there is nothing."""
        parts = []
        if self.task_state:
            parts.append("Task state: " + json.dumps(self.task_state, ensure_ascii=False))
        if self.plan:
            steps = "; ".join(f"[{s['status']}] {s['id']}. {s['description']}" for s in self.plan)
            parts.append("Plan: " + steps)
        if self.todos:
            items = "; ".join(f"[{t['status']}] #{t['id']} {t['description']}" for t in self.todos)
            parts.append("Todos: " + items)
        return "\n".join(parts)


class DiskWriter:
    """Forces one session's transcript to disk on a helper thread while the run goes on, and
    writes its per-step metadata there too.

    A transcript line is written to the OS before `Session.append` returns, so a killed process
    loses nothing. The fsync that also protects it from a power cut runs here, overlapping the
    tool call or model request that follows, and the next append waits for it (`settle`): at
    most the newest message (or step: results of read-only calls join their call's fsync) is
    ever not yet on disk.

    Per-step metadata (counters for listings) is written at most once per META_INTERVAL
    seconds, newest snapshot only, so a fast loop does not rewrite the file on every step; the
    file is at most that far behind. Errors surface at the next `settle`.
    """

    IDLE_SECONDS = 5.0  # the thread ends after this long without work
    META_INTERVAL = 1.0

    def __init__(self, name: str):
        self.name = name  # of the thread
        self._cond = threading.Condition()
        self._fd: int | None = None  # a transcript to fsync
        self._meta: tuple[Path, dict] | None = None  # the newest metadata snapshot to write
        self._meta_due = 0.0  # monotonic time from which the next snapshot may be written
        self._syncing = False  # an fsync is under way
        self._writing = False  # a metadata write is under way
        self._closing = False
        self._error: Exception | None = None
        self._thread: threading.Thread | None = None

    def fsync_later(self, fd: int) -> None:
        with self._cond:
            self._fd = fd
            self._wake()

    def write_meta_later(self, path: Path, meta: dict) -> None:
        with self._cond:
            self._meta = (path, dict(meta))  # a snapshot: the caller goes on changing its dict
            self._wake()

    def settle(self) -> None:
        """Wait until every transcript line handed over is on disk; raise an error the writer
        met since the last call."""
        with self._cond:
            self._cond.wait_for(lambda: self._fd is None and not self._syncing)
            error, self._error = self._error, None
        if error is not None:
            raise error

    def drop_meta(self) -> None:
        """Forget a snapshot not yet written and wait for one being written: the caller is about
        to write newer metadata itself, which no older snapshot may overwrite."""
        with self._cond:
            self._meta = None
            self._cond.wait_for(lambda: not self._writing)

    def close(self) -> None:
        """Write what is pending now, settle, and let the thread end (a later hand-over starts
        a new one)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._meta is None and not self._writing)
        self.settle()

    def _wake(self) -> None:
        self._closing = False
        self._cond.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
            self._thread.start()

    def _next_job(self) -> tuple[int | None, tuple[Path, dict] | None] | None:
        """Under the lock: wait for work; None when the thread should end."""
        while True:
            meta_ready = self._meta is not None and (
                self._closing or time.monotonic() >= self._meta_due
            )
            if self._fd is not None or meta_ready:
                fd, self._fd = self._fd, None
                meta = self._meta if meta_ready else None
                if meta_ready:
                    self._meta = None
                self._syncing, self._writing = fd is not None, meta is not None
                return fd, meta
            if self._meta is None and self._closing:
                return None
            wait = self._meta_due - time.monotonic() if self._meta else self.IDLE_SECONDS
            if not self._cond.wait(max(wait, 0.0)) and self._meta is None and self._fd is None:
                return None  # idle too long

    def _work(self) -> None:
        while True:
            with self._cond:
                job = self._next_job()
                if job is None:
                    self._thread = None
                    self._cond.notify_all()
                    return
            error = self._flush(*job)
            with self._cond:
                if job[1] is not None:
                    self._meta_due = time.monotonic() + self.META_INTERVAL
                self._syncing = self._writing = False
                self._error = self._error or error
                self._cond.notify_all()

    @staticmethod
    def _flush(fd: int | None, meta: tuple[Path, dict] | None) -> Exception | None:
        """Do one job; its error (a full disk, metadata that is not JSON) is kept for `settle`,
        so the thread never dies with a job half done."""
        try:
            if fd is not None:
                os.fsync(fd)
            if meta is not None:
                write_json(*meta, durable=False)
        except Exception as exc:
            return exc
        return None


class Session:
    """One conversation on disk: an append-only, fsynced transcript plus small metadata files
    (see DiskWriter for when each reaches the disk).

    `<id>.jsonl` holds one record per line: {"message": {...}} or {"compact": {...}}.
    `<id>.meta.json` holds task, status, times, counters; `<id>.state.json` the RunState.
    """

    def __init__(self, directory: Path, session_id: str, meta: dict):
        self.directory = directory
        self.id = session_id
        self.meta = meta
        self.transcript: list[dict] = []  # every message ever, for display
        self.history: list[dict] = []  # what the model sees (after compactions)
        self.history_tokens = 0  # estimate_tokens(history), kept up to date as it changes
        self.revision = 0  # changes whenever history is rewritten rather than appended to
        self.state = RunState()
        self._lock = threading.Lock()
        self._handle = None
        self._size = 0  # bytes of the transcript file this object has read or written
        self._disk = DiskWriter(f"lmagent-sync-{session_id}")

    @property
    def transcript_path(self) -> Path:
        return self.directory / f"{self.id}.jsonl"

    @property
    def meta_path(self) -> Path:
        return self.directory / f"{self.id}.meta.json"

    @property
    def state_path(self) -> Path:
        return self.directory / f"{self.id}.state.json"

    def append(self, message: dict) -> None:
        """Add a message to the history; it is in the file when this returns, and forced to
        disk before the next append (or `sync`) returns."""
        self.extend([message])

    def extend(self, messages: list[dict], group: bool = False) -> None:
        """Add messages to the history with one write (and one fsync). group=True joins the
        previous write's fsync instead of waiting for it first, so both reach the disk together
        (for results that follow their call at once)."""
        with self._lock:
            self._write_records([{"message": message} for message in messages], group)
            self.transcript.extend(messages)
            self.history.extend(messages)
            self.history_tokens += estimate_tokens(messages)

    def record_compaction(self, start: int, end: int, summary: dict) -> None:
        """Replace history[start:end] with `summary` (the transcript keeps everything)."""
        with self._lock:
            self._write_records([{"compact": {"start": start, "end": end, "summary": summary}}])
            self.history[start:end] = [summary]
            self.history_tokens = estimate_tokens(self.history)
            self.revision += 1

    def sync(self) -> None:
        """Return once everything written so far is on disk (before an action that changes
        things, so a power cut never loses the call that caused it)."""
        self._disk.settle()

    def _write_records(self, records: list[dict], group: bool = False) -> None:
        if not group:
            self._disk.settle()  # the previous records are on disk before the next are written
        if self._handle is None:
            self._handle = open(self.transcript_path, "ab")  # noqa: SIM115 - kept open on purpose
            if not _ends_cleanly(self.transcript_path):
                self._handle.write(b"\n")  # end a torn last line so the next record stays whole
                self._size += 1
        lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records]
        data = "".join(lines).encode("utf-8")
        self._handle.write(data)
        self._handle.flush()
        self._size += len(data)
        self._disk.fsync_later(self._handle.fileno())

    def save_meta(self, durable: bool = True, **changes) -> None:
        """Write the metadata. durable=False is for the per-step counters: written in the
        background, at most once a second, never forced to disk (the fsynced transcript is the
        record). A status change is always written and forced to disk before this returns."""
        with self._lock:
            self.meta.update(changes)
            self.meta["updated"] = utc_now()
            self.meta["messages"] = len(self.transcript)
            if durable or "status" in changes:
                self._disk.drop_meta()
                self._disk.settle()  # the transcript is on disk before the status says so
                write_json(self.meta_path, self.meta)
            else:
                self._disk.write_meta_later(self.meta_path, self.meta)

    def save_state(self) -> None:
        with self._lock:
            write_json(self.state_path, self.state.to_dict())

    def close(self) -> None:
        with self._lock:
            try:
                self._disk.close()
            finally:
                if self._handle is not None:
                    self._handle.close()
                    self._handle = None

    def refresh(self) -> None:
        """Re-read the session when another run wrote to it after this object loaded it (for a
        caller that opened the session before taking its lock)."""
        try:
            size = self.transcript_path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == self._size:
            return
        with self._lock:
            meta = read_json(self.meta_path)
            if isinstance(meta, dict):
                self.meta.clear()
                self.meta.update(meta)
            self.transcript, self.history = [], []
            self.load_records()

    def load_records(self) -> None:
        """Replay the transcript file; a torn last line (crash mid-write) is ignored."""
        try:
            raw = self.transcript_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        self._size = len(raw)
        for line in raw.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if "message" in record:
                self.transcript.append(record["message"])
                self.history.append(record["message"])
            elif "compact" in record:
                info = record["compact"]
                self.history[info["start"] : info["end"]] = [info["summary"]]
        self.history_tokens = estimate_tokens(self.history)
        self.revision += 1
        self.state = RunState.from_dict(read_json(self.state_path, {}))


def _ends_cleanly(path: Path) -> bool:
    """True when the file is empty or its last byte is a newline."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return True
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return True


class SessionStore:
    """All sessions of one workspace under `<workspace>/.lmagent/sessions/`."""

    def __init__(self, workspace: Workspace | Path | str):
        root = workspace.root if isinstance(workspace, Workspace) else Path(workspace)
        self.directory = root / ".lmagent" / "sessions"

    def create(
        self, task: str, *, parent_id: str | None = None, source: str = "cli", mode: str = ""
    ) -> Session:
        self.directory.mkdir(parents=True, exist_ok=True)
        session_id = self._reserve_id()
        now = utc_now()
        meta = {
            "id": session_id,
            "task": task,
            "created": now,
            "updated": now,
            "status": STATUS_RUNNING,
            "parent_id": parent_id,
            "source": source,
            "mode": mode,
            "iterations": 0,
            "tokens": 0,
            "messages": 0,
        }
        session = Session(self.directory, session_id, meta)
        session.save_meta()
        return session

    def _reserve_id(self) -> str:
        """A new id whose metadata file is created exclusively, so two sessions never share one."""
        while True:
            session_id = new_session_id()
            try:
                with open(self.directory / f"{session_id}.meta.json", "x", encoding="utf-8"):
                    return session_id
            except FileExistsError:
                continue

    def open(self, session_id: str) -> Session:
        """Load a session by id (a unique prefix is enough)."""
        meta_path = self._find_meta(session_id)
        meta = read_json(meta_path)
        if not isinstance(meta, dict):
            raise SessionNotFound(
                f"session {session_id!r} has unreadable metadata ({meta_path.name})"
            )
        session = Session(self.directory, meta["id"], meta)
        session.load_records()
        return session

    def resolve(self, session_id: str) -> str:
        """The full id of a session given by id or unique prefix (raises SessionNotFound)."""
        return self._find_meta(session_id).name.removesuffix(".meta.json")

    @contextlib.contextmanager
    def lock(self, session_id: str, wait: float = 0.5) -> Iterator[None]:
        """Hold `sessions/<id>.lock` while a run uses the session; raises SessionBusy when
        another run (any thread or process) holds it for longer than `wait` seconds."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with locked(self.directory / f"{session_id}.lock", wait) as got:
            if not got:
                raise SessionBusy(
                    f"session {session_id} is in use by another run (REPL, web UI or "
                    "scheduler); try again when it has finished"
                )
            yield

    def is_busy(self, session_id: str) -> bool:
        """True while a run holds the session (an unknown id is not busy)."""
        try:
            session_id = self.resolve(session_id)
        except SessionNotFound:
            return False
        fd = os.open(self.directory / f"{session_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            free = try_lock(fd, shared=True)
            if free:
                unlock(fd)
            return not free
        finally:
            os.close(fd)

    def _find_meta(self, session_id: str) -> Path:
        if not session_id or "/" in session_id or "\\" in session_id or ".." in session_id:
            raise SessionNotFound(f"invalid session id {session_id!r}")
        exact = self.directory / f"{session_id}.meta.json"
        if exact.is_file():
            return exact
        matches = sorted(
            path
            for path in _listdir(self.directory)
            if path.name.startswith(session_id) and path.name.endswith(".meta.json")
        )
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise SessionNotFound(f"no session {session_id!r}; see --list-sessions")
        raise SessionNotFound(f"session id {session_id!r} is ambiguous; give more characters")

    def list(self) -> list[dict]:
        """Metadata of every session, newest first, without reading any transcript."""
        if not self.directory.is_dir():
            return []
        sessions = []
        for path in _listdir(self.directory):
            if not path.name.endswith(".meta.json"):
                continue
            meta = read_json(path)
            if isinstance(meta, dict) and "id" in meta:
                sessions.append(meta)
        sessions.sort(key=lambda m: m.get("created", ""), reverse=True)
        return sessions


def _listdir(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []
