"""Names the model chose never drive the user's terminal: control characters in file names,
process commands, tool output and model text are shown escaped in every terminal output
(one function, cli/display.escape), and a download's name never breaks its header."""

from __future__ import annotations

import json
from urllib.parse import quote

from lmagent.cli.display import escape
from tests.cli_process import cli, cli_env
from tests.conftest import make_config
from tests.pty_terminal import Terminal
from tests.scripted_llm import text, tool_call
from tests.test_web_support import WebHarness

# retitles the terminal, clears the screen, moves to the line start and forges a line
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\x1b[32m— completed\x1b[0m\u202etxt.exe\u009b"
NAME = f"notes{HOSTILE}.txt"
ACTS = ("\x1b", "\x07", "\r", "\u202e", "\x9b")  # what a terminal would act on


def test_escape_keeps_lines_and_tabs_and_writes_out_every_other_control():
    assert escape("a\tb\nc\r\nd") == "a\tb\nc\nd"  # a CRLF line end is a line end
    assert escape("\x1b[2J\r\x07\x00\x7f\x9b\u202e\u2066") == (
        "\\x1b[2J\\x0d\\x07\\x00\\u007f\\u009b\\u202e\\u2066"
    )
    assert escape("ünïcödé ✓ → 日本") == "ünïcödé ✓ → 日本"


def shows_nothing_hostile(output: str) -> None:
    assert not any(char in output for char in ACTS), repr(output)
    assert "\\x1b]0;pwned\\x07" in output


def test_checkpoints_list_a_hostile_file_name_escaped(workspace, llm):
    llm.add(tool_call("write", {"path": NAME, "content": "x\n"}), text("Wrote it.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "write the notes")
    assert done.returncode == 0, done.stderr
    assert (workspace / NAME).is_file()
    listed = cli(workspace, llm, "--checkpoints")
    assert listed.returncode == 0, listed.stderr
    shows_nothing_hostile(listed.stdout)
    assert "1   " in listed.stdout and "write" in listed.stdout
    as_json = cli(workspace, llm, "--checkpoints", "--json")
    assert not any(char in as_json.stdout for char in ACTS)
    assert json.loads(as_json.stdout.splitlines()[0])["changed"] == [NAME]  # still valid JSON


def test_json_events_stay_valid_and_carry_no_terminal_controls(workspace, llm):
    llm.add(text(f"Here: {HOSTILE}\nTASK_COMPLETE"))
    done = cli(workspace, llm, "--json", "say it")
    assert done.returncode == 0, done.stderr
    assert not any(char in done.stdout for char in ACTS)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert HOSTILE in "".join(e.get("text", "") for e in events if e["type"] == "token")


def test_a_run_shows_hostile_names_output_and_text_escaped_on_a_terminal(workspace, llm):
    (workspace / NAME).write_text("x\n")
    llm.add(
        tool_call("ls", {}),
        tool_call("shell", {"command": f"printf '{HOSTILE}\\n'"}),
        text(f"Here: {HOSTILE}\nTASK_COMPLETE"),
    )
    terminal = Terminal(["look around"], cwd=workspace, env=cli_env(workspace, llm))
    raw = b""
    try:
        terminal.finish()
        raw = terminal.raw
    finally:
        terminal.close()
    shown = raw.decode(errors="replace")
    assert "\x1b]0;" not in shown and "\x1b[2J" not in shown and "\u202e" not in shown
    assert "\x07" not in shown
    assert shown.count("\\x1b]0;pwned\\x07") >= 3  # the ✓ line, the output, the reply


def test_ps_in_the_repl_escapes_a_hostile_command(workspace, llm):
    llm.add(
        tool_call("shell", {"command": f"sleep 30 # {HOSTILE}", "background": True}),
        text("Started.\nTASK_COMPLETE"),
    )
    done = cli(workspace, llm, input="start it\n/ps\nquit\n")
    assert done.returncode == 0, done.stderr
    shows_nothing_hostile(done.stdout.partition("/ps")[2])


def test_a_download_name_with_cr_lf_is_sent_safely(workspace, llm):
    name = "report\r\nSet-Cookie: stolen=1\r\n\r\n日本.txt"
    (workspace / name).write_text("data\n")
    with WebHarness(make_config(workspace, llm)) as web:
        http = web.session()
        got = http.get(f"{web.base}/api/file?raw=1&download=1&path={quote(name)}", timeout=5)
    assert got.status_code == 200 and got.text == "data\n"
    assert "stolen" not in got.cookies
    disposition = got.headers["Content-Disposition"]
    assert "\r" not in disposition and "\n" not in disposition
    assert disposition.startswith("attachment;")
    assert "filename*=UTF-8''report__Set-Cookie%3A%20stolen%3D1____%E6%97%A5%E6%9C%AC.txt" in (
        disposition
    )
