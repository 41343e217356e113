"""Signs of life while nothing else is shown: `progress` events while the model reads the
prompt (before its first token) and while a tool runs.

A `Ticker` emits one event at once (or after `first` seconds), then one every `every` seconds,
and a last one with `done: true`; `update` adds what the server reports (llama.cpp streams how
much of the prompt it has read), from which the tokens per second and the time left follow.
The event: {"type": "progress", "phase": "prompt" | "tool", "elapsed": s, "tokens"?: prompt
size, "processed"?/"total"?: prompt tokens read of all, "eta"?: s left, "name"?: tool, "done"?}.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

TICK_EVERY = 1.0  # seconds between two progress events
TOOL_FIRST = 1.0  # a tool's first event: only one that runs longer than this is shown


class Ticker:
    """Progress events for one phase, from a thread of its own until `stop`."""

    def __init__(
        self,
        emit: Callable[..., None],
        phase: str,
        *,
        first: float = 0.0,
        every: float = TICK_EVERY,
        **fields,
    ):
        self.emit = emit
        self.fields = {"phase": phase, **fields}
        self.first = first
        self.every = every
        self.started = time.monotonic()
        self.emitted = False
        self.left: tuple[float, float] | None = None  # (seconds left, when the server said so)
        self.stopped = threading.Event()
        self.lock = threading.Lock()  # no tick after stop() has returned
        self.thread = threading.Thread(target=self._tick, name=f"progress-{phase}", daemon=True)

    def __enter__(self) -> Ticker:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        if self.first <= 0:
            self._send()
        self.thread.start()

    def update(self, reported: dict) -> None:
        """What the server says of its reading (llama.cpp's `prompt_progress`)."""
        total, processed = _count(reported.get("total")), _count(reported.get("processed"))
        if not total:
            return
        fields = {"total": total, "processed": min(processed, total)}
        cache = _count(reported.get("cache"))
        seconds = _count(reported.get("time_ms")) / 1000
        with self.lock:
            if processed > cache and seconds > 0:
                rate = (processed - cache) / seconds
                self.left = ((total - processed) / rate, time.monotonic())
            self.fields.update(fields)
        self._send()

    def stop(self) -> None:
        """End the phase: a last event (done) when any was shown, none after this returns."""
        with self.lock:
            if self.stopped.is_set():
                return
            self.stopped.set()
        if self.emitted:
            self.emit("progress", **self.fields, elapsed=self.elapsed(), done=True)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def _tick(self) -> None:
        if self.first > 0 and not self.stopped.wait(self.first):
            self._send()
        while not self.stopped.wait(self.every):
            self._send()

    def _send(self) -> None:
        with self.lock:
            if self.stopped.is_set():
                return
            self.emitted = True
            self.emit("progress", **self.fields, **self.time_left(), elapsed=self.elapsed())

    def time_left(self) -> dict:
        """{"eta": seconds} from the server's last report, counted down since; {} without."""
        if self.left is None:
            return {}
        seconds, since = self.left
        return {"eta": round(max(0.0, seconds - (time.monotonic() - since)), 1)}


def _count(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0
