"""What the server has loaded: the model, its context window, vision models and whether its chat
template knows tools, asked of each kind of server in quirks.SERVERS until one answers; and
what to tell a user when nothing answers at all."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from pathlib import PurePath

from lmagent.core.config import Config
from lmagent.llm.client import base_url, json_object, open_connection, request_target
from lmagent.llm.errors import LLMError
from lmagent.llm.quirks import SERVERS


@dataclass
class ModelInfo:
    model_id: str = ""
    context_length: int | None = None
    vision_models: list[str] = field(default_factory=list)
    source: str = ""  # which endpoint answered
    supports_tools: bool | None = None  # False: the chat template drops `tools` (llama.cpp)
    reachable: bool = True  # False: nothing accepts a connection at LLM_URL
    file: str = ""  # the model file's name, when the server tells it (llama.cpp; --embedded)

    @property
    def name(self) -> str:
        """What to call the model for people: its file's name, else its id (--embedded serves
        every model as "embedded")."""
        return self.file or self.model_id


def unreachable_message(llm_url: str) -> str:
    """What to tell a user when nothing answers at LLM_URL."""
    return (
        f"cannot reach the LLM server at {llm_url}. Start LM Studio, load a model and start its "
        "server (Developer tab → Start Server, or `lms server start`), or set LLM_URL to your "
        "server's /v1/chat/completions address."
    )


def probe_model(config: Config, timeout: float = 3.0) -> ModelInfo:
    """Ask the server what is loaded and how large its context window is (best effort): each
    kind of server in quirks.SERVERS, in order, until one answers."""
    base = base_url(config.llm_url)
    headers = {"Authorization": f"Bearer {config.llm_api_key}"} if config.llm_api_key else {}
    for server in SERVERS:
        try:
            data = _get_json(base + server.info_path, headers, timeout)
            info = _READERS[server.source](data, config.llm_model) if data else None
        except _NoConnection:  # refused, no such host, or no answer to connecting at all
            return ModelInfo(reachable=False)
        except (OSError, http.client.HTTPException):
            # connected, but no reply (a server busy loading): the other endpoints would not help
            return ModelInfo()
        except (LLMError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if info is not None:
            return info
    return ModelInfo()


class _NoConnection(Exception):
    """Nothing accepted a connection at the URL (a host that drops packets times out here)."""


def _get_json(url: str, headers: dict, timeout: float) -> dict | None:
    conn = open_connection(url, timeout)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise _NoConnection(str(exc)) from exc
        conn.request("GET", request_target(url), headers=headers)
        response = conn.getresponse()
        return json_object(response.read()) if response.status == 200 else None
    finally:
        conn.close()


def _read_lmstudio(data: dict, wanted: str) -> ModelInfo | None:
    if not isinstance(data.get("data"), list):
        return None
    models = [m for m in data["data"] if isinstance(m, dict) and m.get("id")]
    loaded = [m for m in models if m.get("state") == "loaded"]
    chosen = next((m for m in models if m["id"] == wanted), None) if wanted else None
    chosen = chosen or (loaded[0] if loaded else None)
    vision = [
        m["id"]
        for m in loaded
        if m.get("type") == "vlm" or "vision" in (m.get("capabilities") or ())
    ]
    if chosen is None:
        return ModelInfo(vision_models=vision, source="lmstudio")
    # a model that is not loaded yet gets its context length when it loads: unknown until then
    length = chosen.get("loaded_context_length") if chosen.get("state") == "loaded" else None
    return ModelInfo(chosen["id"], int(length) if length else None, vision, "lmstudio")


def _read_llamacpp(data: dict, wanted: str) -> ModelInfo | None:
    settings = data.get("default_generation_settings") or {}
    n_ctx = settings.get("n_ctx") or data.get("n_ctx")
    if not n_ctx:
        return None
    path = data.get("model_path") or ""
    alias = data.get("model_alias") or path or wanted or ""
    vision = [alias] if (data.get("modalities") or {}).get("vision") else []
    caps = data.get("chat_template_caps")
    tools = caps.get("supports_tools") if isinstance(caps, dict) else None
    supports = tools if tools is False else None
    return ModelInfo(alias, int(n_ctx), vision, "llama.cpp", supports, file=PurePath(path).name)


def _read_openai(data: dict, wanted: str) -> ModelInfo | None:
    if not data.get("data"):
        return None
    ids = [m.get("id", "") for m in data["data"]]
    return ModelInfo(wanted if wanted in ids else ids[0], None, [], "openai")


# how each kind of server in quirks.SERVERS describes what is loaded
_READERS = {"lmstudio": _read_lmstudio, "llama.cpp": _read_llamacpp, "openai": _read_openai}
