"""Escape attempts against the isolating backends (docker, bwrap); every one must fail.

Each test plants something on the host (a secret file, an environment variable, a listener),
attacks it from inside the sandbox, and checks on the host side that nothing got through.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from lmagent.tools.registry import Services
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config, tool_context

pytest_plugins = ["tests.sandbox_fixtures"]  # sandbox, shared_sandbox, make_sandbox, ...


@pytest.fixture
def token() -> str:
    return "lmagent-test-secret-" + secrets.token_hex(8)


def workspace_of(sandbox) -> Path:
    return Path(sandbox.cfg.workspace)


# --- reading what is not ours ------------------------------------------------------------------
def test_cannot_read_host_shadow(shared_sandbox):
    result = shared_sandbox.run("cat /etc/shadow; cat /etc/gshadow")
    try:
        host_shadow = Path("/etc/shadow").read_text()
    except OSError:
        pytest.skip("this user cannot read the host's /etc/shadow, so there is nothing to leak")
    assert result.output.strip() != host_shadow.strip()
    for line in host_shadow.splitlines():
        password = line.split(":")[1] if line.count(":") > 1 else ""
        if len(password) > 2:  # a real hash, not "*" or "!"
            assert password not in result.output


def test_cannot_read_host_home(shared_sandbox, token):
    planted = Path.home() / token
    planted.write_text(token + "-content")
    try:
        result = shared_sandbox.run(
            f"cat {planted} ~/{token} /root/{token}; ls -la /root {Path.home()};"
            f" grep -rs {token} /root /home /etc 2>/dev/null | head -5",
            timeout=60,
        )
    finally:
        planted.unlink()
    assert token + "-content" not in result.output


def test_cannot_read_the_agents_environment(make_sandbox, monkeypatch, token):
    monkeypatch.setenv("LMAGENT_TEST_SECRET", token)
    for backend in ("docker", "bwrap"):
        sandbox = make_sandbox(backend)
        result = sandbox.run(
            "env; cat /proc/self/environ /proc/1/environ /proc/$PPID/environ;"
            f" cat /proc/{os.getpid()}/environ;"
            " for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null",
        )
        assert result.output, "the probe printed nothing at all"
        assert token not in result.output
        assert "LMAGENT_TEST_SECRET" not in result.output


# --- writing outside the workspace -------------------------------------------------------------
def test_cannot_write_outside_via_dotdot_or_absolute_paths(sandbox, token):
    workspace = workspace_of(sandbox)
    targets = [workspace.parent / f"{token}-dotdot", Path("/tmp") / f"{token}-abs"]
    targets.append(workspace.parent / f"{token}-abs")
    sandbox.run(
        f"echo x > ../{token}-dotdot; echo x > /tmp/{token}-abs;"
        f" echo x > {workspace.parent}/{token}-abs; echo x > /root/{token}-abs"
    )
    for target in [*targets, Path("/root") / f"{token}-abs"]:
        assert not target.exists(), f"the sandbox wrote {target} on the host"


def test_cannot_write_outside_via_a_symlink(sandbox, token):
    workspace = workspace_of(sandbox)
    sandbox.run(
        f"ln -s / rootlink; echo x > rootlink/tmp/{token};"
        f" echo x > rootlink{workspace.parent}/{token}; echo x > rootlink/root/{token}"
    )
    (workspace / "rootlink").unlink(missing_ok=True)
    for target in (Path("/tmp") / token, workspace.parent / token, Path("/root") / token):
        assert not target.exists(), f"the sandbox wrote {target} through a symlink"


def plant_agent_data(workspace: Path, token: str) -> dict[Path, bytes]:
    """What the agent keeps in .lmagent/, each file holding the token; {path: content}."""
    data = workspace / ".lmagent"
    files = {
        data / "mcp.json": json.dumps({"mcpServers": {"x": {"env": {"API_TOKEN": token}}}}),
        data / "sessions" / "s1.jsonl": json.dumps({"message": {"content": token}}) + "\n",
        data / "agents" / "a1" / "brief.json": json.dumps({"objective": token}),
        data / "agents" / "a1" / "result.json": json.dumps({"summary": token}),
        data / ".soul.md": token,
    }
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return {path: path.read_bytes() for path in [*files, workspace / ".lmagent.md"]}


def test_cannot_read_the_agents_own_data(sandbox, token):
    """mcp.json may hold tokens, sessions hold the conversation: nothing of .lmagent/ shows."""
    workspace = workspace_of(sandbox)
    plant_agent_data(workspace, token)
    result = sandbox.run(
        "cat .lmagent/mcp.json; ls -la .lmagent/sessions; cat .lmagent/agents/a1/brief.json;"
        f" cat {workspace}/.lmagent/.soul.md; grep -rs {token} . /proc/self/root{workspace};"
        " ln -s .lmagent/mcp.json link; cat link; ln .lmagent/mcp.json hard; cat hard;"
        " ln -s /proc/self/root/.. up; cat up/.lmagent/mcp.json",
        timeout=60,
    )
    assert result.output, "the probe printed nothing at all"
    assert token not in result.output
    listing = sandbox.run("find .lmagent | sort").output.split()
    assert listing == [".lmagent", ".lmagent/mcp_images", ".lmagent/sandbox"]
    assert sandbox.run("cat .lmagent.md").output == (workspace / ".lmagent.md").read_text()


def test_cannot_write_or_replace_the_agents_own_data(sandbox, token):
    """Sessions, briefs, results and mcp.json (which starts programs on the host) stay as the
    agent wrote them, whatever a command does to .lmagent/."""
    workspace = workspace_of(sandbox)
    before = plant_agent_data(workspace, token)
    evil = '{"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}}}'
    attacks = [
        f"echo {shlex.quote(evil)} > .lmagent/mcp.json",
        f"echo {token} >> .lmagent.md",
        "echo '{}' > .lmagent/sessions/s1.jsonl",
        f"mkdir -p .lmagent/sessions && echo x > .lmagent/sessions/{token}.jsonl",
        "echo '{}' > .lmagent/agents/a1/result.json",
        "rm -rf .lmagent; rm -f .lmagent.md",
        "mv .lmagent .moved; mv .lmagent.md .moved.md",
        "umount -l .lmagent; umount .lmagent.md",
        "mount --bind /tmp .lmagent",
        "ln -s ../sessions .lmagent/sandbox/up && echo x > .lmagent/sandbox/up/up.jsonl",
        f"ln -s {workspace}/.lmagent/sessions .lmagent/sandbox/abs",
        "echo x > .lmagent/sandbox/abs/abs.jsonl",
        "echo x > .lmagent/mcp_images/x.png",
    ]
    for attack in attacks:
        sandbox.run(attack)
    for path, content in before.items():
        assert path.read_bytes() == content, f"the sandbox changed {path}"
    assert sorted(p.name for p in (workspace / ".lmagent" / "sessions").iterdir()) == ["s1.jsonl"]
    assert not (workspace / ".moved").exists() and not (workspace / ".moved.md").exists()
    assert list((workspace / ".lmagent" / "mcp_images").iterdir()) == []
    assert not Path("/tmp/pwned").exists()


def test_cannot_hard_link_host_files(sandbox, tmp_path_factory, token):
    workspace = workspace_of(sandbox)
    outside = tmp_path_factory.mktemp("outside") / token
    outside.write_text("host file")
    sandbox.run(f"ln /etc/passwd hl-passwd; ln {outside} hl-outside; ln /usr/bin/env hl-env")
    for name, host_file in (
        ("hl-passwd", "/etc/passwd"),
        ("hl-outside", outside),
        ("hl-env", "/usr/bin/env"),
    ):
        link = workspace / name
        assert not (link.exists() and os.path.samefile(link, host_file)), name
    assert outside.read_text() == "host file"


def test_cannot_write_the_root_filesystem(shared_sandbox, token):
    paths = [f"/usr/{token}", f"/etc/{token}", f"/{token}", f"/var/{token}", f"/bin/{token}"]
    result = shared_sandbox.run(
        " ".join(f"(echo x > {p}) 2>/dev/null && echo WROTE {p};" for p in paths)
    )
    assert "WROTE" not in result.output
    for path in paths:
        assert not Path(path).exists()


def test_filling_tmp_is_bounded(sandbox, token):
    result = sandbox.run(f"head -c 600M /dev/zero > /tmp/{token}; df -m /tmp | tail -1", timeout=60)
    assert "No space left on device" in result.output
    assert not Path("/tmp", token).exists()
    cleaned = sandbox.run(f"rm -f /tmp/{token} && echo clean")
    assert cleaned.output == "clean\n"


# --- network -----------------------------------------------------------------------------------
def host_addresses() -> list[str]:
    """127.0.0.1 plus every non-loopback IPv4 address of this host."""
    found = ["127.0.0.1"]
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                found.append(address.address)
    return found


def test_cannot_reach_the_hosts_network(shared_sandbox):
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        addresses = host_addresses()
        probe = (
            "import socket, sys\n"
            f"for host in {addresses!r}:\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=3)\n"
            "        print('CONNECTED', host)\n"
            "    except OSError as exc:\n"
            "        print('FAILED', host, exc)\n"
        )
        result = shared_sandbox.run(f"python3 -c {shlex.quote(probe)}", timeout=60)
        assert "CONNECTED" not in result.output
        assert result.output.count("FAILED") == len(addresses)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_cannot_reach_the_docker_socket(shared_sandbox):
    result = shared_sandbox.run(
        "ls -la /var/run/docker.sock /run/docker.sock 2>&1; echo DOCKER_HOST=$DOCKER_HOST;"
        ' python3 -c "import socket; s = socket.socket(socket.AF_UNIX);'
        " s.connect('/var/run/docker.sock'); print('CONNECTED')\" 2>&1"
    )
    assert "CONNECTED" not in result.output
    assert "DOCKER_HOST=\n" in result.output


# --- privileges --------------------------------------------------------------------------------
def test_cannot_gain_privileges(shared_sandbox):
    status = shared_sandbox.run("grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in status.output.splitlines())
    assert fields == {
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapAmb": "0000000000000000",
        "NoNewPrivs": "1",  # setuid/setgid bits and file capabilities are ignored on exec
    }
    attempts = {
        "unshare -r": "unshare -r true",
        "unshare -m": "unshare -m true",
        "mount": "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m",
        "chroot": "chroot / true",
        "setuid binary": "su -c true root </dev/null",
    }
    for name, command in attempts.items():
        result = shared_sandbox.run(command, timeout=10)
        assert result.exit_code not in (0, None), f"{name} succeeded: {result.output}"


# --- resource exhaustion -----------------------------------------------------------------------
class HostMonitor(threading.Thread):
    """Samples how long the host takes to start a process, and the container's pid count."""

    def __init__(self, sandbox):
        super().__init__(daemon=True)
        self.sandbox, self.done = sandbox, threading.Event()
        self.slowest, self.peak_pids = 0.0, 0
        self.failures: list[str] = []  # the host could not start a process at all

    def run(self):
        while not self.done.wait(0.05):
            started = time.monotonic()
            try:
                subprocess.run(["true"], check=True)
            except OSError as exc:
                self.failures.append(repr(exc))
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.peak_pids = max(self.peak_pids, container_pids(self.sandbox))


