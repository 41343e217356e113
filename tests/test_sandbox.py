"""The sandbox as the shell/git tools use it: results, the persistent runner, Docker lifecycle."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from lmagent.sandbox.base import CommandResult, SandboxConfig, SandboxUnavailable
from lmagent.sandbox.docker import keeper_user
from lmagent.sandbox.select import describe_backend, open_sandbox
from lmagent.tools.command_paths import check_command_paths

pytest_plugins = ["tests.sandbox_fixtures"]  # sandbox, shared_sandbox, make_sandbox, ...


# --- results and the persistent runner ---------------------------------------------------------
def test_exit_code_and_output(shared_sandbox):
    result = shared_sandbox.run("echo out; echo err >&2; exit 3")
    assert (result.output, result.exit_code, result.error) == ("out\nerr\n", 3, None)
    assert result.to_tool_result() == {
        "success": False,
        "output": "out\nerr\n",
        "exit_code": 3,
        "error": "command exited with code 3",
    }


def test_bash_syntax_available(shared_sandbox):
    result = shared_sandbox.run("[[ 1 == 1 ]] && echo {a,b}")
    assert (result.output, result.exit_code) == ("a b\n", 0)


def test_output_without_trailing_newline(shared_sandbox):
    assert shared_sandbox.run("printf abc").output == "abc"


def test_binary_output_survives(shared_sandbox):
    result = shared_sandbox.run(r"printf 'a\0b\377c'; head -c 4096 /dev/urandom >/dev/null")
    assert result.exit_code == 0
    assert result.output == "a\x00b\ufffdc"
    noisy = shared_sandbox.run("head -c 20000 /dev/urandom; echo; echo still-framed")
    assert noisy.exit_code == 0 and noisy.output.endswith("still-framed\n")


def test_stdin_is_empty(shared_sandbox):
    started = time.monotonic()
    result = shared_sandbox.run("cat; read -r line; echo read=$?", timeout=10)
    assert (result.output, result.exit_code) == ("read=1\n", 0)
    assert time.monotonic() - started < 5


def test_background_job_does_not_block(shared_sandbox):
    started = time.monotonic()
    result = shared_sandbox.run("sleep 100 & echo started", timeout=20)
    assert (result.output, result.exit_code) == ("started\n", 0)
    assert time.monotonic() - started < 5
    assert shared_sandbox.run("echo next").output == "next\n"


def test_large_command_with_a_heredoc(shared_sandbox):
    body = "x" * 200_000
    command = f"sleep 0.2; cat > big.txt <<'EOF'\n{body}\nEOF\nwc -c < big.txt; rm big.txt"
    assert shared_sandbox.run(command).output == "200001\n"


def test_output_cap_keeps_head_and_tail(shared_sandbox):
    result = shared_sandbox.run("seq 1 200000")
    assert result.exit_code == 0
    assert result.truncated_bytes > 1_000_000
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("199999\n200000\n")
    assert f"[... {result.truncated_bytes} bytes of output cut ...]" in result.output
    assert len(result.output) < 40_000
    assert result.to_tool_result()["truncated_bytes"] == result.truncated_bytes


def test_timeout_kills_process_tree_and_next_command_works(shared_sandbox):
    command = "setsid sleep 1001 & sleep 1002 & sleep 1003"
    started = time.monotonic()
    result = shared_sandbox.run(command, timeout=1)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.exit_code is None
    assert result.to_tool_result()["error"] == "timed out after 1 s (process tree killed)"
    survivors = shared_sandbox.run(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"
        " | grep -c 'sleep 100[123]' || true"
    )
    assert survivors.output.strip() == "0"


def test_a_stop_interrupts_a_running_command(shared_sandbox):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    result = shared_sandbox.run("sleep 30", timeout=60, stop=stop)
    assert time.monotonic() - started < 10  # not the 30 s of the command (nor its 60 s limit)
    assert result.interrupted and result.exit_code is None and not result.timed_out
    assert shared_sandbox.run("echo alive").output == "alive\n"


def test_runner_killed_by_a_command_restarts(shared_sandbox):
    result = shared_sandbox.run("kill -9 $PPID")
    if shared_sandbox.name == "bwrap":  # the runner is the sandbox's PID 1: the kernel ignores it
        assert result.exit_code == 0 and result.error is None
    else:
        assert result.exit_code is None and "restarts" in result.error
    assert shared_sandbox.run("echo back").output == "back\n"


def _run_together(sandbox, commands: list[str]) -> tuple[list, float]:
    results: list = [None] * len(commands)

    def one(index: int) -> None:
        results[index] = sandbox.run(commands[index], timeout=30)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(commands))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results, time.monotonic() - started


def test_docker_runs_commands_of_parallel_sub_agents_at_once(make_sandbox):
    """Parallel sub-agents share the workspace's container; their commands must not queue."""
    sandbox = make_sandbox("docker")
    sandbox.run("echo warm")
    results, elapsed = _run_together(sandbox, ["sleep 6; echo one", "sleep 6; echo two"])
    assert [r.output for r in results] == ["one\n", "two\n"]
    assert elapsed < 11, f"the commands queued ({elapsed:.1f} s for two 6 s sleeps)"
    # one container: a later command on any runner sees what an earlier one left in /tmp
    sandbox.run("echo shared > /tmp/note")
    notes, _ = _run_together(sandbox, ["sleep 0.5; cat /tmp/note"] * 3)
    assert [r.output for r in notes] == ["shared\n"] * 3


