"""Whether a model has looked at what it changed before it finishes (small models, calling
tools as text): it wrote "Hello, world!" into hello.py, showed the file with cat, and called
it done. Asked once to check, it ran the program, saw the error and fixed it.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from lmagent.loop.named import fenced
from lmagent.loop.verify import RUNNERS, TASK_RUNNERS, Check, Look, Verifier

NUDGE_CHECK = (
    "Before finishing, check your work: files changed since you last looked at a result. Show "
    "the file you wrote (cat FILE) or run what uses it, and compare it with the task. Then "
    "reply TASK_COMPLETE, or fix what is wrong."
)
COMMANDS = re.compile(r"\n|;|&&|\|\||\|")  # where one simple command ends
PREFIX = re.compile(r"^(?:\w+=\S*\s+|(?:timeout\s+\S+|time|nice|env|exec)\s+)*")
RUNNER_NAMES = sorted({*TASK_RUNNERS, *(name for names in RUNNERS.values() for name in names)})
RUNNER = re.compile(rf"(?:\S*/)?(?:(?:{'|'.join(RUNNER_NAMES)})[\d.]*|uv\s+run)\s")
LOOKS = re.compile(r"^\s*(?:cat|head|tail|less|more|ls|grep|wc|file|stat|nl)\b")


def check_nudge(programs: list[str]) -> str:
    """What a model finishing with unchecked changes is told: run the programs it changed."""
    if not programs:
        return NUDGE_CHECK
    runs = ", ".join(f"`{RUNNERS[Path(path).suffix][0]} {path}`" for path in programs[:3])
    return (
        f"Before finishing, run what you changed to check it: {runs}, or its tests. Compare "
        "the output with the task, then reply TASK_COMPLETE, or fix what is wrong."
    )


def ran_nudge(runs: dict[str, Check]) -> str:
    """What a model finishing with changed programs is told when the harness's check ran
    them cleanly (`runs`, by path): their output, to compare with the task (asked to run them
    itself, a small model spent a step to see the same)."""
    shown = "\n\n".join(
        f"```\n$ {RUNNERS['.py'][0]} {shlex.quote(path)}\n"
        f"{str(check.result.get('output') or '').strip() or '(it printed nothing)'}\n```"
        for path, check in runs.items()
    )
    return (
        f"Before finishing, compare what you changed with the task: it ran without an error."
        f"\n\n{shown}\n\nIf that is what the task asks for, reply TASK_COMPLETE; otherwise "
        "fix what is wrong."
    )


SHOWN_LINES = 20  # of a file a command changed silently, shown at the finish
SHOWN_FILES = 3


def made_nudge(paths: list[str], look: Look) -> str:
    """What a model finishing after commands that changed files and printed nothing is told:
    those files as they are now, to compare with the task (NUDGE_CHECK when none can be read).
    Its awk wrote an empty older.txt and a 1.5B model called the task done, unseen; asked to
    look, a small model spends a step to see what the harness can show."""
    shown = [_shown(path, look) for path in paths[:SHOWN_FILES]]
    if not any(shown):
        return NUDGE_CHECK
    files = "\n\n".join(text for text in shown if text)
    return (
        f"Before finishing, compare what your commands made with the task:\n\n{files}\n\n"
        "If that is what the task asks for, reply TASK_COMPLETE; otherwise fix what is wrong."
    )


def _shown(path: str, look: Look) -> str:
    """A file as it is now, its first SHOWN_LINES lines (blank when it cannot be read)."""
    result = look("read", {"path": path, "limit": SHOWN_LINES})
    if not result.get("success"):
        return ""
    content = str(result.get("content") or "").rstrip("\n") or "(empty)"
    total = int(result.get("total_lines") or 0)
    more = f"\n… ({total} lines in all)" if total > SHOWN_LINES else ""
    return f"{path}\n{fenced(content + more)}"


CheckFor = Callable[[str], "str | None"]  # the check a finish after changing a file would run
GIT_RUN = r"(?:^|[;&|]\s*)git\s+(?:-c\s+\S+\s+)*"  # git as a command, its -c settings skipped
GIT_COMMIT = re.compile(GIT_RUN + r"commit\b", re.M)
# a git command that changes the repository (its index, history or branches), not the files
GIT_CHANGE = re.compile(
    GIT_RUN + r"(?:add|rm|mv|commit|reset|restore|checkout|switch|merge|rebase|stash|init|tag"
    r"|branch|cherry-pick|revert|am|apply)\b",
    re.M,
)


def changes_git(name: str, arguments: object, result: dict) -> bool:
    """Whether a call was a git command that worked and changed the repository."""
    command = arguments.get("command", "") if isinstance(arguments, dict) else ""
    return name == "shell" and bool(result.get("success")) and bool(GIT_CHANGE.search(command))


def next_step(path: str, check: str | None) -> str:
    """What a small model is told after it wrote a file: the next step, the check a finish
    would run (`check`: the workspace's tests, or the command the task quotes) when there is
    one, else running the file. Without it, it answers a written file with the file again,
    changed at random, until it breaks it."""
    if check:
        return f"saved; next, check it does what the task asks: {check}"
    runners = RUNNERS.get(Path(path).suffix)
    if not runners:
        return "saved; if that was all the task asks, reply TASK_COMPLETE"
    return f"saved; next, run it to check it does what the task asks: {runners[0]} {path}"


COMMITTED_NEXT = "committed; if that was all the task asks, reply TASK_COMPLETE"
RAN_NEXT = (
    "it ran without an error; if its output is what the task asks for, reply TASK_COMPLETE, "
    "otherwise fix what is wrong"
)
RAN_SILENT_NEXT = (
    "it ran without an error and printed nothing; if that is what the task asks for, reply "
    "TASK_COMPLETE, otherwise fix what is wrong"
)


def name_next_step(
    name: str, arguments: object, result: dict, ran: bool, check_for: CheckFor
) -> None:
    """For a small model, on the result of a write (lmagent.loop.checks.next_step, with the
    check `check_for` names for the file), of
    the first clean run of what it changed (`ran`) or of a commit (a 1.5B model that had
    committed as asked went on to ls, git status, git diff and the same commit again)."""
    path = arguments.get("path", "") if isinstance(arguments, dict) else ""
    command = arguments.get("command", "") if isinstance(arguments, dict) else ""
    committed = name == "shell" and result.get("success") and GIT_COMMIT.search(str(command))
    if name == "write" and result.get("success"):
        result["next"] = next_step(str(path), check_for(str(path)))
    elif ran:
        result["next"] = RAN_NEXT if str(result.get("output") or "").strip() else RAN_SILENT_NEXT
    elif committed:
        result["next"] = COMMITTED_NEXT


CHECKED_PASSES = (
    "saved and checked: the check below passes; if that was all the task asks, reply TASK_COMPLETE"
)
CHECKED_FAILS = "saved and checked: the check below fails; fix what it shows"
FAILS_AS_BEFORE = (
    "saved and checked: the check below fails as it did before this change, the same tests; "
    "fix what it shows"
)
SHOWN_ABOVE = "(the same result as the check above, whose output is there: {})"
UNCHANGED = "nothing changed: the file already held exactly this"


SAVED_BUT = "saved, but "  # a write that worked, whose step failed: the rest is the error
NOT_JSON = SAVED_BUT + "it is not valid JSON now ({}): fix it"


def json_error(path: str, look: Look) -> str:
    """Why a .json file does not parse now ("Expecting value: line 1 column 1 (char 0)");
    blank when it does, when it cannot be read whole, or when it holds comments (JSONC, as
    tsconfig.json does: not judged). Told "saved; if that was all the task asks, reply
    TASK_COMPLETE" after writing `true true 3` into settings.json, the 1.5B model finished."""
    if Path(path).suffix.lower() != ".json":
        return ""
    read = look("read", {"path": path})
    content = str(read.get("content") or "")
    whole = read.get("success") and read.get("next_offset") is None
    if not whole or "//" in content or "/*" in content:
        return ""
    try:
        json.loads(content)
    except ValueError as exc:
        return str(exc)
    return ""


def check_data(name: str, arguments: object, result: dict, look: Look) -> bool:
    """For a small model, on the result of a write or an edit of a .json file: whether it
    parses; when it does not, the result says so (True), a failure of the step."""
    path = arguments.get("path", "") if isinstance(arguments, dict) else ""
    if name not in ("write", "edit") or not result.get("success") or not path:
        return False
    error = json_error(str(path), look)
    if error:
        result["next"] = NOT_JSON.format(error)
    return bool(error)


def failed_check(result: dict) -> str:
    """For the result of a write or an edit whose check the harness ran (`check_after_change`)
    and saw fail, that failure as an error ("its check fails: 1 failed in 0.2s"); blank
    otherwise. The write worked, but the step did not: the same write again, nothing changed
    since, would fail the same way (the 1.5B model wrote the same wrong proverb.py four times,
    told each time after the second "this exact call already succeeded before")."""
    if str(result.get("next")).startswith(SAVED_BUT):
        return str(result["next"]).removeprefix(SAVED_BUT)
    if result.get("next") not in (CHECKED_FAILS, FAILS_AS_BEFORE):
        return ""
    last = last_output_line(result)
    return f"its check fails: {last}" if last else "its check fails"


def last_output_line(result: dict) -> str:
    """The last line of a result's output (its first 200 characters); blank without output."""
    lines = str(result.get("output") or "").strip().splitlines()
    return lines[-1].strip()[:200] if lines else ""


def check_after_change(
    name: str,
    arguments: object,
    result: dict,
    verifier: Verifier,
    check_for: CheckFor,
    checks: WorkChecks,
) -> bool:
    """For a small model, on the result of a write or an edit: the check a finish would run
    (the workspace's tests, or the command the task quotes), run now by the harness, its
    output and whether it passes in the result (as aider's --auto-test). Told to run the
    tests next, the 1.5B model answered its written solution with a WAIT, or TASK_COMPLETE,
    unchecked, on 9 of 32 Exercism runs. After a write that changed nothing, only the check's
    last line (its full output is the one before). Whether a check ran."""
    path = arguments.get("path", "") if isinstance(arguments, dict) else ""
    if name not in ("write", "edit") or not result.get("success") or not path:
        return False
    check = verifier.after_change(check_for(str(path)))
    if check is None:
        return False
    checks.record("shell", {"command": check.command}, check.result, {})
    failed = FAILS_AS_BEFORE if verifier.shows_again(check) else CHECKED_FAILS
    result["next"] = failed if check.failed else CHECKED_PASSES
    result["output"] = check.shown()
    if result.get("unchanged"):  # its output is the one above: its last line is enough
        result["output"] = f"$ {check.command}\n{check.last_line()}"
    return True


def next_for_small_model(
    name: str,
    arguments: object,
    result: dict,
    ran: bool,
    verifier: Verifier,
    checks: WorkChecks,
    rules: frozenset[str],
) -> None:
    """On a call's result, for a small model: after a write or an edit, the check its finish
    would run, run (`auto_check`), or a .json file parsed (`data_check`); else the next step
    named (`next_step`)."""
    check_for = functools.cache(verifier.check_for)  # a glob of the tests: once per call
    if "auto_check" in rules and name == "shell" and own_test_run(arguments, result, verifier):
        return
    if "auto_check" in rules and check_after_change(
        name, arguments, result, verifier, check_for, checks
    ):
        return  # the result says how the check went: that is the next step
    if "data_check" in rules and check_data(name, arguments, result, verifier.look):
        return
    if "next_step" in rules:
        name_next_step(name, arguments, result, ran, check_for)


def own_test_run(arguments: object, result: dict, verifier: Verifier) -> bool:
    """A test run of the model's own (a pytest command) is shown as the harness's checks are:
    when it ends as the last check shown did (the same counts, the same tests failing or
    none), a line pointing there (the 1.5B model ran the tests its write's check had just run
    in 7 of 32 replies, and read both outputs); otherwise condensed (`Check.shown_output`):
    shown whole, its first run of an exercise's tests was 26 tracebacks' worth, 3,100
    characters. Whether it was shown above (nothing more to say of it)."""
    command = arguments.get("command") if isinstance(arguments, dict) else None
    if not isinstance(command, str) or "exit_code" not in result:
        return False
    check = Check(command.strip(), result)
    if verifier.shows_again(check):
        result["output"] = SHOWN_ABOVE.format(check.outcome[0] if check.outcome else "")
        return True
    if check.outcome is not None:
        result["output"] = check.shown_output()
    return False


def only_looks(command: str) -> bool:
    """A command that only shows files (cat, head, ls...): it checks content, runs nothing."""
    lines = [line for line in command.splitlines() if line.strip()]
    return bool(lines) and all(LOOKS.match(line) for line in lines)


def run_by(command: str, programs: set[str]) -> set[str]:
    """The programs a command runs: named in a simple command (split at ;, &&, || and |) that
    starts with a runner (`python3 hello.py`, `timeout 20 sh x.sh`, `python3 -c "import
    utils"`) or with the program itself (`./run.sh`). A command that only names it (`sed -i
    s/a/b/ hello.py`, `cp`, `cat`) runs nothing: told "it ran without an error" after a sed
    that emptied hello.py, a small model ended the run."""
    simple = [PREFIX.sub("", part.strip()) for part in COMMANDS.split(command)]
    return {path for path in programs if any(runs(part, Path(path)) for part in simple)}


def runs(command: str, path: Path) -> bool:
    """Whether one simple command runs `path`: a runner naming it, or the program itself."""
    if RUNNER.match(command):
        return mentions(command, path)
    return bool(command) and command.split()[0].endswith(path.name)


def mentions(command: str, path: Path) -> bool:
    """Whether `command` names `path`, or imports it as a module (a .py file's stem)."""
    module = path.suffix == ".py" and re.search(rf"\b{re.escape(path.stem)}\b", command)
    return path.name in command or bool(module)


class WorkChecks:
    """`silent`: files commands changed without printing anything since the model last looked
    at a result; `unrun`: programs changed since it last ran a command. `before_finishing`
    asks once."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        """Nothing changed, nothing asked: at the start, and when the task is begun again."""
        self.silent: list[str] = []
        self.unrun: set[str] = set()
        self.asked = False

    def record(self, name: str, arguments: object, result: dict, change: dict) -> bool:
        """A result with something to look at (a file read, a command's output) is a check; a
        command with output that is not only a look at files runs the programs; a command that
        changed files silently needs a check, a program changed needs a run (a data file
        written as the model wrote it needs neither). True when this call ran, without an
        error, programs changed since the last run or by this very command: a small model
        that saw its program work went on to `ls`, `rm hello.py` and `git init`; one that ran
        utils.py, which prints nothing, went on to grep it."""
        changed = [str(path) for path in change.get("changed") or []]
        shown = result.get("content") or result.get("output")
        command = str(arguments.get("command", "") if isinstance(arguments, dict) else "")
        made = {path for path in changed if Path(path).suffix in RUNNERS}
        named = run_by(command, self.unrun | made) if name == "shell" else set()
        tested = result.get("output") and self.unrun  # pytest: names no program
        ran = name == "shell" and result.get("success") and not only_looks(command)
        if name in ("read", "shell") and shown:
            self.silent.clear()
        if name == "shell" and shown and not only_looks(command):
            self.unrun.clear()
        if name == "shell" and changed and not shown:
            self.silent += [path for path in changed if path not in self.silent]
        self.unrun.update(made)
        self.unrun -= named  # `python3 utils.py`, printing nothing; `echo ... > a.py` and
        return bool(ran and (named or tested))  # `python3 a.py` in one command

    def before_finishing(self, ran: dict[str, Check], look: Look) -> str:
        """The nudge for a model finishing now, once per run; blank when none is due. `ran`:
        the programs the finish's check has just run cleanly, by path; `look` reads the files
        commands changed silently, to show them."""
        if self.asked or not (self.silent or self.unrun):
            return ""
        self.asked = True
        if self.unrun and self.unrun <= ran.keys():
            return ran_nudge({path: ran[path] for path in sorted(self.unrun)})
        if self.unrun:
            return check_nudge(sorted(self.unrun))
        return made_nudge(self.silent, look)
