"""What a task still asks for when a small model (calling tools as text) finishes: the files it
asks for, still missing or empty; a change to the files it names, none made; a commit, with
files changed after the last one. Each is asked once: a model that insists is taken at its
word. The task's words are read here (lmagent.loop.named); what the run did comes from its
WorkChecks and Outcome.
"""

from __future__ import annotations

from pathlib import Path

from lmagent.loop.checks import GIT_COMMAND, RUNNERS, WorkChecks
from lmagent.loop.named import (
    Look,
    absent_named,
    asks_commit,
    asks_git,
    can_create,
    example_paths,
    files_to_change,
    named_paths,
    unmade,
)
from lmagent.loop.outcome import Outcome
from lmagent.loop.prompts import unmade_nudge


def unchanged_nudge(files: list[str]) -> str:
    """For a model finishing a task that asks for a change to `files` with no file changed
    (a small model ran app.py without the flag it was to add, and said the flag was added)."""
    if len(files) > 1:
        return (
            f"Not finished: no file has changed yet, and the task asks to change "
            f"{', '.join(files)}. Make the change, then check it and reply TASK_COMPLETE."
        )
    path = files[0]
    runner = RUNNERS.get(Path(path).suffix)
    check = f"run it ({runner} {path})" if runner else "show it"
    return (
        f"Not finished: {path} has not changed, and the task asks to change it. Write {path} "
        f"again, whole, with the change, then {check} and reply TASK_COMPLETE."
    )


def commit_nudge(files: list[str]) -> str:
    """For a model finishing a task that asks for a commit with `files` changed after the last
    one (a small model switched to the branch, wrote notes.txt there and was done)."""
    names = " ".join(files[:3])
    return (
        f"Not finished: {', '.join(files[:3])} changed after the last commit, and the task asks "
        f"to commit. Commit: git add {names} && git commit -m MESSAGE; then reply TASK_COMPLETE."
    )


class TaskAsks:
    """The paths a task names (`named`), those of them it asks for (`to_create`: not there
    when it was given) and those it asks to change (`to_change`: there, the task starting
    with add, fix...). A resumed run knows only `named`: the rest were judged when the task
    was given, against the files as they were then."""

    def __init__(self, task: str, look: Look | None = None):
        self.task = task
        self.named = named_paths(task)
        self.to_create: list[str] = []
        self.to_change: list[str] = []
        self.not_here: list[str] = []  # the files it names, when none is in the workspace
        self.look = look or (lambda name, arguments: {"success": False})
        self.asked: set[str] = set()
        if look is not None:
            examples = example_paths(task)
            self.to_create = [p for p in self.named if p not in examples and can_create(p, look)]
            self.to_change = files_to_change(task, look)
            self.not_here = absent_named(task, look)

    def unmade(self) -> dict[str, str]:
        """The files the task asks for that are still missing or empty."""
        return unmade(self.to_create, self.look)

    def undone(self, checks: WorkChecks, outcome: Outcome) -> str:
        """The question for a model finishing now, each kind once; "" when none is due."""
        questions = {
            "unmade": self.unmade_question,
            "unchanged": lambda: self.unchanged(outcome),
            "uncommitted": lambda: self.uncommitted(checks),
        }
        for kind, question in questions.items():
            text = "" if kind in self.asked else question()
            if text:
                self.asked.add(kind)
                return text
        return ""

    def unmade_question(self) -> str:
        missing = self.unmade()
        return unmade_nudge(missing) if missing else ""

    def unchanged(self, outcome: Outcome) -> str:
        """A change asked for, and no file changed nor, in a task about the repository, git
        command run (the checkpoints do not see .git). Asked to add a flag to greet.py, a
        1.5B model ran git init and git commit and was done."""
        if not self.to_change or outcome.files:
            return ""
        git = any(GIT_COMMAND.search(command) for command in outcome.commands)
        if git and asks_git(self.task):
            return ""
        return unchanged_nudge(self.to_change)

    def uncommitted(self, checks: WorkChecks) -> str:
        """A commit asked for, and files changed after the last one."""
        if not (checks.uncommitted and asks_commit(self.task)):
            return ""
        return commit_nudge(checks.uncommitted)
