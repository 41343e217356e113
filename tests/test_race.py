"""The symlink race, run for real: no file tool can be led outside the workspace.

A swapper (tests/race_swapper.py) runs as a command of the sandbox — on Docker, on bwrap, and on
the process backend, where it is a plain host process — and exchanges the workspace folder `d`
with a symlink to a host folder in a tight loop (renameat2 RENAME_EXCHANGE). Meanwhile each
file tool (and each other way the host opens workspace paths: the web file routes, uploads, the
vision tool's reader, report_result's artifact checks) is called ATTEMPTS times on paths through
`d`. The host folder holds canary files: none may be read, listed, written, created or changed.
The swapper is started three ways: as a foreground command of the sandbox, by the shell tool
with background=true (outliving its call, as a background process of the run), and by a
parallel sub-agent's shell through the real loop. The test ids carry the attempt count; each
test prints (with -s) the attempts, refusals, leaks and swaps.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

import lmagent.subagents.records as bca_records
import lmagent.web.files as web_files
from lmagent.core.workspace import PathError
from lmagent.subagents.tools import _reported_artifacts
from lmagent.tools.registry import ArgumentError, Services
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config, tool_context, wait_for
from tests.scripted_llm import text, tool_call
from tests.test_bca import Agents, run_parent

pytest_plugins = ["tests.sandbox_fixtures"]

ATTEMPTS = 1000
CANARY = "CANARY-c4a7"
CANARY_NAME = "canary_only_name"
BACKENDS = ("docker", "bwrap", "process")
GUARD = 900  # seconds: the last-resort guard on a wait for the swapper, for a hung test only
SWAPPER = Path(__file__).with_name("race_swapper.py")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _tool(name: str, arguments):
    def call(race, n):
        return race.tools.execute(race.ctx, name, arguments(n))

    return call


def _web(function, *args):
    def call(race, n):
        try:
            result = function(race.ctx.workspace, *args)
        except web_files.FileProblem as exc:
            return {"refused": str(exc)}
        if isinstance(result, web_files.RawFile):
            with result.handle:
                return {"raw": result.handle.read().decode("latin-1")}
        return result

    return call


def _upload(race, n):
    try:
        return web_files.save_upload(race.ctx.workspace, f"shot{n}.png", PNG + b"uploaded")
    except web_files.FileProblem as exc:
        return {"refused": str(exc)}


def _vision_read(race, n):
    try:
        data, rel = race.ctx.workspace.read_bytes("d/image.png", 1 << 20)
    except (OSError, PathError) as exc:
        return {"refused": str(exc)}
    return {"path": rel, "data": data.decode("latin-1")}


def _artifacts(race, n):
    checks = bca_records.check_artifacts(race.ctx.workspace, [f"d/{CANARY_NAME}", "d/file.txt"])
    try:
        reported = _reported_artifacts(race.ctx.workspace, [f"d/{CANARY_NAME}"])
    except ArgumentError as exc:
        reported = str(exc)
    leaked = checks[0]["exists"] or reported == [f"d/{CANARY_NAME}"]
    return {"exists": [check["exists"] for check in checks], "leak": CANARY if leaked else ""}


OPERATIONS = {
    "read": _tool("read", lambda n: {"path": "d/file.txt"}),
    "write": _tool("write", lambda n: {"path": f"d/new{n}.txt", "content": "written"}),
    "edit": _tool(
        "edit", lambda n: {"path": "d/file.txt", "search": "value=", "replace": "value=1"}
    ),
    "ls": _tool("ls", lambda n: {"path": "d"}),
    "glob": _tool("glob", lambda n: {"pattern": "d/**"}),
    "grep": _tool("grep", lambda n: {"pattern": CANARY[:6] + "|value", "paths": ["d"]}),
    "mkdir": _tool("mkdir", lambda n: {"path": f"d/made{n}/deeper"}),
    "web-list": _web(web_files.list_directory, "d"),
    "web-preview": _web(web_files.describe_file, "d/file.txt"),
    "web-raw": _web(web_files.raw_file, "d/file.txt"),
    "web-upload": _upload,
    "vision-read": _vision_read,
    "report-artifacts": _artifacts,
}


class Race:
    """A workspace whose `d` a swapper exchanges with a link to `host`, started one of three ways:
    as a foreground command of the sandbox, by the shell tool with background=true (a background
    process of the run, outliving its call), or by a parallel sub-agent's shell through the real
    loop."""

    def __init__(self, workspace: Path, host: Path, backend: str, make_sandbox, llm=None):
        self.workspace, self.host, self.backend = workspace, host, backend
        self.config = make_config(
            workspace, llm, sandbox_backend=backend, allow_unsandboxed_auto=True
        )
        self.services = Services(self.config)
        self.ctx = tool_context(self.config, services=self.services)
        self.tools = build_toolset()
        self.make_sandbox, self.llm = make_sandbox, llm
        self.outcome: dict = {}
        self.thread: threading.Thread | None = None
        self.process_id: str | None = None  # the detached swapper's

    def start(self, how: str) -> None:
        command = f"python3 race_swapper.py {self.host}"
        if how == "foreground":
            sandbox = self.make_sandbox(self.backend, workspace=self.workspace)
            self._in_thread(lambda: sandbox.run(command, timeout=110).to_tool_result())
        elif how == "detached":
            self.make_sandbox(self.backend, workspace=self.workspace)  # skips when unavailable
            call = {"command": command, "background": True}
            started = self.tools.execute(self.ctx, "shell", call)
            assert started["success"], started
            self.process_id = started["process_id"]
        else:
            self.make_sandbox(self.backend, workspace=self.workspace)
            self._in_thread(lambda: self._sub_agent(command))
        self.wait_for(self.workspace / "swapping")

    def ended(self) -> dict:
        """What the swapper's command or process left once it has ended; {} while it runs."""
        if self.process_id is None:
            return self.outcome
        answer = self.services.sandbox().processes.output(self.process_id)
        return {} if answer["running"] else answer

    def wait_for(self, path: Path) -> None:
        """Until the swapper makes `path`, however slow the machine; at once, with what it
        left, if it ends without."""

        def made() -> bool:
            ended = self.ended()
            if path.exists():
                return True
            assert not ended, f"the swapper ended without making {path.name}: {ended}"
            return False

        wait_for(made, GUARD, f"the swapper to make {path.name}")

    def _in_thread(self, target) -> None:
        def keep():
            self.outcome = target()

        self.thread = threading.Thread(target=keep, daemon=True)
        self.thread.start()

    def _sub_agent(self, command: str) -> dict:
        manifest = {"tasks": [{"task_id": "swap", "objective": "Run the swapper"}]}
        agents = Agents(
            [
                tool_call("decompose", {"manifest_json": json.dumps(manifest)}),
                text("TASK_COMPLETE"),
            ],
            **{
                "Run the swapper": [
                    tool_call("shell", {"command": command, "timeout": 110}),
                    tool_call("report_result", {"status": "ok", "summary": "swapped"}),
                ]
            },
        ).install(self.llm)
        result, _ = run_parent(self.config, "Swap d with a link, in a sub-agent")
        agents.assert_done(self.llm)
        shell = [m["content"] for b in agents.bodies["Run the swapper"][1:2] for m in b["messages"]]
        return {"status": result.status, "output": shell[-1]}

    def stop(self) -> int:
        (self.workspace / "stop-swapping").touch()
        self.wait_for(self.workspace / "swaps.txt")
        if self.thread is not None:
            self.thread.join(GUARD)
            assert "swaps=" in str(self.outcome.get("output")), self.outcome
        self.services.close()  # the run's sandbox, with its background processes
        return int((self.workspace / "swaps.txt").read_text().split("=")[1])


