"""The shell tool: one command in the workspace's sandbox, with a timeout and a memory cap."""

from __future__ import annotations

import os
import re
from typing import Annotated as A

from lmagent.llm.toolcalls import TOOLS_NOT_COMMANDS
from lmagent.sandbox.base import DEFAULT_TIMEOUT, MAX_MEMORY_MB, MAX_TIMEOUT, SandboxUnavailable
from lmagent.tools.command_paths import check_command_paths
from lmagent.tools.processes import start_background, timeout_hint
from lmagent.tools.registry import (
    ArgumentError,
    ToolContext,
    ToolError,
)

# --------------------------------------------------------------------------- shell and git


def _sandbox(ctx: ToolContext):

    try:
        return ctx.services.sandbox()
    except SandboxUnavailable as exc:
        raise ToolError(f"no sandbox to run commands in: {exc}") from None


def run_in_sandbox(
    ctx: ToolContext, command: str, timeout: float, max_memory_mb: int | None = None
) -> dict:
    sandbox = _sandbox(ctx)
    result = sandbox.run(command, timeout=timeout, max_memory_mb=max_memory_mb, stop=ctx.stop.event)
    answer = result.to_tool_result()
    return timeout_hint(ctx, answer) if result.timed_out else answer


TIMEOUT_HELP = f"seconds (default {DEFAULT_TIMEOUT:g}, max {MAX_TIMEOUT:g})"
MEMORY_HELP = f"memory limit in MB (max {MAX_MEMORY_MB})"
BACKGROUND_HELP = (
    "start it in the background and return at once with process_id and first output (servers, "
    "watchers, long builds); follow it with process_output, stop it with process_kill"
)


def tool_shell(
    ctx: ToolContext,
    command: A[str, "sh command line, run in the workspace inside the sandbox"],
    timeout: A[int, TIMEOUT_HELP] = int(DEFAULT_TIMEOUT),
    max_memory_mb: A[int | None, MEMORY_HELP] = None,
    background: A[bool, BACKGROUND_HELP] = False,
) -> dict:
    """Run a shell command in the workspace, inside the sandbox."""

    if not command.strip():
        raise ArgumentError("command must not be empty")
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise ArgumentError(f"timeout must be between 1 and {MAX_TIMEOUT:g} seconds")
    if max_memory_mb is not None and not 16 <= max_memory_mb <= MAX_MEMORY_MB:
        raise ArgumentError(f"max_memory_mb must be between 16 and {MAX_MEMORY_MB}")
    if ctx.config.shell_workspace_only:
        refusal = check_command_paths(command, ctx.workspace.root)
        if refusal:
            raise ToolError(refusal)
    if background:
        return start_background(ctx, command, max_memory_mb)
    result = run_in_sandbox(ctx, command, timeout, max_memory_mb)
    blocks = getattr(ctx.extras.get("client"), "tool_form", "") == "text"
    return explained(result, command, str(ctx.workspace.root), blocks)


def explained(result: dict, command: str, root: str, blocks: bool = False) -> dict:
    """A command's result with what its output tells the model to fix or know: each hint
    reads only the command and its output (nothing is looked up); a later, more particular
    one replaces an earlier error (`git add notes.txt` failing makes `git commit` find
    nothing to commit: notes.txt is what to fix). `blocks`: the model writes files as
    fenced blocks (text calls), and is told how where it is to write one."""
    result = nothing_to_commit_hint(with_hint(result, command))
    result = missing_file_hint(syntax_error_hint(result, root, blocks), root)
    return branch_note(parser_hint(result, command, root, blocks), command)


NOT_FOUND = (
    "exit code 127: the shell did not find a command (the output names it). Check its "
    "spelling, or use one that is installed here"
)
INSTEAD = {"python": "python3", "pip": "python3 -m pip", "pip3": "python3 -m pip"}
_MISSING = re.compile(r"(?:^|\s)([\w.+-]+): (?:command )?not found", re.M)


_CD_ONLY = re.compile(r"^\s*cd(?:\s+\S+)?\s*;?\s*$")
CD_ALONE = (
    "cd alone changes nothing: every command starts in the workspace. Put cd and the "
    "commands that need it in one command (cd dir && make)"
)


GREP_NO_MATCH = "grep found no match (exit code 1, no output)"


def _ends_in_grep(command: str) -> bool:
    """The command's last line is a grep (whose exit code 1 means "no match")."""
    lines = [line for line in command.strip().splitlines() if line.strip()]
    return bool(lines) and re.match(r"^\s*(?:\S*/)?[ef]?grep\b", lines[-1]) is not None


WRITTEN_AS_BLOCK = " (its path on a line of its own, then a ```python block)"  # text calls
_PY_SYNTAX = re.compile(
    r'File "([^"\n]+)", line (\d+)\n(?:[^\n]*\n){0,3}?(SyntaxError|IndentationError|TabError): '
    r"([^\n]*)"
)


def syntax_error_hint(result: dict, root: str, blocks: bool = False) -> dict:
    """A workspace program Python could not read: the error names the file and line to fix. (A
    small model that put `Hello, world!` into hello.py rewrote the command that ran it, adding
    a shebang, three times.) The path is compared as text: nothing is looked up."""
    found = _PY_SYNTAX.search((result.get("output") or "")[-4000:])
    rel = _in_workspace(found.group(1), root) if found else ""
    if result.get("success") or not rel:
        return result  # no syntax error, or a library's file: not the model's to fix
    line, kind, message = found.group(2, 3, 4)
    how = WRITTEN_AS_BLOCK if blocks else ""
    result["error"] = (
        f"{rel} is not valid Python: {kind} at line {line} ({message.strip()}). Fix {rel} "
        f"first: write it again, whole, as Python code{how}; then run it"
    )
    return result


