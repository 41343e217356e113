"""A task's workspace as a git remote and branch: the worker clones it into its own workspace
root (or fetches, when it is taken up again), the task runs there, and the result is pushed as
the branch `lmagent/<task id>`. Credentials are the worker's own git configuration; the queue
holds only the URL."""

from __future__ import annotations

import subprocess
from pathlib import Path

RESULT_PREFIX = "lmagent/"
GIT_TIMEOUT = 300


class GitError(RuntimeError):
    """The remote cannot be cloned, fetched or pushed from this worker; one line."""


def git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise GitError(f"git {args[0]} failed: {lines[-1]}")
    return done.stdout


def check_out(root: Path, task_id: str, url: str, branch: str) -> Path:
    """The task's clone under `root` on its result branch (made from `branch` the first time)."""
    target = Path(root) / task_id
    result = RESULT_PREFIX + task_id
    if not (target / ".git").is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "--quiet", "--branch", branch, "--", url, str(target))
        git("checkout", "--quiet", "-B", result, cwd=target)
        with open(target / ".git" / "info" / "exclude", "a", encoding="utf-8") as exclude:
            exclude.write("\n.lmagent/\n")  # sessions and checkpoints stay on the worker
    return target


def push_result(target: Path, task_id: str) -> str:
    """Commit what the task changed and push it as `lmagent/<task id>`; returns that name."""
    result = RESULT_PREFIX + task_id
    git("add", "--all", cwd=target)
    if git("status", "--porcelain", cwd=target).strip():
        git(*identity(target), "commit", "--quiet", "-m", f"lmagent task {task_id}", cwd=target)
    git("push", "--quiet", "origin", f"HEAD:refs/heads/{result}", cwd=target)
    return result


def identity(target: Path) -> list[str]:
    """The worker's own git identity; a fallback only where it has none."""
    try:
        git("config", "user.email", cwd=target)
        return []
    except GitError:
        return ["-c", "user.name=lmagent", "-c", "user.email=lmagent@localhost"]
