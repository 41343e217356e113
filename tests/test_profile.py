"""The model profile follows the model on any server, with no settings (lmagent/llm/profile.py):
what llama.cpp's server, LM Studio and Ollama report of the loaded model chooses the tool set,
the call form, the sampling and the reply cap; a user's own setting wins; a small model's first
request fits the budget --embedded keeps; no repetition penalty is sent (measured harmful to code
edits); Ollama's window is known and never overflowed.

The servers are the scripted one, answering each server's own endpoints as that server does."""

from __future__ import annotations

import json

import pytest

from lmagent.llm.probe import parameters_in_name
from lmagent.llm.profile import REPLY_CAP
from lmagent.llm.quirks import OLLAMA_DEFAULT_WINDOW
from lmagent.runtime import shared_runtime
from tests.cli_process import cli
from tests.conftest import make_config
from tests.scripted_llm import OllamaModel, ScriptedLLM, props_without_tools, text
from tests.test_small_models import FIRST_REQUEST_BUDGET, request_tokens, run
from tests.test_tiny_models import admitted, replying

SMALL_FILE = "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
LARGE_FILE = "/models/Qwen2.5-Coder-32B-Instruct-Q4_K_M.gguf"
SMALL_SETTINGS = {
    "tool_set": "compact",
    "tool_call_mode": "text",
    "llm_temperature": 0.0,
    "llm_max_tokens": REPLY_CAP,
}
DEFAULTS = {
    "tool_set": "auto",
    "tool_call_mode": "auto",
    "llm_temperature": 0.65,
    "llm_max_tokens": 0,
}


def llama_cpp(model_path: str, n_params: int | None = None, turns=()) -> ScriptedLLM:
    props = {"model_path": model_path, "default_generation_settings": {"n_ctx": 32768}}
    meta = {"n_params": n_params} if n_params else None
    return ScriptedLLM(list(turns), models=False, props=props, model_meta=meta)


def lm_studio(model: dict, turns=()) -> ScriptedLLM:
    return ScriptedLLM(list(turns), models=[{"loaded_context_length": 32768, **model}])


def ollama(model: OllamaModel, turns=()) -> ScriptedLLM:
    return ScriptedLLM(list(turns), models=False, ollama=model)


SERVERS = {
    "llama.cpp, the model file's name": (llama_cpp(SMALL_FILE), llama_cpp(LARGE_FILE)),
    "llama.cpp, meta.n_params": (
        llama_cpp("/models/model.gguf", 1_543_714_304),
        llama_cpp("/models/model.gguf", 32_763_876_352),
    ),
    "LM Studio, the model's name": (
        lm_studio({"id": "qwen2.5-coder-1.5b-instruct"}),
        lm_studio({"id": "qwen2.5-coder-32b-instruct"}),
    ),
    "LM Studio 0.4, params_string": (
        lm_studio({"id": "zeta", "params_string": "1.5B"}),
        lm_studio({"id": "zeta", "params_string": "7B"}),
    ),
    "Ollama": (
        ollama(OllamaModel("qwen2.5-coder:1.5b", "1.5B", loaded_context=32768)),
        ollama(OllamaModel("qwen2.5-coder:32b", "32.8B", loaded_context=32768)),
    ),
}


def settings(config) -> dict:
    return {name: getattr(config, name) for name in SMALL_SETTINGS}


@pytest.mark.parametrize("servers", SERVERS.values(), ids=SERVERS.keys())
def test_the_profile_follows_the_size_the_server_reports(workspace, servers):
    small, large = servers
    with small, shared_runtime(make_config(workspace, small, enable_mcp=False)) as runtime:
        assert runtime.profile.name == "small"
        assert settings(runtime.config) == SMALL_SETTINGS
        assert runtime.tool_mode.mode == "text"
    with large, shared_runtime(make_config(workspace, large, enable_mcp=False)) as runtime:
        assert runtime.profile.name == "default"
        assert settings(runtime.config) == DEFAULTS


def test_a_server_that_reports_no_size_keeps_the_defaults(workspace):
    with ScriptedLLM() as llm, shared_runtime(make_config(workspace, llm)) as runtime:
        assert (runtime.profile.name, settings(runtime.config)) == ("default", DEFAULTS)


def test_a_tiny_model_gets_the_tiny_tool_set(workspace):
    llm = llama_cpp("/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    with llm, shared_runtime(make_config(workspace, llm, enable_mcp=False)) as runtime:
        assert runtime.profile.name == "tiny"
        assert (runtime.config.tool_set, runtime.config.llm_temperature) == ("tiny", 0.0)


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1.5),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", 0.135),
        ("llama3.1:8b", 8.0),
        ("qwen3-30b-a3b", 30.0),  # a mixture of experts: all its parameters
        ("qwen2.5-7b-instruct-1m", 7.0),  # a 1M-token context is no size
        ("mistral-7b-instruct-v0.3", 7.0),
        ("zeta", None),
        ("scripted-model", None),
    ],
)
def test_the_size_a_model_name_tells(name, billions):
    assert parameters_in_name(name) == billions


def test_what_the_user_set_wins(workspace):
    own = {
        "tool_set": "full",
        "tool_call_mode": "native",
        "llm_temperature": 0.3,
        "llm_max_tokens": 300,
    }
    llm = llama_cpp(SMALL_FILE)
    with llm, shared_runtime(make_config(workspace, llm, enable_mcp=False, **own)) as runtime:
        assert runtime.profile.name == "small"
        assert settings(runtime.config) == own


