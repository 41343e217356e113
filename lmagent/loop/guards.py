"""Loop detection: identical tool calls repeated by the model warn, then stop the run; steps
that achieve nothing end it early (NoProgress)."""

from __future__ import annotations

import json

# --------------------------------------------------------------------------- loop detection


class LoopDetector:
    """Counts identical tool calls (name + normalised arguments) since the workspace changed."""

    def __init__(self, warn_at: int = 3, stop_at: int = 5):
        self.warn_at = warn_at
        self.stop_at = stop_at
        self.counts: dict[str, int] = {}

    @staticmethod
    def signature(name: str, arguments: object) -> str:
        return f"{name}:" + json.dumps(_normalise(arguments), sort_keys=True, default=str)

    def record(self, name: str, arguments: object, changed_workspace: bool) -> int:
        """Count this call and return how many times it has now been made."""
        key = self.signature(name, arguments)
        if changed_workspace and key not in self.counts:
            self.counts = {}  # a new change to the workspace: earlier repeats were not a loop
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]


class NoProgress:
    """Counts steps in a row that changed no file and ran no call that succeeded and was new
    (a call repeated with the files as they were gives what it gave before): at `stop_at` the
    run ends, long before its iteration limit. Seen: a 1.5B model alternating two failing
    replies, which no "three in a row" count catches, for hundreds of steps."""

    def __init__(self, stop_at: int = 6):
        self.stop_at = stop_at
        self.idle = 0
        self.problem = ""  # the last thing that went wrong, for the ending

    def record(self, progressed: bool, problem: str = "") -> str:
        """Count a step; the run's ending ("no progress in 6 steps: ...") when it is due."""
        self.problem = problem or self.problem
        self.idle = 0 if progressed else self.idle + 1
        if self.idle < self.stop_at:
            return ""
        return f"no progress in {self.idle} steps: {self.problem or 'nothing changed'}"


def _normalise(value: object) -> object:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value
