"""Checkpoints on a 10,000-file workspace with one changed file, next to a plain
`git add -A && git commit` on the same tree in the same run (issues 13 and 26).

The workspace is a git repository of its own (as a user's project often is); each round
changes one file, then takes a checkpoint (the shadow repository) and makes a plain commit (the
user's repository), alternating, so both see the same tree and the same page cache. The whole
bracket a changing step costs (a checkpoint before, one after, the step recorded with its
diff) is given for context.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.common import at_most, figure, median, percentile, result, temp_workspace, time_call
from lmagent.checkpoints.recorder import StepRecorder
from lmagent.checkpoints.steps import Checkpoints

DIRECTORIES = 100
FILES_PER_DIRECTORY = 100
ROUNDS = 41
TARGET_MS = 10  # a changing step, both snapshots included (issue 26)


def make_tree(root: Path) -> None:
    for d in range(DIRECTORIES):
        folder = root / f"pkg{d:03}"
        folder.mkdir()
        for f in range(FILES_PER_DIRECTORY):
            (folder / f"module{f:03}.py").write_text(f"VALUE = {d * 1000 + f}\n" * 20)


def plain_git(root: Path):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root / ".lmagent"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@localhost",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@localhost",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)

    return git


def run() -> dict:
    with temp_workspace("lmagent-bench-checkpoints-") as root:
        make_tree(root)
        (root / ".lmagent").mkdir()
        git = plain_git(root)
        git("init", "-q")
        git("add", "-A")
        git("commit", "-q", "-m", "first")
        checkpoints = Checkpoints(root)
        first, _ = time_call(lambda: checkpoints.take("first"))
        ours, theirs, steps = [], [], []
        recorder = StepRecorder(root, "bench-session")
        changed = root / "pkg050" / "module050.py"
        for n in range(ROUNDS):
            changed.write_text(f"VALUE = {n}\n")
            ours.append(time_call(lambda: checkpoints.take("bench"))[0])
            theirs.append(time_call(lambda: (git("add", "-A"), git("commit", "-q", "-m", "x")))[0])
            changed.write_text(f"VALUE = {n}\nNEXT = {n}\n")
            steps.append(time_call(lambda n=n: step(recorder, n))[0])
    ms = [t * 1000 for t in ours]
    plain = [t * 1000 for t in theirs]
    bracket_ms = round(median([t * 1000 for t in steps]), 1)
    figures = [
        at_most("checkpoint p50, 10,000 files, one changed", round(median(ms), 1), "ms", TARGET_MS),
        figure("checkpoint p90", round(percentile(ms, 90), 1), "ms"),
        figure("plain git add -A && git commit p50, same tree", round(median(plain), 1), "ms"),
        figure("checkpoint / plain git commit (p50)", round(median(ms) / median(plain), 2), "x"),
        figure("first checkpoint of the tree (cold)", round(first * 1000), "ms"),
        figure("a changing step's bracket p50 (before, after, record, diff)", bracket_ms, "ms"),
    ]
    notes = (
        f"{DIRECTORIES * FILES_PER_DIRECTORY} files in {DIRECTORIES} folders, {ROUNDS} rounds, "
        "the checkpoint and the plain commit alternating on the same tree; the workspace is a "
        "git repository of its own (its .git is left out of the checkpoints)."
    )
    return result("checkpoints", figures, notes, "checkpoints versus a plain git commit")


def step(recorder: StepRecorder, n: int) -> None:
    """What the loop does around a changing call (the call itself is the file write)."""
    before = recorder.before("write")
    (recorder.checkpoints.repo.workspace / "pkg010" / "module010.py").write_text(f"N = {n}\n")
    recorder.after(before, "write", f"call_{n}")
