"""Small coding tasks solved by a small local model: LMAgent side by side with other agents on
the same llama.cpp server and model (issue 24).

Each task is a folder of files, an instruction and an automatic checker (and a reference
solution, which the normal test suite uses to check the checker). Each agent gets a fresh copy
of the folder per task, at most STEPS steps and TIMEOUT seconds. Every request goes through
`Meter`, a pass-through that reads the server's own counts from each reply (llama.cpp's
`timings`: prompt_n tokens evaluated, cache_n reused from the cache, predicted_n generated;
`usage` where a server has no timings). Per agent: tasks solved, requests, prompt tokens
evaluated and reused, tokens generated, wall time.

Agents: `lmagent` (this checkout, set up as `--embedded` sets up the default model),
`lmagent-oneshot`, `lmagent-oneshot-unwarmed` and `lmagent-oneshot-before` (`--embedded`
itself, as each task's own process: today's default, which keeps the server loaded from task to
task (EMBEDDED_KEEP_WARM); the same with a new server per task; and a new server per task
without the saved prompt and the n-gram speculation, as before issue 35),
`lmagent-base` (another checkout, e.g. `git worktree add /tmp/small-base 0e4416d`, with its
defaults), `mini-text` and `mini-tool` (mini-swe-agent with its text-based and its tool-call
config), `aider`. Each peer is installed with pip in its own venv under --venvs (made on first
use, reused after).

    python -m bench.bench_tasks --agents lmagent,mini-text --out runs.jsonl   # the comparison
    python -m bench.bench_tasks --table runs.jsonl                            # its table
    python -m bench --only tasks        # RESULTS.md's section, from BENCH_TASKS_RUNS (a .jsonl,
                                        # default bench/tasks_runs.jsonl) and bench/tasks_notes.md

Runs are slow on a CPU (prompt processing at some 40 tokens/s on 2 cores): each finished run
is appended to --out at once, so an interrupted benchmark keeps what it measured, and a new
run with the same --out goes on with what is missing. Agents take turns task by task.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
STEPS = 15
TIMEOUT = 900.0  # seconds per task and agent
N_CTX = 8192  # the window --embedded loads the model with
CACHE_TARGET = 1.2  # prompt tokens evaluated per request at most this many times its new ones
ONESHOT, ONESHOT_BEFORE = "lmagent-oneshot", "lmagent-oneshot-before"  # issue 35's comparison
ONESHOT_UNWARMED = "lmagent-oneshot-unwarmed"  # today's default but the server kept loaded
RUN = [sys.executable]  # how checkers run the programs the agents wrote (host python)


# --------------------------------------------------------------------------- the tasks


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # what it exercises (two-step, read-and-answer, fix-test, multi-file, git, data)
    prompt: str
    files: dict[str, str]
    check: Callable[[Path], bool]
    solve: Callable[[Path], None]  # a reference solution: the checker must accept it
    git: bool = False  # the folder starts as a git repository with one commit


def run_python(folder: Path, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RUN, *args], cwd=folder, capture_output=True, text=True, timeout=timeout, check=False
    )


def output_of(folder: Path, *args: str) -> str | None:
    try:
        done = run_python(folder, *args)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout if done.returncode == 0 else None


def text_of(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=False
    )
    return done.stdout if done.returncode == 0 else ""


def write(folder: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def edit(folder: Path, names: str | tuple[str, ...], old: str, new: str) -> None:
    for name in (names,) if isinstance(names, str) else names:
        path = folder / name
        path.write_text(text_of(path).replace(old, new), encoding="utf-8")


CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_TEST = (
    "from calc import add, mul\n\n"
    "assert add(2, 3) == 5, 'add(2, 3) should be 5'\n"
    "assert mul(4, 5) == 20\n"
    "print('all tests passed')\n"
)
SALES = "item,amount\napple,12.5\npear,7.25\nplum,30\nfig,0.25\n"
PEOPLE = "name,age\nAda,36\nBob,25\nCyd,41\nDee,30\nEve,52\n"
RENAME = {
    "data.py": "def get_data():\n    return [1, 2, 3]\n",
    "report.py": "from data import get_data\n\n\ndef report():\n    return sum(get_data())\n",
    "main.py": "from data import get_data\nfrom report import report\n\n"
    "print(len(get_data()), report())\n",
}
APP = (
    "import argparse\n\n"
    "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('name')\n"
    "args = parser.parse_args()\n"
    "print(f'hello {args.name}')\n"
)
LOG = "".join(f"2026-01-{day:02d} INFO started\n" for day in range(1, 18))
UTILS = 'def is_even(n):\n    """True when n is even."""\n    raise NotImplementedError\n'


def _squares_ok(folder: Path) -> bool:
    wanted = "\n".join(str(n * n) for n in range(1, 11))
    return text_of(folder / "squares.txt").strip() == wanted and (folder / "squares.py").exists()


def _rename_ok(folder: Path) -> bool:
    sources = "".join(text_of(folder / name) for name in RENAME)
    return (
        "get_data" not in sources
        and "def load_data" in text_of(folder / "data.py")
        and (output_of(folder, "main.py") or "").strip() == "3 6"
    )


def _flag_ok(folder: Path) -> bool:
    loud = output_of(folder, "app.py", "Ann", "--shout") or ""
    quiet = output_of(folder, "app.py", "Ann") or ""
    return loud.strip() == "HELLO ANN" and quiet.strip() == "hello Ann"


def _is_even_ok(folder: Path) -> bool:
    probe = "from utils import is_even\nprint([is_even(n) for n in (0, 1, 2, 7, -4)])"
    return (output_of(folder, "-c", probe) or "").strip() == "[True, False, True, False, True]"


def _json_ok(folder: Path) -> bool:
    try:
        data = json.loads(text_of(folder / "settings.json"))
    except ValueError:
        return False
    return data == {"name": "demo", "debug": True, "level": 3}


def _older_ok(folder: Path) -> bool:
    return text_of(folder / "older.txt").split() == ["Ada", "Cyd", "Eve"]


def _git_commit_ok(folder: Path) -> bool:
    return git(
        folder, "log", "-1", "--format=%s"
    ).strip() == "Initial commit" and "README.md" in git(folder, "ls-files")


def _git_branch_ok(folder: Path) -> bool:
    return "notes.txt" in git(folder, "ls-tree", "--name-only", "feature") and (
        "notes.txt" not in git(folder, "ls-tree", "--name-only", "main")
    )


def _version_ok(folder: Path) -> bool:
    """VERSION is "1.1" (either quotes), README says version 1.1, and 1.0 is gone."""
    version = (output_of(folder, "-c", "from version import VERSION; print(VERSION)") or "").strip()
    return (
        version == "1.1"
        and "version 1.1" in text_of(folder / "README.md")
        and "1.0" not in text_of(folder / "version.py") + text_of(folder / "README.md")
    )


def _solve_git_commit(folder: Path) -> None:
    git(folder, "init", "-q")
    git(folder, "add", "README.md")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "Initial commit")


def _solve_git_branch(folder: Path) -> None:
    git(folder, "switch", "-qc", "feature")
    write(folder, {"notes.txt": "notes\n"})
    git(folder, "add", "notes.txt")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "notes")


TASKS = [
    Task(
        "hello",
        "two-step",
        "Create hello.py that prints Hello, world! and run it.",
        {},
        lambda f: (output_of(f, "hello.py") or "").strip() == "Hello, world!",
        lambda f: write(f, {"hello.py": "print('Hello, world!')\n"}),
    ),
    Task(
        "fix-test",
        "fix-test",
        "python3 test_calc.py fails. Fix the bug in calc.py so that it passes "
        "(do not change test_calc.py).",
        {"calc.py": CALC, "test_calc.py": CALC_TEST},
        lambda f: (
            text_of(f / "test_calc.py") == CALC_TEST and output_of(f, "test_calc.py") is not None
        ),
        lambda f: edit(f, "calc.py", "a - b", "a + b"),
    ),
    Task(
        "csv-sum",
        "data",
        "Sum the amount column of sales.csv and write the total to total.txt.",
        {"sales.csv": SALES},
        lambda f: _number(text_of(f / "total.txt")) == 50.0,
        lambda f: write(f, {"total.txt": "50.0\n"}),
    ),
    Task(
        "rename",
        "multi-file",
        "Rename the function get_data to load_data everywhere in this project "
        "(data.py, report.py, main.py); main.py must still run.",
        RENAME,
        _rename_ok,
        lambda f: edit(f, tuple(RENAME), "get_data", "load_data"),
    ),
    Task(
        "git-init",
        "git",
        "Make this folder a git repository and commit README.md with the message 'Initial commit'.",
        {"README.md": "# demo\n"},
        _git_commit_ok,
        _solve_git_commit,
    ),
    Task(
        "cli-flag",
        "edit",
        "Add a --shout flag to app.py: with it, the greeting is printed in upper case "
        "(python3 app.py Ann --shout prints HELLO ANN).",
        {"app.py": APP},
        _flag_ok,
        lambda f: write(
            f,
            {
                "app.py": APP.replace(
                    "args = parser.parse_args()\nprint(f'hello {args.name}')\n",
                    "parser.add_argument('--shout', action='store_true')\n"
                    "args = parser.parse_args()\ntext = f'hello {args.name}'\n"
                    "print(text.upper() if args.shout else text)\n",
                )
            },
        ),
    ),
    Task(
        "read-port",
        "read-and-answer",
        "Which port does config.ini set for the server? Write just the number to answer.txt.",
        {"config.ini": "[client]\nport = 80\n\n[server]\nhost = 0.0.0.0\nport = 8421\n"},
        lambda f: text_of(f / "answer.txt").strip() == "8421",
        lambda f: write(f, {"answer.txt": "8421\n"}),
    ),
    Task(
        "json-flag",
        "edit",
        "Set debug to true in settings.json and keep the other settings as they are.",
        {"settings.json": '{"name": "demo", "debug": false, "level": 3}\n'},
        _json_ok,
        lambda f: write(f, {"settings.json": '{"name": "demo", "debug": true, "level": 3}\n'}),
    ),
    Task(
        "count-lines",
        "read-and-answer",
        "How many lines does logs/app.log have? Write the number to count.txt.",
        {"logs/app.log": LOG},
        lambda f: text_of(f / "count.txt").strip() == "17",
        lambda f: write(f, {"count.txt": "17\n"}),
    ),
    Task(
        "squares",
        "two-step",
        "Write squares.py that writes the squares of 1 to 10, one per line, to squares.txt, "
        "then run it.",
        {},
        _squares_ok,
        lambda f: write(
            f,
            {
                "squares.py": "",
                "squares.txt": "\n".join(str(n * n) for n in range(1, 11)) + "\n",
            },
        ),
    ),
    Task(
        "syntax",
        "fix",
        "broken.py does not run. Fix it so that python3 broken.py prints the total.",
        {"broken.py": "prices = [3, 4, 5]\nfor p in prices\n    print(p)\nprint(sum(prices))\n"},
        lambda f: (output_of(f, "broken.py") or "").strip().endswith("12"),
        lambda f: edit(f, "broken.py", "for p in prices\n", "for p in prices:\n"),
    ),
    Task(
        "version",
        "multi-file",
        "Bump the version from 1.0 to 1.1 in version.py and in README.md.",
        {"version.py": 'VERSION = "1.0"\n', "README.md": "# tool\n\nThis is version 1.0.\n"},
        _version_ok,
        lambda f: edit(f, ("version.py", "README.md"), "1.0", "1.1"),
    ),
    Task(
        "git-branch",
        "git",
        "Create a git branch named feature and commit a new file notes.txt on it "
        "(main stays as it is).",
        {"README.md": "# project\n"},
        _git_branch_ok,
        _solve_git_branch,
        git=True,
    ),
    Task(
        "find-todo",
        "read-and-answer",
        "One of the files in src/ contains a TODO comment. Write that file's name "
        "(like src/x.py) to todo.txt.",
        {
            "src/a.py": "x = 1\n",
            "src/b.py": "def f():\n    return 2\n",
            "src/c.py": "# TODO: handle errors\ny = 3\n",
            "src/d.py": "z = 4\n",
        },
        lambda f: text_of(f / "todo.txt").strip() in ("src/c.py", "c.py", "./src/c.py"),
        lambda f: write(f, {"todo.txt": "src/c.py\n"}),
    ),
    Task(
        "implement",
        "fix-test",
        "Implement is_even in utils.py.",
        {"utils.py": UTILS},
        _is_even_ok,
        lambda f: edit(f, "utils.py", "raise NotImplementedError", "return n % 2 == 0"),
    ),
    Task(
        "csv-filter",
        "data",
        "Write the names of the people in people.csv who are older than 30 to older.txt, "
        "one per line, in the order of the file.",
        {"people.csv": PEOPLE},
        _older_ok,
        lambda f: write(f, {"older.txt": "Ada\nCyd\nEve\n"}),
    ),
]


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def prepare(task: Task, folder: Path) -> None:
    """The task's starting folder (a git repository with one commit on main for git tasks)."""
    write(folder, task.files)
    if task.git:
        git(folder, "init", "-q", "-b", "main")
        git(folder, "add", "-A")
        git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")


