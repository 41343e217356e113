"""What a run did, for its ending: the files it changed, the commands it ran, the background
processes it started. A run that only answered says so plainly, so "completed" never hides a
run in which nothing happened."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmagent.core.text import counted

NAMES_SHOWN = 3  # file names a summary lists
NO_TOOL = {  # how a run that used no tool ended, by its status
    "completed": "answered without using any tool",
    "blocked": "blocked before any tool ran",
    "interrupted": "interrupted before any tool ran",
    "error": "stopped by an error before any tool ran",
    "max_iterations": "reached the iteration limit before any tool ran",
}


@dataclass
class Outcome:
    tools: list[str] = field(default_factory=list)  # every call's tool, in order
    files: list[str] = field(default_factory=list)  # changed paths, first change first
    commands: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)  # ids of background processes

    def record(self, name: object, arguments: object, result: dict, change: dict) -> None:
        """One call, with its result and what the checkpoint saw it change."""
        self.tools.append(str(name))
        for path in change.get("changed") or ():
            if path not in self.files:
                self.files.append(path)
        if name == "shell" and ("exit_code" in result or "process_id" in result):
            command = arguments.get("command") if isinstance(arguments, dict) else None
            self.commands.append(str(command or ""))
            if result.get("process_id"):
                self.processes.append(str(result["process_id"]))

    def fields(self, status: str = "completed") -> dict:
        """The `done` event's account of a run that ended with `status`."""
        return {
            "files_changed": list(self.files),
            "commands_run": len(self.commands),
            "processes_started": list(self.processes),
            "summary": self.summary(status),
        }

    def summary(self, status: str = "completed") -> str:
        """What the run did, in one line; a run that used no tool says why: it answered, or
        it was interrupted or failed before any tool ran (never "answered" then)."""
        if not self.tools:
            return f"{NO_TOOL.get(status, NO_TOOL['completed'])}: no file changed, no command run"
        done, not_done = [], []  # what happened first, then what did not
        if self.files:
            names = ", ".join(self.files[:NAMES_SHOWN]) + (", …" if len(self.files) > 3 else "")
            done.append(f"changed {counted(len(self.files), 'file')} ({names})")
        else:
            not_done.append("no file changed")
        if self.commands:
            done.append(f"ran {counted(len(self.commands), 'command')}")
        else:
            not_done.append("no command run")
        if self.processes:
            started = counted(len(self.processes), "background process", "background processes")
            done.append(f"started {started} ({', '.join(self.processes)})")
        if not done:
            used = ", ".join(dict.fromkeys(self.tools))
            done.append(f"used {counted(len(self.tools), 'tool call')} ({used})")
        return ", ".join(done + not_done)
