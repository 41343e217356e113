"""A small model's attempts at its task (rule `fresh_start`): when the harness's check keeps
failing, the attempt is undone and the task begun again from its opening, sampled; so is an attempt
whose model, never having acted, finishes again while the check fails.

A 1.5B model told that its solution fails its tests rarely repairs it: on held-out Exercism
exercises it wrote the same reply again, said that nothing was wrong, or answered "I cannot
reproduce the issue", each copy of the failed attempt in its history making the next likelier.
A new try, sampled, from a history that holds only the task, is not weighed down by them. So
when a check fails with no fewer failures than the best of the attempt so far (the second
failing check at the earliest; in a new attempt, the first when it does no better than the
run's best), when the model proposes again an action that failed after such a check, or when
the attempt goes nowhere while the check fails (a call repeated, steps without progress), the
files the attempt changed go back as they were (the checkpoint restore that `--undo` makes,
recorded as a step of the session, so the attempt can be brought back), the history the model
is sent is cut back to what it was before the attempt's first reply (the transcript keeps
every message), and the next reply is sampled at FRESH_TEMPERATURE. At most RESTARTS times;
then the run goes on to its ending as before ("not verified" while the check fails). A run
that so ends unfinished leaves the files as they were at its closest check, the one of the
fewest failures, when a later one of the same command failed more (`closest_step`): a third
attempt whose first write broke every test was what the user was left with.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lmagent.loop.verify import Check

# new attempts after the first. On held-out Exercism exercises whose first attempt had failed,
# a new attempt's first write passed its check 5 times in 54, a reply to a failed check once in
# 53; allowed 2, runs out of time spent what was left on such replies (bench/exercism_notes.md)
RESTARTS = 5
FRESH_TEMPERATURE = 0.7  # the first reply of a new attempt
COUNTED = re.compile(r"(\d+) (?:failed|errors?)\b")  # pytest's counts: "3 failed, 1 error"
RAN = re.compile(r"\d+ (?:failed|passed)\b")  # counts of tests that ran to a result
# a pytest run in which no test ran (a module that no longer imports: "1 error"; no summary):
# worse than any run whose tests ran, however many failed
NOTHING_RAN = 1_000_000


def failures(check: Check) -> int:
    """How badly a check failed: the tests failing or erring in a pytest run (NOTHING_RAN when
    none ran), else 1 (0 when it passed)."""
    if not check.failed:
        return 0
    outcome = check.outcome
    if outcome is None:
        return 1
    if not RAN.search(outcome[0]):
        return NOTHING_RAN
    return sum(int(n) for n in COUNTED.findall(outcome[0])) or 1


class Attempts:
    """The attempts of one run. `small` says whether the rule applies now (a model calling
    tools as text, sampled cold)."""

    def __init__(self, rules: frozenset[str], small: Callable[[], bool]):
        self.on = "fresh_start" in rules
        self.small = small
        self.restarts = 0
        self.opening: tuple[int, int] | None = None  # (history length, revision) at its start
        self.steps_before = 0  # the session's checkpoint steps when the attempt began
        self.best: int | None = None  # the fewest failures a check of this attempt had
        self.failed: Check | None = None  # the check that stalled the attempt
        self.last: Check | None = None  # the attempt's last failing check
        self.sample = False  # the next reply begins a new attempt: sampled
        self.steps: Callable[[], int] | None = None  # the session's checkpoint steps so far
        self.closest: tuple[Check, int, int] | None = None  # (check, failures, step) of the run
        self.latest: tuple[str, int] | None = None  # the last check's (command, failures)

    def begin(self, history_length: int, revision: int, steps: Callable[[], int]) -> None:
        """Before a reply: the first of the run begins the attempt, with the history as it is
        and the session's checkpoint `steps` so far."""
        if self.on and self.opening is None:
            self.opening = (history_length, revision)
            self.steps_before = steps()
            self.steps = steps

    def checked(self, check: Check) -> None:
        """A check the harness ran after a change or for a finish: the attempt is stalled when
        it fails with no fewer failures than the attempt's best, or (the first check of a new
        attempt) than the run's best; never once one passed (a model that breaks what worked is
        shown that, its work is not undone)."""
        count = failures(check)
        if count and 0 < self.best_before(check) <= count:
            self.failed = check
        self.best = count if self.best is None else min(self.best, count)
        self.last = check if count else None
        self.keep_closest(check, count)

    def best_before(self, check: Check) -> int:
        """The fewest failures a check failing now is measured against: the attempt's best; for
        a new attempt's first check, the run's best of its command; 0 (never stalled) when none.
        On held-out Exercism exercises a new attempt's write answering its failed check passed
        once in 70, its first write 7 times in 86: one that does no better is given up at once."""
        if self.best is not None:
            return self.best
        kept = self.closest
        return kept[1] if self.restarts and kept and kept[0].command == check.command else 0

    def keep_closest(self, check: Check, count: int) -> None:
        """The run's check of the fewest failures so far, and the step the files were at then
        (a check of another command starts the count again: their failures do not compare)."""
        if self.steps is None:
            return
        self.latest = (check.command, count)
        kept = self.closest
        if kept is None or kept[0].command != check.command or count < kept[1]:
            self.closest = (check, count, self.steps())

    def closest_step(self) -> tuple[Check, int] | None:
        """The closest check and the step to go back to, when the last check (of the same
        command) failed more, for a small model (as `possible`); None otherwise."""
        if self.closest is None or self.latest is None or not self.small():
            return None
        check, count, step = self.closest
        worse = self.latest[0] == check.command and self.latest[1] > count
        return (check, step) if worse else None

    def repeated(self) -> None:
        """The model proposed again an action that failed, nothing changed since (not run:
        lmagent.loop.repeats): after a failing check of the attempt, the attempt is stalled as
        if that check had failed again (the 1.5B model sent its failing solution again three
        times, then said it was done)."""
        if self.last is not None:
            self.failed = self.last

    def stalled_by(self, check: Check) -> None:
        """The attempt is stalled by `check`, failing where the model, never having acted,
        finishes again (lmagent.loop.finish): the task is begun again."""
        self.failed = check

    def stalled_by_repeat(self) -> bool:
        """Whether an action proposed again that failed before (`repeated`) would stall the
        attempt and begin the task again."""
        return self.last is not None and self.possible()

    def stuck(self) -> bool:
        """The attempt goes nowhere (lmagent.loop.endings.Stuck: the 1.5B model ran its module
        five times, told each time that nothing would change) while the run's check fails: it
        is stalled, when a new attempt may be made."""
        if not self.possible() or self.closest is None or not self.closest[1]:
            return False
        self.failed = self.closest[0]
        return True

    def due(self) -> bool:
        """Whether the attempt is to be undone and the task begun again."""
        return self.possible() and self.failed is not None

    def possible(self) -> bool:
        """Whether a new attempt may still be made (the rule applies, restarts are left)."""
        return self.on and self.small() and self.restarts < RESTARTS and self.opening is not None

    def restarted(self, revision: int, steps: int) -> None:
        """A new attempt begins from the same opening (the history cut back to it, now at
        `revision`), after the session's checkpoint `steps` so far."""
        self.restarts += 1
        self.opening = (self.opening[0], revision)
        self.steps_before = steps
        self.best, self.failed, self.last, self.sample = None, None, None, True

    def give_up(self) -> None:
        """No new attempt can be made in this run (its files could not be put back)."""
        self.restarts = RESTARTS
        self.failed = None

    def temperature(self) -> float | None:
        """FRESH_TEMPERATURE for the first reply of a new attempt, once."""
        sample, self.sample = self.sample, False
        return FRESH_TEMPERATURE if sample else None
