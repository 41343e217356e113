"""Sign-in and request checks for the web UI (a LAN is not a trusted network).

- The PIN is compared in constant time. A client (an IPv4 address, or an IPv6 /64 network) that
  fails 5 times within 15 minutes gets 429 for 15 minutes; each further lockout without a
  successful sign-in in between lasts twice as long, up to a day. Wrong Bearer tokens count as
  failures too. Nothing locks out everyone: failures from a crowd of addresses never stop another
  client (the owner) with the right PIN. Guessing stays hopeless through the PIN's length: 10
  random digits (10^10, 33 bits) against 35 guesses per address on the first day and 5 a day
  after that, about 1,850 a year; even a whole /24 of 254 addresses gets about 470,000 guesses a
  year, a chance of 1 in 21,000 (without the doubling it would be 480 a day per address).
- A successful sign-in creates a random session token sent as an HttpOnly, SameSite=Strict
  cookie that expires after a week; the PIN itself never leaves the login request body. The
  server keeps only a hash of each token and its expiry, in the workspace
  (`.lmagent/web_sessions.json`, readable by the owner only), so sign-ins survive a restart;
  "sign out everywhere" empties it.
- The Host header must name an address the server announced (DNS rebinding), and a request that
  changes state must come from the page's own origin.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from lmagent.core.files import atomic_write

COOKIE = "lmagent_session"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

APP_CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "frame-src 'self'",
        "font-src 'self'",
        "manifest-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types dompurify",
    ]
)
# Workspace files shown raw (HTML previews): an opaque origin without script, framed only by us.
PREVIEW_CSP = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; media-src data:; form-action 'none'; frame-ancestors 'self'"
)


def new_pin(digits: int = 10) -> str:
    """A random numeric PIN (easy to type on a phone)."""
    return "".join(secrets.choice("0123456789") for _ in range(digits))


def host_name(host_header: str) -> str:
    """The host part of a Host header, lower-case, without port or IPv6 brackets."""
    host = (host_header or "").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def client_key(address: str) -> str:
    """Who a failed sign-in is counted against: the IPv4 address, or the IPv6 /64 network
    (one machine can pick any address in its /64)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass
class Failures:
    """One client's failed sign-ins."""

    recent: list[float] = field(default_factory=list)  # failures since its last lockout
    lockout: float = 0.0  # length of its last lockout: doubles until a sign-in succeeds
    locked_until: float = 0.0
    last: float = 0.0  # its last failure

    def quiet_since(self) -> float:
        return max(self.last, self.locked_until)


