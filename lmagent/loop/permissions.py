"""The permission gate: which tool calls need the user's answer in each permission mode."""

from __future__ import annotations

import threading
from collections.abc import Callable

from lmagent.loop.endings import Blocked

# --------------------------------------------------------------------------- permissions


class NobodyToAsk(Exception):
    """Raised by an `ask` function when no one can answer (no terminal, no answer channel):
    the run then ends blocked with this message instead of acting on a guess."""


class PermissionGate:
    """Decides whether a tool call may run: auto never asks, normal asks before anything that
    changes files or runs commands, manual asks for everything. Answering "auto" switches the
    rest of the run (and its sub-agents, which share the gate) to auto."""

    def __init__(self, mode: str, ask: Callable[[str, dict], str] | None = None):
        self.mode = mode
        self.ask = ask
        self._lock = threading.Lock()
        self.blocked = ""  # set when a request found nobody to ask: the run ends blocked

    def needs_asking(self, changes_things: bool) -> bool:
        return self.mode == "manual" or (self.mode == "normal" and changes_things)

    def request(self, tool: str, arguments: dict, changes_things: bool) -> tuple[bool, str]:
        """(allowed, note). Sub-agents running in parallel ask one at a time."""
        if not self.needs_asking(changes_things):
            return True, ""
        if self.ask is None:
            return False, (
                f"{tool} needs permission in {self.mode} mode and nobody can be asked; "
                "run with --permission auto to allow it"
            )
        with self._lock:
            if not self.needs_asking(changes_things):
                return True, ""
            try:
                answer = str(self.ask(tool, arguments)).strip().lower()
            except NobodyToAsk as exc:
                self.blocked = str(exc)
                return False, self.blocked
        if answer == "auto":
            self.mode = "auto"
            return True, "permission mode switched to auto for the rest of this run"
        if answer == "allow":
            return True, ""
        return False, f"the user denied permission for {tool}; do not retry it, choose another way"

    def approve_plan(self, steps: list[dict]) -> None:
        """--plan: the user's approval of the plan's `steps` before any tool runs, when someone
        can be asked; raises Blocked without it."""
        if self.ask is None:
            return
        try:
            answer = str(self.ask("plan", {"steps": steps})).strip().lower()
        except NobodyToAsk as exc:
            raise Blocked(str(exc)) from None
        if answer not in ("allow", "auto"):
            raise Blocked("the plan was not approved; nothing was done")
