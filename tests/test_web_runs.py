"""Runs driven over the web API on the real server: the event stream and its replay, one run at
a time, Stop, and permission prompts."""

from __future__ import annotations

import time

import pytest

from lmagent.sessions.store import SessionStore
from lmagent.web.events import EventHub
from tests.conftest import make_config
from tests.scripted_llm import text, tool_call
from tests.test_web_support import WebHarness

SLOW = {"chunk_size": 2, "chunk_delay": 0.05}  # a reply that streams for a few seconds


@pytest.fixture
def web(workspace, llm):
    with WebHarness(make_config(workspace, llm)) as harness:
        yield harness


def start(http, web, message="do the task", **body):
    response = http.post(web.base + "/api/chat", json={"message": message, **body}, timeout=5)
    assert response.status_code == 202, response.text
    return response.json()


def test_a_run_streams_numbered_events_with_sse_headers(web, llm, workspace):
    llm.add(
        tool_call("write", {"path": "a.txt", "content": "hi"}),
        text("Wrote it.\nTASK_COMPLETE", chunk_size=3),
    )
    http = web.session()
    events = web.stream(http)
    headers = events.response.headers
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers["Cache-Control"] == "no-cache" and headers["X-Accel-Buffering"] == "no"
    ids = start(http, web)
    done = events.wait_type("done")
    assert done["data"]["status"] == "completed" and done["data"]["session_id"] == ids["session_id"]
    assert events.types()[:3] == ["run", "session", "iteration"]
    assert "tool_call" in events.types() and "tool_result" in events.types()
    tokens = "".join(e["data"]["text"] for e in events.events if e["event"] == "token")
    assert tokens.startswith("Wrote it.")
    numbers = [int(e["id"].rsplit("-", 1)[1]) for e in events.events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert (workspace / "a.txt").read_text() == "hi"
    events.close()
    llm.assert_all_used()


def test_an_idle_stream_sends_heartbeats(workspace):
    with WebHarness(make_config(workspace), SSE_HEARTBEAT=0.2) as web:
        events = web.stream(web.session())
        with events._cond:
            assert events._cond.wait_for(lambda: len(events.comments) >= 2, 5)
        assert events.comments[0] == ": ping"
        events.close()


def test_last_event_id_replays_exactly_what_the_client_missed(web, llm):
    llm.add(text("one two three four five six\nTASK_COMPLETE", chunk_size=4))
    http = web.session()
    first = web.stream(http)
    start(http, web)
    first.wait_type("done")
    first.close()
    seen = first.events[:4]
    again = web.stream(http, headers={"Last-Event-ID": seen[-1]["id"]})
    again.wait_type("done")
    assert [e["id"] for e in again.events] == [e["id"] for e in first.events[4:]]
    again.close()


def test_replay_from_an_evicted_or_foreign_id_sends_resync_instead(workspace, llm):
    llm.add(text("a fairly long reply that makes many token events\nTASK_COMPLETE", chunk_size=2))
    with WebHarness(make_config(workspace, llm), EVENT_BUFFER=8) as web:
        http = web.session()
        first = web.stream(http)
        ids = start(http, web)
        first.wait_type("done")
        first.close()
        late = web.stream(http, headers={"Last-Event-ID": first.events[1]["id"]})
        resync = late.wait_type("resync")["data"]
        assert resync["reason"] == "gap" and resync["session_id"] == ids["session_id"]
        assert resync["run"]["status"] == "completed"
        late.close()
        other = web.stream(http, headers={"Last-Event-ID": "0badb00t-3"})
        assert other.wait_type("resync")["data"]["reason"] == "restart"
        other.close()
        assert web.state.hub.size[0] <= 8


def test_a_second_chat_while_one_runs_gets_429(web, llm):
    llm.add(text("slow reply " * 10 + "\nTASK_COMPLETE", **SLOW))
    http = web.session()
    events = web.stream(http)
    ids = start(http, web)
    events.wait_type("token")
    second = http.post(web.base + "/api/chat", json={"message": "another"}, timeout=5)
    assert second.status_code == 429
    assert second.json()["session_id"] == ids["session_id"]
    assert http.post(web.base + "/api/stop", json={}, timeout=5).json() == {"stopping": True}
    events.wait_type("done")
    events.close()


def test_stop_mid_stream_saves_the_session_as_interrupted(web, llm, workspace):
    llm.add(text("word " * 200, chunk_size=5, chunk_delay=0.1))
    http = web.session()
    events = web.stream(http)
    ids = start(http, web)
    events.wait_type("token")
    began = time.monotonic()
    http.post(web.base + "/api/stop", json={}, timeout=5)
    done = events.wait_type("done", timeout=10)
    assert time.monotonic() - began < 10  # the reply would stream for 20 s
    assert done["data"]["status"] == "interrupted"
    web.wait_idle()
    meta = SessionStore(workspace).open(ids["session_id"]).meta
    assert meta["status"] == "interrupted"
    assert web.state.runs.status()["run"] is None
    events.close()


def test_stop_ends_a_running_shell_command(workspace, llm):
    llm.add(tool_call("shell", {"command": "echo up > started.txt; sleep 30", "timeout": 60}))
    config = make_config(workspace, llm, sandbox_backend="process")
    with WebHarness(config) as web:
        http = web.session()
        events = web.stream(http)
        ids = start(http, web)
        events.wait_type("tool_call")
        deadline = time.monotonic() + 10
        while not (workspace / "started.txt").exists():  # the command is really running
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.02)
        began = time.monotonic()
        http.post(web.base + "/api/stop", json={}, timeout=5)
        done = events.wait_type("done", timeout=15)
        assert time.monotonic() - began < 15, "the command was not interrupted"  # it sleeps 30 s
        assert done["data"]["status"] == "interrupted"
        web.wait_idle()
        assert SessionStore(workspace).open(ids["session_id"]).meta["status"] == "interrupted"
        events.close()


