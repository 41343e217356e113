"""Helpers for the web tests (no tests here): the real app on the real server, and an SSE reader.

`WebHarness` serves `agent_web.create_app` with waitress on 127.0.0.1 and a free port in a
thread, exactly as `python agent_web.py` does; `EventReader` follows /api/stream in a thread so a
test can wait for an event instead of sleeping.
"""

from __future__ import annotations

import contextlib
import http.client as http_client
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

import requests

from lmagent.web.app import create_app
from lmagent.web.server import WebServer

PIN = "24681357"
# Debian's Chromium driven by Playwright (never a downloaded browser); the flags keep it from
# reaching for the network at start
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class WebHarness:
    def __init__(self, config, pin: str = PIN, runtime=None, **test_config):
        self.pin = pin
        self.config = config
        self.app = create_app(config, {"PIN": pin, **test_config}, runtime=runtime)
        self.server = WebServer(self.app, "127.0.0.1", 0).start()
        self.base = f"http://127.0.0.1:{self.server.port}"

    @property
    def state(self):
        return self.app.extensions["lmagent"]

    def session(self) -> requests.Session:
        """A signed-in HTTP client (cookie)."""
        http = requests.Session()
        response = http.post(self.base + "/api/login", json={"pin": self.pin}, timeout=5)
        assert response.status_code == 200, response.text
        return http

    def stream(self, http: requests.Session, **kw) -> EventReader:
        return EventReader(http, self.base + "/api/stream", **kw)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Until no run is active and the last run's thread has finished."""
        deadline = time.monotonic() + timeout
        runs = self.state.runs
        while time.monotonic() < deadline:
            last = runs.last
            if runs.active is None and (last is None or last.finished.wait(0.05)):
                return
            time.sleep(0.02)
        raise AssertionError("the run did not finish")

    def close(self) -> None:
        self.server.shutdown(timeout=5)

    def __enter__(self) -> WebHarness:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EventReader:
    """Reads Server-Sent Events in a background thread (http.client, so close() can shut the
    socket down at once instead of waiting for a blocked read to time out)."""

    def __init__(
        self,
        http: requests.Session,
        url: str,
        headers: dict | None = None,
        params: dict | None = None,
    ):
        parts = urlsplit(url)
        target = parts.path + (f"?{urlencode(params)}" if params else "")
        cookies = "; ".join(f"{c.name}={c.value}" for c in http.cookies)
        self.connection = http_client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.connection.connect()
        self.socket = self.connection.sock
        self.connection.request("GET", target, headers={"Cookie": cookies, **(headers or {})})
        self.response = self.connection.getresponse()
        self.events: list[dict] = []  # {"id", "event", "data"} with data decoded
        self.comments: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer = b""
        current: dict = {}
        try:
            while chunk := self.response.read1(65536):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    current = self._line(line.decode("utf-8"), current)
        except (OSError, ValueError, http_client.HTTPException):
            pass
        finally:
            with self._cond:
                self.ended = True
                self._cond.notify_all()

    def _line(self, line: str, current: dict) -> dict:
        if not line:
            if "data" in current:
                current["data"] = json.loads(current["data"])
                with self._cond:
                    self.events.append(current)
                    self._cond.notify_all()
            return {}
        if line.startswith(":"):
            with self._cond:
                self.comments.append(line)
                self._cond.notify_all()
            return current
        name, _, value = line.partition(":")
        current[name] = value[1:] if value.startswith(" ") else value
        return current

    ended = False

    def wait_for(self, match: Callable[[dict], bool], timeout: float = 10.0) -> dict:
        """The first event (dict with id/event/data) for which match(event) is true."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: any(match(e) for e in self.events) or self.ended, timeout
            ):
                raise AssertionError(f"no matching event within {timeout}s: {self.types()}")
            for event in self.events:
                if match(event):
                    return event
        raise AssertionError(f"the stream ended without a matching event: {self.types()}")

    def wait_type(self, kind: str, timeout: float = 10.0, **fields) -> dict:
        return self.wait_for(
            lambda e: e["event"] == kind and all(e["data"].get(k) == v for k, v in fields.items()),
            timeout,
        )

    def types(self) -> list[str]:
        with self._cond:
            return [e["event"] for e in self.events]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self._thread.join(5)
