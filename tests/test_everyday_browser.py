"""The everyday page in real Chromium: the server bar, guidance when the server is down, the
welcome, session search / rename / delete, highlighted code with a copy button, Markdown
previews, downloads, the no-vision message, sign-ins that survive a restart. Screenshots of the
desktop and phone layouts go to tests/output/."""

from __future__ import annotations

import json

import pytest

from lmagent.sessions.store import SessionStore
from tests.cli_process import closed_port_url
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text, tool_call
from tests.test_web_browser import OUTPUT, PNG, Page, browser  # noqa: F401 - the fixture
from tests.test_web_support import WebHarness

pytestmark = pytest.mark.browser
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


class AnsweringPage(Page):
    """A tab whose dialogs (prompt, confirm) are answered with the next of `answers`."""

    def __init__(self, *args, answers=(), **kw):
        self.answers = list(answers)
        super().__init__(*args, **kw)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            dialog.dismiss()
        else:
            dialog.accept(answer)


@pytest.fixture
def web(workspace, llm):
    with WebHarness(make_config(workspace, llm)) as harness:
        yield harness


@pytest.fixture
def tabs(browser):  # noqa: F811 - the imported fixture
    opened: list[Page] = []

    def open_tab(web, kind=AnsweringPage, answers=(), **options) -> Page:
        opened.append(kind(browser, web, answers=answers, **(options or DESKTOP)))
        return opened[-1]

    yield open_tab
    for page in opened:
        page.close()


def no_script_ran(tab: Page) -> None:
    # Chromium reports inline handlers while DOMPurify parses HTML in its inert document (where
    # nothing runs): those are the only reports allowed
    signals = tab.page.evaluate("window.__signals")
    assert all("purify.min.js" in signal for signal in signals), signals
    assert tab.page.evaluate("window.__pwned") is None
    assert not [line for line in tab.console if "pageerror" in line]


# --------------------------------------------------------------------------- header, welcome


def test_the_server_bar_and_the_welcome_on_a_desktop_and_a_phone(tabs, web, workspace):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    desktop = tabs(web)
    desktop.sign_in()
    desktop.wait_text("#server-state", "server ready")
    assert desktop.page.text_content("#server-model") == "scripted-model"
    assert desktop.page.text_content("#server-workspace") == str(workspace)
    assert desktop.page.text_content("#server-sandbox")
    assert desktop.page.is_visible("#welcome") and desktop.page.is_hidden("#server-down")
    example = desktop.page.locator("#welcome button.example").first
    example.click()
    assert desktop.page.input_value("#input") == example.text_content()
    desktop.page.screenshot(path=str(OUTPUT / "everyday_desktop.png"))
    phone = tabs(web, **PHONE)
    phone.sign_in()
    phone.wait_text("#server-state", "server ready")
    assert phone.page.is_visible("#welcome")
    phone.page.screenshot(path=str(OUTPUT / "everyday_phone.png"))
    width = phone.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "the page scrolls sideways on a phone"
    for name in ("everyday_desktop.png", "everyday_phone.png"):
        assert (OUTPUT / name).stat().st_size > 10_000
    no_script_ran(desktop)


def test_a_server_that_is_down_is_explained_before_anything_is_sent(tabs, workspace):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with WebHarness(make_config(workspace, None, llm_url=closed_port_url())) as down:
        tab = tabs(down, **PHONE)
        tab.sign_in()
        tab.wait_text("#server-state", "server unreachable")
        guidance = tab.page.text_content("#server-down")
        assert "cannot reach the LLM server" in guidance and "Start LM Studio" in guidance
        assert tab.page.is_visible("#server-down")
        tab.page.screenshot(path=str(OUTPUT / "everyday_server_down_phone.png"))


def test_the_welcome_goes_once_a_task_runs_and_thinking_loses_its_ellipsis(tabs, web, llm):
    llm.add(text("Hello.\nTASK_COMPLETE", reasoning="The user greets me."))
    tab = tabs(web)
    tab.sign_in()
    tab.send("say hello")
    tab.page.wait_for_selector(".ending.completed")
    assert tab.page.is_hidden("#welcome")
    assert tab.page.text_content(".thinking summary") == "Thinking"
    tab.page.click("#new-chat")
    tab.page.wait_for_selector("#welcome", state="visible")


# --------------------------------------------------------------------------- sessions


def a_session(workspace, task: str, status: str = "completed") -> str:
    session = SessionStore(workspace).create(task, source="web")
    session.save_meta(status=status)
    session.close()
    return session.id


