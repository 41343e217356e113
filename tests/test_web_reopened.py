"""A session reopened in the page looks as it did live (the server rebuilds the live events from
the transcript, lmagent/web/replay.py, and one renderer draws both), and the chat view's
everyday fixes, each in real Chromium on a desktop (1280 px) and a phone (390 px): tool rows and
notes instead of the user's bubbles, slash-command answers brought into view, the real time of a
stopped run, no empty code block ending a reply, permission lines before the result they belong
to, the model's name in the header, and a phone header of two rows. Screenshots go to
tests/output/."""

from __future__ import annotations

import re
import time

import pytest

from lmagent.sessions.store import SessionStore
from lmagent.web.replay import transcript_events
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text, tool_call
from tests.test_web_browser import OUTPUT, Page, browser, words  # noqa: F401 - the fixture
from tests.test_web_support import WebHarness

pytestmark = pytest.mark.browser
SIZES = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
# What the log shows, top to bottom, less the lines about the run in progress: each message,
# note, thinking and tool row (its icon, name and arguments)
DRAWN = """() => Array.from(document.querySelectorAll('#log > *'))
  .filter((n) => !n.matches('.status-line, .progress-line, .ending, .change-view'))
  .map((n) => n.matches('details.tool')
    ? `tool ${n.querySelector('summary').textContent}`
    : `${n.className}: ${n.textContent.trim()}`)"""
IN_VIEW = """(selector) => {
  const nodes = document.querySelectorAll(selector);
  const node = nodes[nodes.length - 1];
  if (!node) return false;
  const box = node.getBoundingClientRect();
  const log = document.getElementById('log').getBoundingClientRect();
  return box.top >= log.top - 1 && box.top < log.bottom - 20;
}"""

NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


@pytest.fixture(params=list(SIZES))
def size(request) -> str:
    return request.param


@pytest.fixture
def open_tab(browser, size):  # noqa: F811 - the imported fixture
    opened: list[Page] = []

    def open_one(web: WebHarness) -> Page:
        opened.append(Page(browser, web, **SIZES[size]))
        opened[-1].sign_in()
        return opened[-1]

    yield open_one
    for tab in opened:
        tab.close()


