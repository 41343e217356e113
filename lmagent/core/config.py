"""Settings, read once: defaults, then the `.env` in the current directory, then the `.env` next
to the scripts (each only fills in what is still unset), then the environment, then flags.

`Config` is the one settings object; every part (the sandbox included) takes what it needs
from it. Each allowed-value list is defined here once.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from dotenv import dotenv_values

VERSION = "0.1.0"
# the directory holding the lmagent package: a checkout's root, where agent_main.py lives
SCRIPT_DIR = Path(__file__).resolve().parents[2]


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


def _parse_workspace(name: str, raw: str) -> Path | None:
    """A directory path; blank = the current folder (Config.load fills it in)."""
    return _parse_path(name, raw) if raw.strip() else None


def _parse_paths(name: str, raw: str) -> tuple[Path, ...]:
    """`:`-separated directory paths (blank = none), symlinks resolved."""
    return tuple(_parse_path(name, item) for item in raw.split(":") if item.strip())


def _split_url(name: str, raw: str, allowed: str) -> SplitResult:
    """The parts of URL `raw` with its port checked; ConfigError naming `allowed` otherwise."""
    try:
        parts = urlsplit(raw.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not valid ({exc}); allowed: {allowed}") from None
    return parts


def _parse_url(name: str, raw: str) -> str:
    """An http(s) URL with a host (and a valid port, if any), or "embedded"."""
    value = raw.strip()
    allowed = "an http:// or https:// URL such as http://localhost:1234/v1/chat/completions"
    parts = _split_url(name, raw, allowed)
    if value != "embedded" and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise ConfigError(f"{name}={raw!r} is not valid; allowed: {allowed}")
    return value


def _parse_queue_url(name: str, raw: str) -> str:
    """Blank (the directory inbox) or redis://host[:port][/db] (the distributed queue)."""
    value = raw.strip()
    allowed = (
        "blank (the directory inbox) or redis://host:port/db (rediss:// with TLS), "
        "e.g. redis://localhost:6379/0"
    )
    parts = _split_url(name, raw, allowed)
    database = parts.path.strip("/")
    redis_url = parts.scheme in ("redis", "rediss") and parts.hostname
    redis_url = redis_url and (not database or database.isdigit())
    if value and not redis_url:
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


# the allowed values of the settings (and of the flags and API fields that set them), once
PERMISSION_MODES = ("auto", "normal", "manual")
SANDBOX_BACKENDS = ("auto", "docker", "bwrap", "process")
SANDBOX_NETWORKS = ("none", "bridge")
VISION_SETTINGS = ("auto", "true", "false")
# how tool calls are asked for: decided by a probe, the server's tool_calls, calls written as
# text, or a JSON schema the server constrains the reply to (see lmagent/llm/constrained.py)
TOOL_CALL_MODES = ("auto", "native", "text", "constrained")
TOOL_SETS = ("auto", "full", "compact", "tiny")
# EMBEDDED_SPECULATION, the first the default: llama.cpp's draftless (n-gram) speculative
# decoding. The model checks every drafted token, so it writes what it would without, but for
# rounding (a batched check can flip a near-tie: 4 of 8 long greedy first replies differed,
# bench/speed_notes.md). bench/bench_speed.py: a whole-file rewrite 2.3-2.7x faster greedy and
# sampled, fresh code 0.92-1.08x, 1.01x memory
SPECULATION_TYPES = ("ngram-simple", "none")