_MISSING_FILE = re.compile(  # python3 run on it; git add given it
    r"can't open file '([^'\n]+)': \[Errno 2\]|pathspec '([^'\n]+)' did not match any files"
)


def missing_file_hint(result: dict, root: str) -> dict:
    """A command given a workspace file that does not exist (python3 squares.py, git add
    notes.txt): say so, and which workspace, as a fact; never that the model should write it
    (told so, a model wrote a fresh app.py where the task had been given in the wrong
    folder). Repeating the command unchanged is caught as a repeat."""
    found = _MISSING_FILE.search(result.get("output") or "")
    rel = _in_workspace(found.group(1) or found.group(2), root) if found else ""
    if result.get("success") or not rel:
        return result
    result["error"] = f"{rel} does not exist in the workspace ({root})"
    return result


_PARSER_ERROR = re.compile(
    r"^([\w.-]+\.py): error: (?:unrecognized arguments: (.+)|argument (-[\w-]+)(?:/\S+)?: "
    r"expected one argument)$",
    re.M,
)


def parser_hint(result: dict, command: str, root: str, blocks: bool = False) -> dict:
    """A workspace program whose parser (argparse) refused its arguments: say what to change
    in the program. A small model ran `python3 app.py Ann --shout` five times, "unrecognized
    arguments: --shout" each time, and never opened app.py; then it declared --shout without
    `action='store_true'`, and argparse wanted a value after it."""
    found = _PARSER_ERROR.search(result.get("output") or "")
    words = command.split() if found else []
    program = next((w for w in words if os.path.basename(w) == found.group(1)), "")
    rel = _in_workspace(program, root) if program else ""
    if result.get("success") or not rel:
        return result
    unknown, valued, how = found.group(2), found.group(3), WRITTEN_AS_BLOCK if blocks else ""
    if unknown:
        result["error"] = (
            f"{rel} does not take {unknown.strip()} yet: write {rel} again, whole, with "
            f"{unknown.strip()} added to its parser{how}, then run it again"
        )
    else:
        result["error"] = (
            f"{rel} declares {valued} as taking a value. A flag that takes none is declared "
            f"with action='store_true': write {rel} again, whole, with that{how}, then run it "
            "again"
        )
    return result


_NEW_BRANCH = re.compile(r"^\s*git\s+branch\s+([\w.][\w./-]*)\s*$", re.M)
_SWITCH = re.compile(r"\bgit\s+(?:checkout|switch)\b")
_NO_NEW_BRANCH = re.compile(  # the branch was there, or could not be made
    r"fatal: (?:a branch named '[^']+' already exists|not a git repository|not a valid object)"
)
_ON_BRANCH = re.compile(r"^(?:On branch (\S+)|\[(\S+) (?:\(root-commit\) )?[0-9a-f]{7,}\])", re.M)


def branch_note(result: dict, command: str) -> dict:
    """`git branch NAME` with no switch after it: say that commits still go to the branch the
    repository is on (named when the output names it). A small model ran `git branch feature`
    and committed the file the task wanted on feature to main."""
    made = _NEW_BRANCH.search(command)
    output = result.get("output") or ""
    name = made.group(1) if made else ""
    switched = made and _SWITCH.search(command[made.end() :])
    if not name or switched or _NO_NEW_BRANCH.search(output):
        return result
    on = _ON_BRANCH.search(output)
    current = (on.group(1) or on.group(2)) if on else "the branch you were on"
    result["note"] = (
        f"git branch {name} made the branch, but you are still on {current}: switch to it "
        f"with git checkout {name}"
    )
    return result


NOTHING_TO_COMMIT = (
    "nothing to commit: every change is already committed (git log --oneline lists the commits)"
)


def nothing_to_commit_hint(result: dict) -> dict:
    """`git commit` with nothing new: say the work is already committed. A small model that
    had committed README.md went on to commit it again, five times."""
    output = result.get("output") or ""
    if not result.get("success") and "nothing to commit, working tree clean" in output:
        result["error"] = NOTHING_TO_COMMIT
    return result


def _in_workspace(name: str, root: str) -> str:
    """`name`, as a command's output printed it (absolute, or relative to the workspace),
    relative to the workspace root; "" when it is outside. Compared as text: nothing is looked
    up."""
    path = os.path.normpath(os.path.join(root, name))
    inside = path.startswith(root.rstrip(os.sep) + os.sep)
    return os.path.relpath(path, root) if inside else ""


def with_hint(result: dict, command: str = "") -> dict:
    """The result, its error saying what to fix where the exit code tells (127: not found,
    naming the usual replacement of a missing python or pip), and a note for a lone cd."""
    if _CD_ONLY.match(command) and result.get("success"):
        result["note"] = CD_ALONE
    if _ends_in_grep(command) and result.get("exit_code") == 1 and not result.get("output"):
        result.pop("error", None)  # an answer, not a failure: a small model retries failures
        result.update(success=True, note=GREP_NO_MATCH)
    if result.get("exit_code") != 127 or not result.get("error"):
        return result
    result["error"] = NOT_FOUND
    missing = _MISSING.search(result.get("output") or "")
    if missing and missing.group(1) in INSTEAD:
        name = missing.group(1)
        result["error"] = f"`{name}` is not installed here: run it as `{INSTEAD[name]}` instead"
    elif missing and missing.group(1) in TOOLS_NOT_COMMANDS:
        name = missing.group(1)
        result["error"] = (
            f"`{name}` is one of your tools, not a shell command: call the {name} tool"
        )
    return result


# Every git tool call runs with these settings in git's command scope, which no repository,
# include or global file can override. Each names a program git could run, or a way to one.
