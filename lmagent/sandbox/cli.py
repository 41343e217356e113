"""The sandbox that runs the agent's shell and git commands.

    sb = open_sandbox(SandboxConfig(workspace=Path("~/lm_workspace").expanduser().resolve()))
    result = sb.run("pytest -q", timeout=60)      # -> CommandResult(output, exit_code, ...)

Backends, best first: ``docker`` (one persistent hardened container per workspace), ``bwrap``
(bubblewrap namespaces), and ``process`` (no isolation; only when asked for by name). The
container or bwrap is the wall; `check_command_paths` is an advisory second line.

Code map: sandbox_core.py (config, results, the channel to the runner), sandbox_docker.py
(container lifecycle, image build), sandbox_local.py (bwrap, process), sandbox/runner.py (the
small server inside the sandbox that runs each command). The Docker SDK is imported only when
Docker is asked about, so importing this module is cheap.

CLI:  python sandboxed_shell.py --build   build the sandbox image (SANDBOX_IMAGE)
      python sandboxed_shell.py --check   print the backend that would be used and why
"""

from __future__ import annotations

import argparse
import sys

from lmagent.sandbox.base import (
    SandboxConfig,
    SandboxUnavailable,
)
from lmagent.sandbox.select import describe_backend


# --- CLI -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="LMAgent's command sandbox")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--build", action="store_true", help="build the sandbox image")
    action.add_argument("--check", action="store_true", help="show the backend that would be used")
    args = parser.parse_args(argv)
    cfg = SandboxConfig.from_env()
    try:
        if args.build:
            from lmagent.sandbox.docker import build_image

            print(build_image(cfg.image))
            return 0
    except SandboxUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    name, reason = describe_backend(cfg)
    print(f"backend: {name}\nworkspace: {cfg.workspace}\nreason: {reason}")
    return 0 if name != "none" else 1
