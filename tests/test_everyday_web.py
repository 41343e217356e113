"""The web API behind the everyday page: the header's server state, renaming and deleting
sessions, downloads, the no-vision message, sign-ins that survive a restart, extra host names."""

from __future__ import annotations

import io
import json
import os

import pytest

from lmagent.core.config import Config, ConfigError
from lmagent.sessions.store import SessionStore
from lmagent.sessions.waiting import WaitingIndex
from lmagent.web.app import create_app
from lmagent.web.health import ServerHealth
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM
from tests.test_web_api import PIN, PNG

ORIGIN = "http://localhost"


def signed_in_client(app):
    client = app.test_client()
    assert client.post("/api/login", json={"pin": PIN}).status_code == 200
    return client


@pytest.fixture
def app(workspace, llm):
    return create_app(make_config(workspace, llm), {"PIN": PIN})


@pytest.fixture
def signed_in(app):
    return signed_in_client(app)


def a_session(workspace, task="write the release notes") -> str:
    session = SessionStore(workspace).create(task, source="web")
    session.save_meta(status="completed")
    session.close()
    return session.id


# --------------------------------------------------------------------------- the header


def test_the_header_names_model_workspace_sandbox_and_a_reachable_server(signed_in, workspace):
    info = signed_in.get("/api/server").json
    assert info["state"] == "reachable" and info["model"] == "scripted-model"
    assert info["workspace"] == str(workspace) and info["sandbox"]
    assert info["message"] == "" and info["vision"] is False


def test_an_unreachable_server_comes_with_the_clis_guidance(workspace):
    app = create_app(make_config(workspace), {"PIN": PIN})  # LLM_URL: nothing listens
    info = signed_in_client(app).get("/api/server").json
    assert info["state"] == "unreachable"
    assert "cannot reach the LLM server" in info["message"] and "Start LM Studio" in info["message"]


def test_a_server_without_a_loaded_model_is_loading(workspace):
    with ScriptedLLM(models=[{"id": "qwen", "state": "not-loaded"}]) as llm:
        app = create_app(make_config(workspace, llm), {"PIN": PIN})
        info = signed_in_client(app).get("/api/server").json
    assert info["state"] == "loading" and "no model loaded" in info["message"]


def test_the_state_is_rechecked_when_the_server_goes_away(workspace):
    server = ScriptedLLM().start()
    health = ServerHealth(make_config(workspace, server), interval=0)
    assert health.current()["state"] == "reachable"
    server.stop()
    health.check()
    assert health.current()["state"] == "unreachable"


def test_the_header_needs_a_sign_in(app):
    assert app.test_client().get("/api/server").status_code == 401


# --------------------------------------------------------------------------- sessions


def test_a_session_is_renamed_and_keeps_its_task(signed_in, workspace):
    session_id = a_session(workspace)
    answer = signed_in.patch(f"/api/sessions/{session_id}", json={"title": "  Release\nnotes "})
    assert answer.status_code == 200, answer.json
    (meta,) = signed_in.get("/api/sessions").json["sessions"]
    assert meta["title"] == "Release notes" and meta["task"] == "write the release notes"


@pytest.mark.parametrize("body", [{}, {"title": ""}, {"title": "   "}, {"title": 7}, ["x"]])
def test_a_bad_title_is_400(signed_in, workspace, body):
    answer = signed_in.patch(f"/api/sessions/{a_session(workspace)}", json=body)
    assert answer.status_code == 400 and "title" in answer.json["error"]


def test_a_title_over_200_characters_is_400(signed_in, workspace):
    answer = signed_in.patch(f"/api/sessions/{a_session(workspace)}", json={"title": "x" * 201})
    assert answer.status_code == 400


def test_a_session_is_deleted_with_its_files(signed_in, workspace):
    keep, gone = a_session(workspace, "keep"), a_session(workspace, "gone")
    assert signed_in.delete(f"/api/sessions/{gone}").status_code == 200
    assert [m["id"] for m in signed_in.get("/api/sessions").json["sessions"]] == [keep]
    left = os.listdir(workspace / ".lmagent" / "sessions")
    assert not [name for name in left if name.startswith(gone)]
    assert signed_in.get(f"/api/sessions/{gone}").status_code == 404


def test_a_deleted_waiting_session_is_not_woken(signed_in, workspace):
    waiting = WaitingIndex(workspace)
    keep, gone = a_session(workspace, "keep"), a_session(workspace, "gone")
    for session_id in (keep, gone):
        waiting.add(session_id, "2030-01-01T00:00:00+00:00", "later")
    assert signed_in.delete(f"/api/sessions/{gone}").status_code == 200
    assert list(WaitingIndex(workspace).load()) == [keep]


def test_a_running_session_is_neither_deleted_nor_renamed(signed_in, workspace):
    session_id = a_session(workspace)
    with SessionStore(workspace).lock(session_id):
        deleted = signed_in.delete(f"/api/sessions/{session_id}")
        renamed = signed_in.patch(f"/api/sessions/{session_id}", json={"title": "new"})
    assert deleted.status_code == 409 and renamed.status_code == 409
    assert "stop it first" in deleted.json["error"]
    assert len(signed_in.get("/api/sessions").json["sessions"]) == 1


@pytest.mark.parametrize("session_id", ["nope", "../../etc", "a b"])
def test_unknown_or_invalid_session_ids_are_404(signed_in, session_id):
    assert signed_in.delete(f"/api/sessions/{session_id}").status_code in (404, 405)
    assert signed_in.patch(f"/api/sessions/{session_id}", json={"title": "t"}).status_code in (
        404,
        405,
    )


