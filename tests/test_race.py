"""The symlink race, run for real: no file tool can be led outside the workspace.

A swapper (tests/race_swapper.py) runs as a command of the sandbox — on Docker, on bwrap, and on
the process backend, where it is a plain host process — and exchanges the workspace folder `d`
with a symlink to a host folder in a tight loop (renameat2 RENAME_EXCHANGE). Meanwhile each
file tool (and each other way the host opens workspace paths: the web file routes, uploads, the
vision tool's reader, report_result's artifact checks) is called ATTEMPTS times on paths through
`d`. The host folder holds canary files: none may be read, listed, written, created or changed.
The test ids carry the attempt count; each test prints how many swaps ran under it.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from conftest import make_config, tool_context

import bca_records
import web_files
from agent_bca import _reported_artifacts
from agent_tools import default_toolset
from tool_registry import ArgumentError
from workspace import PathError

pytest_plugins = ["sandbox_fixtures"]

ATTEMPTS = 1000
CANARY = "CANARY-c4a7"
CANARY_NAME = "canary_only_name"
BACKENDS = ("docker", "bwrap", "process")
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
        return web_files.save_upload(race.ctx.workspace, f"shot{n}.png", PNG + CANARY.encode())
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
    "write": _tool("write", lambda n: {"path": f"d/new{n}.txt", "content": CANARY}),
    "edit": _tool("edit", lambda n: {"path": "d/file.txt", "search": "value=", "replace": "value=1"}),
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
    """A workspace whose `d` is being swapped with a link to `host` by a sandboxed command."""

    def __init__(self, workspace: Path, host: Path, sandbox):
        self.workspace, self.host, self.sandbox = workspace, host, sandbox
        self.ctx = tool_context(make_config(workspace))
        self.tools = default_toolset()
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._swap, daemon=True)

    def _swap(self) -> None:
        command = f"python3 race_swapper.py {self.host}"
        self.outcome = self.sandbox.run(command, timeout=110).to_tool_result()

    def start(self) -> None:
        self.thread.start()
        started = self.workspace / "swapping"
        for _ in range(400):
            if started.exists() or not self.thread.is_alive():
                break
            threading.Event().wait(0.025)
        assert started.exists(), f"the swapper did not start: {self.outcome}"

    def stop(self) -> int:
        (self.workspace / "stop-swapping").touch()
        self.thread.join(60)
        output = str(self.outcome.get("output", ""))
        assert "swaps=" in output, f"the swapper did not finish cleanly: {self.outcome}"
        return int(output.rsplit("swaps=", 1)[1].split()[0])


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


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attempts", [ATTEMPTS])
def test_no_path_operation_escapes_through_a_swapped_symlink(
    backend, operation, attempts, make_sandbox, tmp_path, capsys
):
    workspace, host = (tmp_path / "ws").resolve(), (tmp_path / "host").resolve()
    workspace.mkdir()
    _plant(workspace, host)
    before = _host_state(host)
    race = Race(workspace, host, make_sandbox(backend, workspace=workspace))
    call = OPERATIONS[operation]
    leaks, refused = [], 0
    race.start()
    try:
        for n in range(attempts):
            shown = json.dumps(call(race, n), ensure_ascii=False)
            if CANARY in shown or CANARY_NAME in shown:
                leaks.append(shown[:300])
            refused += '"success": false' in shown or '"refused"' in shown
    finally:
        swaps = race.stop()
    with capsys.disabled():
        print(f"\n  {backend}/{operation}: {attempts} attempts, {swaps} swaps, {refused} refused")
    assert swaps > 0
    assert leaks == [], f"{len(leaks)} of {attempts} results showed the host folder"
    assert _host_state(host) == before, "the host folder was changed"
