"""One call of the model's reply, run as the loop runs every call: its arguments checked, the
permission asked, the tool run inside a checkpoint (a Python block merged into its file first,
lmagent.loop.merge), and what it did recorded: the checks owed and the next step for a small
model (lmagent.loop.checks), the run's outcome, and the count of the same call made again.

A reply's calls are run in order (`ReplyCalls`), their results recorded, and the run ended when
it was stopped, blocked, looping or given a final result; the run (lmagent.loop.run) decides
what else follows.
"""

from __future__ import annotations

from collections.abc import Callable

from lmagent.checkpoints.recorder import needs_checkpoint
from lmagent.loop.checks import UNCHANGED, WorkChecks, failed_check, last_output_line
from lmagent.loop.endings import Blocked, Completed, Interrupted, Stuck
from lmagent.loop.guards import LoopDetector
from lmagent.loop.harness import HarnessTools
from lmagent.loop.history import result_messages
from lmagent.loop.merge import merged_block
from lmagent.loop.outcome import Outcome
from lmagent.loop.progress import TOOL_FIRST, Ticker
from lmagent.loop.prompts import REPEATED_FAILURE, REPEATED_SUCCESS
from lmagent.tools.registry import (
    ArgumentError,
    bind_arguments,
    parse_arguments,
)

FILES_SHOWN = 10  # files a shell command changed, named in its result
CALL_NOT_RUN = "not run: the run ended before this call"
AFTER_FAILURE = "not run: an action before it in your reply failed. Fix that first"
Emit = Callable[..., None]  # emit(kind, **data): an event of the run
NextStep = Callable[[str, object, dict, bool], None]  # (name, arguments, result, ran changes)


class CallRunner:
    """The calls of one run: `ran` holds the current step's, `changes` counts those of the run
    that changed files (without checkpoints, the changing tools that succeeded), and
    `loop_message` says why the run must stop when a call was made too often. The toolset,
    context, gate, checkpoints and `look` are the run's as the harness has them; `checks` and
    `outcome` are the run's; `next_step` adds to a result what the model should do next
    (for a small model, lmagent.loop.checks.next_for_small_model)."""

    def __init__(
        self,
        harness: HarnessTools,
        records: tuple[WorkChecks, Outcome],
        emit: Emit,
        next_step: NextStep,
    ):
        self.toolset, self.ctx, self.gate = harness.toolset, harness.ctx, harness.gate
        self.checkpoints, self.look = harness.checkpoints, harness.look
        self.checks, self.outcome = records
        self.emit, self.next_step = emit, next_step
        self.loops = LoopDetector()
        self.loop_message = ""
        self.changes = 0
        self.ran: list[dict] = []  # the calls of this step that ran

    def forget_loops(self) -> None:
        """A new attempt (lmagent.loop.restarts): the calls of the one undone are no loop."""
        self.loops = LoopDetector()
        self.loop_message = ""

    def run(self, call: dict) -> dict:
        """Run one call and record it; its result, with the notes the model is owed."""
        name, raw, merged = call["name"], call["arguments"], ""
        self.ran.append({"name": name, "arguments": raw})
        if call.get("block") and name == "write":
            raw, merged = merged_block(raw, self.look)
        self.emit("tool_call", id=call["id"], name=name, arguments=raw)
        checkpointed = isinstance(name, str) and needs_checkpoint(
            name, self.toolset.changes_things(name)
        )
        before = self.checkpoints.before(name) if checkpointed else None
        result = self.execute(name, raw)
        change = self.checkpoints.after(before, name, call["id"])  # checkpoint, changed, diff
        if merged and result.get("success"):
            result["note"] = merged
        unchanged = "checkpoint" in change and not change.get("changed")
        if name == "write" and result.get("success") and unchanged:
            result["unchanged"] = UNCHANGED  # the 1.5B model wrote a file again as it was
        if name == "shell" and change.get("changed"):  # what a silent command did
            result["files_changed"] = change["changed"][:FILES_SHOWN]
        self.record(name, raw, result, change)
        self.emit(
            "tool_result",
            id=call["id"],
            name=name,
            result=result,
            success=bool(result.get("success")),
            **change,
        )
        return result

    def record(self, name: str, raw, result: dict, change: dict) -> None:
        """What the call did: files changed, the checks it owes, the outcome, its count."""
        arguments = try_json(raw)
        self.changes += self.changed_files(name, result, change)
        ran_changes = self.checks.record(name, arguments, result, change)
        self.next_step(name, arguments, result, ran_changes)
        self.outcome.record(name, arguments, result, change)
        self.check_loop(name, raw, result, change)

    def execute(self, name: str, raw) -> dict:
        """Check the arguments, ask permission when the mode needs it, then run the tool."""
        tool = self.toolset.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return self.toolset.execute(self.ctx, name, raw)  # refused, with the list offered
        try:
            arguments = bind_arguments(tool, raw)
        except ArgumentError as exc:
            result = {"success": False, "error": f"bad arguments: {exc}"}
            if isinstance(raw, str):
                result["arguments_received"] = raw[:300]
            return result
        if self.gate.needs_asking(tool.changes_things):
            self.emit("status", message=f"waiting for permission: {name}")
        allowed, note = self.gate.request(name, arguments, tool.changes_things)
        if not allowed:
            return {"success": False, "error": note}
        if note:
            self.emit("status", message=note)
        if tool.changes_things:
            self.ctx.session.sync()  # the call that causes a change is on disk before it
        with Ticker(self.emit, "tool", first=TOOL_FIRST, name=name):
            return self.toolset.execute(self.ctx, name, raw)

    def changed_files(self, name: str, result: dict, change: dict) -> bool:
        """Whether a call changed files: by its checkpoint; without one, a changing tool that
        succeeded."""
        if "checkpoint" in change:
            return bool(change.get("changed"))
        return bool(result.get("success")) and self.toolset.changes_things(name)

    def check_loop(self, name: str, raw, result: dict, change: dict) -> None:
        """Count the call; warn, note or stop on repeats. Only a call that changed files (by
        its checkpoint; without one, a changing tool that succeeded) starts the count anew:
        re-writing the same file and re-running a program is a loop, not progress. A write
        of what the file already held, whose check fails, is said to be so without the note
        that "this exact call failed before" (a different block, merged into the same file,
        was told so)."""
        count = self.loops.record(name, try_json(raw), self.changed_files(name, result, change))
        if count >= self.loops.stop_at:
            self.loop_message = (
                f"stuck in a loop: {name} was called {count} times with the same arguments"
            )
        elif count >= self.loops.warn_at:
            result["warning"] = (
                f"you have made this exact {name} call {count} times; its result will not "
                "change. Do something different or finish."
            )
        elif count > 1 and not error_of(result):  # a small model repeats a step that worked
            result["note"] = REPEATED_SUCCESS
        elif count > 1 and not result.get("unchanged"):  # ... and one that failed, unchanged,
            result["note"] = REPEATED_FAILURE  # hoping for another result


