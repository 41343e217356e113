"""Facade: the foundation every part of LMAgent stands on. It names what lives where:

- settings, read once (defaults, `.env` files, environment, flags): lmagent/core/config.py
- the workspace boundary every host-side file access goes through: lmagent/core/workspace.py
- durable writes, JSON files and OS file locks: lmagent/core/files.py
- stopping a run from another thread or a signal: lmagent/core/stop.py
- how a run ended (its status names): lmagent/core/status.py

docs/ARCHITECTURE.md maps the whole package.
"""

from lmagent.core.config import VERSION, Config, ConfigError
from lmagent.core.files import atomic_write, locked, read_json, write_json
from lmagent.core.status import FINAL_STATUSES
from lmagent.core.stop import StopToken
from lmagent.core.workspace import PathError, Workspace

__all__ = [
    "FINAL_STATUSES",
    "VERSION",
    "Config",
    "ConfigError",
    "PathError",
    "StopToken",
    "Workspace",
    "atomic_write",
    "locked",
    "read_json",
    "write_json",
]
