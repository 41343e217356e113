"""Exercism's Python practice exercises (exercism/python, MIT), the set aider's own benchmark
uses, solved by a small local model: LMAgent side by side with aider on one llama.cpp server.

Fixed samples (every EVERY-th active practice exercise in sorted order, from the first, and
held-out ones from the third and the second, named with the snapshot's commit in
bench/exercism/manifest.json) are kept under bench/exercism/, so runs need no network. The
held-out samples are for measuring on exercises nobody tuned the agent on: their transcripts
are not read before they are run.

Per exercise and agent: a fresh folder with the stub and the tests, the instructions in
the task message as aider's benchmark gives them, at most STEPS steps and --timeout seconds;
solved = the original tests (restored, in case the agent edited them) pass
with pytest in a fresh process.

Tokens are counted twice: by the relay bench_tasks.Meter (the timings of every reply a client
read to its end) and by llama.cpp's /metrics before and after each run (everything the server
evaluated and generated, the replies a client stopped reading early included). The table
gives the server's totals.

Agents: `lmagent-defaults` (a user with their own server: LLM_URL set, nothing else but the
step cap), `lmagent-embedded` (the settings --embedded gives the default model, without a
second server), `aider` (--auto-test with the tests as --test-cmd, the stub in the chat, its
defaults otherwise), `mini-text` (mini-swe-agent, text mode). Peers are installed with pip
in their own venvs under --venvs.

    python -m bench.bench_exercism --agents lmagent-embedded,lmagent-defaults,aider
    python -m bench.bench_exercism --table bench/exercism_runs.jsonl
    python -m bench.bench_exercism --vendor GIT_DIR [--sample 2]   # a sample, from a clone
    python -m bench --only exercism                   # RESULTS.md's section from the runs file

Each finished run is appended to --out at once; a new run with the same --out goes on with
what is missing. Agents take turns exercise by exercise, so the machine's load meets all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench import bench_tasks

ROOT = bench_tasks.ROOT
EXERCISES = ROOT / "bench" / "exercism"
MANIFEST = EXERCISES / "manifest.json"
RUNS = ROOT / "bench" / "exercism_runs.jsonl"
EVERY = 4  # a sample: every 4th active practice exercise in sorted order
STARTS = {
    0: "the first",
    1: "the second (held out)",
    2: "the third (held out)",
    3: "the fourth (held out)",
}  # where each sample starts
STEPS = bench_tasks.STEPS
TIMEOUT = 600.0  # seconds per exercise and agent
DOCS = ("introduction.md", "instructions.md", "instructions.append.md")  # aider's order
CHECK_TIMEOUT = 120  # seconds for the tests of one solution


# --------------------------------------------------------------------------- the exercises


@dataclass(frozen=True)
class Exercise:
    slug: str
    instructions: str
    solutions: tuple[str, ...]  # the stub files the agent is to complete
    tests: tuple[str, ...]
    files: dict[str, str]  # the starting folder: stubs, tests and any helper files
    examples: dict[str, str]  # exercism's reference solution, per stub file

    @property
    def test_command(self) -> str:
        return "python -m pytest -q " + " ".join(shlex.quote(name) for name in self.tests)

    def prompt(self) -> str:
        """The instructions with aider's benchmark's addendum, and where the tests are."""
        stubs = " ".join(self.solutions)
        return (
            f"{self.instructions.strip()}\n\n####\n\n"
            f"Use the above instructions to modify the supplied files: {stubs}\n"
            "Don't change the names of existing functions or classes, as they may be referenced "
            "from other code like unit tests, etc.\n"
            "Only use standard python libraries, don't suggest installing any packages.\n"
            f"The tests are in {' '.join(self.tests)}; `{self.test_command}` runs them. "
            "The tests are correct, don't change them."
        )


def manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def load_exercise(slug: str) -> Exercise:
    folder = EXERCISES / slug
    files = json.loads((folder / ".meta" / "config.json").read_text(encoding="utf-8"))["files"]
    docs = [folder / ".docs" / name for name in DOCS]
    names = [*files["solution"], *files["test"], *files.get("editor", [])]
    return Exercise(
        slug=slug,
        instructions="\n\n".join(p.read_text(encoding="utf-8") for p in docs if p.is_file()),
        solutions=tuple(files["solution"]),
        tests=tuple(files["test"]),
        files={name: (folder / name).read_text(encoding="utf-8") for name in names},
        examples={
            name: (folder / example).read_text(encoding="utf-8")
            for name, example in zip(files["solution"], files["example"], strict=False)
        },
    )


def exercises(sample: int | None = None) -> list[Exercise]:
    """The exercises of every sample, or of the one starting at `sample`."""
    samples = manifest()["samples"]
    chosen = [s for s in samples if sample is None or s["start"] == sample]
    if not chosen:
        known = ", ".join(str(s["start"]) for s in samples)
        raise SystemExit(f"no sample starts at {sample}; vendored: {known}")
    return [load_exercise(slug) for s in chosen for slug in s["slugs"]]


def solved(exercise: Exercise, folder: Path) -> bool:
    """The original tests pass against the folder's solution: the test and helper files are
    restored first, and pytest runs in a fresh process that reads no conftest.py or ini file
    an agent may have written."""
    for name in set(exercise.files) - set(exercise.solutions):
        bench_tasks.write(folder, {name: exercise.files[name]})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest"]
    command += ["-c", os.devnull, "--rootdir", str(folder), *exercise.tests]
    try:
        done = subprocess.run(
            command, cwd=folder, capture_output=True, timeout=CHECK_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def as_task(exercise: Exercise) -> bench_tasks.Task:
    """The exercise as bench_tasks runs a task: its folder, message, checker and solution."""
    return bench_tasks.Task(
        name=exercise.slug,
        kind="exercism",
        prompt=exercise.prompt(),
        files=exercise.files,
        check=partial(solved, exercise),
        solve=partial(bench_tasks.write, files=exercise.examples),
    )


def vendor(git_dir: Path, start: int = 0, commit: str = "HEAD") -> list[str]:
    """Add the sample starting at `start` to bench/exercism/ from a clone of exercism/python:
    its instructions, stubs, tests, helper files, reference solutions and config, and the
    manifest naming them beside the samples already there (all from one commit)."""
    commit = _git(git_dir, "rev-parse", commit).strip()
    record = manifest() if MANIFEST.is_file() else {"commit": commit, "samples": []}
    if record["commit"] != commit:
        raise SystemExit(f"the vendored samples are from {record['commit']}, not {commit}")
    track = json.loads(_git(git_dir, "show", f"{commit}:config.json"))
    active = sorted(
        e["slug"] for e in track["exercises"]["practice"] if e.get("status") != "deprecated"
    )
    slugs, left_out = [], []
    for slug in active[start::EVERY]:
        _vendor_exercise(git_dir, commit, slug)
        if start and _stub_passes(load_exercise(slug)):  # (a refactoring exercise) measures nothing
            shutil.rmtree(EXERCISES / slug)
            left_out.append(slug)
        else:
            slugs.append(slug)
    (EXERCISES / "LICENSE").write_text(_git(git_dir, "show", f"{commit}:LICENSE"))
    sample = {
        "start": start,
        "sample": f"every {EVERY}th active (not deprecated) practice exercise in sorted order, "
        f"from {STARTS.get(start, f'number {start + 1}')}: {len(slugs)} of {len(active)}"
        + (f" ({', '.join(left_out)} left out: the stub passes its tests)" if left_out else ""),
        "slugs": slugs,
    }
    samples = [s for s in record["samples"] if s["start"] != start] + [sample]
    record = {
        "source": "exercism/python (MIT), exercises/practice",
        "commit": commit,
        "samples": sorted(samples, key=lambda s: s["start"]),
    }
    MANIFEST.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return slugs


def _stub_passes(exercise: Exercise) -> bool:
    with tempfile.TemporaryDirectory() as folder:
        bench_tasks.write(Path(folder), exercise.files)
        return solved(exercise, Path(folder))


def _vendor_exercise(git_dir: Path, commit: str, slug: str) -> None:
    base = f"exercises/practice/{slug}"
    config = json.loads(_git(git_dir, "show", f"{commit}:{base}/.meta/config.json"))
    files = config["files"]
    names = [".meta/config.json", *(f".docs/{name}" for name in DOCS)]
    names += [*files["solution"], *files["test"], *files.get("editor", []), *files["example"]]
    for name in names:
        found = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{base}/{name}"],
            capture_output=True,
            check=False,
        )
        if found.returncode == 0:
            (EXERCISES / slug / name).parent.mkdir(parents=True, exist_ok=True)
            (EXERCISES / slug / name).write_bytes(found.stdout)


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    ).stdout


# --------------------------------------------------------------------------- the agents


def lmagent_defaults(name: str = "lmagent-defaults", root: Path = ROOT) -> bench_tasks.Agent:
    """LMAgent (the checkout at `root`) as a user with their own server runs it: LLM_URL, and
    the benchmark's step cap."""
    embedded = bench_tasks.lmagent(name, root, embedded=True)

    def command(task: bench_tasks.Task, folder: Path, url: str) -> tuple[list[str], dict]:
        argv, _ = embedded.command(task, folder, url)
        env = {**os.environ, "PYTHONPATH": str(root), "LLM_URL": f"{url}/v1/chat/completions"}
        return argv, {**env, "MAX_ITERATIONS": str(STEPS)}

    return bench_tasks.Agent(name, command, source=root)


