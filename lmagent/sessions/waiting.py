"""The index of sessions parked by `WAIT:`: `<workspace>/.lmagent/scheduler/waiting.json`,
{session_id: {wait_until, reason, mode}}.

Every run records its own ending here (the loop), whichever front end ran it, so the scheduler
learns of a wait at once and never re-reads every session to find the due ones. A rescan of
the sessions' metadata remains as a fallback for waits recorded before the index existed.
Only session ids (store.is_session_id) come out of it: they end up in file names.
Imports nothing above lmagent/sessions/store.py.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from lmagent.core.files import locked, read_json, write_json
from lmagent.core.status import STATUS_WAITING
from lmagent.core.workspace import Workspace
from lmagent.sessions.store import is_session_id


def parse_time(value: str | datetime) -> datetime:
    """An ISO-8601 time with `Z`, an offset, or none (local time) → an aware UTC datetime."""
    if isinstance(value, datetime):
        when = value
    else:
        text = str(value).strip().replace(" ", "T", 1)
        text = re.sub(r"[zZ]$", "+00:00", text)
        text = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", text)
        when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.astimezone()  # a naive time is this machine's local time
    return when.astimezone(timezone.utc)


class WaitingIndex:
    """waiting.json of one workspace; reads are cached until the file changes."""

    def __init__(self, workspace: Path | str):
        data = Workspace(workspace).data_dir
        self.sessions = data / "sessions"
        self.path = data / "scheduler" / "waiting.json"
        self.lock_path = data / "scheduler" / "waiting.lock"
        self._cache: tuple[tuple, dict] = ((), {})

    def load(self) -> dict:
        """The index, re-read only when the file changed (every write replaces the file, so a
        new inode tells a change apart even within one tick of a coarse file-system clock)."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp != self._cache[0]:
            data = read_json(self.path, {})
            self._cache = (stamp, data if isinstance(data, dict) else {})
        return self._cache[1]

    def update(self, change: Callable[[dict], None]) -> None:
        """Read, change and write the index under its lock (any process may do this)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.lock_path):
            data = read_json(self.path, {})
            data = data if isinstance(data, dict) else {}
            change(data)
            write_json(self.path, data)

    def add(self, session_id: str, wait_until: str, reason: str = "", mode: str = "auto") -> None:
        entry = {"wait_until": wait_until, "reason": reason, "mode": mode}
        self.update(lambda data: data.__setitem__(session_id, entry))

    def remove(self, session_id: str) -> None:
        """Forget a session's wait; costs only a read when it is not in the index."""
        if session_id in self.load():
            self.update(lambda data: data.pop(session_id, None))

    def due(self, now: datetime) -> list[tuple[str, dict]]:
        due = []
        for session_id, entry in self.load().items():
            with contextlib.suppress(TypeError, ValueError, KeyError):
                if is_session_id(session_id) and parse_time(entry["wait_until"]) <= now:
                    due.append((session_id, entry))
        return due

    def rescan(self, since: float = 0.0, woken: dict | None = None) -> None:
        """Index waiting sessions whose metadata changed after `since` and that the index
        lacks; `woken` holds the waits already turned into wake-up tasks."""
        known, woken = self.load(), woken or {}
        new = {}
        for session_id, meta in self._waiting_sessions(since).items():
            already = (known.get(session_id, {}).get("wait_until"), woken.get(session_id))
            if meta["wait_until"] in already:
                continue
            new[session_id] = {
                "wait_until": meta["wait_until"],
                "reason": meta.get("wait_reason") or "",
                "mode": meta.get("mode") or "auto",
            }
        if new:
            self.update(lambda data: data.update(new))

    def _waiting_sessions(self, since: float) -> dict[str, dict]:
        """Metadata of the top-level sessions parked by WAIT (sub-agents' waits are their
        parent's business)."""
        found = {}
        for path in self.sessions.glob("*.meta.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < since:
                    continue
            session_id = path.name.removesuffix(".meta.json")
            meta = read_json(path, {})
            if not isinstance(meta, dict) or meta.get("status") != STATUS_WAITING:
                continue
            if meta.get("id") != session_id or not is_session_id(session_id):
                continue  # damaged: --list-sessions says so
            if isinstance(meta.get("wait_until"), str) and not meta.get("parent_id"):
                found[session_id] = meta
        return found


def record_ending(
    workspace: Path | str, session_id: str, status: str, wait_until: str | None, **entry
) -> None:
    """What a run does as it ends: index a wait, or drop a wait the session no longer has."""
    index = WaitingIndex(workspace)
    if status == STATUS_WAITING and wait_until:
        index.add(session_id, wait_until, **entry)
    else:
        index.remove(session_id)
