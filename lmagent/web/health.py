"""Is the LLM server there? What the web page's header shows, rechecked while people look.

States: "reachable" (a model is loaded), "loading" (the server answers but reports no loaded
model yet), "unreachable" (nothing answers at LLM_URL: the message is the CLI's guidance).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lmagent.core.config import Config
from lmagent.llm.probe import ModelInfo, probe_model, unreachable_message

NO_MODEL = (
    "the server at {url} answers but has no model loaded yet; load one (LM Studio: My Models → "
    "Load), or the first task waits while the server loads it"
)


class ServerHealth:
    """The server's state, probed at most every `interval` seconds: a question that finds the
    last answer older waits for a fresh probe (2 s at most), so a server that stopped is seen at
    the page's next check; questions meanwhile get the last answer."""

    def __init__(
        self,
        config: Config,
        interval: float = 2.0,
        probe: Callable[[Config], ModelInfo] = lambda config: probe_model(config, timeout=2.0),
    ):
        self.config = config
        self.interval = interval
        self._probe = probe
        self._lock = threading.Lock()
        self._state: dict | None = None
        self._checked = 0.0
        self._checking = False
        self._first = threading.Event()  # set once the first probe has answered

    def current(self) -> dict:
        with self._lock:
            state, stale = self._state, time.monotonic() - self._checked >= self.interval
            start = stale and not self._checking
            if start:
                self._checking = True
        if start:
            return self.check()
        if state is None:
            self._first.wait()
            return self._state
        return state

    def check(self) -> dict:
        try:
            state = describe(self.config, self._probe(self.config))
        except Exception as exc:  # a probe must never break the page
            state = {"state": "unreachable", "model": "", "message": f"probe failed: {exc}"}
        state["url"] = self.config.llm_url
        with self._lock:
            self._state, self._checked, self._checking = state, time.monotonic(), False
        self._first.set()
        return state


def describe(config: Config, info: ModelInfo) -> dict:
    """The header's words for what a probe found."""
    if not info.reachable:
        return {"state": "unreachable", "model": "", "message": unreachable_message(config.llm_url)}
    model = config.llm_model or info.name
    if not info.model_id:
        return {"state": "loading", "model": model, "message": NO_MODEL.format(url=config.llm_url)}
    return {"state": "reachable", "model": model, "message": ""}