def shoot(tab: Page, name: str, size: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    tab.page.screenshot(path=str(OUTPUT / f"web_reopened_{name}_{size}.png"))


def reopen(tab: Page) -> list[str]:
    """Load the page again: it reopens the session it showed, from disk."""
    tab.page.reload()
    tab.page.wait_for_selector(".ending")
    return tab.page.evaluate(DRAWN)


def user_bubbles(tab: Page) -> list[str]:
    return tab.page.locator(".msg.user").all_text_contents()


# --------------------------------------------------------------------------- reopened sessions

NATIVE = [
    tool_call("read", {"path": "missing.txt"}),
    tool_call("write", {"path": "notes.txt", "content": "hello\n"}),
    text("Wrote the note.\nTASK_COMPLETE", reasoning="The read failed, the write worked."),
]
WRITTEN = [
    text('<tool_call>{"name": "read", "arguments": {"path": "missing.txt"}}</tool_call>'),
    text("notes.txt\n```\nhello\n```"),
    text("Wrote the note.\nTASK_COMPLETE"),
]


@pytest.mark.parametrize("mode", ["native", "text"])
def test_a_reopened_session_shows_tool_rows_as_it_did_live(open_tab, workspace, llm, mode, size):
    llm.add(*(NATIVE if mode == "native" else WRITTEN))
    with WebHarness(make_config(workspace, llm, tool_call_mode=mode)) as web:
        tab = open_tab(web)
        tab.send("take a note")
        tab.page.wait_for_selector(".ending.completed")
        live = tab.page.evaluate(DRAWN)
        reopened = reopen(tab)
        shoot(tab, mode, size)
        assert reopened == live
        assert user_bubbles(tab) == ["take a note"]  # never a result or a note of the agent's
        assert "<tool_call>" not in tab.page.inner_text("#log")  # a call is its tool row
        rows = tab.page.locator("details.tool")
        assert [rows.nth(i).get_attribute("class") for i in range(2)] == ["tool fail", "tool ok"]
        assert "missing.txt" in rows.nth(0).text_content()  # the call's arguments and its error
        assert "path=notes.txt" in rows.nth(1).locator("summary").text_content()
        assert (workspace / "notes.txt").read_text() == "hello\n"


def test_a_restore_note_is_shown_as_a_note_not_as_the_users_words(open_tab, workspace, llm, size):
    llm.add(
        tool_call("write", {"path": "notes.txt", "content": "hello\n"}),
        text("Wrote it.\nTASK_COMPLETE"),
    )
    with WebHarness(make_config(workspace, llm)) as web:
        tab = open_tab(web)
        tab.send("take a note")
        tab.page.wait_for_selector(".ending.completed")
        tab.send("/undo")
        tab.wait_text(".note", "restored the files to before step 1")
        assert not (workspace / "notes.txt").exists()
        reopen(tab)
        tab.wait_text(".note", "[The user restored the workspace files")
        shoot(tab, "restore", size)
        assert user_bubbles(tab) == ["take a note"]


def test_an_old_restore_note_without_its_marker_is_still_a_note():
    old = "[The user restored the workspace files to how they were before step 2. These files …]"
    events = transcript_events([{"role": "user", "content": old}])
    assert [(e["type"], e["text"]) for e in events] == [("note", old)]


# --------------------------------------------------------------------------- the chat view


def a_long_session(workspace) -> str:
    session = SessionStore(workspace).create("count to forty", source="web")
    session.append({"role": "user", "content": "count to forty"})
    for n in range(40):
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": "get_time", "arguments": "{}"}
        session.append({"role": "assistant", "content": f"Step {n}.", "tool_calls": [call]})
        session.append({"role": "tool", "tool_call_id": f"c{n}", "content": '{"success": true}'})
    session.append({"role": "assistant", "content": "Counted.\nTASK_COMPLETE"})
    session.save_meta(status="completed")
    session.close()
    return session.id


@pytest.mark.parametrize("command", ["/ps", "/checkpoints"])
def test_a_slash_commands_answer_is_brought_into_view(open_tab, workspace, llm, command, size):
    a_long_session(workspace)
    with WebHarness(make_config(workspace, llm)) as web:
        tab = open_tab(web)
        if size == "phone":
            tab.page.click("#toggle-side")
        tab.page.click(".session-item")
        tab.page.wait_for_selector(".ending.completed")
        tab.page.eval_on_selector("#log", "log => { log.scrollTop = 0; }")  # reading from the top
        tab.page.evaluate(NEXT_FRAME)  # the scroll is seen
        assert not tab.page.evaluate(IN_VIEW, ".ending")
        tab.send(command)
        tab.page.wait_for_selector(".note")
        tab.page.wait_for_function(IN_VIEW, arg=".note")
        shoot(tab, "command", size)


def test_a_stopped_run_shows_how_long_it_ran_after_a_reload(open_tab, workspace, llm, size):
    llm.add(text(words(99) * 4, chunk_size=4, chunk_delay=0.05))
    with WebHarness(make_config(workspace, llm)) as web:
        tab = open_tab(web)
        tab.send("talk for a long time")
        tab.wait_text(".msg.assistant", "w02")
        deadline = time.monotonic() + 30
        while web.state.runs.active.elapsed < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # the run goes on for a few seconds before the page is loaded again
        tab.page.reload()
        tab.wait_text(".msg.assistant", "w02")
        tab.page.click("#stop")
        tab.page.wait_for_selector(".ending.interrupted")
        web.wait_idle()
        shown = re.findall(r"(\d+):(\d\d)", tab.page.text_content(".ending .detail"))[-1]
        ran = web.state.runs.last.elapsed
        assert ran >= 3 and abs(int(shown[0]) * 60 + int(shown[1]) - ran) <= 1, (shown, ran)


def test_a_reply_ending_in_an_open_fence_leaves_no_empty_code_block(open_tab, workspace, llm, size):
    llm.add(
        tool_call("write", {"path": "notes.txt", "content": "hello\n"}),
        text("Wrote it.\n\n```\nTASK_COMPLETE", chunk_size=2),
    )
    with WebHarness(make_config(workspace, llm)) as web:
        tab = open_tab(web)
        tab.send("take a note")
        tab.page.wait_for_selector(".ending.completed")
        tab.wait_text(".msg.assistant", "Wrote it.")
        assert tab.page.locator(".md pre").count() == 0
        assert tab.page.locator(".copy-code").count() == 0
        reopen(tab)
        assert tab.page.locator(".md pre, .copy-code").count() == 0


def test_permission_lines_come_before_the_result_they_belong_to(open_tab, workspace, llm, size):
    llm.add(
        tool_call("write", {"path": "notes.txt", "content": "hello\n"}),
        text("Wrote it.\nTASK_COMPLETE"),
    )
    with WebHarness(make_config(workspace, llm, permission_mode="normal")) as web:
        tab = open_tab(web)
        tab.send("take a note")
        tab.page.click("#permission button.allow")
        tab.page.wait_for_selector(".ending.completed")
        shoot(tab, "permission", size)
        order = tab.page.evaluate(
            """() => Array.from(document.querySelectorAll('#log > .status-line, #log > .tool'))
              .map((n) => n.matches('.tool') ? `row ${n.className}` : n.textContent)"""
        )
        assert order == ["· waiting for permission: write", "· permission: allow", "row tool ok"]


def test_the_header_names_the_model_and_takes_two_rows(open_tab, workspace, size):
    file = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    props = {"model_alias": "embedded", "model_path": f"/models/{file}"}  # as --embedded serves
    with ScriptedLLM(models=False, props=props) as llm:
        llm.add(text("Hello.\nTASK_COMPLETE"))
        with WebHarness(make_config(workspace, llm)) as web:
            tab = open_tab(web)
            tab.wait_text("#server-state", "server ready")
            assert tab.page.text_content("#server-model") == file
            tab.send("say hello to a rather long session title that fills the header")
            tab.page.wait_for_selector(".ending.completed")
            shoot(tab, "header", size)
            box = tab.page.evaluate(
                """() => ['.topbar', '#server-bar', '.msg.user'].map(
                  (s) => document.querySelector(s).getBoundingClientRect().toJSON())"""
            )
            topbar, server_bar, first = box
            assert topbar["height"] <= 52 and server_bar["height"] <= 36, box  # a row each
            assert first["top"] <= 130, box
            width = tab.page.evaluate("document.documentElement.scrollWidth")
            assert width <= SIZES[size]["viewport"]["width"]


def test_the_agents_own_messages_to_the_model_reopen_as_notes(workspace, llm):
    """A nudge, a format error and the files a task names are the agent's words to the model:
    reopened, they are notes, and the only user bubble is the task."""
    from lmagent.loop.run import run_agent

    (workspace / "hello.py").write_text("print('hi')\n")
    llm.add(
        text("I'll now write the file."),  # announces work and stops: nudged
        text('<tool_call>{"name": "write", "arguments": {"path": </tool_call>'),  # unreadable
        text("Nothing to change.\nTASK_COMPLETE"),
    )
    config = make_config(workspace, llm, tool_call_mode="text")
    result = run_agent(config, "look at hello.py")
    history = SessionStore(workspace).open(result.session_id).history
    events = transcript_events(history)
    users = [e["text"] for e in events if e["type"] == "user"]
    notes = [e.get("note") for e in events if e["type"] == "note"]
    assert users == ["look at hello.py"]
    assert {"named files", "nudge", "format error"} <= set(notes), events
