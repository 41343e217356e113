"""Attack: a command takes over another process of its sandbox by writing its memory.

A command can write the code of any process with its own uid that is dumpable, through
`/proc/<pid>/mem` (no ptrace call needed): the red team stopped the container's `sleep infinity`,
wrote `execve("/bin/sh")` at its program counter and let it go on, outside the project's syscall
filter and spared by every sweep. So every process a command can see in its sandbox must either
refuse the write (another uid, or not dumpable) or be killed by the end of the run and by
`quiesce`; and every one runs under the project's filter.
"""

from __future__ import annotations

import json

import pytest

from lmagent.sandbox.select import quiesce
from lmagent.sandbox.supervise import bwrap_sandboxes, descendants, host_processes

pytest_plugins = ["tests.sandbox_fixtures"]

# Run inside the sandbox: for every process it can see, whether it could write its code (it
# writes back the bytes it read at the start of its first executable mapping, which proves the
# write and changes nothing), its name and how many seccomp filters it carries.
ATTACKER = r"""
import json, os

def field(pid, name):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].split()[0]
    except OSError:
        return None

def own_command(pid):
    # this process and its ancestors up to the runner that runs it (not included)
    chain = set()
    while pid and pid not in chain and not field(pid, "Name").startswith("lmagent-"):
        chain.add(pid)
        pid = int(field(pid, "PPid") or 0)
    return chain

def writable(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = next(line for line in f if " r-xp " in line or " r-x" in line.split()[1][:3])
        address = int(text.split("-")[0], 16)
        fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    except (OSError, StopIteration) as exc:
        return f"refused: {exc}"
    try:
        code = os.pread(fd, 16, address)
        return os.pwrite(fd, code, address) == len(code)
    except OSError as exc:
        return f"refused: {exc}"
    finally:
        os.close(fd)

mine = own_command(os.getpid())
seen = []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) not in mine:
        pid = int(name)
        seen.append({"pid": pid, "name": field(pid, "Name"), "uid": field(pid, "Uid"),
                     "filters": int(field(pid, "Seccomp_filters") or 0),
                     "written": writable(pid) is True})
print(json.dumps({"me": int(field(os.getpid(), "Seccomp_filters")), "seen": seen}))
"""


def attack(sandbox) -> dict:
    (sandbox.workspace / "attack.py").write_text(ATTACKER)
    result = sandbox.run("python3 attack.py", timeout=120)
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def unfiltered_count(sandbox) -> int:
    """Seccomp filters of a process the project's filter is not on: Docker's default profile
    (a plain `docker exec`), none for bwrap (the host)."""
    if sandbox.name != "docker":
        return 0
    look = ["grep", "Seccomp_filters", "/proc/self/status"]
    done = sandbox.container.exec_run(look, user=sandbox.cfg.uid_gid())
    return int(done.output.split()[-1])


def left_in_sandbox(sandbox) -> list[str]:
    """The names of what the host sees running in the workspace's sandbox, but the Docker
    keeper and bwrap itself."""
    if sandbox.name == "docker":
        from lmagent.sandbox.docker import host_view, is_keeper

        found = host_view(sandbox.container)
        if found is None:
            return []
        table, members, init = found
        assert is_keeper(members, init), f"PID 1 ({table[init].name}) is not the keeper"
        return sorted(table[p].name for p in members - {init})
    table = host_processes()
    inside = descendants(table, bwrap_sandboxes(str(sandbox.workspace), table))
    return sorted(table[p].name for p in inside if table[p].name != "bwrap")


def test_no_process_of_the_sandbox_can_be_written_or_runs_without_the_filter(sandbox, capsys):
    sandbox.processes.start("sleep 8201")  # a job server and a keeper join the runner
    report = attack(sandbox)
    with capsys.disabled():  # the attempt count, in CI's log
        names = ", ".join(sorted(str(e["name"]) for e in report["seen"]))
        print(f"\n  hijack ({sandbox.name}): tried {len(report['seen'])} processes ({names})")
    names = {entry["name"] for entry in report["seen"]}
    assert {"lmagent-jobs", "lmagent-keeper"} <= names, report
    long_lived = [e for e in report["seen"] if e["pid"] == 1 or e["name"].startswith("lmagent-")]
    assert long_lived and not [e for e in long_lived if e["written"]], report
    baseline = unfiltered_count(sandbox)
    assert report["me"] > baseline
    assert [e for e in report["seen"] if e["filters"] <= baseline] == [], report


@pytest.mark.parametrize("ending", ["quiesce", "end of run"])
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_what_a_command_could_write_is_gone_by_quiesce_and_by_the_end_of_the_run(
    backend, ending, make_sandbox, capsys
):
    sandbox = make_sandbox(backend)
    sandbox.processes.start("sleep 8202")
    written = [e for e in attack(sandbox)["seen"] if e["written"]]
    with capsys.disabled():
        names = ", ".join(sorted(str(e["name"]) for e in written))
        print(f"\n  hijack ({backend}, {ending}): {len(written)} writable ({names}), all must go")
    if ending == "quiesce":
        assert quiesce(sandbox.workspace)
        assert left_in_sandbox(sandbox) == []
    else:  # what the end of a run does (tools/processes.stop_run_processes)
        sandbox.processes.stop_all()
        sandbox.sweep()
        assert set(left_in_sandbox(sandbox)) <= {"lmagent-runner", "lmagent-jobs"}
