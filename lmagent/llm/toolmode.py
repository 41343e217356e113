"""Which way tool calls are asked for (TOOL_CALL_MODE), and why.

`native`: the tools go as the request's `tools` and the server returns `tool_calls` (calls a
model writes as text are still read). `text`: the tools are described in the prompt and calls
read from the reply's text. `constrained`: the request carries a JSON schema admitting one valid
call or an answer (constrained.py). `auto` decides once per server and model for the process:
native where the server takes tool definitions for this model, and where its chat template
knows no tools (llama.cpp reports that) one small request finds out whether the server honours
a JSON schema: constrained if it does, text if it does not. A model offered native tools that
writes its calls as text anyway switches the process to text for that server and model.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import requests

from lmagent.core.config import Config
from lmagent.llm.client import auth_headers, chat_url
from lmagent.llm.probe import ModelInfo
from lmagent.llm.quirks import SERVERS, reply_format

PROBE_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
PROBE_TIMEOUT = 60.0  # seconds; a loading model may take a while to answer


@dataclass(frozen=True)
class ToolMode:
    mode: str  # native | text | constrained
    reason: str  # why, for the banner and /status

    def describe(self) -> str:
        return f"tool calls: {self.mode} ({self.reason})"


_decided: dict[tuple[str, str], ToolMode] = {}
_lock = threading.Lock()


def choose(config: Config, info: ModelInfo) -> ToolMode:
    """The mode for this server and model: as set, or (auto) as decided from what the probe of
    the server found, asking the server about schemas once per process."""
    if config.tool_call_mode != "auto":
        return ToolMode(config.tool_call_mode, f"TOOL_CALL_MODE={config.tool_call_mode}")
    learned = _decided.get(_key(config, info.model_id))
    if learned is not None:
        return learned
    if info.supports_tools is not False:
        server = next((s.label for s in SERVERS if s.source == info.source), "the server")
        return ToolMode("native", f"auto: {server} takes tool definitions")
    key = _key(config, info.model_id)
    with _lock:
        if key not in _decided:
            _decided[key] = _without_template_tools(config, info.model_id)
        return _decided[key]


def forget() -> None:
    """Forget every decision: a new server may now answer at an address seen before (each
    test starts its own scripted server, and ports are reused)."""
    with _lock:
        _decided.clear()


def _key(config: Config, model: str) -> tuple[str, str]:
    return chat_url(config.llm_url), config.llm_model or model


def calls_came_as_text(config: Config, model: str) -> ToolMode | None:
    """Under auto, the model answered a request that offered native tools with calls written
    as text: text mode from now on for this server and model (the schemas cost the prompt
    thousands of tokens that this model does not use). None when TOOL_CALL_MODE is set."""
    if config.tool_call_mode != "auto":
        return None
    mode = ToolMode("text", "auto: the model writes its tool calls as text, not native calls")
    with _lock:
        _decided[_key(config, model)] = mode
    return mode


def _without_template_tools(config: Config, model: str) -> ToolMode:
    honoured, why = schema_honoured(config, model)
    if honoured:
        return ToolMode("constrained", f"auto: the chat template knows no tools; {why}")
    return ToolMode("text", f"auto: the chat template knows no tools and {why}")


def schema_honoured(config: Config, model: str) -> tuple[bool, str]:
    """(whether the server kept a short reply to a JSON schema, what was seen)."""
    body = {
        "messages": [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}],
        "max_tokens": 16,
        "temperature": 0,
        "stream": False,
        "response_format": reply_format(PROBE_SCHEMA),
    }
    if config.llm_model or model:
        body["model"] = config.llm_model or model
    headers = auth_headers(config.llm_api_key)
    try:
        response = requests.post(
            chat_url(config.llm_url), json=body, headers=headers, timeout=PROBE_TIMEOUT
        )
    except requests.RequestException as exc:
        return False, f"the JSON-schema probe failed ({type(exc).__name__})"
    if response.status_code >= 400:
        return False, f"the server refused a JSON schema (HTTP {response.status_code})"
    try:
        reply = json.loads(response.json()["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return False, "the server ignored a JSON schema"
    if isinstance(reply, dict) and set(reply) == {"ok"} and isinstance(reply["ok"], bool):
        return True, "the server honours a JSON schema"
    return False, "the server ignored a JSON schema"
