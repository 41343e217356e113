"""A LAN neighbour can neither exhaust the web server's connections nor lock the owner out.

The real app on the real server (waitress) listens on 127.0.0.1; clients connect from other
loopback addresses (all of 127.0.0.0/8 is this machine), each standing for another computer.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import time

import pytest
import requests

from lmagent.web.app import create_app
from lmagent.web.auth import Guard, new_pin
from lmagent.web.server import ConnectionLimits, WebServer
from tests.conftest import make_config
from tests.test_web_support import EventReader

PIN = "2468135790"
OWNER = "127.0.0.200"
BEARER = {"Authorization": f"Bearer {PIN}"}


@pytest.fixture
def serve(workspace):
    """start(limits, **app_config) -> a running WebServer; every one is shut down afterwards."""
    servers = []

    def start(limits: ConnectionLimits | None = None, **app_config) -> WebServer:
        app = create_app(make_config(workspace), {"PIN": PIN, **app_config})
        limits = limits or ConnectionLimits()
        servers.append(WebServer(app, "127.0.0.1", 0, limits=limits).start())
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()


def connect(server: WebServer, source: str) -> socket.socket:
    """An idle TCP connection from `source`."""
    return socket.create_connection(("127.0.0.1", server.port), 5, source_address=(source, 0))


def call(server: WebServer, source: str, method: str, path: str, *, pin=None, headers=None):
    """One request over a new connection from `source`: (status, headers, seconds taken)."""
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, 5, source_address=(source, 0))
    body, sent = None, dict(headers or {})
    if pin is not None:
        body, sent["Content-Type"] = json.dumps({"pin": pin}), "application/json"
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        response.read()
        return response.status, response.headers, time.monotonic() - began
    finally:
        conn.close()


def readable(sockets: list[socket.socket], timeout: float) -> list[socket.socket]:
    """The sockets with data or an end of file to read (poll: any descriptor number)."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(timeout * 1000)}
    return [sock for sock in sockets if sock.fileno() in ready]


def wait_closed(sockets: list[socket.socket], timeout: float) -> list[tuple[bytes, float]]:
    """Read every socket until the server closes it: what each received and when it closed
    (seconds from now)."""
    began = time.monotonic()
    received = {sock: b"" for sock in sockets}
    closed: dict[socket.socket, float] = {}
    while len(closed) < len(sockets):
        waiting = [sock for sock in sockets if sock not in closed]
        left = began + timeout - time.monotonic()
        assert left > 0, f"{len(waiting)} of {len(sockets)} connections still open"
        for sock in readable(waiting, left):
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            received[sock] += data
            if not data:
                closed[sock] = time.monotonic() - began
    return [(received[sock], closed[sock]) for sock in sockets]


def still_open(sockets: list[socket.socket]) -> list[socket.socket]:
    """The sockets the server has not closed (nothing readable: no data, no end of file)."""
    ended = readable(sockets, 0)
    return [sock for sock in sockets if sock not in ended]


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


# --------------------------------------------------------------------------- connections


def test_idle_connections_from_one_client_neither_block_others_nor_stay_open(serve):
    limits = ConnectionLimits(idle_timeout=1, check_interval=1)
    server = serve(limits)
    idle = [connect(server, "127.0.0.1") for _ in range(101)]
    try:
        status, _, took = call(server, "127.0.0.2", "GET", "/api/status", headers=BEARER)
        assert status == 200 and took < 2
        outcome = wait_closed(idle, timeout=10)
    finally:
        close_all(idle)
    refused = [seconds for data, seconds in outcome if data.startswith(b"HTTP/1.1 503")]
    timed_out = [seconds for data, seconds in outcome if data == b""]
    assert len(refused) == 101 - limits.per_client
    assert b"too many connections from your address" in outcome[-1][0]
    assert len(timed_out) == limits.per_client
    assert min(timed_out) > 0.9 and max(timed_out) < 5  # after the idle timeout, not at once


def test_a_quiet_event_stream_outlives_the_idle_timeout(serve):
    server = serve(ConnectionLimits(idle_timeout=1, check_interval=1), SSE_HEARTBEAT=60)
    base = f"http://127.0.0.1:{server.port}"
    http = requests.Session()
    assert http.post(base + "/api/login", json={"pin": PIN}, timeout=5).status_code == 200
    reader = EventReader(http, base + "/api/stream")
    idle = connect(server, "127.0.0.2")
    try:
        [(_, seconds)] = wait_closed([idle], timeout=10)
        assert seconds > 0.9
        server.app.extensions["lmagent"].hub.publish({"type": "status", "message": "still here"})
        assert reader.wait_type("status", message="still here", timeout=5)
    finally:
        idle.close()
        reader.close()
        http.close()


