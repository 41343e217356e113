"""Client for OpenAI-compatible chat-completions servers (LM Studio, Ollama, llama.cpp, vLLM).

Streaming is consumed as Server-Sent Events; deltas become callbacks (token, thinking), and the
assembled reply comes back as a `Reply`. What to do about each kind of failure is one table,
RETRY_POLICY in quirks.py (with all else that differs between servers); the client applies it,
except context overflow, which the loop handles by compacting the conversation.

Requests go through `http.client` on a socket the client owns, so a stop request can shut the
socket down at any moment: while connecting, while the server is still reading the prompt, and
in the middle of a stream.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from lmagent.core.config import Config
from lmagent.core.stop import StopToken
from lmagent.core.text import shortened
from lmagent.llm import kvcache
from lmagent.llm.constrained import (
    AnswerStream,
    CutOff,
    NotConstrained,
    Read,
    partial_answer,
    read_reply,
    reply_schema,
)
from lmagent.llm.errors import (
    ContextOverflow,
    LLMError,
    LLMStopped,
    LLMTimeout,
    LLMUnreachable,
    StreamBroken,
)
from lmagent.llm.quirks import (
    RETRY_POLICY,
    RetryRule,
    rejected_params,
    reply_format,
)

__all__ = [
    "RETRY_POLICY",
    "ContextOverflow",
    "LLMError",
    "LLMStopped",
    "LLMTimeout",
    "LLMUnreachable",
    "RetryRule",
    "StreamBroken",
    "rejected_params",
]

CONNECT_TIMEOUT = 10
MAX_BACKOFF = 30.0  # seconds between two retries at most
MAX_LOADING_POLL = 5.0  # seconds between two polls of a loading model at most


# what the user is told when the server refuses a field that changes how tools are called
REFUSED_NOTES = {
    "tools": "the server refused tool definitions; tools are described in the prompt and calls "
    "read from the text from now on",
    "response_format": "the server refused the JSON schema for tool calls; tool calls are read "
    "from the text from now on",
}


def rule_for(exc: Exception) -> RetryRule:
    return next(rule for rule in RETRY_POLICY if rule.matches(exc))


# --------------------------------------------------------------------------- thinking


class ThinkFilter:
    """Splits streamed content into thinking and answer text, across chunk boundaries."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self):
        self.inside = False
        self.pending = ""

    def feed(self, text: str) -> list[tuple[str, str]]:
        """Return [(kind, text)] with kind "thinking" or "content"."""
        self.pending += text
        out: list[tuple[str, str]] = []
        while self.pending:
            opening = -1 if self.inside else self.pending.find(self.OPEN)
            closing = self.pending.find(self.CLOSE)
            if closing >= 0 and (opening < 0 or closing < opening):
                # a closing tag (possibly without an opening one): all before it was thought
                out.append(("thinking", self.pending[:closing]))
                self.pending = self.pending[closing + len(self.CLOSE) :]
                self.inside = False
                continue
            if opening >= 0:
                out.append(("content", self.pending[:opening]))
                self.pending = self.pending[opening + len(self.OPEN) :]
                self.inside = True
                continue
            keep = _partial_tag_suffix(self.pending, (self.OPEN, self.CLOSE))
            self._emit(out, self.pending[: len(self.pending) - keep])
            self.pending = self.pending[len(self.pending) - keep :]
            break
        return [(kind, text) for kind, text in out if text]

    def flush(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._emit(out, self.pending)
        self.pending = ""
        return [(kind, text) for kind, text in out if text]

    def _emit(self, out: list, text: str) -> None:
        out.append(("thinking" if self.inside else "content", text))


def _partial_tag_suffix(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest suffix of text that could be the start of a tag."""
    best = 0
    for tag in tags:
        for size in range(1, len(tag)):
            if text.endswith(tag[:size]):
                best = max(best, size)
    return best


def split_thinking(text: str) -> tuple[str, str]:
    """(answer, thought): <think> blocks taken out of a reply, whether paired, a lone closing
    tag, or one never closed."""
    splitter = ThinkFilter()
    pieces = splitter.feed(text) + splitter.flush()
    answer = "".join(chunk for kind, chunk in pieces if kind == "content")
    return answer.strip(), "".join(chunk for kind, chunk in pieces if kind == "thinking").strip()


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    content: str = ""  # answer text with thinking removed (when configured)
    raw_content: str = ""
    reasoning: str = ""  # the thinking: reasoning_content and <think> blocks (never sent back)
    tool_calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments": str}
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # llama.cpp's speeds (prompt_per_second...)
    finish_reason: str | None = None
    first_token_s: float | None = None
    elapsed_s: float = 0.0

    @property
    def completion_tokens(self) -> int:
        return int(self.usage.get("completion_tokens") or max(len(self.raw_content) // 4, 1))

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class Callbacks:
    on_token: Callable[[str], None] = lambda text: None
    on_thinking: Callable[[str], None] = lambda text: None
    on_status: Callable[[str], None] = lambda text: None
    on_progress: Callable[[dict], None] = lambda reported: None  # the server's prompt reading
    on_first_token: Callable[[], None] = lambda: None


class _Shown:
    """One text channel across retried attempts: only what the user has not seen yet is new."""

    def __init__(self):
        self.shown = ""  # text already passed to a callback
        self.current = ""  # text of the current attempt
        self.looked_at = 0  # how much of current was looked at for a loop (LOOP_CHECK_EVERY steps)

    def add(self, text: str) -> tuple[str, bool]:
        """(text to show now, whether the attempt diverged from what was shown)."""
        self.current += text
        if self.shown.startswith(self.current):
            return "", False  # a retried reply repeating what the user already saw
        diverged = not self.current.startswith(self.shown)
        new = self.current if diverged else self.current[len(self.shown) :]
        self.shown = self.current
        return new, diverged


LOOP_WINDOW = 2000  # characters of one short piece repeated that cut a streamed reply off
# the longest piece counted: the 1.5B model cycled through four sentences of a paragraph
# each (460 characters) until its reply was capped, 1,024 tokens of them
LOOP_MAX_PERIOD = 600
LOOP_CHECK_EVERY = 250  # characters streamed between checks
CUT_REPEATING = "repeating"  # Reply.finish_reason of a reply cut off for looping
# Reply.finish_reason of a reply stopped because it began as the one it was to differ from did,
# for SAME_START characters: asked again at temperature 1.0 for another reply than its last, the
# 1.5B model wrote the same one word for word in 8 of 15 tries (300-500 tokens each); every
# reply that was not a repeat differed from the earlier ones within 149 characters
SAME_START = 200
BEGAN_THE_SAME = "began the same"


def loop_period(text: str, end: int | None = None) -> int:
    """The length of the piece that `text` (up to `end`) keeps repeating over its last
    LOOP_WINDOW characters (a small model stuck in a loop), or 0."""
    end = len(text) if end is None else end
    if end < LOOP_WINDOW:
        return 0
    tail = text[end - LOOP_WINDOW : end]
    probe = tail[-32:]
    end = len(tail) - 1
    while (found := tail.rfind(probe, 0, end)) >= 0:
        period = len(tail) - len(probe) - found
        if period > LOOP_MAX_PERIOD:
            return 0
        if tail[period:] == tail[:-period]:
            return period
        end = found + len(probe) - 1
    return 0


def without_loop(text: str, period: int) -> str:
    """`text` up to the end of the first copy of the piece its ending repeats."""
    if period <= 0:
        return text
    start = len(text) - period  # walk back to where the repetition began
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return text[: start + period]


class _Looping(Exception):
    """The streamed reply keeps repeating itself (in `channel`): stop reading it."""

    def __init__(self, channel: _Shown):
        super().__init__()
        self.channel = channel


class _BeganTheSame(Exception):
    """The reply began as the one it was to differ from did: stop reading it."""


class _Enough(Exception):
    """The reply holds all that will be used of it (`end`: its length): stop reading it."""

    def __init__(self, end: int):
        super().__init__()
        self.end = end


class _StreamState:
    """Accumulates one reply; survives a restart without re-emitting shown text."""

    def __init__(self, callbacks: Callbacks, strip: bool):
        self.callbacks = callbacks
        self.strip = strip
        self.filter = ThinkFilter()
        self.content, self.thought = _Shown(), _Shown()
        self.reply = Reply()
        self.calls: dict[int, dict] = {}
        self.started = time.monotonic()
        self.view: AnswerStream | None = None  # a constrained reply: only its answer is shown
        self.must = ""  # a constrained reply must be: "call", "answer", or "" (either)
        self.temperature: float | None = None  # for this reply only (None: LLM_TEMPERATURE)
        self.enough: Callable[[str], int | None] | None = None  # where a reply may stop
        self.unlike: set[str] = set()  # how replies this one is to differ from begin

    def ask_anew(self) -> None:
        """The same question asked again on purpose: a different reply is no surprise."""
        self.content, self.filter = _Shown(), ThinkFilter()
        self.view = self.view and AnswerStream()

    def restart(self) -> None:
        self.content.current = self.thought.current = ""
        self.content.looked_at = self.thought.looked_at = 0
        self.calls = {}
        self.reply.finish_reason = None
        self.reply.usage, self.reply.timings = {}, {}

    def text(self, text: str) -> None:
        self._first_token()
        new, diverged = self.content.add(text)
        if diverged:
            self.callbacks.on_status("the reply restarted differently after a dropped connection")
            self.filter = ThinkFilter()
            self.view = self.view and AnswerStream()
        if new and self.view is not None:
            new = self.view.feed(new)
        if new:
            self._emit(self.filter.feed(new) if self.strip else [("content", new)])
        self._look_for_loop(self.content)
        self._look_for_the_same()
        if self.enough is not None and "`" in text:
            end = self.enough(self.content.current)
            if end is not None:
                raise _Enough(end)

    def _look_for_the_same(self) -> None:
        """Stop a reply that began as one of `unlike` did, for its first SAME_START characters."""
        current = self.content.current
        if not self.unlike or len(current) < SAME_START:
            return
        if current[:SAME_START] in self.unlike:
            raise _BeganTheSame
        self.unlike = set()  # it differs: no need to look again

    def reasoning(self, text: str) -> None:
        self._first_token()
        new, _ = self.thought.add(text)
        if new:
            self.callbacks.on_thinking(new)
        self._look_for_loop(self.thought)

    @staticmethod
    def _look_for_loop(channel: _Shown) -> None:
        """Look for a loop ending at every LOOP_CHECK_EVERY characters of a channel: at the
        same places however the stream was cut into events."""
        while len(channel.current) - channel.looked_at >= LOOP_CHECK_EVERY:
            channel.looked_at += LOOP_CHECK_EVERY
            if loop_period(channel.current, channel.looked_at):
                raise _Looping(channel)

    def cut_loop(self, channel: _Shown) -> Reply:
        """The reply up to where `channel` was found looping, the repeated piece kept once,
        marked CUT_REPEATING."""
        looped = channel.current[: channel.looked_at]
        channel.current = without_loop(looped, loop_period(looped))
        self.reply.finish_reason = CUT_REPEATING
        return self.finish()

    def tool_delta(self, position: int, delta: dict) -> None:
        self._first_token()
        index = delta["index"] if isinstance(delta.get("index"), int) else position
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        slot["id"] = delta.get("id") or slot["id"]
        function = delta.get("function") if isinstance(delta.get("function"), dict) else {}
        name = function.get("name") or ""
        if isinstance(name, str) and name:
            # repeated in every delta (llama-cpp-python) or cumulative: replace; a piece: append
            repeated = name.startswith(slot["name"])
            slot["name"] = name if repeated else slot["name"] + name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            slot["arguments"] = json.dumps(arguments, ensure_ascii=False)
        elif isinstance(arguments, str):
            slot["arguments"] += arguments

    def _first_token(self) -> None:
        if self.reply.first_token_s is None:
            self.reply.first_token_s = time.monotonic() - self.started
            self.callbacks.on_first_token()

    def _emit(self, pieces: list[tuple[str, str]]) -> None:
        for kind, text in pieces:
            if kind == "thinking":
                self.callbacks.on_thinking(text)
            else:
                self.callbacks.on_token(text)

    def finish_cut_off(self) -> Reply:
        """A constrained reply cut off twice: nothing of it is run (the loop asks again)."""
        self.callbacks.on_status("the reply was cut off again; its unfinished call is not run")
        reply = self.finish()
        reply.content, reply.tool_calls = "", []
        return reply

    def finish(self) -> Reply:
        if self.strip:
            self._emit(self.filter.flush())
        reply, raw = self.reply, self.content.current
        reply.raw_content = raw
        reply.content, thought = split_thinking(raw) if self.strip else (raw.strip(), "")
        reply.reasoning = "\n\n".join(part for part in (self.thought.current, thought) if part)
        reply.tool_calls = [
            {"id": c["id"] or f"call_{i}", "name": c["name"], "arguments": c["arguments"]}
            for i, c in sorted(self.calls.items())
            if c["name"]
        ]
        reply.elapsed_s = time.monotonic() - self.started
        return reply


def _apply_delta(delta: object, state: _StreamState) -> bool:
    """Feed one streamed delta (or a whole message); True when it carried anything."""
    if not isinstance(delta, dict):
        return False
    got = False
    thought = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(thought, str) and thought:
        state.reasoning(thought)
        got = True
    if isinstance(delta.get("content"), str) and delta["content"]:
        state.text(delta["content"])
        got = True
    for position, call in enumerate(delta.get("tool_calls") or ()):
        if isinstance(call, dict):
            state.tool_delta(position, call)
            got = True
    return got


def _apply_completion(data: object, state: _StreamState) -> None:
    """Feed a whole (non-streamed) chat.completion object."""
    if not isinstance(data, dict):
        raise LLMError("the server's reply is not a chat completion", 502, str(data)[:500])
    choices = data.get("choices")
    if data.get("error") and not choices:
        raise _server_error(data)
    first = choices[0] if isinstance(choices, list) and choices else {}
    first = first if isinstance(first, dict) else {}
    _apply_delta(first.get("message") or first.get("delta"), state)
    state.reply.usage = data["usage"] if isinstance(data.get("usage"), dict) else {}
    state.reply.timings = data["timings"] if isinstance(data.get("timings"), dict) else {}
    state.reply.finish_reason = first.get("finish_reason")


def _server_error(data: dict) -> LLMError:
    """An {"error": ...} object the server sent with a 200 status (in a stream or not)."""
    raw = json.dumps(data, ensure_ascii=False)
    code = data["error"].get("code") if isinstance(data["error"], dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return LLMError(f"the server reported an error: {_error_text(raw)}", status, raw)


# --------------------------------------------------------------------------- transport


def auth_headers(api_key: str) -> dict:
    """The header that carries LLM_API_KEY (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def base_url(llm_url: str) -> str:
    return re.sub(r"(/v1)?/chat/completions$", "", chat_url(llm_url))


def chat_url(llm_url: str) -> str:
    """The endpoint to POST to; a bare server address or ".../v1" gets the usual path."""
    url = llm_url.strip().rstrip("/")
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions" if urlsplit(url).path == "" else url


def open_connection(url: str, timeout: float) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise LLMError(f"LLM_URL={url!r} is not a valid http:// or https:// URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.hostname, port, timeout=timeout)


def request_target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _connect(conn: http.client.HTTPConnection, url: str) -> None:
    try:
        conn.connect()
    except OSError as exc:
        cause = _root_cause(exc, f"no connection within {CONNECT_TIMEOUT} s")
        raise LLMUnreachable(f"cannot connect to {url}: {cause}") from None
    with contextlib.suppress(OSError):
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _post(conn, target: str, data: list[bytes], headers: dict, reused: bool, url: str):
    """Send the request; a kept-alive connection the server has meanwhile closed is replaced
    by a fresh one once (that is not a failure of the server), waiting as long as the old one
    did (a fresh socket would wait only CONNECT_TIMEOUT for the reply)."""
    try:
        conn.request("POST", target, data, headers)
        return conn.getresponse()
    except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
        if not reused:
            raise
    wait = conn.sock.gettimeout() if conn.sock is not None else None
    conn.close()
    _connect(conn, url)
    conn.sock.settimeout(wait)
    conn.request("POST", target, data, headers)
    return conn.getresponse()


def _finished_cleanly(conn: http.client.HTTPConnection, response) -> bool:
    """Whether the connection can carry another request: the reply was read to its end."""
    if response.will_close:
        return False
    with contextlib.suppress(OSError, http.client.HTTPException):
        if not response.isclosed():
            conn.sock.settimeout(2.0)  # a server still sending after [DONE]: do not wait
            response.read()  # the rest of the body after [DONE]: the last chunk marker
    return response.isclosed()


def _shutdown(conn: http.client.HTTPConnection) -> None:
    """Wake any thread blocked on the connection (closing alone does not)."""
    if conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The `data:` payloads of an event stream, as soon as each line arrives."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.rstrip(b"\r")
            if line.startswith(b"data:"):
                yield line[5:].strip().decode("utf-8", "replace")
    if buffer.startswith(b"data:"):
        yield buffer[5:].strip().decode("utf-8", "replace")


def json_object(text: str | bytes) -> dict | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


# --------------------------------------------------------------------------- the client


class LLMClient:
    """Talks to one chat-completions endpoint; remembers what the server rejected."""

    def __init__(self, config: Config, model: str | None = None):
        self.config = config
        self.url = chat_url(config.llm_url)
        self.model = model if model is not None else config.llm_model
        self.dropped_params: set[str] = set()
        # native | text | constrained (TOOL_CALL_MODE; "auto" is decided by llm/toolmode.py)
        self.tool_mode = "native" if config.tool_call_mode == "auto" else config.tool_call_mode
        # the model profile the runtime set this client up with (its settings are this client's
        # config): the session event carries it
        self.profile: dict | None = None
        self.last_reply: Reply | None = None
        self._reply_schema: tuple[list[dict] | None, str, dict] = (None, "", {})
        self._messages = MessageCache()
        self._idle: list[http.client.HTTPConnection] = []  # kept-alive connections
        self._idle_lock = threading.Lock()
        self.prompts = kvcache.cache_for(base_url(config.llm_url))  # --embedded: kept prompts

    @property
    def timeout(self) -> str:
        """LLM_TIMEOUT as messages name it: "560 s"."""
        return f"{self.config.llm_timeout:g} s"

    @property
    def native_tools(self) -> bool:
        """Tools go as the request's `tools` (else they are described in the prompt)."""
        return self.tool_mode == "native" and "tools" not in self.dropped_params

    @property
    def constrained(self) -> bool:
        """Requests carry a JSON schema admitting one valid call or an answer."""
        return self.tool_mode == "constrained" and "response_format" not in self.dropped_params

    @property
    def tool_form(self) -> str:
        """How calls come back now: "native", "constrained" or "text" (after any fallback)."""
        if self.native_tools:
            return "native"
        return "constrained" if self.constrained else "text"

    @property
    def uses_tool_schemas(self) -> bool:
        """Whether the tools' schemas go into the request (as `tools` or as the reply's schema)."""
        return self.native_tools or self.constrained

    def build_body(
        self,
        messages: list[dict],
        tools: list[dict],
        stream: bool,
        must: str = "",
        temperature: float | None = None,
    ) -> dict:
        if temperature is None:
            temperature = self.config.llm_temperature
        body: dict = {
            "messages": self._messages.clean(messages, "tools" in self.dropped_params),
            "temperature": temperature,
            "stream": stream,
        }
        if self.model:
            body["model"] = self.model
        if self.config.llm_max_tokens:
            body["max_tokens"] = self.config.llm_max_tokens
        if tools and self.native_tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        elif tools and self.constrained:
            body["response_format"] = self._schema_for(tools, must)
        if stream:
            body["stream_options"] = {"include_usage": True}
            body["return_progress"] = True  # llama.cpp: how much of the prompt it has read
        for name in self.dropped_params:
            body.pop(name, None)
        return body

    def _schema_for(self, tools: list[dict], must: str) -> dict:
        """The reply's schema for `tools`, built again only for another tool list or rule."""
        if self._reply_schema[0] is not tools or self._reply_schema[1] != must:
            schema = reply_schema(tools, calls=must != "answer", answer=must != "call")
            self._reply_schema = (tools, must, reply_format(schema))
        return self._reply_schema[2]

    def chat(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        callbacks: Callbacks | None = None,
        stop: StopToken | None = None,
        must: str = "",
        temperature: float | None = None,
        enough: Callable[[str], int | None] | None = None,
        unlike: Sequence[str] = (),
    ) -> Reply:
        """One model reply, streamed, with the retry policy applied (except context overflow).
        `must` ("call"/"answer") holds a constrained reply to a call, or to an answer;
        `temperature` replaces LLM_TEMPERATURE for this reply; `enough(text)` gives the
        length at which a reply holds all that will be used of it (the rest is not read, and
        the server stops writing it), or None; a reply that begins as one of `unlike` does, for
        its first SAME_START characters, is stopped there, its finish_reason BEGAN_THE_SAME."""
        callbacks = callbacks or Callbacks()
        stop = stop or StopToken()
        state = _StreamState(callbacks, self.config.thinking_model)
        state.must = must
        state.temperature = temperature
        state.enough = enough
        state.unlike = {text[:SAME_START] for text in unlike if len(text) >= SAME_START}
        tries: dict[str, int] = {}
        key = ""
        if self.prompts is not None:
            key = kvcache.prompt_key(messages, tools if self.native_tools else None)
            self.prompts.before(key, callbacks.on_status)
        while True:
            constrained = bool(tools) and self.constrained
            state.view = (state.view or AnswerStream()) if constrained else None
            try:
                reply = self._attempt(messages, tools or [], state, stop, stream=True)
                if reply is None:  # an empty stream: ask once more without streaming
                    state.restart()
                    reply = self._attempt(messages, tools or [], state, stop, stream=False)
                self._prompt_read(key)
                if constrained:
                    reply = self._read_constrained(reply, state)
                self.last_reply = reply
                return reply
            except CutOff:
                if tries.setdefault("cut off", 0):
                    self._prompt_read(key)
                    self.last_reply = state.finish_cut_off()
                    return self.last_reply
                tries["cut off"] = 1
                callbacks.on_status("the reply was cut off before it was complete; asking again")
                state.ask_anew()
            except LLMError as exc:
                self._recover(exc, tries, state.started, callbacks, stop)
            state.restart()

    def _prompt_read(self, key: str) -> None:
        """The server's slot holds the prompt `key` begins now: kept for the next process."""
        if self.prompts is not None:
            self.prompts.after(key)

    def _read_constrained(self, reply: Reply, state: _StreamState) -> Reply:
        """The call or answer of a reply to a request that carried the schema. A server that
        ignored the schema switches this client to text tool calls (the reply is read so). A
        cut-off call raises CutOff (asked again); a cut-off answer is kept, as in text mode."""
        try:
            read = read_reply(reply.raw_content)
        except CutOff:  # max_tokens, or cut off for repeating itself
            answer = partial_answer(reply.raw_content)
            if answer is None:
                raise  # a call: asked again, never run half
            read = Read(answer=answer)  # as in text mode: what was shown is kept
        except NotConstrained as exc:
            self.tool_mode = "text"
            state.callbacks.on_status(
                f"the server ignored the JSON schema ({exc}); reading tool calls from the text "
                "from now on (TOOL_CALL_MODE=text)"
            )
            state.callbacks.on_token(reply.content)  # it was held back as if it were JSON
            return reply
        if read.name:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            reply.tool_calls = [{"id": call_id, "name": read.name, "arguments": read.arguments}]
            reply.content = ""
            return reply
        answer, thought = split_thinking(read.answer) if state.strip else (read.answer.strip(), "")
        reply.content = answer
        reply.reasoning = "\n\n".join(part for part in (reply.reasoning, thought) if part)
        return reply

    def _recover(
        self, exc: LLMError, tries: dict, started: float, callbacks: Callbacks, stop: StopToken
    ) -> None:
        """Apply RETRY_POLICY to one failure: return to try again, or raise."""
        if stop.stopped:
            raise LLMStopped(stop.reason)
        rule = rule_for(exc)
        count = tries[rule.message] = tries.get(rule.message, 0) + 1
        if rule.action == "compact":
            raise ContextOverflow(str(exc), exc.status, exc.body, exc.sent)
        if rule.action == "drop_param" and rejected_params(exc):
            name = rejected_params(exc)[0]  # at most once each: a dropped field is not sent
            self.dropped_params.add(name)
            note = REFUSED_NOTES.get(name, f"the server rejected '{name}'; continuing without it")
            callbacks.on_status(note)
            return
        if self._exhausted(rule, count, started):
            raise exc
        first = self.config.llm_retry_delay * 2 ** min(count - 1, 20)
        cap = MAX_LOADING_POLL if rule.action == "wait" else MAX_BACKOFF
        delay = 0.0 if rule.action == "resume" else min(first, cap)
        callbacks.on_status(_retry_note(rule, exc, count + 1, delay))
        if delay and stop.wait(delay):
            raise LLMStopped(stop.reason)

    def _exhausted(self, rule: RetryRule, count: int, started: float) -> bool:
        if rule.action == "wait":
            return time.monotonic() - started > self.config.llm_timeout
        return rule.action in ("fail", "drop_param") or count > self.config.llm_retries

    def _attempt(self, messages, tools, state: _StreamState, stop: StopToken, stream: bool):
        """One request; the Reply, or None for a stream that carried nothing. A reply that
        keeps repeating itself is cut off (its connection is closed, not reused)."""
        try:
            body = self.build_body(messages, tools, stream, state.must, state.temperature)
            with self._open(body, stop) as response:
                try:
                    if "text/event-stream" not in (response.getheader("Content-Type") or ""):
                        _apply_completion(json_object(response.read()), state)
                        return state.finish()
                    got_any = self._consume(response, state)
                except (OSError, http.client.HTTPException) as exc:
                    if not state.reply.finish_reason or stop.stopped:
                        cause = _root_cause(exc, f"no data for LLM_TIMEOUT={self.timeout}")
                        raise StreamBroken(f"the reply broke off: {cause}") from None
                    got_any = True  # the reply was complete; only the tail of the stream broke
        except _Looping as looping:
            state.callbacks.on_status("the reply kept repeating itself; cut off")
            return state.cut_loop(looping.channel)
        except _Enough as enough:  # the connection is closed: the server stops writing
            state.content.current = state.content.current[: enough.end]
            state.reply.finish_reason = "stop"
            return state.finish()
        except _BeganTheSame:
            state.reply.finish_reason = BEGAN_THE_SAME
            return state.finish()
        return state.finish() if got_any else None

    @contextlib.contextmanager
    def _open(self, body: dict, stop: StopToken) -> Iterator[http.client.HTTPResponse]:
        """POST body; read the response inside the block. A stop shuts the socket down."""
        if stop.stopped:
            raise LLMStopped(stop.reason)
        conn, reused = self._take_connection()
        keep = False
        try:
            with stop.on_stop(lambda: _shutdown(conn)):
                response = self._send(conn, body, stop, reused)
                yield response
                keep = _finished_cleanly(conn, response)
        except (LLMError, OSError, http.client.HTTPException):
            if stop.stopped:
                raise LLMStopped(stop.reason) from None
            raise
        finally:
            self._release(conn, keep and not stop.stopped)
        if stop.stopped:  # a shut-down socket can look like a clean end of the reply
            raise LLMStopped(stop.reason)

    def _take_connection(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop(), True
        return open_connection(self.url, CONNECT_TIMEOUT), False

    def _release(self, conn: http.client.HTTPConnection, keep: bool) -> None:
        if keep and conn.sock is not None:
            with self._idle_lock:
                self._idle.append(conn)
            return
        conn.close()

    def close(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _send(self, conn, body: dict, stop: StopToken, reused: bool) -> http.client.HTTPResponse:
        if not reused:
            _connect(conn, self.url)
        if stop.stopped:
            raise LLMStopped(stop.reason)
        conn.sock.settimeout(self.config.llm_timeout)
        data = self._messages.encode_body(body)
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(sum(len(chunk) for chunk in data)),
        }
        headers.update(auth_headers(self.config.llm_api_key))
        try:
            response = _post(conn, request_target(self.url), data, headers, reused, self.url)
        except TimeoutError:
            raise LLMTimeout(
                f"no answer from {self.url} within LLM_TIMEOUT={self.timeout}"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            cause = _root_cause(exc, f"no answer within LLM_TIMEOUT={self.timeout}")
            raise LLMUnreachable(f"no answer from {self.url}: {cause}") from None
        if response.status >= 400:
            text = response.read(65536).decode("utf-8", "replace")
            message = f"HTTP {response.status} from {self.url}: {_error_text(text)}"
            raise LLMError(message, response.status, text, sent=body)
        return response

    def _consume(self, response: http.client.HTTPResponse, state: _StreamState) -> bool:
        """Feed the stream to `state`; whether it carried anything. A stream that carried part
        of a reply and ended without a finish reason or [DONE] was cut off: StreamBroken."""
        got_any = done = False
        for data in sse_data(iter(lambda: response.read1(65536), b"")):
            if data == "[DONE]":
                done = True
                break
            chunk = json_object(data)
            if chunk is None:
                continue
            if chunk.get("error"):
                raise _server_error(chunk)
            if isinstance(chunk.get("usage"), dict):
                state.reply.usage = chunk["usage"]
            if isinstance(chunk.get("timings"), dict):  # llama.cpp's, on the last chunk
                state.reply.timings = chunk["timings"]
            if isinstance(chunk.get("prompt_progress"), dict):
                state.callbacks.on_progress(chunk["prompt_progress"])
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                got_any = (
                    _apply_delta(choice.get("delta") or choice.get("message"), state) or got_any
                )
                state.reply.finish_reason = choice.get("finish_reason") or state.reply.finish_reason
        if got_any and not (done or state.reply.finish_reason):
            raise StreamBroken("the stream was cut off mid-reply (no finish reason, no [DONE])")
        return got_any


class MessageCache:
    """Each history message is cleaned and JSON-encoded once, not on every request: at step 500
    a request carries ~1,000 messages (~450 KB), and re-encoding, or even re-joining, them all
    would dominate the step.

    The history only grows between requests (or is rewritten by a compaction). While the earlier
    messages are unchanged, only the new ones are cleaned and encoded; their encodings go into
    blocks of about BLOCK bytes that are never copied again, and a request body is sent as the
    list of those chunks (`encode_body`)."""

    BLOCK = 64 * 1024

    def __init__(self):
        self._lock = threading.Lock()
        self._raw: list[dict] = []  # the messages of the latest request...
        self._cleaned: list[dict] = []  # ...cleaned (the list clean() returned)...
        self._system = b""  # ...the encoding of the first (the system prompt, rebuilt each step)
        self._blocks: list[bytes] = []  # ...and of the others, each with a leading comma
        self._open: list[bytes] = []  # encodings not yet joined into a block
        self._open_size = 0
        self._fields: tuple[dict, bytes] = ({}, b"}")  # the other body fields, their encoding
        self._calls_as_text = False  # how the latest request's messages were cleaned

    def clean(self, messages: list[dict], calls_as_text: bool = False) -> list[dict]:
        """`messages` as sent; `calls_as_text` for a chat template that knows no tools."""
        with self._lock:
            kept = self._unchanged_prefix(messages) if calls_as_text == self._calls_as_text else 0
            self._calls_as_text = calls_as_text
            if not kept:
                self._blocks, self._open, self._open_size = [], [], 0
            fresh = [clean_message(m, calls_as_text) for m in messages[max(kept, 1) :]]
            head = [clean_message(m, calls_as_text) for m in messages[:1]]
            self._cleaned = head + self._cleaned[1:kept] + fresh
            self._system = _encode(head[0]) if head else b""
            for message in fresh:
                self._add(b"," + _encode(message))
            self._raw = list(messages)
            return self._cleaned

    def _unchanged_prefix(self, messages: list[dict]) -> int:
        """How many leading messages (the first, the system prompt, aside) are those of the
        previous request; 0 when the history was rewritten (a compaction). The comparison of two
        lists checks identity first, in C: cheap even at 1,000 messages."""
        old = self._raw
        if len(old) < 2 or len(messages) < len(old):
            return 0
        return len(old) if old[1:] == messages[1 : len(old)] else 0

    def _add(self, encoded: bytes) -> None:
        self._open.append(encoded)
        self._open_size += len(encoded)
        if self._open_size >= self.BLOCK:
            self._blocks.append(b"".join(self._open))
            self._open, self._open_size = [], 0

    def encode_body(self, body: dict) -> list[bytes]:
        """The request body as JSON, in chunks to send one after the other: the history's
        encodings are reused, and its blocks are not copied into one buffer."""
        messages = body.get("messages", [])
        with self._lock:
            if messages is self._cleaned and messages:
                history = [self._system, *self._blocks, b"".join(self._open)]
            else:
                history = [b",".join(_encode(message) for message in messages)]
            tail = self._encoded_fields({k: v for k, v in body.items() if k != "messages"})
        return [b'{"messages":[', *history, b"]", tail]

    def _encoded_fields(self, fields: dict) -> bytes:
        """The body's other fields (tools, model, ...) with a leading comma and the closing
        brace; encoded again only when they change (the tool list is usually the same object)."""
        if fields != self._fields[0]:
            encoded = _encode(fields)
            self._fields = (fields, b"," + encoded[1:] if fields else b"}")
        return self._fields[1]


def _encode(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def clean_message(message: dict, calls_as_text: bool = False) -> dict:
    """Only the fields servers accept; never a null assistant content (llama-cpp-python 500s).
    `calls_as_text`: the chat template knows no tools and would drop calls and show results
    under a role the model never saw, so calls are written as the JSON a constrained reply
    holds and results come as user messages."""
    if calls_as_text and (message.get("tool_calls") or message["role"] == "tool"):
        return _as_text(message)
    clean = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        clean["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        clean["tool_call_id"] = message["tool_call_id"]
    return clean


def _as_text(message: dict) -> dict:
    if message["role"] == "tool":
        return {"role": "user", "content": f"Tool result: {message.get('content') or ''}"}
    calls = [
        json.dumps({"name": call["function"]["name"], "arguments": _arguments(call)})
        for call in message["tool_calls"]
    ]
    text = "\n".join([message.get("content") or "", *calls]).strip()
    return {"role": "assistant", "content": text}


def _arguments(call: dict) -> object:
    try:
        return json.loads(call["function"].get("arguments") or "{}")
    except (ValueError, RecursionError):
        return {}


def _root_cause(exc: BaseException, timed_out: str) -> str:
    """A failure in a few words; `timed_out` says which limit a timeout was and its value."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return timed_out
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    return shortened(str(exc), 200) or type(exc).__name__


def _retry_note(rule: RetryRule, exc: Exception, attempt: int, delay: float) -> str:
    """What the user is told of a retry: the rule's words and the failure, which is not
    repeated when it starts with those words ("the reply broke off: no data for
    LLM_TIMEOUT=560 s; asking again; try 2")."""
    head, _, then = rule.message.partition("; ")
    when = f"try {attempt} in {delay:.1f} s" if delay else f"try {attempt}"
    if not str(exc).startswith(head):
        return f"{rule.message} ({exc}); {when}"
    return "; ".join(part for part in (str(exc), then, when) if part)


def _error_text(body: str) -> str:
    """The server's own message from an error body (JSON `error.message`, or the text)."""
    data = json_object(body)
    if data is None:
        return shortened(" ".join(body.split()), 300)
    error = data.get("error", data)
    if isinstance(error, dict):
        error = error.get("message") or error
    return shortened(str(error), 300)
