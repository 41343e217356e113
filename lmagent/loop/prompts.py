"""What the model is told, and how its plain-text replies are read (the completion protocol).

TASK_COMPLETE on its own line ends a task, `BLOCKED: reason` ends it as blocked,
`WAIT: <ISO-8601 time>: reason` parks it; a reply that only announces work does not end it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from lmagent.core.status import STATUS_WAITING
from lmagent.core.workspace import Workspace
from lmagent.llm.toolcalls import strip_calls
from lmagent.sessions.store import Session
from lmagent.tools.registry import Toolset

COURTESY = r"(?! be (?:happy|glad|pleased|here|available)\b)"  # "I'll be happy to help": no step
ANNOUNCES_WORK = re.compile(
    rf"\b(I['’]ll{COURTESY}|I will{COURTESY}|I['’]m going to|I am going to|let me(?! know)|"
    r"let['’]s|next,? I|now,? I|I need to|I shall|I['’]m now|I am now|"
    r"going to (?:create|write|run|edit|read))\b",
    re.I,
)
WAIT_START = re.compile(r"^\s*[*_`]*WAIT[*_`]*:", re.M)
WAIT_LINE = re.compile(
    r"^\s*[*_`]*WAIT[*_`]*:\s*(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:[Zz]|[+-]\d{2}:?\d{2})?)\s*:?\s*(.*)$",
    re.M,
)
CODE_BLOCK = re.compile(r"^\s*```", re.M)
BLOCKED_LINE = re.compile(r"^\s*[*_`]*BLOCKED[*_`]*:\s*(.+)$", re.M)
COMPLETE_LINE = re.compile(r"^\s*(?:#+\s*)?[*_`]*TASK_COMPLETE[*_`.!]*\s*$", re.M | re.I)

PLAN_REQUEST = (
    "Before doing anything, write a short numbered plan (one line per step, at most 10 steps) "
    "for this task. Do not call tools yet."
)
PLAN_APPROVED = (
    "The plan is approved. Carry it out step by step with tools; after finishing each step call "
    "plan_complete_step with its number."
)
NUDGE_ANNOUNCED = (
    "You described a next step but did not call a tool. Call the tool now. "
    "If everything is already done, reply TASK_COMPLETE."
)
# the same for a model calling tools as text, in its prompt's words (told to "call the tool",
# the 1.5B model, which writes blocks, answered that nothing was wrong, three times)
NUDGE_ANNOUNCED_TEXT = (
    "You described a next step but did not act. Act now: to save a file, write its path on "
    "the line just before its block; to run commands, use a ```bash block. If everything is "
    "already done, reply TASK_COMPLETE."
)
NUDGE_CODE = (
    "Nothing was done: code in a reply is not saved and not run, and any output shown is not "
    "real. Use the tools now: write to save a file, shell to run a command. If the task only "
    "asked a question, answer it and reply TASK_COMPLETE."
)
NUDGE_CODE_BLOCKS = (
    "Nothing was done: that code was only shown, and any output shown is not real. To save a "
    "file, write its path on the line just before the block; to run commands, use a ```bash "
    "block. If the task only asked a question, answer it and reply TASK_COMPLETE."
)
NUDGE_BLOCKED = (
    "Do not give up after one failed call. Read the error in the result above, fix the cause "
    "(a wrong path or argument, a missing file or package, a typo in the command) and try "
    "again. Reply BLOCKED again only if it truly cannot be done."
)
NUDGE_BLOCKED_FIRST = (
    "Do not give up before trying. Nothing has been done yet: a failing test or error shown "
    "with the task is what the task asks you to fix. Make the change it needs with the tools, "
    "then check it. Reply BLOCKED again only if it truly cannot be done."
)
NUDGE_WAIT = (
    "WAIT parks the task until that time, unchecked. If the task is not done, do it now with "
    "the tools; if it is, reply TASK_COMPLETE. Reply WAIT again only if the task asks you to "
    "wait for a time or for something outside that is not ready."
)
NUDGE_REPEATING = (
    "Your reply kept repeating the same text, so it was cut off. Do not repeat it: continue "
    "the task with a tool call, or reply with a short summary and TASK_COMPLETE."
)


def cut_in_block_nudge(limit: int) -> str:
    """For a reply cut off at its length limit inside a code block (history.cut_in_block)."""
    cap = f" ({limit} tokens)" if limit else ""
    return (
        f"Your reply reached the length limit of one reply{cap} inside a code block, so it was "
        "cut off there, and nothing in that block was saved or run. Reply again, shorter: no "
        "explanation first, only the file's path on the line before its block. For a long "
        "file, write only the parts that change (in a Python file, the functions you write "
        "replace those of the same name; the rest is kept)."
    )


def fresh_start_note(why: str, put_back: list[str]) -> str:
    """The history of an attempt undone, for a new one (lmagent.loop.attempts): what the
    transcript holds in its place (the model is sent the opening alone: history.UNSENT_NOTE)."""
    files = f" ({', '.join(put_back[:5])}{', …' if len(put_back) > 5 else ''})" if put_back else ""
    return (
        f"[An earlier attempt at this task was undone: {why}. "
        f"The files are as they were at the start{files}; the task was begun again.]"
    )


def closest_note(check_line: str, put_back: list[str]) -> str:
    """How a run that ended unfinished says it left the files as its closest check had them."""
    files = ", ".join(put_back[:5]) + (", …" if len(put_back) > 5 else "")
    return (
        f"the files are left as they were at the check that failed least ({check_line}): "
        f"{files} put back from the last attempt (--undo brings that attempt's files back)"
    )


REPEATED_FAILURE = (
    "this exact call failed before in the same way, and nothing has changed since, so it will "
    "fail again. First change what the error points at (fix the file it names, create what is "
    "missing), or do something else."
)
REPEATED_SUCCESS = (
    "this exact call already succeeded before, with the same result. If the task is done, "
    "reply with a short summary and TASK_COMPLETE; otherwise do the next step."
)
MADE_UP_RESULTS = (
    "Not run: your reply wrote a tool result itself. Results come from the agent once your "
    "actions have run: write only the actions (shell commands in a ```bash block, or a file's "
    "path and its block), then wait for their results."
)
NUDGE_EMPTY = (
    "Your reply was empty. Call a tool to continue, or reply with a summary and TASK_COMPLETE."
)
NUDGE_NOTHING_DONE = (
    "Nothing has been done yet: no tool was called in this task. Do the task now with the "
    "tools (read the files it names, write or edit them, run commands), then reply "
    "TASK_COMPLETE. If it only asked a question, answer it before TASK_COMPLETE."
)
# the same for a model calling tools as text, told of "tools" it was never shown as such (the
# 1.5B model answered "I don't have any files or tools")
NUDGE_NOTHING_DONE_TEXT = (
    "Nothing has been done yet: no file was written and no command was run in this task. Do "
    "the task now: to save a file, write its path on the line just before its block; to run "
    "commands, use a ```bash block. Then reply TASK_COMPLETE. If it only asked a question, "
    "answer it before TASK_COMPLETE."
)


# a reply repeating one that failed, as the history keeps it: a copy that enters the history is
# copied again (the 1.5B model gave one 394-token reply nine times, a third of a run's tokens)
SAID_AGAIN = "(my earlier reply again, word for word)"


def not_run_again(call: str, command: str, error: str) -> str:
    """For a small model repeating actions that failed, with no file changed since: the
    command (when it is one line) and its error said again, with what to do when the error
    does not say it (told after an error that does, a 1.5B model repeated the command). A
    write or an edit whose check failed is the same change again: a different one is needed."""
    if call in ("write", "edit"):
        return (
            f"Not saved: this is the same change as before, and {error.rstrip('.')}. The "
            "check's output above shows what is wrong: make a different change."
        )
    what = command if command and "\n" not in command else "it"
    error = error.rstrip(".")
    if re.match(r"[a-z]+(?![\w./])", error):  # a sentence of its own; "missing.py" stays
        error = error[:1].upper() + error[1:]
    told = f"Not run: {what} would fail the same way, as nothing has changed. {error}."
    if "exited with code" in error:
        told += " Change what the error points at first, or do something else."
    return told


BAD_WAIT = (
    "WAIT needs a valid ISO-8601 time, e.g. WAIT: 2030-01-31T09:00:00+01:00: the reason. "
    "Reply again."
)


_ENDING = (
    "When the task is fully done, reply with a short summary and TASK_COMPLETE on its own line. "
    "If you cannot proceed, reply BLOCKED: <reason>. To continue later, reply "
    "WAIT: <ISO-8601 time>: <reason>."
)
# a model calling tools as text (a small one) is taught only the finish: given BLOCKED and WAIT,
# the 1.5B model answered failing tests shown with the task with "BLOCKED: ... You need to
# implement ..." and "To continue later, reply WAIT: ...", the prompt's own words, in 7 of 16
# and 9 of 32 Exercism runs; both are still read when it writes them
_ENDING_TEXT = (
    "When the task is fully done and checked, reply with a short summary and TASK_COMPLETE on "
    "its own line."
)
_ENDING_CHILD = (
    "You are a sub-agent working from a brief. When the work is done, or you cannot do it, call "
    "report_result: it ends your work and is all your parent sees. TASK_COMPLETE reports nothing."
)


_NATIVE_CALLS = (
    "If you cannot make native tool calls, write each call as "
    '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>.'
)
# Only what changes of a Python file (lmagent.loop.merge): in rewrites that changed something,
# 88-90 % of the lines the 1.5B model wrote were copied unchanged, at 15 tokens/s on 2 cores.
# no worked example: a small model copies it literally (it ran "python app.py" in a folder
# without one, five times). Fenced blocks first: a coder model writes them unasked.
_TEXT_CALLS = (
    "How to act: write one action per reply. Your reply ends with it; it runs, and its "
    "result comes back in the next message.\n"
    "- Create or replace a file: write its path on a line of its own, then the file's whole "
    "new content in a fenced block (```python for Python code). To change a Python file that "
    "exists, the block may hold only the functions, classes or methods that change, each "
    "whole: the rest of the file is kept.\n"
    "- Run shell commands (python3 FILE, ls, grep, git, sed): put them in a ```bash block; "
    "only shell commands go there.\n"
    "- Any other tool: a tag with its name and arguments, as in "
    '<tool_call>{"name": "edit", "arguments": {"path": "…", "search": "…", "replace": "…"}}'
    "</tool_call>\n"
    "Code in any other form is only shown: it is not saved and not run."
)
# Worked calls: small models copy the shape (and, without them, pick tools at random).
_JSON_REPLIES = (
    'Reply with one JSON object: a tool call {"name": "TOOL", "arguments": {...}}, or '
    '{"answer": "..."} to answer the user.\n'
    "Examples:\n"
    "User: list the files in docs\n"
    '{"name": "ls", "arguments": {"path": "docs"}}\n'
    "User: what does setup.cfg say?\n"
    '{"name": "read", "arguments": {"path": "setup.cfg"}}\n'
    "User: run app.py\n"
    '{"name": "shell", "arguments": {"command": "python app.py"}}'
)
_CALL_FORMS = {"native": _NATIVE_CALLS, "text": _TEXT_CALLS, "constrained": _JSON_REPLIES}


def system_prompt(workspace: Workspace, session: Session, toolset: Toolset, tool_form: str) -> str:
    """The system message: rules, tools, protocol, then what differs between workspaces and
    days (project context, personality, the date) last, so that the server's prompt cache
    reuses the rest across tasks and sessions. Nothing in it changes during a run: progress
    (todos, plan, task state) reaches the model as messages (`progress_message`).
    `tool_form` is how the model makes calls (LLMClient.tool_form): native calls need no tool
    list; text calls are taught their tags; constrained replies their JSON shape."""
    parts = [
        "You are LMAgent, an autonomous coding agent. You work in the user's workspace, the "
        'current folder ("here", "this folder" or "this project" in a task): every path is '
        "relative to it, nothing outside it can be touched, and shell commands run in it, in a "
        "sandbox.",
        "Act with tools; do not describe what you would do, do it. Check your work (read the "
        "file back, run the program or its tests) before finishing. When a command fails, read "
        "the error, fix the cause and try again.",
        _ending(toolset, tool_form),
    ]
    if tool_form != "native":
        parts.append("Tools:\n" + "\n".join(_tool_line(s) for s in toolset.schemas()))
    # a model calling tools as text is not told the tools on demand, which still run when
    # called: named (git_commit, delegate, process_kill...), the 1.5B model's first reply to
    # "Implement is_even in utils.py" committed the untouched file, in run after run
    more = toolset.on_demand_line() if tool_form != "text" else ""
    if more:
        parts.append(f"More tools, called the same way: {more}.")
    parts.append(_CALL_FORMS[tool_form])
    project = _optional_text(workspace.root / ".lmagent.md")
    if project:
        parts.append("Project context (.lmagent.md):\n" + project)
    soul = _optional_text(workspace.data_dir / ".soul.md")
    if soul:
        parts.append("Personality (.soul.md):\n" + soul)
    # the date only: a prompt that changes every second defeats the server's prompt cache
    today = datetime.now().astimezone().strftime("%Y-%m-%d (%A), time zone %Z (UTC%z)")
    parts.append(f"Today is {today}.")
    return "\n\n".join(parts)


def _ending(toolset: Toolset, tool_form: str) -> str:
    if "report_result" in toolset:
        return _ENDING_CHILD
    return _ENDING_TEXT if tool_form == "text" else _ENDING


def progress_message(session: Session) -> str:
    """The recorded todos, plan and task state, as told to the model where the history no
    longer shows them (after a compaction, on resuming); blank when nothing is recorded."""
    pinned = session.state.pinned_text()
    return f"Your recorded progress (always current):\n{pinned}" if pinned else ""


def _tool_line(schema: dict) -> str:
    function = schema["function"]
    args = ", ".join(function["parameters"]["properties"])
    return f"- {function['name']}({args}): {function['description']}"


def _optional_text(path: Path, limit: int = 8000) -> str:
    """A context file's text without HTML comments (the sandbox's stub is only a comment)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()[:limit]


