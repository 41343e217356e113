"""The syscall filter of every sandbox: one denied set, compiled once with libseccomp.

Sandboxed commands get no-new-privileges plus a seccomp filter that refuses what a coding task
never needs and kernel exploits (and attacks on the runner) use: tracing other processes,
mounting, new namespaces, BPF, userfaultfd, io_uring, keyrings, memfd_secret, module and kexec
loading, personality flags (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...), and a few more (after
Docker's default profile). bwrap loads the program with `--seccomp FD`; in the
Docker container the runner installs the same program on itself at start-up (filters stack on
Docker's own profile, which on Docker 20.10 still lets io_uring_setup through).

The program is built by libseccomp (libseccomp.so.2, present wherever apt is), through a thin
ctypes binding of three calls; nothing here assembles BPF by hand.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform

from lmagent.sandbox.base import SandboxUnavailable

# Refused with EPERM. Names the running kernel's architecture lacks are skipped.
DENIED_SYSCALLS = (
    # reading or steering other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel attack surface a coding task never needs
    "bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "lookup_dcookie", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "memfd_secret",
    # file systems and namespaces
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "fsopen", "fsmount",
    "fsconfig", "fspick", "open_tree", "mount_setattr", "unshare", "setns",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "create_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "uselib", "nfsservctl",
    "vhangup",
)  # fmt: skip
# Refused with ENOSYS, so the C library falls back to an older call the filter can inspect
# (clone3 passes its flags in memory, out of a filter's reach).
UNSUPPORTED_SYSCALLS = ("clone3",)
# clone with any of these flags (new namespaces) is refused with EPERM; plain clone (fork,
# threads) passes.
CLONE_NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# personality is allowed only these values, as in Docker's default profile: Linux, 32-bit Linux
# (setarch i386), either with UNAME26, and the query 0xffffffff. Others set flags such as
# READ_IMPLIES_EXEC (every readable page executable) or ADDR_NO_RANDOMIZE: refused with EPERM.
PERSONALITY_ALLOWED = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
PERSONALITY_SAFE_BITS = 0x20008
# Other ABIs the same CPU runs (a 32-bit binary would otherwise go around the filter's rules).
EXTRA_ARCHES = {"x86_64": (b"x86", b"x32"), "aarch64": (b"arm",)}

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


class ScmpArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The compiled filter (struct sock_filter[]) for this machine's architecture."""
    lib = libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SandboxUnavailable("libseccomp could not start a filter")
    try:
        for arch in EXTRA_ARCHES.get(platform.machine(), ()):
            token = lib.seccomp_arch_resolve_name(arch)
            if token:
                lib.seccomp_arch_add(ctx, token)  # fails harmlessly where the kernel lacks it
        for name in DENIED_SYSCALLS:
            add_rule(lib, ctx, act_errno(errno.EPERM), name)
        for name in UNSUPPORTED_SYSCALLS:
            add_rule(lib, ctx, act_errno(errno.ENOSYS), name)
        for flag in CLONE_NAMESPACE_FLAGS.values():  # clone's flags are its first argument
            has_flag = ScmpArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag)
            add_rule(lib, ctx, act_errno(errno.EPERM), "clone", has_flag)
        for refused in personality_refusals():
            add_rule(lib, ctx, act_errno(errno.EPERM), "personality", refused)
        return export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)


def personality_refusals() -> list[ScmpArgCmp]:
    """Masked comparisons that together match every personality but PERSONALITY_ALLOWED.

    A refused value has a bit outside the safe bits set and (not being the query) some bit
    clear. One rule per bit c matches "c clear, next(c) set", where next walks the 30 unsafe
    bits in a cycle and leads the two safe bits into it. Walking the cycle from a clear unsafe
    bit reaches a set one, so some step goes from clear to set; if every unsafe bit is set, a
    safe bit is clear and its rule matches. The allowed values have no unsafe bit set, or no
    bit clear, so no rule matches them. The masks hold only the low 32 bits: the kernel reads
    the argument as an unsigned int, so junk above them changes nothing for either side.
    """
    bits = [1 << n for n in range(32)]
    unsafe = [bit for bit in bits if not bit & PERSONALITY_SAFE_BITS]
    next_of = dict(zip(unsafe, unsafe[1:] + unsafe[:1], strict=True))
    steps = [(bit, next_of.get(bit, unsafe[0])) for bit in bits]
    return [ScmpArgCmp(0, SCMP_CMP_MASKED_EQ, clear | then, then) for clear, then in steps]


def add_rule(lib, ctx, action: int, name: str, *compare: ScmpArgCmp) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:  # not a syscall on this architecture
        return
    args = (ScmpArgCmp * len(compare))(*compare)
    rc = lib.seccomp_rule_add_array(ctx, action, number, len(compare), args)
    if rc < 0:
        raise SandboxUnavailable(f"libseccomp refused the rule for {name}: {os.strerror(-rc)}")


def export(lib, ctx) -> bytes:
    read_end, write_end = os.pipe()
    try:
        rc = lib.seccomp_export_bpf(ctx, write_end)
        os.close(write_end)
        write_end = -1
        if rc < 0:
            raise SandboxUnavailable(f"libseccomp could not export the filter: {os.strerror(-rc)}")
        program = b""
        while chunk := os.read(read_end, 65536):
            program += chunk
        return program
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@functools.lru_cache(maxsize=1)
def libseccomp():
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise SandboxUnavailable(
            "libseccomp is missing (the sandbox's syscall filter needs it): "
            "sudo apt-get install libseccomp2"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ScmpArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib
