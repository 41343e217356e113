"""Durable sessions: the append-only transcript, its metadata and run state on disk, and the
store that creates, opens, lists and locks them under `<workspace>/.lmagent/sessions/`."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
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


class Session:
    """One conversation on disk: an append-only, fsynced transcript plus small metadata files.

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
        """Add a message to the history and make it durable before returning."""
        with self._lock:
            self._write_record({"message": message})
            self.transcript.append(message)
            self.history.append(message)
            self.history_tokens += estimate_tokens([message])

    def record_compaction(self, start: int, end: int, summary: dict) -> None:
        """Replace history[start:end] with `summary` (the transcript keeps everything)."""
        with self._lock:
            self._write_record({"compact": {"start": start, "end": end, "summary": summary}})
            self.history[start:end] = [summary]
            self.history_tokens = estimate_tokens(self.history)
            self.revision += 1

    def _write_record(self, record: dict) -> None:
        if self._handle is None:
            self._handle = open(self.transcript_path, "ab")  # noqa: SIM115 - kept open on purpose
            if not _ends_cleanly(self.transcript_path):
                self._handle.write(b"\n")  # end a torn last line so the next record stays whole
                self._size += 1
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        self._handle.write(data)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._size += len(data)

    def save_meta(self, durable: bool = True, **changes) -> None:
        """Write the metadata; durable=False for the per-step counters (the transcript, fsynced
        per message, is the record; a status change is always forced to disk)."""
        with self._lock:
            self.meta.update(changes)
            self.meta["updated"] = utc_now()
            self.meta["messages"] = len(self.transcript)
            write_json(self.meta_path, self.meta, durable=durable or "status" in changes)

    def save_state(self) -> None:
        with self._lock:
            write_json(self.state_path, self.state.to_dict())

    def close(self) -> None:
        with self._lock:
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
