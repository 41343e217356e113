"""Durable sessions: the append-only transcript, its metadata and run state on disk, and the
store that creates, opens, lists and locks them under `<workspace>/.lmagent/sessions/`.

Files on disk are checked as they are read: a damaged record is skipped and reported
(`Session.problems`), metadata that cannot be used makes the session `SessionDamaged`, and a
session id is only ever put in a path once it is made of the session id characters."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from lmagent.core.files import atomic_write, locked, try_lock, unlock, utc_now, write_json
from lmagent.core.status import STATUS_ERROR, STATUS_INTERRUPTED, STATUS_RUNNING
from lmagent.core.workspace import Workspace
from lmagent.llm.tokens import estimate_tokens

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class SessionNotFound(KeyError):
    """No session matches the id given (or the prefix is ambiguous); args[0] says which."""


class SessionDamaged(SessionNotFound):
    """The session's metadata cannot be used; args[0] names the session, what is wrong and
    what to do."""


class SessionBusy(RuntimeError):
    """Another run, in this process or another, holds the session; args[0] says which."""


def new_session_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(6)}"


def is_session_id(value: object) -> bool:
    """True for text made of the session id characters (letters, digits, '-', '_'), the only
    text ever put in a session's file names."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def disk_full_message(exc: OSError, session_id: str) -> str:
    """What a run that met a full disk tells the user: what happened and what to do."""
    where = f" writing {Path(exc.filename).name}" if exc.filename else ""
    return (
        f"the disk is full ({errno.errorcode[exc.errno]}: {exc.strerror}{where}); the session "
        f"is saved up to its last complete step. Free some space on the workspace's disk, then "
        f"continue it with --resume {session_id}"
    )


@dataclass
class RunState:
    """Todos, plan and task state of a session: pinned, never compacted away."""

    todos: list[dict] = field(default_factory=list)
    plan: list[dict] = field(default_factory=list)
    task_state: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"todos": self.todos, "plan": self.plan, "task_state": self.task_state}

    @classmethod
    def load(cls, data: object) -> tuple[RunState, list[str]]:
        """The state in a state file's JSON, and what was damaged in it (dropped)."""
        if data is None:
            return cls(), []
        if not isinstance(data, dict):
            return cls(), [f"it holds {_json_kind(data)}, not an object; starting without it"]
        problems: list[str] = []
        task_state = data.get("task_state", {})
        if not isinstance(task_state, dict):
            problems.append("'task_state' is not an object; dropped")
            task_state = {}
        state = cls(_items(data, "todos", problems), _items(data, "plan", problems), task_state)
        return state, problems

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


def _items(data: dict, key: str, problems: list[str]) -> list[dict]:
    """The todos or plan steps of a state file that have an id, a description and a status."""
    items = data.get(key, [])
    if not isinstance(items, list):
        problems.append(f"'{key}' is not a list; dropped")
        return []
    good = [
        item
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("id"), int)
        and isinstance(item.get("description"), str)
        and isinstance(item.get("status"), str)
    ]
    if len(good) < len(items):
        problems.append(f"{len(items) - len(good)} of its '{key}' entries are damaged; dropped")
    return good


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "true/false"}
    return "null" if value is None else kinds.get(type(value), "a number")


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
        self._error: Exception | None = None  # of an fsync
        self._meta_error: Exception | None = None  # of a metadata write
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
            error = self._error or self._meta_error
            self._error = self._meta_error = None
        if error is not None:
            raise error

    def drop_meta(self) -> None:
        """Forget a snapshot not yet written (or one that failed) and wait for one being
        written: the caller is about to write newer metadata itself, which no older snapshot
        may overwrite."""
        with self._cond:
            self._meta = None
            self._cond.wait_for(lambda: not self._writing)
            self._meta_error = None

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
            fd, meta = job
            sync_error = _error_of(os.fsync, fd) if fd is not None else None
            meta_error = _error_of(write_json, *meta, durable=False) if meta else None
            with self._cond:
                if meta is not None:
                    self._meta_due = time.monotonic() + self.META_INTERVAL
                self._syncing = self._writing = False
                self._error = self._error or sync_error
                self._meta_error = self._meta_error or meta_error
                self._cond.notify_all()


