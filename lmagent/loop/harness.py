"""The harness's own use of a run's tools, beside the model's calls (lmagent.loop.calls): a
reading tool run for the model to be shown its result (`look`), and a check's command run as the
shell tool runs the model's (`shell`, lmagent.loop.verify)."""

from __future__ import annotations

from collections.abc import Callable

from lmagent.checkpoints.recorder import StepRecorder
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.verify import CHECK_ENV, CHECK_TIMEOUT
from lmagent.tools.registry import ToolContext, Toolset


class HarnessTools:
    """The tools of one run as the harness uses them; `checks_run` counts its check commands,
    each a checkpointed step."""

    def __init__(
        self,
        toolset: Toolset,
        ctx: ToolContext,
        gate: PermissionGate,
        checkpoints: StepRecorder,
        say: Callable[[str], None],
    ):
        self.toolset, self.ctx, self.gate, self.checkpoints = toolset, ctx, gate, checkpoints
        self.say = say
        self.checks_run = 0

    def look(self, name: str, arguments: dict) -> dict:
        """A reading tool's result, run for the model (never one that changes things)."""
        if name not in self.toolset or self.toolset.changes_things(name):
            return {"success": False}
        return self.toolset.execute(self.ctx, name, arguments)

    def shell(self, command: str, ask: bool = True) -> dict | None:
        """A check's command, run as the shell tool runs the model's (in the sandbox), when
        the permission gate allows it (without asking, unless `ask`); None when it does not,
        or there is no shell tool."""
        asking = self.gate.needs_asking(True)
        if "shell" not in self.toolset or (asking and not (ask and self.gate.ask)):
            return None
        allowed, _ = self.gate.request("shell", {"command": command}, True)
        if not allowed:
            return None
        self.say(f"checking: {command.removeprefix(CHECK_ENV)}")
        self.checks_run += 1
        before = self.checkpoints.before("shell")  # a check may change files: undone as a step
        result = self.toolset.execute(
            self.ctx, "shell", {"command": command, "timeout": int(CHECK_TIMEOUT)}
        )
        change = self.checkpoints.after(before, "shell", f"check-{self.checks_run}")
        if change.get("changed"):
            self.say(f"the check changed {', '.join(change['changed'][:5])}")
        return result