def _plant(workspace: Path, host: Path) -> None:
    for folder, value in ((workspace / "d", "inside"), (host, CANARY)):
        (folder / "sub").mkdir(parents=True)
        (folder / "file.txt").write_text(f"value={value}\n")
        (folder / "image.png").write_bytes(PNG + value.encode())
    (host / CANARY_NAME).write_text(CANARY)
    (host / "uploads").mkdir()
    (workspace / "uploads").symlink_to("d")  # uploads land in d, which the swapper swaps
    shutil.copy(SWAPPER, workspace / "race_swapper.py")


def _host_state(host: Path) -> dict:
    return {
        str(p.relative_to(host)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
        for p in sorted(host.rglob("*"))
    }


def _attack(race: Race, operations: list[str], attempts: int) -> dict[str, tuple[int, list]]:
    """{operation: (refused, leaks)} after `attempts` calls of each operation."""
    outcome = {}
    for operation in operations:
        call, leaks, refused = OPERATIONS[operation], [], 0
        for n in range(attempts):
            shown = json.dumps(call(race, n), ensure_ascii=False)
            if CANARY in shown or CANARY_NAME in shown:
                leaks.append(shown[:3000])
            refused += '"success": false' in shown or '"refused"' in shown
        outcome[operation] = (refused, leaks)
    return outcome


def _raced(tmp_path, backend, make_sandbox, how, operations, attempts, llm=None):
    workspace, host = (tmp_path / "ws").resolve(), (tmp_path / "host").resolve()
    workspace.mkdir()
    _plant(workspace, host)
    before = _host_state(host)
    race = Race(workspace, host, backend, make_sandbox, llm)
    race.start(how)
    try:
        outcome = _attack(race, operations, attempts)
    finally:
        swaps = race.stop()
    for operation, (refused, leaks) in outcome.items():
        print(f"  {backend}/{how}/{operation}: {attempts} attempts, {refused} refused, ", end="")
        print(f"{len(leaks)} leaked")
    print(f"  {backend}/{how}: {swaps} swaps in all")
    assert swaps > 0
    assert {op: leaks for op, (_, leaks) in outcome.items() if leaks} == {}
    assert _host_state(host) == before, "the host folder was changed"


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_no_path_operation_escapes_through_a_swapped_symlink(
    backend, operation, attempts, make_sandbox, tmp_path
):
    _raced(tmp_path, backend, make_sandbox, "foreground", [operation], attempts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_a_swapper_left_running_by_the_shell_tool_reaches_nothing_outside(
    backend, attempts, make_sandbox, tmp_path
):
    _raced(tmp_path, backend, make_sandbox, "detached", list(OPERATIONS), attempts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_a_swapper_in_a_parallel_sub_agents_shell_reaches_nothing_outside(
    backend, attempts, make_sandbox, tmp_path, llm
):
    _raced(tmp_path, backend, make_sandbox, "sub-agent", list(OPERATIONS), attempts, llm)
