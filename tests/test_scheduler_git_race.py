"""The queue's push cannot be raced into sending host files to the remote.

A swapper (tests/race_swapper.py) exchanges the work tree's folder `d` with a link to a host
folder holding a secret `id_rsa`, as fast as it can, while the worker commits and pushes the
task's result ROUNDS times: once as a host process (which nothing of the worker can kill: it
stands in for a survivor the worker did not find), once left alive in the work tree's Docker
container or bwrap sandbox. Afterwards no object on the remote holds a byte of the secret, and
the work is there.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from lmagent.scheduler.git_workspace import check_out, push_result
from tests.conftest import wait_for
from tests.test_race import SWAPPER
from tests.test_sandbox_restore_race import Survivor
from tests.test_scheduler_git import TASK, make_origin, run

pytest_plugins = ["tests.sandbox_fixtures"]

ROUNDS = 20


@pytest.fixture
def raced(tmp_path):
    """(the worker's root, the task's work tree, the remote, the host folder, the secret)."""
    secret = f"SECRET-{secrets.token_hex(16)}"
    host = (tmp_path / "host").resolve()
    host.mkdir()
    (host / "id_rsa").write_text(secret)
    origin = make_origin(tmp_path)
    root = (tmp_path / "worker").resolve()
    work = check_out(root, TASK, str(origin), "main")
    (work / "d").mkdir()
    (work / "d" / "id_rsa").write_text("the work's own\n")
    (work / "race_swapper.py").write_text(SWAPPER.read_text())
    return root, work, origin, host, secret


def push_while_swapping(root: Path, work: Path) -> None:
    """ROUNDS results pushed while the swapper runs; then it is told to stop."""
    wait_for(lambda: (work / "swapping").exists(), 30, "the swapper to run")
    try:
        for attempt in range(ROUNDS):
            (work / "result.txt").write_text(f"{attempt}\n")
            assert push_result(root, TASK) == f"lmagent/{TASK}"
    finally:
        (work / "stop-swapping").touch()


def assert_nothing_from_outside(origin: Path, secret: str) -> None:
    every_object = subprocess.run(
        ["git", "--git-dir", str(origin), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert b"the work's own" in every_object
    assert secret.encode() not in every_object, "a host file reached the remote"
    pushed = f"lmagent/{TASK}"
    assert run("--git-dir", str(origin), "show", f"{pushed}:result.txt") == f"{ROUNDS - 1}\n"
    assert run("--git-dir", str(origin), "show", f"{pushed}:README") == "hello\n"


def test_a_host_process_swapping_a_folder_for_a_link_sends_nothing_from_outside(raced):
    root, work, origin, host, secret = raced
    swapper = subprocess.Popen(
        [sys.executable, "race_swapper.py", str(host)], cwd=work, stdout=subprocess.PIPE
    )
    try:
        push_while_swapping(root, work)
        assert swapper.wait(30) == 0
    finally:
        swapper.kill()
        swapper.wait()
        swapper.stdout.close()
    assert_nothing_from_outside(origin, secret)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_sandboxed_survivor_swapping_a_folder_sends_nothing_from_outside(
    raced, backend, make_sandbox, sandbox_image
):
    root, work, origin, host, secret = raced
    survivor = Survivor(backend, work, host, make_sandbox, sandbox_image)
    try:
        push_while_swapping(root, work)
        wait_for(lambda: (work / "swaps.txt").exists(), 30, "the swapper to stop")
    finally:
        survivor.close()
    assert_nothing_from_outside(origin, secret)