def session_names(tab: Page) -> list[str]:
    return tab.page.eval_on_selector_all(
        "#session-list li:not([hidden]) .session-item .task",
        "nodes => nodes.map(n => n.textContent)",
    )


def test_sessions_are_titled_searched_renamed_and_deleted(tabs, web, workspace):
    a_session(workspace, "write the release notes")
    gone = a_session(workspace, "tidy the photos folder")
    running = a_session(workspace, "a long import", status="running")
    tab = tabs(web, answers=["Release notes v2", "ok"])
    tab.sign_in()
    tab.page.wait_for_selector(".session-actions")
    assert sorted(session_names(tab)) == [
        "a long import",
        "tidy the photos folder",
        "write the release notes",
    ]
    tab.page.fill("#session-search", "RELEASE notes")
    assert session_names(tab) == ["write the release notes"]
    tab.page.click("button[aria-label='Rename write the release notes']")
    tab.wait_text(".session-item .task", "Release notes v2")
    tab.page.click(".session-item >> text=Release notes v2")
    tab.wait_text("#view-banner-text", "Release notes v2 — typing continues it")
    tab.page.fill("#session-search", "")
    tab.page.click("button[aria-label='Delete tidy the photos folder']")
    tab.page.wait_for_function(
        "() => !document.querySelector(`[data-id='" + gone + "']`)", timeout=10_000
    )
    assert "cannot be restored" in tab.dialogs[-1]
    row = tab.page.locator(f"#session-list li:has([data-id='{running}'])")
    assert row.locator("button[aria-label^='Delete']").count() == 0  # never while it runs
    left = SessionStore(workspace).list()
    assert gone not in {m["id"] for m in left} and len(left) == 2
    assert "Release notes v2" in {m.get("title") for m in left}


def test_a_dismissed_delete_keeps_the_session(tabs, web, workspace):
    session_id = a_session(workspace, "keep me")
    tab = tabs(web, answers=[None])
    tab.sign_in()
    tab.page.click("button[aria-label='Delete keep me']")
    tab.page.click("#refresh-sessions")
    tab.page.wait_for_selector("button[aria-label='Delete keep me']")
    assert len(tab.dialogs) == 1 and "keep me" in tab.dialogs[0]
    assert [m["id"] for m in SessionStore(workspace).list()] == [session_id]


# --------------------------------------------------------------------------- code and files


def test_code_is_highlighted_and_copied(tabs, web, llm):
    code = "def greet(name):\n    return f'hi {name}'"
    answer = text(f"Here:\n\n```python\n{code}\n```\n\nTASK_COMPLETE")
    llm.add(answer, answer)  # code before any tool call is questioned once; the answer stands
    tab = tabs(web)
    tab.context.grant_permissions(["clipboard-read", "clipboard-write"])
    tab.sign_in()
    tab.send("write greet")
    tab.page.wait_for_selector(".ending.completed")
    tab.page.wait_for_selector(".md pre code.hljs .hljs-keyword")
    assert tab.page.text_content(".md pre code").rstrip("\n") == code
    tab.page.click(".copy-code")
    tab.wait_text(".copy-code", "Copied")
    assert tab.page.evaluate("navigator.clipboard.readText()").rstrip("\n") == code
    no_script_ran(tab)


def test_markdown_previews_render_sanitised_and_files_download(tabs, web, workspace):
    (workspace / "README.md").write_text(
        '# Demo\n\nSome *notes*.\n\n<img src=x onerror="window.__pwned=1">\n'
        "<script>window.__pwned=2</script>\n\n```js\nlet x = 1;\n```\n"
    )
    tab = tabs(web)
    tab.sign_in()
    tab.page.click("#tab-files")
    tab.page.click("#file-tree >> text=README.md")
    tab.page.wait_for_selector("#preview-body .md h1")
    assert tab.page.text_content("#preview-body .md h1") == "Demo"
    assert tab.page.locator("#preview-body .md script").count() == 0
    assert tab.page.locator("#preview-body .md [onerror]").count() == 0
    tab.page.wait_for_selector("#preview-body .md pre code.hljs")
    with tab.page.expect_download() as download:
        tab.page.click("#preview-download")
    assert download.value.suggested_filename == "README.md"
    assert tab.dialogs == []
    no_script_ran(tab)


def test_an_image_without_a_vision_model_says_so(tabs, web):
    tab = tabs(web)
    tab.sign_in()
    tab.page.set_input_files(
        "#file-input", files=[{"name": "shot.png", "mimeType": "image/png", "buffer": PNG}]
    )
    tab.page.wait_for_selector(".attachment")
    tab.wait_text("#notice", "no vision model is loaded")


