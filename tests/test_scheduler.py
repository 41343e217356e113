"""The scheduler: inbox claims, crash recovery, wake-ups, locking, and its status output.

The daemon runs for real: as `python agent_main.py --scheduler` in a subprocess, or in a thread
through `start_background`, always against the scripted LLM server.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lmagent.core.config import Config, ConfigError
from lmagent.loop.run import run_agent
from lmagent.scheduler.inbox import DaemonLock, Paths, SchedulerLocked, read_history, submit
from lmagent.scheduler.service import start_background, status
from lmagent.sessions.store import SessionBusy, SessionStore
from lmagent.sessions.waiting import WaitingIndex, parse_time
from tests.conftest import ROOT, make_config, wait_for
from tests.scripted_llm import ScriptedLLM, error, text
from tests.test_sessions import held

DONE = text("done\nTASK_COMPLETE")


def history(workspace: Path) -> list[dict]:
    return read_history(Paths(workspace).history)


def runs(workspace: Path, status: str | None = None) -> list[dict]:
    return [
        r
        for r in history(workspace)
        if "duration_s" in r and (status is None or r["status"] == status)
    ]


def rejected(workspace: Path) -> list[str]:
    return [r["task_file"] for r in history(workspace) if r["status"] == "malformed"]


def files(directory: Path, suffix: str = "") -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def daemon_env(workspace: Path, llm: ScriptedLLM, **extra: str) -> dict:
    env = dict(os.environ)
    env.update(
        WORKSPACE=str(workspace),
        LLM_URL=llm.url,
        PERMISSION_MODE="auto",
        SCHEDULER_POLL_INTERVAL="1",
        LLM_RETRY_DELAY="0.01",
        **extra,
    )
    return env


def start_daemon(workspace: Path, llm: ScriptedLLM, *args: str, **env: str) -> subprocess.Popen:
    log = open(workspace.parent / f"daemon-{time.time_ns()}.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "agent_main.py"), "--scheduler", *args],
        env=daemon_env(workspace, llm, **env),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    process.log = log  # closed by the test's fixture
    lock = Paths(workspace).lock
    wait_for(
        lambda: DaemonLock(lock).holder() == str(process.pid),
        what="the daemon to take its lock",
    )
    return process


def cli(workspace: Path, llm: ScriptedLLM, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "agent_main.py"), *args],
        env=daemon_env(workspace, llm),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def background(workspace, llm):
    handles = []

    def start(config=None, **options):
        handle = start_background(config or make_config(workspace, llm), **options)
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        handle.stop()


# --------------------------------------------------------------------------- inbox


SUBMITTER = """
import sys, time
from pathlib import Path
from lmagent.core.config import Config
from lmagent.scheduler.inbox import submit
config = Config.load(environ={"WORKSPACE": sys.argv[1]})
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
for i in range(int(sys.argv[4])):
    submit(config, f"task {sys.argv[3]}-{i}")
