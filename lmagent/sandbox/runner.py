"""Command server that runs inside LMAgent's sandbox (container, bwrap or bare process group).

sandboxed_shell.py starts it once per sandbox with ``python3 -c <this file>`` and keeps talking to
it over stdin/stdout, so a command costs one fork instead of a fresh ``docker exec``.

Protocol. The host writes one JSON object per line on stdin:
  {"op": "hello", "home", "gitconfig", "gitignore": [name, text], "workspace", "max_procs",
   "max_rss_mb", "direct"?}
                          -> {"op": "ready", "pid", "uid", "direct": bool, "workspace": [dev, ino]}
  {"op": "run", "id", "cmd", "cwd", "env", "timeout", "mem_mb", "max_rss_mb", "cap"}
  {"op": "kill", "id"}                                               (stop the running command)
  {"op": "rest"}  -> {"op": "rested"}   (between runs: end the waiting shell and leftovers)
  {"op": "jobs", "path", "token", "max_running"}  -> {"op": "jobs", "ok"}  (start the job server)
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
command starts stays in its process tree, and when the command ends, normally or by timeout or
stop, everything it left running (double-forked and setsid ones included) is killed before the
answer goes out. With `max_procs`/`max_rss_mb` a watchdog also kills runaway processes
(a fork bomb's detached children, say), during a command and between commands.
Background processes are the job server's (`JobServer`, forked on "jobs"): it listens on the
given unix socket for the host, runs each process under a keeper of its own (`keep_command`, a
subreaper that kills what its command leaves behind) and is spared by the sweeps. When the host
goes away, the runner kills everything it started, job server included; on Docker a new runner
first kills what a runner that died left behind (`reap_orphans`). The Docker container's PID 1
is this file too (`keep_container`, run by the host as another uid than commands): under the
filter, not dumpable, reaping orphans; under bwrap the runner itself is PID 1 (`--as-pid-1`).
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
PR_SET_NAME = 15
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RUNNER_NAME = b"lmagent-runner"  # what the runner is called in /proc
JOBS_NAME = b"lmagent-jobs"  # ... the job server
KEEPER_NAME = b"lmagent-keeper"  # ... a background process's keeper
INIT_NAME = b"lmagent-init"  # ... the Docker container's PID 1 (keep_container)
KILL_PATIENCE = 5.0  # seconds a kill sweeps for stragglers at most
WATCH_INTERVAL = 0.05  # seconds between watchdog checks
IDLE_LOOK = 10.0  # seconds between the Docker keeper's looks for a runner
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
        self.jobs_pid = None  # the job server (background processes), a child of this server
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            libc.prctl(PR_SET_NAME, RUNNER_NAME, 0, 0, 0)
            # not dumpable: commands (same uid) cannot read its memory or descriptors in /proc
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
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
        """Answer requests until the host goes away; then nothing this runner started lives on."""
        self.idle_watch = Watchdog()
        try:
            while True:
                if not self.request_pending(self.idle_watch):
                    continue
                req = self.read_request(block=True)
                if req is None:
                    return
                self.answer(req)
        finally:
            self.kill_processes(my_children(), set())

    def answer(self, req):
        op = req.get("op")
        if op == "hello":
            self.hello(req)
        elif op == "run":
            self.run(req)
        elif op == "jobs":
            self.start_jobs(req)
        elif op == "ping":
            self.send({"op": "pong"})
        elif op == "rest":
            self.rest()

    def hello(self, req):
        write_home(req)
        if req.get("reap_orphans"):
            reap_orphans(self.reap)
        self.limits = {"max_procs": req.get("max_procs"), "max_rss_mb": req.get("max_rss_mb")}
        self.idle_watch = Watchdog(**self.limits)
        direct = req.get("direct") or {}
        listener = listen_unix(direct.get("path"))
        ready = {"op": "ready", "pid": os.getpid(), "uid": os.getuid(), "direct": bool(listener)}
        ready["workspace"] = identity(req.get("workspace"))
        if req.get("seccomp"):
            ready["seccomp"] = install_filter(bytes.fromhex(req["seccomp"]))
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
        keep = self.keep()
        killed = self.kill_processes(my_children() - keep, keep)
        why = "too many processes" if reason == "procs" else "memory limit exceeded"
        if killed:
            self.notice = f"sandbox: {killed} leftover process(es) killed: {why}\n"

    # --- processes -----------------------------------------------------------------------------
    def reap(self):
        if self.jobs_pid in reap_all(self.statuses):
            self.jobs_pid = None
            # its keepers, adopted by this subreaper, would otherwise run on unwatched
            left = my_children() & keepers()
            if left:
                self.kill_processes(left, my_children() - left)

    def start_jobs(self, req):
        """Fork the job server, listening on req["path"] for the host (one at a time). The
        runner listens itself, so the socket's peer pid is the runner's: the host checks it."""
        if self.jobs_pid:
            self.kill_processes({self.jobs_pid}, my_children() - {self.jobs_pid})
        listener = listen_unix(req.get("path"))
        if listener is None:
            return self.send({"op": "jobs", "ok": False, "error": "cannot listen on the socket"})
        pid = os.fork()
        if pid == 0:
            run_job_server(listener, req, self.limits.get("max_procs"))
        listener.close()
        self.jobs_pid = pid
        self.send({"op": "jobs", "ok": True})

    def kill_processes(self, roots, keep):
        """SIGKILL `roots` and all they started (see kill_trees); returns how many."""
        return kill_trees(roots, keep, self.reap)

    def keep(self):
        """Children that are no command's leftovers: the waiting shell and the job server."""
        return {pid for pid in (self.warm and self.warm.pid, self.jobs_pid) if pid}

    def sweep(self):
        """Kill whatever the last command left running (double-forked and setsid ones too)."""
        keep = self.keep()
        leftovers = my_children() - keep
        if leftovers:
            self.kill_processes(leftovers, keep)

    def rest(self):
        """Between runs: end the waiting shell (a command could have written its memory; it
        might have left its process group) and all else but the job server; the next command
        starts a fresh shell."""
        if self.warm is not None:
            self.warm.discard()
            self.warm = None
        self.sweep()
        self.send({"op": "rested"})

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
        self.sweep()
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
                self.kill_processes(my_children() - self.keep(), self.keep())
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


