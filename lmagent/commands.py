"""The slash commands, ONE table for every front end: the REPL (cli/terminal.py, a `cmd_<name>`
method each) and the web chat box (web/static/js/commands.js, a handler each, the table served
at /api/commands). Both list it with /help; the tests hold each front end to it."""

from __future__ import annotations

from dataclasses import dataclass

from lmagent.core.config import PERMISSION_MODES


@dataclass(frozen=True)
class Command:
    name: str  # typed after the slash
    usage: str  # its arguments, as /help shows them ("" for none)
    help: str  # one line

    @property
    def title(self) -> str:
        return f"/{self.name}" + (f" {self.usage}" if self.usage else "")


COMMANDS: tuple[Command, ...] = (
    Command("help", "", "show the commands"),
    Command("status", "", "show model, workspace, mode, sandbox, the session and the scheduler"),
    Command("new", "", "start a new session with the next task"),
    Command("session", "[ID]", "show the current session, or switch to another"),
    Command("sessions", "", "list saved sessions"),
    Command("mode", f"[{'|'.join(PERMISSION_MODES)}]", "show or set the permission mode"),
    Command("plan", "", "plan the next task and ask for approval before acting"),
    Command("todo", "", "show the todos and plan of the current session"),
    Command("checkpoints", "[ID]", "list the changing steps of this session (or of session ID)"),
    Command("undo", "[force]", "restore the files to before this session's last changing step"),
    Command("ps", "", "list the background processes (running and ended)"),
    Command("kill", "ID", "stop a background process (the ids are in /ps)"),
    Command("soul", "", "show the personality file (.lmagent/.soul.md)"),
)
NAMES = tuple(command.name for command in COMMANDS)


def help_lines() -> list[str]:
    """What /help shows: one line per command."""
    width = max(len(command.title) for command in COMMANDS) + 2
    return [f"{command.title:<{width}}{command.help}" for command in COMMANDS]
