#!/usr/bin/env python3
"""The sandbox that runs the agent's commands: `--build` its image, `--check` which backend
would be used and why (the `lmagent-sandbox` command).

The code is in lmagent/sandbox/; docs/ARCHITECTURE.md maps the whole package.
"""

import sys

from lmagent.sandbox.cli import main

if __name__ == "__main__":
    sys.exit(main())