def install_filter(program):
    """no-new-privileges plus the host's seccomp program (struct sock_filter[]) on this process
    and all it starts; True, or why not."""

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))
    fprog = Fprog(len(program) // 8, ctypes.addressof(code))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "no-new-privileges: " + os.strerror(ctypes.get_errno())
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return "seccomp: " + os.strerror(ctypes.get_errno())
    return True


def reap_orphans(reap):
    """Docker: kill what a runner that died (killed -9, say) left behind in the container.

    Its processes were adopted by the container's init (PID 1, `keep_container`), which starts
    nothing itself: every child it has is an orphan. (Runners are started by Docker from
    outside the container, so none is a child of init.)
    """
    orphans = set(init_children()) - {os.getpid()}
    if orphans:
        kill_trees(orphans, set(my_children()), reap)


def init_children():
    """The pids of the children of PID 1."""
    return {pid for pid, f in proc_stats() if len(f) > 1 and f[1] == b"1"}


def keep_container(program, idle_after):
    """Docker: the container's PID 1, started by the host as another uid than every command (so
    no command can signal it or write its memory), not dumpable and under the syscall filter;
    it reaps the orphans it adopts until Docker stops it (SIGTERM), or until it has been alone
    in the container for `idle_after` seconds (0: never), when it exits and the container stops
    (the host starts it again on its next use). Never returns."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, INIT_NAME, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    installed = install_filter(program)
    if installed is not True:
        sys.exit(f"{INIT_NAME.decode()}: {installed}")
    wanted = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)  # taken by sigwait, never by a handler
    alone_since = time.monotonic()
    while True:
        reap_all({})
        if not alone():
            alone_since = time.monotonic()
        elif idle_after and time.monotonic() - alone_since >= idle_after:
            sys.exit(0)
        got = signal.sigtimedwait(wanted, min(IDLE_LOOK, idle_after or IDLE_LOOK))
        if got is not None and got.si_signo != signal.SIGCHLD:
            sys.exit(0)


def alone():
    """Whether this is the only live process in sight (the container's init, with no runner)."""
    return all(pid == os.getpid() or f[0] in (b"Z", b"X") for pid, f in proc_stats() if f)


# --- background processes ----------------------------------------------------------------------
HEAD_KEEP = 4096  # bytes kept from the start of a background process's output
TAIL_KEEP = 16384  # ... and from its end (the full output goes to its log file)
LOG_LIMIT = 16 * 1024 * 1024  # bytes of output written to the log file at most
JOB_POLL = 0.1  # seconds between looks at the host, the jobs and the watchdog


def run_job_server(listener, req, max_procs):
    """In the forked child: serve the background processes, then exit (never returns)."""
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        close_fds_except({2, listener.fileno()})
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_NAME, JOBS_NAME, 0, 0, 0)
        conn = accept_host(listener, req)
        if conn is not None:
            JobServer(conn, req, max_procs).serve()
    finally:
        os._exit(0)


def close_fds_except(keep):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep and fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def accept_host(listener, req):
    """The host's connection, proved by the token (None after 10 s without one)."""
    deadline = time.monotonic() + 10
    try:
        while select.select([listener], [], [], max(deadline - time.monotonic(), 0))[0]:
            conn = listener.accept()[0]
            rest = read_token(conn, req["token"], deadline)
            if rest is not None:
                return conn
            conn.close()
        return None
    finally:
        listener.close()
        try:
            os.unlink(req["path"])
        except OSError:
            pass


class Job:
    """One background process: its keeper's pid, stdin, output (head, tail, log) and status."""

    def __init__(self, req):
        self.id, self.command, self.log_path = req["id"], req["cmd"], req["log"]
        self.started = time.time()
        self.exit_code = None
        self.running = True
        self.head, self.tail, self.total, self.logged = bytearray(), bytearray(), 0, 0
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self.log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stdin_r, self.stdin_w = os.pipe()
        self.out_r, out_w = os.pipe()
        try:
            self.pid = fork_keeper(req, stdin_r, out_w)
        finally:
            os.close(stdin_r)
            os.close(out_w)
        os.set_blocking(self.out_r, False)
        os.set_blocking(self.stdin_w, False)

    def pump(self):
        """Take what the process wrote; at end of output close the pipe."""
        try:
            chunk = os.read(self.out_r, 262144)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            os.close(self.out_r)
            self.out_r = None
            os.close(self.log)
            return
        self.total += len(chunk)
        room = HEAD_KEEP - len(self.head)
        self.head += chunk[: max(room, 0)]
        self.tail += chunk[max(room, 0) :]
        if len(self.tail) > 2 * TAIL_KEEP:
            del self.tail[: len(self.tail) - TAIL_KEEP]
        self.write_log(chunk)

    def write_log(self, chunk):
        if self.logged < LOG_LIMIT:
            part = chunk[: LOG_LIMIT - self.logged]
            self.logged += len(part)
            note = b"\n[log cut: over %d bytes of output]\n" % LOG_LIMIT
            write_all(self.log, part + (note if self.logged >= LOG_LIMIT else b""))

    def read(self, since):
        """(output from byte `since` on as far as kept, bytes not kept in between)."""
        since = max(0, min(int(since), self.total))
        data = bytes(self.head[since:])
        position = max(since, len(self.head))
        tail_start = self.total - len(self.tail)
        skipped = max(0, tail_start - position)
        data += bytes(self.tail[max(position, tail_start) - tail_start :])
        return data, skipped

    def ended(self, status):
        self.exit_code, _ = decode_status(status)
        self.running = False
        if self.stdin_w is not None:
            os.close(self.stdin_w)
            self.stdin_w = None

    def describe(self):
        info = {"process_id": self.id, "command": self.command, "running": self.running}
        info.update(exit_code=self.exit_code, started=self.started, log=self.log_path)
        info.update(output_bytes=self.total)
        return info


def fork_keeper(req, stdin_r, out_w):
    """Fork the keeper of one background command; returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 127
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, KEEPER_NAME, 0, 0, 0)
        os.setsid()
        close_fds_except({2, stdin_r, out_w})
        code = keep_command(req, stdin_r, out_w)
    finally:
        os._exit(code)


def keepers():
    """The pids of every keeper in the sandbox, by their name."""
    found = set()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/comm", "rb") as f:
                if f.read().strip() == KEEPER_NAME:
                    found.add(int(name))
        except (OSError, ValueError):
            continue
    return found


def keep_command(req, stdin_r, out_w):
    """The keeper: a subreaper that runs the command and, once it ends, kills what it left.

    Returns the exit code (128 + signal if it was killed).
    """
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    script_r, script_w = os.pipe()
    env, cwd = req.get("env") or {}, req.get("cwd") or None
    pid = spawn_shell(script_r, out_w, env, cwd, stdin=stdin_r)
    os.close(script_r)
    os.close(stdin_r)
    os.close(out_w)
    set_limits(pid, req.get("mem_mb"))
    os.write(script_w, req["cmd"].encode("utf-8", "replace") + b"\n")
    os.close(script_w)
    statuses = {}
    while pid not in statuses:
        try:
            child, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        statuses[child] = status
    kill_trees(my_children(), set(), lambda: reap_all(statuses))
    exit_code, _ = decode_status(statuses.get(pid))
    return 255 if exit_code is None else exit_code


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data) :]


def reap_all(statuses):
    """Collect the wait status of every exited child into `statuses`; returns their pids."""
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        statuses[pid] = status
        reaped.append(pid)


class JobServer:
    """Background processes, one keeper each; a child of the runner talking to the host over
    its own socket. When the host goes away or the runner dies, every job goes too."""

    def __init__(self, conn, req, max_procs):
        self.conn, self.inbuf = conn, bytearray()
        self.jobs = {}
        self.statuses = {}
        self.parent = os.getppid()
        self.max_running = int(req.get("max_running") or 4)
        self.watch = Watchdog(max_procs)

    def serve(self):
        self.conn.sendall(b'{"ok": true, "pid": %d}\n' % os.getpid())  # the token was right
        try:
            while os.getppid() == self.parent:
                pipes = [job.out_r for job in self.jobs.values() if job.out_r is not None]
                ready = select.select([self.conn, *pipes], [], [], JOB_POLL)[0]
                self.pump(ready)
                if self.conn in ready and not self.answer_requests():
                    return
                if self.watch.check():
                    self.stop(self.running(), 0)
        finally:
            self.stop(self.running(), 1.0)

    def running(self):
        return [job for job in self.jobs.values() if job.running]

    def pump(self, ready=None):
        for job in self.jobs.values():
            if job.out_r is not None and (ready is None or job.out_r in ready):
                job.pump()
        reap_all(self.statuses)
        for job in self.running():
            if job.pid in self.statuses:
                job.ended(self.statuses.pop(job.pid))

    def answer_requests(self):
        """Answer every complete request line; False once the host has gone."""
        chunk = self.conn.recv(65536)
        if not chunk:
            return False
        self.inbuf += chunk
        while b"\n" in self.inbuf:
            line, _, rest = bytes(self.inbuf).partition(b"\n")
            self.inbuf = bytearray(rest)
            try:
                answer = self.answer(json.loads(line))
            except (ValueError, KeyError, TypeError, OSError) as exc:
                answer = {"ok": False, "error": f"bad request: {exc}"}
            self.conn.sendall(json.dumps(answer).encode() + b"\n")
        return True

    def answer(self, req):
        op = req.get("op")
        if op == "start":
            return self.start(req)
        if op == "list":
            return {"ok": True, "processes": [job.describe() for job in self.jobs.values()]}
        if op == "kill":
            return self.kill(req.get("ids") or [], float(req.get("grace") or 0))
        job = self.jobs.get(req.get("id"))
        if job is None:
            return {"ok": False, "error": f"no process {req.get('id')!r}"}
        if op == "output":
            data, skipped = job.read(req.get("since") or 0)
            text = data.decode("utf-8", "replace")
            return dict(job.describe(), ok=True, output=text, skipped=skipped, next=job.total)
        if op == "input":
            return self.give_input(job, req.get("text") or "")
        return {"ok": False, "error": f"unknown op {op!r}"}

    def start(self, req):
        """Start a job unless max_running run already in the sandbox (other agents' count: on
        Docker every agent on the workspace shares one container)."""
        own = {job.pid for job in self.running()}
        if len(own | keepers()) >= self.max_running:
            return {"ok": False, "error": "limit", "limit": self.max_running}
        job = Job(req)
        self.jobs[job.id] = job
        return dict(job.describe(), ok=True)

    def kill(self, ids, grace):
        """Stop the jobs `ids` together; their descriptions."""
        if not set(ids) <= set(self.jobs):
            return {"ok": False, "error": f"no process {sorted(set(ids) - set(self.jobs))!r}"}
        self.stop([self.jobs[i] for i in ids], grace)
        return {"ok": True, "processes": [self.jobs[i].describe() for i in ids]}

    def give_input(self, job, text):
        if job.stdin_w is None:
            return {"ok": False, "error": "finished", "exit_code": job.exit_code}
        data = text.encode("utf-8", "replace")
        try:
            written = os.write(job.stdin_w, data)
        except BlockingIOError:
            written = 0
        except BrokenPipeError:
            return {"ok": False, "error": "closed"}
        if written < len(data):
            return {"ok": False, "error": "full", "written": written}
        return {"ok": True, "written": written}

    def stop(self, jobs, grace):
        """SIGTERM the jobs' processes; after `grace` seconds SIGKILL what is left."""
        jobs = [job for job in jobs if job.running]
        keepers = {job.pid for job in jobs}
        for pid in subtree(process_table(), keepers) - keepers:
            signal_quietly(pid, signal.SIGTERM)
        give_up = time.monotonic() + grace
        while any(job.running for job in jobs) and time.monotonic() < give_up:
            time.sleep(0.02)
            self.pump()
        keep = {job.pid for job in self.running()} - keepers
        kill_trees(keepers, keep, lambda: reap_all(self.statuses))
        while any(job.running for job in jobs):
            time.sleep(0.005)
            self.pump()


def spawn_shell(script_r, out_w, env, cwd, stdin=subprocess.DEVNULL, attempts=40):
    """Start `bash -c '. /dev/fd/N'` in a new session (stdin: /dev/null unless given).

    subprocess uses vfork here (no preexec_fn), much cheaper than fork() of the server.
    A full process table (right after a fork bomb was killed, say) is waited out for a while.
    """
    for attempt in range(attempts):
        try:
            proc = subprocess.Popen(
                [SHELL, "-c", f". /dev/fd/{script_r}"],
                stdin=stdin,
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
        name, text = req.get("gitignore") or (None, "")
        if name:
            with open(os.path.join(home, os.path.basename(name)), "w") as f:
                f.write(text)
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
    return {pid: (int(f[1]), int(f[2])) for pid, f in proc_stats() if len(f) > 2}


def proc_stats():
    """(pid, the fields of /proc/PID/stat after the command name) of each visible process."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        yield int(name), stat[stat.rfind(b")") + 2 :].split()


def kill_trees(roots, keep, reap):
    """SIGKILL `roots`, their descendants and their process groups; returns how many.

    Sweeps until nothing is left (a fork bomb forks between two looks at /proc), for at most
    KILL_PATIENCE seconds. Orphans this process adopts meanwhile (it is a subreaper) join
    `roots` unless they are in `keep`.
    """
    own, own_group = {os.getpid()}, os.getpgrp()
    killed = set()
    give_up = time.monotonic() + KILL_PATIENCE
    while time.monotonic() < give_up:
        table = process_table()
        victims = subtree(table, roots) - own
        if not victims:
            break
        for group in {table[pid][1] for pid in victims if pid in table} - {own_group}:
            signal_quietly(-group, signal.SIGKILL)
        for pid in victims:
            signal_quietly(pid, signal.SIGKILL)
        killed |= victims
        time.sleep(0.005)
        reap()
        roots = roots | (my_children() - keep)
    return len(killed)


def signal_quietly(pid, sig):
    """os.kill, for a process (or -group) that may be gone already."""
    try:
        os.kill(pid, sig)
    except OSError:
        pass


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
        at_unix_path(listener.bind, path)
        listener.listen(4)
    except OSError:
        listener.close()
        return None
    return listener


def at_unix_path(operation, path):
    """operation(path) for a socket's bind or connect, also for a path too long for a unix
    socket address (108 bytes): then through /proc/self/fd/N of its directory. The host's side
    (sandbox/base.py) uses this one too."""
    if len(os.fsencode(path)) < 100:
        return operation(path)
    directory = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        return operation(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
    finally:
        os.close(directory)


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
    if sys.argv[1:2] == ["keep-container"]:
        keep_container(bytes.fromhex(sys.argv[2]), float(sys.argv[3]))
    Server().serve()