def test_slowloris_headers_are_cut_off_without_blocking_others(serve):
    limits = ConnectionLimits(header_timeout=1, idle_timeout=30, check_interval=1)
    server = serve(limits)
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
    drips = [connect(server, "127.0.0.1") for _ in range(limits.per_client)]
    began, closed, sent = time.monotonic(), {}, 0
    try:
        while len(closed) < len(drips) and time.monotonic() - began < 10:
            for sock in [s for s in drips if s not in closed]:
                try:
                    sock.send(request[sent : sent + 1])  # one byte at a time, every 0.2 s
                except OSError:
                    closed[sock] = time.monotonic() - began
            sent += 1
            if sent == 2:
                status, _, took = call(server, "127.0.0.2", "GET", "/api/status", headers=BEARER)
                assert status == 200 and took < 2
            for sock in readable([s for s in drips if s not in closed], 0.2):
                try:
                    if sock.recv(4096) == b"":
                        closed[sock] = time.monotonic() - began
                except ConnectionResetError:
                    closed[sock] = time.monotonic() - began
    finally:
        close_all(drips)
    assert len(closed) == limits.per_client, f"{len(drips) - len(closed)} still open"
    assert min(closed.values()) > 0.9 and max(closed.values()) < 5  # header, not idle, timeout
    assert sent < len(request)  # they were still sending when cut off


def test_a_crowd_of_addresses_cannot_crowd_out_the_owner_or_its_stream(serve):
    limits = ConnectionLimits(per_client=4, total=40, idle_timeout=30, check_interval=1)
    server = serve(limits, SSE_HEARTBEAT=60)
    base = f"http://127.0.0.1:{server.port}"
    http = requests.Session()  # the owner, on 127.0.0.1: its sign-in connection stays open
    assert http.post(base + "/api/login", json={"pin": PIN}, timeout=5).status_code == 200
    reader = EventReader(http, base + "/api/stream")
    crowd = [connect(server, f"127.0.0.{n}") for n in range(2, 22) for _ in range(4)]
    try:
        status, _, took = call(server, "127.0.0.1", "GET", "/api/status", headers=BEARER)
        assert status == 200 and took < 2
        # the server holds `total`: the owner's stream, sign-in and request, and the rest
        assert len(still_open(crowd)) == limits.total - 3
        server.app.extensions["lmagent"].hub.publish({"type": "status", "message": "still here"})
        assert reader.wait_type("status", message="still here", timeout=5)
    finally:
        close_all(crowd)
        reader.close()
        http.close()


# --------------------------------------------------------------------------- sign-in


def test_twenty_failing_addresses_lock_out_only_themselves(serve):
    server = serve()
    wrong = {"pin": "0000000000", "headers": {"X-Forwarded-For": OWNER}}  # cannot blame the owner
    crowd = [f"127.0.0.{n}" for n in range(1, 21)]
    for address in crowd:
        for _ in range(5):
            status, _, _ = call(server, address, "POST", "/api/login", **wrong)
            assert status == 401
    for address in crowd:
        status, headers, _ = call(server, address, "POST", "/api/login", pin=PIN)
        assert status == 429 and int(headers["Retry-After"]) > 800
        status, _, _ = call(server, address, "GET", "/api/status", headers=BEARER)
        assert status == 429
    status, headers, _ = call(server, OWNER, "POST", "/api/login", pin=PIN)
    assert status == 200 and "lmagent_session=" in headers["Set-Cookie"]
    assert call(server, OWNER, "GET", "/api/status", headers=BEARER)[0] == 200
    assert call(server, "127.0.0.201", "GET", "/api/status", headers=BEARER)[0] == 200


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fail(guard: Guard, client: str, times: int = 5) -> None:
    for _ in range(times):
        assert guard.retry_after(client) == 0
        guard.record_failure(client)


def test_lockouts_double_up_to_a_day_and_a_successful_sign_in_starts_afresh():
    clock = Clock()
    guard = Guard(PIN, clock=clock)
    seen = []
    for _ in range(9):
        fail(guard, "192.168.1.9")
        seen.append(guard.retry_after("192.168.1.9"))
        clock.now += seen[-1]
    assert seen == [900, 1800, 3600, 7200, 14400, 28800, 57600, 86400, 86400]
    assert guard.retry_after("192.168.1.10") == 0  # nobody else
    guard.clear_failures("192.168.1.9")
    fail(guard, "192.168.1.9")
    assert guard.retry_after("192.168.1.9") == 900


def test_failures_must_fall_within_the_window_and_a_quiet_week_starts_afresh():
    clock = Clock()
    guard = Guard(PIN, clock=clock)
    fail(guard, "192.168.1.9", 4)
    clock.now += 901
    fail(guard, "192.168.1.9", 4)  # 8 failures, never 5 within 15 minutes
    fail(guard, "192.168.1.9", 1)
    assert guard.retry_after("192.168.1.9") == 900
    clock.now += 900
    fail(guard, "192.168.1.9")
    assert guard.retry_after("192.168.1.9") == 1800
    clock.now += 1800 + 7 * 24 * 3600 + 1
    fail(guard, "192.168.1.9")
    assert guard.retry_after("192.168.1.9") == 900


def test_many_addresses_cannot_flush_a_lockout_out_of_bounded_memory():
    clock = Clock()
    guard = Guard(PIN, max_clients=10, clock=clock)
    fail(guard, "192.168.1.9")
    for n in range(50):
        clock.now += 1
        guard.record_failure(f"10.0.{n}.1")
    assert guard.retry_after("192.168.1.9") == 900 - 50


def test_the_generated_pin_has_ten_random_digits():
    pins = {new_pin() for _ in range(20)}
    assert len(pins) == 20 and all(len(pin) == 10 and pin.isdigit() for pin in pins)
