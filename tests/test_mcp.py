"""MCP servers through the official SDK: a real stdio server, driven by the agent loop."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import run_agent
from lmagent.tools.mcp import MCPManager, load_specs, tool_name
from lmagent.tools.registry import Services
from lmagent.tools.toolset import build_toolset
from tests.cli_process import Running, cli_env
from tests.conftest import free_port, make_config, tool_context
from tests.scripted_llm import text, tool_call

DEMO = Path(__file__).parent / "mcp_servers" / "demo_server.py"


def write_mcp_json(workspace: Path, servers: dict) -> None:
    (workspace / ".lmagent").mkdir(exist_ok=True)
    (workspace / ".lmagent" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def demo_spec() -> dict:
    return {"command": sys.executable, "args": [str(DEMO)]}


@pytest.fixture
def manager(workspace):
    write_mcp_json(workspace, {"demo": demo_spec(), "broken": {"command": "no-such-program-x"}})
    mgr = MCPManager(workspace, call_timeout=2)
    mgr.start(timeout=60)
    yield mgr
    mgr.close()


def services_with(config, mgr: MCPManager) -> Services:
    services = Services(config)
    services.extra_tools.extend(mgr.tools())
    return services


def test_tools_are_listed_with_the_server_schema_and_failures_reported_once(manager):
    tools = {t.name: t for t in manager.tools()}
    assert set(tools) == {
        "mcp_demo_echo",
        "mcp_demo_add",
        "mcp_demo_hang",
        "mcp_demo_crash",
        "mcp_demo_picture",
    }
    assert tools["mcp_demo_add"].parameters["required"] == ["a", "b"]
    assert tools["mcp_demo_add"].parameters["properties"]["a"]["type"] == "integer"
    assert all(t.changes_things for t in tools.values())
    lines = manager.status_lines()
    assert lines[0].startswith("demo: ready")
    assert lines[1].startswith("broken: failed")
    assert "no-such-program-x" in lines[1]


def test_agent_loop_calls_an_mcp_tool_and_sees_its_result(workspace, llm, manager):
    config = make_config(workspace, llm)
    llm.add(tool_call("mcp_demo_add", {"a": 2, "b": "40"}), text("The sum is 42.\nTASK_COMPLETE"))
    services = services_with(config, manager)
    result = run_agent(config, "add 2 and 40", services=services)
    assert result.status == "completed"
    llm.assert_all_used()
    tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert (
        json.loads(tool_messages[0]["content"])["content"].replace(" ", "").replace("\n", "")
        == '{"sum":42}'
    )


def test_mcp_tools_ask_permission_in_normal_mode(workspace, llm, manager):
    config = make_config(workspace, llm)
    asked = []
    gate = PermissionGate("normal", lambda tool, args: asked.append(tool) or "deny")
    llm.add(tool_call("mcp_demo_echo", {"text": "hi"}), text("ok\nTASK_COMPLETE"))
    run_agent(config, "echo", gate=gate, services=services_with(config, manager))
    assert asked == ["mcp_demo_echo"]
    denied = json.loads(
        next(m for m in llm.requests[-1]["messages"] if m["role"] == "tool")["content"]
    )
    assert denied["success"] is False and "denied" in denied["error"]


def test_hanging_call_times_out_and_the_server_keeps_working(workspace, manager):
    config = make_config(workspace)
    ctx = tool_context(config)
    toolset = build_toolset(services_with(config, manager))
    hung = toolset.execute(ctx, "mcp_demo_hang", {"seconds": 30})
    assert hung["success"] is False
    assert "timed out" in hung["error"] and "not retried" in hung["error"]
    again = toolset.execute(ctx, "mcp_demo_echo", {"text": "alive"})
    assert again == {"success": True, "content": "alive", "structured": {"result": "alive"}}


def test_server_crash_mid_run_is_reported_and_the_run_goes_on(workspace, llm, manager):
    config = make_config(workspace, llm)
    llm.add(
        tool_call("mcp_demo_crash", {}),
        tool_call("mcp_demo_echo", {"text": "after"}),
        text("The MCP server is gone.\nTASK_COMPLETE"),
    )
    result = run_agent(config, "crash it", services=services_with(config, manager))
    assert result.status == "completed"
    results = [
        json.loads(m["content"]) for m in llm.requests[-1]["messages"] if m["role"] == "tool"
    ]
    assert results[0]["success"] is False and "not retried" in results[0]["error"]
    assert results[1]["success"] is False and "not available" in results[1]["error"]
    assert manager.status_lines()[0].startswith("demo: crashed")


def test_images_from_mcp_are_saved_for_the_vision_tool_not_pasted_into_context(workspace, manager):
    config = make_config(workspace)
    result = build_toolset(services_with(config, manager)).execute(
        tool_context(config), "mcp_demo_picture", {}
    )
    assert result["success"] is True
    (image,) = result["images"]
    assert image["mime_type"] == "image/png" and "data" not in image
    saved = workspace / image["path"]
    assert image["path"].startswith(".lmagent/mcp_images/")
    assert saved.read_bytes().startswith(b"\x89PNG") and image["bytes"] == saved.stat().st_size
    assert "vision" in result["note"]


def test_mcp_json_cannot_be_written_by_the_agent(workspace):
    write_mcp_json(workspace, {"demo": demo_spec()})
    before = (workspace / ".lmagent" / "mcp.json").read_text()
    config = make_config(workspace)
    ctx = tool_context(config)
    toolset = build_toolset()
    evil = json.dumps({"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}}})
    for name, args in (
        ("write", {"path": ".lmagent/mcp.json", "content": evil}),
        ("edit", {"path": ".lmagent/mcp.json", "search": "demo", "replace": "x"}),
        ("write", {"path": str(workspace / ".lmagent" / "mcp.json"), "content": evil}),
    ):
        result = toolset.execute(ctx, name, args)
        assert result["success"] is False and "configuration" in result["error"]
    assert (workspace / ".lmagent" / "mcp.json").read_text() == before


def test_no_config_and_bad_config(workspace):
    assert load_specs(workspace) == ({}, "")
    write_mcp_json(workspace, {"a": {"args": []}})
    specs, problem = load_specs(workspace)
    assert specs == {} and "needs a command or a url" in problem
    (workspace / ".lmagent" / "mcp.json").write_text("{not json")
    assert "is not valid" in load_specs(workspace)[1]
    assert tool_name("my server", "do.it") == "mcp_my_server_do_it"


def _wait_for_port(port: int, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the MCP HTTP server exited at start"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the MCP HTTP server did not listen on {port} within {timeout} s")


def test_a_streamable_http_server_given_by_url_is_used_like_a_stdio_one(workspace, llm):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(DEMO), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, server)
        write_mcp_json(workspace, {"web": {"url": f"http://127.0.0.1:{port}/mcp"}})
        mgr = MCPManager(workspace, call_timeout=5)
        mgr.start(timeout=30)
        try:
            assert mgr.status_lines()[0].startswith("web: ready"), mgr.status_lines()
            config = make_config(workspace, llm)
            llm.add(tool_call("mcp_web_add", {"a": 20, "b": 22}), text("42\nTASK_COMPLETE"))
            result = run_agent(config, "add", services=services_with(config, mgr))
            assert result.status == "completed"
            reply = next(m for m in llm.requests[-1]["messages"] if m["role"] == "tool")
            answer = json.loads(reply["content"])
            assert answer["success"] is True and json.loads(answer["content"]) == {"sum": 42}
        finally:
            mgr.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_an_unreachable_url_server_is_reported_failed_not_hung(workspace):
    write_mcp_json(workspace, {"gone": {"url": f"http://127.0.0.1:{free_port()}/mcp"}})
    mgr = MCPManager(workspace, call_timeout=2)
    started = time.monotonic()
    mgr.start(timeout=20)
    try:
        assert time.monotonic() - started < 15
        (line,) = mgr.status_lines()
        assert line.startswith("gone: failed"), line
        assert mgr.tools() == []
    finally:
        mgr.close()


# --------------------------------------------------------------------------- hung servers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]
HUNG = f"""
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # hung for good: only SIGKILL ends it
subprocess.Popen({SLEEPER!r} + sys.argv[1:])  # a child of its own
time.sleep(3600)  # never reads stdin, never answers
"""
WITH_A_CHILD = f"""
import runpy, subprocess, sys
subprocess.Popen({SLEEPER!r} + sys.argv[1:2])  # left running when the server exits
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def hung_and_good_servers(mark: str) -> dict:
    """Two servers that never answer and one demo server; every process started for them
    (servers and their children) has `mark` on its command line."""
    hung = {"command": sys.executable, "args": ["-c", HUNG, mark]}
    good = {"command": sys.executable, "args": ["-c", WITH_A_CHILD, mark, str(DEMO)]}
    return {"hung_a": hung, "hung_b": hung, "good": good}


