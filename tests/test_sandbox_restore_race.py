"""Restore cannot be raced by a sandboxed process that is still alive.

A survivor (tests/race_swapper.py) swaps the workspace folder `d` with a link to a host folder
in a tight loop: left running in the workspace's Docker container, or in a bwrap sandbox of
another agent process. Then the user restores through each front end: `--undo`, `--restore`
(the first attempt a real `agent_main.py` process, the rest the same front-end function in this
process, to keep a case to seconds) and the web UI's POST /api/restore, all with --force. Each
restore first stops every sandboxed process of the workspace (`sandbox.select.quiesce`), so the
survivor is gone before the host writes: the host folder's canaries stay untouched over ATTEMPTS
attempts each.
Run with -s to see the counts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from lmagent.cli.undo import RestoreFailed
from lmagent.cli.undo import restore as cli_restore
from lmagent.loop.run import run_agent
from lmagent.sandbox.select import quiesce
from tests.cli_process import cli, cli_env
from tests.conftest import make_config, wait_for
from tests.scripted_llm import text, tool_call
from tests.test_race import GUARD, SWAPPER, _host_state
from tests.test_web_support import WebHarness

pytest_plugins = ["tests.sandbox_fixtures"]

ATTEMPTS = 200
CANARY = "CANARY-5e1f"
OTHER_AGENT = """
import sys, threading
from pathlib import Path
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import open_sandbox
sandbox = open_sandbox(SandboxConfig(workspace=Path(sys.argv[1]), backend="bwrap"))
sandbox.processes.start("exec python3 race_swapper.py " + sys.argv[2])
print("started", flush=True)
threading.Event().wait()  # alive until the test kills it
"""


def swappers(host: Path) -> list[psutil.Process]:
    """Swappers aiming at `host`, anywhere on this machine (in any container or sandbox)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if f"race_swapper.py {host}" in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


class Survivor:
    """The swapper, left alive in the workspace's sandbox with no agent run around it."""

    def __init__(self, backend: str, workspace: Path, host: Path, make_sandbox, image: str):
        self.backend, self.workspace, self.host = backend, workspace, host
        self.other_agent = None
        if backend == "docker":
            sandbox = make_sandbox("docker", workspace=workspace)
            sandbox.close()  # the agent is gone; its container stays
            sandbox.container.exec_run(
                ["python3", "race_swapper.py", str(host)],
                workdir=str(workspace),
                user=f"{os.getuid()}:{os.getgid()}",
                detach=True,
            )
        else:
            make_sandbox("bwrap", workspace=workspace).close()  # skips without bwrap
            argv = [sys.executable, "-c", textwrap.dedent(OTHER_AGENT), str(workspace), str(host)]
            self.other_agent = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            assert self.other_agent.stdout.readline() == "started\n"
        wait_for(lambda: (workspace / "swapping").exists(), GUARD, "the swapper to run")

    def close(self) -> None:
        if self.other_agent is not None:
            self.other_agent.kill()
            self.other_agent.wait()
            self.other_agent.stdout.close()
        quiesce(self.workspace)


@pytest.fixture(params=["docker", "bwrap"])
def raced(request, make_sandbox, sandbox_image, tmp_path, llm):
    """(workspace, host folder, session id, backend, the host folder's state) with the swapper
    alive on `d`; after the test the host folder must still be as it was."""
    backend = request.param
    workspace, host = (tmp_path / "ws").resolve(), (tmp_path / "host").resolve()
    workspace.mkdir()
    host.mkdir()
    (host / "file.txt").write_text(CANARY)
    (host / "sub").mkdir()
    (workspace / "race_swapper.py").write_text(SWAPPER.read_text())
    llm.add(
        tool_call("write", {"path": "d/file.txt", "content": "one\n"}),
        tool_call("edit", {"path": "d/file.txt", "search": "one", "replace": "two"}),
        text("Done.\nTASK_COMPLETE"),
    )
    config = make_config(workspace, llm, sandbox_backend=backend, sandbox_image=sandbox_image)
    session_id = run_agent(config, "make d/file.txt").session_id
    before = _host_state(host)
    survivor = Survivor(backend, workspace, host, make_sandbox, sandbox_image)
    try:
        yield workspace, host, session_id, backend, before
    finally:
        survivor.close()
    assert _host_state(host) == before, "a restore wrote outside the workspace"