def test_commands_beyond_the_runner_limit_wait_and_all_finish(make_sandbox):
    sandbox = make_sandbox("docker")
    count = sandbox.max_runners + 2
    results, elapsed = _run_together(sandbox, [f"sleep 3; echo {n}" for n in range(count)])
    assert [r.output for r in results] == [f"{n}\n" for n in range(count)]
    assert 5.9 < elapsed < 3 * count  # two rounds, not one and not one at a time
    assert len(sandbox._idle) <= sandbox.max_runners


def test_cwd_inside_workspace_only(shared_sandbox):
    workspace = Path(shared_sandbox.cfg.workspace)
    (workspace / "sub").mkdir(exist_ok=True)
    assert shared_sandbox.run("pwd", cwd="sub").output == f"{workspace}/sub\n"
    assert shared_sandbox.run("pwd", cwd=str(workspace / "sub")).output == f"{workspace}/sub\n"
    outside = shared_sandbox.run("pwd", cwd="..")
    assert outside.exit_code is None and "outside the workspace" in outside.error


def test_memory_request_up_to_the_cap(shared_sandbox):
    grab = "python3 -c \"b = b'x' * (700 << 20); print('ok')\""
    assert shared_sandbox.run(grab, max_memory_mb=1024).output == "ok\n"
    refused = shared_sandbox.run(grab)  # default 512 MB
    assert refused.exit_code != 0 and "MemoryError" in refused.output


def test_clean_environment_and_allowed_variables(make_sandbox, monkeypatch):
    monkeypatch.setenv("LMAGENT_TEST_ALLOWED", "visible-value")
    monkeypatch.setenv("LMAGENT_TEST_HIDDEN", "hidden-value")
    for backend in ("docker", "bwrap"):
        sandbox = make_sandbox(backend, allowed_env=("LMAGENT_TEST_ALLOWED",))
        output = sandbox.run("env").output
        assert "LMAGENT_TEST_ALLOWED=visible-value" in output
        assert "hidden-value" not in output


def test_git_commit_works_in_a_fresh_sandbox(make_sandbox):
    """... and git there does not offer the agent's own files (the `.lmagent.md` mount point,
    `.lmagent/`) for committing: `git add .` adds the user's files only."""
    for backend in ("docker", "bwrap"):
        sandbox = make_sandbox(backend, git_name="Ada", git_email="ada@example.org")
        result = sandbox.run(
            "git init -q && echo hi > f && git add . && git commit -qm first"
            " && git log --format='%an <%ae> %cn' && git status --short | wc -l"
            " && git ls-files"
        )
        assert (result.output, result.exit_code) == ("Ada <ada@example.org> Ada\n0\nf\n", 0)


