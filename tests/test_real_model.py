"""The agent against real llama.cpp servers with the small SmolLM2 model (issue 8).

A 135M model does not solve tasks: these tests check what the agent does around a real server
(parsing, streaming, tool calls and their results, how runs end, retries, the embedded server),
never the model's wisdom. Replies are kept short (greedy decoding, LLM_MAX_TOKENS 32-64).
Run only these with `pytest -m realmodel`, or leave them out with `pytest -m "not realmodel"`.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lmagent.cli.terminal import EXIT_CODES
from lmagent.core.workspace import PathError, Workspace
from lmagent.llm.client import Callbacks, LLMClient
from lmagent.llm.probe import probe_model
from lmagent.loop.history import result_messages
from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import Services, Toolset
from lmagent.tools.toolset import build_toolset
from tests.cli_process import cli_env
from tests.conftest import need
from tests.realmodel_fixtures import (
    N_CTX,
    Relay,
    need_model,
    need_module,
    real_config,
    start_xllama,
)

pytest_plugins = ["tests.realmodel_fixtures"]  # xllama, lcpp
pytestmark = pytest.mark.realmodel

ROOT = Path(__file__).resolve().parent.parent
READ_SCHEMA = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
TEXT_CALL = '<tool_call>{"name": "read", "arguments": {"path": "%s"}}</tool_call>'


# --------------------------------------------------------------------------- helpers


def ask(client: LLMClient, text: str, tools=None):
    """(reply, [(seconds, text) of each token event], seconds when chat() returned)."""
    start, tokens = time.monotonic(), []
    callbacks = Callbacks(on_token=lambda piece: tokens.append((time.monotonic() - start, piece)))
    reply = client.chat([{"role": "user", "content": text}], tools, callbacks)
    return reply, tokens, time.monotonic() - start


def small_toolset(config, *names: str) -> tuple[Toolset, Services]:
    """The real tools, only those named (a short prompt for a slow CPU server)."""
    services = Services(config)
    tools = build_toolset(services).tools
    return Toolset([tools[name] for name in names]), services


def agent_env(workspace: Path, url: str, **extra: str) -> dict:
    """cli_env against `url`, with the client's default retries (as a user has them) and
    settings for a slow CPU model."""
    env = cli_env(workspace, None, LLM_URL=url, LLM_TEMPERATURE="0", LLM_MAX_TOKENS="48")
    env.update(LLM_TIMEOUT="180", MAX_ITERATIONS="3")
    del env["LLM_RETRY_DELAY"], env["LLM_RETRIES"]
    env.update(extra)
    return env


def agent(workspace: Path, env: dict, *args: str, timeout: float = 240):
    """`python agent_main.py --json ARGS`: (exit code, events, stderr)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "agent_main.py"), "--json", *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, json_events(done.stdout), done.stderr


def json_events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def ended_by_itself(workspace: Path, code: int, events: list[dict], stderr: str) -> dict:
    """The run's saved meta, after checking it ended on its own with the matching exit code."""
    done = [e for e in events if e["type"] == "done"]
    assert len(done) == 1, stderr
    meta = SessionStore(workspace).open(done[0]["session_id"]).meta
    assert meta["status"] == done[0]["status"]
    assert meta["status"] in ("completed", "blocked", "max_iterations"), meta
    assert code == EXIT_CODES[meta["status"]]
    assert "Traceback" not in stderr
    return meta


