"""The scheduler as a service of a front end: the daemon hosted in a thread (`start_background`,
used by the REPL and the web UI) and its status. The parts: inbox.py (tasks, `submit`, paths,
the daemon lock, history), queue.py (how task files move), daemon.py (`Scheduler`); the index
of waiting sessions is lmagent/sessions/waiting.py. The terminal front end is
lmagent/cli/scheduler.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone

from lmagent.core.config import Config
from lmagent.core.files import read_json
from lmagent.core.stop import StopToken
from lmagent.scheduler.daemon import Scheduler, Sink
from lmagent.scheduler.inbox import (
    DaemonLock,
    Job,
    Paths,
    SchedulerLocked,
    names,
    peek,
    read_history,
    submit,
)
from lmagent.sessions.waiting import WaitingIndex, parse_time

__all__ = [
    "BackgroundScheduler",
    "DaemonLock",
    "Job",
    "Paths",
    "Scheduler",
    "SchedulerLocked",
    "WaitingIndex",
    "parse_time",
    "read_history",
    "start_background",
    "status",
    "status_lines",
    "submit",
]


# --------------------------------------------------------------------------- front ends


class BackgroundScheduler:
    """A scheduler running in a thread of a front end (web UI, REPL)."""

    def __init__(self, scheduler: Scheduler, thread: threading.Thread, stop: StopToken):
        self.scheduler = scheduler
        self.thread = thread
        self._stop = stop

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = 60.0) -> None:
        """Interrupt running tasks (they are requeued) and wait for the thread to end."""
        self._stop.stop("the scheduler is shutting down")
        self.thread.join(timeout)


def start_background(
    config: Config,
    sink_factory: Callable[[Job], Sink | None] | None = None,
    **options,
) -> BackgroundScheduler:
    """Start the scheduler in a daemon thread; raises SchedulerLocked when one already runs.

    `sink_factory(job)` gives each scheduled run its own event sink; options are those of
    `Scheduler` (concurrency, runtime, busy, log). While `busy()` is true no new task is
    claimed: tasks wait in the inbox, none is dropped.
    """
    scheduler = Scheduler(config, sink_factory=sink_factory, **options)
    scheduler.acquire()
    stop = StopToken()
    thread = threading.Thread(
        target=scheduler.run_forever, args=(stop,), name="lmagent-scheduler", daemon=True
    )
    thread.start()
    return BackgroundScheduler(scheduler, thread, stop)


# --------------------------------------------------------------------------- status and CLI


def status(config: Config, recent: int = 10) -> dict:
    """What `--scheduler-status` shows: daemon, queue, waiting sessions, the latest runs."""
    paths = Paths(config.workspace)
    now = datetime.now(timezone.utc)
    queued, later = [], []
    for name in names(paths.inbox):
        job = peek(paths.inbox / name)
        if job and job.not_before and parse_time(job.not_before) > now:
            later.append({"file": name, "not_before": job.not_before})
        else:
            queued.append(name)
    history = read_history(paths.history)
    pid = DaemonLock(paths.lock).holder()
    return {
        "daemon_pid": pid,
        "model_unreachable": read_json(paths.model_note) if pid else None,
        "queued": len(queued),
        "scheduled": later,
        "processing": paths.claimed(),
        "done": len(names(paths.done)),
        "failed": len([n for n in names(paths.failed) if not n.endswith(".reason")]),
        "waiting": WaitingIndex(config.workspace).load(),
        "runs": sum(1 for r in history if "duration_s" in r),
        "recent": history[-recent:],
    }


def status_lines(config: Config, recent: int = 10) -> list[str]:
    """`status` for a person: what `--scheduler-status` and the REPL's /status print."""
    info = status(config, recent)
    pid = info["daemon_pid"]
    lines = [
        f"scheduler: {'running (pid ' + pid + ')' if pid else 'not running'}",
        *model_line(info["model_unreachable"]),
        f"inbox: {info['queued']} queued, {len(info['scheduled'])} scheduled for later",
        f"processing: {len(info['processing'])}   done: {info['done']}   "
        f"failed: {info['failed']}   runs recorded: {info['runs']}",
        f"waiting sessions: {len(info['waiting'])}",
    ]
    for session_id, entry in sorted(info["waiting"].items(), key=lambda i: i[1]["wait_until"]):
        lines.append(f"  {session_id}  until {entry['wait_until']}  {entry.get('reason', '')}")
    for item in info["scheduled"]:
        lines.append(f"  {item['file']}  not before {item['not_before']}")
    if info["recent"]:
        lines.append("recent:")
    for record in info["recent"]:
        lines.append("  " + _history_line(record))
    return lines


def model_line(note) -> list[str]:
    if not isinstance(note, dict):
        return []
    since = str(note.get("since", ""))[:19]
    return [
        f"model server: none answers at {note.get('url')} (since {since}); tasks stay in the "
        "inbox until one does"
    ]


def _history_line(record: dict) -> str:
    parts = [record.get("time", "")[:19], f"{record.get('status', '?'):<14}"]
    if "duration_s" in record:
        parts.append(f"{record['duration_s']:.1f}s {record.get('tokens', 0)} tokens")
    if record.get("session_id"):
        parts.append(f"session {record['session_id']}")
    parts.append(record.get("task") or record.get("task_file", ""))
    if record.get("error"):
        parts.append(f"— {record['error'][:200]}")
    return "  ".join(parts)
