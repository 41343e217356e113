"""SHELL_WORKSPACE_ONLY: the advisory second line behind the sandbox. A command naming a path
outside the workspace is refused before it runs; the container or bwrap is the wall.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

# --- SHELL_WORKSPACE_ONLY: the advisory second line ------------------------------------------
SENSITIVE_ROOTS = (
    "/etc", "/root", "/home", "/proc", "/sys", "/var", "/boot", "/run", "/mnt", "/media", "/srv",
    "/dev", "/snap", "/Users", "/lost+found",
)  # fmt: skip
HARMLESS_PATHS = (
    "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout",
    "/dev/stderr", "/dev/tty", "/dev/fd", "/var/tmp",
)  # fmt: skip
HOME_PREFIXES = ("~", "$HOME", "${HOME}")


def check_command_paths(command: str, workspace: Path) -> str | None:
    """A refusal message if the command plainly names a path outside the workspace, else None.

    Catches `cat /etc/passwd`, `cd ..` above the workspace and `~`/`$HOME` paths; lets through
    URLs, relative paths, quoted text with spaces (commit messages) and absolute paths inside the
    workspace. Tool locations such as /usr/bin and the sandbox's private /tmp are fine.
    """
    workspace = Path(os.path.normpath(workspace))
    cwd, previous = workspace, ""
    for word in _shell_words(command):
        for candidate in _path_candidates(word):
            target = _outside_target(candidate, cwd, workspace)
            if target is not None:
                return (
                    f"refused: {candidate!r} points outside the workspace {workspace} "
                    f"(resolves to {target}; SHELL_WORKSPACE_ONLY is on). Work inside the "
                    "workspace; tools under /usr and the sandbox's /tmp are fine."
                )
        if previous == "cd":
            new_cwd = Path(os.path.normpath(cwd / os.path.expanduser(word)))
            cwd = new_cwd if _inside(new_cwd, workspace) else cwd
        previous = word
    return None


def _shell_words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to plain words
        return command.split()


def _path_candidates(word: str) -> list[str]:
    if "://" in word or any(c.isspace() for c in word):
        return []  # URLs and quoted prose ("fix ../ handling") are not paths
    candidates = [word]
    if "=" in word:  # --output=/x, VAR=/x
        candidates.append(word.split("=", 1)[1])
    return candidates


def _outside_target(candidate: str, cwd: Path, workspace: Path) -> Path | None:
    """The resolved path if `candidate` is a path that leaves the workspace in a way we refuse."""
    for prefix in HOME_PREFIXES:
        if candidate == prefix or candidate.startswith(prefix + "/"):
            target = Path(os.path.normpath(Path.home() / candidate[len(prefix) :].lstrip("/")))
            return None if _inside(target, workspace) else target
    if candidate.startswith("~"):  # ~user/...
        target = Path(os.path.normpath(os.path.expanduser(candidate)))
        return None if _inside(target, workspace) else target
    if candidate.startswith("/"):
        target = Path(os.path.normpath(candidate))
        if _inside(target, workspace) or _harmless(str(target)):
            return None
        return target
    if ".." in candidate.split("/"):
        target = Path(os.path.normpath(cwd / candidate))
        return None if _inside(target, workspace) else target
    return None


def _harmless(path: str) -> bool:
    if any(path == p or path.startswith(p + "/") for p in HARMLESS_PATHS):
        return True
    return path != "/" and not any(path == r or path.startswith(r + "/") for r in SENSITIVE_ROOTS)


def _inside(path: Path, workspace: Path) -> bool:
    return path == workspace or workspace in path.parents
