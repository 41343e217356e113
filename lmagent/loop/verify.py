"""Checks by running things, never by the task's words (as aider's --auto-test): a command the task
quotes is run before the model's first reply and its output shown (unless it only asks for its
arguments, or is a test run in which every test fails); a finish after files changed is accepted
when the check that applies passes: the workspace's tests, else the commands the task quotes as
code, else each Python program changed is run (for at most PROGRAM_SECONDS: a usage error, or a
program still running then, is no failure: it wants arguments, or it serves), or only compiled
when it reads arguments or input. Test files pytest collects no test from (asserts at the top
level) are run as scripts instead. Otherwise the model is shown the failure, at most
MAX_REFUSALS times, and then the run ends "not verified". Each check is the harness's own shell
call, run in the sandbox only when the permission gate allows it, and checkpointed as a step:
what it changes is undone like the model's commands. Seen: a 1.5B model ended "completed" with a
test file pytest could not collect, and with all of an exercise's tests failing after a
sub-agent said "Implemented"."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from lmagent.core.text import cut_middle, shortened

# how a program is run, by its suffix: the harness runs it with the first; a command starting
# with any of them (or with pytest) runs the files it names
RUNNERS = {".py": ("python3", "python"), ".sh": ("sh", "bash"), ".js": ("node",)}
TASK_RUNNERS = (*RUNNERS[".py"], "pytest")  # the commands a task may quote that are run
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PROMPT_LINE = re.compile(r"^\s*\$ (.+)$", re.M)
BARE_RUN = re.compile(rf"(?<![\w/.-])(?:{'|'.join(TASK_RUNNERS)}) [\w./-]+\.py\b")  # python3 x.py
TEST_FILES = ("**/test_*.py", "**/*_test.py")
# a check reads no __pycache__ (one the user's own runs left had cached calc.py; rewritten
# within the same second at the same size, the check ran the old bytecode; no command writes
# one, nor cuts pytest's lines at 80 columns: see the sandbox's command_env)
CHECK_ENV = "PYTHONPYCACHEPREFIX=/dev/null "
# short tracebacks: the failing line and its error, not the whole test (a test's 20 lines of
# dict literals came before the TypeError that mattered, and the end of the output was shown)
SHORT_TRACEBACKS = "--tb=short"
# pytest's section rules and progress line, padded to the terminal's width
RULE_LINE = re.compile(r"^([=_-])\1{2,}(?: (.*?) \1{3,})?$", re.M)
PROGRESS_PADDING = re.compile(r" {2,}(\[ *\d+%\])$", re.M)
PYTEST_TIME = re.compile(r" in [\d.]+s\b(?: \([\d:]+\))?")  # "in 0.12s (0:00:00)" of its counts
PYTEST_RUN = re.compile(r"^(?:\w+=\S* )*(?:python3? -m pytest|pytest)(?: |$)")
# every test, not -x: "1 failed" after a fix hid that 3 of 10 passed where none had before
PYTEST = f"python3 -m pytest -q {SHORT_TRACEBACKS} -p no:cacheprovider"
COMPILE = "python3 -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], \"exec\")'"
# a program that reads arguments or input is only compiled: run without them it may fail right
TAKES_INPUT = re.compile(
    r"\bsys\.argv\b|\bargparse\b|\binput\(|\bsys\.stdin\b|\bfileinput\b|\bgetopt\b"
    r"|^\s*(?:from|import) (?:click|typer)\b",
    re.M,
)
PROGRAM_SECONDS = 20  # a changed program runs this long at most: a server or a wait is no failure
RUN_PROGRAM = f"timeout {PROGRAM_SECONDS} python3 "
TIMED_OUT = 124  # timeout's exit code
NO_PYTEST = "No module named pytest"
NO_TESTS = 5  # pytest's exit code when it collected no test: the test files are scripts
USAGE_ERROR = 2  # argparse's exit code: the program wants arguments, it did not crash
MAX_COMMANDS = 2  # task commands run
SHOWN_CHARS = 1500  # of a check's output: its start (the first failure) and its end (the counts)
# of a pytest run's failing tests, shown to the model: the first ones of different errors with
# their tracebacks (each cut to FAILURE_CHARS), the others as their summary line (the error), then
# only how many more
TRACED_FAILURES = 2
LISTED_FAILURES = 6
FAILURE_CHARS = 500
FAILURE_SECTIONS = ("FAILURES", "ERRORS")
SUMMARY_SECTION = "short test summary info"
ALL_FAILED = re.compile(r"(\d+) failed(?:, \d+ warnings?)?")  # a pytest run's counts
NODE_PATH = re.compile(r"^(FAILED|ERROR) \S*::")  # "FAILED x_test.py::XTest::", before the name
CHECK_TIMEOUT = 60
MAX_REFUSALS = 2  # finishes refused for a failing check before the run ends not verified

# runs a command as the harness (asking the user when the mode needs it and the flag says so);
# None when not allowed
Shell = Callable[[str, bool], dict | None]
Look = Callable[[str, dict], dict]
Seen = Callable[["Check"], None]


@dataclass
class Check:
    command: str
    result: dict

    @property
    def failed(self) -> bool:
        """A failure: a non-zero exit, except a program's usage error and a timeout (a server,
        a program waiting for input: nothing to judge)."""
        code = self.result.get("exit_code")
        if code is None:
            return False
        return code != 0 and not self.usage_error and not self.cut_short

    @property
    def cut_short(self) -> bool:
        """A changed program still running when its time was up (a server, a wait)."""
        return self.command.startswith(RUN_PROGRAM) and self.result.get("exit_code") == TIMED_OUT

    @property
    def usage_error(self) -> bool:
        """The program wants arguments the command did not give (argparse's exit code)."""
        return self.result.get("exit_code") == USAGE_ERROR and "pytest" not in self.command

    @property
    def all_failed(self) -> bool:
        """A pytest run of more tests than a check shows tracebacks of, every one failing (none
        passing, none in error): the picture of code not written yet (an exercise's stub),
        where one or two failing tests point at a bug."""
        counts = ALL_FAILED.fullmatch(self.outcome[0]) if self.outcome else None
        return counts is not None and int(counts.group(1)) > TRACED_FAILURES

    @property
    def collected_nothing(self) -> bool:
        return "pytest" in self.command and self.result.get("exit_code") == NO_TESTS

    def shown(self) -> str:
        """The command, how it ended and its output (`shown_output`), for the model."""
        output = self.shown_output()
        code = self.result.get("exit_code")
        ended = "timed out" if code is None else f"exit code {code}"
        return f"$ {self.command}\n({ended})\n{output}".rstrip()

    def shown_output(self) -> str:
        """Its output as the model is shown it: a pytest run's condensed (rules narrowed, the
        first failures traced, the others listed), the middle cut out."""
        output = str(self.result.get("output") or "").strip()
        if PYTEST_RUN.match(self.command):  # a program's own dashes are its output
            output = condensed(unpadded(output))
        return cut_middle(output, SHOWN_CHARS, "\n[… {} characters cut …]\n")

    @property
    def outcome(self) -> tuple[str, frozenset[str]] | None:
        """A pytest run's outcome: its counts ("4 failed, 17 passed", no time) and the tests it
        names as failing or erring; None for another command."""
        if not PYTEST_RUN.match(self.command):
            return None
        lines = str(self.result.get("output") or "").strip().splitlines()
        counts = PYTEST_TIME.sub("", lines[-1]).strip("= ") if lines else ""
        failing = (line.split(" - ")[0] for line in lines if line.startswith(("FAILED", "ERROR")))
        return counts, frozenset(failing)

    def last_line(self) -> str:
        lines = str(self.result.get("output") or "").strip().splitlines()
        code = self.result.get("exit_code")
        return shortened(lines[-1].strip(), 160) if lines else f"exit code {code}"


def task_commands(task: str, look: Look, bare: bool = True) -> list[str]:
    """The commands a task quotes literally (a `code` span, a `$ ` line and, with `bare`,
    python3 or pytest and a .py file in the text, its arguments unknown) that run Python on a
    file in the workspace, or pytest: what the user saw fail or wants to work. Nothing is read
    from the task's other words."""
    quoted = CODE_SPAN.findall(task) + PROMPT_LINE.findall(task)
    found = []
    for command in (c.strip() for c in quoted + BARE_RUN.findall(task) * bare):
        words = command.split()
        if not words or words[0] not in TASK_RUNNERS or command in found:
            continue
        files = [w for w in words[1:] if w.endswith(".py")]
        if all(look("read", {"path": f}).get("success") for f in files[:1]):
            found.append(command)
    return found[:MAX_COMMANDS]


def unpadded(output: str) -> str:
    """pytest's section rules ("=== FAILURES ===", "___ test_name ___") and progress lines
    as wide as their words, not padded to the check's 160 columns: padded, they took a third
    of the characters shown."""
    output = RULE_LINE.sub(lambda m: f"{m[1] * 3} {m[2]} {m[1] * 3}" if m[2] else m[1] * 3, output)
    return PROGRESS_PADDING.sub(r" \1", output)


def condensed(output: str) -> str:
    """A pytest run's output (its rules unpadded) as the model is shown it: its progress line,
    TRACED_FAILURES failing tests with their tracebacks (the first of each error), the next
    LISTED_FAILURES as their summary lines ("FAILED test_x - AssertionError: None != []"), how
    many more, and its counts; unchanged when nothing failed. Shown whole, 24 failing tests
    filled the 1,500 characters with tracebacks of the same error (about 450 prompt tokens,
    11 s of reading on 2 cores, at every check of a run that fixed one function at a time)."""
    lines = output.splitlines()
    head, tests, summary, section, title = [], [], [], None, ""
    for line in lines[:-1]:  # the last line is the counts
        rule = RULE_LINE.match(line)
        kind = rule[1] if rule and rule[2] else ""  # "=== FAILURES ===", "___ test_x ___"
        if kind == "=":
            section = rule[2]
        elif section is None:
            head.append(line)
        elif section in FAILURE_SECTIONS:
            if kind == "_" or not tests:
                tests.append([line])
                title = title or section  # the section of the first failing test
            else:
                tests[-1].append(line)
        elif section == SUMMARY_SECTION and line.startswith(("FAILED ", "ERROR ")):
            summary.append(NODE_PATH.sub(r"\1 ", line))
    if not tests:
        return output
    traced = [
        cut_middle("\n".join(test), FAILURE_CHARS, "\n[… {} characters cut …]\n")
        for test in distinct_first(tests, TRACED_FAILURES)
    ]
    listed = [line for line in summary if not any(shows(test, line) for test in traced)]
    more = len(listed) - LISTED_FAILURES
    shown = [*head, f"=== {title} ===", *traced]
    if listed:
        shown += ["=== the other failing tests ===", *listed[:LISTED_FAILURES]]
    if more > 0:
        shown.append(f"(and {more} more)")
    return "\n".join([*shown, lines[-1]])


def distinct_first(tests: list[list[str]], count: int) -> list[list[str]]:
    """`count` failing tests (each its traceback's lines) in the order they ran, the first of
    each different error before a second of the same one: when 16 tests failed on a missing
    attribute and 10 on `move()` taking the wrong arguments, the first two tracebacks were both
    of the missing attribute, and no line showed how the tests call `move`."""
    errors = [next((x for x in reversed(test) if x.startswith("E ")), "") for test in tests]
    firsts = [i for i, error in enumerate(errors) if error not in errors[:i]]
    chosen = (firsts + [i for i in range(len(tests)) if i not in firsts])[:count]
    return [tests[i] for i in sorted(chosen)]


def shows(traced: str, summary: str) -> bool:
    """Whether a failing test's traceback (`traced`, from its "___ XTest.test_x ___" or "___
    ERROR collecting x_test.py ___") is the one a summary line ("FAILED test_x - ...", "ERROR
    x_test.py") names."""
    title = traced.split("\n", 1)[0].strip("_ ")
    name = summary.split(" ", 1)[1].split(" - ", 1)[0]
    return title == name or title.endswith((f".{name}", f" {name}"))


def short_tracebacks(command: str) -> str:
    """A pytest command the harness runs (the task's, or its own) with short tracebacks,
    unless it chooses its own or is more than one command."""
    if not PYTEST_RUN.match(command) or "--tb" in command or any(c in command for c in "|;&>"):
        return command
    return f"{command} {SHORT_TRACEBACKS}"


def test_files(look: Look) -> list[str]:
    """The workspace's test files (test_*.py, *_test.py)."""
    found = []
    for pattern in TEST_FILES:
        found += look("glob", {"pattern": pattern}).get("matches") or []
    return sorted(set(found))


class Verifier:
    """The checks of one run: `before_start` runs the task's commands; `failure` runs the check
    that applies to a finish and returns it when it failed; `refuse` counts the refusals."""

    def __init__(self, shell: Shell, look: Look, task: str = "", seen: Seen = lambda check: None):
        self.shell = shell
        self.look = look
        self.seen = seen  # each check run after a change or for a finish
        self.commands = task_commands(task, look) if task else []  # shown before the start
        self.quoted = task_commands(task, look, bare=False) if task else []  # checks
        self.refused = 0
        self.confirmed = False  # the last finish's tests or task commands ran and passed
        self.failed_after_write = False  # the check run after the last write or edit failed
        self.programs_ran: dict[str, Check] = {}  # the last finish's clean runs, by program
        self.shown: tuple | None = None  # how the last check the model was shown ended
        self.shown_first: tuple | None = None  # how the task's commands ended (before_start)

    def before_start(self) -> str:
        """The task's commands run now, as a message for the model; blank when none ran. A
        usage error is not shown: a command named in the text is run without the arguments
        the text gives it (where they end cannot be told), and the 1.5B model read "the
        following arguments are required" as the task being impossible. Nor is a test run in
        which every test fails (`all_failed`): shown an exercise's failures of a stub, the
        1.5B model began 11 of 16 first replies explaining them ("The error indicates that
        the function is returning None"); not shown them, 7 of 8 began with a block
        (bench/exercism_notes.md). The first check after a change shows them."""
        ran = (self.run(command) for command in self.commands)
        checks = [c for c in ran if c is not None and not c.usage_error and not c.all_failed]
        if not checks:
            return ""
        self.shown = self.shown_first = checks[-1].outcome
        shown = "\n\n".join(f"```\n{check.shown()}\n```" for check in checks)
        return f"The commands named in the task, run before you start:\n\n{shown}"

    def failure(self, changed: list[str]) -> Check | None:
        """The first failing check for a finish after `changed` files; None when all pass or
        none applies."""
        commands = self.applying(changed)
        checks = [check for check in map(self.run, commands) if check is not None]
        if any(check.collected_nothing for check in checks):
            commands = self.scripts()
            checks = [check for check in map(self.run, commands) if check is not None]
        failed = next((check for check in checks if check.failed), None)
        if checks:
            self.seen(failed or checks[-1])
        self.programs_ran = {
            shlex.split(check.command)[-1]: check
            for check in checks
            if check.command.startswith(RUN_PROGRAM) and not check.failed and not check.cut_short
        }
        programs = (RUN_PROGRAM, COMPILE)
        self.confirmed = failed is None and any(not c.startswith(programs) for c in commands)
        return failed

    def applying(self, changed: list[str]) -> list[str]:
        """The workspace's tests when it has any, else the commands the task quotes as code,
        else running each Python program changed."""
        if test_files(self.look):
            return [PYTEST]
        if self.quoted:
            return list(self.quoted)
        programs = [p for p in changed if PurePosixPath(p).suffix == ".py"]
        checks = [self.program_check(path) for path in programs]
        return [check for check in checks if check][:MAX_COMMANDS]

    def check_for(self, path: str) -> str | None:
        """The check a finish after changing `path` runs, as the model may run it: the tests or
        the command the task quotes; None when it would only run or compile the program."""
        commands = self.applying([path])
        if not commands or commands[0].startswith((RUN_PROGRAM, COMPILE)):
            return None
        return commands[0]

    def after_change(self, command: str | None) -> Check | None:
        """The check a finish after a change would run (`check_for` names it), run now if it
        needs no one's permission (the person is asked at the finish, not at every write);
        None when there is none, it is not run, or pytest found no test to run."""
        check = self.run(command, ask=False) if command else None
        if check is None or check.collected_nothing:
            return None
        self.seen(check)
        self.confirmed = not check.failed
        self.failed_after_write = check.failed
        return check

    def shows_again(self, check: Check) -> bool:
        """Whether `check` ends as the last check shown did (the same counts, the same tests
        failing), and becomes the last shown: its output would tell the model nothing new.
        Each time, up to 3,200 characters of the same pytest run were shown again (the
        model's own run of the tests just checked, a refused finish), 23,000 in 15 runs."""
        outcome = check.outcome
        same = outcome is not None and outcome == self.shown
        self.shown = outcome
        return same

    def program_check(self, path: str) -> str | None:
        """Running a changed program, or compiling one that reads arguments or input; None
        when it cannot be read (gone, or a link out of the workspace)."""
        read = self.look("read", {"path": path})
        if not read.get("success"):
            return None
        command = COMPILE + " " if TAKES_INPUT.search(str(read.get("content"))) else RUN_PROGRAM
        return command + shlex.quote(path)

    def scripts(self) -> list[str]:
        """The workspace's test files run as programs, when pytest found no test in them."""
        files = test_files(self.look)[:MAX_COMMANDS]
        return [f"python3 {shlex.quote(path)}" for path in files]

    def run(self, command: str, ask: bool = True) -> Check | None:
        """`command` run as a check: with CHECK_ENV, and pytest's short tracebacks."""
        command = short_tracebacks(command)
        result = self.shell(CHECK_ENV + command, ask)
        if result is None:
            return None
        check = Check(command, result)
        if check.command.startswith("python3 -m pytest") and NO_PYTEST in str(result.get("output")):
            return None  # no pytest where commands run: nothing to judge by
        return check

    def refusal(self, check: Check) -> str:
        """What the model is told when its finish is refused for `check`; raises nothing."""
        self.refused += 1
        if self.shows_again(check):
            return (
                f"Not finished: the check fails as shown above ({check.last_line()}). Fix "
                "what it shows, then reply TASK_COMPLETE."
            )
        return (
            f"Not finished: the check below fails. Fix what it shows, then reply TASK_COMPLETE."
            f"\n\n```\n{check.shown()}\n```"
        )

    def exhausted(self) -> bool:
        return self.refused >= MAX_REFUSALS

    def new_attempt(self) -> None:
        """The task begun again (lmagent.loop.attempts): nothing refused or confirmed yet, and
        the model has been shown only what the task's commands gave."""
        self.refused = 0
        self.confirmed = self.failed_after_write = False
        self.programs_ran = {}
        self.shown = self.shown_first


def not_verified(check: Check) -> str:
    """How a run whose check kept failing ends."""
    return f"not verified: {check.command} failed ({check.last_line()})"
