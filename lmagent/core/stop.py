"""Stopping a run from another thread, a signal handler or a time budget."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

# --------------------------------------------------------------------------- stopping


class StopToken:
    """Cooperative cancellation shared by the loop, the LLM stream, commands and sub-agents."""

    def __init__(self, parent: StopToken | None = None):
        self.event = threading.Event()
        self.reason = ""
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        if parent is not None:
            parent.add_callback(lambda: self.stop(parent.reason))

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def stop(self, reason: str = "stopped by the user") -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.reason = reason
            self.event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            with contextlib.suppress(Exception):
                callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            already = self.event.is_set()
            if not already:
                self._callbacks.append(callback)
        if already:
            callback()
        return callback

    def remove_callback(self, callback: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    @contextlib.contextmanager
    def on_stop(self, callback: Callable[[], None]) -> Iterator[None]:
        """Run `callback` if a stop is requested while the block runs."""
        self.add_callback(callback)
        try:
            yield
        finally:
            self.remove_callback(callback)

    def wait(self, seconds: float) -> bool:
        return self.event.wait(seconds)