class ReplyCalls:
    """The replies' calls of one run, each run by `runner`: `acted` once any ran, `last_ok`
    whether all of the last reply's succeeded, and for the current step (`new_step`) `step_ok`,
    one of them succeeded, and `error`, the first error they met. `succeeded` is told of each
    call that succeeds; `text_calls` says whether the model calls tools as text (a small one);
    results are cut to `output_chars` (lmagent.loop.history)."""

    def __init__(
        self,
        runner: CallRunner,
        output_chars: int,
        succeeded: Callable[[], None],
        text_calls: Callable[[], bool],
    ):
        self.runner, self.output_chars = runner, output_chars
        self.succeeded, self.text_calls = succeeded, text_calls
        self.acted = False
        self.last_ok = True
        self.final_result: dict | None = None
        self.new_step()

    def new_step(self) -> None:
        """Before a step's reply: none of its calls has run yet."""
        self.runner.ran, self.error, self.step_ok = [], "", False

    def run(self, message: dict, calls: list[dict], native: bool) -> None:
        """Record the assistant `message`, run its calls, record their results. When every call
        only reads, the results join the message's fsync instead of waiting for it (a power
        cut then loses at most this step, and nothing it changed)."""
        runner = self.runner
        session, stop, gate = runner.ctx.session, runner.ctx.stop, runner.gate
        session.append(message)
        self.acted = True
        reads_only = not any(runner.toolset.changes_things(call["name"]) for call in calls)
        self.last_ok = True
        results = []
        for call in calls:
            if stop.stopped or self.final_result or gate.blocked:
                results.append({"success": False, "error": CALL_NOT_RUN})
                continue
            if not self.last_ok and not native and self.text_calls():
                results.append({"success": False, "error": AFTER_FAILURE})  # written unseen
                continue
            if call.get("refused"):  # a block that cannot be what it says (toolcalls.py)
                self.last_ok = False
                results.append({"success": False, "error": call["refused"]})
                continue
            result = runner.run(call)
            self.step_ok = self.step_ok or bool(result.get("success"))
            self.last_ok = self.last_ok and bool(result.get("success"))
            self.error = self.error or error_of(result)
            if result.get("success"):
                self.succeeded()
            if result.get("final") and result.get("success"):
                self.final_result = result  # e.g. a sub-agent's report_result ends its run
            results.append(result)
        messages = result_messages(calls, results, native, self.output_chars)
        session.extend(messages, group=reads_only)
        session.save_meta(durable=False)
        self.end_if_due()

    def end_if_due(self) -> None:
        """After a reply's calls: the run ends when it was stopped or blocked, a call was made
        too often, or a call gave its final result."""
        stop, gate = self.runner.ctx.stop, self.runner.gate
        if stop.stopped:
            raise Interrupted(stop.reason or "stopped")
        if gate.blocked:
            raise Blocked(gate.blocked)
        if self.runner.loop_message:
            raise Stuck(self.runner.loop_message)
        if self.final_result:
            raise Completed(self.final_result.get("summary", ""), result=self.final_result)


def try_json(raw) -> object:
    """A call's arguments parsed, or as they came when they cannot be."""
    try:
        return parse_arguments(raw)
    except ArgumentError:
        return raw


def error_of(result: dict) -> str:
    """A failed result's error, with the last line of the output when the error says only
    how the command exited ("command exited with code 1: cat: x: No such file or
    directory"); for a write whose check failed, that failure; blank for a success."""
    if result.get("success"):
        return failed_check(result)
    error = str(result.get("error") or "it failed")
    last = last_output_line(result)
    return f"{error}: {last}" if "exited with code" in error and last else error
