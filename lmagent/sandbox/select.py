"""Which sandbox runs the commands, and opening it.

    sb = open_sandbox(SandboxConfig.from_config(config))
    result = sb.run("pytest -q", timeout=60)      # -> CommandResult(output, exit_code, ...)

Backends, best first: ``docker`` (one persistent hardened container per workspace), ``bwrap``
(bubblewrap namespaces), and ``process`` (no isolation; only when asked for by name). A new
backend is a module beside docker.py and local.py, a case in `open_sandbox`, and a name in
SANDBOX_BACKENDS (lmagent/core/config.py). The Docker SDK is imported only when Docker is asked
about, so importing this module is cheap.
"""

from __future__ import annotations

from pathlib import Path

from lmagent.core.config import SANDBOX_BACKENDS
from lmagent.sandbox.base import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    MAX_MEMORY_MB,
    MAX_TIMEOUT,
    CommandResult,
    Sandbox,
    SandboxConfig,
    SandboxUnavailable,
)
from lmagent.sandbox.local import (
    PROCESS_WARNING,
    BwrapSandbox,
    ProcessSandbox,
    probe_bwrap,
    quiesce_bwrap,
)

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT",
    "CommandResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailable",
    "describe_backend",
    "open_sandbox",
    "quiesce",
]


def describe_backend(cfg: SandboxConfig) -> tuple[str, str]:
    """(backend name or "none", a human reason) for --check, /status and banners."""
    if cfg.backend not in SANDBOX_BACKENDS:
        return (
            "none",
            f"SANDBOX_BACKEND must be one of {', '.join(SANDBOX_BACKENDS)}, not {cfg.backend!r}",
        )
    if cfg.backend == "process":
        return "process", PROCESS_WARNING
    if cfg.backend in ("auto", "docker"):
        from lmagent.sandbox.docker import probe_docker

        docker_ok, docker_reason = probe_docker(cfg.image)
        if docker_ok:
            return "docker", docker_reason
        if cfg.backend == "docker":
            return "none", docker_reason
    bwrap_ok, bwrap_reason = probe_bwrap(Path(cfg.workspace))
    if cfg.backend == "bwrap":
        return ("bwrap" if bwrap_ok else "none"), bwrap_reason
    if bwrap_ok:
        return "bwrap", f"{bwrap_reason} (Docker not used: {docker_reason})"
    return "none", (
        f"no sandbox available. Docker: {docker_reason}. bubblewrap: {bwrap_reason}. "
        "Fix one of them, or accept running commands without any isolation "
        "with SANDBOX_BACKEND=process."
    )


def sandbox_summary(cfg: SandboxConfig) -> str:
    """`docker (why)` for banners and status lines; never raises (a banner must not stop the
    agent)."""
    try:
        backend, reason = describe_backend(cfg)
    except Exception as exc:
        return f"unavailable ({exc})"
    return f"{backend} ({reason})"


def open_sandbox(cfg: SandboxConfig) -> Sandbox:
    """The sandbox for cfg.backend; auto = docker if usable, else bwrap, else SandboxUnavailable."""
    name, reason = describe_backend(cfg)
    if name == "docker":
        from lmagent.sandbox.docker import DockerSandbox

        return DockerSandbox(cfg)
    if name == "bwrap":
        return BwrapSandbox(cfg)
    if name == "process":
        return ProcessSandbox(cfg)
    raise SandboxUnavailable(reason)


def quiesce(workspace: Path | str) -> list[str]:
    """Make sure no sandboxed process of `workspace` is alive, before the host acts on the
    workspace by path: kills every process of its Docker container but its init (the keeper no
    command can reach; the whole container when that cannot be made sure), and every bwrap
    sandbox of it, whichever agent process started them. The
    processes killed, described; SandboxUnavailable says why it could not be made sure. (The
    process backend isolates nothing, so it has no processes to tell apart from the user's.)"""
    workspace = Path(workspace).resolve()
    try:
        from lmagent.sandbox.docker import quiesce_container

        return quiesce_container(workspace) + quiesce_bwrap(workspace)
    except PermissionError as exc:
        raise SandboxUnavailable(
            f"cannot stop the sandboxed processes of {workspace} ({exc}); run as the user who "
            "started the agent"
        ) from None
