#!/usr/bin/env python3
"""LMAgent's web UI for browsers on this machine and the LAN (the `lmagent-web` command).

The code is in lmagent/web/; docs/ARCHITECTURE.md maps the whole package.
"""

import sys

from lmagent.web.main import main

if __name__ == "__main__":
    sys.exit(main())