def _parse_hosts(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated host names or addresses (blank = none)."""
    return tuple(_parse_host(name, item) for item in raw.split(",") if item.strip())


def _setting(env: str, parse, default: str, doc: str):
    return field(
        default=None, metadata={"env": env, "parse": parse, "default": default, "doc": doc}
    )


@dataclass(frozen=True)
class Config:
    """Settings resolved once at start-up (defaults → .env files → environment → flags)."""

    workspace: Path = _setting(
        "WORKSPACE",
        _parse_workspace,
        "",
        "the only directory the agent may touch; blank = the folder lmagent is started in",
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
        "PERMISSION_MODE", _parse_choice(*PERMISSION_MODES), "normal", "/".join(PERMISSION_MODES)
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
        "VISION_ENABLED", _parse_choice(*VISION_SETTINGS), "auto", "/".join(VISION_SETTINGS)
    )
    summarization_threshold: int = _setting(
        "SUMMARIZATION_THRESHOLD",
        _parse_number(int, 1000),
        "80000",
        "estimated tokens that trigger compaction",
    )
    checkpoint_max_mb: int = _setting(
        "CHECKPOINT_MAX_MB",
        _parse_number(int, 0),
        "1000",
        "checkpoints' disk cap in MB; the oldest sessions' histories go first (0 = none)",
    )
    scheduler_poll_interval: float = _setting(
        "SCHEDULER_POLL_INTERVAL", _parse_number(float, 0.05), "60", "scheduler latency bound (s)"
    )
    scheduler_concurrency: int = _setting(
        "SCHEDULER_CONCURRENCY", _parse_number(int, 1, 16), "1", "scheduled tasks run at once"
    )
    scheduler_queue: str = _setting(
        "SCHEDULER_QUEUE",
        _parse_queue_url,
        "",
        "blank = the directory inbox; redis://host:port/db = the distributed queue",
    )
    scheduler_lease: int = _setting(
        "SCHEDULER_LEASE",
        _parse_number(int, 1, 3600),
        "60",
        "seconds a silent queue worker keeps its task (retaken within 1.5x this)",
    )
    queue_workspace_roots: tuple[Path, ...] = _setting(
        "QUEUE_WORKSPACE_ROOTS",
        _parse_paths,
        "",
        "directories (:-separated) a queue worker accepts task workspaces in (blank = WORKSPACE)",
    )
    sandbox_backend: str = _setting(
        "SANDBOX_BACKEND",
        _parse_choice(*SANDBOX_BACKENDS),
        "auto",
        "/".join(SANDBOX_BACKENDS),
    )
    sandbox_image: str = _setting(
        "SANDBOX_IMAGE", _parse_str, "lmagent-sandbox:latest", "image for the Docker backend"
    )
    sandbox_network: str = _setting(
        "SANDBOX_NETWORK",
        _parse_choice(*SANDBOX_NETWORKS),
        "none",
        "network for sandboxed commands",
    )
    sandbox_idle_minutes: int = _setting(
        "SANDBOX_IDLE_MINUTES",
        _parse_number(int, 0, 10080),
        "30",
        "minutes a Docker sandbox with no agent using it keeps running (0 = until stopped)",
    )
    sandbox_debian_mirror: str = _setting(
        "SANDBOX_DEBIAN_MIRROR",
        _parse_str,
        "",
        "Debian archive for building the image (blank = this machine's apt sources)",
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
    agent_allowed_hosts: tuple = _setting(
        "AGENT_ALLOWED_HOSTS",
        _parse_hosts,
        "",
        "extra host names the web UI answers to (reverse proxy, VPN name), comma-separated",
    )
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
        "EMBEDDED_MODEL",
        _parse_str,
        "",
        "model for --embedded: blank = Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched once, 1.1 GB, "
        "sha256-checked), smollm2 = the tiny SmolLM2-135M (93 MB), or a .gguf file",
    )
    embedded_speculation: str = _setting(
        "EMBEDDED_SPECULATION",
        _parse_choice(*SPECULATION_TYPES),
        SPECULATION_TYPES[0],
        "--embedded's speculative decoding: ngram-simple (a file rewritten 2.3-2.7x faster; a "
        "reply may differ from none in a rounded near-tie) or none",
    )
    embedded_keep_warm: float = _setting(
        "EMBEDDED_KEEP_WARM",
        _parse_number(float, 0, 1440),
        "5",
        "minutes --embedded's model server stays loaded after the last run using it ends, for "
        "the next run to skip the load (as Ollama keeps a model loaded); 0 = stop it with the run",
    )
    tool_call_mode: str = _setting(
        "TOOL_CALL_MODE",
        _parse_choice(*TOOL_CALL_MODES),
        "auto",
        "auto/native/text/constrained: how the model's tool calls are asked for",
    )
    tool_set: str = _setting(
        "TOOL_SET",
        _parse_choice(*TOOL_SETS),
        "auto",
        "auto/full/compact/tiny: the tools offered (auto: compact below 8192 tokens of context; "
        "compact: six core schemas, every other tool on demand; tiny: files and shell only, and "
        "a task's first reply must call one)",
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
            values = _read_dotenv(env_file)
            warn_unknown_keys(env_file, values, raw)
            for key, value in values.items():
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
        workspace = config.workspace if config.workspace is not None else cwd or Path.cwd()
        return replace(config, workspace=_parse_path("WORKSPACE", str(workspace)))

    def with_changes(self, **changes) -> Config:
        return replace(self, **changes)

    @classmethod
    def default(cls, name: str) -> str:
        """The default of setting `name` (a field name), as written in .env.example."""
        return next(f.metadata["default"] for f in fields(cls) if f.name == name)


def check_workspace(path: Path, named_by: str) -> None:
    """ConfigError unless `path` (the workspace, as `named_by` gives it: --workspace or
    WORKSPACE) is an existing folder: a mistyped path is never created silently."""
    if path.is_dir():
        return
    what = "is not a folder" if path.exists() else "does not exist"
    raise ConfigError(
        f"{named_by} {path} {what}; nothing was created. Check the path, or make the folder "
        f"first (mkdir -p {path}); without {named_by} the workspace is WORKSPACE, else the "
        "folder lmagent is started in"
    )


def _dotenv_files(cwd: Path) -> list[Path]:
    """`.env` in `cwd`, then `.env` next to the scripts (which only fills in what is unset):
    the current directory's file outranks the checkout's, as docs/CONFIGURATION.md says."""
    files = [cwd / ".env", SCRIPT_DIR / ".env"]
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


_warned: set[tuple[str, str]] = set()


def warn_unknown_keys(path: Path, values: dict, known: dict) -> None:
    """One warning per unknown key of a .env file per process, naming the closest known
    variable (a typo such as PERMISION_MODE would otherwise be ignored silently)."""
    for key in values:
        if key in known or (str(path), key) in _warned:
            continue
        _warned.add((str(path), key))
        close = difflib.get_close_matches(key.upper(), list(known), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else "every variable is listed in .env.example"
        print(f"warning: {path}: unknown setting {key} is ignored; {hint}", file=sys.stderr)


def parse_setting(name: str, label: str, raw: str):
    """Check one value (a flag's) the way its variable is checked; errors name `label`."""
    (setting,) = [f for f in fields(Config) if f.name == name]
    return setting.metadata["parse"](label, raw)


def describe_settings() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, in declaration order."""
    return [(f.metadata["env"], f.metadata["default"], f.metadata["doc"]) for f in fields(Config)]