def test_the_first_request_to_a_small_model_with_default_settings_fits_the_budget(workspace):
    """With the defaults, the first request to this server was ~3,400 tokens (every tool's
    schema); the profile makes it what --embedded sends."""
    with llama_cpp(SMALL_FILE, turns=[text("Hello.\nTASK_COMPLETE")]) as llm:
        result = run(make_config(workspace, llm, enable_mcp=False), "say hello")
        first = llm.requests[0]
    assert result.status == "completed"
    assert "tools" not in first  # calls as text: no schemas
    assert request_tokens(first) <= FIRST_REQUEST_BUDGET, request_tokens(first)
    assert (first["temperature"], first["max_tokens"]) == (0.0, REPLY_CAP)


@pytest.mark.parametrize(
    "server",
    [
        lambda: llama_cpp(SMALL_FILE),  # measured: they broke code edits (quirks.py)
        lambda: lm_studio({"id": "qwen2.5-coder-1.5b-instruct"}),
        lambda: ollama(OllamaModel("qwen2.5-coder:1.5b", "1.5B", 32768)),
        lambda: ScriptedLLM(models=["qwen2.5-coder-1.5b-instruct"], openai_only=True),
    ],
    ids=["llama.cpp", "LM Studio", "Ollama", "an OpenAI-compatible server"],
)
def test_no_repetition_field_is_sent_to_a_small_model_on_any_server(workspace, server):
    fields = {"repeat_penalty", "repeat_last_n", "dry_multiplier", "options"}
    with server() as llm:
        llm.add(text("Hello.\nTASK_COMPLETE"))
        run(make_config(workspace, llm, enable_mcp=False), "say hello")
        first = llm.requests[0]
    assert first["temperature"] == 0.0  # a small model, on every server
    assert not fields & set(first)


@pytest.mark.parametrize(
    ("model", "window", "warned"),
    [
        (OllamaModel("qwen2.5-coder:1.5b", "1.5B"), OLLAMA_DEFAULT_WINDOW, True),
        (OllamaModel("qwen2.5-coder:1.5b", "1.5B", num_ctx=8192), 8192, True),
        (OllamaModel("qwen2.5-coder:1.5b", "1.5B", loaded_context=32768), 32768, False),
    ],
    ids=["not loaded: Ollama's default", "the Modelfile's num_ctx", "loaded: its window"],
)
def test_ollamas_window_is_known_and_prompts_are_kept_under_it(workspace, model, window, warned):
    with ollama(model) as llm, shared_runtime(make_config(workspace, llm)) as runtime:
        assert llm.posts[0] == ("/api/show", {"model": "qwen2.5-coder:1.5b"})
        assert runtime.run_options()["context_length"] == window  # compaction stays under it
        warning = [line for line in runtime.banner_lines() if "OLLAMA_CONTEXT_LENGTH" in line]
    assert bool(warning) == warned, runtime.banner_lines()


def test_the_banner_says_the_profile(workspace):
    llm = llama_cpp(SMALL_FILE)
    with llm, shared_runtime(make_config(workspace, llm, enable_mcp=False)) as runtime:
        lines = runtime.banner_lines()
    assert (
        "profile: small model (1.5B, 32k context) — compact tools, calls as text, "
        "temperature 0, replies up to 1024 tokens"
    ) in lines
    with ScriptedLLM() as llm, shared_runtime(make_config(workspace, llm)) as runtime:
        assert "profile: default (size unknown, 8k context)" in runtime.banner_lines()


def test_json_carries_the_profile_in_the_session_event(workspace):
    with llama_cpp(SMALL_FILE, turns=[text("Hello.\nTASK_COMPLETE")]) as llm:
        done = cli(workspace, llm, "--json", "say hello")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout.splitlines()[0])
    assert session["type"] == "session"
    assert session["profile"] == {
        "name": "small",
        "parameters_b": 1.5,
        "context_length": 32768,
        "server": "llama.cpp",
        "tool_set": "compact",
        "tool_call_mode": "text",
        "temperature": 0.0,
        "max_tokens": REPLY_CAP,
    }


def test_a_tiny_model_on_a_users_server_must_act_first_and_then_answer(workspace):
    """The loop holds a tiny model to one call, then an answer, under the profile's tiny tool
    set as under TOOL_SET=tiny (the template knows no tools: calls are constrained)."""
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    read = {"name": "read", "arguments": {"path": "notes.txt"}}
    answer = {"answer": "The secret word is plum."}

    def must_call(body: dict) -> None:
        assert not admitted(body, {"answer": "The secret word is banana."})

    def must_answer(body: dict) -> None:
        assert not admitted(body, read)

    props = {**props_without_tools(), "model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf"}
    schema_probe = text(json.dumps({"ok": True}))
    turns = [schema_probe, replying(read, must_call), replying(answer, must_answer)]
    with ScriptedLLM(turns, models=False, props=props) as llm:
        config = make_config(workspace, llm, enable_mcp=False)
        result = run(config, "Read notes.txt and tell me the secret word")
        llm.assert_all_used()
    assert (result.status, result.message) == ("completed", "The secret word is plum.")
