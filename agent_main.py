#!/usr/bin/env python3
"""LMAgent in the terminal: one-shot tasks, the REPL and the scheduler (the `lmagent` command).

The code is in lmagent/cli/; docs/ARCHITECTURE.md maps the whole package.
"""

import sys

from lmagent.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
