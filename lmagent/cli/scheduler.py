"""The scheduler in the terminal: `--submit`, `--scheduler-status` and `--scheduler` (the daemon
in the foreground).
"""

from __future__ import annotations

import json
import sys

from lmagent.cli.display import escape
from lmagent.cli.terminal import TerminalIO, stop_on_signals
from lmagent.core.config import Config
from lmagent.core.stop import StopToken
from lmagent.runtime import shared_runtime
from lmagent.scheduler.daemon import Scheduler
from lmagent.scheduler.inbox import (
    DaemonLock,
    Paths,
    SchedulerLocked,
    json_object,
    submit,
)
from lmagent.scheduler.service import status, status_lines


def cli(config: Config, args) -> int:
    """`--submit`, `--scheduler-status` and `--scheduler` for agent_main.py."""
    if config.scheduler_queue:
        return queue_cli(config, args)
    if args.submit is not None:
        try:
            data = _cli_task(args)
            path = submit(
                config,
                data.get("task"),
                data.get("session_id"),
                data.get("not_before"),
                data.get("mode") or data.get("permission"),
            )
        except ValueError as exc:
            print(f"error: cannot submit: {exc}", file=sys.stderr)
            return 1
        print(path)  # what scripts keep: the task file (its name is the task id)
        print(f"· task {path.stem} queued; {who_runs_it(config)}", file=sys.stderr)
        return 0
    if args.scheduler_status:
        if args.json:
            print(json.dumps(status(config), ensure_ascii=False))
        else:
            print_lines(status_lines(config))
        return 0
    return run_daemon(config, args)


def queue_cli(config: Config, args) -> int:
    """The same three on the distributed queue (SCHEDULER_QUEUE / --queue)."""
    from lmagent.scheduler import redis_queue

    try:
        if args.submit is not None:
            task_id = redis_queue.submit(config, _cli_task(args))
            print(task_id)  # what scripts keep
            print(f"· task {task_id} queued; {redis_queue.who_takes_it(config)}", file=sys.stderr)
            return 0
        if args.scheduler_status:
            if args.json:
                print(json.dumps(redis_queue.status(config), ensure_ascii=False))
            else:
                print_lines(redis_queue.status_lines(config))
            return 0
        return run_queue_worker(config, args)
    except (ValueError, redis_queue.QueueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run_queue_worker(config: Config, args) -> int:
    """A worker of the queue in the foreground; SIGINT/SIGTERM stop it once its task is
    interrupted (the task is taken up again by a worker, resuming its session)."""
    from lmagent.scheduler.redis_worker import run_worker

    io = TerminalIO(as_json=bool(getattr(args, "json", False)))
    run_worker(config, io.line, StopToken())
    return 0


def print_lines(lines: list[str]) -> None:
    """Status lines on stdout, each one line, escaped: task texts, wait reasons and errors are
    the model's or a queue writer's to choose, and must not drive the terminal."""
    for line in lines:
        print(escape(line).replace("\n", "\\n"))


def who_runs_it(config: Config) -> str:
    """Whether a scheduler (the daemon, the web UI or a REPL) is running on the workspace."""
    pid = DaemonLock(Paths(config.workspace).lock).holder()
    if pid:
        return f"the scheduler running on this workspace (pid {pid}) will start it"
    return (
        "no scheduler is running on this workspace: start one with `agent_main.py --scheduler` "
        "(or keep the web UI or the REPL open), or the task waits"
    )


def _cli_task(args) -> dict:
    """`--submit TEXT` (or a JSON object), with --resume / --not-before / --permission."""
    text = args.submit.strip()
    data = json_object(text) if text.startswith("{") else {"task": text}
    for key, value in (
        ("session_id", getattr(args, "resume", None)),
        ("not_before", getattr(args, "not_before", None)),
        ("mode", getattr(args, "permission", None)),
    ):
        if value:
            data[key] = value
    return data


def run_daemon(config: Config, args) -> int:
    """Run the scheduler in the foreground. SIGINT/SIGTERM stop it gracefully (running tasks
    are saved as interrupted and requeued); a second signal stops it at once."""
    io = TerminalIO(as_json=bool(getattr(args, "json", False)))
    if io.as_json:
        log = lambda message: io.event({"type": "scheduler", "message": message})  # noqa: E731
    else:
        log = io.line
    scheduler = Scheduler(
        config,
        concurrency=getattr(args, "max_concurrent", None),
        sink_factory=(lambda job: io.event) if io.as_json else None,
        log=log,
    )
    try:
        scheduler.acquire()
    except SchedulerLocked as exc:
        io.error(str(exc))
        return 1
    stop = StopToken()
    with stop_on_signals(stop, io), shared_runtime(config) as scheduler.runtime:
        for line in scheduler.runtime.banner_lines():
            log(f"scheduler: {line}")
        scheduler.run_forever(stop)
    return 0
