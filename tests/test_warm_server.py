"""The embedded server kept loaded between runs (EMBEDDED_KEEP_WARM): a second one-shot run
uses the server the first left and loads no model; a server of other settings is not used (it
is replaced when idle, left to the run using it otherwise); the server ends once no run has
used it for the minutes set, or at `--stop-warm`; it answers only requests carrying its key; a
record naming another process is neither used nor signalled. Against llama.cpp's real server
(xllamacpp) with SmolLM2, which loads in a second or two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

import lmagent.llm.embedded as embedded_llm
from lmagent.llm.warm import WarmServer, lease_name, live_leases
from tests.cli_process import ROOT, cli_env
from tests.realmodel_fixtures import THREADS, need_model, need_module

pytestmark = pytest.mark.realmodel

ENDS_WITHIN = 120  # seconds a kept-warm server has to end once told (a busy machine)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """XDG_CACHE_HOME of the test: its warm servers are stopped and awaited after it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    for pid in embedded_llm.stop_warm_servers():
        ended(pid)


def server(speculation: str = "none", keep_warm: float = 5, key: str = "k3y"):
    need_module("xllamacpp")
    return embedded_llm.EmbeddedServer(
        need_model(), n_ctx=2048, threads=THREADS, speculation=speculation,
        keep_warm=keep_warm, key=key,
    )  # fmt: skip


def ended(pid: int) -> bool:
    """Waits for process `pid` to end (reaped if it is a child of this process)."""
    try:
        psutil.Process(pid).wait(timeout=ENDS_WITHIN)
    except psutil.NoSuchProcess:
        pass
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_second_server_uses_the_one_the_first_left_loaded(cache):
    shown: list[str] = []
    first = server().start(shown.append)
    first.stop()
    assert psutil.pid_exists(first.pid)  # left for the next run
    assert any("stays loaded 5 min after the last run" in line for line in shown)
    shown.clear()
    second = server(key="another").start(shown.append)
    try:
        assert (second.pid, second.port, second.key) == (first.pid, first.port, "k3y")
        assert shown[0] == f"the model is loaded already (kept warm at {second.base_url})"
        assert not any("starting" in line for line in shown)
        headers = {"Authorization": "Bearer k3y"}
        asked = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        reply = requests.post(second.url, json=asked, headers=headers, timeout=120)
        assert reply.status_code == 200
    finally:
        second.stop()


def test_an_idle_kept_server_of_other_settings_is_replaced_not_left_beside(cache):
    first = server(speculation="none").start()
    first.stop()
    shown: list[str] = []
    second = server(speculation="ngram-simple").start(shown.append)
    try:
        assert second.pid != first.pid and not second.reused
        assert ended(first.pid)  # one model's server kept, not two
        record = json.loads(
            WarmServer(embedded_llm.warm_servers(), second.name()).record_file.read_text()
        )
        assert record["pid"] == second.pid
        assert any("stays loaded 5 min" in line for line in shown)
    finally:
        second.stop()
    assert embedded_llm.stop_warm_servers() == [second.pid]
    assert ended(second.pid)


def test_a_kept_server_of_other_settings_in_use_by_another_run_is_left_to_it(cache):
    first = server(speculation="none").start()
    first.stop()
    warm = WarmServer(embedded_llm.warm_servers(), first.name())
    other_run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (warm.clients / lease_name(other_run.pid)).touch()  # another run uses the kept server
        shown: list[str] = []
        second = server(speculation="ngram-simple").start(shown.append)
        assert second.pid != first.pid and psutil.pid_exists(first.pid)
        assert json.loads(warm.record_file.read_text())["pid"] == first.pid
        assert any("kept loaded with other settings for another run" in s for s in shown)
        assert [lease.name for lease in live_leases(warm.clients)] == [lease_name(other_run.pid)]
        second.stop()
        assert ended(second.pid)  # its own server ended with it
        assert psutil.pid_exists(first.pid)
    finally:
        other_run.kill()
        other_run.wait()


def test_a_server_no_run_uses_ends_after_its_minutes_and_forgets_itself(cache):
    running = server(keep_warm=0.01).start()  # 0.6 s
    warm = WarmServer(embedded_llm.warm_servers(), running.name())
    time.sleep(3)  # held by this process: it stays, however slow the machine
    assert psutil.pid_exists(running.pid) and requests.get(running.base_url + "/health").ok
    running.stop()
    assert ended(running.pid)
    assert not warm.record_file.exists()


