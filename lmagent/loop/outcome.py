"""What a run did, for its ending: the files it changed, the commands it ran, the background
processes it started. A run that only answered says so plainly, so "completed" never hides a
run in which nothing happened."""

from __future__ import annotations

from dataclasses import dataclass, field

NAMES_SHOWN = 3  # file names a summary lists


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

    def fields(self) -> dict:
        """The `done` event's account of the run."""
        return {
            "files_changed": list(self.files),
            "commands_run": len(self.commands),
            "processes_started": list(self.processes),
            "summary": self.summary(),
        }

    def summary(self) -> str:
        if not self.tools:
            return "answered without using any tool: no file changed, no command run"
        done, not_done = [], []  # what happened first, then what did not
        if self.files:
            names = ", ".join(self.files[:NAMES_SHOWN]) + (", …" if len(self.files) > 3 else "")
            done.append(f"changed {_counted(len(self.files), 'file', 's')} ({names})")
        else:
            not_done.append("no file changed")
        if self.commands:
            done.append(f"ran {_counted(len(self.commands), 'command', 's')}")
        else:
            not_done.append("no command run")
        if self.processes:
            started = _counted(len(self.processes), "background process", "es")
            done.append(f"started {started} ({', '.join(self.processes)})")
        if not done:
            used = ", ".join(dict.fromkeys(self.tools))
            done.append(f"used {_counted(len(self.tools), 'tool call', 's')} ({used})")
        return ", ".join(done + not_done)


def _counted(count: int, one: str, plural: str) -> str:
    return f"{count} {one}{'' if count == 1 else plural}"