def transcript(workspace: Path, session_id: str) -> list[dict]:
    return SessionStore(workspace).open(session_id).transcript


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def processes_with(*words: str) -> list[int]:
    """Live processes whose command line holds every word (Linux /proc; elsewhere none)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1][:1]
        except (OSError, IndexError):
            continue
        if all(word in command for word in words) and state != "Z":
            found.append(int(entry.name))
    return found


# --------------------------------------------------------------------------- replies


def test_streamed_reply_parses_and_tokens_arrive_before_it_ends(workspace, xllama):
    client = LLMClient(real_config(workspace, xllama, llm_max_tokens=32))
    reply, tokens, returned = ask(client, "Count from one to twenty in words.")
    assert len(tokens) >= 5 and reply.content
    assert "".join(text for _, text in tokens).strip() == reply.content
    assert reply.finish_reason in ("stop", "length")
    assert reply.usage["completion_tokens"] > 0
    first, last = tokens[0][0], tokens[-1][0]
    assert first < last < returned  # streamed piece by piece, not all at the end
    assert reply.first_token_s is not None and reply.first_token_s <= first


def test_a_server_answering_json_to_a_stream_request_is_parsed(workspace, xllama):
    def as_json(body: dict) -> dict:  # as a server that ignores "stream" would answer
        return {**{k: v for k, v in body.items() if k != "stream_options"}, "stream": False}

    with Relay(xllama, rewrite=as_json) as relay:
        client = LLMClient(real_config(workspace, relay, llm_max_tokens=32))
        reply, tokens, _ = ask(client, "Say hello.")
    (exchange,) = relay.chats()
    assert exchange.status == 200 and exchange.content_type.startswith("application/json")
    assert reply.content and "".join(text for _, text in tokens).strip() == reply.content
    completion = json.loads(exchange.data)
    assert reply.usage == completion["usage"]
    assert reply.finish_reason == completion["choices"][0]["finish_reason"]


def test_probe_reads_the_real_context_window(workspace, xllama):
    config = real_config(workspace, xllama)
    info = probe_model(config)
    assert (info.context_length, info.source, info.model_id) == (N_CTX, "llama.cpp", "embedded")
    runtime = Runtime(config)
    try:
        assert runtime.context_length == N_CTX
        assert runtime.run_options()["context_length"] == N_CTX
    finally:
        runtime.close()


# --------------------------------------------------------------------------- tool calls


def test_native_tool_call_runs_in_the_workspace_and_its_result_goes_back(workspace, lcpp):
    (workspace / "notes.txt").write_text("buy milk\n")
    events: list[dict] = []
    with Relay(lcpp) as relay:
        config = real_config(workspace, relay, max_iterations=2)
        toolset, services = small_toolset(config, "read", "ls")
        result = run_agent(
            config, "Read notes.txt", sink=events.append, toolset=toolset, services=services
        )
    chats = relay.chats()
    assert result.status in ("max_iterations", "completed") and result.iterations == 2
    assert [e.status for e in chats] == [200] * len(chats)
    assert all(e.body["tool_choice"] == "auto" for e in chats)  # without it: like "none"
    calls = [e for e in events if e["type"] == "tool_call"]
    results = {e["id"]: e["result"] for e in events if e["type"] == "tool_result"}
    assert calls and set(results) == {call["id"] for call in calls}
    for call in calls:
        assert call["name"] in ("read", "ls")  # never "readread"
        check_ran_in_workspace(
            workspace, call["name"], json.loads(call["arguments"]), results[call["id"]]
        )
    history = transcript(workspace, result.session_id)
    assert "buy milk" in history[1]["content"]  # notes.txt, named in the task, was shown
    first = calls[0]
    assert history[2]["tool_calls"][0]["id"] == first["id"]
    assert history[3] == {
        "role": "tool",
        "tool_call_id": first["id"],
        "content": json.dumps(results[first["id"]], ensure_ascii=False),
    }
    # the next turn carried the call and its result, and the real server took it (200 above)
    later = [e.body["messages"] for e in chats if history[3] in e.body["messages"]]
    assert later and all(history[2]["tool_calls"] == m[3]["tool_calls"] for m in later)
    assert all(m["content"] is not None for e in chats for m in e.body["messages"])


def check_ran_in_workspace(workspace: Path, name: str, arguments: dict, result: dict) -> None:
    """The result is what the real tool gives for that path in this workspace."""
    try:
        target = workspace / Workspace(workspace).resolve(str(arguments.get("path", ".")))
    except (PathError, OSError):
        assert not result["success"] and result["error"], result  # refused, with the reason
        return
    exists = target.is_file() if name == "read" else target.is_dir()
    assert result["success"] == exists or result["error"].startswith("bad arguments"), result
    if name == "read" and result["success"]:
        assert result["content"] == target.read_text()


def test_text_tool_call_from_a_template_without_tools_is_executed(workspace, xllama):
    """SmolLM2's template drops tool schemas (no native calls); shown two examples, the model
    writes <tool_call> text, which the agent runs and answers in text the server accepts."""
    (workspace / "NOTES").write_text("buy milk\n")  # no extension: not shown with the task
    session = SessionStore(workspace).create("few-shot")
    for path in ("a.txt", "b.py"):
        session.append({"role": "user", "content": f"Read the file {path}"})
        session.append({"role": "assistant", "content": TEXT_CALL % path})
        call = {"name": "read", "arguments": {"path": path}}
        done = {"success": True, "path": path, "content": "example\n"}
        session.extend(result_messages([call], [done], native=False))  # as a run records it
    events: list[dict] = []
    with Relay(xllama) as relay:
        config = real_config(workspace, relay, max_iterations=2)
        result = run_agent(config, "Read the file NOTES", session=session, sink=events.append)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls, "the model wrote no text tool call this time"
    assert calls[0]["id"].startswith("text_") and calls[0]["name"] == "read"
    ran = next(e["result"] for e in events if e["type"] == "tool_result")
    check_ran_in_workspace(workspace, "read", calls[0]["arguments"], ran)
    history = transcript(workspace, result.session_id)
    answer = next(m for m in history[5:] if m["role"] == "user")
    assert answer["content"].startswith('<tool_result name="read">')
    chats = relay.chats()
    assert len(chats) >= 2 and [e.status for e in chats] == [200] * len(chats)
    assert answer in chats[-1].body["messages"]  # the result went back, and the run went on
    assert result.status in ("completed", "max_iterations", "blocked")


# --------------------------------------------------------------------------- llama-cpp-python


def test_empty_stream_with_tool_choice_auto_falls_back_to_a_json_reply(workspace, lcpp):
    with Relay(lcpp) as relay:
        client = LLMClient(real_config(workspace, relay))
        reply, _, _ = ask(client, "Read notes.txt", [READ_SCHEMA])
    streamed, plain = relay.chats()
    assert streamed.body["stream"] and streamed.status == 200
    assert "[DONE]" not in streamed.text and '"choices"' not in streamed.text  # empty
    assert not plain.body["stream"] and plain.content_type.startswith("application/json")
    assert [call["name"] for call in reply.tool_calls] == ["read"]
    assert isinstance(json.loads(reply.tool_calls[0]["arguments"]), dict)


def test_repeated_id_and_name_in_streamed_tool_call_chunks(workspace, lcpp):
    def name_the_tool(body: dict) -> dict:  # streams tool-call chunks (unlike "auto")
        return {**body, "tool_choice": {"type": "function", "function": {"name": "read"}}}

    with Relay(lcpp, rewrite=name_the_tool) as relay:
        client = LLMClient(real_config(workspace, relay))
        reply, _, _ = ask(client, "Read notes.txt", [READ_SCHEMA])
    (exchange,) = relay.chats()
    deltas = [
        call
        for data in re.findall(r"^data: (\{.*\})$", exchange.text, re.M)
        for choice in json.loads(data)["choices"]
        for call in choice["delta"].get("tool_calls") or ()
    ]
    assert sum(call["function"].get("name") == "read" for call in deltas) >= 2  # the quirk
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call["name"] == "read" and call["id"] == deltas[0]["id"]
    assert isinstance(json.loads(call["arguments"]), dict)


def test_assistant_content_null_is_never_sent(workspace, lcpp):
    """llama-cpp-python answers HTTP 500 to `content: null`; the client sends "" instead."""
    messages = [
        {"role": "user", "content": "Read notes.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "notes.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"success": true, "content": "x"}'},
    ]
    with Relay(lcpp) as relay:
        LLMClient(real_config(workspace, relay, llm_max_tokens=16)).chat(messages, [READ_SCHEMA])
    chats = relay.chats()
    assert chats and [e.status for e in chats] == [200] * len(chats)
    assert all(e.body["messages"][1]["content"] == "" for e in chats)


# --------------------------------------------------------------------------- whole runs


def test_cli_run_ends_by_itself_and_its_session_resumes(workspace, xllama):
    (workspace / "notes.txt").write_text("buy milk\n")
    env = agent_env(workspace, xllama.url)
    code, events, stderr = agent(workspace, env, "Read notes.txt and tell me what it says.")
    meta = ended_by_itself(workspace, code, events, stderr)
    before = len(transcript(workspace, meta["id"]))

    code, events, stderr = agent(workspace, env, "--resume", meta["id"])
    resumed = ended_by_itself(workspace, code, events, stderr)
    session = next(e for e in events if e["type"] == "session")
    assert resumed["id"] == session["session_id"] == meta["id"] and session["resumed"] is True
    history = transcript(workspace, meta["id"])
    assert history[before]["content"].startswith("The run was resumed")
    assert [m["role"] for m in history[before + 1 :]][:1] == ["assistant"]


def test_server_killed_mid_stream_then_the_session_resumes_on_a_new_server(workspace, xllama):
    server = start_xllama()
    env = agent_env(  # calls as text: the model streams its story instead of calling a tool
        workspace,
        server.url,
        LLM_MAX_TOKENS="400",
        LLM_RETRIES="2",
        LLM_RETRY_DELAY="0.1",
        TOOL_CALL_MODE="text",
    )
    task = "Write a very long story about a dragon and a knight, at least 2000 words."
    command = [sys.executable, str(ROOT / "agent_main.py"), "--json", task]
    process = subprocess.Popen(
        command, cwd=workspace, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    lines: queue.Queue[str] = queue.Queue()

    def read_lines() -> None:
        for line in process.stdout:
            lines.put(line)

    reader = threading.Thread(target=read_lines)
    reader.start()
    try:
        seen = [json.loads(lines.get(timeout=120))]
        while seen[-1]["type"] != "token":  # the reply is streaming: now the server dies
            seen.append(json.loads(lines.get(timeout=120)))
        server.kill()
        code = process.wait(timeout=60)
    finally:
        server.kill()
        if process.poll() is None:
            process.kill()
        reader.join(10)
    events = seen + [json.loads(line) for line in list(lines.queue) if line.startswith("{")]
    stderr = process.stderr.read()
    statuses = [e["message"] for e in events[len(seen) :] if e["type"] == "status"]
    assert statuses[0].startswith("the reply broke off: ") and "; asking again" in statuses[0]
    assert len(statuses) == 3 and all("cannot reach the LLM server" in s for s in statuses[1:])
    assert code == 1 and events[-1]["status"] == "error"
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot reach the LLM server")
    assert stderr.rstrip("\n").endswith(errors[0])  # the start-up lines come first (--json)
    session_id = events[-1]["session_id"]
    assert SessionStore(workspace).open(session_id).meta["status"] == "error"

    env.update(LLM_URL=xllama.url, LLM_MAX_TOKENS="32", MAX_ITERATIONS="2")
    code, events, stderr = agent(workspace, env, "--resume", session_id)
    ended_by_itself(workspace, code, events, stderr)
    history = transcript(workspace, session_id)
    resumed = next(i for i, m in enumerate(history) if "ended as 'error'" in m["content"])
    assert history[resumed]["role"] == "user" and history[resumed + 1]["role"] == "assistant"


@pytest.mark.parametrize("how", ["--embedded", "LLM_URL=embedded"])
def test_embedded_run_ends_and_leaves_no_server_behind(workspace, how):
    env = agent_env(workspace, "embedded", MAX_ITERATIONS="2", LLM_MAX_TOKENS="32")
    flags = ["--embedded"] if how == "--embedded" else []
    if flags:
        del env["LLM_URL"]  # the flag alone
    command = [sys.executable, str(ROOT / "agent_main.py"), *flags, "--permission", "auto", "hi"]
    done = subprocess.run(
        command, cwd=workspace, env=env, capture_output=True, text=True, timeout=240
    )
    missing = ("could not fetch the bundled model", "xllamacpp is not installed")
    need(not any(text in done.stderr for text in missing), done.stderr.strip())
    ready = re.search(r"embedded model ready at http://127\.0\.0\.1:(\d+)", done.stderr)
    assert ready, done.stderr
    # it ended by itself: completed, blocked (a bare TASK_COMPLETE as its only replies) or
    # out of iterations; never an error
    assert done.returncode in (0, 2, 3), done.stderr
    port = ready.group(1)
    assert not port_open(int(port))
    assert processes_with("lmagent/llm/embedded.py", "--port", port) == []


def test_the_web_ui_with_embedded_starts_the_same_server_and_runs_on_it(workspace):
    """`lmagent-web --embedded`: the embedded server starts with the page, a chat runs on it,
    and Ctrl+C (SIGTERM) leaves neither server behind."""
    import requests

    from tests.conftest import free_port

    env = agent_env(workspace, "embedded", MAX_ITERATIONS="1", LLM_MAX_TOKENS="16")
    del env["LLM_URL"]
    port = free_port()
    env.update(AGENT_TOKEN="424242", AGENT_HOST="127.0.0.1", AGENT_PORT=str(port))
    web = subprocess.Popen(
        [sys.executable, str(ROOT / "agent_web.py"), "--embedded"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    shown = ""
    try:
        for line in web.stdout:
            shown += line
            if "Port:" in line:
                break
        need("could not fetch the bundled model" not in shown, shown)
        ready = re.search(r"embedded model ready at http://127\.0\.0\.1:(\d+)", shown)
        assert ready, shown
        http = requests.Session()
        http.headers["Authorization"] = "Bearer 424242"
        base = f"http://127.0.0.1:{port}"
        server = http.get(base + "/api/server", timeout=30).json()
        assert server["state"] == "reachable", server
        started = http.post(base + "/api/chat", json={"message": "hi"}, timeout=10)
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 200
        while http.get(base + "/api/status", timeout=10).json().get("run"):
            assert time.monotonic() < deadline, "the run on the embedded model never ended"
            time.sleep(1)
    finally:
        web.terminate()
        web.wait(timeout=60)
    embedded_port = ready.group(1)
    assert not port_open(int(embedded_port))
    assert processes_with("lmagent/llm/embedded.py", "--port", embedded_port) == []


def test_embedded_server_exits_when_its_parent_is_killed():
    """SIGKILL leaves no `finally:` to stop the server: it notices its stdin pipe closing."""
    need_module("xllamacpp")
    code = (
        "import os, signal\nimport lmagent.llm.embedded as embedded_llm\n"
        f"server = embedded_llm.EmbeddedServer(embedded_llm.resolve_model({str(need_model())!r}),"
        " n_ctx=1024, threads=1).start()\n"
        "print(server.port, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    port = done.stdout.strip()
    assert done.returncode == -9 and port.isdigit(), done.stderr
    deadline = time.monotonic() + 30
    while processes_with("lmagent/llm/embedded.py", "--port", port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with("lmagent/llm/embedded.py", "--port", port) == []
    assert not port_open(int(port))
