"""Marginal cost per step of the real loop for read, write, edit and shell, on workspaces of 1,
10,000 and 100,000 files, with an instant scripted server (issue 26).

Each figure is (a 25-step run − a 5-step run) / 20, the median of REPS pairs: what one more step
costs in wall time, the tool included (a shell step is `echo N > out.txt`, a changing step).
Beside it, the checkpoint's own share: the median time of the recorder's bracket per step (the
snapshot before, the snapshot after, the change list and the diff). read, write and edit never
touch the sandbox, so they run once (bwrap configured); shell runs on bwrap and on Docker.

mini-swe-agent, installed into its own virtual environment (MINI_SWE_AGENT_PYTHON, or a venv
made under a temporary directory), runs the same shell steps against the same kind of server
as the reference: its marginal step is measured the same way.

Settings (environment): BENCH_STEPS_SIZES (default "1,10000,100000"), BENCH_STEPS_TOOLS
(default "read,write,edit,shell"), BENCH_STEPS_BACKENDS (default "bwrap,docker"),
BENCH_STEPS_REPS (default 3). BENCH_STEPS_BASE names a checkout of an older commit: the same
benchmark then runs first against its code (sizes BENCH_STEPS_BASE_SIZES, default "1,10000"),
in the same run, and its figures are listed as "before" (the recorder's interface is the same).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    at_most,
    figure,
    make_config,
    median,
    result,
    scripted_server_process,
    temp_workspace,
)
from tests.scripted_llm import call, text, tool_calls

LONG, SHORT = 25, 5
TASK = re.compile(r"steps=(\d+) tool=(\w+)")
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def setting(name: str, default: str) -> list[str]:
    return [part for part in os.environ.get(name, default).split(",") if part]


# --------------------------------------------------------------------------- the scripted server


def turn(raw: bytes) -> dict:
    """The instant server's reply (raw request bytes) for the agent's runs."""
    return reply(json.loads(raw))


def reply(body: dict) -> dict:
    """The next reply for a run whose task says `steps=N tool=T`: N calls of T, then done
    (mini-swe-agent's runs end with its submit command)."""
    found = TASK.search(json.dumps(body["messages"]))
    steps, tool = int(found.group(1)), found.group(2)
    done = sum(1 for m in body["messages"] if m.get("role") == "tool")
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    if tool == "mini":
        command = f"echo {done} > out.txt" if done < steps else MINI_SUBMIT
        return {**tool_calls(call("bash", {"command": command})), "usage": usage}
    if done >= steps:
        return {**text("Done.\nTASK_COMPLETE"), "usage": usage}
    return {**tool_calls(call(tool, arguments(tool, done))), "usage": usage}


def arguments(tool: str, n: int) -> dict:
    if tool == "read":
        return {"path": "notes.txt", "offset": 1 + n, "limit": 1}
    if tool == "write":
        return {"path": "out.txt", "content": f"step {n}\n"}
    if tool == "edit":
        return {"path": "edit.txt", "search": f"value {n}", "replace": f"value {n + 1}"}
    return {"command": f"echo {n} > out.txt"}


# --------------------------------------------------------------------------- workspaces


def make_workspace(root: Path, files: int) -> None:
    (root / "notes.txt").write_text("".join(f"line {n}\n" for n in range(100)))
    folders = max(1, files // 100)
    for d in range(folders if files > 1 else 0):
        folder = root / f"pkg{d:04}"
        folder.mkdir()
        for f in range(100):
            (folder / f"module{f:03}.py").write_text(f"VALUE = {d * 1000 + f}\n" * 20)


def timed_run(config, tool: str, steps: int, bracket: list[float]) -> float:
    """Wall seconds of one run of `steps` calls; the recorder's bracket times go to `bracket`."""
    from lmagent.checkpoints import recorder as recorder_module
    from lmagent.loop.run import run_agent

    (config.workspace / "edit.txt").write_text("value 0\n")
    cls = recorder_module.StepRecorder
    plain_before, plain_after = cls.before, cls.after

    def before(self, tool_name):
        start = time.perf_counter()
        try:
            return plain_before(self, tool_name)
        finally:
            self._bench_spent = time.perf_counter() - start

    def after(self, snapshot, tool_name, call_id):
        start = time.perf_counter()
        try:
            return plain_after(self, snapshot, tool_name, call_id)
        finally:
            spent = getattr(self, "_bench_spent", 0.0) + time.perf_counter() - start
            bracket.append(spent)

    cls.before, cls.after = before, after
    try:
        start = time.perf_counter()
        outcome = run_agent(config, f"steps={steps} tool={tool}", sink=lambda event: None)
        spent = time.perf_counter() - start
    finally:
        cls.before, cls.after = plain_before, plain_after
    if outcome.status != "completed":
        raise RuntimeError(f"{tool} run ended {outcome.status}")
    return spent


def marginal(config, tool: str, reps: int) -> tuple[float, float]:
    """(marginal ms per step, median checkpoint bracket ms per step) over `reps` pairs."""
    margins, brackets = [], []
    for _ in range(reps):
        short = timed_run(config, tool, SHORT, [])
        long_bracket: list[float] = []
        long = timed_run(config, tool, LONG, long_bracket)
        margins.append((long - short) / (LONG - SHORT) * 1000)
        brackets += long_bracket[1:]  # the first includes the run's start-up look
    return median(margins), (median(brackets) * 1000 if brackets else 0.0)


# --------------------------------------------------------------------------- mini-swe-agent

MINI_RUNNER = """
import sys, time, yaml
from pathlib import Path
import minisweagent
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel
url, workspace, task = sys.argv[1:4]
config = yaml.safe_load((Path(minisweagent.__file__).parent / "config/default.yaml").read_text())
model = LitellmModel(model_name="openai/instant", cost_tracking="ignore_errors",
                     model_kwargs={"api_base": url.rsplit("/chat/completions", 1)[0],
                                   "api_key": "none"})
def agent():
    return DefaultAgent(model, LocalEnvironment(cwd=workspace), **config["agent"])
agent().run("steps=1 tool=mini")  # warms litellm up (its first call loads much)
start = time.perf_counter()
agent().run(task)
print(time.perf_counter() - start)
"""


def mini_python() -> str | None:
    """A python with mini-swe-agent installed (made once under the temporary directory)."""
    given = os.environ.get("MINI_SWE_AGENT_PYTHON")
    if given:
        return given
    venv = Path(tempfile.gettempdir()) / "lmagent-bench-mini-swe-agent"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        install = [str(python), "-m", "pip", "install", "-q", "mini-swe-agent"]
        if subprocess.run(install, capture_output=True).returncode != 0:
            return None
    return str(python)


def mini_marginal(python: str, url: str, workspace: Path, reps: int) -> float:
    env = {**os.environ, "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_SILENT_STARTUP": "1"}
    margins = []
    for _ in range(reps):
        seconds = {}
        for steps in (SHORT, LONG):
            done = subprocess.run(
                [python, "-c", MINI_RUNNER, url, str(workspace), f"steps={steps} tool=mini"],
                capture_output=True, text=True, env=env, timeout=600, check=True,
            )  # fmt: skip
            seconds[steps] = float(done.stdout.strip().splitlines()[-1])
        margins.append((seconds[LONG] - seconds[SHORT]) / (LONG - SHORT) * 1000)
    return median(margins)


# --------------------------------------------------------------------------- the benchmark


TARGETS_MS = {1: 5, 10_000: 10, 100_000: 30}  # a changing step's checkpoint work (issue 26)
METHOD = (
    "A step figure is (25-step run - 5-step run) / 20 in wall time, the tool included, median "
    'of the repetitions; a "checkpoints" figure is the wall time of the recorder\'s bracket '
    "around one changing step (snapshot before, snapshot after, change list, diff), median over "
    "the long runs' steps after the first. read, write and edit do not use the sandbox. With a "
    "load average several times the 2 cores, wall times are several times CPU times: compare "
    "figures of one run only. Workspaces: folders of 100 files of 20 lines."
)


def run() -> dict:
    sizes = [int(s) for s in setting("BENCH_STEPS_SIZES", "1,10000,100000")]
    tools = setting("BENCH_STEPS_TOOLS", "read,write,edit,shell")
    backends = setting("BENCH_STEPS_BACKENDS", "bwrap,docker")
    reps = int(os.environ.get("BENCH_STEPS_REPS", "3"))
    figures, notes = before_figures()
    with scripted_server_process("bench.bench_steps:turn", instant=True) as url:
        for size in sizes:
            with temp_workspace("lmagent-bench-steps-") as root:
                made = time.perf_counter()
                make_workspace(root, size)
                made = time.perf_counter() - made
                first = timed_run(make_config(root, url), "write", 1, [])
                notes.append(f"{size:,} files made in {made:.1f} s, first run (cold) {first:.1f} s")
                figures += size_figures(root, url, size, tools, backends, reps)
        if os.environ.get("BENCH_STEPS_MINI", "1") == "1":
            figures += mini_figures(reps)
    title = "marginal cost per step, by tool and workspace size"
    return result("steps", figures, f"{METHOD} {'; '.join(notes)}.", title)


def size_figures(root: Path, url: str, size: int, tools, backends, reps) -> list[dict]:
    found = []
    for tool in tools:
        for backend in backends if tool == "shell" else backends[:1]:
            config = make_config(root, url, sandbox_backend=backend)
            step_ms, bracket_ms = marginal(config, tool, reps)
            where = f"{size:,} files" + (f", {backend}" if tool == "shell" else "")
            found.append(figure(f"{tool} step, {where}", round(step_ms, 1), "ms"))
            if tool != "read":
                name = f"{tool} step's checkpoints, {where}"
                limit = TARGETS_MS.get(size)
                value = round(bracket_ms, 1)
                found.append(at_most(name, value, "ms", limit) if limit else figure(name, value))
    return found


def before_figures() -> tuple[list[dict], list[str]]:
    """The same benchmark on the older checkout BENCH_STEPS_BASE (none when unset)."""
    base = os.environ.get("BENCH_STEPS_BASE")
    if not base:
        return [], []
    shutil.copy(__file__, Path(base) / "bench" / "bench_steps.py")
    name = ["git", "-C", base, "rev-parse", "--short", "HEAD"]
    commit = subprocess.run(name, capture_output=True, text=True, check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != "BENCH_STEPS_BASE"}
    env.update(
        PYTHONPATH=base,
        BENCH_STEPS_MINI="0",
        BENCH_STEPS_SIZES=os.environ.get("BENCH_STEPS_BASE_SIZES", "1,10000"),
    )
    code = "import json; from bench import bench_steps; print(json.dumps(bench_steps.run()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=base, env=env, capture_output=True, text=True,
        timeout=3600, check=True,
    )  # fmt: skip
    found = json.loads(done.stdout.splitlines()[-1])
    figures = [
        {**f, "name": f"before ({commit}): {f['name'].strip()}", "target": None, "met": None}
        for f in found["figures"]
    ]
    return figures, [f"Before ({commit}): {found['notes'].replace(METHOD, '').strip()}"]


def mini_figures(reps: int) -> list[dict]:
    python = mini_python()
    if python is None:
        return []
    server = scripted_server_process("bench.bench_steps:reply")  # it answers whole replies too
    with server as url, temp_workspace("lmagent-bench-steps-mini-") as root:
        make_workspace(root, 1)
        value = mini_marginal(python, url, root, reps)
    return [figure("mini-swe-agent shell step, 1 file (reference)", round(value, 1), "ms")]
