"""The web API's sign-in, request checks, headers and file routes (Flask test client), plus
`python agent_web.py` itself."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import requests

from lmagent.web.app import create_app
from lmagent.web.server import announce, interface_addresses, outgoing_address
from tests.conftest import ROOT, free_port, make_config

PIN = "24681357"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


@pytest.fixture
def app(workspace):
    return create_app(make_config(workspace), {"PIN": PIN, "UPLOAD_MAX_BYTES": 4096})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def signed_in(client):
    assert client.post("/api/login", json={"pin": PIN}).status_code == 200
    return client


def set_cookie_header(response) -> str:
    (header,) = [h for h in response.headers.getlist("Set-Cookie") if "lmagent_session=" in h]
    return header


# --------------------------------------------------------------------------- sign-in


def test_login_sets_an_httponly_strict_cookie_that_opens_the_api(client):
    assert client.get("/api/status").status_code == 401
    response = client.post("/api/login", json={"pin": PIN})
    assert response.status_code == 200
    cookie = set_cookie_header(response)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert PIN not in cookie
    status = client.get("/api/status")
    assert status.status_code == 200
    assert status.json["mode"] == "auto" and status.json["run"] is None


def test_wrong_pin_is_401_and_the_sixth_attempt_after_five_failures_is_429(client, app):
    for _ in range(5):
        assert client.post("/api/login", json={"pin": "00000000"}).status_code == 401
    locked = client.post("/api/login", json={"pin": PIN})  # even the right PIN
    assert locked.status_code == 429
    assert int(locked.headers["Retry-After"]) > 800
    other = app.test_client()  # another client address is not locked out
    response = other.post(
        "/api/login", json={"pin": PIN}, environ_base={"REMOTE_ADDR": "192.168.1.77"}
    )
    assert response.status_code == 200


def test_failures_count_per_ipv6_network(workspace):
    app = create_app(make_config(workspace), {"PIN": PIN})

    def login(address, pin="00000000"):
        return app.test_client().post(
            "/api/login", json={"pin": pin}, environ_base={"REMOTE_ADDR": address}
        )

    for n in range(5):  # five addresses of one /64 are one client
        assert login(f"2001:db8:1:2::{n + 1}").status_code == 401
    assert login("2001:db8:1:2::99", PIN).status_code == 429
    assert login("2001:db8:1:3::1", PIN).status_code == 200  # another network


def test_bearer_pin_works_for_scripts_and_wrong_bearers_count_as_failures(client):
    good = {"Authorization": f"Bearer {PIN}"}
    assert client.get("/api/sessions", headers=good).json == {"sessions": []}
    bad = {"Authorization": "Bearer 11111111"}
    for _ in range(5):
        assert client.get("/api/status", headers=bad).status_code == 401
    assert client.get("/api/status", headers=good).status_code == 429


def test_logout_ends_the_browser_session(signed_in):
    assert signed_in.post("/api/logout", json={}).status_code == 200
    assert signed_in.get("/api/status").status_code == 401


def test_the_pin_is_never_in_pages_urls_or_log_lines(client, caplog):
    caplog.set_level(logging.DEBUG)
    login_page = client.get("/")
    assert login_page.status_code == 200 and b'id="pin"' in login_page.data
    client.post("/api/login", json={"pin": "12345678"})
    client.post("/api/login", json={"pin": PIN})
    app_page = client.get("/")
    assert b'id="input"' in app_page.data
    for body in (login_page.data, app_page.data, client.get("/api/status").data):
        assert PIN.encode() not in body
    assert PIN not in caplog.text
    form = re.search(rb"<form[^>]*>", login_page.data).group(0)
    assert b'method="post"' in form  # even without script the PIN is posted, never in a URL


# --------------------------------------------------------------------------- request checks


def test_unknown_host_names_are_refused(workspace):
    app = create_app(make_config(workspace), {"PIN": PIN, "ALLOWED_HOSTS": ["192.168.1.20"]})
    assert app.test_client().get("/", base_url="http://attacker.example/").status_code == 400
    for host in ("localhost:7860", "127.0.0.1:7860", "192.168.1.20:7860", "[::1]:7860"):
        response = app.test_client().get("/", base_url=f"http://{host}/")
        assert response.status_code == 200, host


def test_state_changing_requests_from_another_origin_are_refused(signed_in):
    cases = [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ]
    for headers in cases:
        response = signed_in.post("/api/mode", json={"mode": "manual"}, headers=headers)
        assert response.status_code == 403, headers
    form = signed_in.post("/api/mode", data={"mode": "manual"})  # a cross-site form's body
    assert form.status_code == 415
    assert signed_in.get("/api/mode").json["mode"] == "auto"
    same = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}
    assert signed_in.post("/api/mode", json={"mode": "manual"}, headers=same).status_code == 200
    assert signed_in.get("/api/mode").json["mode"] == "manual"


class _ScriptFinder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inline, self.handlers, self.sources = [], [], []

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        self.handlers += [name for name in names if name.startswith("on")]
        if tag == "script":
            if names.get("src"):
                self.sources.append(names["src"])
            else:
                self.inline.append(tag)


def test_pages_send_a_strict_csp_and_hold_no_inline_script(client, signed_in):
    for page in (client.get("/"), signed_in.get("/")):
        csp = page.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
        assert "default-src 'none'" in csp and "base-uri 'none'" in csp
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        assert page.headers["X-Frame-Options"] == "DENY"
        finder = _ScriptFinder()
        finder.feed(page.data.decode())
        assert finder.inline == [] and finder.handlers == []
        assert all(src.startswith("/static/") for src in finder.sources)
    assert signed_in.get("/api/status").headers["Cache-Control"] == "no-store"


def test_static_files_are_served_without_a_cdn(client):
    page = client.get("/").data.decode()
    assert "http://" not in page and "https://" not in page
    scripts = ("js/app.js", "js/log.js", "vendor/marked.umd.js", "vendor/purify.min.js")
    for path in scripts:
        assert client.get(f"/static/{path}").status_code == 200, path
    assert (ROOT / "lmagent" / "web" / "static" / "vendor" / "marked.LICENSE.md").is_file()
    assert (ROOT / "lmagent" / "web" / "static" / "vendor" / "dompurify.LICENSE").is_file()


# --------------------------------------------------------------------------- files


@pytest.fixture
def tree(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print('hi')\n")
    (workspace / "page.html").write_text("<h1>hi</h1><script>parent.x=1</script>")
    (workspace / "pic.dat").write_bytes(PNG)
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    (workspace / "link-out").symlink_to(outside)
    (workspace / "secret-link.txt").symlink_to(outside / "secret.txt")
    return workspace


def test_file_listing_shows_one_level_and_marks_links_leading_outside(signed_in, tree):
    listing = signed_in.get("/api/files?path=.").json
    entries = {e["name"]: e["type"] for e in listing["entries"]}
    assert entries["src"] == "dir" and entries["page.html"] == "file"
    assert entries["link-out"] == "outside" and entries["secret-link.txt"] == "outside"
    assert listing["entries"][0]["type"] == "dir"
    sub = signed_in.get("/api/files?path=src").json
    assert [e["path"] for e in sub["entries"]] == ["src/main.py"]


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "/etc/passwd",
        "secret-link.txt",
        "link-out/secret.txt",
        "..%2Foutside%2Fsecret.txt",
        "src/\x00main.py",
    ],
)
def test_file_routes_refuse_everything_outside_the_workspace(signed_in, tree, path):
    for url in ("/api/file", "/api/files"):
        for raw in ("", "1"):
            response = signed_in.get(url, query_string={"path": path, "raw": raw})
            assert response.status_code in (403, 404), (url, path, response.status_code)
            assert b"top secret" not in response.data and b"root:" not in response.data


def test_file_previews_by_kind_and_html_is_served_sandboxed(signed_in, tree):
    text = signed_in.get("/api/file?path=src/main.py").json
    assert (text["kind"], text["content"]) == ("text", "print('hi')\n")
    assert signed_in.get("/api/file?path=page.html").json["kind"] == "html"
    assert signed_in.get("/api/file?path=pic.dat").json["kind"] == "image"
    assert signed_in.get("/api/file?path=blob.bin").json["kind"] == "binary"
    raw = signed_in.get("/api/file?path=page.html&raw=1")
    assert raw.mimetype == "text/html"
    csp = raw.headers["Content-Security-Policy"]
    assert csp.startswith("sandbox;") and "allow-scripts" not in csp and "script-src" not in csp
    assert "frame-ancestors 'self'" in csp and raw.headers["X-Content-Type-Options"] == "nosniff"
    image = signed_in.get("/api/file?path=pic.dat&raw=1")
    assert image.mimetype == "image/png" and image.data == PNG
    as_text = signed_in.get("/api/file?path=src/main.py&raw=1")
    assert as_text.mimetype == "text/plain"
    assert "sandbox" in as_text.headers["Content-Security-Policy"]


def test_upload_accepts_images_by_content_and_stores_them_under_uploads(signed_in, workspace):
    from io import BytesIO

    response = signed_in.post("/api/upload", data={"file": (BytesIO(PNG), "photo.txt")})
    assert response.status_code == 201
    saved = response.json["path"]
    assert saved.startswith("uploads/") and saved.endswith(".png")
    assert (workspace / saved).read_bytes() == PNG
    jpeg = signed_in.post("/api/upload", data={"file": (BytesIO(JPEG), "../../evil.png")})
    assert jpeg.status_code == 201 and jpeg.json["path"].endswith("-evil.jpg")
    fake = signed_in.post("/api/upload", data={"file": (BytesIO(b"<script>"), "x.png")})
    assert fake.status_code == 415
    big = signed_in.post("/api/upload", data={"file": (BytesIO(PNG + b"\x00" * 5000), "b.png")})
    assert big.status_code == 413
    assert sorted(p.suffix for p in (workspace / "uploads").iterdir()) == [".jpg", ".png"]


def test_upload_refuses_an_uploads_link_leading_outside(signed_in, workspace, tmp_path):
    from io import BytesIO

    (tmp_path / "elsewhere").mkdir()
    (workspace / "uploads").symlink_to(tmp_path / "elsewhere")
    response = signed_in.post("/api/upload", data={"file": (BytesIO(PNG), "a.png")})
    assert response.status_code == 403
    assert list((tmp_path / "elsewhere").iterdir()) == []


# --------------------------------------------------------------------------- sessions


def test_sessions_are_listed_and_unknown_ids_are_404(signed_in, workspace):
    from lmagent.sessions.store import SessionStore

    session = SessionStore(workspace).create("an old task", source="cli")
    session.append({"role": "user", "content": "an old task"})
    session.close()
    listed = signed_in.get("/api/sessions").json["sessions"]
    assert [(s["id"], s["task"]) for s in listed] == [(session.id, "an old task")]
    detail = signed_in.get(f"/api/sessions/{session.id}").json
    assert detail["transcript"] == [{"role": "user", "content": "an old task"}]
    assert signed_in.get("/api/sessions/nope").status_code == 404
    unknown = signed_in.post("/api/chat", json={"message": "x", "session_id": "nope"})
    assert unknown.status_code == 404


# --------------------------------------------------------------------------- entry point


def test_lan_address_is_a_real_interface_address_never_127_0_1_1():
    found = outgoing_address()
    if found is not None:
        assert not found.startswith("127.") and found in interface_addresses()
    primary = announce("0.0.0.0").primary
    assert primary != "127.0.1.1"
    assert announce("192.168.5.5").primary == "192.168.5.5"


def test_the_machine_is_reachable_by_its_own_names_but_not_by_others(workspace):
    """http://box:7860/ and http://box.local:7860/ work on the LAN; any other name (a
    DNS-rebinding page's) is still refused."""
    short = socket.gethostname().lower().split(".")[0]
    allowed = announce("0.0.0.0").allowed
    assert {short, f"{short}.local"} <= set(allowed)
    app = create_app(make_config(workspace), {"PIN": PIN, "ALLOWED_HOSTS": allowed})
    for host in (f"{short}:7860", f"{short.upper()}.local:7860"):
        assert app.test_client().get("/", base_url=f"http://{host}/").status_code == 200, host
    for host in (f"{short}.attacker.example", f"{short}.local.attacker.example", "local"):
        assert app.test_client().get("/", base_url=f"http://{host}/").status_code == 400, host


def test_agent_web_py_prints_url_port_and_pin_and_serves_until_sigterm(workspace, llm):
    port = free_port()
    env = {
        **os.environ,
        "WORKSPACE": str(workspace),
        "LLM_URL": llm.url,
        "ENABLE_MCP": "false",
        "SANDBOX_BACKEND": "process",
        "AGENT_TOKEN": "",
    }
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "agent_web.py"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=workspace,
    )
    try:
        banner = []
        for line in process.stdout:
            banner.append(line)
            if line.startswith("Press Ctrl+C"):
                break
        text = "".join(banner)
        assert f"http://127.0.0.1:{port}/" in text and f"Port: {port}" in text, text
        pin = re.search(r"PIN:\s+(\d{10})", text).group(1)
        base = f"http://127.0.0.1:{port}"
        assert requests.get(base + "/api/status", timeout=5).status_code == 401
        status = requests.get(
            base + "/api/status", headers={"Authorization": f"Bearer {pin}"}, timeout=5
        )
        assert status.status_code == 200 and status.headers["Server"] == "LMAgent"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert Path(workspace / ".lmagent").is_dir()
