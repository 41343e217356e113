"""The syscall filter: every denied call fails inside both sandboxes; ordinary work still runs.

The numbers of the calls are looked up by libseccomp on the host (the sandbox has no binding);
the probe inside calls each one through ctypes with harmless arguments. Without the filter most
of them reach the kernel and fail with another errno (EINVAL, EFAULT, EBADF, ...) or succeed.
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess

import pytest

from lmagent.sandbox.seccomp import (
    CLONE_NAMESPACE_FLAGS,
    DENIED_SYSCALLS,
    PERSONALITY_ALLOWED,
    UNSUPPORTED_SYSCALLS,
    libseccomp,
)
from tests.conftest import need

pytest_plugins = ["tests.sandbox_fixtures"]

PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, number, first in json.loads(sys.argv[1]):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(number), ctypes.c_long(first), *[ctypes.c_long(0)] * 5)
    if rc == 0 and name.startswith("clone"):
        os._exit(0)  # a child the filter let through
    out[name] = ctypes.get_errno() if rc == -1 else "returned %d" % rc
print(json.dumps(out))
"""
SIGCHLD = 17
# personality values the filter refuses: flags Docker's profile refuses too, one hidden behind an
# unknown personality type, one behind junk above the 32 bits the kernel reads, and the query
# with one bit cleared.
PERSONALITY_REFUSED = {
    "READ_IMPLIES_EXEC": 0x0400000,
    "ADDR_NO_RANDOMIZE": 0x0040000,
    "READ_IMPLIES_EXEC with type 0x80": 0x0400080,
    "READ_IMPLIES_EXEC above 32 bits": 0x1_0040_0000,
    "all bits but UNAME26": 0xFFFFFFFF & ~0x20000,
}


def probes() -> list[tuple[str, int, int]]:
    """(label, syscall number, first argument) of every call the filter must refuse."""
    lib = libseccomp()
    calls = [(n, lib.seccomp_syscall_resolve_name(n.encode()), 0) for n in DENIED_SYSCALLS]
    calls += [(n, lib.seccomp_syscall_resolve_name(n.encode()), 0) for n in UNSUPPORTED_SYSCALLS]
    clone = lib.seccomp_syscall_resolve_name(b"clone")
    calls += [
        (f"clone {flag}", clone, bit | SIGCHLD) for flag, bit in CLONE_NAMESPACE_FLAGS.items()
    ]
    personality = lib.seccomp_syscall_resolve_name(b"personality")
    calls += [(f"personality {name}", personality, v) for name, v in PERSONALITY_REFUSED.items()]
    return [call for call in calls if call[1] >= 0]


def expected(label: str) -> int:
    return errno.ENOSYS if label in UNSUPPORTED_SYSCALLS else errno.EPERM


def test_every_denied_call_fails_in_the_sandbox(shared_sandbox, tmp_path):
    calls = probes()
    (shared_sandbox.workspace / "probe.py").write_text(PROBE)
    result = shared_sandbox.run(f"python3 probe.py '{json.dumps(calls)}'", timeout=60)
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output)
    wrong = {label: seen.get(label) for label, _, _ in calls if seen.get(label) != expected(label)}
    assert wrong == {}
    assert len(calls) >= 50


def test_allowed_personalities_still_work_in_the_sandbox(shared_sandbox):
    """The query first, then each value Docker allows (setarch i386, uname26), back to Linux."""
    number = libseccomp().seccomp_syscall_resolve_name(b"personality")
    values = [0xFFFFFFFF, *sorted(set(PERSONALITY_ALLOWED) - {0xFFFFFFFF}, reverse=True)]
    calls = [(f"personality {value:#x}", number, value) for value in values]
    (shared_sandbox.workspace / "probe.py").write_text(PROBE)
    result = shared_sandbox.run(f"python3 probe.py '{json.dumps(calls)}'", timeout=60)
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output)
    assert all(str(seen[label]).startswith("returned") for label, _, _ in calls), seen


def test_the_filter_is_installed_with_no_new_privileges(shared_sandbox):
    status = shared_sandbox.run("grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status").output
    assert "NoNewPrivs:\t1" in status and "Seccomp:\t2" in status


WORK = {
    "python": ("python -c 'print(6 * 7)'", "42", ()),
    "venv and pip": ("python -m venv /tmp/v && /tmp/v/bin/pip --version", "pip ", ()),
    "git": (
        "git init -q r && cd r && echo x > f && git add f && git commit -qm one && git log",
        "one",
        (),
    ),
    "c compiler and make": (
        "printf 'int main(void){return 42;}\\n' > m.c && printf 'm: m.c\\n\\tgcc -o m m.c\\n' > "
        "Makefile && make -s && ./m; echo $?",
        "42",
        ("gcc", "make"),
    ),
    "pytest": (
        "printf 'def test_a():\\n    assert 1\\n' > test_a.py && python -m pytest -q test_a.py",
        "1 passed",
        ("pytest",),
    ),
}


def host_lacks(tools: tuple[str, ...]) -> list[str]:
    """What bwrap (which runs the host's own /usr) would miss for these tools."""
    missing = [
        tool for tool in tools if tool != "pytest" and not shutil.which(tool, path="/usr/bin")
    ]
    if "pytest" in tools:
        probe = subprocess.run(["/usr/bin/python3", "-c", "import pytest"], capture_output=True)
        missing += ["pytest"] if probe.returncode else []
    return missing


@pytest.mark.parametrize("task", WORK)
def test_ordinary_work_runs_under_the_filter(sandbox, task):
    command, wanted, tools = WORK[task]
    if sandbox.name == "bwrap":  # .ci/sandbox-setup.sh installs them
        missing = host_lacks(tools)
        need(not missing, f"bwrap runs the host's tools; this host has no {missing}")
    result = sandbox.run(command, timeout=120)
    assert result.exit_code == 0 and wanted in result.output, result.output
