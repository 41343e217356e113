"""Helpers shared by the benchmarks: the result shape, statistics, timers, a temporary workspace,
a config for it, and the scripted OpenAI-compatible server from tests/.

Every benchmark module's `run()` returns `result(name, [figure(...), ...], notes)`:

    {"name": "loop", "title": "...", "notes": "...",
     "figures": [{"name", "value", "unit", "target", "met"}]}

`target` is a readable string ("≤ 2 ms") or None for a figure given for context; `met` is
True/False, or None when there is no target.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tests.scripted_llm as scripted
from tests.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "ROOT",
    "WORDS",
    "ScriptedLLM",
    "at_most",
    "figure",
    "make_config",
    "median",
    "percentile",
    "result",
    "scripted",
    "scripted_server_process",
    "temp_workspace",
    "time_call",
    "time_repeated",
]

# Identifiers to make source-like text from (sessions, file trees).
WORDS = (  # noqa: SIM905 - one readable line of words
    "value result config session message handler request response index buffer token path "
    "client server error retry stream parse render update delete create append record state"
).split()


# --------------------------------------------------------------------------- the result shape


def figure(
    name: str, value: float, unit: str = "", target: str | None = None, met: bool | None = None
) -> dict:
    """One measured figure; without a target it is given for context."""
    return {"name": name, "value": value, "unit": unit, "target": target, "met": met}


def at_most(name: str, value: float, unit: str, limit: float) -> dict:
    """A figure whose target is `value <= limit`."""
    return figure(name, value, unit, f"≤ {limit:g} {unit}".rstrip(), value <= limit)


def result(name: str, figures: list[dict], notes: str = "", title: str = "") -> dict:
    return {"name": name, "title": title, "figures": figures, "notes": notes.strip()}


class ResultShapeError(ValueError):
    """run() returned something other than the common result shape."""


SHAPE = "{'name', 'figures': [{'name', 'value', 'unit', 'target', 'met'}], 'notes'}"


def check_result(data: object) -> dict:
    """The result in the common shape, or ResultShapeError saying what is wrong with it."""
    if not isinstance(data, dict):
        raise ResultShapeError(f"run() returned a {type(data).__name__}; expected {SHAPE}")
    figures = data.get("figures")
    if not isinstance(figures, list):
        keys = ", ".join(map(str, data)) or "none"
        raise ResultShapeError(
            f"run() returned a dict without a 'figures' list (its keys: {keys}); expected "
            f"{SHAPE}, as built by bench.common.result() and figure()"
        )
    for index, item in enumerate(figures):
        if not isinstance(item, dict) or "name" not in item or "value" not in item:
            raise ResultShapeError(
                f"figure #{index} needs at least 'name' and 'value': {item!r:.200}"
            )
        item.setdefault("unit", "")
        item.setdefault("target", None)
        item.setdefault("met", None)
    data.setdefault("notes", "")
    data.setdefault("title", "")
    return data


# --------------------------------------------------------------------------- statistics and timing


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: list[float]) -> float:
    return percentile(values, 50)


def time_call(function: Callable[[], object]) -> tuple[float, object]:
    """(seconds, return value) of one call."""
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def time_repeated(function: Callable[[], object], times: int, warmup: int = 1) -> list[float]:
    """Seconds of each of `times` calls, after `warmup` untimed calls."""
    for _ in range(warmup):
        function()
    return [time_call(function)[0] for _ in range(times)]


# --------------------------------------------------------------------------- workspace and config


@contextlib.contextmanager
def temp_workspace(prefix: str = "lmagent-bench-", parent: str | None = None) -> Iterator[Path]:
    """A fresh, resolved temporary directory, removed afterwards; the parent is `parent`, else
    $BENCH_TMP, else the system's temporary directory."""
    parent = parent or os.environ.get("BENCH_TMP") or None
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent)).resolve()
    try:
        yield directory
    finally:
        remove_sandbox(directory)
        shutil.rmtree(directory, ignore_errors=True)


def remove_sandbox(workspace: Path) -> None:
    """A benchmark whose agent ran commands on Docker leaves the workspace's persistent
    container behind; it goes with the workspace (without Docker there is nothing to remove)."""
    from lmagent.sandbox.docker import remove_containers

    with contextlib.suppress(Exception):
        remove_containers(workspace=workspace)