def report(raced, front_end: str, attempts: int) -> None:
    """Check the host folder; one line for the attack summary."""
    _, host, _, backend, before = raced
    assert _host_state(host) == before, "a restore wrote outside the workspace"
    left = len(swappers(host))
    print(
        f"{backend}/{front_end}: {attempts} restore attempts (the first with the swapper alive): "
        f"0 writes outside the workspace, {left} swappers left"
    )


def first_through_the_cli(workspace: Path, llm, sandbox_image: str, *args: str) -> None:
    """The first restore, as a user runs it while the swapper is alive: it either restores or
    refuses (the swapper, killed mid-swap, may have left `d` a link) - never writes outside."""
    env = cli_env(workspace, llm, SANDBOX_IMAGE=sandbox_image)
    done = cli(workspace, llm, *args, "--force", env=env, timeout=GUARD)
    assert done.returncode == 0 or "rolled back" in done.stderr, done.stderr


def put_d_back(workspace: Path) -> None:
    """Undo the dead swapper's last exchange, if it left `d` the link (and `l` the folder)."""
    d, link = workspace / "d", workspace / "l"
    if d.is_symlink():
        d.unlink()
        link.rename(d)


@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_undo_stops_the_survivor_before_writing(raced, attempts, llm, sandbox_image):
    workspace, host, session_id, *_ = raced
    assert swappers(host)
    first_through_the_cli(workspace, llm, sandbox_image, "--undo", session_id)
    assert swappers(host) == []
    put_d_back(workspace)
    for _ in range(attempts - 1):
        cli_restore(workspace, session_id, None, True)
    report(raced, "--undo", attempts)


@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_restore_stops_the_survivor_before_writing(raced, attempts, llm, sandbox_image):
    workspace, host, session_id, *_ = raced
    assert swappers(host)
    first_through_the_cli(workspace, llm, sandbox_image, "--restore", session_id, "2")
    assert swappers(host) == []
    put_d_back(workspace)
    for n in range(1, attempts):
        cli_restore(workspace, session_id, 2 - n % 2, True)  # to before step 1, then 2, ...
    report(raced, "--restore", attempts)


@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_web_restore_stops_the_survivor_before_writing(raced, attempts, llm, sandbox_image):
    workspace, host, session_id, backend, _ = raced
    config = make_config(workspace, llm, sandbox_backend=backend, sandbox_image=sandbox_image)
    assert swappers(host)
    with WebHarness(config) as web:
        http = web.session()
        for n in range(attempts):
            step = 2 - n % 2  # to before step 2, then 1, ...
            body = {"session_id": session_id, "step": step, "force": True}
            done = http.post(web.base + "/api/restore", json=body, timeout=GUARD)
            if n == 0:
                assert done.status_code == 200 or "rolled back" in done.text, done.text
                assert swappers(host) == []
                put_d_back(workspace)
            else:
                assert done.status_code == 200, done.text
    report(raced, "web restore", attempts)


def test_a_restore_that_cannot_check_the_container_is_refused(
    make_sandbox, workspace, llm, monkeypatch
):
    """Docker is configured but its engine does not answer while containers run: the host
    cannot tell what lives in the workspace's container, so it does not restore."""
    make_sandbox("docker", workspace=workspace).run("true")  # a container runs
    llm.add(tool_call("write", {"path": "a.txt", "content": "one\n"}), text("TASK_COMPLETE"))
    session_id = run_agent(make_config(workspace, llm), "write a.txt").session_id
    monkeypatch.setenv("DOCKER_HOST", f"unix://{workspace}/no-engine.sock")
    with pytest.raises(RestoreFailed) as refused:
        cli_restore(workspace, session_id, None, False)
    assert str(refused.value).startswith("cannot make sure no sandboxed process is running: ")
    assert "Docker" in str(refused.value)
    assert (workspace / "a.txt").read_text() == "one\n"
