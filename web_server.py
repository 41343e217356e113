"""Serving the web UI: the addresses it announces and a threaded production server (waitress).

Each open page holds one server thread for its event stream, so the pool is sized for the
stream limit plus headroom for ordinary requests (web_events.EventHub closes the oldest stream
past its limit, so extra tabs cannot starve the API).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import socket
import threading
from dataclasses import dataclass, field

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


class WebServer:
    """waitress serving a WSGI app; run() in the foreground or start() in a thread."""

    def __init__(self, app, host: str, port: int, threads: int = SERVER_THREADS):
        import waitress

        self.app = app
        self.server = waitress.create_server(
            app,
            host=host or "0.0.0.0",
            port=port,
            threads=threads,
            ident="LMAgent",
            channel_request_lookahead=1,  # lets a stream notice a closed tab
            clear_untrusted_proxy_headers=True,
            expose_tracebacks=False,
        )
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