# --------------------------------------------------------------------------- sign-ins


def test_a_sign_in_survives_a_restart_and_sign_out_all_ends_every_device(tabs, workspace, llm):
    config = make_config(workspace, llm)
    with WebHarness(config) as first:
        laptop, phone = tabs(first, answers=["ok"]), tabs(first, **PHONE)
        laptop.sign_in()
        phone.sign_in()
    with WebHarness(config) as restarted:  # cookies are per host name, not per port
        laptop.web = phone.web = restarted
        laptop.page.goto(restarted.base + "/")
        laptop.page.wait_for_selector("body[data-stream='open']", state="attached")
        laptop.page.click("#logout-all")
        laptop.page.wait_for_selector("#pin")
        phone.page.goto(restarted.base + "/")
        phone.page.wait_for_selector("#pin")
    stored = json.loads((workspace / ".lmagent" / "web_sessions.json").read_text())
    assert stored == {}


def test_the_server_state_is_rechecked_while_the_page_is_open(tabs, workspace):
    server = ScriptedLLM().start()
    try:
        with WebHarness(make_config(workspace, server), SERVER_RECHECK=0) as web:
            tab = tabs(web)
            tab.sign_in()
            tab.wait_text("#server-state", "server ready")
            server.stop()
            tab.page.wait_for_function(  # a tab shown again rechecks at once
                "() => { document.dispatchEvent(new Event('visibilitychange'));"
                " return document.querySelector('#server-state').textContent"
                ".includes('unreachable'); }",
                polling=200,
            )
            assert "cannot reach the LLM server" in tab.page.text_content("#server-down")
    finally:
        server.stop()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_server_that_stops_is_noticed_within_seconds_without_any_action(tabs, workspace, size):
    server = ScriptedLLM().start()
    try:
        with WebHarness(make_config(workspace, server)) as web:  # the default rechecks
            tab = tabs(web, **size)
            tab.sign_in()
            tab.wait_text("#server-state", "server ready")
            server.stop()
            tab.wait_text("#server-state", "server unreachable", timeout=8_000)
    finally:
        server.stop()


# --------------------------------------------------------------------------- smaller points


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_icons_ship_with_the_page_and_an_empty_search_says_no_matches(tabs, web, workspace, size):
    a_session(workspace, "write the release notes")
    tab = tabs(web, **size)
    tab.sign_in()
    if size is PHONE:
        tab.page.click("#toggle-side")
    delete = tab.page.locator("button[aria-label='Delete write the release notes']")
    delete.locator("svg").wait_for()  # drawn by the page, not an emoji glyph
    assert delete.locator("svg path").count() == 5 and delete.text_content() == ""
    assert delete.locator("svg").bounding_box()["width"] == 16
    assert tab.page.is_hidden("#session-none")
    tab.page.fill("#session-search", "photos")
    tab.wait_text("#session-none", "no matches")
    assert tab.page.is_visible("#session-none") and session_names(tab) == []
    tab.page.fill("#session-search", "")
    assert tab.page.is_hidden("#session-none")


def test_the_phone_header_has_new_and_shows_the_whole_sandbox_line(tabs, web):
    tab = tabs(web, **PHONE)
    tab.sign_in()
    tab.wait_text("#server-state", "server ready")
    assert tab.page.is_visible("#new-chat")
    sandbox = tab.page.locator("#server-sandbox")
    assert sandbox.text_content()
    cut = tab.page.evaluate(
        "() => { const f = document.querySelector('#server-sandbox').parentElement;"
        " return f.scrollWidth > f.clientWidth + 1; }"
    )
    assert not cut, "the sandbox line is cut off"
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_restore_that_would_change_nothing_offers_no_restore(tabs, web, llm, workspace, size):
    llm.add(tool_call("write", {"path": "a.txt", "content": "A\n"}), text("Done.\nTASK_COMPLETE"))
    tab = tabs(web, **size)
    tab.sign_in()
    tab.send("write a.txt")
    tab.page.wait_for_selector(".ending.completed")
    (workspace / "a.txt").unlink()  # as it was before step 1
    tab.page.locator(".change-view .restore-button").first.click()
    tab.wait_text(".restore-confirm", "restoring would change nothing")
    assert tab.page.locator(".restore-confirm button.allow").count() == 0
    tab.page.click(".restore-confirm button.deny")
    assert tab.page.locator(".restore-confirm").count() == 0
