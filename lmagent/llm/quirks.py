"""What differs between the chat servers LMAgent talks to (LM Studio, llama.cpp's server and the
embedded one, Ollama, vLLM, llama-cpp-python), in one place.

A new server quirk goes here: the client, the runtime and the loop read these tables and never
test for a server by name themselves. Three tables:

- SERVERS: how each kind of server is recognised (the endpoint that says what is loaded), where
  it tells the model's size, and what is known about it before the first request.
- OPTIONAL_PARAMS and RETRY_POLICY: request fields a server may refuse, and what the client does
  about each kind of failure (the words in error bodies that tell the kinds apart).
- REPLY_FORMAT: the one form of `response_format` every server here honours for a JSON schema.

Quirks noticed in a reply rather than known from the server are handled where they show:
- a streamed request with tools gets an empty stream (llama-cpp-python's function calling):
  LLMClient.chat asks once more without streaming;
- an empty reply whenever tools are offered, a text one without them (the same): AgentRun.step
  asks once more without the tool definitions;
- a null assistant content in the history answers HTTP 500 (llama-cpp-python):
  client.clean_message sends an empty string;
- every tool-call delta repeats the id and the name (llama-cpp-python): _StreamState.tool_delta
  replaces a repeated name instead of appending it;
- tool calls written as text in the content (small models on any server): toolcalls.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from lmagent.llm.errors import LLMError, LLMTimeout, LLMUnreachable, StreamBroken

# --------------------------------------------------------------------------- the servers


@dataclass(frozen=True)
class Server:
    """One kind of server: where it says what is loaded and what that answer tells us."""

    source: str  # the name ModelInfo.source gives it
    info_path: str  # GET endpoint describing the loaded model(s); probed in table order
    label: str  # what the user is told
    size_path: str = ""  # where the model's parameter count is told (probe.py reads it)
    window_fix: str = ""  # how a user gives the model a larger window, when the server decides


# No repetition field is sent (llama.cpp's repeat_penalty 1.1 over the last 64 tokens, as
# Ollama's default, and its DRY sampler 0.8 were tried): with
# them the 1.5B model solved 0 of 3 own benchmark tasks that it solved without them (rename,
# csv-sum, json-flag; greedy, one server, alternated, 2026-11-27): a code edit repeats names
# and lines on purpose. A reply that loops is cut off by the client instead (CUT_REPEATING).

# the window Ollama gives a model unless OLLAMA_CONTEXT_LENGTH or the model's Modelfile says
# otherwise; a longer prompt is cut to fit without an error (the agent must stay under it)
OLLAMA_DEFAULT_WINDOW = 4096

# probed in this order: the first endpoint that answers names the server
SERVERS: tuple[Server, ...] = (
    # LM Studio: /api/v0/models gives the loaded window; its 0.4+ REST API the parameter
    # count (params_string); its OpenAI endpoint takes repeat_penalty (its documented payload
    # fields; its window for repetition is its own)
    Server("lmstudio", "/api/v0/models", "LM Studio", "/api/v1/models"),
    # llama.cpp's server: /props gives the window and the model file; /v1/models its
    # meta.n_params; its OpenAI endpoint takes every sampler field of its own
    Server("llama.cpp", "/props", "llama.cpp's server", "/v1/models"),
    # Ollama: /api/tags lists the models, /api/ps the loaded ones and their window, POST
    # /api/show a model's parameter count and Modelfile. Its OpenAI endpoint takes no
    # options (num_ctx, repeat_penalty are dropped): the window is the server's to set, and
    # Ollama applies its own repeat_penalty to every request
    Server(
        "ollama",
        "/api/tags",
        "Ollama",
        "/api/show",
        window_fix="start Ollama with OLLAMA_CONTEXT_LENGTH=16384 (or more), or set "
        "`PARAMETER num_ctx 16384` in the model's Modelfile and `ollama create` it",
    ),
    Server("openai", "/v1/models", "an OpenAI-compatible server (vLLM, ...)"),
)


def server_named(source: str) -> Server | None:
    """The SERVERS row of a ModelInfo.source."""
    return next((server for server in SERVERS if server.source == source), None)


# the local servers a new user most likely runs, at their default addresses (the first run
# probes them, in this order)
LOCAL_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("LM Studio", "http://localhost:1234/v1/chat/completions"),
    ("Ollama", "http://localhost:11434/v1/chat/completions"),
    ("llama.cpp", "http://localhost:8080/v1/chat/completions"),
)


def unsent_at_start(supports_tools: bool | None) -> set[str]:
    """Request fields never worth sending to this model: a chat template that knows no tools
    (llama.cpp reports it) silently drops `tools`, so they are described in the prompt."""
    return {"tools"} if supports_tools is False else set()


# --------------------------------------------------------------------------- refused fields

# request fields a server may reject (HTTP 400/422 naming them); when an error names several,
# the first here is dropped first. A dropped field is never sent again by that client.
OPTIONAL_PARAMS = (
    "stream_options",
    "return_progress",
    "parallel_tool_calls",
    "tool_choice",
    "response_format",
    "tools",
)


# other words servers use in an error about a field: llama.cpp names the schema it could not
# turn into a grammar, not `response_format`
FIELD_WORDS = {"response_format": ("json_schema", "json schema", "grammar")}


def rejected_params(exc: Exception) -> list[str]:
    """Optional fields that were sent and that the error body names ("tool choice" too)."""
    body = getattr(exc, "body", "").lower()
    sent = getattr(exc, "sent", ())
    return [p for p in OPTIONAL_PARAMS if p in sent and _names(body, p)]


def _names(body: str, field: str) -> bool:
    return bool(re.search(field.replace("_", "[_ -]"), body)) or any(
        word in body for word in FIELD_WORDS.get(field, ())
    )


# --------------------------------------------------------------------------- failures


@dataclass(frozen=True)
class RetryRule:
    """One row of RETRY_POLICY: which failures it covers and what the client does about them."""

    kind: type  # the exception class covered
    statuses: Iterable[int]  # HTTP statuses covered; ANY = all
    words: tuple[str, ...]  # words in the error body, one is enough; ANY = no condition
    action: str  # backoff | wait | resume | compact | drop_param | fail (see LLMClient._recover)
    message: str  # what the user is told

    def matches(self, exc: Exception) -> bool:
        status, body = getattr(exc, "status", None), getattr(exc, "body", "").lower()
        return (
            isinstance(exc, self.kind)
            and (not self.statuses or status in self.statuses)
            and (not self.words or any(word in body for word in self.words))
        )


# First match wins. backoff: retry after 1, 2, 4 ... x LLM_RETRY_DELAY s, LLM_RETRIES times;
# wait: poll (at most every MAX_LOADING_POLL s) until LLM_TIMEOUT s have passed; resume: retry
# at once, LLM_RETRIES times; compact: raise ContextOverflow for the loop; drop_param: retry
# without the rejected field and never send it again; fail: raise at once.
# fmt: off
ANY: tuple = ()
OVERFLOW_WORDS = ("context length", "context window", "context size", "exceed_context_size",
                  "too many tokens", "maximum context", "n_ctx", "prompt is too long")
PARAM_WORDS = (*OPTIONAL_PARAMS, "tool choice", "tool-choice", *FIELD_WORDS["response_format"])
LOADING_WORDS = ("loading model", "model is loading")
RETRY_POLICY: tuple[RetryRule, ...] = (
    RetryRule(LLMTimeout, ANY, ANY, "fail", "no answer within LLM_TIMEOUT; raise it if needed"),
    RetryRule(LLMUnreachable, ANY, ANY, "backoff", "cannot reach the LLM server"),
    RetryRule(StreamBroken, ANY, ANY, "resume", "the reply broke off; asking again"),
    RetryRule(LLMError, (400, 413, 500), OVERFLOW_WORDS, "compact", "the context is full"),
    RetryRule(LLMError, (400, 422), PARAM_WORDS, "drop_param", "a request field was rejected"),
    RetryRule(LLMError, (503,), ANY, "wait", "the model is still loading; waiting"),
    RetryRule(LLMError, ANY, LOADING_WORDS, "wait", "the model is still loading; waiting"),
    RetryRule(LLMError, range(500, 600), ANY, "backoff", "the LLM server returned an error"),
    RetryRule(LLMError, (429,), ANY, "backoff", "the LLM server is busy"),
    RetryRule(Exception, ANY, ANY, "fail", "the LLM request failed"),
)
# fmt: on


# --------------------------------------------------------------------------- the reply's form


def reply_format(schema: dict) -> dict:
    """`response_format` asking for a reply valid against `schema`: OpenAI's form, which LM
    Studio, llama.cpp's server, Ollama (0.5+) and vLLM all honour (llama.cpp turns it into a
    grammar; a server that cannot refuses it with a 400 naming the field)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "reply", "strict": True, "schema": schema},
    }
