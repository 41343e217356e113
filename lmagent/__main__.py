"""`python -m lmagent`: the same as the `lmagent` command."""

import sys

from lmagent.cli.main import main

sys.exit(main())
