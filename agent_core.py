"""Core of LMAgent: configuration, the workspace boundary, atomic files, stopping, compaction,
loop detection and the permission gate (sessions are in agent_sessions).

Everything here is front-end neutral and imports nothing from the other agent modules.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import dotenv_values

from workspace import PathError, Workspace  # noqa: F401 - the boundary, re-exported

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

VERSION = "0.1.0"
SCRIPT_DIR = Path(__file__).resolve().parent

STATUS_RUNNING = "running"
STATUS_COMPLETED = "completed"
STATUS_BLOCKED = "blocked"
STATUS_WAITING = "waiting"
STATUS_INTERRUPTED = "interrupted"
STATUS_ERROR = "error"
STATUS_MAX_ITERATIONS = "max_iterations"
FINAL_STATUSES = (
    STATUS_COMPLETED,
    STATUS_BLOCKED,
    STATUS_WAITING,
    STATUS_INTERRUPTED,
    STATUS_ERROR,
    STATUS_MAX_ITERATIONS,
)


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the variable and what is allowed."""


# --------------------------------------------------------------------------- configuration


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r} is not valid; allowed: true, false")


def _parse_number(kind: type, low: float | None = None, high: float | None = None):
    noun = "a whole number" if kind is int else "a number"
    if high is not None:
        allowed = f"{noun} from {low} to {high}"
    else:
        allowed = f"{noun} of at least {low}" if low is not None else noun

    def parse(name: str, raw: str):
        try:
            value = kind(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not valid; allowed: {allowed}") from None
        if not math.isfinite(value):
            raise ConfigError(f"{name}={raw!r} is not a finite number; allowed: {allowed}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ConfigError(f"{name}={raw!r} is out of range; allowed: {allowed}")
        return value

    return parse


def _parse_choice(*choices: str):
    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(f"{name}={raw!r} is not valid; allowed: {', '.join(choices)}")
        return value

    return parse


def _parse_str(name: str, raw: str) -> str:
    return raw.strip()


def _parse_path(name: str, raw: str) -> Path:
    if not raw.strip():
        raise ConfigError(f"{name} is empty; set it to a directory path")
    try:
        return Path(raw.strip()).expanduser().resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop, no $HOME
        raise ConfigError(f"{name}={raw!r} is not a usable directory path ({exc})") from None


def _parse_url(name: str, raw: str) -> str:
    """An http(s) URL with a host (and a valid port, if any), or "embedded"."""
    value = raw.strip()
    allowed = "an http:// or https:// URL such as http://localhost:1234/v1/chat/completions"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not valid ({exc}); allowed: {allowed}") from None
    if value != "embedded" and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise ConfigError(f"{name}={raw!r} is not valid; allowed: {allowed}")
    return value


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _parse_host(name: str, raw: str) -> str:
    """An IP address or a host name (not looked up here: that is the web server's job)."""
    value = raw.strip()
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(value))
    labels = value.removesuffix(".").split(".")
    named = all(_HOST_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdigit()
    if len(value) > 253 or not named:
        raise ConfigError(
            f"{name}={raw!r} is not valid; allowed: an IP address (0.0.0.0 for every interface, "
            "127.0.0.1 for this machine only, ::) or a host name"
        )
    return value


def _setting(env: str, parse, default: str, doc: str):
    return field(
        default=None, metadata={"env": env, "parse": parse, "default": default, "doc": doc}
    )


@dataclass(frozen=True)
class Config:
    """Settings resolved once at start-up (defaults → .env files → environment → flags)."""

    workspace: Path = _setting(
        "WORKSPACE", _parse_path, "~/lm_workspace", "the only directory the agent may touch"
    )
    llm_url: str = _setting(
        "LLM_URL",
        _parse_url,
        "http://localhost:1234/v1/chat/completions",
        "OpenAI-compatible chat completions endpoint",
    )
    llm_api_key: str = _setting("LLM_API_KEY", _parse_str, "lm-studio", "bearer token for the LLM")
    llm_model: str = _setting("LLM_MODEL", _parse_str, "", "model id; blank = the loaded model")
    llm_temperature: float = _setting(
        "LLM_TEMPERATURE", _parse_number(float, 0, 2), "0.65", "sampling temperature"
    )
    llm_timeout: float = _setting(
        "LLM_TIMEOUT", _parse_number(float, 1), "560", "seconds to wait for the LLM"
    )
    llm_retries: int = _setting(
        "LLM_RETRIES", _parse_number(int, 0, 50), "4", "retries for refused connections and 5xx"
    )
    llm_retry_delay: float = _setting(
        "LLM_RETRY_DELAY", _parse_number(float, 0), "0.5", "first back-off delay in seconds"
    )
    permission_mode: str = _setting(
        "PERMISSION_MODE", _parse_choice("auto", "normal", "manual"), "normal", "auto/normal/manual"
    )
    max_iterations: int = _setting(
        "MAX_ITERATIONS", _parse_number(int, 1), "500", "loop iterations per run"
    )
    thinking_model: bool = _setting(
        "THINKING_MODEL", _parse_bool, "true", "strip <think> blocks from the context"
    )
    enable_sub_agents: bool = _setting(
        "ENABLE_SUB_AGENTS", _parse_bool, "true", "offer delegate/decompose"
    )
    agent_max_depth: int = _setting(
        "AGENT_MAX_DEPTH", _parse_number(int, 0, 10), "3", "maximum sub-agent depth"
    )
    sub_agent_concurrency: int = _setting(
        "SUB_AGENT_CONCURRENCY", _parse_number(int, 1, 8), "2", "sub-agents run at once"
    )
    sub_agent_max_iterations: int = _setting(
        "SUB_AGENT_MAX_ITERATIONS", _parse_number(int, 1), "50", "loop iterations per sub-agent"
    )
    sub_agent_time_budget: float = _setting(
        "SUB_AGENT_TIME_BUDGET", _parse_number(float, 1), "3600", "wall-clock seconds per sub-agent"
    )
    agent_dir_retention_days: float = _setting(
        "AGENT_DIR_RETENTION_DAYS",
        _parse_number(float, 0),
        "0",
        "delete finished sub-agent directories older than this many days (0 = keep)",
    )
    shell_workspace_only: bool = _setting(
        "SHELL_WORKSPACE_ONLY", _parse_bool, "true", "refuse commands naming outside paths"
    )
    vision_enabled: str = _setting(
        "VISION_ENABLED", _parse_choice("auto", "true", "false"), "auto", "auto/true/false"
    )
    summarization_threshold: int = _setting(
        "SUMMARIZATION_THRESHOLD",
        _parse_number(int, 1000),
        "80000",
        "estimated tokens that trigger compaction",
    )
    scheduler_poll_interval: float = _setting(
        "SCHEDULER_POLL_INTERVAL", _parse_number(float, 0.05), "60", "scheduler latency bound (s)"
    )
    scheduler_concurrency: int = _setting(
        "SCHEDULER_CONCURRENCY", _parse_number(int, 1, 16), "1", "scheduled tasks run at once"
    )
    sandbox_backend: str = _setting(
        "SANDBOX_BACKEND",
        _parse_choice("auto", "docker", "bwrap", "process"),
        "auto",
        "auto/docker/bwrap/process",
    )
    sandbox_image: str = _setting(
        "SANDBOX_IMAGE", _parse_str, "lmagent-sandbox:latest", "image for the Docker backend"
    )
    sandbox_network: str = _setting(
        "SANDBOX_NETWORK", _parse_choice("none", "bridge"), "none", "network for sandboxed commands"
    )
    allow_unsandboxed_auto: bool = _setting(
        "ALLOW_UNSANDBOXED_AUTO",
        _parse_bool,
        "false",
        "allow auto mode with SANDBOX_BACKEND=process (commands unisolated on the host)",
    )
    agent_host: str = _setting("AGENT_HOST", _parse_host, "0.0.0.0", "web UI bind address")
    agent_port: int = _setting("AGENT_PORT", _parse_number(int, 1, 65535), "7860", "web UI port")
    agent_token: str = _setting("AGENT_TOKEN", _parse_str, "", "web UI PIN (blank = random)")
    enable_mcp: bool = _setting("ENABLE_MCP", _parse_bool, "true", "start MCP servers")
    mcp_start_timeout: float = _setting(
        "MCP_START_TIMEOUT",
        _parse_number(float, 1, 600),
        "30",
        "seconds all MCP servers together have to start (one still starting is stopped)",
    )
    llm_max_tokens: int = _setting(
        "LLM_MAX_TOKENS", _parse_number(int, 0), "0", "cap on tokens per reply (0 = server default)"
    )
    embedded_model: str = _setting(
        "EMBEDDED_MODEL", _parse_str, "", "GGUF file for --embedded (blank = bundled SmolLM2)"
    )

    @classmethod
    def load(
        cls,
        environ: dict[str, str] | None = None,
        overrides: dict[str, object] | None = None,
        cwd: Path | None = None,
    ) -> Config:
        """Resolve settings: defaults, then .env files, then `environ`, then `overrides`."""
        environ = dict(os.environ if environ is None else environ)
        raw = {f.metadata["env"]: f.metadata["default"] for f in fields(cls)}
        from_files: dict[str, str] = {}
        for env_file in _dotenv_files(cwd or Path.cwd()):
            for key, value in _read_dotenv(env_file).items():
                if value is not None and key in raw:
                    from_files.setdefault(key, value)  # an earlier file is never overridden
        raw.update(from_files)
        raw.update({k: v for k, v in environ.items() if k in raw})
        values = {
            f.name: f.metadata["parse"](f.metadata["env"], raw[f.metadata["env"]])
            for f in fields(cls)
        }
        for name, value in (overrides or {}).items():
            if value is not None:
                values[name] = value
        config = cls(**values)
        return replace(config, workspace=_parse_path("WORKSPACE", str(config.workspace)))

    def with_changes(self, **changes) -> Config:
        return replace(self, **changes)


def _dotenv_files(cwd: Path) -> list[Path]:
    """`.env` next to the scripts, then `.env` in `cwd` (which only fills in what is unset),
    like python-dotenv's load_dotenv called in that order."""
    files = [SCRIPT_DIR / ".env", cwd / ".env"]
    seen, result = set(), []
    for path in files:
        real = path.resolve()
        if real not in seen and path.is_file():
            seen.add(real)
            result.append(path)
    return result


def _read_dotenv(path: Path) -> dict[str, str | None]:
    """The values of one .env file (UTF-8, a byte-order mark allowed); ConfigError, naming the
    file and the fix, when it cannot be read."""
    try:
        return dotenv_values(path, encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def describe_settings() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, in declaration order."""
    return [(f.metadata["env"], f.metadata["default"], f.metadata["doc"]) for f in fields(Config)]


# --------------------------------------------------------------------------- files and paths


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def atomic_write(path: Path, data: str | bytes, durable: bool = True) -> None:
    """Write a file so readers see the old or the new content, never a mix. With durable=False
    the data is not forced to disk: a killed process still leaves the whole new file, but a
    power cut may bring back the old one (for files that are cheap to be one step behind)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def move_durably(source: Path, target: Path) -> None:
    """os.replace, then force both directory entries to disk: after a power cut the file is
    in one of the two places, never back in the old one once this returned."""
    os.replace(source, target)
    _fsync_dir(Path(target).parent)
    if Path(source).parent != Path(target).parent:
        _fsync_dir(Path(source).parent)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: Path, data: object, durable: bool = True) -> None:
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=2), durable)


