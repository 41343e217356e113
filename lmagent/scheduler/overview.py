"""The scheduler's state for a front end's panel, whichever scheduler the settings name: the
directory inbox (lmagent/scheduler/service.py) or the distributed queue (redis_queue.py)."""

from __future__ import annotations

from lmagent.core.config import Config


def overview(config: Config) -> dict:
    """`--scheduler-status --json` as a dict, with `kind` ("inbox" or "queue"); a queue that
    cannot be reached gives `error` instead of failing the page."""
    if not config.scheduler_queue:
        from lmagent.scheduler.service import status

        return {"kind": "inbox", **status(config)}
    from lmagent.scheduler import redis_queue

    try:
        return {"kind": "queue", **redis_queue.status(config)}
    except redis_queue.QueueError as exc:
        queue = redis_queue.shown(config.scheduler_queue)
        return {"kind": "queue", "queue": queue, "error": str(exc)}


def overview_lines(config: Config) -> list[str]:
    """The same for a person (the web UI's /status)."""
    if not config.scheduler_queue:
        from lmagent.scheduler.service import status_lines

        return status_lines(config)
    from lmagent.scheduler import redis_queue

    try:
        return redis_queue.status_lines(config)
    except redis_queue.QueueError as exc:
        return [f"scheduler queue: {exc}"]
