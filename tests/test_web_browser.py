"""The web UI in real headless Chromium (Debian's /usr/bin/chromium) driven by Playwright,
against the real app on the real server and the scripted LLM."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from lmagent.sessions.store import SessionStore
from tests.conftest import ROOT, make_config, need
from tests.scripted_llm import error, text, tool_call
from tests.test_web_support import CHROMIUM, CHROMIUM_ARGS, WebHarness

pytestmark = pytest.mark.browser

OUTPUT = ROOT / "tests" / "output"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
# Any script that runs records itself here, opens a dialog, or requests the beacon.
WATCH = """
window.__signals = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__signals.push(`csp ${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}`);
});
"""


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install playwright)")
    need(
        Path(CHROMIUM).is_file(),
        f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)",
    )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """One browser tab with what it saw: console lines, dialogs and requests."""

    def __init__(self, browser, web: WebHarness, **context_options):
        self.web = web
        self.context = browser.new_context(**context_options)
        self.context.add_init_script(WATCH)
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        self.console: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror {e}"))
        self.page.on("dialog", self._dialog)
        self.page.on("request", lambda r: self.requests.append(r.url))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def sign_in(self) -> None:
        self.page.goto(self.web.base + "/")
        self.page.fill("#pin", self.web.pin)
        self.page.click("#login-button")
        self.page.wait_for_selector("body[data-stream='open']", state="attached")

    def send(self, message: str) -> None:
        self.page.fill("#input", message)
        self.page.press("#input", "Enter")

    def assistant_text(self) -> str:
        return self.page.eval_on_selector_all(
            ".msg.assistant", "nodes => nodes.map(n => n.textContent).join('\\n')"
        )

    def wait_text(self, selector: str, needle: str, timeout: float = 10_000) -> None:
        self.page.wait_for_function(
            "([sel, needle]) => Array.from(document.querySelectorAll(sel))"
            ".some(n => n.textContent.includes(needle))",
            arg=[selector, needle],
            timeout=timeout,
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def web(workspace, llm):
    with WebHarness(make_config(workspace, llm)) as harness:
        yield harness


@pytest.fixture
def tab(browser, web):
    page = Page(browser, web, viewport={"width": 1280, "height": 800})
    yield page
    page.close()


def words(count: int) -> str:
    return " ".join(f"w{n:02d}" for n in range(1, count + 1))


# --------------------------------------------------------------------------- sign-in


def test_sign_in_sets_a_cookie_scripts_cannot_read(tab):
    tab.page.goto(tab.web.base + "/")
    assert tab.page.is_visible("#pin") and tab.web.pin not in tab.page.content()
    tab.sign_in()
    assert tab.page.evaluate("document.cookie") == ""
    (cookie,) = tab.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert tab.web.pin not in tab.page.url and tab.web.pin not in tab.page.content()


def test_wrong_pins_are_refused_then_the_client_is_locked_out(tab):
    page = tab.page
    page.goto(tab.web.base + "/")
    for _ in range(5):
        page.fill("#pin", "99999999")
        page.click("#login-button")
        tab.wait_text("#login-error", "Wrong PIN")
        page.eval_on_selector("#login-error", "n => { n.textContent = ''; }")
    page.fill("#pin", tab.web.pin)
    page.click("#login-button")
    tab.wait_text("#login-error", "too many failed sign-ins")
    assert page.is_visible("#pin") and not page.is_visible("#input")


# --------------------------------------------------------------------------- runs


def test_tokens_appear_while_the_run_is_still_going(tab, llm):
    llm.add(
        text(
            words(40) + "\nTASK_COMPLETE",
            reasoning="thinking it over",
            chunk_size=4,
            chunk_delay=0.03,
        )
    )
    tab.sign_in()
    tab.send("say forty words")
    tab.wait_text(".msg.assistant", "w03")
    assert tab.page.locator(".ending").count() == 0  # the run has not ended yet
    assert tab.page.text_content("#run-state") == "running"
    assert "iteration 1" in tab.page.text_content("#run-progress")
    tab.page.wait_for_selector(".ending.completed")
    assert words(40) in tab.assistant_text()
    assert "TASK_COMPLETE" not in tab.assistant_text()
    thinking = tab.page.locator("details.thinking")
    assert thinking.count() == 1 and thinking.get_attribute("open") is None
    assert "thinking it over" in thinking.text_content()
    assert tab.page.text_content(".msg.user") == "say forty words"
    assert tab.page.text_content("#run-state") == "idle"


def test_a_reply_asked_for_again_shows_apart_from_the_one_taken(browser, workspace, llm):
    """A small model's repeated action is asked for again (lmagent.loop.run): the reply not
    taken stays on the page as it was streamed, in its own bubble, with a status line; the new
    reply is not run into it."""
    same = text("```bash\nls\n```")
    llm.add(same, same, text("All listed.\nTASK_COMPLETE"))
    config = make_config(workspace, llm, tool_call_mode="text", permission_mode="auto")
    with WebHarness(config) as web:
        tab = Page(browser, web)
        tab.sign_in()
        tab.send("list the files")
        tab.page.wait_for_selector(".ending.completed")
        bubbles = tab.page.locator(".msg.assistant").all_text_contents()
        assert [b.strip() for b in bubbles if "All listed." in b] == ["All listed."]
        assert "asking again" in tab.page.text_content("#log")
        tab.close()


def test_tool_calls_show_as_rows_and_permission_prompts_allow_and_deny(browser, workspace, llm):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "alpha"}),
        tool_call("write", {"path": "b.txt", "content": "beta"}),
        text("one of two written\nTASK_COMPLETE"),
    )
    with WebHarness(make_config(workspace, llm, permission_mode="normal")) as web:
        tab = Page(browser, web)
        tab.sign_in()
        assert tab.page.input_value("#mode-select") == "normal"
        tab.send("write two files")
        tab.wait_text("#permission .question", "Allow write?")
        assert "a.txt" in tab.page.text_content("#permission pre")
        tab.page.click("#permission button.allow")
        tab.wait_text("#permission pre", "b.txt")
        tab.page.click("#permission button.deny")
        tab.page.wait_for_selector(".ending.completed")
        assert tab.page.is_hidden("#permission")
        rows = tab.page.locator("details.tool")
        assert rows.count() == 2
        assert "ok" in rows.nth(0).get_attribute("class")
        assert "fail" in rows.nth(1).get_attribute("class")
        assert "denied" in rows.nth(1).text_content()
        rows.nth(0).locator("summary").click()
        body = rows.nth(0).locator(".tool-body").text_content()
        assert "alpha" in body and '"success": true' in body
        assert (workspace / "a.txt").read_text() == "alpha"
        assert not (workspace / "b.txt").exists()
        tab.close()


def test_stop_button_ends_the_run_as_stopped(tab, llm, workspace):
    llm.add(text(words(99) * 3, chunk_size=4, chunk_delay=0.1))  # 30 s of reply
    tab.sign_in()
    tab.send("talk for a long time")
    tab.wait_text(".msg.assistant", "w02")
    tab.send("a second task while the first runs")
    tab.wait_text("#notice", "A run is already active")
    began = time.monotonic()
    tab.page.click("#stop")
    tab.page.wait_for_selector(".ending.interrupted", timeout=10000)
    assert time.monotonic() - began < 10  # before the reply would have ended by itself
    assert tab.page.text_content(".ending .title") == "Stopped"
    tab.web.wait_idle()
    (meta,) = SessionStore(workspace).list()
    assert meta["status"] == "interrupted"


def test_every_ending_is_shown_plainly(tab, llm):
    llm.add(
        text("I looked around.\nBLOCKED: the API key is missing"),
        text("Nothing to do yet.\nWAIT: 2099-01-02T09:00:00+00:00: the nightly build"),
        error(400, {"error": {"message": "the model crashed"}}),
    )
    tab.sign_in()
    tab.send("first")
    tab.page.wait_for_selector(".ending.blocked")
    assert tab.page.text_content(".ending .title") == "Blocked"
    assert "the API key is missing" in tab.page.text_content(".ending .detail")
    tab.page.click("#new-chat")
    tab.send("second")
    tab.page.wait_for_selector(".ending.waiting")
    assert tab.page.text_content(".ending .title").startswith("Waiting until ")
    assert "2099" in tab.page.text_content(".ending .title")
    assert "the nightly build" in tab.page.text_content(".ending .detail")
    tab.page.click("#new-chat")
    tab.send("third")
    tab.page.wait_for_selector(".ending.error")
    assert tab.page.text_content(".ending .title") == "Error"
    assert "the model crashed" in tab.page.text_content(".ending .detail")


@pytest.mark.parametrize("buffer", [4096, 6], ids=["replayed", "resynced-from-disk"])
def test_reload_mid_run_shows_the_events_missed(browser, workspace, llm, buffer):
    llm.add(
        tool_call("write", {"path": "x.txt", "content": "x"}),
        text(words(50) + "\nTASK_COMPLETE", chunk_size=4, chunk_delay=0.04),
    )
    with WebHarness(make_config(workspace, llm), EVENT_BUFFER=buffer) as web:
        tab = Page(browser, web)
        tab.sign_in()
        tab.send("count slowly")
        tab.wait_text(".msg.assistant", "w05")
        tab.page.reload()
        tab.page.wait_for_selector("#input")
        tab.wait_text(".msg.assistant", "w45")
        tab.page.wait_for_selector(".ending.completed")
        assert words(50) in tab.assistant_text()  # including what streamed before the reload
        assert tab.page.text_content(".msg.user") == "count slowly"
        assert tab.page.locator("details.tool").count() == 1
        tab.close()


def test_sub_agents_show_progress_rows(browser, workspace, llm):
    from lmagent.runtime import Runtime

    brief = {
        "objective": "Write hello.txt with a greeting",
        "deliverable_type": "file",
        "deliverable_description": "a one-line greeting file",
        "deliverable_path": "hello.txt",
    }
    llm.add(
        tool_call("delegate", brief),
        tool_call("write", {"path": "hello.txt", "content": "hello\n"}),
        tool_call("report_result", {"status": "ok", "summary": "done", "artifacts": ["hello.txt"]}),
        text("The helper wrote it.\nTASK_COMPLETE"),
    )
    config = make_config(workspace, llm, enable_mcp=False)
    runtime = Runtime(config)
    with WebHarness(config, runtime=runtime) as web:
        tab = Page(browser, web)
        tab.sign_in()
        tab.send("delegate a greeting")
        tab.page.wait_for_selector(".ending.completed")
        row = tab.page.locator(".subagent")
        assert row.count() == 1
        assert "sub-agent" in row.text_content() and "finished: completed" in row.text_content()
        assert (workspace / "hello.txt").read_text() == "hello\n"
        tab.close()


def test_an_old_session_opens_from_disk_after_a_restart_and_can_be_continued(
    browser, workspace, llm
):
    llm.add(
        tool_call("write", {"path": "old.txt", "content": "kept"}),
        text("Finished the **old** task.\nTASK_COMPLETE", reasoning="Was <b>it</b> done?"),
    )
    with WebHarness(make_config(workspace, llm)) as first:
        http = first.session()
        http.post(first.base + "/api/chat", json={"message": "the old task"}, timeout=5)
        first.wait_idle()
    llm.add(text("Continued.\nTASK_COMPLETE"))
    with WebHarness(make_config(workspace, llm)) as web:  # a new server process state
        tab = Page(browser, web)
        tab.sign_in()
        tab.page.click(".session-item")
        tab.wait_text(".msg.assistant", "Finished the old task.")
        assert tab.page.text_content(".msg.user") == "the old task"
        assert tab.page.locator("details.tool.ok").count() == 1
        assert tab.page.text_content("strong") == "old"
        assert tab.page.text_content(".ending .title") == "Done"
        assert tab.page.text_content("details.thinking pre") == "Was <b>it</b> done?"  # as text
        tab.send("and one more thing")
        tab.wait_text(".msg.assistant", "Continued.")
        tab.page.wait_for_selector(".ending.completed >> nth=1")
        (meta,) = SessionStore(workspace).list()
        session = SessionStore(workspace).open(meta["id"])
        users = [m["content"] for m in session.transcript if m["role"] == "user"]
        assert users == ["the old task", "and one more thing"]
        tab.close()


# --------------------------------------------------------------------------- no script from content

XSS_MARKDOWN = "\n\n".join(
    [
        "Here is **bold** text and a [safe link](https://example.org).",
        '<img src=x onerror="window.__pwned=1; alert(1)">',
        "<script>window.__pwned=2; alert(2)</script>",
        "[click me](javascript:window.__pwned=3)",
        '<a href="javascript:window.__pwned=4" id="jslink">link two</a>',
        '<svg onload="window.__pwned=5"><circle r="5"></circle></svg>',
        '<iframe srcdoc="<script>parent.__pwned=6</script>"></iframe>',
        '<details open ontoggle="window.__pwned=7">toggle</details>',
        '<math><mtext><table><mglyph><style><img src=x onerror="window.__pwned=8">',
        '<form action="javascript:window.__pwned=9"><button id="formbtn">go</button></form>',
        "```html\n<img src=x onerror=window.__pwned=10>\n```",
        "TASK_COMPLETE",
    ]
)
HOSTILE_HTML = """<!doctype html><h1>preview</h1>
<script>window.__pwned = 'preview'; parent.__pwned = 'preview';
new Image().src = '/xss-beacon?c=' + encodeURIComponent(document.cookie);
fetch('/api/status').then(r => r.text()).then(t => { parent.__stolen = t; });</script>
<img src=x onerror="new Image().src='/xss-beacon-img'">
"""


def script_blocked_by_sandbox(message) -> bool:
    return "sandboxed" in message.text and "allow-scripts" in message.text


def test_an_xss_corpus_in_model_output_names_and_previews_runs_no_script(tab, llm, workspace):
    hostile_name = '<img src=x onerror="window.__pwned=11">.txt'
    (workspace / hostile_name).write_text("hostile name")
    (workspace / "<svg onload=alert(12)>").mkdir()
    (workspace / "page.html").write_text(HOSTILE_HTML)
    llm.add(
        tool_call(
            "write",
            {"path": "<b onmouseover=alert(13)>.md", "content": "<script>alert(14)</script>"},
            reasoning="<img src=x onerror=alert(15)>",
        ),
        text(XSS_MARKDOWN, chunk_size=7),
    )
    tab.sign_in()
    tab.send('<img src=x onerror="window.__pwned=16">')
    page = tab.page
    page.wait_for_selector(".ending.completed")
    page.click("#jslink")
    page.click("text=click me")
    page.click("#tab-files")
    page.wait_for_selector(".file-entry")
    assert page.locator(f"text={hostile_name}").count() == 1  # shown as text
    page.click("text=<svg onload=alert(12)>")
    with page.expect_console_message(script_blocked_by_sandbox):  # the preview's script
        page.click("text=page.html")
    frame = page.wait_for_selector("#preview-body iframe")
    assert frame.get_attribute("sandbox") == ""
    page.click("#preview-close")
    page.click("#tab-sessions")
    page.wait_for_selector(".session-item")

    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("window.__stolen") is None
    assert tab.dialogs == []
    assert not [u for u in tab.requests if "xss-beacon" in u]
    # Chromium reports inline handlers while DOMPurify parses the HTML in its inert document
    # (where nothing runs); nothing that reached the page's DOM was reported.
    signals = page.evaluate("window.__signals")
    assert signals and all("purify.min.js" in s for s in signals), signals
    assert page.locator(".log script, .log iframe, .log form, .log [onerror]").count() == 0
    assert page.locator(".log a[href^='javascript']").count() == 0
    assert "Here is bold text" in tab.assistant_text()


# --------------------------------------------------------------------------- input, files


def test_slash_commands_input_history_and_image_attachments(tab, llm, workspace):
    llm.add(text("I see the images.\nTASK_COMPLETE"))
    tab.sign_in()
    page = tab.page
    tab.send("/help")
    tab.wait_text(".note", "/mode [auto|normal|manual]")
    tab.send("/mode manual")
    tab.wait_text(".note", "permission mode: manual")
    assert page.input_value("#mode-select") == "manual"
    tab.send("/mode auto")
    tab.send("/status")
    tab.wait_text(".note", "mode: auto")
    page.focus("#input")
    page.keyboard.press("ArrowUp")
    assert page.input_value("#input") == "/status"
    page.keyboard.press("ArrowUp")
    assert page.input_value("#input") == "/mode auto"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.input_value("#input") == ""

    page.set_input_files(
        "#file-input", files=[{"name": "shot.png", "mimeType": "image/png", "buffer": PNG}]
    )
    page.wait_for_selector(".attachment")
    page.evaluate(
        """(bytes) => {
          const file = (name) => new File([new Uint8Array(bytes)], name, {type: 'image/png'});
          const dropped = new DataTransfer();
          dropped.items.add(file('dropped.png'));
          window.dispatchEvent(new DragEvent('drop', {dataTransfer: dropped, cancelable: true}));
          const pasted = new DataTransfer();
          pasted.items.add(file('pasted.png'));
          document.getElementById('input').dispatchEvent(
            new ClipboardEvent('paste', {clipboardData: pasted, cancelable: true}));
        }""",
        list(PNG),
    )
    page.wait_for_function("() => document.querySelectorAll('.attachment').length === 3")
    tab.send("what is in these?")
    page.wait_for_selector(".ending.completed")
    sent = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    paths = re.findall(r"uploads/[\w.-]+\.png", sent)
    assert len(paths) == 3 and all((workspace / p).read_bytes() == PNG for p in paths)
    assert page.locator(".attachment").count() == 0


def test_file_tree_expands_and_previews_text(tab, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print('hello from main')\n")
    tab.sign_in()
    tab.page.click("#tab-files")
    tab.page.click("#file-tree summary >> text=src")
    tab.page.click("#file-tree >> text=main.py")
    tab.wait_text("#preview-body pre", "hello from main")
    assert tab.page.text_content("#preview-title") == "src/main.py"


# --------------------------------------------------------------------------- how it looks


def test_screenshots_of_the_main_screen_on_a_desktop_and_a_phone(browser, workspace, llm):
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    (workspace / "README.md").write_text("# Demo\n")
    answer = (
        "I created **app.py** and checked it:\n\n"
        "| file | status |\n|---|---|\n| src/app.py | ok |\n\n"
        "```python\nprint('hi')\n```\n\nTASK_COMPLETE"
    )
    llm.add(
        tool_call(
            "write",
            {"path": "src/app.py", "content": "print('hi')\n"},
            reasoning="The user wants a tiny app; write it, then run it.",
        ),
        tool_call("read", {"path": "src/app.py"}),
        text(answer),
    )
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with WebHarness(make_config(workspace, llm)) as web:
        desktop = Page(browser, web, viewport={"width": 1280, "height": 800})
        desktop.sign_in()
        desktop.send("Create a tiny Python app in src/ and check it")
        desktop.page.wait_for_selector(".ending.completed")
        desktop.page.click("#tab-files")
        desktop.page.click("#file-tree summary >> text=src")
        desktop.page.wait_for_selector("#file-tree >> text=app.py")
        desktop.page.screenshot(path=str(OUTPUT / "web_main.png"))
        desktop.close()
        phone = Page(
            browser, web, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
        )
        phone.sign_in()
        phone.page.click("#toggle-side")
        phone.page.click(".session-item")
        phone.page.wait_for_selector(".ending.completed")
        assert phone.page.is_hidden("#side")  # the drawer closes once a session is chosen
        phone.page.screenshot(path=str(OUTPUT / "web_phone.png"))
        width = phone.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, "the page scrolls sideways on a phone"
        phone.close()
    for name in ("web_main.png", "web_phone.png"):
        assert (OUTPUT / name).stat().st_size > 10_000
    assert json.loads(json.dumps(llm.requests[-1]))  # the model saw a normal request
