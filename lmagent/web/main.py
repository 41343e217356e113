"""`lmagent-web` (`python agent_web.py`): serves the web UI with waitress and prints the LAN
address, the port and the PIN.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from flask import Flask

from lmagent.core.config import (
    PERMISSION_MODES,
    VERSION,
    Config,
    ConfigError,
    check_workspace,
)
from lmagent.core.workspace import Workspace
from lmagent.runtime import SCHEDULER_RUNS_AUTO, unsandboxed_auto_refusal
from lmagent.web.app import create_app
from lmagent.web.auth import new_pin
from lmagent.web.server import WebServer, announce, limit_malloc_arenas, url

# --------------------------------------------------------------------------- entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="LMAgent web UI for browsers on this machine and the LAN."
    )
    parser.add_argument("--host", help="bind address (AGENT_HOST, default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="port (AGENT_PORT, default 7860)")
    parser.add_argument(
        "--workspace",
        help="the directory the agent works in; it must exist (default: WORKSPACE, else the "
        "current folder)",
    )
    parser.add_argument("--permission", choices=PERMISSION_MODES)
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="start llama.cpp's server here with the bundled model, or your own .gguf "
        "(EMBEDDED_MODEL=path), as `lmagent --embedded` does",
    )
    parser.add_argument(
        "--allow-unsandboxed-auto",
        action="store_true",
        help="allow auto mode with SANDBOX_BACKEND=process (commands unisolated on the host)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    overrides = {
        "agent_host": args.host,
        "agent_port": args.port,
        "permission_mode": args.permission,
        "allow_unsandboxed_auto": True if args.allow_unsandboxed_auto else None,
        "workspace": Path(args.workspace).expanduser().resolve() if args.workspace else None,
    }
    try:
        config = Config.load(overrides=overrides)
        check_workspace(config.workspace, "--workspace" if args.workspace else "WORKSPACE")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    refusal = unsandboxed_auto_refusal(config, config.permission_mode)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    if not (args.embedded or config.llm_url == "embedded"):
        return serve(config)
    from lmagent.llm.embedded import EmbeddedError, embedded_config

    try:
        with embedded_config(config) as config:
            return serve(config)
    except EmbeddedError as exc:  # raised only while it starts
        print(f"error: {exc}", file=sys.stderr)
        return 1


def serve(config: Config) -> int:
    """Serve the UI until Ctrl+C or SIGTERM."""
    Workspace(config.workspace).ensure()
    limit_malloc_arenas()
    addresses = announce(config.agent_host)
    pin = config.agent_token or new_pin()
    from lmagent.runtime import Runtime

    runtime = Runtime(config).start()
    app = create_app(config, {"PIN": pin, "ALLOWED_HOSTS": addresses.allowed}, runtime=runtime)
    try:
        server = WebServer(app, config.agent_host, config.agent_port)
    except (OSError, ValueError) as exc:  # ValueError: a host name that does not resolve
        runtime.close()
        where = f"{config.agent_host}:{config.agent_port}"
        print(f"error: cannot listen on {where}: {exc}; check AGENT_HOST", file=sys.stderr)
        return 1
    scheduler = _host_scheduler(config, runtime, app)
    _print_banner(config, addresses, server.port, pin, runtime.banner_lines())
    _stop_on_signals(app)
    try:
        server.run()
    finally:
        server.shutdown()
        if scheduler is not None:
            scheduler.stop()
    return 0


def _host_scheduler(config: Config, runtime, app: Flask):
    """Run the workspace's scheduler inside the web server, unless a daemon already does.

    Scheduled runs are sessions of their own (listed with the others); they never stream into
    the browser's chat, and no task is claimed while a browser run is active."""
    from lmagent.scheduler.inbox import SchedulerLocked
    from lmagent.scheduler.service import start_background

    if config.scheduler_queue:
        print(f"scheduler: tasks run on the workers of {config.scheduler_queue}", flush=True)
        return None
    runs = app.extensions["lmagent"].runs
    refusal = unsandboxed_auto_refusal(config, "auto", SCHEDULER_RUNS_AUTO)
    if refusal:
        print(f"scheduler: not started here: {refusal}", flush=True)
        return None
    try:
        return start_background(config, runtime=runtime, busy=lambda: runs.active is not None)
    except SchedulerLocked as exc:
        print(f"scheduler: {exc}; scheduled tasks run there", flush=True)
        return None


def _print_banner(config: Config, addresses, port: int, pin: str, facts: list[str]) -> None:
    shown_pin = "the value of AGENT_TOKEN" if config.agent_token else pin
    lines = [
        f"LMAgent web UI {VERSION} · mode {config.permission_mode}",
        *(f"  {fact}" for fact in facts),
        f"  Open on your LAN:  {url(addresses.primary, port)}",
        f"  On this machine:   {url('localhost', port)}",
    ]
    lines += [f"  Also reachable:    {url(a, port)}" for a in addresses.others]
    lines += [f"  Port: {port}", f"  PIN:  {shown_pin}", "Press Ctrl+C to stop."]
    print("\n".join(lines), flush=True)


def _stop_on_signals(app: Flask) -> None:
    """Ctrl+C / SIGTERM: stop the run (saved as interrupted) and the streams, then leave."""

    def handler(signum, frame):
        app.extensions["lmagent"].shutdown()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