def test_files_belong_to_the_host_user(sandbox):
    result = sandbox.run("id -u; id -g; echo x > made-here")
    assert result.output.split() == [str(os.getuid()), str(os.getgid())]
    made = Path(sandbox.cfg.workspace) / "made-here"
    assert (made.stat().st_uid, made.stat().st_gid) == (os.getuid(), os.getgid())


# --- Docker: one persistent container per workspace --------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="handing a workspace to uid 1000 needs root")
def test_docker_runs_as_a_non_root_user(make_sandbox, tmp_path):
    workspace = tmp_path / "ws-1000"
    workspace.mkdir()
    os.chown(workspace, 1000, 1000)
    sandbox = make_sandbox("docker", workspace=workspace, user="1000:1000")
    result = sandbox.run("id -u; echo x > mine; python3 -c 'import os; os.setuid(0)'")
    assert result.output.startswith("1000\n") and "PermissionError" in result.output
    assert (workspace / "mine").stat().st_uid == 1000


def test_docker_container_is_hardened(make_sandbox):
    sandbox = make_sandbox("docker")
    sandbox.container.reload()
    host = sandbox.container.attrs["HostConfig"]
    workspace = str(sandbox.cfg.workspace)
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert not any("seccomp" in opt for opt in host["SecurityOpt"])  # default profile kept
    assert host["PidsLimit"] == 128
    assert host["Memory"] == 512 * 1024**2
    assert host["NanoCpus"] == 900_000_000
    assert host["NetworkMode"] == "none"
    assert host["Privileged"] is False
    assert set(host["Tmpfs"]) == {"/tmp", "/home/sandbox"}
    mounts = sandbox.container.attrs["Mounts"]
    assert sorted((m["Type"], m["Source"], m["Destination"], m["RW"]) for m in mounts) == [
        ("bind", workspace, workspace, True),
        ("bind", f"{workspace}/.lmagent.md", f"{workspace}/.lmagent.md", False),
        ("bind", f"{workspace}/.lmagent/mcp_images", f"{workspace}/.lmagent/mcp_images", False),
        ("bind", f"{workspace}/.lmagent/sandbox", f"{workspace}/.lmagent/sandbox", True),
        ("tmpfs", "", f"{workspace}/.lmagent", False),  # hides the agent's own data
    ]
    # PID 1 (the keeper) runs as another uid than the commands, which run as the host user
    assert sandbox.container.attrs["Config"]["User"] == keeper_user(sandbox.cfg)
    assert keeper_user(sandbox.cfg).split(":")[0] != str(os.getuid())
    assert sandbox.run("id -u").output.strip() == str(os.getuid())
    assert sandbox.container.labels["lmagent.workspace"] == workspace


def test_bwrap_leaves_no_pids_cgroup_behind(make_sandbox):
    sandbox = make_sandbox("bwrap")
    assert sandbox.run("echo hi").output == "hi\n"
    procs = sandbox._idle[-1].transport.cgroup_procs
    if procs is None:
        pytest.skip("no pids cgroup can be made here (the runner's watchdog limits processes)")
    assert str(sandbox._idle[-1].transport.proc.pid) in procs.read_text().split()
    sandbox.close()
    assert not procs.parent.exists()


def test_docker_talks_over_a_direct_socket_and_leaves_no_file(make_sandbox):
    sandbox = make_sandbox("docker")
    assert sandbox.run("echo fast").output == "fast\n"
    assert type(sandbox._idle[-1].transport).__name__ == "DirectSocket"  # dockerd bypassed
    assert list((Path(sandbox.cfg.workspace) / ".lmagent").glob("*.sock")) == []


def test_docker_two_workspaces_two_containers(make_sandbox):
    first, second = make_sandbox("docker"), make_sandbox("docker")
    assert first.container.id != second.container.id
    first.run("echo one > only-in-first")
    peek = second.run(f"cat {first.cfg.workspace}/only-in-first")
    assert peek.exit_code != 0 and "one" not in peek.output