def marked(mark: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if mark in (process.info["cmdline"] or ()) and process.status() != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.fixture
def mark():
    """A unique mark for the processes of one test; any left at its end are killed."""
    value = f"lmagent-test-{secrets.token_hex(6)}"
    yield value
    for process in marked(value):
        process.kill()


def test_hung_servers_fail_within_one_bound_together_and_leave_no_process(workspace, mark):
    write_mcp_json(workspace, hung_and_good_servers(mark))
    mgr = MCPManager(workspace)
    started = time.monotonic()
    mgr.start(timeout=10)  # the good one starts within it on a busy machine too
    took = time.monotonic() - started
    try:
        assert 10 <= took < 15  # one bound for all of them, not 10 s per hung server
        hung_a, hung_b, good = mgr.status_lines()
        assert hung_a == "hung_a: failed — did not start within 10 s; stopped"
        assert hung_b == "hung_b: failed — did not start within 10 s; stopped"
        assert good.startswith("good: ready (echo, add")
        assert {t.name for t in mgr.tools()} >= {"mcp_good_echo", "mcp_good_add"}
        assert [p for p in marked(mark) if str(DEMO) in p.cmdline()]  # the good one runs
    finally:
        mgr.close()
    assert marked(mark) == []  # servers, hung or not, and their children


def test_close_during_start_up_stops_every_server(workspace, mark):
    write_mcp_json(workspace, hung_and_good_servers(mark))
    mgr = MCPManager(workspace)
    starting = threading.Thread(target=mgr.start, args=(30,))
    starting.start()
    deadline = time.monotonic() + 15
    while len(marked(mark)) < 6 and time.monotonic() < deadline:  # 3 servers, 3 children
        time.sleep(0.05)
    mgr.close()
    starting.join(timeout=15)
    assert not starting.is_alive()
    assert marked(mark) == []


def test_the_agent_starts_past_hung_servers_and_leaves_none_behind(workspace, mark):
    bound = 10  # the good one starts within it on a busy machine too
    write_mcp_json(workspace, hung_and_good_servers(mark))
    env = cli_env(workspace, ENABLE_MCP="true", MCP_START_TIMEOUT=str(bound))
    started = time.monotonic()
    agent = Running(workspace, None, env=env)  # the REPL
    try:
        agent.wait_for("Type a task", timeout=4 * bound)
        assert time.monotonic() - started < 2 * bound  # not one bound per hung server
        banner = "".join(agent.seen)
        for name in ("hung_a", "hung_b"):
            assert f"MCP {name} (runs on the host: " in banner
        assert banner.count(f"— failed: did not start within {bound} s; stopped") == 2
        assert "MCP good (runs on the host: " in banner and "— ready" in banner
        agent.send("quit")
        code, stderr = agent.finish(timeout=30)
    finally:
        agent.kill()
    assert code == 0, stderr
    assert marked(mark) == []