# --------------------------------------------------------------------------- the meter


@dataclass
class Request:
    prompt_evaluated: int = 0  # timings.prompt_n (else usage.prompt_tokens)
    prompt_reused: int = 0  # timings.cache_n (else usage's cached tokens)
    generated: int = 0  # timings.predicted_n (else usage.completion_tokens)


def counts_of(reply: bytes) -> Request:
    """The server's counts in a reply: a JSON object or a stream of `data:` events."""
    found = Request()
    text = reply.decode("utf-8", "replace")
    lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    for chunk in lines or [text]:
        with contextlib.suppress(ValueError):
            data = json.loads(chunk)
            if isinstance(data, dict):
                _read_counts(data, found)
    return found


def _read_counts(data: dict, found: Request) -> None:
    timings = data.get("timings")
    if isinstance(timings, dict):
        found.prompt_evaluated = int(timings.get("prompt_n") or 0)
        found.prompt_reused = int(timings.get("cache_n") or 0)
        found.generated = int(timings.get("predicted_n") or 0)
        return
    usage = data.get("usage")
    if isinstance(usage, dict) and not found.generated:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        found.prompt_evaluated = int(usage.get("prompt_tokens") or 0) - int(cached)
        found.prompt_reused = int(cached)
        found.generated = int(usage.get("completion_tokens") or 0)


