"""Command server that runs inside LMAgent's sandbox (container, bwrap or bare process group).

sandboxed_shell.py starts it once per sandbox with ``python3 -c <this file>`` and keeps talking to
it over stdin/stdout, so a command costs one fork instead of a fresh ``docker exec``.

Protocol. The host writes one JSON object per line on stdin:
  {"op": "hello", "home", "gitconfig", "workspace", "max_procs", "max_rss_mb", "direct"?}
                          -> {"op": "ready", "pid", "uid", "direct": bool, "workspace": [dev, ino]}
  {"op": "run", "id", "cmd", "cwd", "env", "timeout", "mem_mb", "max_rss_mb", "cap"}
  {"op": "kill", "id"}                                               (stop the running command)
Each answer is one JSON header line; a "run" answer carries "head" + "tail" raw output bytes
right after it, so binary output and output without a trailing newline survive intact.
"workspace" in "ready" is the (device, inode) of the workspace directory as the sandbox sees it
(null if unreadable): the host tells by it a container still holding a directory that has since
been moved or re-created. With "direct": {"path", "token"} the server also listens on that unix
socket (in the workspace, which the host sees at the same path) and, once the host connects and
proves the token, talks over it instead: that skips the hops through dockerd. The socket file
is removed right away.

Every command runs under bash (sh if there is no bash) in its own session/process group, with
stdin from /dev/null and stdout+stderr on one pipe. To keep a round trip near a millisecond the
next shell is started ahead of time and waits to source its command from a pipe (`Shell`); its
limits are set before the command is handed over. The server is a child subreaper: everything a
command starts stays in its process tree, so a timeout or stop kills all of it (children that
called setsid included). With `max_procs`/`max_rss_mb` a watchdog also kills runaway processes
(a fork bomb's detached children, say), during a command and between commands.
Only the standard library is used; the code runs on any Python 3 the sandbox happens to have.
"""

import ctypes
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
WATCH_INTERVAL = 0.05  # seconds between watchdog checks
DRAIN_GRACE = 0.3  # seconds to keep reading output after a kill
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


class Capped:
    """Keep the first and last `cap` bytes of a stream and count everything."""

    def __init__(self, cap):
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.cap:
                del self.tail[: len(self.tail) - self.cap]

    def parts(self):
        return bytes(self.head), bytes(self.tail[-self.cap :]) if self.tail else b""


class Watchdog:
    """Process-count and memory limits that need no cgroups (bwrap; Docker's pids backstop).

    Counts every process visible in /proc, which in a private PID namespace is the sandbox.
    check() returns "procs" or "memory" once a limit is exceeded, at most every `interval`.
    """

    def __init__(self, max_procs=None, max_rss_mb=None):
        self.max_procs = max_procs
        self.max_rss = (max_rss_mb or 0) * 1024 * 1024
        self.enabled = bool(max_procs or max_rss_mb)
        self.interval = WATCH_INTERVAL if self.enabled else 1.0
        self.next_check = 0.0

    def check(self):
        if not self.enabled or time.monotonic() < self.next_check:
            return None
        self.next_check = time.monotonic() + self.interval
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
        if self.max_procs and len(pids) > self.max_procs:
            return "procs"
        if self.max_rss and resident_bytes(pids) > self.max_rss:
            return "memory"
        return None