def parse_plan(text: str) -> list[dict]:
    """Numbered lines ("1. ...", "Step 2) ...") as plan steps."""
    steps = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:step\s*)?(\d+)[.):]\s+(.+)$", line, re.I)
        if match:
            steps.append(
                {"id": len(steps) + 1, "description": match.group(2).strip(), "status": "pending"}
            )
    return steps


def parse_wait(text: str) -> tuple[datetime, str] | None:
    """(time in UTC, reason) of a WAIT line; None without one; ValueError when it is unreadable.

    A time without a zone is the user's local time."""
    if not WAIT_START.search(text):
        return None
    match = WAIT_LINE.search(text)
    if not match:
        raise ValueError("WAIT without a readable ISO-8601 time")
    stamp = match.group(1).replace(" ", "T")
    stamp = re.sub(r"[Zz]$", "+00:00", stamp)
    stamp = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", stamp)
    when = datetime.fromisoformat(stamp)
    if when.tzinfo is None:
        when = when.astimezone()
    return when.astimezone(timezone.utc), match.group(2).strip()


def bare_complete(content: str) -> bool:
    """True when a reply is TASK_COMPLETE and nothing else (no summary, no answer)."""
    return not final_text(content)


def final_text(content: str) -> str:
    """The reply shown as the run's final message: without tool calls or the marker line."""
    return COMPLETE_LINE.sub("", strip_calls(content)).strip()