class Meter:
    """A pass-through to the model server (the real-model tests' recording relay) that counts
    each chat request's tokens."""

    def __init__(self, upstream: str, cold: bool = False):
        from tests.realmodel_fixtures import Relay  # tests/: imports pytest

        self.upstream = upstream.rstrip("/")
        self.relay = Relay(SimpleNamespace(base_url=self.upstream))
        self.counted = 0
        self.cold = cold  # each run begins with nothing of the last one's prompt in the server

    def forget(self) -> None:
        """With `cold`, the server's one slot is left holding a one-word prompt, so the next run
        reuses nothing of the last one's (two LMAgent checkouts in one run shared the opening of
        their prompts, and whoever ran second read 4,193 tokens from the cache, not 2,176);
        the server keeps no other prompts (metered_server's `cold`). Sent past the relay: the
        run's counts leave it out."""
        import requests

        if not self.cold:
            return
        chat = {"messages": [{"role": "user", "content": "cold"}], "max_tokens": 1}
        answer = requests.post(self.upstream + "/v1/chat/completions", json=chat, timeout=300)
        answer.raise_for_status()  # else the run would not begin cold, and say it did

    def server_totals(self, wait: float = 120) -> Request | None:
        """llama.cpp's own totals from its /metrics (prompt tokens evaluated and reused from
        its cache, tokens generated; the replies a client stopped reading early included: a
        reply is counted when the server ends it, so this waits up to `wait` seconds for no
        request to be in progress); None where there are none."""
        deadline = time.monotonic() + wait
        while (values := self._metrics()) and values.get("llamacpp:requests_processing"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if "llamacpp:prompt_tokens_total" not in values:
            return None
        return Request(
            prompt_evaluated=values["llamacpp:prompt_tokens_total"],
            prompt_reused=values.get("llamacpp:prompt_tokens_cached_total", 0),
            generated=values.get("llamacpp:tokens_predicted_total", 0),
        )

    def _metrics(self) -> dict[str, int]:
        import requests

        try:
            reply = requests.get(self.upstream + "/metrics", timeout=30)
        except requests.RequestException:
            return {}
        values = {}
        for line in reply.text.splitlines() if reply.status_code == 200 else []:
            name, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                values[name] = int(float(value))
        return values

    @property
    def base_url(self) -> str:
        return self.relay.base_url

    def take(self) -> list[Request]:
        """The requests counted since the last take."""
        chats = self.relay.chats()
        fresh, self.counted = chats[self.counted :], len(chats)
        return [counts_of(exchange.data) for exchange in fresh]

    def __enter__(self) -> Meter:
        self.relay.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.relay.__exit__(*exc)


def metered_server(model: Path, speculation: str, cold: bool = False):
    """The server --embedded starts (EmbeddedServer: llama.cpp via xllamacpp, N_CTX, 2 threads,
    `speculation`), with llama.cpp's /metrics switched on for Meter.server_totals; with `cold`,
    without llama.cpp's store of earlier prompts in memory (cache_ram_mib 0, for Meter.forget)."""
    from lmagent.llm.embedded import EmbeddedServer

    class MeteredServer(EmbeddedServer):
        def command(self) -> list[str]:
            code = (
                f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                "from bench.bench_tasks import serve_with_metrics; "
                f"serve_with_metrics(sys.argv[1:], cold={cold!r})"
            )
            return [sys.executable, "-c", code, *super().command()[2:]]

    return MeteredServer(model, n_ctx=N_CTX, threads=2, speculation=speculation)


def serve_with_metrics(argv: list[str], cold: bool = False) -> int:
    """lmagent/llm/embedded.py's server process, with `endpoint_metrics` set on its params (and,
    with `cold`, no prompts kept in memory beside the slot's)."""
    import xllamacpp

    from lmagent.llm import embedded

    start = xllamacpp.Server

    def server(params):
        params.endpoint_metrics = True
        if cold:
            params.cache_ram_mib = 0
        return start(params)

    xllamacpp.Server = server
    return embedded.main(argv)


# --------------------------------------------------------------------------- the agents


@dataclass
class Agent:
    name: str
    command: Callable[[Task, Path, str], tuple[list[str], dict]]  # (task, folder, base URL)
    install: Callable[[], None] = lambda: None
    source: Path | None = None  # an LMAgent checkout: its commit is recorded with each run


def lmagent_env(url: str, root: Path, embedded: bool, steps: int = STEPS) -> dict:
    """The environment of an LMAgent run: `embedded` = as --embedded sets the default model up
    (embedded_settings), else the checkout's defaults with --embedded's reply cap."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "LLM_URL": f"{url}/v1/chat/completions",
        "LLM_MODEL": "",
        "MAX_ITERATIONS": str(steps),
        "LLM_MAX_TOKENS": "1024",
        "LLM_TIMEOUT": str(int(TIMEOUT)),
    }
    if embedded:
        env.update(LLM_TEMPERATURE="0", TOOL_SET="compact", TOOL_CALL_MODE="text")
    return env


def lmagent(name: str, root: Path, embedded: bool, steps: int = STEPS) -> Agent:
    def command(task: Task, folder: Path, url: str) -> tuple[list[str], dict]:
        argv = [sys.executable, str(root / "agent_main.py"), "--permission", "auto"]
        argv += ["--no-mcp", "--workspace", str(folder), task.prompt]
        return argv, lmagent_env(url, root, embedded, steps)

    return Agent(name, command, source=root)


def lmagent_oneshot(name: str, cache: Path | None, speculation: str, keep_warm: float) -> Agent:
    """`agent_main.py --embedded` as a user runs it: each task starts its own server, or uses
    the one an earlier task left loaded (`keep_warm` minutes, EMBEDDED_KEEP_WARM). The model's
    cache folder (XDG_CACHE_HOME) is `cache`, where the saved prompt is kept from task to task,
    or with `cache` None one of the task's own (nothing saved from an earlier run, as before
    issue 35); either holds a link to the bundled model, so nothing is fetched."""
    from bench.common import model_cache

    def command(task: Task, folder: Path, url: str) -> tuple[list[str], dict]:
        home = model_cache(cache or folder.parent / "cache")
        argv = [sys.executable, str(ROOT / "agent_main.py"), "--embedded", "--permission", "auto"]
        argv += ["--no-mcp", "--workspace", str(folder), task.prompt]
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "XDG_CACHE_HOME": str(home),
            "EMBEDDED_MODEL": "",
            "EMBEDDED_SPECULATION": speculation,
            "EMBEDDED_KEEP_WARM": str(keep_warm),
            "MAX_ITERATIONS": str(STEPS),
        }
        return argv, env

    return Agent(name, command, source=ROOT)


def pip_venv(venvs: Path, name: str, package: str) -> Callable[[], None]:
    def install() -> None:
        if (venvs / name / "bin" / "python").exists() and (venvs / name / ".installed").exists():
            return
        subprocess.run([sys.executable, "-m", "venv", str(venvs / name)], check=True)
        pip = [str(venvs / name / "bin" / "python"), "-m", "pip", "install", "-q", package]
        subprocess.run(pip, check=True)
        (venvs / name / ".installed").write_text(package)

    return install


def mini(name: str, venvs: Path, text_mode: bool) -> Agent:
    config, model_class = (
        ("mini_textbased.yaml", "litellm_textbased") if text_mode else ("mini.yaml", "litellm")
    )

    def command(task: Task, folder: Path, url: str) -> tuple[list[str], dict]:
        argv = [str(venvs / "mini" / "bin" / "mini"), "-c", config, "--model-class", model_class]
        for setting in (
            f"model.model_kwargs.api_base={url}/v1",
            "model.model_kwargs.api_key=none",
            f"agent.step_limit={STEPS}",
            "agent.cost_limit=0",
        ):
            argv += ["-c", setting]
        argv += ["-m", "openai/embedded", "-t", task.prompt, "-y", "--exit-immediately"]
        argv += ["-o", str(folder.parent / "trajectory.json")]
        env = {**os.environ, "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_CONFIGURED": "true"}
        return argv, env

    return Agent(name, command, pip_venv(venvs, "mini", "mini-swe-agent"))


def aider(venvs: Path) -> Agent:
    def command(task: Task, folder: Path, url: str) -> tuple[list[str], dict]:
        argv = [str(venvs / "aider" / "bin" / "aider"), "--model", "openai/embedded"]
        argv += ["--openai-api-base", f"{url}/v1", "--openai-api-key", "none"]
        argv += ["--yes-always", "--no-check-update", "--no-show-model-warnings", "--no-pretty"]
        argv += ["--no-analytics", "--message", task.prompt, *sorted(task.files)]
        return argv, {**os.environ, "AIDER_ANALYTICS": "false"}

    return Agent("aider", command, pip_venv(venvs, "aider", "aider-chat"))


def agents(venvs: Path, base: Path | None) -> dict[str, Agent]:
    found = {
        "lmagent": lmagent("lmagent", ROOT, embedded=True),
        "mini-text": mini("mini-text", venvs, text_mode=True),
        "mini-tool": mini("mini-tool", venvs, text_mode=False),
        "aider": aider(venvs),
        ONESHOT: lmagent_oneshot(ONESHOT, venvs / "cache", "ngram-simple", 5),
        ONESHOT_UNWARMED: lmagent_oneshot(ONESHOT_UNWARMED, venvs / "cache-0", "ngram-simple", 0),
        ONESHOT_BEFORE: lmagent_oneshot(ONESHOT_BEFORE, None, "none", 0),
    }
    if base is not None:
        found["lmagent-base"] = lmagent("lmagent-base", base, embedded=False)
    return found


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    agent: str
    task: str
    solved: bool
    requests: int
    prompt_evaluated: int
    prompt_reused: int
    generated: int
    seconds: float
    exit: str
    per_request: list = field(default_factory=list)  # [evaluated, reused, generated] each
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    # the replies' own counts, summed (prompt_evaluated and generated are the server's /metrics
    # totals where it has them: they also count the replies a client stopped reading early)
    read_evaluated: int | None = None
    read_generated: int | None = None
    commit: str = ""  # the LMAgent commit measured (blank for a peer)
    cold: bool = False  # begun with the server's prompt cache empty (--cold)


def run_one(
    agent: Agent, task: Task, meter: Meter, timeout: float = TIMEOUT, keep: Path | None = None
) -> Outcome:
    """One agent on one task in a fresh folder; the checker decides. With `keep`, the folder
    as the agent left it is copied to keep/AGENT/TASK (transcripts to read)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{task.name}-") as holder:
        folder = Path(holder) / "work"
        folder.mkdir()
        prepare(task, folder)
        argv, env = agent.command(task, folder, meter.base_url)
        meter.take()
        meter.forget()
        before = meter.server_totals()
        started = time.monotonic()
        exit_text = run_process(argv, env, folder, timeout)
        seconds = time.monotonic() - started
        counted = meter.take()
        after = meter.server_totals()
        read = Request(*(sum(column) for column in zip(*map(astuple, counted), strict=True)))
        server = read
        if before and after:
            evaluated = after.prompt_evaluated - before.prompt_evaluated
            reused = after.prompt_reused - before.prompt_reused
            server = Request(evaluated, reused, after.generated - before.generated)
        solved = bool(task.check(folder))
        remove_sandbox(folder)  # a Docker sandbox persists per workspace: not this one's
        if keep is not None:
            shutil.copytree(folder, keep / agent.name / task.name, symlinks=True)
        return Outcome(
            agent=agent.name,
            task=task.name,
            solved=solved,
            requests=len(counted),
            prompt_evaluated=server.prompt_evaluated,
            prompt_reused=server.prompt_reused,
            generated=server.generated,
            seconds=round(seconds, 1),
            exit=exit_text,
            per_request=[list(astuple(r)) for r in counted],
            read_evaluated=read.prompt_evaluated,
            read_generated=read.generated,
            commit=commit_of(agent.source),
            cold=meter.cold,
        )