def test_fork_bomb_is_contained(sandbox):
    monitor = HostMonitor(sandbox)
    monitor.start()
    try:
        sandbox.run("b() { b | b & }; b", timeout=10)  # its children detach and keep forking
        deadline = time.monotonic() + 30
        count = process_count(sandbox)
        while count > 20 and time.monotonic() < deadline:  # wait for the watchdog to clear it
            time.sleep(0.5)
            count = process_count(sandbox)
        after = sandbox.run("echo survived")
    finally:
        monitor.done.set()
        monitor.join()
    assert count <= 20, f"{count} processes are still in the sandbox"
    assert after.output == "survived\n"
    assert monitor.failures == [], "the host could not start a process during the fork bomb"
    assert monitor.slowest < 5.0, f"the host needed {monitor.slowest:.1f} s to start a process"
    assert monitor.peak_pids <= 128


def process_count(sandbox) -> int:
    """Processes in the sandbox (a large number while its process table is full)."""
    result = sandbox.run("ls -d /proc/[0-9]* | wc -l", timeout=10)
    return int(result.output) if result.output.strip().isdigit() else 10**6


def container_pids(sandbox) -> int:
    """Current pids in the Docker sandbox's cgroup (0 when it cannot be read)."""
    if sandbox.name != "docker":
        return 0
    cid = sandbox.container.id
    for path in (
        f"/sys/fs/cgroup/pids/docker/{cid}/pids.current",
        f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/pids.current",
    ):
        try:
            return int(Path(path).read_text())
        except (OSError, ValueError):
            continue
    return 0


