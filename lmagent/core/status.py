"""How a run can end: the status names sessions, events and exit codes use."""

from __future__ import annotations

STATUS_RUNNING = "running"
STATUS_COMPLETED = "completed"
STATUS_BLOCKED = "blocked"
STATUS_WAITING = "waiting"
STATUS_INTERRUPTED = "interrupted"
STATUS_ERROR = "error"
STATUS_MAX_ITERATIONS = "max_iterations"
FINAL_STATUSES = (
    STATUS_COMPLETED,
    STATUS_BLOCKED,
    STATUS_WAITING,
    STATUS_INTERRUPTED,
    STATUS_ERROR,
    STATUS_MAX_ITERATIONS,
)
