"""Bad input at start-up (settings, .env) and from the model (absurdly nested tool-call
arguments): one clear line or one clear error result, never a traceback or a dead run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from scripted_llm import text, tool_call
from test_cli import ROOT, cli, cli_env

from agent_llm import run_agent

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
    assert done.stderr == f"error: {workspace / '.env'} is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8\n"


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