"""


def test_a_thousand_tasks_from_four_processes_each_run_exactly_once(workspace, daemons, tmp_path):
    with ScriptedLLM([DONE] * 1000, chunk_size=1000) as llm:
        daemons.append(start_daemon(workspace, llm, "--max-concurrent", "4"))
        go = tmp_path / "go"
        submitters = [
            subprocess.Popen(
                [sys.executable, "-c", SUBMITTER, str(workspace), str(go), str(p), "250"],
                cwd=ROOT,
            )
            for p in range(4)
        ]
        go.touch()
        assert [s.wait(60) for s in submitters] == [0, 0, 0, 0]
        wait_for(lambda: len(runs(workspace)) >= 1000, timeout=150, what="1,000 runs")
        llm.wait_idle()
        llm.assert_all_used()
        assert len(llm.requests) == 1000

    paths = Paths(workspace)
    completed = runs(workspace, "completed")
    assert len(completed) == len(runs(workspace)) == 1000
    assert len({r["task_file"] for r in completed}) == 1000
    assert len({r["session_id"] for r in completed}) == 1000
    tasks = sorted(meta["task"] for meta in SessionStore(workspace).list())
    assert tasks == sorted(f"task {p}-{i}" for p in range(4) for i in range(250))
    # the history line is written before the task moves on and its claim markers go
    wait_for(
        lambda: len(files(paths.done)) == 1000 and files(paths.processing) == [],
        what="1,000 tasks in done/ and no claim left",
    )
    assert files(paths.inbox) == files(paths.processing) == files(paths.failed) == []


def test_submit_writes_one_task_file_per_call_in_either_form(workspace):
    config = make_config(workspace)
    plain = submit(config, "  write the report  ")
    later = submit(config, "later", not_before="2030-01-02T03:04:05+05:00", mode="normal")
    resume = submit(config, None, session_id="20300101-000000-abc")

    assert plain.suffix == ".task" and plain.read_text() == "write the report"
    assert json.loads(later.read_text()) == {
        "task": "later",
        "not_before": "2030-01-01T22:04:05+00:00",
        "mode": "normal",
    }
    assert json.loads(resume.read_text()) == {"task": None, "session_id": "20300101-000000-abc"}
    assert sorted(os.listdir(plain.parent)) == sorted(p.name for p in (plain, later, resume))
    with pytest.raises(ValueError, match="nothing to do"):
        submit(config, "   ")
    with pytest.raises(ValueError, match="not_before"):
        submit(config, "x", not_before="next tuesday")


def test_malformed_and_empty_files_are_moved_aside_with_a_reason(workspace, llm, background):
    llm.add(DONE)
    inbox = Paths(workspace).inbox
    inbox.mkdir(parents=True)
    bad = {
        "empty.task": b"",
        "blank.json": b"  \n",
        "broken.json": b'{"task": ',
        "list.json": b"[1, 2]",
        "nothing.json": b'{"mode": "auto"}',
        "when.json": b'{"task": "x", "not_before": "next tuesday"}',
        "mode.json": b'{"task": "x", "mode": "yolo"}',
        "binary.task": b"\xff\xfe\x00",
        "notes.txt": b"a task with the wrong extension",
    }
    for name, data in bad.items():
        (inbox / name).write_bytes(data)
    past = time.time() - 60  # older than the grace given to a file still being written
    for name in ("empty.task", "blank.json"):
        os.utime(inbox / name, (past, past))
    good = submit(make_config(workspace, llm), "the good one")

    background()
    failed = Paths(workspace).failed
    wait_for(lambda: len(runs(workspace)) == 1, what="the good task")
    wait_for(lambda: len(rejected(workspace)) == len(bad), what="every bad file to be recorded")

    assert files(inbox) == []
    assert files(failed) == sorted([*bad, *(f"{n}.reason" for n in bad)])
    for name, data in bad.items():
        assert (failed / name).read_bytes() == data  # kept as it was
    reasons = {n: (failed / f"{n}.reason").read_text().strip() for n in bad}
    assert reasons["empty.task"] == reasons["blank.json"] == "the file is empty"
    assert reasons["broken.json"].startswith("invalid JSON")
    assert "must be an object" in reasons["list.json"]
    assert "nothing to do" in reasons["nothing.json"]
    assert "not_before" in reasons["when.json"]
    assert "'mode' must be one of" in reasons["mode.json"]
    assert reasons["binary.task"] == "the file is not UTF-8 text"
    assert "unknown kind of file" in reasons["notes.txt"]
    assert sorted(rejected(workspace)) == sorted(bad)
    assert runs(workspace)[0]["task_file"] == good.name
    assert len(llm.requests) == 1


def test_not_before_is_honoured(workspace, llm, background):
    arrivals = []
    llm.add(lambda body: arrivals.append(time.time()) or DONE)
    start_at = math.ceil(time.time()) + 3
    when = datetime.fromtimestamp(start_at).strftime("%Y-%m-%dT%H:%M:%S")  # naive local
    submit(make_config(workspace, llm), "later", not_before=when)
    background()

    time.sleep(0.5)
    shown = status(make_config(workspace, llm))
    assert shown["queued"] == 0 and len(shown["scheduled"]) == 1
    wait_for(lambda: arrivals, timeout=10, what="the run")
    assert start_at <= arrivals[0] <= start_at + 3.0  # a tick, a claim, a run's start


# --------------------------------------------------------------------------- faults


def _hold_first_reply(llm: ScriptedLLM) -> None:
    llm.add(text("never sent", delay=30), DONE)


def _session_marker(workspace: Path) -> Path:
    processing = Paths(workspace).processing
    name = wait_for(lambda: files(processing, ".session"), what="the run to start")[0]
    return processing / name


def test_a_task_cut_short_by_kill_9_completes_after_a_restart(workspace, llm, daemons):
    _hold_first_reply(llm)
    submitted = submit(make_config(workspace, llm), "survive the crash")
    daemons.append(start_daemon(workspace, llm))
    session_id = _session_marker(workspace).read_text()
    llm.wait_for_requests(1)
    daemons[0].send_signal(signal.SIGKILL)
    daemons[0].wait(10)

    daemons.append(start_daemon(workspace, llm))
    wait_for(lambda: runs(workspace, "completed"), what="the resumed run")

    [recovered] = [r for r in history(workspace) if r["status"] == "recovered"]
    assert recovered == {**recovered, "task_file": submitted.name, "session_id": session_id}
    [run] = runs(workspace)
    assert run["session_id"] == session_id and run["attempt"] == 1
    meta = SessionStore(workspace).open(session_id).meta
    assert meta["status"] == "completed" and meta["task"] == "survive the crash"
    resumed = llm.requests[1]["messages"]
    assert resumed[1]["content"] == "survive the crash"
    assert "resumed" in resumed[-1]["content"]
    paths = Paths(workspace)
    # the history line comes first, then the task moves on, the files beside it go last
    wait_for(lambda: files(paths.done), what="the task to move to done/")
    assert files(paths.done) == [submitted.with_suffix(".json").name]
    wait_for(lambda: files(paths.processing) == [], what="the claim markers to go")
    assert files(paths.inbox) == []
    llm.assert_all_used()


def test_sigterm_saves_the_session_as_interrupted_and_requeues_it(workspace, llm, daemons):
    _hold_first_reply(llm)
    submitted = submit(make_config(workspace, llm), "stop politely")
    daemon = start_daemon(workspace, llm)
    daemons.append(daemon)
    session_id = _session_marker(workspace).read_text()
    llm.wait_for_requests(1)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(10) == 0

    assert SessionStore(workspace).open(session_id).meta["status"] == "interrupted"
    [run] = runs(workspace)
    assert (run["status"], run["outcome"], run["session_id"]) == (
        "interrupted",
        "requeued",
        session_id,
    )
    inbox = Paths(workspace).inbox
    requeued = submitted.with_suffix(".json").name
    assert files(inbox) == [requeued]
    assert json.loads((inbox / requeued).read_text()) == {"task": None, "session_id": session_id}

    daemons.append(start_daemon(workspace, llm))
    wait_for(lambda: runs(workspace, "completed"), what="the requeued run")
    assert runs(workspace, "completed")[0]["session_id"] == session_id
    llm.assert_all_used()


def test_two_daemons_cannot_run_on_one_workspace(workspace, llm, daemons):
    first = start_daemon(workspace, llm)
    daemons.append(first)

    second = cli(workspace, llm, "--scheduler")
    assert second.returncode == 1
    assert f"another scheduler is already running on this workspace (pid {first.pid})" in (
        second.stderr
    )
    with pytest.raises(SchedulerLocked):
        start_background(make_config(workspace, llm))
    assert first.poll() is None


def test_a_failing_run_is_recorded_as_failed_with_its_error(workspace, background):
    with ScriptedLLM([error(400, {"error": "bad request"})]) as llm:
        config = make_config(workspace, llm)
        submit(config, "needs a model")
        submit(config, "continue", session_id="20000101-000000-nosuch")
        background(config)

        wait_for(lambda: len(runs(workspace)) == 2, what="two outcomes")
    by_task = {r["task"]: r for r in runs(workspace)}
    assert by_task["needs a model"]["status"] == "error"
    assert by_task["needs a model"]["error"]
    assert by_task["continue"]["status"] == "failed"
    assert "no session" in by_task["continue"]["error"]
    failed = Paths(workspace).failed  # the history line is written first, then the file moves
    wait_for(lambda: len(files(failed, ".reason")) == 2 and len(files(failed)) == 4, what="moves")


# --------------------------------------------------------------------------- wake-ups


def test_wake_ups_in_three_time_zone_forms_fire_on_time(workspace, llm, daemons):
    daemons.append(start_daemon(workspace, llm, TZ="UTC-05:30"))  # POSIX: east is negative
    # time enough for the three runs to park first, on a busy machine too
    base = datetime.fromtimestamp(math.ceil(time.time()) + 8, timezone.utc)
    daemon_zone = timezone(timedelta(hours=5, minutes=30))  # the daemon runs with TZ=UTC+05:30
    forms = {
        "zulu": (base, base.strftime("%Y-%m-%dT%H:%M:%SZ")),
        "offset": (
            base + timedelta(seconds=1),
            (base + timedelta(seconds=1)).astimezone(timezone(timedelta(hours=5))).isoformat(),
        ),
        "naive": (
            base + timedelta(seconds=2),
            (base + timedelta(seconds=2)).astimezone(daemon_zone).strftime("%Y-%m-%dT%H:%M:%S"),
        ),
    }
    fired: dict[str, float] = {}

    def reply(body: dict) -> dict:
        messages = body["messages"]
        form = messages[1]["content"]
        if "You asked to wait until" in messages[-1]["content"]:
            fired[form] = time.time()
            return DONE
        return text(f"Waiting.\nWAIT: {forms[form][1]}: the build runs")

    llm.add(*[reply] * 6)
    config = make_config(workspace, llm)
    for form in forms:
        submit(config, form)

    wait_for(lambda: len(runs(workspace, "waiting")) == 3, timeout=15, what="three parked runs")
    wait_for(lambda: len(fired) == 3, timeout=20, what="three wake-ups")
    for form, (when, _) in forms.items():  # a zone read wrongly is hours off
        assert when.timestamp() <= fired[form] <= when.timestamp() + 4.0, form
    wait_for(lambda: len(runs(workspace, "completed")) == 3, what="the resumed runs")
    assert WaitingIndex(workspace).load() == {}
    llm.assert_all_used()


def test_a_session_parked_by_another_front_end_is_woken_too(workspace, llm, background):
    fired = []
    wake_at = math.ceil(time.time()) + 5  # parked before then, on a busy machine too
    stamp = datetime.fromtimestamp(wake_at, timezone.utc).isoformat()
    llm.add(text(f"WAIT: {stamp}: check back"), lambda body: fired.append(time.time()) or DONE)
    config = make_config(workspace, llm)
    parked = run_agent(config, "a REPL task", source="cli")
    assert parked.status == "waiting"

    background()
    wait_for(lambda: fired, timeout=15, what="the wake-up")
    assert wake_at <= fired[0] <= wake_at + 4.0  # not at the next rescan
    wait_for(lambda: runs(workspace, "completed"), what="the resumed run")
    assert runs(workspace)[0]["session_id"] == parked.session_id


def test_a_wait_set_by_another_front_end_is_noticed_without_a_rescan(workspace, llm, background):
    config = make_config(workspace, llm, scheduler_poll_interval=60)  # next rescan: in a minute
    logs: list[str] = []
    background(config, log=logs.append)
    wait_for(lambda: any("watching" in m for m in logs), what="the first rescan to be over")
    fired = []
    wake_at = math.ceil(time.time()) + 5  # parked before then, on a busy machine too
    stamp = datetime.fromtimestamp(wake_at, timezone.utc).isoformat()
    llm.add(text(f"WAIT: {stamp}: check back"), lambda body: fired.append(time.time()) or DONE)
    parked = run_agent(config, "a REPL task", source="repl")
    assert parked.status == "waiting"

    wait_for(lambda: fired, timeout=15, what="the wake-up")
    assert wake_at <= fired[0] <= wake_at + 4.0  # not at the next rescan
    wait_for(lambda: runs(workspace, "completed"), what="the resumed run")
    assert runs(workspace)[0]["session_id"] == parked.session_id


def test_parse_time_reads_zulu_offsets_and_local_times():
    utc = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert parse_time("2030-01-02T03:04:05Z") == utc
    assert parse_time("2030-01-02T08:04:05+05:00") == utc
    assert parse_time("2030-01-02 08:04:05+0500") == utc
    local = utc.astimezone().replace(tzinfo=None)
    assert parse_time(local.isoformat()) == utc


# --------------------------------------------------------------------------- front ends


def test_a_front_end_gets_the_events_and_a_busy_one_only_delays_work(workspace, llm, background):
    llm.add(DONE, text("held", delay=30))
    busy = threading.Event()
    busy.set()
    events: dict[str, list[dict]] = {}
    config = make_config(workspace, llm)
    first = submit(config, "first")
    handle = background(
        sink_factory=lambda job: events.setdefault(job.name, []).append, busy=busy.is_set
    )

    time.sleep(0.6)  # three polls while the front end is busy: nothing is claimed
    assert files(Paths(workspace).inbox) == [first.name] and llm.requests == []
    busy.clear()
    wait_for(lambda: runs(workspace), what="the first run")
    kinds = [e["type"] for e in events[first.name]]
    assert kinds[0] == "session" and kinds[-1] == "done"
    session_id = events[first.name][0]["session_id"]
    assert SessionStore(workspace).open(session_id).meta["source"] == "scheduler"

    second = submit(config, "second")
    llm.wait_for_requests(2)
    handle.stop()
    assert not handle.alive
    requeued = second.with_suffix(".json").name
    assert files(Paths(workspace).inbox) == [requeued]


def test_a_session_in_use_elsewhere_waits_in_the_inbox_until_it_is_free(workspace, llm, background):
    config = make_config(workspace, llm)
    llm.add(DONE)
    first = run_agent(config, "start", source="repl")
    release = threading.Event()
    llm.add(held(release, text("REPL reply.\nTASK_COMPLETE")), text("Scheduled.\nTASK_COMPLETE"))
    repl = threading.Thread(
        target=run_agent,
        args=(config, "from the REPL"),
        kwargs={"session_id": first.session_id, "source": "repl"},
    )
    repl.start()
    llm.wait_for_requests(2)
    queued = submit(config, "from the scheduler", session_id=first.session_id)
    logs: list[str] = []
    background(log=logs.append)
    wait_for(lambda: any("watching" in m for m in logs), what="the scheduler to start")

    time.sleep(0.6)  # three polls while the session is in use: the task is not claimed
    assert files(Paths(workspace).inbox) == [queued.name] and len(llm.requests) == 2
    release.set()
    repl.join(10)
    wait_for(lambda: runs(workspace), what="the scheduled run")
    llm.assert_all_used()

    [run] = runs(workspace)
    assert (run["status"], run["session_id"]) == ("completed", first.session_id)
    session = SessionStore(workspace).open(first.session_id)
    users = [m["content"] for m in session.transcript if m["role"] == "user"]
    assert users == ["start", "from the REPL", "from the scheduler"]
    assert [m["role"] for m in session.transcript] == ["user", "assistant"] * 3
    assert session.meta["messages"] == 6 and session.meta["status"] == "completed"


def test_a_run_on_a_session_the_scheduler_is_running_is_refused(workspace, llm, background):
    release = threading.Event()
    llm.add(held(release, DONE))
    config = make_config(workspace, llm)
    submit(config, "scheduled work")
    background()
    session_id = _session_marker(workspace).read_text()
    llm.wait_for_requests(1)

    with pytest.raises(SessionBusy):
        run_agent(config, "interfere", session_id=session_id, source="repl")
    release.set()
    wait_for(lambda: runs(workspace, "completed"), what="the scheduled run")
    session = SessionStore(workspace).open(session_id)
    assert [m["content"] for m in session.transcript] == ["scheduled work", "done\nTASK_COMPLETE"]
    assert session.meta["status"] == "completed"


def test_scheduler_concurrency_sets_how_many_tasks_run_at_once(workspace, llm, background):
    environ = {"WORKSPACE": str(workspace), "LLM_URL": llm.url, "SCHEDULER_CONCURRENCY": "2"}
    config = Config.load(environ=environ, cwd=workspace)
    release = threading.Event()
    llm.add(held(release, DONE), held(release, DONE), DONE)
    for name in ("one", "two", "three"):
        submit(config, name)
    background(config)

    llm.wait_for_requests(2)  # both held at once
    time.sleep(0.4)
    assert len(llm.requests) == 2
    release.set()
    wait_for(lambda: len(runs(workspace, "completed")) == 3, what="three runs")
    with pytest.raises(ConfigError, match=r"SCHEDULER_CONCURRENCY='17'.*from 1 to 16"):
        Config.load(environ={**environ, "SCHEDULER_CONCURRENCY": "17"}, cwd=workspace)


def test_scheduler_status_shows_the_queue_waiting_sessions_and_runs(workspace, llm, background):
    llm.add(DONE, text("WAIT: 2099-01-01T00:00:00Z: next year"))
    config = make_config(workspace, llm)
    submit(config, "finish now")
    submit(config, "park it")
    handle = background()
    wait_for(lambda: len(runs(workspace)) == 2, what="two runs")
    handle.stop()
    submit(config, "much later", not_before="2099-06-01T00:00:00Z")
    submit(config, "queued")
    (Paths(workspace).inbox / "bad.json").write_text("{")

    shown = cli(workspace, llm, "--scheduler-status")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:4] == [
        "scheduler: not running",
        "inbox: 2 queued, 1 scheduled for later",
        "processing: 0   done: 2   failed: 0   runs recorded: 2",
        "waiting sessions: 1",
    ]
    waiting = next(r for r in runs(workspace) if r["status"] == "waiting")
    assert lines[4].split()[:3] == [waiting["session_id"], "until", "2099-01-01T00:00:00+00:00"]
    assert "not before 2099-06-01T00:00:00+00:00" in lines[5]
    assert lines[6] == "recent:"
    assert "completed" in lines[7] and "finish now" in lines[7]
    assert "waiting" in lines[8] and waiting["session_id"] in lines[8]

    as_json = json.loads(cli(workspace, llm, "--scheduler-status", "--json").stdout)
    assert as_json["daemon_pid"] is None and as_json["runs"] == 2
    assert list(as_json["waiting"]) == [waiting["session_id"]]


def test_submit_on_the_command_line(workspace, llm):
    plain = cli(workspace, llm, "--submit", "write docs")
    assert plain.returncode == 0, plain.stderr
    assert Path(plain.stdout.strip()).read_text() == "write docs"
    later = cli(
        workspace, llm, "--submit", '{"task": "later"}', "--not-before", "2099-01-01T00:00:00Z"
    )
    data = json.loads(Path(later.stdout.strip()).read_text())
    assert data == {"task": "later", "not_before": "2099-01-01T00:00:00+00:00"}
    refused = cli(workspace, llm, "--submit", "  ")
    assert refused.returncode == 1 and "nothing to do" in refused.stderr


def test_scheduler_status_shows_a_wait_reason_the_model_chose_escaped(workspace, llm, background):
    llm.add(text("WAIT: 2099-01-01T00:00:00Z: \x1b]0;owned\x07\x1b[2J done"))
    submit(make_config(workspace, llm), "park it")
    handle = background()
    wait_for(lambda: runs(workspace), what="the run")
    handle.stop()
    shown = cli(workspace, llm, "--scheduler-status").stdout
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\\x1b]0;owned\\x07\\x1b[2J done" in shown