def test_the_server_answers_only_requests_with_its_key(cache):
    with server(keep_warm=0, key="s3cret") as running:
        asked = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        refused = requests.post(running.url, json=asked, timeout=60)
        slots = requests.post(running.base_url + "/slots/0?action=save", json={"filename": "x"})
        wrong = requests.get(running.base_url + "/props", headers={"Authorization": "Bearer x"})
        right = requests.get(
            running.base_url + "/props", headers={"Authorization": "Bearer s3cret"}
        )
    assert (refused.status_code, slots.status_code, wrong.status_code) == (401, 401, 401)
    assert right.status_code == 200


def test_the_record_and_its_folder_are_the_users_alone(cache):
    running = server().start()
    running.stop()
    warm = WarmServer(embedded_llm.warm_servers(), running.name())
    assert warm.record_file.stat().st_mode & 0o777 == 0o600
    assert warm.folder.stat().st_mode & 0o777 == 0o700


def test_a_record_naming_another_process_is_not_used_nor_signalled(cache, tmp_path):
    """A record whose pid is some other process (the server ended and its pid was reused, or
    the file was written by someone else): not adopted, deleted, and neither --stop-warm nor a
    run replacing a server of other settings signals the process."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        probe = server()
        warm = WarmServer(embedded_llm.warm_servers(), probe.name())
        warm.clients.mkdir(parents=True)
        warm.write(9, bystander.pid, probe.identity(), "k")
        assert embedded_llm.stop_warm_servers() == []
        assert bystander.poll() is None and not warm.record_file.exists()
        warm.write(9, bystander.pid, probe.identity(), "k")
        started = probe.start()
        started.stop()
        assert started.pid != bystander.pid and started.port != 9 and bystander.poll() is None
        embedded_llm.stop_warm_servers()
        assert ended(started.pid)
        warm.write(9, bystander.pid, {"other": "settings"}, "k")  # nor replaced as a server
        replacing = server(speculation="ngram-simple").start()
        replacing.stop()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_leases_of_ended_processes_are_cleared(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    name = lease_name(gone.pid)
    gone.wait()
    clients = tmp_path / "x.clients"
    clients.mkdir()
    (clients / name).touch()
    (clients / lease_name(os.getpid())).touch()
    (clients / "not-a-lease").touch()
    assert [lease.name for lease in live_leases(clients)] == [lease_name(os.getpid())]
    assert sorted(path.name for path in clients.iterdir()) == [lease_name(os.getpid())]


def test_one_shot_runs_share_one_server_and_stop_warm_ends_it(workspace, tmp_path):
    """As a user: two `--embedded` runs, the second says the model was loaded already;
    `python -m lmagent.llm.embedded --stop-warm` ends the server."""
    need_module("xllamacpp")
    need_model()
    env = cli_env(workspace, None, EMBEDDED_MODEL="smollm2", XDG_CACHE_HOME=str(tmp_path))
    env.update(LLM_TEMPERATURE="0", LLM_MAX_TOKENS="8", MAX_ITERATIONS="1", LLM_TIMEOUT="180")
    env.update(EMBEDDED_KEEP_WARM="5")
    del env["LLM_URL"]  # --embedded alone
    command = [sys.executable, str(ROOT / "agent_main.py"), "--embedded", "say hi"]
    said = []
    try:
        for _ in range(2):
            done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True)
            said.append(done.stderr)
        assert "starting the embedded model server" in said[0]
        assert "· the model is loaded already (kept warm at http://127.0.0.1:" in said[1], said[1]
        assert "starting the embedded model server" not in said[1]
        [record] = (tmp_path / "lmagent" / "warm").glob("*.json")
        pid = json.loads(record.read_text())["pid"]
        assert psutil.pid_exists(pid)
    finally:
        stop = [sys.executable, "-m", "lmagent.llm.embedded", "--stop-warm"]
        stopped = subprocess.run(stop, cwd=ROOT, env=env, capture_output=True, text=True)
    assert stopped.stdout.strip() == "stopped 1 kept-warm server(s)"
    assert ended(pid)


def test_an_idle_server_does_not_retire_while_a_run_holds_a_lease(tmp_path):
    """A run that took its lease and read the record just as the server's minutes ran out
    keeps the server; without a lease the server retires and its record goes with it."""
    warm = WarmServer(tmp_path / "warm", "model")
    warm.clients.mkdir(parents=True)
    warm.write(9, 4242, {}, "k")
    lease = warm.take_lease()
    assert not warm.retire(4242) and warm.record_file.exists()
    lease.unlink()
    assert warm.retire(4242) and not warm.record_file.exists()