def commit_of(source: Path | None) -> str:
    """The commit checked out at `source` (a trailing + when it has changes); blank without."""
    if source is None:
        return ""
    git = ["git", "-C", str(source)]
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "-uno"], capture_output=True, text=True)
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def remove_sandbox(folder: Path) -> None:
    """Remove the Docker sandbox an agent left for `folder` (none without Docker)."""
    with contextlib.suppress(Exception):  # no engine, no package: nothing was started there
        from lmagent.sandbox.docker import remove_containers

        remove_containers(workspace=folder.resolve())


def run_process(argv: list[str], env: dict, folder: Path, timeout: float) -> str:
    """Run an agent to its end or its time limit (its whole process group is stopped)."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            argv,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return f"exit {process.wait(timeout=timeout)}"
        except subprocess.TimeoutExpired:
            return "timed out"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def summary(outcomes: list[Outcome]) -> list[dict]:
    """Per agent: solved, requests, prompt tokens evaluated/reused, generated, wall time."""
    rows = []
    for name in dict.fromkeys(o.agent for o in outcomes):
        mine = [o for o in outcomes if o.agent == name]
        solved = sum(o.solved for o in mine)
        evaluated = sum(o.prompt_evaluated for o in mine)
        rows.append(
            {
                "agent": name,
                "solved": solved,
                "tasks": len(mine),
                "requests": sum(o.requests for o in mine),
                "prompt_evaluated": evaluated,
                "prompt_reused": sum(o.prompt_reused for o in mine),
                "generated": sum(o.generated for o in mine),
                "seconds": round(sum(o.seconds for o in mine)),
                "evaluated_per_solved": round(evaluated / solved) if solved else None,
                "cache_ok": _share(cache_ratios(mine), CACHE_TARGET),
            }
        )
    return rows


def new_and_evaluated(outcomes: list[Outcome]) -> tuple[int, int]:
    """Over every request after a run's first: (new tokens, prompt tokens evaluated)."""
    new = evaluated = 0
    for outcome in outcomes:
        for before, now in itertools.pairwise(outcome.per_request):
            new += max(0, sum(now[:2]) - sum(before))
            evaluated += now[0]
    return new, evaluated


