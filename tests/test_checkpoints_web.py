"""Review and undo in the web UI: the checkpoint API (list with diffs, what a restore would
change, the restore and its refusals), and in real Chromium the diff view, the command output
block, approval cards that show the change or command, and "Restore files to here" with its
confirmation — with screenshots on a desktop and a phone."""

from __future__ import annotations

from lmagent.sessions.store import SessionStore
from tests.conftest import make_config
from tests.scripted_llm import text, tool_call
from tests.test_web_browser import OUTPUT, Page, browser  # noqa: F401 - the browser fixture
from tests.test_web_support import WebHarness

pytest_plugins = ["tests.sandbox_fixtures"]

SHELL = "printf 'hello <b>bold</b>\\n\\033[31mred\\033[0m\\n'; seq 1 30; echo done > out.txt"


def write_and_edit(llm) -> None:
    llm.add(
        tool_call("write", {"path": "app.py", "content": "print('one')\n"}),
        tool_call("edit", {"path": "app.py", "search": "one", "replace": "two"}),
        text("Done.\nTASK_COMPLETE"),
    )


def finished_session(web: WebHarness, http) -> str:
    response = http.post(web.base + "/api/chat", json={"message": "make app.py"}, timeout=5)
    assert response.status_code == 202, response.text
    web.wait_idle()
    return response.json()["session_id"]


# --------------------------------------------------------------------------- the API


def test_the_api_lists_steps_with_diffs_plans_and_restores(workspace, llm):
    write_and_edit(llm)
    with WebHarness(make_config(workspace, llm)) as web:
        http = web.session()
        session_id = finished_session(web, http)
        listed = http.get(f"{web.base}/api/sessions/{session_id}/checkpoints", timeout=5).json()
        assert [(s["step"], s["tool"], s["changed"]) for s in listed["steps"]] == [
            (1, "write", ["app.py"]),
            (2, "edit", ["app.py"]),
        ]
        assert "-print('one')\n+print('two')" in listed["steps"][1]["diff"]

        plan = http.get(f"{web.base}/api/sessions/{session_id}/checkpoints/1", timeout=5).json()
        assert (plan["files"], plan["edited"]) == (["app.py"], [])
        assert (workspace / "app.py").exists()  # the plan changes nothing

        done = http.post(
            web.base + "/api/restore", json={"session_id": session_id, "step": 1}, timeout=5
        )
        assert done.status_code == 200, done.text
        assert done.json()["kind"] == "restore" and not (workspace / "app.py").exists()


def test_the_api_refuses_bad_input_a_busy_workspace_and_edited_files(workspace, llm):
    write_and_edit(llm)
    with WebHarness(make_config(workspace, llm)) as web:
        http = web.session()
        session_id = finished_session(web, http)
        restore = web.base + "/api/restore"

        def post(body):
            return http.post(restore, json=body, timeout=5)

        assert post({"step": 1}).status_code == 400
        assert post({"session_id": session_id, "step": "1"}).status_code == 400
        assert post({"session_id": session_id, "step": True}).status_code == 400
        unknown = post({"session_id": "nosuchsession", "step": 1})
        assert unknown.status_code == 404 and "no session" in unknown.json()["error"]
        missing = post({"session_id": session_id, "step": 9})
        assert missing.status_code == 409 and "no step 9" in missing.json()["error"]
        listing = http.get(f"{web.base}/api/sessions/nosuchsession/checkpoints", timeout=5)
        assert listing.status_code == 404

        store = SessionStore(workspace)
        other = store.create("a run in progress")
        with store.lock(other.id):
            busy = post({"session_id": session_id, "step": 1})
        assert busy.status_code == 409 and "a run is active" in busy.json()["error"]

        (workspace / "app.py").write_text("mine\n")
        edited = post({"session_id": session_id, "step": 1})
        assert edited.status_code == 409 and "app.py" in edited.json()["error"]
        plan = http.get(f"{web.base}/api/sessions/{session_id}/checkpoints/1", timeout=5).json()
        assert plan["edited"] == ["app.py"]
        assert post({"session_id": session_id, "step": 1, "force": True}).status_code == 200
        assert not (workspace / "app.py").exists()

        other_site = http.post(
            restore,
            json={"session_id": session_id},
            headers={"Origin": "http://evil.example"},
            timeout=5,
        )
        assert other_site.status_code == 403


# --------------------------------------------------------------------------- in the browser


def approve(tab: Page, question: str, shot: str) -> str:
    """Wait for the permission card, screenshot it, allow it; the card's text."""
    tab.wait_text("#permission .question", question)
    tab.page.screenshot(path=str(OUTPUT / shot))
    shown = tab.page.text_content("#permission")
    tab.page.click("#permission button.allow")
    return shown