def test_deleting_from_another_origin_is_refused(signed_in, workspace):
    session_id = a_session(workspace)
    answer = signed_in.delete(
        f"/api/sessions/{session_id}", headers={"Origin": "http://evil.example"}
    )
    assert answer.status_code == 403
    assert len(signed_in.get("/api/sessions").json["sessions"]) == 1


# --------------------------------------------------------------------------- files


def test_a_file_downloads_as_an_attachment_with_its_name(signed_in, workspace):
    (workspace / "notes").mkdir()
    (workspace / "notes" / "plan.md").write_text("# Plan\n")
    answer = signed_in.get("/api/file?raw=1&download=1&path=notes/plan.md")
    assert answer.status_code == 200 and answer.data == b"# Plan\n"
    assert answer.headers["Content-Disposition"].startswith("attachment")
    assert "plan.md" in answer.headers["Content-Disposition"]
    inline = signed_in.get("/api/file?raw=1&path=notes/plan.md")
    assert inline.headers["Content-Disposition"] == "inline"


def test_a_download_outside_the_workspace_is_refused(signed_in, tmp_path):
    (tmp_path / "secret.txt").write_text("no")
    answer = signed_in.get("/api/file?raw=1&download=1&path=../secret.txt")
    assert answer.status_code == 403


def test_an_image_without_a_vision_model_says_so(signed_in):
    answer = signed_in.post("/api/upload", data={"file": (io.BytesIO(PNG), "a.png")})
    assert answer.status_code == 201
    assert "no vision model is loaded" in answer.json["warning"]


# --------------------------------------------------------------------------- sign-ins


def test_a_sign_in_survives_a_restart(workspace, llm):
    config = make_config(workspace, llm)
    first = signed_in_client(create_app(config, {"PIN": PIN}))
    cookie = first.get_cookie("lmagent_session")
    assert cookie.expires is not None  # a cookie with an expiry, not one for the tab only
    restarted = create_app(config, {"PIN": PIN}).test_client()
    restarted.set_cookie("lmagent_session", cookie.value)
    assert restarted.get("/api/status").status_code == 200
    stored = workspace / ".lmagent" / "web_sessions.json"
    assert cookie.value not in stored.read_text()  # only a hash is kept
    assert stored.stat().st_mode & 0o077 == 0


def test_signing_out_everywhere_ends_every_devices_sign_in(app):
    phone, laptop = signed_in_client(app), signed_in_client(app)
    assert phone.post("/api/logout", json={"everywhere": True}).status_code == 200
    assert phone.get("/api/status").status_code == 401
    assert laptop.get("/api/status").status_code == 401


def test_signing_out_everywhere_needs_a_sign_in(app):
    laptop = signed_in_client(app)
    stranger = app.test_client()
    assert stranger.post("/api/logout", json={"everywhere": True}).status_code == 401
    assert laptop.get("/api/status").status_code == 200


def test_signing_out_one_device_keeps_the_others(app):
    phone, laptop = signed_in_client(app), signed_in_client(app)
    assert phone.post("/api/logout", json={}).status_code == 200
    assert phone.get("/api/status").status_code == 401
    assert laptop.get("/api/status").status_code == 200


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"abc": "soon"}', ""])
def test_a_damaged_sessions_file_only_signs_everyone_out(workspace, llm, content):
    (workspace / ".lmagent").mkdir(exist_ok=True)
    (workspace / ".lmagent" / "web_sessions.json").write_text(content)
    app = create_app(make_config(workspace, llm), {"PIN": PIN})
    assert app.test_client().get("/api/status").status_code == 401
    assert signed_in_client(app).get("/api/status").status_code == 200


def test_an_expired_sign_in_is_refused_after_a_restart(workspace, llm):
    config = make_config(workspace, llm)
    client = signed_in_client(create_app(config, {"PIN": PIN}))
    stored = workspace / ".lmagent" / "web_sessions.json"
    sessions = json.loads(stored.read_text())
    stored.write_text(json.dumps(dict.fromkeys(sessions, 1000.0)))  # expired long ago
    restarted = create_app(config, {"PIN": PIN}).test_client()
    restarted.set_cookie("lmagent_session", client.get_cookie("lmagent_session").value)
    assert restarted.get("/api/status").status_code == 401


# --------------------------------------------------------------------------- host names


def test_allowed_hosts_adds_names_and_still_refuses_others(workspace, llm):
    config = make_config(workspace, llm, agent_allowed_hosts=("agent.tail1234.ts.net",))
    client = create_app(config, {"PIN": PIN}).test_client()
    bearer = {"Authorization": f"Bearer {PIN}"}
    vpn = client.get("/api/status", headers={"Host": "agent.tail1234.ts.net:7860", **bearer})
    assert vpn.status_code == 200
    other = client.get("/api/status", headers={"Host": "evil.example", **bearer})
    assert other.status_code == 400 and "unknown host name" in other.json["error"]


def test_allowed_hosts_is_read_from_the_environment(workspace):
    environ = {"WORKSPACE": str(workspace), "AGENT_ALLOWED_HOSTS": "proxy.lan, 100.64.0.7"}
    assert Config.load(environ=environ).agent_allowed_hosts == ("proxy.lan", "100.64.0.7")
    assert Config.load(environ={"WORKSPACE": str(workspace)}).agent_allowed_hosts == ()


@pytest.mark.parametrize("value", ["bad host!", "http://proxy.lan", "a..b"])
def test_a_bad_allowed_host_names_the_variable(workspace, value):
    with pytest.raises(ConfigError, match="AGENT_ALLOWED_HOSTS"):
        Config.load(environ={"WORKSPACE": str(workspace), "AGENT_ALLOWED_HOSTS": value})
