"""Core of LMAgent: configuration, the workspace boundary, atomic files, stopping, compaction,
loop detection and the permission gate (sessions are in agent_sessions).

Everything here is front-end neutral and imports nothing from the other agent modules.
"""

from __future__ import annotations

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

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