def announces_work(content: str) -> bool:
    """True when the end of a reply says the model is about to do something."""
    return bool(ANNOUNCES_WORK.search("\n".join(content.strip().splitlines()[-3:])))


def shows_code(content: str) -> bool:
    """True when a reply holds a code block (a small model "writing" files or "running"
    commands in text instead of calling a tool)."""
    return bool(CODE_BLOCK.search(content))


def open_work_nudge(count: int) -> str:
    return (
        f"{count} todo(s)/plan step(s) are still open. Continue with them, or mark them done "
        "and reply TASK_COMPLETE."
    )


def resume_message(session: Session) -> str:
    """The user message that tells the model its session was resumed, why it stopped, and its
    recorded progress."""
    meta = session.meta
    now = datetime.now().astimezone().isoformat(timespec="seconds")
    status = meta.get("status")
    if status == STATUS_WAITING:
        text = (
            f"It is now {now}. You asked to wait until {meta.get('wait_until')} "
            f"({meta.get('wait_reason') or 'no reason given'}). Continue the task."
        )
    else:
        how = "stopped unexpectedly" if status == "running" else f"ended as '{status}'"
        text = (
            f"The run was resumed at {now} after it {how}. "
            "Check the current state of the workspace and continue the task."
        )
    progress = progress_message(session)
    return f"{text}\n\n{progress}" if progress else text