def _error_of(action: Callable, *args, **kwargs) -> Exception | None:
    """Run `action`; its error (a full disk, metadata that is not JSON) is returned to be kept
    for `settle`, so the writer thread never dies with a job half done."""
    try:
        action(*args, **kwargs)
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
        if not is_session_id(session_id):
            raise SessionNotFound(f"invalid session id {session_id!r}")
        self.directory = directory
        self.id = session_id
        self.meta = meta
        self.transcript: list[dict] = []  # every message ever, for display
        self.history: list[dict] = []  # what the model sees (after compactions)
        self.history_tokens = 0  # estimate_tokens(history), kept up to date as it changes
        self.revision = 0  # changes whenever history is rewritten rather than appended to
        self.state = RunState()
        self.problems: list[str] = []  # damage found while loading, for the user (one line each)
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
            # unbuffered and kept open on purpose: nothing is left in a buffer after a failure
            self._handle = open(self.transcript_path, "ab", buffering=0)  # noqa: SIM115
            if not _ends_cleanly(self.transcript_path):
                _append(self._handle, b"\n")  # end a torn last line so the next record stays whole
                self._size += 1
        lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records]
        data = "".join(lines).encode("utf-8")
        _append(self._handle, data)
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
                write_status(self.meta_path, self.meta)
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
            try:
                meta, self.problems = load_meta(self.meta_path, self.id)
            except SessionDamaged:  # damaged since: keep the metadata read before
                self.problems = []
            else:
                self.meta.clear()
                self.meta.update(meta)
            self.transcript, self.history = [], []
            self.load_records()

    def load_records(self) -> None:
        """Replay the transcript file and read the state file. A torn last line (a crash
        mid-write) is ignored; any other damaged record is skipped and noted in `problems`."""
        try:
            raw = self.transcript_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        self._size = len(raw)
        lines = raw.splitlines()
        torn = len(lines) if not raw.endswith(b"\n") else None  # the number of a torn last line
        skipped = []
        for number, line in enumerate(lines, 1):
            problem = self._replay(line) if line.strip() else None
            if problem and number != torn:
                skipped.append(f"line {number}: {problem}")
        if skipped:
            more = f"; and {len(skipped) - 5} more" if len(skipped) > 5 else ""
            shown = "; ".join(skipped[:5]) + more
            self.problems.append(f"{self.transcript_path.name}: skipped damaged records ({shown})")
        self.history_tokens = estimate_tokens(self.history)
        self.revision += 1
        self._load_state()

    def _load_state(self) -> None:
        try:
            self.state, problems = RunState.load(_read_json(self.state_path))
        except ValueError as exc:
            self.state, problems = RunState(), [f"{exc}; starting without it"]
        if problems:
            self.problems.append(f"{self.state_path.name}: " + "; ".join(problems))

    def _replay(self, line: bytes) -> str | None:
        """Apply one transcript record; what is wrong with it when it cannot be used."""
        try:
            record = json.loads(line)
        except ValueError:
            return "not valid JSON"
        if not isinstance(record, dict):
            return f"{_json_kind(record)}, not an object"
        if "message" in record:
            problem = message_problem(record["message"])
            if problem is None:
                self.transcript.append(record["message"])
                self.history.append(record["message"])
            return problem
        if "compact" in record:
            problem = compaction_problem(record["compact"], len(self.history))
            if problem is None:
                info = record["compact"]
                self.history[info["start"] : info["end"]] = [info["summary"]]
            return problem
        return "neither a message nor a compaction"


def message_problem(message: object) -> str | None:
    """What makes a transcript message unusable (it would break the loop or the server's
    request), or None."""
    if not isinstance(message, dict):
        return f"a message that is {_json_kind(message)}, not an object"
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return f"a message with no known role ({role!r})"
    if not isinstance(message.get("content"), (str, list, type(None))):
        return f"a {role} message whose content is not text"
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return "an assistant message whose tool_calls is not a list"
    if not all(_call_ok(call) for call in calls or ()):
        return "a tool call without an id, a name or its arguments"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "a tool result without tool_call_id"
    return None


def _call_ok(call: object) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return (
        isinstance(function, dict)
        and isinstance(call.get("id"), str)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments"), str)
    )


def compaction_problem(info: object, history_length: int) -> str | None:
    """What makes a compaction record unusable, or None."""
    if not isinstance(info, dict):
        return f"a compaction that is {_json_kind(info)}, not an object"
    start, end = info.get("start"), info.get("end")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (start, end)):
        return "a compaction without whole-number start and end"
    if not 0 <= start <= end <= history_length:
        return f"a compaction of messages {start}-{end} of {history_length}"
    problem = message_problem(info.get("summary"))
    return f"a compaction whose summary is damaged ({problem})" if problem else None


