"""Serving the web UI: the addresses it announces and a threaded production server (waitress).

Each open page holds one server thread for its event stream, so the pool is sized for the
stream limit plus headroom for ordinary requests (events.EventHub closes the oldest stream
past its limit, so extra tabs cannot starve the API).

Connections are a resource LAN neighbours could exhaust, so `ConnectionLimits` bounds them: one
client (an IPv4 address or an IPv6 /64, as for sign-in failures) may hold `per_client`
connections and further ones are refused with 503; past `total`, the longest-idle connection of
the client holding the most idle ones is closed to make room, so a crowd of addresses cannot
shut anyone else out; a connection waiting for a request is closed after `idle_timeout`, and one
whose request headers do not arrive within `header_timeout` (slowloris) as well. A connection
serving a request (an event stream, a download) is never closed by these rules.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from lmagent.web.auth import client_key

WILDCARD_HOSTS = ("", "0.0.0.0", "::")
SERVER_THREADS = 24
MAX_STREAMS = 16


@dataclass
class Addresses:
    """What main() prints and what the Host check accepts."""

    primary: str  # the address a phone on the LAN should use
    others: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # this machine's own names

    @property
    def allowed(self) -> list[str]:
        return [self.primary, *self.others, *self.names]


def machine_names() -> list[str]:
    """This machine's own names, e.g. `box` and its mDNS name `box.local`. A browser on the LAN
    may use them; a DNS-rebinding page cannot, since it controls neither name."""
    name = socket.gethostname().strip().lower().rstrip(".")
    if not name or name.startswith("localhost"):
        return []
    short = name.split(".")[0]
    return list(dict.fromkeys([name, short, f"{short}.local"]))


def outgoing_address() -> str | None:
    """The address of the interface that carries traffic off this machine.

    Connecting a UDP socket sends nothing; it only makes the kernel choose the route (here to a
    documentation-only address, so nothing is ever contacted). Loopback answers (127.0.1.1 from
    /etc/hosts, for instance) are never returned.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return address if _usable(address) else None


VIRTUAL_PREFIXES = ("docker", "br-", "veth", "virbr", "lxc", "cni", "flannel", "tun", "tap")


def interface_addresses() -> list[str]:
    """Every non-loopback, non-link-local address of the interfaces that are up: IPv4 first,
    physical-looking interfaces before container bridges and tunnels."""
    try:
        import psutil

        stats = psutil.net_if_stats()
        found = []
        for name, addrs in psutil.net_if_addrs().items():
            if name in stats and not stats[name].isup:
                continue
            virtual = name.startswith(VIRTUAL_PREFIXES)
            for a in addrs:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    found.append((virtual, a.family != socket.AF_INET, a.address.split("%")[0]))
    except Exception:
        return []
    found.sort(key=lambda item: item[:2])
    return [a for a in dict.fromkeys(address for *_, address in found) if _usable(a)]