def aider(venvs: Path) -> bench_tasks.Agent:
    """aider with the stub in its chat and the tests as its --auto-test command (it reads their
    output after each edit, as aider's benchmark gives it), its defaults otherwise."""
    base = bench_tasks.aider(venvs)

    def command(task: bench_tasks.Task, folder: Path, url: str) -> tuple[list[str], dict]:
        argv, env = base.command(task, folder, url)
        exercise = load_exercise(task.name)
        argv = argv[: argv.index("--message")]
        argv += ["--auto-test", "--test-cmd", exercise.test_command]
        return [*argv, "--message", task.prompt, *exercise.solutions], env

    return bench_tasks.Agent("aider", command, base.install)


def agents(venvs: Path, base: Path | None = None) -> dict[str, bench_tasks.Agent]:
    found = {
        "lmagent-defaults": lmagent_defaults(),
        "lmagent-embedded": bench_tasks.lmagent("lmagent-embedded", ROOT, embedded=True),
        "aider": aider(venvs),
        "mini-text": bench_tasks.mini("mini-text", venvs, text_mode=True),
    }
    if base is not None:  # another checkout, run as lmagent-defaults runs this one
        found["lmagent-base"] = lmagent_defaults("lmagent-base", base)
    return found


# --------------------------------------------------------------------------- the results


