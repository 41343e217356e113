"""The grep tool against GNU `grep -rn` on the same 50,000-file tree, in the same run.

The tree holds small source files of several languages in nested packages, some binary files
(with NUL bytes), and a `.git` directory of compressed objects. Both searches run with a warm
page cache, alternating, and the medians are compared.
"""

from __future__ import annotations

import random
import resource
import shutil
import subprocess
import zlib

from bench.common import (
    WORDS,
    at_most,
    figure,
    make_config,
    median,
    result,
    temp_workspace,
    time_call,
)
from lmagent.core.workspace import Workspace
from lmagent.sessions.store import Session
from lmagent.tools.registry import Services, ToolContext
from lmagent.tools.toolset import build_toolset

FILES = 50_000
BINARY_SHARE = 0.02
GIT_OBJECTS = 2_000
RUNS = 5
TARGET_RATIO = 1.5
RARE = "lmagent_bench_needle"  # planted in a few files; the same regex for grep and Python
COMMON = "return"  # in most files: the tool stops at its result cap

EXTENSIONS = ("py", "py", "py", "js", "ts", "go", "rs", "md", "txt", "json")


def snippets(rng: random.Random, count: int = 3000) -> list[str]:
    """Lines of source-like text to assemble files from."""
    shapes = (
        "def {a}_{b}(self, {c}):",
        "    {a} = self.{b}.get('{c}', None)",
        "    if not {a}:",
        "        raise ValueError('{b} {c} missing')",
        "    return {{'{a}': {b}, '{c}': len({a})}}",
        "# {a} the {b} before the {c} is sent",
        "const {a}{B} = await {b}.{c}();",
        "func ({a} *{B}) {C}() error {{",
        "    for _, {a} := range {b}.{c} {{",
        "",
    )
    out = []
    for _ in range(count):
        a, b, c = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
        out.append(rng.choice(shapes).format(a=a, b=b, c=c, B=b.title(), C=c.title()))
    return out


def build_tree(root, rng: random.Random) -> int:
    """Write the tree; returns how many files hold the rare pattern."""
    lines = snippets(rng)
    needles = set(rng.sample(range(FILES), 7))
    per_dir = 25
    for index in range(FILES):
        top, sub = divmod(index // per_dir, 40)
        directory = root / f"pkg{top:02d}" / f"mod{sub:02d}"
        if index % per_dir == 0:
            directory.mkdir(parents=True, exist_ok=True)
        if rng.random() < BINARY_SHARE:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1000, 20000)))
            (directory / f"asset{index}.bin").write_bytes(b"\x89PNG\x00" + data)
            continue
        count = min(int(60 * rng.lognormvariate(0, 0.7)), 600)
        body = [rng.choice(lines) for _ in range(count)]
        if index in needles:
            body.insert(rng.randint(0, count), f"    # TODO {RARE}: check this")
        ext = rng.choice(EXTENSIONS)
        (directory / f"file{index}.{ext}").write_text("\n".join(body) + "\n", encoding="utf-8")
    git = root / ".git" / "objects"
    for index in range(GIT_OBJECTS):
        folder = git / f"{index % 256:02x}"
        folder.mkdir(parents=True, exist_ok=True)
        blob = "\n".join(rng.choice(lines) for _ in range(80)).encode()
        (folder / f"{index:038x}").write_bytes(zlib.compress(blob))
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return len(needles)


def grep_command(pattern: str, exclude_git: bool, cap: bool) -> list[str]:
    command = ["grep", "-rn", *(["--exclude-dir=.git"] if exclude_git else []), pattern, "."]
    if cap:  # what a capped search costs: grep stops when head has its 200 lines
        return ["sh", "-c", " ".join(command) + " | head -n 200"]
    return command


