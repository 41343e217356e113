"""A scripted OpenAI-compatible chat-completions HTTP server for tests.

``ScriptedLLM`` is a real HTTP/1.1 server (stdlib ``ThreadingHTTPServer``) bound to
127.0.0.1 on a random port.  Every POST to ``/v1/chat/completions`` consumes the next
scripted *turn* (in order, under a lock) and answers with the real wire format used by
OpenAI, LM Studio and llama.cpp: a ``chat.completion`` JSON object, or, when the request
has ``"stream": true``, Server-Sent Events sent with ``Transfer-Encoding: chunked``.

Usage::

    from tests.scripted_llm import ScriptedLLM, text, tool_call

    with ScriptedLLM([tool_call("read", {"path": "a.txt"}), text("done")]) as llm:
        run_agent(base_url=llm.base_url)
        llm.assert_all_used()
        assert llm.requests[1]["messages"][-1]["role"] == "tool"

A turn is a dict (or a callable ``body -> dict``).  Keys:

Normal replies
    ``content``         assistant text (str or None)
    ``reasoning``       ``reasoning_content`` text, streamed before the content
    ``tool_calls``      list of ``{"name", "arguments": dict | raw str, "id": optional}``
                        (the OpenAI ``{"id", "function": {"name", "arguments"}}`` shape is
                        accepted too); default ids are ``call_<request#>_<index>``
    ``usage``           usage dict; default is computed (about 4 characters per token).
                        Streaming sends a usage chunk when this is given or the request sets
                        ``stream_options.include_usage``.  ``False`` never sends usage.
    ``timings``         llama.cpp's `timings` object (``prompt_n``, ``prompt_per_second``,
                        ``predicted_n``, ``predicted_per_second``...): sent on the last chunk
                        of a stream (the one with the finish reason), or in a whole reply
    ``finish_reason``   default ``"tool_calls"`` when there are tool calls, else ``"stop"``
    ``model``           model name in the reply (default: the request's ``model``)
    ``chunk_size``      characters per content/reasoning chunk (default: server's; 0 = all
                        in one chunk), or a function ``str -> list[str]`` that splits a text
    ``args_chunk_size`` the same for each tool call's ``arguments`` (default 4)
    ``one_event``       the whole reply (reasoning, content, tool calls with their complete
                        arguments, finish reason) in a single stream event
    ``repeat_id_name``  every tool-call delta repeats id, type and name (llama-cpp-python)
    ``no_done``         the stream ends cleanly but without ``data: [DONE]``
    ``empty``           200 reply with no choices content at all: a stream holding only
                        ``data: [DONE]`` (nothing at all with ``no_done``); non-stream
                        ``"choices": []``
    ``drop_after``      N: send the role chunk plus N further chunks, then shut the socket
                        down mid-body (no [DONE], no terminating HTTP chunk), so the client
                        sees a broken stream.  Non-stream: half the JSON body, then close.
    ``end_after``       N: send the role chunk plus N further chunks, then end the response
                        cleanly (terminating HTTP chunk) with no finish reason and no
                        ``[DONE]``: a stream closed mid-reply.  Streamed replies only.
Errors
    ``status``          any HTTP status; ``body`` is sent as JSON (dict/list) or text (str;
                        JSON content type when the string parses as JSON).  ``headers``
                        adds response headers (e.g. ``Retry-After``).
    ``progress``        llama.cpp's prompt progress, streamed before the reply when the request
                        sets ``return_progress``: a list of ``{"total", "cache", "processed",
                        "time_ms"}``, one chunk each, ``progress_delay`` seconds apart (default 0.5)
Any turn
    ``delay``           seconds to wait before replying (added to the server's ``delay``)
    ``chunk_delay``     seconds to wait between stream chunks (default: server's)
    ``expect``          ``callable(body)``; an exception there is recorded and re-raised by
                        ``assert_all_used()``; the reply is sent regardless

Waits end early when the client disconnects (counted in ``.disconnects``) or when the
server stops, so a delayed turn never holds up ``stop()``.

When the script runs out the server answers HTTP 500 ``{"error": "scripted LLM: no turns
left"}``, sets ``.exhausted`` and keeps the body in ``.unscripted``.

Other endpoints: ``GET /v1/models`` (OpenAI list; each entry carries llama.cpp's ``meta``
when ``model_meta`` is given, e.g. ``{"n_params": 1543714304}``), ``GET /api/v0/models`` and
``/api/v0/models/<id>`` (LM Studio; 404 with ``models=False``, or with ``openai_only=True``,
which lists ``models`` on ``/v1/models`` alone, as vLLM does), ``GET /api/v1/models``
(LM Studio 0.4+: the same models by ``key``, with any ``params_string`` an entry gives),
``GET /props`` (llama.cpp; 404 unless ``props`` is given), and Ollama's ``GET /api/tags``,
``GET /api/ps`` and ``POST /api/show`` when ``ollama`` is given (see ``OllamaModel``; pass
``models=False`` too, as Ollama has no LM Studio endpoints).  The bodies of POSTs other than
chat requests are kept in ``.posts`` as ``(path, body)``; ``POST /slots/0?action=save|restore``
(llama.cpp) answers when ``slot_save_path`` is given, else 501 as llama.cpp does without
``--slot-save-path``.  Anything else, and HEAD, is 404.
"""