def make_config(workspace: Path, llm: ScriptedLLM | str | None = None, **changes):
    """A Config for `workspace` talking to `llm` (a ScriptedLLM or a URL), independent of the
    user's environment."""
    from lmagent.core.config import Config

    url = llm.url if isinstance(llm, ScriptedLLM) else llm
    environ = {
        "WORKSPACE": str(workspace),
        "LLM_URL": url or "http://127.0.0.1:9/v1/chat/completions",
        "PERMISSION_MODE": "auto",
        "LLM_RETRY_DELAY": "0.01",
        "LLM_RETRIES": "1",
        "ENABLE_MCP": "false",
    }
    config = Config.load(environ=environ, cwd=workspace)
    return config.with_changes(**changes) if changes else config


# --------------------------------------------------------------------------- a server process


@contextlib.contextmanager
def scripted_server_process(turn: str, instant: bool = False) -> Iterator[str]:
    """The scripted server in a separate process (as a real LLM server is: no shared GIL),
    answering every request with the callable `turn` ("module:function"); yields its chat URL.

    Nagle's algorithm is switched off on its sockets, as real servers do; otherwise a
    kept-alive connection meets the 40 ms delayed-ACK stall on every streamed reply.

    instant=True serves with `_serve_instant` instead: `turn` gets the raw request bytes."""
    serve = "_serve_instant" if instant else "_serve"
    code = f"from bench.common import {serve}; {serve}({turn!r})"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the scripted server did not start (said {url!r})")
        yield url
    finally:
        process.stdin.close()  # the server exits when its stdin closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(turn: str) -> None:
    module, _, name = turn.partition(":")
    function = getattr(importlib.import_module(module), name)
    scripted._Handler.disable_nagle_algorithm = True  # a socketserver option, off by default
    with ScriptedLLM([function] * 1_000_000) as llm:
        llm.requests = collections.deque(maxlen=1)  # keep no request bodies: they only grow
        print(llm.url, flush=True)
        sys.stdin.read()


def _serve_instant(turn: str) -> None:
    """A streaming chat-completions server that does no work of its own, for measuring the
    agent's overhead: it reads each request's bytes without parsing them, asks `turn(raw)` for
    the reply (a scripted turn with its usage given) and streams it as ScriptedLLM does: one
    chunk per SSE event, tool-call arguments split across chunks, then [DONE]."""
    module, _, name = turn.partition(":")
    function = getattr(importlib.import_module(module), name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=_accept, args=(listener, function), daemon=True).start()
    print(f"http://127.0.0.1:{port}/v1/chat/completions", flush=True)
    sys.stdin.read()


def _accept(listener: socket.socket, function: Callable[[bytes], dict]) -> None:
    while True:
        connection, _ = listener.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_answer, args=(connection, function), daemon=True).start()


def _answer(connection: socket.socket, function: Callable[[bytes], dict]) -> None:
    """Answer the requests of one kept-alive connection until the client closes it."""
    with connection, connection.makefile("rb") as reader:
        while True:
            length = -1
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if not line or length < 0:
                return
            turn = function(reader.read(length))
            calls = scripted.ScriptedLLM.tool_calls_of(turn, 0)
            ident = ("instant-model", "chatcmpl-instant", int(time.time()))
            body = {"stream_options": {"include_usage": True}}
            events = scripted.stream_chunks(turn, body, calls, turn["usage"], ident, 3, 4)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for event in [*(json.dumps(e).encode() for e in events), b"[DONE]"]:
                data = b"data: " + event + b"\n\n"
                connection.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            connection.sendall(b"0\r\n\r\n")


def model_cache(home: Path) -> Path:
    """`home` as an XDG_CACHE_HOME holding a link to the bundled model, so an `--embedded` run
    given it fetches nothing (its saved prompts go there too)."""
    from lmagent.llm.embedded import DEFAULT_MODEL, resolve_model

    models = home / "lmagent" / "models"
    if not (models / DEFAULT_MODEL.file).exists():
        models.mkdir(parents=True, exist_ok=True)
        (models / DEFAULT_MODEL.file).symlink_to(resolve_model())
    return home
