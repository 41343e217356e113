"""Start-up time: `python agent_main.py --version` and the installed `lmagent --version` against a
bare `python -c pass`, same run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.common import ROOT, at_most, figure, median, result, time_call

RUNS = 10
TARGET_S = 0.3


def wall_times(command: list[str], runs: int) -> list[float]:
    """Seconds per run of `command`."""
    return [
        time_call(lambda: subprocess.run(command, cwd=ROOT, capture_output=True))[0]
        for _ in range(runs)
    ]


def slowest_imports(top: int = 6) -> str:
    """The heaviest top-level imports of `--version` by cumulative time (-X importtime);
    `site`, which a bare interpreter imports too, is left out."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "agent_main.py", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match and len(match.group(3)) == 1 and match.group(4) != "site":
            rows.append((int(match.group(2)), match.group(4)))
    rows.sort(reverse=True)
    return ", ".join(f"{name} {micros / 1000:.1f} ms" for micros, name in rows[:top])


def installed_command() -> list[str]:
    """The `lmagent` console script beside this interpreter (`pip install -r requirements.txt`
    puts it there); not a shell shim in front of it, which would add its own start-up."""
    script = Path(sys.executable).parent / "lmagent"
    if not script.is_file():
        raise RuntimeError(f"{script} is missing: pip install -r requirements.txt first")
    return [str(script), "--version"]


def run() -> dict:
    agent = [sys.executable, "agent_main.py", "--version"]
    bare = [sys.executable, "-c", "pass"]
    command = installed_command()
    check = subprocess.run(agent, cwd=ROOT, capture_output=True, text=True)
    if check.returncode != 0 or "lmagent" not in check.stdout:
        raise RuntimeError(f"--version failed: {check.stdout!r} {check.stderr!r}")
    agent_times, bare_times, command_times = [], [], []
    for _ in range(RUNS):  # alternate so all see the same machine state
        bare_times += wall_times(bare, 1)
        agent_times += wall_times(agent, 1)
        command_times += wall_times(command, 1)
    agent_s, bare_s = median(agent_times), median(bare_times)
    figures = [
        at_most("`agent_main.py --version`, median", agent_s, "s", TARGET_S),
        at_most(
            "`lmagent --version` (the installed command), median",
            median(command_times),
            "s",
            TARGET_S,
        ),
        figure("`python -c pass`, median", bare_s, "s"),
        figure("added by the agent's imports", agent_s - bare_s, "s"),
    ]
    notes = (
        f"Median of {RUNS} runs each, alternating, output captured. "
        f"Heaviest top-level imports of `--version` (-X importtime): {slowest_imports()}."
    )
    return result("startup", figures, notes, title="`--version` start-up time")