class Server:
    def __init__(self):
        self.inbuf = bytearray()
        self.eof = False
        self.statuses = {}  # pid -> wait status of reaped children
        self.warm = None  # the Shell waiting for the next command
        self.limits = {}  # sandbox-wide watchdog limits from "hello"
        self.rfd, self.wfd = 0, 1  # requests in, answers out (a socket after "direct")
        self.direct = None
        self.notice = ""  # what the idle watchdog did, told with the next result
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass

    # --- channel -------------------------------------------------------------------------------
    def send(self, header, payload=b""):
        data = json.dumps(header).encode() + b"\n" + payload
        while data:
            data = data[os.write(self.wfd, data) :]

    def read_request(self, block):
        """Return the next request dict, or None (no complete line yet / stdin closed)."""
        while True:
            line_end = self.inbuf.find(b"\n")
            if line_end >= 0:
                line = bytes(self.inbuf[:line_end])
                del self.inbuf[: line_end + 1]
                try:
                    return json.loads(line)
                except ValueError:
                    continue
            if self.eof or not block:
                return None
            self.fill_input()

    def fill_input(self):
        try:
            chunk = os.read(self.rfd, 65536)
        except InterruptedError:
            return
        if chunk:
            self.inbuf += chunk
        else:
            self.eof = True

    def serve(self):
        self.idle_watch = Watchdog()
        while True:
            if not self.request_pending(self.idle_watch):
                continue
            req = self.read_request(block=True)
            if req is None:
                return
            op = req.get("op")
            if op == "hello":
                self.hello(req)
            elif op == "run":
                self.run(req)
            elif op == "ping":
                self.send({"op": "pong"})

    def hello(self, req):
        write_home(req)
        self.limits = {"max_procs": req.get("max_procs"), "max_rss_mb": req.get("max_rss_mb")}
        self.idle_watch = Watchdog(**self.limits)
        direct = req.get("direct") or {}
        listener = listen_unix(direct.get("path"))
        ready = {"op": "ready", "pid": os.getpid(), "uid": os.getuid(), "direct": bool(listener)}
        ready["workspace"] = identity(req.get("workspace"))
        self.send(ready)
        if listener is not None:
            self.accept_direct(listener, direct)

    def accept_direct(self, listener, direct):
        """Take the host's connection on the socket, proved by the token; then drop the path."""
        deadline = time.monotonic() + 5
        try:
            while not self.eof:
                left = deadline - time.monotonic()
                ready = select.select([listener, 0], [], [], max(left, 0))[0]
                if not ready or 0 in ready:  # too late, or the host went on over stdin
                    return
                conn = listener.accept()[0]
                rest = read_token(conn, direct["token"], deadline)
                if rest is None or peer_pid(conn) != 0:  # 0: outside this sandbox's PID namespace
                    conn.close()
                    continue
                self.direct, self.inbuf = conn, bytearray(rest)
                self.rfd = self.wfd = conn.fileno()
                return
        finally:
            listener.close()
            try:
                os.unlink(direct["path"])
            except OSError:
                pass

    def request_pending(self, watch):
        """True once a request can be read; until then keep the watchdog going."""
        if not watch.enabled or b"\n" in self.inbuf or self.eof:
            return True
        if select.select([self.rfd], [], [], watch.interval)[0]:
            return True
        self.reap()
        self.idle_check(watch)
        return False

    def idle_check(self, watch):
        """Between commands: over a limit, kill everything commands left running."""
        reason = watch.check()
        if not reason:
            return
        keep = {self.warm.pid} if self.warm else set()
        killed = self.kill_processes(my_children() - keep, keep)
        why = "too many processes" if reason == "procs" else "memory limit exceeded"
        self.notice = f"sandbox: {killed} background process(es) killed: {why}\n"

    # --- processes -----------------------------------------------------------------------------
    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = status

    def kill_processes(self, roots, keep):
        """SIGKILL `roots`, their descendants and their process groups; returns how many.

        Orphans the server adopts meanwhile join `roots` unless they are in `keep`.
        """
        own = {os.getpid()}
        own_group = os.getpgrp()
        killed = set()
        for _ in range(50):
            table = process_table()
            victims = subtree(table, roots) - own
            if not victims:
                break
            for group in {table[pid][1] for pid in victims if pid in table} - {own_group}:
                try:
                    os.killpg(group, signal.SIGKILL)
                except OSError:
                    pass
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            killed |= victims
            time.sleep(0.01)
            self.reap()
            roots = roots | (my_children() - keep)
        return len(killed)

    # --- one command ---------------------------------------------------------------------------
    def run(self, req):
        earlier = my_children()
        try:
            shell = self.start_shell(req)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            message = f"sandbox: cannot start the command: {exc}\n".encode()
            header = {"op": "result", "id": req.get("id"), "exit": 127, "signal": None}
            header.update(reason=None, total=len(message), head=len(message), tail=0)
            return self.send(header, message)
        out = Capped(int(req.get("cap", 20000)))
        oom_before = oom_kills()
        reason = self.wait(req, shell, out, earlier)
        exit_code, sig = decode_status(self.statuses.pop(shell.pid, None))
        head, tail = out.parts()
        header = {"op": "result", "id": req.get("id"), "exit": exit_code, "signal": sig}
        header.update(reason=reason, total=out.total, head=len(head), tail=len(tail))
        if oom_before is not None:
            header["oom_kills"] = (oom_kills() or 0) - oom_before
        header["notice"], self.notice = self.notice, ""
        self.send(header, head + tail)
        self.prepare_next(req)

    def start_shell(self, req):
        """Hand the command to the waiting shell if it fits, else to a fresh one."""
        env, cwd = req.get("env") or {}, req.get("cwd") or None
        self.reap()
        shell, self.warm = self.warm, None
        if shell is not None and (shell.key != (env, cwd) or shell.pid in self.statuses):
            shell.discard()
            shell = None
        self.statuses.clear()  # only the coming command's exit status matters from here on
        if shell is not None:
            try:
                shell.start(req)
                return shell
            except OSError:  # it died while waiting
                shell.discard()
        shell = Shell(env, cwd)
        try:
            shell.start(req)
        except OSError:
            shell.discard()
            raise
        return shell

    def prepare_next(self, req):
        try:
            self.warm = Shell(req.get("env") or {}, req.get("cwd") or None)
        except (OSError, ValueError, subprocess.SubprocessError):
            self.warm = None

    def wait(self, req, shell, out, earlier):
        """Pump output until the command exits; returns None or why it was killed."""
        pid, out_r = shell.pid, shell.out_r
        deadline = time.monotonic() + float(req.get("timeout", 30))
        limits = dict(self.limits, max_rss_mb=req.get("max_rss_mb"))
        watch = Watchdog(**limits)
        reason = None
        while pid not in self.statuses:
            left = deadline - time.monotonic()
            if left <= 0:
                reason = "timeout"
            elif self.stop_requested(req):
                reason = "stopped"
            else:
                reason = watch.check()
            if reason in ("timeout", "stopped"):  # this command's processes
                self.kill_processes({pid} | (my_children() - earlier), earlier - {pid})
            elif reason:  # a limit of the whole sandbox: everything commands started goes
                self.kill_processes(my_children(), set())
            if reason:
                break
            fds = [self.wake_r] + ([out_r] if out_r is not None else [])
            fds += [] if self.eof else [self.rfd]
            ready = select.select(fds, [], [], min(left, watch.interval))[0]
            if out_r is not None and out_r in ready and not read_into(out_r, out):
                os.close(out_r)
                out_r = None
            if self.rfd in ready:
                self.fill_input()
            if self.wake_r in ready:
                drain(self.wake_r)
            self.reap()
        if out_r is not None:
            finish_output(out_r, out, DRAIN_GRACE if reason else 0)
        give_up = time.monotonic() + 5
        while reason and pid not in self.statuses and time.monotonic() < give_up:
            select.select([self.wake_r], [], [], 0.1)
            drain(self.wake_r)
            self.reap()
        return reason

    def stop_requested(self, req):
        while True:
            msg = self.read_request(block=False)
            if msg is None:
                return self.eof
            if msg.get("op") == "kill" and msg.get("id") == req.get("id"):
                return True


def spawn_shell(script_r, out_w, env, cwd, attempts=40):
    """Start `bash -c '. /dev/fd/N'` in a new session with /dev/null as stdin.

    subprocess uses vfork here (no preexec_fn), much cheaper than fork() of the server.
    A full process table (right after a fork bomb was killed, say) is waited out for a while.
    """
    for attempt in range(attempts):
        try:
            proc = subprocess.Popen(
                [SHELL, "-c", f". /dev/fd/{script_r}"],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=(script_r,),
            )
        except BlockingIOError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)
            continue
        proc.returncode = 0  # the server reaps it; keep subprocess from ever waiting on the pid
        return proc.pid
    raise AssertionError("unreachable")


class Shell:
    """A shell started ahead of its command; it sources the command from a pipe once given one.

    `bash -c '. /dev/fd/N'` does the same as `bash -c COMMAND` (same error messages, `exit` works),
    but bash's start-up (about a millisecond) happens before the command arrives.
    """

    def __init__(self, env, cwd):
        self.key = (env, cwd)
        self.script_w = self.out_r = None
        script_r, self.script_w = os.pipe()
        self.out_r, out_w = os.pipe()
        try:
            self.pid = spawn_shell(script_r, out_w, env, cwd)
        except BaseException:
            self.discard()
            raise
        finally:
            os.close(script_r)
            os.close(out_w)
        os.set_blocking(self.out_r, False)

    def start(self, req):
        """Apply the limits, then give the shell its command."""
        set_limits(self.pid, req.get("mem_mb"))
        data = req["cmd"].encode("utf-8", "replace") + b"\n"
        try:
            while data:
                data = data[os.write(self.script_w, data) :]
        finally:
            os.close(self.script_w)
            self.script_w = None

    def discard(self):
        if getattr(self, "pid", None):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for fd in (self.script_w, self.out_r):
            if fd is not None:
                os.close(fd)
        self.script_w = self.out_r = None


def set_limits(pid, mem_mb):
    try:
        if mem_mb:
            limit = int(mem_mb) * 1024 * 1024
            resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")  # under memory pressure the command goes, not the runner
    except OSError:
        pass


def write_home(req):
    home = req.get("home")
    if not home:
        return
    try:
        os.makedirs(home, exist_ok=True)
        with open(os.path.join(home, ".gitconfig"), "w") as f:
            f.write(req.get("gitconfig", ""))
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot prepare HOME: {exc}\n")


def identity(path):
    """[device, inode] of a directory, or None."""
    try:
        info = os.stat(path)
    except (OSError, TypeError):
        return None
    return [info.st_dev, info.st_ino]


def read_into(fd, out):
    """Read what is available; False at end of file."""
    try:
        chunk = os.read(fd, 65536)
    except (BlockingIOError, InterruptedError):
        return True
    if not chunk:
        return False
    out.add(chunk)
    return True


def finish_output(fd, out, grace):
    """Take what is already in the pipe (and for `grace` seconds more); never wait for EOF.

    Background jobs (`sleep 100 &`) keep the pipe open, so EOF may never come.
    """
    end = time.monotonic() + grace
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            continue
        except InterruptedError:
            continue
        if not chunk:
            break
        out.add(chunk)
    os.close(fd)


def drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def decode_status(status):
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, sig
    return os.WEXITSTATUS(status), None


def process_table():
    """{pid: (ppid, process group)} for every process visible in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2:
            table[int(name)] = (int(fields[1]), int(fields[2]))
    return table


def subtree(table, roots):
    """`roots` (those still alive) and all their descendants."""
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid in roots if pid in table}
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def my_children():
    """This server's children (orphans it adopted included); cheap when the kernel lists them."""
    pid = os.getpid()
    try:
        with open(f"/proc/self/task/{pid}/children", "rb") as f:
            return {int(child) for child in f.read().split()}
    except OSError:
        return {child for child, (ppid, _) in process_table().items() if ppid == pid}


def listen_unix(path):
    """A listening unix socket at `path`, or None if that cannot be had (the host copes)."""
    if not path:
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(4)
    except OSError:
        listener.close()
        return None
    return listener


def peer_pid(conn):
    pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid


def read_token(conn, token, deadline):
    """What followed the token line if the peer sent the right token first, else None."""
    data = b""
    while b"\n" not in data and len(data) < 256:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([conn], [], [], left)[0]:
            return None
        chunk = conn.recv(256)
        if not chunk:
            return None
        data += chunk
    line, _, rest = data.partition(b"\n")
    return rest if line.decode("ascii", "replace") == token else None


def oom_kills():
    """How many processes the kernel's OOM killer has killed in this cgroup (None: unknown)."""
    for path in OOM_COUNTERS:
        try:
            with open(path, "rb") as f:
                for line in f:
                    if line.startswith(b"oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return None


def resident_bytes(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total * resource.getpagesize()


if __name__ == "__main__":
    Server().serve()
