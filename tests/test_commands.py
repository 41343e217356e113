"""One command set: the REPL and the web chat box take the same slash commands, from the one
table in lmagent/commands.py, and /help lists the same in both."""

from __future__ import annotations

import pytest

from lmagent.cli.repl import Repl
from lmagent.commands import COMMANDS, NAMES, help_lines
from tests.cli_process import cli
from tests.scripted_llm import text, tool_call
from tests.test_web_browser import Page, browser, tab, web  # noqa: F401 - the fixtures


def test_the_repl_has_a_method_for_each_command_and_no_other():
    methods = {name[4:] for name in dir(Repl) if name.startswith("cmd_")}
    assert methods == set(NAMES)


def test_the_repl_help_lists_the_table(workspace, llm):
    done = cli(workspace, llm, input="/help\nquit\n")
    assert done.returncode == 0, done.stderr
    for line in help_lines():
        assert line in done.stdout
    for command in ("/undo", "/checkpoints", "/ps", "/kill ID", "/status", "/mode"):
        assert command in done.stdout


def test_the_repl_refuses_a_name_that_is_not_in_the_table(workspace, llm):
    done = cli(workspace, llm, input="/loop\n/quit\n")
    assert "unknown command /loop; /help lists them" in done.stdout


def test_the_web_serves_the_same_table(web):  # noqa: F811
    listed = web.session().get(web.base + "/api/commands", timeout=5).json()["commands"]
    assert [c["name"] for c in listed] == list(NAMES)
    assert [c["title"] for c in listed] == [c.title for c in COMMANDS]


def notes(page: Page) -> str:
    return "\n".join(page.page.locator(".note").all_text_contents())


def command(page: Page, line: str, shows: str) -> None:
    before = page.page.locator(".note").count()
    page.send(line)
    page.page.wait_for_function(
        "n => document.querySelectorAll('.note').length > n", arg=before, timeout=5_000
    )
    assert shows in page.page.locator(".note").last.text_content()


@pytest.mark.browser
def test_the_web_help_lists_the_table_and_each_command_is_known(tab):  # noqa: F811
    tab.sign_in()
    command(tab, "/help", "/checkpoints [ID]")
    shown = notes(tab)
    for line in help_lines():
        assert line in shown
    for name in NAMES:
        tab.send(f"/{name}" + (" nobody" if name in ("kill", "session") else ""))
    tab.page.wait_for_timeout(1500)
    assert "unknown command" not in notes(tab)
    tab.send("/loop")
    tab.wait_text(".note", "unknown command /loop; /help lists them")


@pytest.mark.browser
def test_web_ps_kill_checkpoints_and_undo_act_like_the_repl(tab, llm, workspace):  # noqa: F811
    tab.sign_in()
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "new\n"}),
        tool_call("shell", {"command": "sleep 30", "background": True}),
        text("Done.\nTASK_COMPLETE"),
    )
    (workspace / "a.txt").write_text("old\n")
    command(tab, "/ps", "no background processes")
    tab.send("change a.txt and start a sleeper")
    tab.page.wait_for_selector(".ending.completed")
    command(tab, "/ps", "p1")
    assert "exited" in tab.page.locator(".note").last.text_content()  # stopped at the run's end
    command(tab, "/kill p1", "p1 has already ended (exit code")
    command(tab, "/checkpoints", "write")
    command(tab, "/undo", "restored the files to before step")
    assert (workspace / "a.txt").read_text() == "old\n"