def table(outcomes: list[bench_tasks.Outcome]) -> str:
    """Per agent: solved, requests, the server's prompt tokens evaluated / reused, generated,
    what the replies read to their end say of them, wall time; then a row per exercise."""
    lines = [
        "| agent | solved | % | requests | prompt tokens evaluated / reused | generated | "
        "of them in replies read to the end (evaluated / generated) | wall time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in bench_tasks.summary(outcomes):
        mine = [o for o in outcomes if o.agent == row["agent"]]
        read = [sum(o.read_evaluated or 0 for o in mine), sum(o.read_generated or 0 for o in mine)]
        lines.append(
            f"| {row['agent']} | {row['solved']} / {row['tasks']} | "
            f"{100 * row['solved'] / row['tasks']:.0f} % | {row['requests']} | "
            f"{row['prompt_evaluated']:,} / {row['prompt_reused']:,} | {row['generated']:,} | "
            f"{read[0]:,} / {read[1]:,} | {row['seconds']:,} s |"
        )
    return "\n".join([*lines, "", bench_tasks.marks_table(outcomes, "exercise")])


def run() -> dict:
    """For `python -m bench`: the figures of the runs recorded in BENCH_EXERCISM_RUNS."""
    from bench.common import figure, result

    path = Path(os.environ.get("BENCH_EXERCISM_RUNS", RUNS))
    outcomes = bench_tasks.load(path)
    if not outcomes:
        raise RuntimeError(f"no runs recorded in {path}: python -m bench.bench_exercism")
    figures = []
    for row in bench_tasks.summary(outcomes):
        share = round(100 * row["solved"] / row["tasks"])
        figures.append(figure(f"{row['agent']}: exercises solved", share, f"% of {row['tasks']}"))
    record = manifest()
    samples = "; ".join(s["sample"] for s in record["samples"])
    notes = (
        f"Samples: {samples}; exercism/python at {record['commit'][:12]} "
        f"(bench/exercism/manifest.json).\n\n{table(outcomes)}\n\n"
        f"Recorded runs: {len(outcomes)} ({bench_tasks._dates(outcomes)}), in {path.name}."
    )
    context = bench_tasks.text_of(ROOT / "bench" / "exercism_notes.md").strip()
    notes = f"{context}\n\n{notes}" if context else notes
    return result("exercism", figures, notes, "Exercism's Python exercises, agents side by side")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="lmagent-embedded,lmagent-defaults,aider")
    parser.add_argument("--exercises", default="", help="comma-separated slugs (default all)")
    parser.add_argument("--out", type=Path, default=RUNS)
    parser.add_argument("--table", type=Path, help="print the table of a runs file and exit")
    parser.add_argument("--vendor", type=Path, help="add a sample to bench/exercism/ from a clone")
    parser.add_argument("--sample", type=int, help="the sample starting here (default: all)")
    parser.add_argument("--model", default="", help="a .gguf (default: --embedded's model)")
    parser.add_argument("--venvs", type=Path, default=Path(tempfile.gettempdir()) / "lmbench")
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--keep", type=Path, help="copy each exercise's folder here when it ends")
    parser.add_argument("--base", type=Path, help="a checkout of the LMAgent to compare with")
    bench_tasks.add_server_options(parser)
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl+C: the running agent's process group and the server are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.table:
        print(table(bench_tasks.load(args.table)))
        return 0
    if args.vendor:
        print(" ".join(vendor(args.vendor, args.sample or 0)))
        return 0
    from lmagent.llm.embedded import resolve_model

    wanted = set(filter(None, args.exercises.split(",")))
    chosen = [e for e in exercises(args.sample) if not wanted or e.slug in wanted]
    names = args.agents.split(",")
    known = agents(args.venvs, args.base)
    for name in names:
        known[name].install()
    done = {(o.agent, o.task) for o in bench_tasks.load(args.out)}  # goes on from there
    model = resolve_model(args.model, print)
    server = bench_tasks.metered_server(model, args.speculation, args.cold)
    with server.start(print), bench_tasks.Meter(server.base_url, args.cold) as meter:
        for number, exercise in enumerate(chosen):
            turn = number % len(names)  # who goes first changes from exercise to exercise
            for name in names[turn:] + names[:turn]:
                if (name, exercise.slug) in done:
                    continue
                task = as_task(exercise)
                outcome = bench_tasks.run_one(known[name], task, meter, args.timeout, args.keep)
                with args.out.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(outcome.__dict__) + "\n")
                print(json.dumps(outcome.__dict__), flush=True)
    print(table(bench_tasks.load(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
