"""Bad input at start-up (settings, .env) and from the model (absurdly nested tool-call
arguments): one clear line or one clear error result, never a traceback or a dead run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from lmagent.tools.registry import MAX_NESTING, Toolset, make_tool
from tests.cli_process import ROOT, cli, cli_env
from tests.conftest import free_port
from tests.scripted_llm import text, tool_call

# --------------------------------------------------------------------------- start-up


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("LLM_TIMEOUT", "nan", "a number of at least 1"),
        ("LLM_TIMEOUT", "inf", "a number of at least 1"),
        ("LLM_TEMPERATURE", "-inf", "a number from 0 to 2"),
        ("LLM_URL", "http://[::1", "an http:// or https:// URL"),
        ("AGENT_HOST", "no such host!", "an IP address"),
    ],
)
def test_the_cli_refuses_a_bad_setting_in_one_line(workspace, variable, value, allowed):
    done = cli(workspace, None, "--list-sessions", env=cli_env(workspace, **{variable: value}))
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {variable}={value!r} is not")
    assert allowed in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_the_cli_refuses_a_dotenv_that_is_not_utf8_in_one_line(workspace):
    (workspace / ".env").write_bytes(b"# r\xe9glages\nMAX_ITERATIONS=5\n")
    done = cli(workspace, None, "--list-sessions")
    assert done.returncode == 1
    problem = "is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8"
    assert done.stderr == f"error: {workspace / '.env'} {problem}\n"


def test_the_web_ui_refuses_a_bad_agent_host_in_one_line(workspace):
    done = subprocess.run(
        [sys.executable, str(ROOT / "agent_web.py")],
        cwd=workspace,
        env=cli_env(workspace, AGENT_HOST="0.0.0.0:7860"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: AGENT_HOST='0.0.0.0:7860' is not valid; allowed: an IP")
    assert done.stderr.count("\n") == 1, done.stderr


def test_the_web_ui_says_in_one_line_when_agent_host_does_not_resolve(workspace):
    done = subprocess.run(
        [sys.executable, str(ROOT / "agent_web.py")],
        cwd=workspace,
        env=cli_env(workspace, AGENT_HOST="nonexistent.invalid", AGENT_PORT=str(free_port())),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "error: cannot listen on nonexistent.invalid" in done.stderr
    assert "check AGENT_HOST" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- nested arguments

TOO_DEEP = f"bad arguments: arguments are nested more than {MAX_NESTING} levels deep"


def nested(levels: int) -> str:
    """A JSON object nested `levels` deep. Every level has its own keys: a reply that only
    repeated itself would be cut off as a loop before any call was read."""
    opening = "".join(f'{{"k{i}": ' for i in range(levels))
    return opening + "1" + "".join(f', "end{i}": 0}}' for i in reversed(range(levels)))


DEEP = nested(100_000)
DEEP_REPLIES = {
    "native tool_calls": tool_call("read", DEEP),
    "<tool_call> text": text(f'<tool_call>{{"name": "read", "arguments": {DEEP}}}</tool_call>'),
    "<function=> text": text(f"<function=read>{DEEP}</function>"),
    "arguments as a JSON string": text(
        f'<tool_call>{{"name": "read", "arguments": {json.dumps(DEEP)}}}</tool_call>'
    ),
}


@pytest.mark.parametrize("reply", DEEP_REPLIES.values(), ids=DEEP_REPLIES)
def test_arguments_nested_100000_deep_are_bad_arguments_and_the_run_goes_on(config, llm, reply):
    llm.chunk_size = llm.args_chunk_size = 64 * 1024  # a 2 MB reply in a few dozen events
    llm.add(reply, text("I will send flat arguments.\nTASK_COMPLETE"))
    events: list[dict] = []
    result = run_agent(
        config, "read it", sink=lambda event: events.append(json.loads(json.dumps(event)))
    )
    llm.assert_all_used()
    assert (result.status, result.message) == ("completed", "I will send flat arguments.")
    (seen,) = [e["result"] for e in events if e["type"] == "tool_result"]
    assert seen["success"] is False and seen["error"].startswith(TOO_DEEP)
    told = llm.requests[1]["messages"][-1]["content"]  # what the model read next
    assert TOO_DEEP in told
    history = SessionStore(config.workspace).open(result.session_id).history
    assert any(TOO_DEEP in str(message.get("content")) for message in history)


def test_a_session_cut_off_during_a_call_with_such_arguments_resumes(config, llm):
    session = SessionStore(config.workspace).create("read it")
    session.append({"role": "user", "content": "read it"})
    deep_call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": DEEP}}
    session.append({"role": "assistant", "content": "", "tool_calls": [deep_call]})
    llm.add(text("I will check, then read again.\nTASK_COMPLETE"))
    result = run_agent(config, "go on", session_id=session.id)
    llm.assert_all_used()
    assert result.status == "completed"
    told = json.loads(llm.requests[0]["messages"][3]["content"])  # the cut-off call's result
    assert told["success"] is False and "cut off" in told["error"]


def takes_data(ctx, data: dict) -> dict:
    """Accept any object."""
    return {"levels": data}


@pytest.mark.parametrize("form", ["json text", "decoded"])
def test_arguments_may_nest_max_nesting_levels_and_no_more(ctx, form):
    tools = Toolset([make_tool(takes_data)])
    for levels, accepted in ((MAX_NESTING - 1, True), (MAX_NESTING, False)):
        arguments = f'{{"data": {nested(levels)}}}'  # one more level: the arguments object
        raw = arguments if form == "json text" else json.loads(arguments)
        result = tools.execute(ctx, "takes_data", raw)
        assert result["success"] is accepted, (levels, result)
        if not accepted:
            assert result["error"].startswith(TOO_DEEP)