@pytest.mark.parametrize(("decision", "written"), [("allow", True), ("deny", False)])
def test_permission_request_is_answered_from_the_browser(workspace, llm, decision, written):
    (workspace / "p.txt").write_text("keep\nold\n")
    content = "keep\nnew\n"
    llm.add(tool_call("write", {"path": "p.txt", "content": content}), text("ok\nTASK_COMPLETE"))
    with WebHarness(make_config(workspace, llm, permission_mode="normal")) as web:
        http = web.session()
        events = web.stream(http)
        start(http, web)
        asked = events.wait_type("permission_request")["data"]
        assert asked["tool"] == "write" and asked["arguments"]["path"] == "p.txt"
        assert "\n-old\n+new\n" in asked["diff"] and "+keep" not in asked["diff"]  # the change
        status = http.get(web.base + "/api/status", timeout=5).json()
        assert status["mode"] == "normal"
        assert status["run"]["pending"][0]["request_id"] == asked["request_id"]
        answer = {"request_id": asked["request_id"], "decision": decision}
        assert http.post(web.base + "/api/permission", json=answer, timeout=5).status_code == 200
        again = http.post(web.base + "/api/permission", json=answer, timeout=5)
        assert again.status_code == 404  # answered once only
        result = events.wait_type("tool_result")["data"]
        assert result["success"] is written
        events.wait_type("done")
        assert ((workspace / "p.txt").read_text() == content) is written
        events.close()


def test_auto_answer_switches_the_mode_in_force_for_the_rest_of_the_run(workspace, llm):
    llm.add(
        tool_call("write", {"path": "1.txt", "content": "1"}),
        tool_call("write", {"path": "2.txt", "content": "2"}),
        text("both written\nTASK_COMPLETE"),
    )
    with WebHarness(make_config(workspace, llm, permission_mode="normal")) as web:
        http = web.session()
        events = web.stream(http)
        start(http, web)
        asked = events.wait_type("permission_request")["data"]
        answer = {"request_id": asked["request_id"], "decision": "auto"}
        http.post(web.base + "/api/permission", json=answer, timeout=5)
        assert events.wait_type("mode")["data"]["mode"] == "auto"
        events.wait_type("done")
        web.wait_idle()  # "done" is sent before the run is let go
        assert events.types().count("permission_request") == 1
        assert (workspace / "2.txt").read_text() == "2"
        assert http.get(web.base + "/api/status", timeout=5).json()["mode"] == "normal"
        events.close()