def _read_json(path: Path) -> object:
    """The JSON value in a file, None when there is no file; ValueError says what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"it cannot be read ({exc})") from None
    if not text.strip():
        raise ValueError("it is empty")
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError("it is not valid JSON") from None


def _append(handle, data: bytes) -> None:
    """Write all of `data` at the end of an unbuffered file, or none of it: after a failure
    (a full disk) the file is cut back to its old length, so no torn record is left."""
    start = os.fstat(handle.fileno()).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[handle.write(view) :]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(handle.fileno(), start)
        raise


def write_status(path: Path, meta: dict) -> None:
    """Write metadata now (a status change), atomically. On a full disk, where no new file can
    be made, the old file's own space is overwritten instead, so a run that ends for lack of
    room still records how it ended."""
    try:
        write_json(path, meta)
    except OSError as exc:
        if not disk_full(exc):
            raise
        _overwrite_in_place(path, json.dumps(meta, ensure_ascii=False, indent=2), exc)


def _overwrite_in_place(path: Path, text: str, error: OSError) -> None:
    """Replace the file's content within the space it already has, in one write (a killed
    process leaves the old text or the new, never a mix): a shorter text is padded with
    spaces, which JSON ignores. Raises `error` when the text needs more room."""
    data = text.encode("utf-8")
    with open(path, "r+b", buffering=0) as handle:
        info = os.fstat(handle.fileno())
        if len(data) > max(info.st_size, getattr(info, "st_blocks", 0) * 512):
            raise error
        data = data.ljust(info.st_size)
        if handle.write(data) != len(data):
            raise error
        os.fsync(handle.fileno())


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
        self,
        task: str,
        *,
        parent_id: str | None = None,
        source: str = "cli",
        mode: str = "",
        session_id: str | None = None,
    ) -> Session:
        """A new session, under `session_id` (one reserved earlier with new_session_id) or a
        fresh id. Raises FileExistsError when the id given is taken."""
        if session_id is not None and not is_session_id(session_id):
            raise SessionNotFound(f"invalid session id {session_id!r}")
        self.directory.mkdir(parents=True, exist_ok=True)
        now = utc_now()
        while True:
            meta = {
                "id": session_id or new_session_id(),
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
            if self._create_meta(meta):
                return Session(self.directory, meta["id"], meta)
            if session_id:
                raise FileExistsError(f"session {session_id} exists already")

    def _create_meta(self, meta: dict) -> bool:
        """Make a new session's metadata file, whole, unless its id is taken (False). The file
        appears as a hard link to a complete draft, so no crash ever leaves it empty."""
        path = self.directory / f"{meta['id']}.meta.json"
        draft = self.directory / f".{path.name}.{secrets.token_hex(4)}.new"
        atomic_write(draft, json.dumps(meta, ensure_ascii=False, indent=2))
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        finally:
            draft.unlink()
        return True

    def open(self, session_id: str) -> Session:
        """Load a session by id (a unique prefix is enough). Raises SessionNotFound, or
        SessionDamaged when its metadata cannot be used; damaged transcript records and state
        are skipped and listed in the session's `problems`."""
        meta_path = self._find_meta(session_id)
        full_id = meta_path.name.removesuffix(".meta.json")
        meta, problems = load_meta(meta_path, full_id)
        session = Session(self.directory, full_id, meta)
        session.problems.extend(problems)
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
        with locked(self._lock_path(session_id), wait) as got:
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
        fd = os.open(self._lock_path(session_id), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            free = try_lock(fd, shared=True)
            if free:
                unlock(fd)
            return not free
        finally:
            os.close(fd)

    def _lock_path(self, session_id: str) -> Path:
        if not is_session_id(session_id):
            raise SessionNotFound(f"invalid session id {session_id!r}")
        return self.directory / f"{session_id}.lock"

    def _find_meta(self, session_id: str) -> Path:
        if not is_session_id(session_id):
            raise SessionNotFound(
                f"invalid session id {session_id!r}: a session id has only letters, digits, "
                "'-' and '_'; see --list-sessions"
            )
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
        """Metadata of every session, newest first, without reading any transcript. A session
        whose metadata cannot be used is listed as {"id", "status": "damaged", "error"}."""
        sessions = []
        for path in _listdir(self.directory):
            session_id = path.name.removesuffix(".meta.json")
            if session_id == path.name or not is_session_id(session_id):
                continue
            try:
                sessions.append(load_meta(path, session_id)[0])
            except SessionDamaged as exc:
                sessions.append({"id": session_id, "status": "damaged", "error": exc.args[0]})
        sessions.sort(key=lambda m: m.get("created", ""), reverse=True)
        return sessions

    def end_orphans(self, sources: tuple[str, ...], reason: str) -> list[str]:
        """Mark `interrupted` every session still `running` that no run holds, whose source is
        one of `sources`, or whose parent is such a session (sub-agents): the process running
        them was killed. Returns their ids."""
        running = {m["id"]: m for m in self.list() if m["status"] == STATUS_RUNNING}
        orphans = [i for i in running if _from_source(i, running, sources)]
        ended = []
        for session_id in orphans:
            with contextlib.suppress(SessionBusy, SessionNotFound, OSError):
                self.mark_ended(session_id, STATUS_INTERRUPTED, reason)
                ended.append(session_id)
        return ended

    def rename(self, session_id: str, title: str) -> dict:
        """Give a session a title of the user's (shown instead of its task); its metadata.
        Raises SessionBusy while a run holds it, SessionNotFound when there is none."""
        path = self._find_meta(session_id)
        session_id = path.name.removesuffix(".meta.json")
        with self.lock(session_id, wait=0):
            meta, _ = load_meta(path, session_id)
            meta["title"] = title
            write_status(path, meta)
        return meta

    def delete(self, session_id: str) -> None:
        """Remove a session's files (never while a run holds it: SessionBusy)."""
        path = self._find_meta(session_id)
        session_id = path.name.removesuffix(".meta.json")
        with self.lock(session_id, wait=0):
            path.unlink()  # first: from here on the session is not listed
            for entry in _listdir(self.directory):
                if entry.name.startswith(f"{session_id}.") and entry.suffix != ".lock":
                    entry.unlink(missing_ok=True)
        self._lock_path(session_id).unlink(missing_ok=True)

    def mark_ended(self, session_id: str, status: str, reason: str) -> None:
        """Record how a session that no run holds ended, when it still says `running` (a killed
        run never wrote its ending). Raises SessionBusy when a run holds it, SessionNotFound
        when there is no such session or its metadata is damaged."""
        path = self._find_meta(session_id)
        session_id = path.name.removesuffix(".meta.json")
        with self.lock(session_id, wait=0):
            meta, _ = load_meta(path, session_id)
            if meta["status"] == STATUS_RUNNING:
                error = reason if status == STATUS_ERROR else None
                meta.update(status=status, updated=utc_now(), last_message=reason, error=error)
                write_status(path, meta)


def _from_source(session_id: str, running: dict[str, dict], sources: tuple[str, ...]) -> bool:
    """True when the running session, or one of its running ancestors, came from `sources`."""
    seen = set()
    while session_id in running and session_id not in seen:
        seen.add(session_id)
        meta = running[session_id]
        if meta.get("source") in sources:
            return True
        session_id = meta.get("parent_id")
    return False


TEXT_FIELDS = ("id", "task", "status", "created")
COUNTERS = ("iterations", "tokens", "messages")


def load_meta(path: Path, session_id: str) -> tuple[dict, list[str]]:
    """(metadata, problems) of a session's metadata file. Counters that are not whole numbers
    are counted from 0 again (a problem noted); anything else wrong raises SessionDamaged."""
    try:
        meta = _read_json(path)
        if meta is None:
            raise ValueError("it is gone")
    except ValueError as exc:
        raise _damaged(session_id, f"{path.name}: {exc}") from None
    if not isinstance(meta, dict):
        raise _damaged(session_id, f"{path.name} holds {_json_kind(meta)}, not an object")
    if meta.get("id") != session_id:
        raise _damaged(
            session_id, f"the id in {path.name} ({meta.get('id')!r}) does not match its name"
        )
    for key in TEXT_FIELDS:
        if not isinstance(meta.get(key), str):
            what = "has no" if key not in meta else "has a damaged"
            raise _damaged(session_id, f"{path.name} {what} '{key}'")
    problems = []
    for key in COUNTERS:
        value = meta.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"'{key}' in {path.name} was {value!r}; counting from 0")
            meta[key] = 0
    return meta, problems


def _damaged(session_id: str, problem: str) -> SessionDamaged:
    return SessionDamaged(
        f"session {session_id} cannot be used: {problem}; restore its files from a backup or "
        "delete them"
    )


def _listdir(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []
