"""Docker backend: one persistent, locked-down container per workspace, plus the image build.

The container is created on first use and kept (stopped containers are restarted), so later
commands, agent runs and restarts reuse it. Commands never pay a `docker exec` each: one exec runs
``sandbox/runner.py`` and every command is a request on that exec's attach socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

from lmagent.sandbox.base import (
    DEFAULT_MEMORY_MB,
    EMPTY,
    EMPTY_SIZE,
    MAX_MEMORY_MB,
    PIDS_LIMIT,
    READ_ONLY,
    RUNNER_SOURCE,
    SANDBOX_HOME,
    SYSTEM_PATH,
    Channel,
    ChannelLost,
    RunnerSandbox,
    SandboxConfig,
    SandboxUnavailable,
    socket_plan,
    workspace_mounts,
)
from lmagent.sandbox.runner import JOBS_NAME, KEEPER_NAME, RUNNER_NAME, at_unix_path
from lmagent.sandbox.seccomp import filter_program
from lmagent.sandbox.supervise import (
    STOPPED_STATES,
    HostProcess,
    cgroup_members,
    container_processes_exist,
    kill_trees,
    process_uid,
    processes_of,
    still_alive,
)

try:
    import docker
    from docker.errors import APIError, BuildError, DockerException, ImageNotFound, NotFound
    from docker.types import Mount
except ImportError:  # pragma: no cover - reported by probe_docker()
    docker = None

LABEL_KIND = "lmagent.sandbox"
LABEL_WORKSPACE = "lmagent.workspace"
LABEL_CONFIG = "lmagent.config"
BUILD_FIX = "build it with: python sandboxed_shell.py --build"
# What a coding task's commands need: `python` as well as `python3` (python-is-python3), pip and
# venv, pytest, a C compiler and make. The Dockerfile gets this list as its PACKAGES argument.
IMAGE_PACKAGES = (
    "bash", "coreutils", "git", "ripgrep", "ca-certificates", "python3", "python-is-python3",
    "python3-pip", "python3-venv", "python3-pytest", "gcc", "libc6-dev", "make",
)  # fmt: skip
LABEL_PACKAGES = "lmagent.sandbox.packages"  # the image's IMAGE_PACKAGES, space-separated
DOCKERFILE_DIR = Path(__file__).resolve().parent


def docker_client():
    """A client whose engine answered a ping, or SandboxUnavailable saying how to get one."""
    if docker is None:
        raise SandboxUnavailable("the docker Python package is missing: pip install docker")
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except DockerException as exc:
        raise SandboxUnavailable(
            f"no Docker engine answers ({_first_line(exc)}); start it, e.g. `sudo systemctl start "
            "docker` (or `sudo dockerd &`), or add yourself to the docker group"
        ) from exc
    return client


def probe_docker(image: str) -> tuple[bool, str]:
    """(usable, reason) without creating anything."""
    try:
        filter_program()
        client = docker_client()
        version = client.version().get("Version", "?")
        labels = client.images.get(image).labels
    except SandboxUnavailable as exc:
        return False, str(exc)
    except ImageNotFound:
        return False, f"Docker {version} answers but image {image} is missing; {BUILD_FIX}"
    except DockerException as exc:
        return False, f"Docker error: {_first_line(exc)}"
    reason = f"Docker {version}, image {image}, one hardened container per workspace"
    if labels.get(LABEL_PACKAGES) != " ".join(IMAGE_PACKAGES):
        reason += f" (the image lacks tools this version adds, e.g. python, gcc; {BUILD_FIX})"
    return True, reason


def container_name(workspace: Path) -> str:
    return "lmagent-sandbox-" + hashlib.sha256(str(workspace).encode()).hexdigest()[:16]


class DockerSandbox(RunnerSandbox):
    name = "docker"
    max_procs = PIDS_LIMIT - 8  # the cgroup holds 128; the watchdog then clears runaways
    max_runners = 4  # one container: its runners share /tmp, HOME and the process table

    def __init__(self, cfg: SandboxConfig, client=None):
        super().__init__(cfg)
        self._replacing = threading.Lock()
        self.compare_inside = True  # False on an engine that shows its own inode numbers
        if cfg.network not in ("none", "bridge"):
            raise SandboxUnavailable(f"SANDBOX_NETWORK must be none or bridge, not {cfg.network!r}")
        self.client = client or docker_client()
        try:
            self.image = self.client.images.get(cfg.image)
        except ImageNotFound:
            raise SandboxUnavailable(f"sandbox image {cfg.image} is missing; {BUILD_FIX}") from None
        try:
            self.container = self._find_or_create()
        except DockerException as exc:
            raise SandboxUnavailable(f"cannot start the sandbox container: {exc}") from exc
        self.memory_mb = self.container.attrs["HostConfig"].get("Memory", 0) // 2**20
        if self.memory_mb != DEFAULT_MEMORY_MB:  # left raised by a process that died mid-command
            self._set_memory(DEFAULT_MEMORY_MB)
        self.sweep()  # what an earlier agent's run may have left in the container

    # --- container lifecycle -------------------------------------------------------------------
    def _config_digest(self) -> str:
        settings = [self.image.id, self.cfg.network, self.cfg.uid_gid(), PIDS_LIMIT, 5]
        settings += [keeper_user(self.cfg), self._init_command()]
        return hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:16]

    def _init_command(self) -> list[str]:
        """The container's PID 1: the runner file's `keep_container`, under the filter."""
        idle = str(round(self.cfg.idle_minutes * 60))
        return ["python3", "-c", RUNNER_SOURCE, "keep-container", filter_program().hex(), idle]

    def _find_or_create(self):
        name = container_name(self.workspace)
        try:
            container = self.client.containers.get(name)
        except NotFound:
            container = None
        if container is not None and not self._serves_workspace(container):
            raise SandboxUnavailable(
                f"a container named {name} exists but was not made for {self.workspace}; "
                f"remove it with: docker rm -f {name}"
            )
        if container is not None and not self._is_current(container):
            container.remove(force=True)  # image, settings or mounts changed: start afresh
            container = None
        if container is None:
            container = self._create(name)
        return self._running(container)

    def _serves_workspace(self, container) -> bool:
        labels = container.labels
        return labels.get(LABEL_KIND) == "1" and labels.get(LABEL_WORKSPACE) == str(self.workspace)

    def _is_current(self, container) -> bool:
        """Made with today's image, settings and mounts (older ones showed .lmagent/)."""
        mounts = container.attrs.get("HostConfig", {}).get("Mounts") or []
        same_mounts = mount_set(mounts) == mount_set(self._mounts())
        return same_mounts and container.labels.get(LABEL_CONFIG) == self._config_digest()

    def _mounts(self) -> list:
        return [docker_mount(path, kind) for path, kind in workspace_mounts(self.workspace)]

    def _create(self, name: str):
        try:
            return self.client.containers.create(**self._container_spec(name))
        except APIError as exc:
            if exc.status_code != 409:  # 409: another process created it first
                raise SandboxUnavailable(f"cannot create the sandbox container: {exc}") from exc
            return self.client.containers.get(name)

    def _container_spec(self, name: str) -> dict:
        ws = str(self.workspace)
        tmpfs_opts = "rw,exec,nosuid,nodev,mode=1777,size="  # exec: a venv or a build in /tmp
        return {
            "image": self.image.id,
            "command": self._init_command(),
            "name": name,
            "hostname": "lmagent-sandbox",
            "labels": {LABEL_KIND: "1", LABEL_WORKSPACE: ws, LABEL_CONFIG: self._config_digest()},
            "user": keeper_user(self.cfg),  # commands run as cfg.uid_gid(), by docker exec
            "working_dir": "/",
            "environment": {"HOME": SANDBOX_HOME, "PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
            "mounts": self._mounts(),
            "tmpfs": {"/tmp": tmpfs_opts + "256m", SANDBOX_HOME: tmpfs_opts + "64m"},
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges:true"],
            "pids_limit": PIDS_LIMIT,
            "mem_limit": f"{DEFAULT_MEMORY_MB}m",
            "memswap_limit": f"{DEFAULT_MEMORY_MB}m",
            "nano_cpus": 900_000_000,
            "network_mode": self.cfg.network,
            "init": False,  # PID 1 is keep_container: Docker's own init would be unfiltered
            "detach": True,
        }

    def _running(self, container):
        container.reload()
        if container.status != "running":
            container.start()
            container.reload()
        return container

    def _replace_container(self) -> None:
        """A fresh container, on the workspace directory there is now."""
        with contextlib.suppress(NotFound):
            self.container.remove(force=True)
        self.container = self._find_or_create()
        self.memory_mb = DEFAULT_MEMORY_MB

    # --- RunnerSandbox hooks -------------------------------------------------------------------
    def _restart(self) -> None:
        try:
            self._replace_container()
        except DockerException as exc:
            detail = _first_line(exc)
            raise SandboxUnavailable(f"cannot restart the sandbox container: {detail}") from exc

    def _connect(self) -> Channel:
        """A runner in a container that sees the workspace directory there is now.

        A container an earlier run of the agent left running may still hold a workspace
        directory that has since been moved or re-created (deleted: no runner starts in it at
        all): it is replaced.
        """
        try:
            channel = self._open_runner()
        except ChannelLost:
            channel = None
        if channel is not None and self._sees_workspace(channel):
            return channel
        if channel is not None:
            self._discard(channel)
        stale = self.container.id
        with self._replacing:
            if self.container.id == stale:
                try:
                    self._replace_container()
                except DockerException as exc:
                    raise ChannelLost(f"cannot replace the container: {_first_line(exc)}") from exc
        channel = self._open_runner()
        self.compare_inside = self._sees_workspace(channel)  # False: e.g. Docker in a VM
        return channel

    def _sees_workspace(self, channel: Channel) -> bool:
        seen = channel.ready.get("workspace")
        return not self.compare_inside or seen is None or tuple(seen) == self.identity

    def _open_runner(self) -> Channel:
        try:
            try:
                self.container = self._running(self.container)
            except NotFound:  # removed behind our back
                self.container = self._find_or_create()
        except DockerException as exc:
            raise ChannelLost(f"the sandbox container does not start: {_first_line(exc)}") from exc
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id,
                ["python3", "-c", RUNNER_SOURCE],
                stdin=True,
                user=self.cfg.uid_gid(),
                workdir=str(self.workspace),
                environment={"HOME": SANDBOX_HOME, "PATH": SYSTEM_PATH},
            )["Id"]
            transport = ExecSocket(api.exec_start(exec_id, socket=True))
        except DockerException as exc:
            raise ChannelLost(f"docker exec failed: {_first_line(exc)}") from exc
        transport.exec_id = exec_id
        direct = socket_plan(self.workspace)
        seccomp = filter_program().hex()
        channel = self._start_channel(transport, direct=direct, reap_orphans=True, seccomp=seccomp)
        if channel.ready.get("direct"):
            go_direct(channel, direct, runner_pid=channel.host_pid)
        return channel

    def _runner_host_pid(self, channel: Channel) -> int | None:
        """The runner's pid as the host sees it."""
        try:
            return self.client.api.exec_inspect(channel.transport.exec_id).get("Pid") or None
        except DockerException:
            return None

    def _after_loss(self, pid: int | None = None) -> None:
        """Once the lost process has exited (the host may see its end of the socket close
        before the kernel hands its children to the container's init), sweep the container."""
        if pid:
            still_alive({pid})
        self.sweep()

    def sweep(self) -> list[str]:
        """Kill, from the host, the container's processes no runner would: orphans adopted by
        its init (a runner that died left them) and stopped runners, job servers and keepers,
        each with everything below it; a container whose PID 1 is not the keeper it was made
        with is killed as a whole. The processes killed, described."""
        super().sweep()
        found = host_view(self.container)
        if found is None:
            return []
        table, members, init = found
        if not is_keeper(members, init):
            return [kill_container(self.container)]
        killed = kill_trees(strays(table, members, init), container_processes(self.container))
        return describe(table, killed)

    def _memory_needed(self, memory_mb: int) -> None:
        if min(memory_mb, MAX_MEMORY_MB) != self.memory_mb:
            self._set_memory(memory_mb)

    def _set_memory(self, memory_mb: int) -> None:
        """The container limit backs the per-process RLIMIT_DATA; lowering may fail if in use."""
        memory_mb = min(memory_mb, MAX_MEMORY_MB)
        try:
            self.container.update(mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m")
            self.memory_mb = memory_mb
        except DockerException:
            pass


OWN_NAMES = {name.decode() for name in (RUNNER_NAME, JOBS_NAME, KEEPER_NAME)}


def host_view(container) -> tuple[dict[int, HostProcess], set[int], int] | None:
    """(the container's processes by host pid, their pids, its init's pid); None when the
    container is not running or its processes are not the host's to see (an engine in a VM)."""
    try:
        container.reload()
    except DockerException:
        return None
    init = container.attrs.get("State", {}).get("Pid") or 0
    if container.status != "running" or not init:
        return None
    members = cgroup_members(init)
    table = processes_of((members or set()) | {init})
    if members is None or init not in table:
        return None
    return table, set(table), init


def container_processes(container):
    """A kill_trees() table: the container's processes (descendants never leave its cgroup)."""
    return lambda: (host_view(container) or ({}, set(), 0))[0]


def quiesce_container(workspace: Path) -> list[str]:
    """Kill every process in the workspace's container but its init, the keeper (the whole
    container when the host cannot see its processes, or its init is not the keeper it was made
    with); the processes killed, described.
    No engine or no container: nothing to do. Raises SandboxUnavailable when it cannot."""
    if docker is None or not docker_engine_expected():
        return []
    try:
        client = docker_client()
    except SandboxUnavailable:
        if not container_processes_exist():  # no engine answers, and no container runs
            return []
        raise
    try:
        container = client.containers.get(container_name(workspace))
    except NotFound:
        return []
    except DockerException as exc:
        raise SandboxUnavailable(f"Docker error: {_first_line(exc)}") from exc
    found = host_view(container)
    if found is None:
        return [kill_container(container)] if container.status == "running" else []
    table, members, init = found
    if not is_keeper(members, init):
        return [kill_container(container)]
    killed = kill_trees(members - {init}, container_processes(container))
    left = still_alive(killed)
    if left:
        raise SandboxUnavailable(f"processes of {container.name} survive SIGKILL: {left}")
    return describe(table, killed)


def docker_engine_expected() -> bool:
    """Whether a Docker engine is configured here (DOCKER_HOST, or the default socket)."""
    return bool(os.environ.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


def keeper_user(cfg: SandboxConfig) -> str:
    """The uid:gid of the container's PID 1: one no command runs as, so that none can signal it,
    trace it or write its memory (nobody's, or the one below it when commands run as nobody)."""
    uid = 65534 if cfg.uid_gid().split(":")[0] != "65534" else 65533
    return f"{uid}:{uid}"


def is_keeper(members: set[int], init: int) -> bool:
    """Whether the container's PID 1 is the keeper it was made with: a uid no other process of
    the container has (so no command could have signalled it or written its memory). (Its name
    is no proof: it is set only once the keeper's interpreter has started.)"""
    uid = process_uid(init)
    return uid is not None and uid not in {process_uid(p) for p in members - {init}}


def kill_container(container) -> str:
    """Kill the container as a whole (the next use starts it afresh)."""
    with contextlib.suppress(NotFound):
        container.kill()
    return f"container {container.name} (killed as a whole)"


def strays(table: dict[int, HostProcess], members: set[int], init: int) -> set[int]:
    """The container's processes the host kills whenever it looks: orphans its init adopted
    (it starts nothing itself, so all its children) and stopped runners (processes Docker
    started from outside), job servers and keepers."""
    orphans = {p for p in members if table[p].ppid == init}
    entries = {p for p in members if p != init and table[p].ppid not in members}
    stopped = {
        p
        for p in members
        if table[p].state in STOPPED_STATES and (p in entries or table[p].name in OWN_NAMES)
    }
    return orphans | stopped


def describe(table: dict[int, HostProcess], pids: set[int]) -> list[str]:
    return [f"{table[p].name} (host pid {p})" for p in sorted(pids) if p in table]


class ExecSocket:
    """The attach socket of a non-TTY exec: demultiplexes Docker's 8-byte-header frames."""

    exec_id = ""  # the exec that runs the runner

    def __init__(self, raw):
        self.raw = raw  # keeps the HTTP response (and the socket) alive
        self.sock = getattr(raw, "_sock", raw)
        self.frames = bytearray()
        self.stderr = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_some(self) -> bytes:
        chunk = self.sock.recv(262144)
        if not chunk:
            detail = self.stderr.decode("utf-8", "replace").strip()[-500:]
            raise EOFError("the sandbox runner exited" + (f": {detail}" if detail else ""))
        self.frames += chunk
        stdout = bytearray()
        while len(self.frames) >= 8:
            size = int.from_bytes(self.frames[4:8], "big")
            if len(self.frames) < 8 + size:
                break
            stream, payload = self.frames[0], self.frames[8 : 8 + size]
            del self.frames[: 8 + size]
            if stream == 1:
                stdout += payload
            else:
                self.stderr = (self.stderr + payload)[-4096:]
        return bytes(stdout)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)  # the runner sees EOF on stdin and exits
        except OSError:
            pass
        self.sock.close()


def docker_mount(path: str, kind: str) -> Mount:
    """One of workspace_mounts() for Docker; EMPTY is a small read-only tmpfs."""
    if kind == EMPTY:
        return Mount(
            target=path,
            source=None,
            type="tmpfs",
            read_only=True,
            tmpfs_size=EMPTY_SIZE,
            tmpfs_mode=0o555,
        )
    return Mount(target=path, source=path, type="bind", read_only=kind == READ_ONLY)


def mount_set(mounts: list[dict]) -> set[tuple]:
    """What matters of HostConfig.Mounts (or of our Mount objects) to tell layouts apart."""
    return {
        (m.get("Type"), m.get("Source") or "", m.get("Target"), bool(m.get("ReadOnly")))
        for m in mounts
    }


def go_direct(channel: Channel, direct: dict, runner_pid: int | None) -> None:
    """Switch the channel to the runner's unix socket; on any trouble stay on the exec stream.

    Both ends check who is on the other side: the runner accepts only a peer outside its PID
    namespace that knows the token, and we accept only the process Docker started as the runner
    (so a sandboxed process that swapped the socket file cannot pose as it).
    """
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(5)
        at_unix_path(conn.connect, direct["path"])
        if not runner_pid or peer_pid(conn) != runner_pid:
            raise ConnectionRefusedError("the socket does not belong to the runner")
        conn.sendall(direct["token"].encode() + b"\n")
        conn.settimeout(None)
    except OSError:
        conn.close()
        channel.send({"op": "nodirect"})  # wakes the runner from waiting for us
        return
    channel.transport = DirectSocket(conn, channel.transport)


def peer_pid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


class DirectSocket:
    """A plain socket to the runner; the exec stream is kept open only to keep the runner alive."""

    def __init__(self, conn: socket.socket, exec_stream: ExecSocket):
        self.conn, self.exec_stream = conn, exec_stream

    def fileno(self) -> int:
        return self.conn.fileno()

    def write(self, data: bytes) -> None:
        self.conn.sendall(data)

    def read_some(self) -> bytes:
        chunk = self.conn.recv(262144)
        if not chunk:
            raise EOFError("the sandbox runner exited")
        return chunk

    def close(self) -> None:
        self.conn.close()
        self.exec_stream.close()


def stop_container(workspace: Path) -> str:
    """Stop the workspace's sandbox container now (its next use starts it again); what was
    done, in words."""
    try:
        container = docker_client().containers.get(container_name(workspace))
        running = container.status == "running"
        if running:
            container.stop(timeout=5)
    except NotFound:
        running = False
    except DockerException as exc:
        raise SandboxUnavailable(f"Docker error: {_first_line(exc)}") from exc
    if not running:
        return f"no sandbox container is running for {workspace}"
    return f"stopped the sandbox container of {workspace} ({container.name})"


def remove_containers(client=None, workspace: Path | None = None) -> int:
    """Remove sandbox containers (of one workspace, or all of them). Returns how many."""
    client = client or docker_client()
    wanted = [f"{LABEL_KIND}=1"] + ([f"{LABEL_WORKSPACE}={workspace}"] if workspace else [])
    containers = client.containers.list(all=True, filters={"label": wanted})
    for container in containers:
        container.remove(force=True)
    return len(containers)


# --- image build -------------------------------------------------------------------------------
def build_image(cfg: SandboxConfig, log=print) -> str:
    """Build `cfg.image`: `docker build` of the Dockerfile beside this module, else debootstrap
    + import."""
    tag = cfg.image
    client = docker_client()
    try:
        log(f"building {tag} from {DOCKERFILE_DIR / 'Dockerfile'} ...")
        packages = {"PACKAGES": " ".join(IMAGE_PACKAGES)}
        client.images.build(
            path=str(DOCKERFILE_DIR), tag=tag, rm=True, pull=False, buildargs=packages
        )
        return f"built {tag} with docker build"
    except (BuildError, APIError) as exc:
        log(f"docker build failed ({_first_line(exc)}); building from Debian packages instead")
    return build_with_debootstrap(client, tag, cfg.debian_mirror, log)


def build_with_debootstrap(client, tag: str, mirror: str = "", log=print) -> str:
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "building with debootstrap needs root: sudo python sandboxed_shell.py --build"
        )
    if not shutil.which("debootstrap"):
        raise SandboxUnavailable("debootstrap is missing: sudo apt-get install debootstrap")
    mirror = mirror or debian_mirror()
    workdir = Path(tempfile.mkdtemp(prefix="lmagent-rootfs-"))
    rootfs = workdir / "rootfs"
    try:
        argv = ["debootstrap", "--variant=minbase", "--include=" + ",".join(IMAGE_PACKAGES)]
        keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
        argv += [f"--keyring={keyring}"] if keyring.exists() else []
        log(f"debootstrap bookworm from {mirror} (takes a minute) ...")
        subprocess.run(
            [*argv, "bookworm", str(rootfs), mirror], check=True, stdout=subprocess.DEVNULL
        )
        _trim_rootfs(rootfs)
        _import_rootfs(client, rootfs, tag)
    except subprocess.CalledProcessError as exc:
        raise SandboxUnavailable(f"debootstrap failed ({exc}); its messages are above") from exc
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return f"built {tag} from a debootstrap root filesystem ({mirror})"


def debian_mirror() -> str:
    """The first Debian archive in this machine's apt sources (SANDBOX_DEBIAN_MIRROR wins)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for url in re.findall(r"^(?:deb\s+(?:\[[^\]]*\]\s+)?|URIs:\s*)(\S+)", text, re.M):
            if re.search(r"/debian/?$", url):
                return url
    raise SandboxUnavailable(
        "no Debian mirror found in /etc/apt/sources*; "
        "set SANDBOX_DEBIAN_MIRROR to the URL of a Debian archive"
    )


def _trim_rootfs(rootfs: Path) -> None:
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*"):
        for path in rootfs.glob(pattern):
            if path.is_file():
                path.unlink()
    home = rootfs / SANDBOX_HOME.lstrip("/")
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o1777)


def _import_rootfs(client, rootfs: Path, tag: str) -> None:
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
    changes = ['CMD ["sleep", "infinity"]', "ENV LANG=C.UTF-8", f"ENV HOME={SANDBOX_HOME}"]
    changes += [f"ENV PATH={SYSTEM_PATH}", "LABEL lmagent.sandbox.build=debootstrap"]
    changes += [f'LABEL {LABEL_PACKAGES}="{" ".join(IMAGE_PACKAGES)}"']
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE
    )
    try:
        client.api.import_image(
            src=tar.stdout,
            repository=repository,
            tag=version or "latest",
            changes=changes,
            stream_src=True,
        )
    finally:
        tar.stdout.close()
        if tar.wait() != 0:
            raise SandboxUnavailable("tar of the root filesystem failed")
    client.images.get(tag)  # raises ImageNotFound if the import did not produce it


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
