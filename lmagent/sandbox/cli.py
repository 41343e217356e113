"""`lmagent-sandbox` (`python sandboxed_shell.py`): --build the sandbox image (SANDBOX_IMAGE),
--check the backend that would be used and why, --stop the workspace's sandbox container.
"""

from __future__ import annotations

import argparse
import sys

from lmagent.core.config import Config, ConfigError
from lmagent.sandbox.base import (
    SandboxConfig,
    SandboxUnavailable,
)
from lmagent.sandbox.select import describe_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="LMAgent's command sandbox")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--build", action="store_true", help="build the sandbox image")
    action.add_argument("--check", action="store_true", help="show the backend that would be used")
    action.add_argument(
        "--stop",
        action="store_true",
        help="stop the workspace's Docker sandbox container now (the next run starts it again; "
        "an idle one stops by itself after SANDBOX_IDLE_MINUTES)",
    )
    args = parser.parse_args(argv)
    try:
        cfg = SandboxConfig.from_config(Config.load())
        if args.build or args.stop:
            from lmagent.sandbox.docker import build_image, stop_container

            print(build_image(cfg) if args.build else stop_container(cfg.workspace))
            return 0
    except (ConfigError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    name, reason = describe_backend(cfg)
    print(f"backend: {name}\nworkspace: {cfg.workspace}\nreason: {reason}")
    return 0 if name != "none" else 1