def _usable(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def announce(host: str) -> Addresses:
    """The addresses to print for a server bound to `host`."""
    if host not in WILDCARD_HOSTS:
        return Addresses(host)
    others = interface_addresses()
    primary = outgoing_address() or (others[0] if others else "127.0.0.1")
    return Addresses(primary, [a for a in others if a != primary], machine_names())


def url(address: str, port: int) -> str:
    shown = f"[{address}]" if ":" in address else address
    return f"http://{shown}:{port}/"


# --------------------------------------------------------------------------- memory
# A long-lived server whose runs allocate and free a lot in bursts, from many threads: with
# glibc each thread may get its own malloc arena, and freed memory stays mapped in all of them,
# so RSS would creep up run after run. Few arenas, and handing free pages back after each run,
# keep it flat (bench/bench_web.py measures it). Both are no-ops without glibc.
M_ARENA_MAX = -8


def _glibc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


_LIBC = _glibc()


def limit_malloc_arenas(count: int = 2) -> None:
    """Call at start-up, before threads exist."""
    if _LIBC is not None:
        _LIBC.mallopt(M_ARENA_MAX, count)


def trim_memory() -> None:
    """Give freed heap pages back to the system (after a run)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


# --------------------------------------------------------------------------- connections


@dataclass(frozen=True)
class ConnectionLimits:
    """How much of the server one client may hold, and for how long."""

    per_client: int = 2 * MAX_STREAMS  # one client: every event stream, as many for requests
    total: int = 256  # past this, the busiest client's longest-idle connection makes room
    idle_timeout: int = 30  # seconds a connection may wait for its next request
    header_timeout: int = 10  # seconds from a request's first byte to the end of its headers
    check_interval: int = 2  # seconds between sweeps for idle and slow connections


REFUSAL_TEXT = b"too many connections from your address; close some and try again\n"
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(REFUSAL_TEXT), REFUSAL_TEXT)
)


class GuardedChannel(HTTPChannel):
    """A waitress connection that knows its client and when its unfinished request began."""

    def __init__(self, server, sock, addr, adj, map=None):
        self.client = client_key(addr[0])
        self.request_started = time.time()
        super().__init__(server, sock, addr, adj, map=map)

    def received(self, data):
        pending = self.request
        result = super().received(data)
        if self.request is not None and self.request is not pending:
            self.request_started = time.time()  # the first bytes of a new request
        return result

    def idle(self) -> bool:
        """Nothing being served or sent: closing it loses no response."""
        return not (self.requests or self.total_outbufs_len or self.will_close)

    def headers_late(self, cutoff: float) -> bool:
        return (
            self.request is not None
            and not self.request.headers_finished
            and self.request_started < cutoff
        )


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with the limits of `ConnectionLimits` (module docstring)."""

    channel_class = GuardedChannel

    def __init__(self, application, limits: ConnectionLimits, adj: Adjustments):
        self.limits = limits
        super().__init__(application, adj=adj, sockinfo=adj.listen[0])

    def accept(self):
        accepted = super().accept()
        if accepted is not None and not self._admit(client_key(accepted[1][0])):
            _refuse(accepted[0])
            return None
        return accepted

    def _admit(self, client: str) -> bool:
        channels = list(self.active_channels.values())
        if sum(channel.client == client for channel in channels) >= self.limits.per_client:
            return False
        return len(channels) < self.limits.total or _make_room(channels)

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # closes connections idle for longer than channel_timeout
        cutoff = now - self.limits.header_timeout
        for channel in list(self.active_channels.values()):
            if channel.headers_late(cutoff):
                channel.will_close = True


def _make_room(channels: list[GuardedChannel]) -> bool:
    """Close the longest-idle connection of the client holding the most idle ones."""
    idle = [channel for channel in channels if channel.idle()]
    if not idle:
        return False
    busiest = Counter(channel.client for channel in idle).most_common(1)[0][0]
    oldest = min((c for c in idle if c.client == busiest), key=lambda c: c.last_activity)
    oldest.handle_close()
    return True


def _refuse(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(REFUSAL)
    conn.close()


class WebServer:
    """waitress serving a WSGI app; run() in the foreground or start() in a thread."""

    def __init__(
        self,
        app,
        host: str,
        port: int,
        threads: int = SERVER_THREADS,
        limits: ConnectionLimits = ConnectionLimits(),
    ):
        self.app = app
        adj = Adjustments(
            host=host or "0.0.0.0",
            port=port,
            threads=threads,
            ident="LMAgent",
            channel_request_lookahead=1,  # lets a stream notice a closed tab
            clear_untrusted_proxy_headers=True,
            expose_tracebacks=False,
            asyncore_use_poll=True,  # select() fails past 1024 descriptors
            channel_timeout=limits.idle_timeout,
            cleanup_interval=limits.check_interval,
            connection_limit=limits.total + 16,  # waitress's own brake, never reached
        )
        self.server = GuardedServer(app, limits, adj)
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self.server.effective_port)

    @property
    def host(self) -> str:
        return str(self.server.effective_host)

    def run(self) -> None:
        try:
            self.server.run()
        finally:
            self._stopped.set()

    def start(self) -> WebServer:
        self._thread = threading.Thread(target=self.run, name="web-server", daemon=True)
        self._thread.start()
        return self

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the app's run and streams, finish the workers, then close every socket."""
        state = getattr(self.app, "extensions", {}).get("lmagent")
        if state is not None:
            state.shutdown()
        self.server.task_dispatcher.shutdown(timeout=timeout)
        if self._thread is not None and self._thread.is_alive():
            from waitress import wasyncore

            # Close the sockets from inside the server's own loop thread. If the loop was awake
            # already it may run the thunk (closing the trigger) before our write: that is fine.
            with contextlib.suppress(OSError):
                self.server.trigger.pull_trigger(lambda: wasyncore.close_all(self.server._map))
            self._thread.join(timeout)
        else:
            with contextlib.suppress(Exception):
                from waitress import wasyncore

                wasyncore.close_all(self.server._map)