def test_docker_container_reused_across_sandboxes_and_restarts(make_sandbox, tmp_path):
    workspace = tmp_path.resolve()
    first = make_sandbox("docker", workspace=workspace)
    first.run("echo kept > /tmp/marker")
    first.close()
    second = make_sandbox("docker", workspace=workspace)
    assert second.container.id == first.container.id
    assert second.run("cat /tmp/marker").output == "kept\n"
    second.container.stop(timeout=1)  # e.g. the engine restarted
    assert second.run("echo restarted").output == "restarted\n"


def test_docker_container_removed_behind_our_back_is_recreated(make_sandbox):
    sandbox = make_sandbox("docker")
    old_id = sandbox.container.id
    sandbox.container.remove(force=True)
    assert sandbox.run("echo again").output == "again\n"
    assert sandbox.container.id != old_id


def test_docker_replaces_a_container_that_still_shows_the_agents_data(make_sandbox, tmp_path):
    """Containers made before .lmagent/ was hidden bound it read-only: they must not be reused."""
    from docker.types import Mount

    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    first = make_sandbox("docker", workspace=workspace)
    spec = first._container_spec(first.container.name)
    first.close()
    first.container.remove(force=True)
    data = workspace / ".lmagent"
    (data / "mcp.json").write_text('{"mcpServers": {"x": {"env": {"TOKEN": "s3cret"}}}}')
    spec["mounts"] = [
        Mount(target=str(path), source=str(path), type="bind", read_only=not writable)
        for path, writable in ((workspace, True), (data, False), (data / "sandbox", True))
    ]
    old = first.client.containers.create(**spec)  # the old layout, with today's labels
    second = make_sandbox("docker", workspace=workspace)
    assert second.container.id != old.id
    result = second.run("cat .lmagent/mcp.json")
    assert result.exit_code != 0 and "s3cret" not in result.output


def replace_workspace(workspace: Path, how: str) -> Path | None:
    """Move the workspace away (returns where) or delete it, then make an empty one."""
    moved = None
    if how == "moved":
        moved = workspace.with_name(workspace.name + ".old")
        workspace.rename(moved)
    else:
        shutil.rmtree(workspace)
    workspace.mkdir()
    return moved


@pytest.mark.parametrize("how", ["moved", "deleted"])
@pytest.mark.parametrize("backend", ["docker", "bwrap", "process"])
def test_a_replaced_workspace_restarts_the_sandbox(make_sandbox, tmp_path, backend, how):
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    sandbox = make_sandbox(backend, workspace=workspace)
    assert sandbox.run("echo one > first; echo warm").output == "warm\n"
    moved = replace_workspace(workspace, how)
    result = sandbox.run("echo two > second; ls")
    assert result.exit_code == 0, result
    assert result.output.startswith(f"sandbox: the workspace {workspace} was moved or re-created")
    assert result.output.endswith("second\n") and "first" not in result.output
    assert (workspace / "second").read_text() == "two\n"
    if moved is not None:
        assert [p.name for p in moved.iterdir() if not p.name.startswith(".")] == ["first"]
    again = sandbox.run("echo three > third; ls")
    assert again.output == "second\nthird\n"  # said once


def test_a_deleted_workspace_is_reported_until_it_is_back(make_sandbox, tmp_path):
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    sandbox = make_sandbox("bwrap", workspace=workspace)
    sandbox.run("true")
    shutil.rmtree(workspace)
    gone = sandbox.run("echo x > f")
    assert gone.exit_code is None and f"the workspace {workspace} is gone" in gone.error
    workspace.mkdir()
    back = sandbox.run("echo x > f && echo ok")
    assert back.exit_code == 0 and back.output.endswith("ok\n")
    assert (workspace / "f").exists()


@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_docker_container_left_on_a_replaced_workspace_is_replaced(make_sandbox, tmp_path, how):
    """An earlier run of the agent left the container running on the directory since moved, or
    deleted and made again (`rm -rf` and a fresh clone): no runner can start in the old one."""
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    earlier = make_sandbox("docker", workspace=workspace)
    earlier.run("echo one > first")
    earlier.close()  # the container keeps running, as after the agent exits
    moved = replace_workspace(workspace, how)
    later = make_sandbox("docker", workspace=workspace)
    result = later.run("echo two > second; ls")
    assert result.exit_code == 0, result
    assert result.output == "second\n"
    assert later.container.id != earlier.container.id
    assert moved is None or not (moved / "second").exists()