def test_a_plan_first_run_asks_the_browser_to_approve_the_plan(web, llm):
    llm.add(text("1. Read the code\n2. Fix the bug"), text("Fixed.\nTASK_COMPLETE"))
    http = web.session()
    events = web.stream(http)
    start(http, web, "fix the bug", plan=True)
    asked = events.wait_type("permission_request")["data"]
    assert asked["tool"] == "plan"
    assert [s["description"] for s in asked["arguments"]["steps"]] == [
        "Read the code",
        "Fix the bug",
    ]
    answer = {"request_id": asked["request_id"], "decision": "allow"}
    http.post(web.base + "/api/permission", json=answer, timeout=5)
    assert events.wait_type("done")["data"]["status"] == "completed"
    events.close()


def test_stop_while_waiting_for_permission_denies_and_interrupts(workspace, llm):
    llm.add(tool_call("write", {"path": "p.txt", "content": "x"}))
    with WebHarness(make_config(workspace, llm, permission_mode="manual")) as web:
        http = web.session()
        events = web.stream(http)
        start(http, web)
        events.wait_type("permission_request")
        http.post(web.base + "/api/stop", json={}, timeout=5)
        assert events.wait_type("permission_answered")["data"]["decision"] == "deny"
        assert events.wait_type("done")["data"]["status"] == "interrupted"
        assert not (workspace / "p.txt").exists()
        events.close()


def test_continuing_a_session_appends_to_its_transcript(web, llm):
    llm.add(text("first answer\nTASK_COMPLETE"), text("second answer\nTASK_COMPLETE"))
    http = web.session()
    events = web.stream(http)
    ids = start(http, web, "first question")
    events.wait_type("done")
    web.wait_idle()
    again = start(http, web, "second question", session_id=ids["session_id"])
    assert again["session_id"] == ids["session_id"]
    run = events.wait_type("run", resumed=True)["data"]
    assert run["base_messages"] == 2
    events.wait_for(lambda e: e["event"] == "done" and e["data"]["iterations"] and e is not None)
    web.wait_idle()
    detail = http.get(f"{web.base}/api/sessions/{ids['session_id']}", timeout=5).json()
    users = [m["content"] for m in detail["transcript"] if m["role"] == "user"]
    assert users == ["first question", "second question"]
    listed = http.get(web.base + "/api/sessions", timeout=5).json()["sessions"]
    assert [s["source"] for s in listed] == ["web"]
    events.close()


def test_fresh_page_replays_the_active_run_from_its_start(web, llm):
    llm.add(text("streaming along " * 6 + "\nTASK_COMPLETE", chunk_size=4, chunk_delay=0.04))
    http = web.session()
    ids = start(http, web)
    live = web.stream(http)
    live.wait_type("token")
    page = web.stream(http, params={"from": "run"})
    first = page.wait_type("run")
    assert first["data"]["session_id"] == ids["session_id"]
    page.wait_type("done")
    replayed = "".join(e["data"]["text"] for e in page.events if e["event"] == "token")
    assert replayed.startswith("streaming along streaming along")
    page.close()
    live.close()


def test_many_open_tabs_do_not_starve_the_api(web):
    http = web.session()
    limit = web.app.config["MAX_STREAMS"]
    streams = [web.stream(http) for _ in range(limit + 4)]
    for oldest in streams[:4]:
        assert oldest.wait_type("closed")["data"]["reason"] == "superseded"
    began = time.monotonic()
    status = http.get(web.base + "/api/status", timeout=5).json()
    assert time.monotonic() - began < 1
    assert status["streams"] == limit
    for stream in streams:
        stream.close()


# --------------------------------------------------------------------------- the hub itself


def test_the_replay_buffer_stays_bounded_however_many_events_pass():
    hub = EventHub(max_events=100, max_bytes=10_000, max_streams=2)
    for n in range(20_000):
        hub.publish({"type": "token", "text": f"token {n}"})
    count, size = hub.size
    assert count <= 100 and size <= 10_000
    assert hub.oldest == hub.last - count + 1 and not hub.holds_after(1)


def test_streams_past_the_limit_close_the_oldest():
    hub = EventHub(max_streams=2)
    first, second, third = hub.subscribe(), hub.subscribe(), hub.subscribe()
    assert (first.closed, second.closed, third.closed) == ("superseded", "", "")
    assert hub.wait(first, 0, 0.01) == "closed"
    assert hub.streams == 2