from __future__ import annotations

import contextlib
import copy
import json
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_ID",
    "DEFAULT_PROPS",
    "NO_TURNS_LEFT",
    "OllamaModel",
    "ScriptedLLM",
    "call",
    "context_overflow",
    "drop",
    "error",
    "loading",
    "props_without_tools",
    "text",
    "tool_call",
    "tool_calls",
]

DEFAULT_MODEL_ID = "scripted-model"
DEFAULT_MODEL: dict[str, Any] = {
    "id": DEFAULT_MODEL_ID,
    "object": "model",
    "type": "llm",
    "state": "loaded",
    "max_context_length": 32768,
    "loaded_context_length": 8192,
    "capabilities": ["tool_use"],
}
DEFAULT_PROPS: dict[str, Any] = {
    "default_generation_settings": {
        "id": 0,
        "n_ctx": 8192,
        "params": {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "n_predict": -1},
    },
    "total_slots": 1,
    "model_path": f"/models/{DEFAULT_MODEL_ID}.gguf",
    "chat_template": "",
    "modalities": {"vision": False},
    "build_info": "scripted",
}
NO_TURNS_LEFT: dict[str, Any] = {"error": "scripted LLM: no turns left"}
SLOTS_NOT_SUPPORTED: dict[str, Any] = {
    "error": {
        "code": 501,
        "message": "This server does not support slots action. Start it with `--slot-save-path`",
        "type": "not_supported_error",
    }
}


def props_without_tools() -> dict[str, Any]:
    """/props of a llama.cpp server whose model's chat template knows no tools (SmolLM2's)."""
    return {
        "default_generation_settings": {"n_ctx": 8192},
        "model_alias": "tiny",
        "chat_template_caps": {"supports_tools": False},
    }


@dataclass(frozen=True)
class OllamaModel:
    """The one model an Ollama server answers for, as its native API describes it."""

    name: str  # as `ollama pull` names it: "qwen2.5-coder:1.5b"
    parameter_size: str  # details.parameter_size: "1.5B"
    loaded_context: int | None = None  # /api/ps context_length; None: not loaded
    num_ctx: int | None = None  # `PARAMETER num_ctx` in its Modelfile; None: not set

    def tags(self) -> dict[str, Any]:
        return {"models": [{"name": self.name, "model": self.name, "details": self.details()}]}

    def ps(self) -> dict[str, Any]:
        if self.loaded_context is None:
            return {"models": []}
        entry = {"name": self.name, "model": self.name, "details": self.details()}
        return {"models": [{**entry, "context_length": self.loaded_context}]}

    def show(self) -> dict[str, Any]:
        parameters = f"num_ctx {self.num_ctx}\nstop <|im_end|>" if self.num_ctx else ""
        return {"details": self.details(), "parameters": parameters, "model_info": {}}

    def details(self) -> dict[str, Any]:
        return {
            "format": "gguf",
            "parameter_size": self.parameter_size,
            "quantization_level": "Q4_K_M",
        }


CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")

_TURN_KEYS = frozenset(
    {
        "content",
        "reasoning",
        "tool_calls",
        "usage",
        "timings",
        "finish_reason",
        "model",
        "chunk_size",
        "args_chunk_size",
        "one_event",
        "repeat_id_name",
        "no_done",
        "empty",
        "drop_after",
        "end_after",
        "status",
        "body",
        "headers",
        "delay",
        "chunk_delay",
        "progress",
        "progress_delay",
        "expect",
    }
)

Turn = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
Splitting = int | Callable[[str], list[str]]  # characters per stream chunk, or a splitter


# --------------------------------------------------------------------------- turn helpers


def text(content: str, **kw: Any) -> dict[str, Any]:
    """A plain assistant reply, e.g. ``text("hi", reasoning="thinking...")``."""
    return {"content": content, **kw}


def call(name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None):
    """One entry for a ``tool_calls`` list."""
    entry: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if id is not None:
        entry["id"] = id
    return entry


def tool_call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    id: str | None = None,
    content: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """A reply holding a single tool call."""
    return {"content": content, "tool_calls": [call(name, arguments, id)], **kw}


def tool_calls(*calls: dict[str, Any], content: str | None = None, **kw: Any) -> dict[str, Any]:
    """A reply holding several tool calls: ``tool_calls(call("a", {}), call("b", {}))``."""
    return {"content": content, "tool_calls": list(calls), **kw}


def error(status: int, body: Any = None, **kw: Any) -> dict[str, Any]:
    """An HTTP error reply; ``body`` defaults to ``{"error": {"message": ...}}``."""
    if body is None:
        body = {"error": {"message": f"scripted HTTP {status}"}}
    return {"status": status, "body": body, **kw}


def loading(**kw: Any) -> dict[str, Any]:
    """503 "Model is loading" (llama.cpp while the model loads)."""
    return error(503, {"error": "Model is loading"}, **kw)


def context_overflow(n_ctx: int = 8192, **kw: Any) -> dict[str, Any]:
    """400 context-length error as sent by LM Studio / llama.cpp."""
    message = (
        f"the request exceeds the available context size ({n_ctx} tokens), "
        "try increasing the context length"
    )
    return error(
        400,
        {"error": {"message": message, "type": "exceed_context_size_error", "n_ctx": n_ctx}},
        **kw,
    )


def drop(content: str, after: int = 1, **kw: Any) -> dict[str, Any]:
    """A streamed reply that breaks off after ``after`` content chunks."""
    return {"content": content, "drop_after": after, **kw}


# --------------------------------------------------------------------------- internals


def _check_turn(turn: Any) -> None:
    if callable(turn):
        return
    if not isinstance(turn, dict):
        raise TypeError(f"a scripted turn must be a dict or a callable, got {turn!r}")
    unknown = set(turn) - _TURN_KEYS
    if unknown:
        raise ValueError(f"unknown scripted turn key(s) {sorted(unknown)} in {turn!r}")
    if "status" in turn and not isinstance(turn["status"], int):
        raise TypeError(f"turn status must be an int: {turn!r}")
    for c in turn.get("tool_calls") or ():
        if not isinstance(c, dict) or not ("name" in c or "function" in c):
            raise ValueError(f"a tool call needs a name: {c!r}")
    if turn.get("expect") is not None and not callable(turn["expect"]):
        raise TypeError("turn 'expect' must be callable")


def _describe(turn: Turn) -> str:
    if callable(turn):
        return f"<callable {getattr(turn, '__name__', type(turn).__name__)}>"
    shown = {k: v for k, v in turn.items() if k != "expect"}
    if "expect" in turn:
        shown["expect"] = "<callable>"
    out = repr(shown)
    return out if len(out) <= 120 else out[:117] + "..."


def _split(s: str, size: Splitting) -> list[str]:
    if not s:
        return []
    if callable(size):
        pieces = size(s)
        if "".join(pieces) != s:
            raise ValueError(f"the splitter {size!r} does not give back the whole text")
        return pieces
    if not size or size <= 0:
        return [s]
    return [s[i : i + size] for i in range(0, len(s), size)]


