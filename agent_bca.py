"""Facade: sub-agents (brief, contract, artifacts). It names what lives where:

- the delegate, decompose and report_result tools: lmagent/subagents/tools.py
- running children (slots, dependency order, budgets, events): lmagent/subagents/run.py
- the brief.json / result.json files they exchange on disk: lmagent/subagents/records.py
- the manifest a parent writes to decompose a task: lmagent/subagents/manifest.py
"""

from lmagent.subagents.manifest import ManifestError, parse_manifest
from lmagent.subagents.records import read_brief, read_result, write_brief, write_result
from lmagent.subagents.tools import SubAgents

__all__ = [
    "ManifestError",
    "SubAgents",
    "parse_manifest",
    "read_brief",
    "read_result",
    "write_brief",
    "write_result",
]
