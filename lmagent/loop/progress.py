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


SLOW_STEP = 60.0  # seconds of reading a prompt that are said before it starts
STEADY_READ = 32  # prompt tokens a reading speed is measured on at least (fewer: mostly cache)
FASTER = (
    "a smaller model (LLM_MODEL; EMBEDDED_MODEL with --embedded) or a shorter context "
    "(a lower SUMMARIZATION_THRESHOLD) is faster"
)


class Speeds:
    """The model's speeds as the server measures them (llama.cpp's `timings`): said once,
    after the first reply that reports them, and a step whose prompt will take longer than
    SLOW_STEP seconds to read at that speed is said once, before it starts."""

    def __init__(self):
        self.reading = 0.0  # prompt tokens per second
        self.writing = 0.0  # generated tokens per second
        self.known = 0  # tokens the server holds from the last exchange (read again for free)
        self.warned = False

    def measured(self, timings: dict, prompt_tokens: int, reply_tokens: int) -> str:
        """Take a reply's `timings`; the line saying the speeds the first time, else ""."""
        first = not (self.reading or self.writing)
        self.known = prompt_tokens + reply_tokens
        reading, writing = _rate(timings, "prompt"), _rate(timings, "predicted")
        if reading and (_count(timings.get("prompt_n")) >= STEADY_READ or not self.reading):
            self.reading = reading
        self.writing = writing or self.writing
        if not first or not (self.reading or self.writing):
            return ""
        said = [f"reading {rate(self.reading)} tokens/s"] if self.reading else []
        said += [f"writing {rate(self.writing)} tokens/s"] if self.writing else []
        return "model speed: " + ", ".join(said)

    def slow_step(self, prompt_tokens: int) -> str:
        """Before a prompt of `prompt_tokens`: how long reading it will take, once, when that
        is more than SLOW_STEP seconds at the measured speed; else ""."""
        new = prompt_tokens - self.known if prompt_tokens >= self.known else prompt_tokens
        if self.warned or not self.reading or new / self.reading <= SLOW_STEP:
            return ""
        self.warned = True
        minutes = max(1, round(new / self.reading / 60))
        return (
            f"this step will take about {minutes} min at this speed (reading ~{new:,} tokens at "
            f"{self.reading:.0f} tokens/s); {FASTER}"
        )


def _rate(timings: dict, kind: str) -> float:
    """Tokens per second of `kind` ("prompt" or "predicted") the server reported, or 0."""
    value = timings.get(f"{kind}_per_second")
    return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0


def rate(per_second: float) -> str:
    """A speed as people read it: whole numbers from 10 up, one decimal below (1.4, not 1)."""
    return f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.1f}"