def run_grep(root, command: list[str]) -> int:
    done = subprocess.run(command, cwd=root, capture_output=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{command} failed: {done.stderr[:300]!r}")
    return done.stdout.count(b"\n")


def cpu_seconds(function) -> float:
    """CPU time (user + system) of this process and its children spent in `function()`."""

    def total() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    before = total()
    function()
    return total() - before


def compare(root, tool, pattern: str, cap: bool) -> dict:
    """Alternate the tool and both grep variants RUNS times; medians of wall and CPU seconds."""
    runs = {
        "tool": lambda: tool(pattern),
        "grep": lambda: run_grep(root, grep_command(pattern, exclude_git=True, cap=cap)),
        "grep_all": lambda: run_grep(root, grep_command(pattern, exclude_git=False, cap=cap)),
    }
    counts = {"tool": runs["tool"]()["count"], "grep": runs["grep"]()}
    runs["grep_all"]()  # the last warm-up
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(RUNS):
        for name, function in runs.items():
            wall[name].append(time_call(function)[0])
            cpu[name].append(cpu_seconds(function))
    out = {name: median(values) for name, values in wall.items()}
    out.update({f"{name}_cpu": median(values) for name, values in cpu.items()})
    return {**out, "counts": counts}


def run() -> dict:
    if not shutil.which("grep"):
        raise RuntimeError("GNU grep is not installed")
    with temp_workspace() as root:
        planted = build_tree(root, random.Random(1234))
        config = make_config(root)
        session = Session(root / ".lmagent" / "sessions", "bench", {})
        context = ToolContext(
            config=config, workspace=Workspace(root), session=session, services=Services(config)
        )
        toolset = build_toolset()

        def tool(pattern: str) -> dict:
            out = toolset.execute(context, "grep", {"pattern": pattern})
            if not out.get("success"):
                raise RuntimeError(f"the grep tool failed: {out.get('error')}")
            return out

        rare = compare(root, tool, RARE, cap=False)
        common = compare(root, tool, COMMON, cap=True)
        size_mb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6
    if rare["counts"]["tool"] != planted or rare["counts"]["grep"] != planted:
        raise RuntimeError(f"expected {planted} matches, got {rare['counts']}")
    figures = [
        at_most(
            "rare pattern: tool / `grep -rn --exclude-dir=.git`",
            rare["tool"] / rare["grep"],
            "×",
            TARGET_RATIO,
        ),
        at_most(
            "capped pattern: tool / `grep -rn … | head -n 200`",
            common["tool"] / common["grep"],
            "×",
            TARGET_RATIO,
        ),
        figure("rare pattern: grep tool, median", rare["tool"], "s"),
        figure("rare pattern: `grep -rn --exclude-dir=.git`, median", rare["grep"], "s"),
        figure(
            "rare pattern: `grep -rn PATTERN .` (also reads .git), median", rare["grep_all"], "s"
        ),
        figure("rare pattern: tool / `grep -rn PATTERN .`", rare["tool"] / rare["grep_all"], "×"),
        figure(
            "rare pattern, CPU time: tool / `grep -rn --exclude-dir=.git`",
            rare["tool_cpu"] / rare["grep_cpu"],
            "×",
        ),
        figure("capped pattern: grep tool, median", common["tool"], "s"),
        figure("capped pattern: `grep -rn … | head -n 200`, median", common["grep"], "s"),
        figure("tree size", size_mb, "MB"),
    ]
    notes = f"""
{FILES:,} files in {FILES // 25:,} directories (Python, JS, TS, Go, Rust, Markdown, JSON;
lognormal sizes around 60 lines), {BINARY_SHARE:.0%} of them binary, plus {GIT_OBJECTS:,}
compressed objects under .git. The tool is called as the loop calls it,
`build_toolset().execute(ctx, "grep", {{"pattern": ...}})`. Rare pattern `{RARE}` sits in
{planted} files, so both searches read the whole tree (both found {planted}). The capped pattern
`{COMMON}` is in most files: the tool stops at its 200-result cap, grep is cut off by `head`.
The target compares with `grep -rn --exclude-dir=.git`, which does the same work as the tool
(the tool skips .git); plain `grep -rn PATTERN .` also reads .git and is shown for reference.
Medians of {RUNS} alternating runs after a warm-up, page cache warm; each run is done twice,
once for wall time and once for CPU time (user + system, grep's counted through its exit), the
latter being hardly disturbed by other load on the machine. Process start-up of grep is included
in its time; the tool runs in-process.
"""
    return result("grep", figures, " ".join(notes.split()), title="grep tool versus `grep -rn`")