def _tokens(s: str) -> int:
    return (len(s) + 3) // 4


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _json(obj: Any) -> bytes:
    # Raw UTF-8 like llama.cpp / LM Studio (not \\u escapes).
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


class _ClientGone(Exception):
    """The client disconnected or the server is stopping."""


def stream_chunks(
    turn: dict[str, Any],
    body: dict[str, Any],
    calls: list[dict[str, str]],
    usage: Any,
    ident: tuple[str, str, int],
    size: Splitting,
    args_size: Splitting,
) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed reply to `turn` (ident: model, id,
    created): reasoning and content split by `size`, tool-call arguments by `args_size`
    (characters per piece, or a function; see _split)."""
    model, cid, created = ident

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "scripted",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    content = turn.get("content") or ""
    reasoning = turn.get("reasoning") or ""
    repeat = bool(turn.get("repeat_id_name"))
    finish = ScriptedLLM._finish_reason(turn, calls)

    events: list[dict[str, Any]] = []
    if turn.get("one_event") and not turn.get("empty"):
        events.append(chunk(_whole_message(content, reasoning, calls), finish))
    elif not turn.get("empty"):
        first = "" if (content or reasoning or not calls) else None
        events.append(chunk({"role": "assistant", "content": first}))
        events += [chunk({"reasoning_content": p}) for p in _split(reasoning, size)]
        events += [chunk({"content": p}) for p in _split(content, size)]
        for i, c in enumerate(calls):
            # First delta: id, type and name with empty arguments (as OpenAI does).
            head = {"index": i, "id": c["id"], "type": "function"}
            fn = {"name": c["name"], "arguments": ""}
            events.append(chunk({"tool_calls": [{**head, "function": fn}]}))
            for p in _split(c["arguments"], args_size):
                if repeat:  # llama-cpp-python repeats id and name in every delta
                    delta = {**head, "function": {"name": c["name"], "arguments": p}}
                else:
                    delta = {"index": i, "function": {"arguments": p}}
                events.append(chunk({"tool_calls": [delta]}))
        events.append(chunk({}, finish))
        if turn.get("timings"):  # llama.cpp sends them with the finish reason
            events[-1]["timings"] = turn["timings"]
    if events:
        stream_options = body.get("stream_options") or {}
        if usage is not False and ("usage" in turn or stream_options.get("include_usage") is True):
            events.append(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "scripted",
                    "choices": [],
                    "usage": usage,
                }
            )
    return events


def _whole_message(content: str, reasoning: str, calls: list[dict[str, str]]) -> dict[str, Any]:
    """One delta holding a whole reply."""
    delta: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning:
        delta["reasoning_content"] = reasoning
    if calls:
        delta["tool_calls"] = [
            {
                "index": i,
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(calls)
        ]
    return delta


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, llm: ScriptedLLM, port: int = 0):
        self.llm = llm
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import traceback

        self.llm._record_error(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # stream chunks go out at once, as real servers send them
    server_version = "ScriptedLLM/1.0"
    sys_version = ""
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- connection bookkeeping (so stop() can wake and end every handler)

    def setup(self) -> None:
        super().setup()
        self.server.llm._track(self, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.llm._track(self, False)

    def handle(self) -> None:
        try:
            super().handle()
        except (_ClientGone, OSError):
            self.close_connection = True

    # -- low-level senders

    def send_bytes(
        self, status: int, data: bytes, ctype: str, headers: dict[str, Any] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, status: int, obj: Any, headers: dict[str, Any] | None = None) -> None:
        self.send_bytes(status, _json(obj), "application/json; charset=utf-8", headers)

    def not_found(self) -> None:
        self.send_json(404, {"error": {"message": f"Unexpected endpoint or method. ({self.path})"}})

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def abort(self) -> None:
        """Cut the connection without finishing the response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    # -- routing

    def route(self) -> str:
        path = unquote(urlsplit(self.path).path)
        return path.rstrip("/") or "/"

    def do_GET(self) -> None:
        llm = self.server.llm
        path = self.route()
        if path == "/v1/models":
            self.send_json(200, llm._openai_models())
        elif llm.openai_only:
            self.not_found()
        elif path == "/api/v0/models" and llm._lmstudio_models() is not None:
            self.send_json(200, {"object": "list", "data": llm._lmstudio_models()})
        elif path.startswith("/api/v0/models/") and llm._lmstudio_models() is not None:
            wanted = path[len("/api/v0/models/") :]
            found = [m for m in llm._lmstudio_models() if m.get("id") == wanted]
            if found:
                self.send_json(200, found[0])
            else:
                self.send_json(404, {"error": f'Model "{wanted}" not found'})
        elif path == "/props" and llm._props_payload() is not None:
            self.send_json(200, llm._props_payload())
        elif path == "/api/v1/models" and llm._lmstudio_models() is not None:
            self.send_json(200, llm._lmstudio_v1_models())
        elif path in ("/api/tags", "/api/ps") and llm.ollama is not None:
            self.send_json(200, llm.ollama.tags() if path == "/api/tags" else llm.ollama.ps())
        else:
            self.not_found()

    def do_POST(self) -> None:
        raw = self.read_body()
        llm = self.server.llm
        if self.route() in CHAT_PATHS:
            llm._chat(self, raw)
            return
        if self.route().startswith("/slots/"):
            llm._slot(self, raw)
            return
        with llm._lock:
            llm.posts.append((self.route(), json.loads(raw or b"null")))
        if self.route() == "/api/show" and llm.ollama is not None:
            self.send_json(200, llm.ollama.show())
        else:
            self.not_found()

    def do_HEAD(self) -> None:
        self.not_found()

    def do_PUT(self) -> None:
        self.read_body()
        self.not_found()

    do_DELETE = do_PUT
    do_PATCH = do_PUT