def test_memory_bomb_is_killed_and_reported(sandbox):
    single = sandbox.run("python3 -c \"b = b'x' * (3 << 30)\"", timeout=30)
    assert single.exit_code not in (0, None) and "MemoryError" in single.output
    several = sandbox.run(
        "for i in 1 2 3; do python3 -c \"import time; b = b'x' * (300 << 20); time.sleep(4)\" &"
        " done; wait",
        timeout=30,
    )
    assert several.error and "memory limit" in several.error
    assert sandbox.run("echo survived").output == "survived\n"


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_path_built_in_a_variable_passes_the_check_but_not_the_wall(
    backend, require_backend, sandbox_image, tmp_path_factory, test_workspaces, token
):
    """SHELL_WORKSPACE_ONLY reads the command's text, so a path assembled at run time passes
    it; the sandbox still lets such a command neither read nor write the host's files."""
    require_backend(backend)
    host = tmp_path_factory.mktemp("host")
    (host / "secret.txt").write_text(token)
    head, tail = str(host)[:5], str(host)[5:]
    command = f'h={head}; h="$h{tail}"; cat "$h/secret.txt"; echo planted > "$h/new.txt"; ls "$h"'
    workspace = tmp_path_factory.mktemp(f"ws-{backend}").resolve()
    test_workspaces.append(workspace)
    config = make_config(workspace, sandbox_backend=backend, sandbox_image=sandbox_image)
    assert config.shell_workspace_only
    services = Services(config)
    try:
        ctx = tool_context(config, services=services)
        result = build_toolset(services).execute(ctx, "shell", {"command": command})
    finally:
        services.close()
    assert "outside" not in str(result.get("error")), result  # the check let it through
    assert result["exit_code"] not in (0, None) and token not in result["output"], result
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]