def cache_ratios(outcomes: list[Outcome]) -> list[float]:
    """Per request after a run's first: prompt tokens evaluated / new tokens, where the new
    tokens are what the request added to the last one's prompt and reply (both already in the
    server's cache when requests extend each other). 1.0 = only the new tokens were evaluated."""
    ratios = []
    for outcome in outcomes:
        for before, now in itertools.pairwise(outcome.per_request):
            new = sum(now[:2]) - sum(before)
            if new > 0:
                ratios.append(now[0] / new)
    return ratios


def _share(ratios: list[float], limit: float) -> str:
    if not ratios:
        return "—"
    return f"{sum(r <= limit for r in ratios)} / {len(ratios)}"


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| agent | solved | requests | prompt tokens evaluated / reused | generated | "
        f"evaluated per solved task | requests evaluating ≤ {CACHE_TARGET} × their new tokens | "
        "wall time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in summary(outcomes):
        per = f"{row['evaluated_per_solved']:,}" if row["evaluated_per_solved"] else "—"
        lines.append(
            f"| {row['agent']} | {row['solved']} / {row['tasks']} | {row['requests']} | "
            f"{row['prompt_evaluated']:,} / {row['prompt_reused']:,} | {row['generated']:,} | "
            f"{per} | {row['cache_ok']} | {row['seconds']:,} s |"
        )
    return "\n".join([*lines, "", marks_table(outcomes)])


