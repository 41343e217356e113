"""What the server has loaded: the model, its size, its context window, vision models and
whether its chat template knows tools, asked of each kind of server in quirks.SERVERS until one
answers; and what to tell a user when nothing answers at all."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
from dataclasses import dataclass, field
from pathlib import PurePath

from lmagent.core.config import Config
from lmagent.llm.client import (
    auth_headers,
    base_url,
    json_object,
    open_connection,
    request_target,
)
from lmagent.llm.errors import LLMError
from lmagent.llm.quirks import OLLAMA_DEFAULT_WINDOW, SERVERS, Server

_BAD = (ValueError, KeyError, TypeError, AttributeError)  # an answer of another shape


@dataclass
class ModelInfo:
    model_id: str = ""
    context_length: int | None = None
    vision_models: list[str] = field(default_factory=list)
    source: str = ""  # which endpoint answered
    supports_tools: bool | None = None  # False: the chat template drops `tools` (llama.cpp)
    reachable: bool = True  # False: nothing accepts a connection at LLM_URL
    file: str = ""  # the model file's name, when the server tells it (llama.cpp; --embedded)
    parameters: float | None = None  # billions, where the server or the model's name tells
    window_assumed: bool = False  # the window is the server's default for a model not loaded
    props: dict = field(default_factory=dict)  # llama.cpp's /props answer (kvcache.server_cache)

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
    headers = auth_headers(config.llm_api_key)
    for server in SERVERS:
        try:
            data = _fetch_json(base + server.info_path, headers, timeout)
            info = _READERS[server.source](data, config.llm_model) if data else None
        except _NoConnection:  # refused, no such host, or no answer to connecting at all
            return ModelInfo(reachable=False)
        except (OSError, http.client.HTTPException):
            # connected, but no reply (a server busy loading): the other endpoints would not help
            return ModelInfo()
        except (LLMError, *_BAD):
            continue
        if info is not None:
            return _with_size(server, info, _Asker(base, headers, timeout))
    return ModelInfo()


@dataclass(frozen=True)
class _Asker:
    """Asks one server for JSON: GET, or POST with a body."""

    base: str
    headers: dict
    timeout: float

    def __call__(self, path: str, body: dict | None = None) -> dict | None:
        return _fetch_json(self.base + path, self.headers, self.timeout, body)


def _with_size(server: Server, info: ModelInfo, ask: _Asker) -> ModelInfo:
    """`info` with what the server's size endpoint adds (best effort: the parameter count, and
    for Ollama the window); the model's name tells the size where the server does not."""
    with contextlib.suppress(_NoConnection, OSError, http.client.HTTPException, LLMError, *_BAD):
        _SIZES[server.source](info, ask, server.size_path)
    if info.parameters is None:
        info.parameters = parameters_in_name(info.model_id)
    return info


class _NoConnection(Exception):
    """Nothing accepted a connection at the URL (a host that drops packets times out here)."""


def _fetch_json(url: str, headers: dict, timeout: float, body: dict | None = None) -> dict | None:
    conn = open_connection(url, timeout)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise _NoConnection(str(exc)) from exc
        if body is None:
            conn.request("GET", request_target(url), headers=headers)
        else:
            data = json.dumps(body).encode()
            sent = {**headers, "Content-Type": "application/json"}
            conn.request("POST", request_target(url), data, sent)
        response = conn.getresponse()
        return json_object(response.read()) if response.status == 200 else None
    finally:
        conn.close()


# a size in a model's name: "qwen2.5-coder-1.5b-instruct", "SmolLM2-135M", "llama3.1:8b"
_SIZE_IN_NAME = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)([bm])(?![a-z0-9])", re.IGNORECASE)


def parameters_in_name(name: str) -> float | None:
    """The parameter count (billions) a model's name or file tells, or None: the largest
    number followed by B or M ("30b-a3b" is 30; a "1m" context beside "7b" is 7)."""
    sizes = [
        float(number) / (1000 if unit.lower() == "m" else 1)
        for number, unit in _SIZE_IN_NAME.findall(name.rsplit("/", 1)[-1])
    ]
    return max(sizes) if sizes else None


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
    info = ModelInfo(alias, int(n_ctx), vision, "llama.cpp", supports, file=PurePath(path).name)
    info.parameters = parameters_in_name(str(path))
    info.props = data
    return info


def _read_ollama(data: dict, wanted: str) -> ModelInfo | None:
    """Ollama's /api/tags: the model asked for, else the first; its window comes with its size."""
    models = data.get("models")
    if not isinstance(models, list):
        return None
    names = [m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)]
    chosen = next((n for n in names if wanted in (n, n.removesuffix(":latest"))), None)
    return ModelInfo(chosen or (names[0] if names else wanted), None, [], "ollama")


def _read_openai(data: dict, wanted: str) -> ModelInfo | None:
    if not data.get("data"):
        return None
    ids = [m.get("id", "") for m in data["data"]]
    return ModelInfo(wanted if wanted in ids else ids[0], None, [], "openai")


# how each kind of server in quirks.SERVERS describes what is loaded
_READERS = {
    "lmstudio": _read_lmstudio,
    "llama.cpp": _read_llamacpp,
    "ollama": _read_ollama,
    "openai": _read_openai,
}


def _size_lmstudio(info: ModelInfo, ask: _Asker, path: str) -> None:
    """LM Studio 0.4+: the model's params_string ("7B", "270M")."""
    models = (ask(path) or {}).get("models") or []
    entry = next((m for m in models if isinstance(m, dict) and m.get("key") == info.model_id), {})
    info.parameters = parameters_in_name(f"-{entry.get('params_string') or ''}")


def _size_llamacpp(info: ModelInfo, ask: _Asker, path: str) -> None:
    """llama.cpp's /v1/models: meta.n_params of the (one) model it serves."""
    models = (ask(path) or {}).get("data") or []
    count = (models[0].get("meta") or {}).get("n_params") if models else None
    if isinstance(count, (int, float)) and count > 0:
        info.parameters = count / 1e9


def _size_ollama(info: ModelInfo, ask: _Asker, path: str) -> None:
    """Ollama: the parameter count from /api/show; the window the model runs with from /api/ps
    when it is loaded, else from its Modelfile's num_ctx, else Ollama's default (assumed)."""
    shown = ask(path, {"model": info.model_id}) or {}
    count = (shown.get("model_info") or {}).get("general.parameter_count")
    size = (shown.get("details") or {}).get("parameter_size") or ""
    info.parameters = count / 1e9 if isinstance(count, int) else parameters_in_name(f"-{size}")
    running = (ask("/api/ps") or {}).get("models") or []
    loaded = next((m for m in running if m.get("name") == info.model_id), {})
    set_in_file = re.search(r"^num_ctx\s+(\d+)", shown.get("parameters") or "", re.MULTILINE)
    if loaded.get("context_length"):
        info.context_length = int(loaded["context_length"])
    elif set_in_file:
        info.context_length = int(set_in_file.group(1))
    else:
        info.context_length, info.window_assumed = OLLAMA_DEFAULT_WINDOW, True


def _no_size(info: ModelInfo, ask: _Asker, path: str) -> None:
    """A server that does not tell: the model's name may."""


_SIZES = {
    "lmstudio": _size_lmstudio,
    "llama.cpp": _size_llamacpp,
    "ollama": _size_ollama,
    "openai": _no_size,
}