def review_run(tab: Page, llm, prefix: str) -> None:
    """A run in normal mode: write, edit and shell approved from their cards, screenshots of
    each card and of the finished log."""
    llm.add(
        tool_call("write", {"path": "app.py", "content": "print('one')\n"}),
        tool_call("edit", {"path": "app.py", "search": "print('one')", "replace": "print('two')"}),
        tool_call("shell", {"command": SHELL}),
        text("Done.\nTASK_COMPLETE"),
    )
    tab.sign_in()
    tab.send("make app.py and run a command")
    card = approve(tab, "Allow write?", f"{prefix}_approval_write.png")
    assert "+print('one')" in card and '"content"' not in card  # the code, not a JSON string
    card = approve(tab, "Allow edit?", f"{prefix}_approval_edit.png")
    assert "-print('one')" in card and "+print('two')" in card
    card = approve(tab, "Allow shell?", f"{prefix}_approval_shell.png")
    assert "$ printf 'hello <b>bold</b>" in card
    # the finish is checked by running the changed program: a shell command, asked like any
    tab.wait_text("#permission", "python3 app.py")
    tab.page.click("#permission button.allow")
    tab.page.wait_for_selector(".ending.completed")


def test_diffs_output_blocks_approvals_and_restore_in_chromium(
    browser,  # noqa: F811 - the fixture
    workspace,
    llm,
    require_backend,
):
    require_backend("bwrap")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    config = make_config(workspace, llm, permission_mode="normal", sandbox_backend="bwrap")
    with WebHarness(config) as web:
        tab = Page(browser, web, viewport={"width": 1280, "height": 800})
        review_run(tab, llm, "web_review_desktop")
        page = tab.page
        changes = page.locator(".change-view")
        assert changes.count() == 3  # write, edit, and the shell command's out.txt
        first_added = page.locator(".change-view pre.diff .d-add").first
        assert first_added.text_content() == "+print('one')\n"
        edit = changes.nth(1)
        assert edit.locator("pre.diff .d-del").text_content() == "-print('one')\n"
        assert edit.locator("pre.diff .d-add").text_content() == "+print('two')\n"
        terminal = page.locator("pre.terminal").last
        output = terminal.text_content()
        assert "hello <b>bold</b>" in output and "\x1b[31mred" in output and "30" in output
        assert terminal.locator("b").count() == 0  # escapes and markup are text
        changes.nth(2).scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "web_review_desktop_output.png"))
        edit.scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "web_review_desktop_diff.png"))

        edit.locator(".restore-button").click()
        tab.wait_text(".restore-confirm", "2 file(s) will change")  # the later command's too
        assert page.locator(".restore-files li").all_text_contents() == ["app.py", "out.txt"]
        page.screenshot(path=str(OUTPUT / "web_review_desktop_restore.png"))
        page.click(".restore-confirm button.allow")
        tab.wait_text(".note", "Restored 2 file(s) to before step 2")
        assert (workspace / "app.py").read_text() == "print('one')\n"
        assert (workspace / "out.txt").exists() is False  # the later shell step went back too
        tab.close()

        phone = Page(
            browser, web, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
        )
        (workspace / "app.py").unlink()  # a new file again: its card shows the whole content
        review_run(phone, llm, "web_review_phone")
        width = phone.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, "the page scrolls sideways on a phone"
        phone.page.locator(".change-view").nth(1).scroll_into_view_if_needed()
        phone.page.screenshot(path=str(OUTPUT / "web_review_phone_diff.png"))
        phone.page.locator("pre.terminal").last.scroll_into_view_if_needed()
        phone.page.screenshot(path=str(OUTPUT / "web_review_phone_output.png"))
        phone.close()


def test_an_old_transcript_shows_its_diffs_and_restores_after_confirmation(
    browser,  # noqa: F811 - the fixture
    workspace,
    llm,
):
    write_and_edit(llm)
    with WebHarness(make_config(workspace, llm)) as web:
        finished_session(web, web.session())
        (workspace / "app.py").write_text("the user's version\n")
        tab = Page(browser, web, viewport={"width": 1280, "height": 800})
        tab.sign_in()
        tab.page.click(".session-item")
        tab.page.wait_for_selector(".change-view >> nth=1")
        assert tab.page.locator(".change-view .change-step").all_text_contents() == [
            "step 1",
            "step 2",
        ]
        tab.page.locator(".change-view .restore-button").first.click()
        tab.wait_text(".restore-confirm .warning", "Edited since the agent's last step")
        tab.page.click(".restore-confirm button.deny")  # cancel: nothing changes
        assert tab.page.locator(".restore-confirm").count() == 0
        assert (workspace / "app.py").read_text() == "the user's version\n"

        tab.page.locator(".change-view .restore-button").first.click()
        tab.page.click(".restore-confirm button.allow")
        tab.wait_text(".note", "Restored 1 file(s) to before step 1")
        assert not (workspace / "app.py").exists()
        assert tab.console == [] and tab.dialogs == []
        tab.close()
