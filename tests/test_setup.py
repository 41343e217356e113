"""What a front end learns about the server at start-up, and how that shapes the runs."""

from __future__ import annotations

import json

from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.tools.toolset import SMALL_CONTEXT
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text


def lmstudio(model_id="qwen-coder", kind="llm", context=32768, state="loaded") -> dict:
    return {
        "id": model_id,
        "object": "model",
        "type": kind,
        "state": state,
        "max_context_length": 131072,
        "loaded_context_length": context,
        "capabilities": ["tool_use"],
    }


def test_loaded_context_window_is_read_and_shapes_the_run(workspace):
    with ScriptedLLM(models=[lmstudio(context=32768)]) as server:
        runtime = Runtime(make_config(workspace, server, enable_mcp=False)).start()
        assert runtime.context_length == 32768
        assert runtime.model.model_id == "qwen-coder"
        options = runtime.run_options()
        assert options["context_length"] == 32768
        assert options["client"].model == "qwen-coder"  # blank LLM_MODEL: the loaded model
        assert "delegate" in options["toolset"] and "git_commit" in options["toolset"]
        assert not runtime.warnings


def test_a_small_window_gets_the_compact_tool_set_and_warnings(workspace):
    with ScriptedLLM(models=[lmstudio(context=2048)]) as server:
        runtime = Runtime(make_config(workspace, server, enable_mcp=False)).start()
        toolset = runtime.toolset()
        offered = {schema["function"]["name"] for schema in toolset.schemas()}
        assert SMALL_CONTEXT > 2048
        assert {"read", "write", "edit", "shell"} <= offered
        assert "git_commit" not in offered and "task_reconcile" not in offered
        assert "git_commit(message, allow_empty?)" in toolset.on_demand_line()  # on demand
        assert any("Context Length" in w for w in runtime.warnings)
        assert any("compact tool set" in w for w in runtime.warnings)


def test_vision_is_offered_only_when_a_vision_model_is_loaded(workspace):
    with ScriptedLLM(models=[lmstudio(), lmstudio("llava", kind="vlm")]) as server:
        runtime = Runtime(make_config(workspace, server, enable_mcp=False))
        assert runtime.vision_model == "llava"
        assert "vision" in runtime.toolset()
    with ScriptedLLM(models=[lmstudio(), lmstudio("llava", kind="vlm", state="not-loaded")]) as s:
        runtime = Runtime(make_config(workspace, s, enable_mcp=False))
        assert runtime.vision_model is None and "vision" not in runtime.toolset()
    with ScriptedLLM(models=[lmstudio()]) as server:
        config = make_config(workspace, server, enable_mcp=False, vision_enabled="false")
        assert "vision" not in Runtime(config).toolset()


def test_a_template_without_tool_support_switches_to_text_tool_calls(workspace):
    props = {"default_generation_settings": {"n_ctx": 16384}}
    props["chat_template_caps"] = {"supports_tools": False}
    # auto: one request finds the server ignoring a JSON schema, so text it is
    schema_ignored = text("Sure!")
    turns = [schema_ignored, text("Hello.\nTASK_COMPLETE")]
    with ScriptedLLM(turns, models=False, props=props) as server:
        config = make_config(workspace, server, enable_mcp=False)
        runtime = Runtime(config).start()
        assert runtime.context_length == 16384
        assert runtime.tool_mode.mode == "text" and "ignored" in runtime.tool_mode.reason
        result = run_agent(config, "hi", **runtime.run_options())
        assert result.status == "completed"
        body = server.requests[-1]
        assert "tools" not in body and "tool_choice" not in body
        system = body["messages"][0]["content"]
        assert "<tool_call>" in system and "- read(path, offset, limit)" in system
        assert json.dumps(body).count('"type": "function"') == 0


def test_banner_names_model_sandbox_and_mcp_commands(workspace):
    (workspace / ".lmagent").mkdir()
    mcp = {"mcpServers": {"tools": {"command": "no-such-mcp-server", "args": ["--x"]}}}
    (workspace / ".lmagent" / "mcp.json").write_text(json.dumps(mcp))
    with ScriptedLLM(models=[lmstudio()]) as server:
        runtime = Runtime(make_config(workspace, server)).start()
        try:
            lines = "\n".join(runtime.banner_lines())
        finally:
            runtime.close()
    assert "qwen-coder" in lines and "context 32768 tokens" in lines
    assert "sandbox " in lines
    assert "runs on the host: no-such-mcp-server --x" in lines and "failed" in lines
