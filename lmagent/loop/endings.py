"""How a run ends: small exceptions (mini-swe-agent style) the loop and its policy raise and
`AgentRun.run` turns into the session's ending."""

from __future__ import annotations

from lmagent.core.status import (
    STATUS_BLOCKED,
    STATUS_COMPLETED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_MAX_ITERATIONS,
    STATUS_WAITING,
)


class RunEnded(Exception):
    status = STATUS_COMPLETED

    def __init__(self, message: str = "", **extra):
        super().__init__(message)
        self.message = message
        self.extra = extra


class Completed(RunEnded):
    status = STATUS_COMPLETED


class Blocked(RunEnded):
    status = STATUS_BLOCKED


class Stuck(Blocked):
    """Blocked going nowhere: a call repeated, steps without progress, nudges unheeded. A small
    model's attempt may be begun again instead (lmagent.loop.attempts)."""


class Waiting(RunEnded):
    status = STATUS_WAITING


class Interrupted(RunEnded):
    status = STATUS_INTERRUPTED


class LimitsExceeded(RunEnded):
    status = STATUS_MAX_ITERATIONS


class Failed(RunEnded):
    status = STATUS_ERROR
