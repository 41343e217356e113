"""Server-Sent Events for the web UI: numbered events in a bounded replay buffer.

Every event the loop emits gets an id `<boot>-<n>`; the last `max_events` (and at most
`max_bytes`) stay in memory so a reconnecting tab receives what it missed. Anything older has
to come from the session on disk: the stream then sends a `resync` event instead (built by the
caller), so memory never grows with the number of tokens ever streamed.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

HEARTBEAT = b": ping\n\n"
GAP = "gap"
CLOSED = "closed"


def frame(event: dict, event_id: str) -> bytes:
    """One SSE frame; json.dumps never emits a raw newline, so `data:` stays one line."""
    name = re.sub(r"[^a-z_]", "", str(event.get("type", "message"))) or "message"
    data = json.dumps(event, ensure_ascii=False, default=str)
    return f"id: {event_id}\nevent: {name}\ndata: {data}\n\n".encode()


class Subscriber:
    """One open stream; `closed` holds the reason when the hub ends it."""

    def __init__(self) -> None:
        self.closed = ""
        self.opened = time.monotonic()


class EventHub:
    """Bounded, numbered buffer of SSE frames with blocking readers."""

    def __init__(self, max_events: int = 4096, max_bytes: int = 8 << 20, max_streams: int = 16):
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_streams = max_streams
        self.boot = secrets.token_hex(4)
        self._cond = threading.Condition()
        self._frames: deque[tuple[int, bytes]] = deque()
        self._bytes = 0
        self._last = 0
        self._subscribers: list[Subscriber] = []

    # ------------------------------------------------------------------ writing

    def publish(self, event: dict) -> int:
        """Store and wake every reader; returns the event's number."""
        with self._cond:
            self._last += 1
            data = frame(event, self.event_id(self._last))
            self._frames.append((self._last, data))
            self._bytes += len(data)
            while len(self._frames) > 1 and (
                len(self._frames) > self.max_events or self._bytes > self.max_bytes
            ):
                _, old = self._frames.popleft()
                self._bytes -= len(old)
            self._cond.notify_all()
            return self._last

    def event_id(self, number: int) -> str:
        return f"{self.boot}-{number}"

    def parse_id(self, raw: str | None) -> int | None:
        """The event number of an id from this server process, else None."""
        boot, _, number = (raw or "").strip().partition("-")
        if boot != self.boot or not number.isdigit():
            return None
        value = int(number)
        return value if value <= self.last else None

    # ------------------------------------------------------------------ reading

    @property
    def last(self) -> int:
        with self._cond:
            return self._last

    @property
    def oldest(self) -> int:
        """Number of the oldest event still held (last + 1 when empty)."""
        with self._cond:
            return self._frames[0][0] if self._frames else self._last + 1

    def holds_after(self, cursor: int) -> bool:
        """True when every event after `cursor` is still in the buffer."""
        return cursor + 1 >= self.oldest

    @property
    def size(self) -> tuple[int, int]:
        with self._cond:
            return len(self._frames), self._bytes

    def subscribe(self) -> Subscriber:
        """Register a stream; past `max_streams`, the oldest stream is closed to make room."""
        sub = Subscriber()
        with self._cond:
            self._subscribers.append(sub)
            while len(self._subscribers) > self.max_streams:
                self._subscribers.pop(0).closed = "superseded"
            self._cond.notify_all()
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._cond:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    @property
    def streams(self) -> int:
        with self._cond:
            return len(self._subscribers)

    def wait(self, sub: Subscriber, cursor: int, timeout: float) -> tuple[bytes, int] | str | None:
        """Frames after `cursor` and the new cursor; GAP when some were dropped, CLOSED when
        the stream must end, None when nothing came within `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not sub.closed and self._last <= cursor:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if sub.closed:
                return CLOSED
            oldest = self._frames[0][0] if self._frames else self._last + 1
            if cursor + 1 < oldest:
                return GAP
            start = cursor + 1 - oldest
            data = b"".join(f for _, f in itertools.islice(self._frames, start, None))
            return data, self._last

    def close(self, reason: str = "shutdown") -> None:
        """End every open stream (server shutdown)."""
        with self._cond:
            for sub in self._subscribers:
                sub.closed = reason
            self._subscribers.clear()
            self._cond.notify_all()


def stream(
    hub: EventHub,
    cursor: int,
    prelude: bytes,
    resync: Callable[[], tuple[bytes, int]],
    *,
    heartbeat: float = 15.0,
    disconnected: Callable[[], bool] = lambda: False,
    poll: float = 1.0,
) -> Iterator[bytes]:
    """The body of one /api/stream response: replay, then live frames and heartbeats.

    `resync()` returns a frame telling the page to reload the session from disk, and the
    cursor it corresponds to; it is used when this reader fell behind the buffer.
    """
    sub = hub.subscribe()
    try:
        yield b"retry: 1500\n\n" + prelude
        quiet = 0.0
        while True:
            got = hub.wait(sub, cursor, min(poll, heartbeat))
            if got == CLOSED:
                payload = json.dumps({"type": "closed", "reason": sub.closed})
                yield f"event: closed\ndata: {payload}\n\n".encode()
                return
            if got == GAP:
                data, cursor = resync()
                yield data
                quiet = 0.0
            elif got is None:
                if disconnected():
                    return
                quiet += min(poll, heartbeat)
                if quiet >= heartbeat:
                    yield HEARTBEAT
                    quiet = 0.0
            else:
                data, cursor = got
                yield data
                quiet = 0.0
    finally:
        hub.unsubscribe(sub)
