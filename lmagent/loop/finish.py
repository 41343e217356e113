"""What a reply that calls no tool means: the run finishes, or the finish is refused while a
check fails (lmagent.loop.verify), or the model is nudged on, or the run parks for a WAIT or
ends blocked. Each nudge is a rule by name (lmagent.loop.policy.RULES)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from lmagent.loop.attempts import Attempts
from lmagent.loop.checks import WorkChecks
from lmagent.loop.endings import Blocked, Completed, Waiting
from lmagent.loop.policy import Nudges
from lmagent.loop.prompts import (
    BAD_WAIT,
    BLOCKED_LINE,
    COMPLETE_LINE,
    NUDGE_ANNOUNCED,
    NUDGE_ANNOUNCED_TEXT,
    NUDGE_BLOCKED,
    NUDGE_BLOCKED_FIRST,
    NUDGE_CODE,
    NUDGE_CODE_BLOCKS,
    NUDGE_EMPTY,
    NUDGE_NOTHING_DONE,
    NUDGE_NOTHING_DONE_TEXT,
    NUDGE_WAIT,
    announces_work,
    bare_complete,
    final_text,
    open_work_nudge,
    parse_wait,
    shows_code,
)
from lmagent.loop.verify import Look, Shell, Verifier, not_verified

TASK_REPEATED_CHARS = 1000  # a task said again in a nudge, when it is no longer
NOTHING_SAVED = (
    "Nothing was saved: the code in your reply was only shown (to save a file, write its path "
    "on the line just before its block)."
)
NOTHING_DONE = "nothing done: the model declared the task complete without acting or answering"


@dataclass
class Done:
    """What the run has done, as a finish is judged."""

    text_calls: bool  # the model calls tools as text (a small one)
    acted: bool  # it called tools in this run
    resumed: bool  # an earlier run of the session took steps
    last_calls_ok: bool  # the last reply's calls all succeeded
    changed: list[str]  # the files this run changed
    open_work: int  # todos and plan steps not done
    task: str

    @property
    def never_acted(self) -> bool:
        """A model calling tools as text (a small one) that has not acted in this session."""
        return self.text_calls and not (self.acted or self.resumed)


class Finish:
    """The finishing decisions of one run, each nudge given at most as often as it says."""

    def __init__(
        self,
        rules: frozenset[str],
        nudges: Nudges,
        checks: WorkChecks,
        shell: Shell,
        look: Look,
        attempts: Attempts,
    ):
        self.rules = rules
        self.nudges = nudges
        self.checks = checks  # what the model changed and has not looked at
        self.shell, self.look = shell, look
        self.attempts = attempts  # a stalled attempt is begun again, not ended
        self.verifier = Verifier(shell, look, seen=attempts.checked)
        self.new_attempt()

    def new_attempt(self) -> None:
        """Nothing nudged or refused yet: at the start, and when the task is begun again."""
        self.verifier.new_attempt()
        self.nudged_open_work = False
        self.nudged_code = False
        self.nudged_nothing = False
        self.answer = ""  # the plain answer of a model told that nothing had been done
        self.nudged_blocked = False  # since the last call that succeeded
        self.nudged_wait = False

    def before_start(self, task: str) -> str:
        """Before the first reply to a new task: the commands it quotes, run, and their output
        (lmagent.loop.verify), for the model to see the crash it is to fix; blank when none."""
        self.verifier = Verifier(self.shell, self.look, task, self.attempts.checked)
        return "task_commands" in self.rules and self.verifier.before_start()

    def call_succeeded(self) -> None:
        """A BLOCKED after a failure may be nudged again."""
        self.nudged_blocked = False

    def decide(self, content: str, done: Done) -> None:
        """A reply without tool calls: finish, park, or push the model to keep going."""
        if not content.strip():
            self.nudges.reprompt(NUDGE_EMPTY)
            return
        if self.gives_up(content, done):
            return
        if self.decide_wait(content, done):
            return
        if COMPLETE_LINE.search(content) and not self.refuses(content, done):
            raise Completed(final_text(content))
        if COMPLETE_LINE.search(content):
            return
        if self.nudges_on(content, done):
            return
        if done.never_acted and self.nudged_nothing and not shows_code(content):
            self.answer = content.strip()  # told that nothing was done, it answers again
            self.keep_the_answer(done)  # the run ends, or the task is begun again
            return
        only_shown = self.only_shows_code(content, done)
        if not (self.finishes_unverified(done, only_shown) or self.finishes_unchecked(done)):
            raise Completed(content.strip())

    def gives_up(self, content: str, done: Done) -> bool:
        """A BLOCKED reply ends the run blocked, but once after a failed call, or (a model
        calling tools as text) before any call: a small model gives up at its first error,
        and at the first failing output it is shown (its first reply to 3 of 5 Exercism
        exercises, shown their failing tests, was BLOCKED) (nudged, True)."""
        blocked = BLOCKED_LINE.search(content)
        failed = not done.last_calls_ok or done.never_acted
        nudge = "blocked_nudge" in self.rules and failed and not self.nudged_blocked
        if blocked and nudge:
            self.nudged_blocked = True
            text = NUDGE_BLOCKED if done.acted else NUDGE_BLOCKED_FIRST
            self.nudges.nudge(text, "the model gave up; asking it once to go on")
            return True
        if blocked:
            raise Blocked(blocked.group(1).strip())
        return False

    def refuses(self, content: str, done: Done) -> bool:
        """Whether a TASK_COMPLETE is refused (the model nudged on)."""
        return (
            self.claims_without_tools(content, done)
            or self.finishes_unverified(done, code_shown=done.text_calls and shows_code(content))
            or self.finishes_unchecked(done)
        )

    def nudges_on(self, content: str, done: Done) -> bool:
        """An answer that is not a finish, nudged on (True): work announced and not done, code
        shown and not written, open todos, or (a small model) nothing done at all."""
        if "announced" in self.rules and announces_work(content):
            announced = NUDGE_ANNOUNCED_TEXT if done.text_calls else NUDGE_ANNOUNCED
            self.nudges.push(announced, "the model keeps announcing work without calling tools")
            return True
        code = "code_nudge" in self.rules and shows_code(content)
        if code and not done.acted and not self.nudged_code:
            self.nudged_code = True  # once: a how-to answer may show code on purpose
            self.nudges.nudge(self.code_nudge(done))
            return True
        if "open_work" in self.rules and done.open_work and not self.nudged_open_work:
            self.nudged_open_work = True
            self.nudges.nudge(open_work_nudge(done.open_work))
            return True
        nothing = "nothing_done" in self.rules and done.text_calls
        if nothing and not (done.acted or self.nudged_nothing):
            self.nudged_nothing = True  # a small model answers "8421" where it was to write it
            self.answer = content.strip()
            self.nudges.nudge(self.nothing_done_nudge(done))
            return True
        return False

    def keep_the_answer(self, done: Done) -> None:
        """A bare TASK_COMPLETE or another answer after "nothing has been done": the answer
        stands (a greeting answered "Hello! How can I help?"), unless the check that applies
        fails (a 1.5B model, never having acted, answered with the nudge's own words, and the
        run ended completed with the exercise's tests failing); with no answer given, the run
        ends blocked, nothing done. While the check fails and a new attempt can be made, the
        task is begun again instead: the 1.5B model spent its first reply listing the
        tests an Exercism exercise would fail, then answered the nudge with TASK_COMPLETE, and
        the run ended with half its time left."""
        failed = self.verifier.failure(done.changed) if "verify" in self.rules else None
        if self.answer and failed is None:
            raise Completed(self.answer)
        if failed is not None and self.attempts.possible():
            self.attempts.stalled_by(failed)
            return
        raise Blocked(NOTHING_DONE)

    def finishes_unverified(
        self, done: Done, only_shown: bool = False, code_shown: bool = False
    ) -> bool:
        """Refuse (True) a finish after files changed in this run, or after a write whose check
        failed, or an answer that `only_shown` code, while the check that applies fails, showing
        the model the failure (lmagent.loop.verify), and that code in the reply (`code_shown`,
        a block without a path: a 1.5B model sent one method three times, unsaved, untold);
        after MAX_REFUSALS the run ends blocked, "not verified: ...", never completed."""
        after_failing = self.verifier.failed_after_write  # a write that changed nothing, too
        if not ("verify" in self.rules and (done.changed or only_shown or after_failing)):
            return False
        failed = self.verifier.failure(done.changed)
        if failed is None:
            return False
        if self.verifier.exhausted() and not self.attempts.due():
            raise Blocked(not_verified(failed))
        refusal = self.verifier.refusal(failed)
        told = f"{NOTHING_SAVED}\n\n{refusal}" if only_shown or code_shown else refusal
        self.nudges.nudge(told, "not finished: the check fails")
        return True

    def only_shows_code(self, content: str, done: Done) -> bool:
        """An answer of a model calling tools as text that has never acted, showing code again
        after it was told that code only shown does nothing: it is no finish while a check
        fails (the 1.5B model showed poker.py three times; the run ended "completed · answered
        without using any tool" with all 37 tests of the task's command failing)."""
        return done.never_acted and self.nudged_code and shows_code(content)

    def finishes_unchecked(self, done: Done) -> bool:
        """Nudge once (True) a model calling tools as text (a small one) that finishes (with
        TASK_COMPLETE or an answer) with changes it has not looked at (lmagent.loop.checks),
        unless the harness has just run their tests or the task's commands and they passed."""
        if "unchecked" not in self.rules:
            return False
        unconfirmed = done.text_calls and not self.verifier.confirmed
        nudge = unconfirmed and self.checks.before_finishing(self.verifier.programs_ran, self.look)
        if nudge:
            self.nudges.nudge(nudge, "asking the model to check its changes first")
        return bool(nudge)

    def claims_without_tools(self, content: str, done: Done) -> bool:
        """Nudge once (True) for a TASK_COMPLETE before any tool was called in this run that
        shows code (a small model "doing" the task in prose and a code block) or says nothing
        else (calling tools as text, or after a nudge). Calling tools as text, a bare
        TASK_COMPLETE again, in a run that never acted, ends it blocked: nothing was done and
        nothing answered (a 1.5B model's only reply to a
        refactoring task was "Task_COMPLETE"). A resumed run may finish what an earlier one
        did."""
        if "claims_without_tools" not in self.rules or done.acted or done.resumed:
            return False
        bare = bare_complete(content) and (done.text_calls or self.nudges.count > 0)
        if bare and self.nudged_nothing and done.text_calls:
            self.keep_the_answer(done)  # the run ends, or the task is begun again
            return True
        if self.nudged_nothing or not (bare or shows_code(content)):
            return False
        self.nudged_nothing = True
        code = shows_code(content)
        self.nudges.nudge(self.code_nudge(done) if code else self.nothing_done_nudge(done))
        return True

    def decide_wait(self, content: str, done: Done) -> bool:
        """Raise Waiting for a valid future WAIT; True when the reply was handled otherwise. A
        small model's first WAIT is nudged once: the 1.5B model answered `WAIT: <tomorrow>:
        BLOCKED: ...` when told not to give up, and `WAIT: ...: The task is now waiting for
        you to continue.` after writing a solution it never tested; each run was parked,
        unchecked."""
        try:
            parsed = parse_wait(content)
        except ValueError:
            self.nudges.reprompt(BAD_WAIT)
            return True
        if parsed is None:
            return False
        when, reason = parsed
        if when <= datetime.now(timezone.utc):
            self.nudges.nudge(
                f"The time {when.isoformat()} has already passed; continue the task now."
            )
            return True
        if "wait_nudge" in self.rules and done.text_calls and not self.nudged_wait:
            self.nudged_wait = True
            self.nudges.nudge(NUDGE_WAIT, "the model asked to wait; asking it to act or finish")
            return True
        raise Waiting(reason or "waiting", wait_until=when.isoformat(), wait_reason=reason)

    def nothing_done_nudge(self, done: Done) -> str:
        """NUDGE_NOTHING_DONE; for a model calling tools as text, NUDGE_NOTHING_DONE_TEXT with
        the task said again (a small one, told only "nothing has been done", asked which task
        was meant)."""
        task = done.task.strip()
        if not done.text_calls:
            return NUDGE_NOTHING_DONE
        if not task or len(task) > TASK_REPEATED_CHARS:
            return NUDGE_NOTHING_DONE_TEXT
        return f"{NUDGE_NOTHING_DONE_TEXT}\n\nThe task: {task}"

    @staticmethod
    def code_nudge(done: Done) -> str:
        return NUDGE_CODE_BLOCKS if done.text_calls else NUDGE_CODE