class Guard:
    """PIN check, failure limits, browser sessions, Host and Origin checks."""

    def __init__(
        self,
        pin: str,
        allowed_hosts: list[str] | tuple[str, ...] = (),
        *,
        max_failures: int = 5,
        window: float = 15 * 60,
        max_lockout: float = 24 * 3600,
        forget_after: float = 7 * 24 * 3600,
        max_clients: int = 10_000,
        session_ttl: float = 7 * 24 * 3600,
        max_sessions: int = 256,
        clock: Callable[[], float] = time.monotonic,
        sessions_file: Path | None = None,
        wall_clock: Callable[[], float] = time.time,
    ):
        if not pin:
            raise ValueError("the PIN must not be empty")
        self._pin = pin.encode("utf-8")
        self.allowed_hosts = {host_name(h) for h in (*allowed_hosts, *LOCAL_HOSTS) if h}
        self.max_failures = max_failures
        self.window = window
        self.max_lockout = max_lockout
        self.forget_after = forget_after  # a client quiet this long starts afresh
        self.max_clients = max_clients
        self.session_ttl = session_ttl
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, Failures] = {}
        self._wall_clock = wall_clock
        self.sessions_file = sessions_file
        self._sessions = SessionFile(sessions_file).load(wall_clock())  # token hash -> expiry

    # ------------------------------------------------------------------ PIN and failures

    def pin_matches(self, candidate: object) -> bool:
        if not isinstance(candidate, str):
            return False
        return hmac.compare_digest(candidate.strip().encode("utf-8"), self._pin)

    def retry_after(self, client: str) -> int:
        """Seconds until `client` may try again; 0 when it is not locked out."""
        with self._lock:
            record = self._failures.get(client_key(client))
            wait = record.locked_until - self._clock() if record else 0.0
        return math.ceil(wait) if wait > 0 else 0

    def record_failure(self, client: str) -> None:
        """Count a failure; the `max_failures`-th within `window` locks the client out."""
        now = self._clock()
        with self._lock:
            key = client_key(client)
            record = self._failures.get(key)
            if record is None or record.quiet_since() < now - self.forget_after:
                record = self._failures[key] = Failures()
            record.recent = [t for t in record.recent if t > now - self.window] + [now]
            record.last = now
            if len(record.recent) >= self.max_failures:
                record.lockout = (
                    min(2 * record.lockout, self.max_lockout) if record.lockout else self.window
                )
                record.locked_until = now + record.lockout
                record.recent = []
            self._bound(now)

    def clear_failures(self, client: str) -> None:
        """A successful sign-in: the client starts afresh."""
        with self._lock:
            self._failures.pop(client_key(client), None)

    def _bound(self, now: float) -> None:
        """Keep memory bounded: forget quiet clients, then (past `max_clients` addresses) the
        ones quiet the longest; a client still locked out is the last to go."""
        if len(self._failures) <= self.max_clients:
            return
        quiet = now - self.forget_after
        for key in [k for k, r in self._failures.items() if r.quiet_since() < quiet]:
            del self._failures[key]
        excess = len(self._failures) - self.max_clients
        for key in sorted(self._failures, key=lambda k: self._failures[k].quiet_since())[:excess]:
            del self._failures[key]

    # ------------------------------------------------------------------ browser sessions

    def new_session(self) -> str:
        token = secrets.token_urlsafe(32)
        now = self._wall_clock()
        with self._lock:
            for key in [k for k, expiry in self._sessions.items() if expiry <= now]:
                del self._sessions[key]
            while len(self._sessions) >= self.max_sessions:
                del self._sessions[next(iter(self._sessions))]  # the oldest sign-in
            self._sessions[_digest(token)] = now + self.session_ttl
            self._save()
        return token

    def session_valid(self, token: str | None) -> bool:
        if not token:
            return False
        with self._lock:
            expiry = self._sessions.get(_digest(token))
            if expiry is None:
                return False
            if expiry <= self._wall_clock():
                del self._sessions[_digest(token)]
                return False
            return True

    def end_session(self, token: str | None) -> None:
        with self._lock:
            if self._sessions.pop(_digest(token or ""), None) is not None:
                self._save()

    def end_all_sessions(self) -> None:
        """Sign every device out."""
        with self._lock:
            self._sessions.clear()
            self._save()

    def _save(self) -> None:
        SessionFile(self.sessions_file).save(self._sessions)

    # ------------------------------------------------------------------ requests

    @staticmethod
    def bearer_token(authorization: str | None) -> str | None:
        """The token of an `Authorization: Bearer <PIN>` header, or None."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        return token if scheme.lower() == "bearer" and token else None

    def host_allowed(self, host_header: str) -> bool:
        return host_name(host_header) in self.allowed_hosts

    @staticmethod
    def same_origin(method: str, host_header: str, origin: str | None, fetch_site: str | None):
        """A state-changing request must come from the page itself (or from a script that
        sends no Origin at all, which a browser never does for a cross-origin request)."""
        if method.upper() in SAFE_METHODS:
            return True
        if fetch_site and fetch_site.lower() not in ("same-origin", "none"):
            return False
        if origin is None:
            return True
        parts = urlsplit(origin.strip())
        return parts.scheme in ("http", "https") and (
            parts.netloc.lower() == (host_header or "").strip().lower()
        )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class SessionFile:
    """Where the sign-ins are kept across restarts: {token hash: expiry (epoch seconds)}.
    No file (None) keeps them in memory only; a damaged file signs everyone out, nothing worse."""

    def __init__(self, path: Path | None):
        self.path = path

    def load(self, now: float) -> dict[str, float]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            key: float(expiry)
            for key, expiry in data.items()
            if isinstance(key, str) and isinstance(expiry, (int, float)) and expiry > now
        }

    def save(self, sessions: dict[str, float]) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError):  # a read-only workspace: sign-ins last this run
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(sessions), durable=False)
            os.chmod(self.path, 0o600)