def test_docker_refuses_a_foreign_container_with_its_name(make_sandbox, tmp_path):
    import docker

    from lmagent.sandbox.docker import container_name

    sandbox = make_sandbox("docker")  # ensures the engine and image are there
    client = docker.from_env()
    workspace = tmp_path.resolve()
    impostor = client.containers.create(
        sandbox.container.image.id, ["sleep", "infinity"], name=container_name(workspace)
    )
    try:
        with pytest.raises(SandboxUnavailable, match="docker rm -f"):
            open_sandbox(SandboxConfig(workspace=workspace, backend="docker"))
    finally:
        impostor.remove(force=True)


def test_missing_image_says_how_to_build(require_backend, tmp_path):
    require_backend("docker")
    cfg = SandboxConfig(workspace=tmp_path, backend="docker", image="lmagent-no-such-image:0")
    name, reason = describe_backend(cfg)
    assert name == "none" and "python sandboxed_shell.py --build" in reason
    with pytest.raises(SandboxUnavailable, match="--build"):
        open_sandbox(cfg)


# --- backend choice ----------------------------------------------------------------------------
def test_process_backend_only_when_named_and_says_so(tmp_path):
    name, reason = describe_backend(SandboxConfig(workspace=tmp_path, backend="process"))
    assert name == "process" and "NO filesystem" in reason
    auto_name, _ = describe_backend(SandboxConfig(workspace=tmp_path, backend="auto"))
    assert auto_name != "process"
    sandbox = open_sandbox(SandboxConfig(workspace=tmp_path.resolve(), backend="process"))
    try:
        result = sandbox.run("pwd; echo $HOME", timeout=10)
        assert result.output.splitlines()[0] == str(tmp_path.resolve())
        assert result.output.splitlines()[1] != os.environ.get("HOME")
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        assert sandbox.run("sleep 30", stop=stop).interrupted
    finally:
        sandbox.close()


def test_unknown_backend_is_reported(tmp_path):
    name, reason = describe_backend(SandboxConfig(workspace=tmp_path, backend="chroot"))
    assert name == "none" and "SANDBOX_BACKEND" in reason


def test_tool_result_for_success_and_timeout():
    ok = CommandResult(output="hi\n", exit_code=0)
    assert ok.to_tool_result() == {"success": True, "output": "hi\n", "exit_code": 0}
    late = CommandResult(
        "", None, timed_out=True, error="timed out after 30 s (process tree killed)"
    )
    assert late.to_tool_result()["error"] == "timed out after 30 s (process tree killed)"
    assert late.to_tool_result()["success"] is False


# --- SHELL_WORKSPACE_ONLY second line --------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        "curl -s https://example.org/etc/passwd",
        'git commit -m "fix ../ handling"',
        "cat {ws}/src/main.py",
        "ls src/../docs && cd src && cat ../README.md",
        "python3 -m pytest -q tests/ 2>/dev/null > /tmp/out.txt",
        "grep -rn TODO . | head",
        "/usr/bin/env python3 script.py --output=build/x.json",
        "git diff HEAD~1..HEAD",
        "cd",
    ],
)
def test_check_command_paths_accepts_ordinary_commands(command, tmp_path):
    assert check_command_paths(command.format(ws=tmp_path), tmp_path) is None


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/passwd",
        "cd .. && ls",
        "cd src && cd ../..",
        "ls ~/.ssh",
        "cat $HOME/.bashrc",
        "cat ${HOME}/.netrc",
        "cp secret.txt /root/",
        "ln -s / x",
        "tar cf out.tar --directory=/home .",
        "echo hi > /etc/motd",
        "cat ../../outside.txt",
    ],
)
def test_check_command_paths_rejects_obvious_escapes(command, tmp_path):
    workspace = tmp_path / "ws"
    message = check_command_paths(command, workspace)
    assert message is not None and "outside the workspace" in message