def read_json(path: Path, default: object = None) -> object:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


# --------------------------------------------------------------------------- OS file locks


def try_lock(fd: int, shared: bool = False) -> bool:
    """Take an OS lock on an open file without waiting; False when someone else holds it.
    The kernel drops it when its holder dies, so a crash never leaves a stale lock."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def locked(path: Path, wait: float | None = None) -> Iterator[bool]:
    """Hold an exclusive lock on `path` for the block; yields False when `wait` seconds passed
    without getting it (None: wait as long as it takes). flock locks conflict between threads
    of one process too, since every call opens the file anew."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = None if wait is None else time.monotonic() + wait
    try:
        while not (got := try_lock(fd)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        try:
            yield got
        finally:
            if got:
                unlock(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- stopping


class StopToken:
    """Cooperative cancellation shared by the loop, the LLM stream, commands and sub-agents."""

    def __init__(self, parent: StopToken | None = None):
        self.event = threading.Event()
        self.reason = ""
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        if parent is not None:
            parent.add_callback(lambda: self.stop(parent.reason))

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def stop(self, reason: str = "stopped by the user") -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.reason = reason
            self.event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            with contextlib.suppress(Exception):
                callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            already = self.event.is_set()
            if not already:
                self._callbacks.append(callback)
        if already:
            callback()
        return callback

    def remove_callback(self, callback: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    @contextlib.contextmanager
    def on_stop(self, callback: Callable[[], None]) -> Iterator[None]:
        """Run `callback` if a stop is requested while the block runs."""
        self.add_callback(callback)
        try:
            yield
        finally:
            self.remove_callback(callback)

    def wait(self, seconds: float) -> bool:
        return self.event.wait(seconds)


# --------------------------------------------------------------------------- compaction


def message_chars(message: dict) -> int:
    size = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        size += len(function.get("name", "")) + len(str(function.get("arguments", "")))
    return size


def estimate_tokens(messages: list[dict]) -> int:
    """A cheap estimate (4 characters a token, plus framing); server usage figures win."""
    return sum(message_chars(m) // 4 + 4 for m in messages)


class Compactor:
    """Keeps the context under a token threshold: the recent tail stays, the head is summarised.

    The original task (first message) is folded into the summary message verbatim, so it is
    never lost; tool results always stay paired with their calls. Given a token budget, the
    tail is cut well below the threshold, so compaction is rare (and a server's prompt cache
    stays useful between steps) instead of trimming a message or two on every step.
    """

    def __init__(self, threshold: int, keep_recent: int = 10):
        self.threshold = threshold
        self.keep_recent = keep_recent  # newest messages always kept (fewer with a budget)

    def too_big(self, tokens: int) -> bool:
        return tokens > self.threshold

    def cut_point(
        self, history: list[dict], budget: int | None = None, keep: int | None = None
    ) -> int | None:
        """Index where the kept tail starts, or None when there is nothing to compact.

        Without a budget the newest `keep_recent` messages are kept; with one, the newest
        messages that fit in `budget` tokens (at least `keep`, default 2). The tail then starts
        at an assistant message: tool results stay with the call that made them, and the
        summary (a user message) is followed by an assistant turn."""
        if budget is None:
            end = len(history) - (self.keep_recent if keep is None else keep)
        else:
            end = _fitting_tail(history, budget, 2 if keep is None else keep)
        end = min(end, len(history) - 1)
        while end > 1 and history[end].get("role") != "assistant":
            end -= 1
        if end <= 1:
            return None
        return end

    def compact(
        self, history: list[dict], budget: int | None = None, keep: int | None = None
    ) -> tuple[int, dict] | None:
        """Return (end, summary message) replacing history[0:end], or None."""
        end = self.cut_point(history, budget, keep)
        if end is None:
            return None
        return end, {"role": "user", "content": summarize(history[:end])}


def _fitting_tail(history: list[dict], budget: int, keep: int) -> int:
    """Start of the longest tail that fits in `budget` tokens, holding at least `keep` messages."""
    end, used = len(history), 0
    while end > 1:
        cost = estimate_tokens([history[end - 1]])
        if len(history) - end >= keep and used + cost > budget:
            break
        used += cost
        end -= 1
    return end


SUMMARY_MARK = "[Earlier progress, compacted to save context]"


def summarize(messages: list[dict], limit: int = 4000) -> str:
    """Deterministic summary: the original task verbatim, then one line per earlier step."""
    task = str(messages[0].get("content") or "")
    if SUMMARY_MARK in task:
        task, _, earlier = task.partition("\n\n" + SUMMARY_MARK + "\n")
        lines = earlier.splitlines()
    else:
        lines = []
    for message in messages[1:]:
        lines.extend(_summary_lines(message))
    text = "\n".join(lines)
    if len(text) > limit:
        text = "…\n" + text[-limit:]
    return f"{task}\n\n{SUMMARY_MARK}\n{text}"


def _summary_lines(message: dict) -> list[str]:
    role = message.get("role")
    content = " ".join(str(message.get("content") or "").split())
    if role == "assistant":
        lines = [
            f"- you called {c['function']['name']}({_short(c['function'].get('arguments'))})"
            for c in message.get("tool_calls") or ()
        ]
        if content:
            lines.insert(0, f"- you said: {_short(content, 160)}")
        return lines
    if role == "tool":
        ok = '"success": true' in content or '"success":true' in content
        return [f"  → {'ok' if ok else 'failed'}: {_short(content, 120)}"]
    if role == "user":
        return [f"- user: {_short(content, 300)}"]
    return []


def _short(value: object, limit: int = 100) -> str:
    text = str(value if value is not None else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- loop detection


class LoopDetector:
    """Counts identical tool calls (name + normalised arguments) since the workspace changed."""

    def __init__(self, warn_at: int = 3, stop_at: int = 5):
        self.warn_at = warn_at
        self.stop_at = stop_at
        self.counts: dict[str, int] = {}

    @staticmethod
    def signature(name: str, arguments: object) -> str:
        return f"{name}:" + json.dumps(_normalise(arguments), sort_keys=True, default=str)

    def record(self, name: str, arguments: object, changed_workspace: bool) -> int:
        """Count this call and return how many times it has now been made."""
        key = self.signature(name, arguments)
        if changed_workspace and key not in self.counts:
            self.counts = {}  # a new change to the workspace: earlier repeats were not a loop
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]


def _normalise(value: object) -> object:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


# --------------------------------------------------------------------------- permissions


class PermissionGate:
    """Decides whether a tool call may run: auto never asks, normal asks before anything that
    changes files or runs commands, manual asks for everything. Answering "auto" switches the
    rest of the run (and its sub-agents, which share the gate) to auto."""

    def __init__(self, mode: str, ask: Callable[[str, dict], str] | None = None):
        self.mode = mode
        self.ask = ask
        self._lock = threading.Lock()

    def needs_asking(self, changes_things: bool) -> bool:
        return self.mode == "manual" or (self.mode == "normal" and changes_things)

    def request(self, tool: str, arguments: dict, changes_things: bool) -> tuple[bool, str]:
        """(allowed, note). Sub-agents running in parallel ask one at a time."""
        if not self.needs_asking(changes_things):
            return True, ""
        if self.ask is None:
            return False, (
                f"{tool} needs permission in {self.mode} mode and nobody can be asked; "
                "run with --permission auto to allow it"
            )
        with self._lock:
            if not self.needs_asking(changes_things):
                return True, ""
            answer = str(self.ask(tool, arguments)).strip().lower()
        if answer == "auto":
            self.mode = "auto"
            return True, "permission mode switched to auto for the rest of this run"
        if answer == "allow":
            return True, ""
        return False, f"the user denied permission for {tool}; do not retry it, choose another way"
