"""`lmagent-sandbox` (`python sandboxed_shell.py`): --build the sandbox image (SANDBOX_IMAGE),
--check the backend that would be used and why.
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
    args = parser.parse_args(argv)
    try:
        cfg = SandboxConfig.from_config(Config.load())
        if args.build:
            from lmagent.sandbox.docker import build_image

            print(build_image(cfg))
            return 0
    except (ConfigError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    name, reason = describe_backend(cfg)
    print(f"backend: {name}\nworkspace: {cfg.workspace}\nreason: {reason}")
    return 0 if name != "none" else 1
