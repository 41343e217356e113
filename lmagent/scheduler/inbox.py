"""The scheduler's files: tasks in the inbox and how they are parsed, where everything lives,
the daemon's lock, and the run history.

Layout under `<workspace>/.lmagent/`:
  inbox/<ns>-<pid>-<random>.task|.json   submitted work, written atomically (dot files: temporary)
  scheduler/processing/<name>            claimed by the daemon (an atomic rename out of the inbox)
  scheduler/processing/<name>.session    the session the claimed task runs in (written before
                                         that session is made, so a restart resumes, not redoes)
  scheduler/processing/<name>.outcome    the outcome of a finished task, until it is recorded in
                                         the history and the task file is moved on
  scheduler/done/, scheduler/failed/     finished tasks; a failed one has `<name>.reason` beside it
  scheduler/history.jsonl                one fsynced line per outcome
  scheduler/waiting.json                 index of waiting sessions (lmagent/sessions/waiting.py)
  scheduler/model-unreachable.json       while the daemon finds no model server: its URL, since when
  scheduler/daemon.lock                  OS lock held for the daemon's life (holds its pid)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from lmagent.core.config import PERMISSION_MODES, Config
from lmagent.core.files import atomic_write, try_lock, unlock, utc_now
from lmagent.core.workspace import Workspace
from lmagent.sessions.store import is_session_id
from lmagent.sessions.waiting import parse_time


class SchedulerLocked(RuntimeError):
    """Another scheduler already runs on this workspace."""


class Malformed(ValueError):
    """An inbox file that cannot be run; the message is the reason written beside it."""


# --------------------------------------------------------------------------- tasks


@dataclass
class Job:
    """One inbox file, parsed. `wake` is the wait_until a wake-up answers (None otherwise)."""

    name: str
    task: str | None = None
    session_id: str | None = None
    not_before: str | None = None
    mode: str = "auto"
    attempt: int = 0
    wake: str | None = None

    def payload(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if v and k != "name"}
        if data.get("mode") == "auto":
            del data["mode"]  # the default
        data["task"] = self.task
        return data

    def dump(self) -> str:
        return json.dumps(self.payload(), ensure_ascii=False)

    def summary(self) -> str:
        text = self.task or f"resume {self.session_id}"
        return " ".join(text.split())[:80]


def parse_job(name: str, raw: bytes) -> Job:
    """Read an inbox file; raises Malformed with the reason it cannot run."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("the file is not UTF-8 text") from None
    if not text.strip():
        raise Malformed("the file is empty")
    if name.endswith(".task"):
        return Job(name, task=text.strip())
    if not name.endswith(".json"):
        raise Malformed("unknown kind of file; the inbox takes *.task (text) and *.json")
    return job_from_dict(name, json_object(text, "an object with 'task' and/or 'session_id'"))


