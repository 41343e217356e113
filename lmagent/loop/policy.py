"""The small-model policy's shared parts: its rules, each by name, and the nudges they (and the
loop) tell the model with.

The rules themselves live beside the loop: repeats.py (a reply that repeats an earlier one),
finish.py (a reply without tool calls: finish, refuse, nudge, wait or give up), checks.py (the
next step named in a result). Each rule is
named in RULES; a run is given the names it applies (`run_agent(..., rules=...)`, all by
default), so a test can switch one off and see the loop run without it.
"""

from __future__ import annotations

from collections.abc import Callable

from lmagent.core.text import shortened
from lmagent.loop.endings import Failed, Stuck

MAX_FORMAT_ERRORS = 3
MAX_NUDGES = 3
STOPPED_EARLY = "the model stopped early; nudging it to continue"  # a nudge's status, by default

RULES = frozenset(
    {
        "act_then_answer",  # TOOL_SET=tiny, constrained: call on the user's turn, then answer
        "named_files",  # the files a task names, shown before the first reply
        "task_commands",  # the commands a task quotes, run before the first reply
        "resample",  # a repeated action or answer asked for again, sampled, before it is taken
        "stop_repeat",  # a reply beginning as an earlier one's words did: stopped, asked again
        "sample_after_repeat",  # the reply after a repeated one sampled warm
        "one_action",  # a reply in text form read up to its first action: the server stops there
        "cut_in_block",  # a reply cut off at its length limit inside a block: said, asked again
        "not_run_again",  # an action that failed, nothing changed since: not run, told why
        "auto_check",  # a small model's write or edit: the finish's check run, its output shown
        "data_check",  # a small model's write or edit of a .json file: parsed, told if broken
        "next_step",  # a write's, a first clean run's or a commit's result names the next step
        "blocked_nudge",  # BLOCKED after a failed call: nudged once to go on
        "wait_nudge",  # a small model's first WAIT: nudged once to act or finish
        "claims_without_tools",  # TASK_COMPLETE before any tool, with code or nothing else
        "verify",  # a finish after changes refused while its check fails
        "fresh_start",  # a check failing again (or a finish, nothing done, while one fails):
        # the attempt undone, the task begun again, sampled
        "unchecked",  # a finish with changes not looked at: shown, or asked to check, once
        "announced",  # work announced without a call: pushed to do it
        "code_nudge",  # code shown before any tool was called: told to act, once
        "open_work",  # a finish with open todos or plan steps: reminded once
        "nothing_done",  # an answer from a small model that never acted: told, once
    }
)


class Nudges:
    """What the model is told when its reply cannot be used or cannot end the run, counted:
    after MAX_FORMAT_ERRORS unusable replies in a row the run fails, after MAX_NUDGES nudges in
    a row of one kind (`push`) it ends blocked. `problem` is the step's, for a no-progress
    ending."""

    def __init__(self, status: Callable[[str], None], append: Callable[[dict], None]):
        self.status = status  # a status line for the front end
        self.append = append  # a message into the session
        self.count = 0
        self.format_errors = 0
        self.problem = ""

    def reprompt(self, problem: str) -> None:
        """Tell the model its reply could not be used; after MAX_FORMAT_ERRORS the run fails."""
        self.format_errors += 1
        if self.format_errors > MAX_FORMAT_ERRORS:
            raise Failed(
                f"the model's replies could not be used {self.format_errors} times in a row "
                f"(last problem: {shortened(problem, 200)})"
            )
        self.status(f"format error {self.format_errors}/{MAX_FORMAT_ERRORS}")
        self.problem = shortened(problem, 160)
        self.append({"role": "user", "content": problem, "note": "format error"})

    def push(self, text: str, stuck: str, why: str = "") -> None:
        """Nudge the model on (the person sees `why`); after MAX_NUDGES in a row the run ends
        blocked with `stuck`."""
        if self.count >= MAX_NUDGES:
            raise Stuck(stuck)
        self.nudge(text, why or STOPPED_EARLY)

    def nudge(self, text: str, why: str = STOPPED_EARLY) -> None:
        """Tell the model `text`; the person sees `why`."""
        self.count += 1
        self.problem = shortened(text, 160)
        self.status(why)
        self.append({"role": "user", "content": text, "note": "nudge"})

    def forgive(self) -> None:
        """A reply that calls tools: the counts in a row start again."""
        self.format_errors = 0
        self.count = 0


def reply_rule(tool_set: str, tool_form: str, history: list[dict]) -> str:
    """With constrained calls, TOOL_SET=tiny holds the model to act, then answer: a reply to
    the user's message must call a tool, a reply to tool results must answer (a tiny model
    that may answer first invents files and says "done"; one that may call again repeats
    its call forever). Without a schema nothing can hold it: no rule."""
    if not (tool_set == "tiny" and tool_form == "constrained") or not history:
        return ""
    return "call" if history[-1]["role"] == "user" else "answer"