def marks_table(outcomes: list[Outcome], header: str = "task") -> str:
    """A row per task, a column per agent: solved or not, and the time it took."""
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    names = list(dict.fromkeys(o.agent for o in outcomes))
    lines = [f"| {header} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for task in tasks:
        marks = []
        for name in names:
            found = [o for o in outcomes if o.agent == name and o.task == task]
            marks.append(_mark(found[0]) if found else "not run")
        lines.append(f"| {task} | " + " | ".join(marks) + " |")
    return "\n".join(lines)


def _mark(outcome: Outcome) -> str:
    return f"{'solved' if outcome.solved else '—'} ({outcome.seconds:.0f} s)"


def load(path: Path) -> list[Outcome]:
    """The runs recorded in `path`; a row that is not one (another tool's) raises, naming it."""
    outcomes = []
    for number, line in enumerate(text_of(path).splitlines(), 1):
        try:
            outcomes.append(Outcome(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a recorded run: {exc}") from None
    return outcomes


# --------------------------------------------------------------------------- entry points


def run() -> dict:
    """For `python -m bench`: the figures of the runs recorded in BENCH_TASKS_RUNS."""
    from bench.common import at_most, figure, result

    path = Path(os.environ.get("BENCH_TASKS_RUNS", ROOT / "bench" / "tasks_runs.jsonl"))
    outcomes = load(path)
    if not outcomes:
        raise RuntimeError(f"no runs recorded in {path}: python -m bench.bench_tasks --out {path}")
    figures = [
        figure(f"{row['agent']}: tasks solved", row["solved"], f"of {row['tasks']}")
        for row in summary(outcomes)
    ]
    figures.append(solved_share(outcomes))
    figures += versus_peers(outcomes)
    ours = [o for o in outcomes if o.agent == "lmagent" and o.per_request]
    if ours:
        first = max(sum(o.per_request[0][:2]) for o in ours)
        figures.append(at_most("lmagent: largest first request", first, "tokens", 1200))
        new, evaluated = new_and_evaluated(ours)
        if new:
            ratio = round(evaluated / new, 2)
            name = "lmagent: prompt tokens evaluated / new"
            figures.append(at_most(name, ratio, "", CACHE_TARGET))
        ratios = cache_ratios(ours)
        within = sum(r <= CACHE_TARGET for r in ratios)
        figures.append(
            figure(
                f"lmagent: requests evaluating ≤ {CACHE_TARGET} × their new tokens",
                round(100 * within / len(ratios)) if ratios else 0,
                "%",
            )
        )
    oneshot = load(
        Path(os.environ.get("BENCH_ONESHOT_RUNS", ROOT / "bench" / "oneshot_runs.jsonl"))
    )
    figures += oneshot_figures(oneshot)
    notes = f"{table(outcomes)}\n\nRecorded runs: {len(outcomes)} ({_dates(outcomes)})."
    if oneshot:
        notes += (
            "\n\nOne-shot `--embedded` runs, each task its own process and server (or the one "
            "kept warm), not through the relay, so requests and tokens are not counted (0 "
            f"below):\n\n{table(oneshot)}"
        )
    context = text_of(ROOT / "bench" / "tasks_notes.md").strip()  # how they were run
    notes = f"{context}\n\n{notes}" if context else notes
    return result("tasks", figures, notes, "small coding tasks, agents side by side")


def solved_share(outcomes: list[Outcome]) -> dict:
    """Issue 24's target: LMAgent solves at least 80 % of all the benchmark's tasks (a task not
    run counts as not solved)."""
    from bench.common import figure

    solved = {o.task for o in outcomes if o.agent == "lmagent" and o.solved}
    share = round(100 * len(solved) / len(TASKS))
    return figure("lmagent: share of all tasks solved", share, "%", "≥ 80 %", share >= 80)


def oneshot_figures(outcomes: list[Outcome]) -> list[dict]:
    """Issue 35's target for one-shot `--embedded` runs (lmagent_oneshot): wall time per task
    solved, the saved prompt and speculation against neither, at most half."""
    from bench.common import at_most, figure

    figures, per = [], {}
    for name in (ONESHOT, ONESHOT_BEFORE):
        runs = [o for o in outcomes if o.agent == name]
        solved = sum(o.solved for o in runs)
        if not solved:
            return []
        per[name] = sum(o.seconds for o in runs) / solved
        label = f"{name}: wall time per task solved ({solved} of {len(runs)})"
        figures.append(figure(label, round(per[name], 1), "s"))
    ratio = round(per[ONESHOT] / per[ONESHOT_BEFORE], 2)
    name = f"{ONESHOT} / {ONESHOT_BEFORE}: wall time per task solved"
    return [*figures, at_most(name, ratio, "×", 0.5), same_tasks_figure(outcomes)]


def same_tasks_figure(outcomes: list[Outcome]) -> dict:
    """Wall time of ONESHOT against ONESHOT_BEFORE on the tasks both solved (the issue's
    "with the same tasks solved")."""
    from bench.common import figure

    seconds: dict[str, dict[str, float]] = {ONESHOT: {}, ONESHOT_BEFORE: {}}
    for outcome in outcomes:
        if outcome.agent in seconds and outcome.solved:
            seconds[outcome.agent][outcome.task] = outcome.seconds
    both = seconds[ONESHOT].keys() & seconds[ONESHOT_BEFORE].keys()
    ours, before = (sum(seconds[name][task] for task in both) for name in seconds)
    name = f"{ONESHOT} / {ONESHOT_BEFORE}: wall time on the {len(both)} tasks both solved"
    return figure(name, round(ours / before, 2) if before else 0.0, "×")


def versus_peers(outcomes: list[Outcome]) -> list[dict]:
    """Issue 24's other targets, per peer, on the tasks both ran: LMAgent solves more, and
    evaluates fewer prompt tokens per task solved."""
    from bench.common import figure

    ours = {o.task: o for o in outcomes if o.agent == "lmagent"}
    figures = []
    for peer in dict.fromkeys(o.agent for o in outcomes if o.agent != "lmagent"):
        theirs = {o.task: o for o in outcomes if o.agent == peer and o.task in ours}
        if not theirs:
            continue
        mine = [ours[task] for task in theirs]
        solved = (sum(o.solved for o in mine), sum(o.solved for o in theirs.values()))
        figures.append(
            figure(
                f"lmagent vs {peer}: solved on the {len(theirs)} tasks both ran",
                f"{solved[0]} vs {solved[1]}",
                "",
                "more",
                solved[0] > solved[1],
            )
        )
        per = [_per_solved(mine), _per_solved(list(theirs.values()))]
        shown = " vs ".join("—" if value is None else f"{value:,}" for value in per)
        fewer = per[0] is not None and (per[1] is None or per[0] < per[1])
        name = f"lmagent vs {peer}: prompt tokens evaluated per task solved"
        figures.append(figure(name, shown, "", "fewer", fewer))
    return figures


def _per_solved(outcomes: list[Outcome]) -> int | None:
    solved = sum(o.solved for o in outcomes)
    return round(sum(o.prompt_evaluated for o in outcomes) / solved) if solved else None


def _dates(outcomes: list[Outcome]) -> str:
    dates = sorted(o.date for o in outcomes)
    return f"{dates[0]} to {dates[-1]}" if dates else "none"


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The server's options: speculation, and --cold."""
    from lmagent.core.config import SPECULATION_TYPES

    default = SPECULATION_TYPES[0]
    parser.add_argument("--speculation", default=default, help=f"the server's (default: {default})")
    parser.add_argument(
        "--cold", action="store_true", help="each run begins with the server's prompt cache empty"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="lmagent,mini-text,lmagent-base,aider,mini-tool")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default all)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "tasks_runs.jsonl")
    parser.add_argument("--table", type=Path, help="print the table of a runs file and exit")
    parser.add_argument("--model", default="", help="a .gguf (default: --embedded's model)")
    parser.add_argument("--base", type=Path, help="a checkout of the LMAgent to compare with")
    parser.add_argument("--venvs", type=Path, default=Path(tempfile.gettempdir()) / "lmbench")
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--keep", type=Path, help="copy each task's folder here when it ends")
    add_server_options(parser)
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl+C: the running agent's process group and the server are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.table:
        print(table(load(args.table)))
        return 0
    from lmagent.llm.embedded import resolve_model, stop_warm_servers

    chosen = [t for t in TASKS if not args.tasks or t.name in args.tasks.split(",")]
    known = agents(args.venvs, args.base)
    for name in args.agents.split(","):
        known[name].install()
    done = {(o.agent, o.task) for o in load(args.out)}  # a run cut short goes on from there
    server = metered_server(resolve_model(args.model, print), args.speculation, args.cold)
    with server.start(print), Meter(server.base_url, args.cold) as meter:
        try:
            for task in chosen:  # task by task: a benchmark cut short compares the same tasks
                for name in args.agents.split(","):
                    if (name, task.name) in done:
                        continue
                    outcome = run_one(known[name], task, meter, args.timeout, args.keep)
                    with args.out.open("a", encoding="utf-8") as out:
                        out.write(json.dumps(outcome.__dict__) + "\n")
                    print(json.dumps(outcome.__dict__), flush=True)
        finally:
            stop_warm_servers(args.venvs / "cache" / "lmagent" / "warm")  # lmagent-oneshot's
    print(table(load(args.out)))
    return 0


if __name__ == "__main__":
    shutil.which("git") or sys.exit("git is needed for the git tasks")
    sys.exit(main())