def json_object(text: str, shape: str = "an object") -> dict:
    """JSON text that must hold an object; Malformed says what is wrong otherwise."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise Malformed(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Malformed(f"the JSON must be {shape}")
    return data


def task_fields(data: dict) -> tuple[str | None, str | None, str]:
    """(task, session_id, mode) of a submission, checked, for the inbox and the distributed
    queue alike; Malformed says what is wrong."""
    task, session_id = data.get("task"), data.get("session_id")
    for key, value in (("task", task), ("session_id", session_id)):
        if value is not None and not isinstance(value, str):
            raise Malformed(f"'{key}' must be a string")
    task = (task or "").strip() or None
    if not task and not session_id:
        raise Malformed("nothing to do: give 'task' (text) and/or 'session_id' (to continue)")
    if session_id is not None and not is_session_id(session_id):
        raise Malformed(f"'session_id' {session_id!r} is not a session id (see --list-sessions)")
    mode = data.get("mode") or data.get("permission") or "auto"
    if mode not in PERMISSION_MODES:
        raise Malformed(f"'mode' must be one of {', '.join(PERMISSION_MODES)}")
    return task, session_id, mode


def job_from_dict(name: str, data: dict) -> Job:
    if data.get("wake") is not None and not isinstance(data["wake"], str):
        raise Malformed("'wake' must be a string")
    task, session_id, mode = task_fields(data)
    attempt = data.get("attempt", 0)
    if not isinstance(attempt, int):
        raise Malformed("'attempt' must be an integer")
    not_before = _not_before(data.get("not_before"))
    return Job(name, task, session_id, not_before, mode, attempt, data.get("wake"))


def _not_before(value) -> str | None:
    if value is None:
        return None
    try:
        return parse_time(value).isoformat()
    except (TypeError, ValueError):
        raise Malformed(f"'not_before' is not an ISO-8601 time: {value!r}") from None


def peek(path: Path) -> Job | None:
    """The job in an inbox file, or None when it is gone or malformed."""
    try:
        return parse_job(path.name, path.read_bytes())
    except (OSError, Malformed):
        return None


def _unique_name(suffix: str) -> str:
    """Sorts by submission time; unique across processes even within one nanosecond tick."""
    return f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}{suffix}"


def submit(
    config: Config,
    text: str | None,
    session_id: str | None = None,
    not_before: str | datetime | None = None,
    mode: str | None = None,
) -> Path:
    """Drop a task into the inbox (atomically) and return its path."""
    paths = Paths(config.workspace)
    paths.inbox.mkdir(parents=True, exist_ok=True)
    job = job_from_dict(
        "", {"task": text, "session_id": session_id, "not_before": not_before, "mode": mode}
    )
    if job.session_id or job.not_before or mode:
        name, data = _unique_name(".json"), job.dump()
    else:
        name, data = _unique_name(".task"), job.task
    atomic_write(paths.inbox / name, data)
    return paths.inbox / name


# --------------------------------------------------------------------------- files on disk


class Paths:
    """Where the inbox and the scheduler's own files live in a workspace."""

    def __init__(self, workspace: Path | str):
        data = Workspace(workspace).data_dir
        self.workspace = Path(workspace)
        self.sessions = data / "sessions"
        self.inbox = data / "inbox"
        root = data / "scheduler"
        self.processing = root / "processing"
        self.done = root / "done"
        self.failed = root / "failed"
        self.history = root / "history.jsonl"
        self.lock = root / "daemon.lock"
        self.model_note = root / "model-unreachable.json"

    def ensure(self) -> None:
        for directory in (self.inbox, self.processing, self.done, self.failed):
            directory.mkdir(parents=True, exist_ok=True)

    def marker(self, name: str) -> Path:
        """Beside a claimed task: the id of the session it runs in."""
        return self.processing / f"{name}.session"

    def outcome(self, name: str) -> Path:
        """Beside a finished task: its history record, until the task file has been moved on."""
        return self.processing / f"{name}.outcome"

    def claimed(self) -> list[str]:
        """The task files in processing/ (without the files kept beside them)."""
        return [n for n in names(self.processing) if not n.endswith((".session", ".outcome"))]


def names(directory: Path) -> list[str]:
    """The visible entries of a directory, sorted (submission order for the inbox)."""
    try:
        return sorted(e.name for e in os.scandir(directory) if not e.name.startswith("."))
    except FileNotFoundError:
        return []


class DaemonLock:
    """An OS lock on `daemon.lock`, held while the daemon lives; the kernel drops it on death."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not try_lock(fd):
            os.close(fd)
            holder = self.holder() or "unknown"
            raise SchedulerLocked(
                f"another scheduler is already running on this workspace (pid {holder}); "
                "stop it first or use that one"
            )
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            unlock(self.fd)
            os.close(self.fd)
            self.fd = None

    def holder(self) -> str | None:
        """The pid of the running daemon, or None when nobody holds the lock."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            if try_lock(fd, shared=True):
                unlock(fd)
                return None
            return os.read(fd, 32).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)


class History:
    """The append-only run history: one JSON line per outcome, fsynced before returning."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: dict) -> None:
        """Add a record (stamped with the time unless it has one)."""
        line = json.dumps({"time": utc_now(), **record}, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "ab") as handle:
            if handle.tell() and not _ends_with_newline(self.path):
                line = "\n" + line  # end a line torn by a crash, so this record stays whole
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def read_history(path: Path) -> list[dict]:
    """The records of the history; torn or damaged lines are left out."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records
