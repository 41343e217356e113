"""How a request to the LLM server can fail: one exception class per kind of failure. What the
client does about each is the retry table in quirks.py."""

from __future__ import annotations


class LLMError(Exception):
    """A request to the LLM server failed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, body: str = "", sent=()):
        super().__init__(message)
        self.status = status
        self.body = body
        self.sent = tuple(sent)  # top-level fields of the request that failed


class LLMUnreachable(LLMError):
    """No connection (refused, DNS, timeout while connecting), or no answer at all."""


class LLMTimeout(LLMUnreachable):
    """The server took the connection but did not answer within LLM_TIMEOUT seconds."""


class StreamBroken(LLMError):
    """The reply was cut off: the connection dropped, or the stream ended before its finish
    reason or [DONE]."""


class ContextOverflow(LLMError):
    """The server says the prompt does not fit the model's context window."""


class LLMStopped(Exception):
    """The user stopped the run while the model was replying."""