# --------------------------------------------------------------------------- the server


class ScriptedLLM:
    """Scripted OpenAI-compatible chat-completions server.  See the module docstring."""

    def __init__(
        self,
        turns: Iterable[Turn] | None = None,
        *,
        models: Any = None,
        props: Any = None,
        model_meta: dict[str, Any] | None = None,
        ollama: OllamaModel | None = None,
        openai_only: bool = False,
        chunk_size: Splitting = 3,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        args_chunk_size: Splitting = 4,
        slot_save_path: Path | None = None,
    ):
        self.models = models
        self.slot_save_path = slot_save_path  # llama.cpp's --slot-save-path: /slots/0 answers
        self.props = props
        self.model_meta = model_meta
        self.ollama = ollama
        self.openai_only = openai_only
        self.posts: list[tuple[str, Any]] = []  # (path, body) of POSTs that are no chat request
        self.chunk_size = chunk_size
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.args_chunk_size = args_chunk_size

        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []  # each chat request's, names lowercased
        self.unscripted: list[dict[str, Any]] = []  # bodies answered with "no turns left"
        self.exhausted = False
        self.expect_failures: list[tuple[int, BaseException]] = []
        self.errors: list[str] = []  # server-side problems (bad turn, bad JSON body, ...)
        self.disconnects = 0  # replies cut short because the client went away
        self.slot_actions: list[str] = []  # "save" / "restore", in order

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._turns: deque[Turn] = deque()
        self._handlers: set[_Handler] = set()
        self._threads: set[threading.Thread] = set()
        self._in_flight = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._last_port = 0
        self._thread: threading.Thread | None = None
        if turns:
            self.add(*turns)

    # -- lifecycle

    def start(self) -> ScriptedLLM:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(self, self._last_port)  # started again: the same URL
        self._last_port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedLLM:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        with self._lock:
            self._stopping.set()
            handlers = list(self._handlers)
            threads = list(self._threads)
        server.shutdown()  # stop accepting; returns within poll_interval
        for h in handlers:  # wake handlers blocked in select()/readline()
            with contextlib.suppress(OSError):
                h.connection.shutdown(socket.SHUT_RDWR)
        server.server_close()
        deadline = time.monotonic() + 2.0
        for t in [self._thread, *threads]:
            if t is not None and t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None and not self._last_port:
            raise RuntimeError("ScriptedLLM was never started")
        return self._last_port  # also once stopped: the URL a restart serves again

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/chat/completions"

    # -- script

    def add(self, *turns: Turn) -> ScriptedLLM:
        for t in turns:
            _check_turn(t)
        with self._lock:
            self._turns.extend(turns)
        return self

    @property
    def pending(self) -> list[Turn]:
        """Turns not consumed yet."""
        with self._lock:
            return list(self._turns)

    @property
    def last_request(self) -> dict[str, Any]:
        with self._lock:
            if not self.requests:
                raise AssertionError("ScriptedLLM received no requests")
            return self.requests[-1]

    def wait_for_requests(self, n: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` chat requests arrived; AssertionError on timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(
                    f"ScriptedLLM: expected {n} request(s) within {timeout}s, "
                    f"got {len(self.requests)}"
                )
            return list(self.requests)

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Block until no chat reply is being produced; AssertionError on timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight == 0, timeout):
                raise AssertionError(
                    f"ScriptedLLM: {self._in_flight} reply(ies) still in flight after {timeout}s"
                )

    def assert_all_used(self) -> None:
        """Re-raise the first ``expect`` failure, then fail on unused turns, on requests
        that found the script exhausted, and on server-side errors."""
        with self._lock:
            failures = list(self.expect_failures)
            unused = list(self._turns)
            unscripted = len(self.unscripted)
            errors = list(self.errors)
        if failures:
            index, exc = failures[0]
            if hasattr(exc, "add_note"):
                note = f"(ScriptedLLM: 'expect' of the turn for request #{index} failed"
                more = len(failures) - 1
                exc.add_note(note + (f"; {more} more expect failure(s))" if more else ")"))
            raise exc
        problems = []
        if unused:
            listed = "\n  ".join(_describe(t) for t in unused)
            problems.append(f"{len(unused)} unused scripted turn(s):\n  {listed}")
        if self.exhausted:
            problems.append(f"script ran out: {unscripted} request(s) got 'no turns left'")
        if errors:
            problems.append("server errors:\n  " + "\n  ".join(errors))
        if problems:
            raise AssertionError("ScriptedLLM: " + "\n".join(problems))

    # -- endpoint payloads

    def _lmstudio_models(self) -> list[dict[str, Any]] | None:
        models = self.models
        if models is False:
            return None
        if models is None:
            return [dict(DEFAULT_MODEL)]
        if isinstance(models, (str, dict)):
            models = [models]
        out = []
        for m in models:
            given = {"id": m} if isinstance(m, str) else dict(m)
            entry = {**copy.deepcopy(DEFAULT_MODEL), **given}
            if entry.get("state") != "loaded" and "loaded_context_length" not in given:
                entry.pop("loaded_context_length", None)
            out.append({k: v for k, v in entry.items() if v is not None})
        return out

    def _openai_models(self) -> dict[str, Any]:
        models = self._lmstudio_models() or [DEFAULT_MODEL]
        data = [
            {"id": m["id"], "object": "model", "owned_by": "organization_owner"} for m in models
        ]
        if self.model_meta is not None:
            data = [{**entry, "meta": dict(self.model_meta)} for entry in data]
        return {"object": "list", "data": data}

    def _lmstudio_v1_models(self) -> dict[str, Any]:
        models = [
            {
                "type": "llm",
                "key": m["id"],
                "params_string": m.get("params_string"),
                "max_context_length": m.get("max_context_length"),
            }
            for m in self._lmstudio_models() or ()
        ]
        return {"models": models}

    def _props_payload(self) -> dict[str, Any] | None:
        props = self.props
        if props is None or props is False:
            return None
        if props is True:
            return copy.deepcopy(DEFAULT_PROPS)
        if isinstance(props, int):
            return _deep_merge(DEFAULT_PROPS, {"default_generation_settings": {"n_ctx": props}})
        return _deep_merge(DEFAULT_PROPS, props)

    # -- bookkeeping used by the handler

    def _track(self, handler: _Handler, alive: bool) -> None:
        with self._lock:
            if alive:
                self._handlers.add(handler)
                self._threads.add(threading.current_thread())
                stopping = self._stopping.is_set()
            else:
                self._handlers.discard(handler)
                self._threads.discard(threading.current_thread())
                stopping = False
        if stopping:
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)

    def _record_error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def _wait(self, handler: _Handler, seconds: float) -> None:
        """Sleep ``seconds``; raise _ClientGone early if the client disconnects or the
        server stops (stop() shuts the socket down, which wakes select)."""
        deadline = time.monotonic() + seconds
        conn = handler.connection
        with selectors.DefaultSelector() as sel:
            sel.register(conn, selectors.EVENT_READ)
            while True:
                if self._stopping.is_set():
                    raise _ClientGone
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                if not sel.select(remaining):
                    continue
                try:
                    peek = conn.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    continue
                except OSError:
                    peek = b""
                if not peek:
                    raise _ClientGone
                # The client sent more bytes (pipelining); disconnects are undetectable now.
                if self._stopping.wait(max(0.0, deadline - time.monotonic())):
                    raise _ClientGone
                return

    # -- /v1/chat/completions

    def _slot(self, handler: _Handler, raw: bytes) -> None:
        """llama.cpp's /slots/0?action=save|restore {"filename"}: a save writes the last
        request's messages to the file, a restore reads them back (refused unless they are
        there as saved: a damaged file)."""
        action = parse_qs(urlsplit(handler.path).query).get("action", [""])[0]
        with self._lock:
            self.slot_actions.append(action)
            messages = self.requests[-1]["messages"] if self.requests else []
        if self.slot_save_path is None:  # as llama.cpp answers without --slot-save-path
            handler.send_json(501, SLOTS_NOT_SUPPORTED)
            return
        path = self.slot_save_path / json.loads(raw)["filename"]
        if action == "save":
            path.write_text(json.dumps(messages))
            handler.send_json(200, {"id_slot": 0, "n_saved": _tokens(json.dumps(messages))})
            return
        try:
            restored = json.loads(path.read_text())
        except (OSError, ValueError):
            handler.send_json(400, {"error": {"message": "Unable to restore slot"}})
            return
        handler.send_json(200, {"id_slot": 0, "n_restored": _tokens(json.dumps(restored))})

    def _chat(self, handler: _Handler, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._record_error(f"non-JSON-object request body: {raw[:200]!r}")
            handler.send_json(400, {"error": {"message": "request body must be a JSON object"}})
            return
        with self._cond:
            index = len(self.requests)
            self.requests.append(body)
            self.request_headers.append({k.lower(): v for k, v in handler.headers.items()})
            turn: Turn | None = self._turns.popleft() if self._turns else None
            if turn is None:
                self.exhausted = True
                self.unscripted.append(body)
            self._in_flight += 1
            self._cond.notify_all()
        try:
            self._reply(handler, body, index, turn)
        except (_ClientGone, ConnectionError):
            with self._lock:
                if not self._stopping.is_set():
                    self.disconnects += 1
            handler.abort()
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def _reply(self, handler: _Handler, body: dict[str, Any], index: int, turn: Turn | None):
        if turn is None:
            handler.send_json(500, NO_TURNS_LEFT)
            return
        if callable(turn):
            try:
                turn = turn(body)
                _check_turn(turn)
                if callable(turn):
                    raise TypeError("a callable turn must return a dict")
            except Exception as exc:
                self._record_error(f"callable turn for request #{index} raised {exc!r}")
                handler.send_json(500, {"error": f"scripted LLM: turn raised {exc!r}"})
                return
        expect = turn.get("expect")
        if expect is not None:
            try:
                expect(body)
            except Exception as exc:
                with self._lock:
                    self.expect_failures.append((index, exc))
        delay = self.delay + (turn.get("delay") or 0.0)
        if delay > 0:
            self._wait(handler, delay)

        if "status" in turn:
            payload = turn.get("body")
            headers = turn.get("headers")
            if isinstance(payload, (bytes, str)):
                data = payload.encode("utf-8") if isinstance(payload, str) else payload
                try:
                    json.loads(data)
                    ctype = "application/json; charset=utf-8"
                except ValueError:
                    ctype = "text/plain; charset=utf-8"
                handler.send_bytes(turn["status"], data, ctype, headers)
            else:
                handler.send_json(turn["status"], payload, headers)
            return

        model = turn.get("model") or body.get("model") or DEFAULT_MODEL_ID
        cid = f"chatcmpl-scripted-{index}"
        created = int(time.time())
        calls = self.tool_calls_of(turn, index)
        usage = self._usage(turn, body, calls)
        if body.get("stream"):
            self._stream(handler, body, turn, model, cid, created, calls, usage)
        else:
            self._complete(handler, turn, model, cid, created, calls, usage)

    def _progress(self, handler, turn, ident) -> None:
        """llama.cpp's progress chunks: an empty delta and `prompt_progress`."""
        model, cid, created = ident
        for progress in turn.get("progress") or ():
            chunk = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": None}],
                "prompt_progress": progress,
            }
            handler.write_chunk(b"data: " + _json(chunk) + b"\n\n")
            self._wait(handler, turn.get("progress_delay", 0.5))

    @staticmethod
    def tool_calls_of(turn: dict[str, Any], index: int) -> list[dict[str, str]]:
        """The calls of a turn, normalised: id, name and arguments as a JSON string."""
        out = []
        for i, c in enumerate(turn.get("tool_calls") or ()):
            fn = c.get("function") or {}
            name = c.get("name", fn.get("name"))
            args = c.get("arguments", fn.get("arguments", {}))
            if not isinstance(args, str):
                args = json.dumps(args)
            out.append({"id": c.get("id") or f"call_{index}_{i}", "name": name, "arguments": args})
        return out

    @staticmethod
    def _usage(turn: dict[str, Any], body: dict[str, Any], calls: list[dict[str, str]]):
        given = turn.get("usage")
        if given is False:
            return False
        if given is not None:
            return given
        prompt = json.dumps(body.get("messages")) + json.dumps(body.get("tools") or "")
        completion = (turn.get("content") or "") + (turn.get("reasoning") or "")
        completion += "".join(c["name"] + c["arguments"] for c in calls)
        p, c = _tokens(prompt), _tokens(completion)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    @staticmethod
    def _finish_reason(turn: dict[str, Any], calls: list[dict[str, str]]) -> str:
        return turn.get("finish_reason") or ("tool_calls" if calls else "stop")

    def _complete(self, handler, turn, model, cid, created, calls, usage) -> None:
        content = turn.get("content")
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if content is None and not calls:
            message["content"] = ""
        if turn.get("reasoning"):
            message["reasoning_content"] = turn["reasoning"]
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": self._finish_reason(turn, calls),
        }
        obj: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [] if turn.get("empty") else [choice],
            "system_fingerprint": "scripted",
        }
        if usage is not False:
            obj["usage"] = usage
        if turn.get("timings"):
            obj["timings"] = turn["timings"]
        if turn.get("drop_after") is None:
            handler.send_json(200, obj)
            return
        data = _json(obj)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data[: len(data) // 2])
        handler.abort()

    def _stream(self, handler, body, turn, model, cid, created, calls, usage) -> None:
        size = turn.get("chunk_size", self.chunk_size)
        args_size = turn.get("args_chunk_size", self.args_chunk_size)
        events = stream_chunks(turn, body, calls, usage, (model, cid, created), size, args_size)

        drop_after, end_after = turn.get("drop_after"), turn.get("end_after")
        if drop_after is not None:
            events = events[: drop_after + 1]
        if end_after is not None:
            events = events[: end_after + 1]
        chunk_delay = turn.get("chunk_delay", self.chunk_delay) or 0.0

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        if drop_after is not None:
            handler.send_header("Connection", "close")
        handler.end_headers()
        if body.get("return_progress"):
            self._progress(handler, turn, (model, cid, created))
        for n, ev in enumerate(events):
            if n and chunk_delay > 0:
                self._wait(handler, chunk_delay)
            handler.write_chunk(b"data: " + _json(ev) + b"\n\n")
        if drop_after is not None:
            handler.abort()
            return
        if not turn.get("no_done") and end_after is None:
            if events and chunk_delay > 0:
                self._wait(handler, chunk_delay)
            handler.write_chunk(b"data: [DONE]\n\n")
        handler.wfile.write(b"0\r\n\r\n")
