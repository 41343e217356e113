"""The git tools: status, diff, add, commit and branch, run in the sandbox.

The git tools never run a program the repository names (a repository is data: a cloned or
downloaded one may carry a `.git/config` that runs commands), so git_status and git_diff stay
read-only and need no permission. The settings are neutralised rather than asked about, on
every call, in git's command scope, which beats every configuration file:
- fixed settings (`GIT_NEUTRAL_CONFIG`): fsmonitor, hooks (core.hooksPath below /dev/null),
  editors, askpass, ssh, credential helpers, signing, automatic gc, transports (a partial
  clone's lazy fetch), submodule recursion; `--no-pager` covers core.pager and pager.<cmd>;
- settings whose names the repository chooses are found first, with includes followed, by
  `git config --get-regexp` run the same way: each filter driver is emptied (git then filters
  nothing), each configured hook disabled, each named protocol forbidden; a name that `-c`
  cannot express (not UTF-8, or with "=") or a listing too long to check refuses the call;
- diff drivers and diff.external: git_diff passes `--no-ext-diff --no-textconv`; no tool
  merges, so merge drivers never run; aliases cannot replace the built-in commands used here;
- submodules have configuration of their own, which is not checked, so nothing looks inside
  them: status and diff pass `--ignore-submodules=dirty`, and git_commit refuses when nothing
  is staged (git's "nothing to commit" report would look).
The listing and the command are two sandbox runs: only a process already running in the
sandbox (code the user allowed) could change the configuration between them.
"""

from __future__ import annotations

import shlex
from typing import Annotated as A

from lmagent.tools.registry import (
    ArgumentError,
    ToolContext,
    ToolError,
)
from lmagent.tools.shell import run_in_sandbox

GIT_NEUTRAL_CONFIG = (
    ("core.fsmonitor", ""),  # off both where it is a boolean (2.36+) and where a hook path
    ("core.hooksPath", "/dev/null"),  # nothing can exist below /dev/null: no hook file runs
    ("core.editor", ":"),  # ":" tells git not to start an editor
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gc.auto", "0"),  # no automatic gc after a commit (gc.recentObjectsHook, pre-auto-gc)
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),  # a partial clone fetches missing objects through a transport
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    ("safe.bareRepository", "explicit"),
)
GIT_NEUTRAL_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}
# Settings whose middle part the repository names (`filter.<driver>.clean`): every name found in
# the effective configuration (includes followed) gets all of its section's values here.
GIT_NAMED_OVERRIDES = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},  # "" = no filter
    "hook": {"enabled": "false"},  # hooks configured as hook.<name>.command (git 2.54+)
    "protocol": {"allow": "never"},
}


def _git(ctx: ToolContext, *args: str, timeout: float = 60) -> dict:
    """Run one git command in the sandbox with every executable setting neutralised."""
    command = _git_command(args, _named_overrides(ctx))
    return run_in_sandbox(ctx, command, timeout)


def _git_command(args: tuple[str, ...], named: list[tuple[str, str]]) -> str:
    """The sh command line: the environment, git, and every setting as `-c key=value`."""
    words = [f"{name}={value}" for name, value in GIT_NEUTRAL_ENV.items()] + ["git", "--no-pager"]
    for key, value in [*GIT_NEUTRAL_CONFIG, *named]:
        words += ["-c", shlex.quote(f"{key}={value}")]
    return " ".join([*words, *map(shlex.quote, args)])


def _named_overrides(ctx: ToolContext) -> list[tuple[str, str]]:
    """Overrides for every filter driver, configured hook and protocol the configuration names."""
    pattern = "^(" + "|".join(GIT_NAMED_OVERRIDES) + r")\."  # no ".": it skips invalid UTF-8
    listing = ("config", "--name-only", "-z", "--get-regexp", pattern)
    found = run_in_sandbox(ctx, _git_command(listing, []), timeout=30)
    if found["exit_code"] not in (0, 1):  # 1: nothing matched
        detail = found["output"].strip() or found["error"]
        raise ToolError(f"cannot read the git configuration: {detail}")
    if found.get("truncated_bytes"):
        raise ToolError(
            "the git configuration names too many filters, hooks and protocols to check; "
            "look at it with the shell tool"
        )
    overrides = {}
    for key in filter(None, found["output"].split("\0")):
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if section not in GIT_NAMED_OVERRIDES or not dot:
            continue
        if "\ufffd" in name or "=" in name:  # `-c` cannot name it
            raise ToolError(
                f"the git configuration names a {section} that git tools cannot switch off "
                f"({key!r}: not UTF-8, or with '='); look at it with the shell tool"
            )
        for setting, value in GIT_NAMED_OVERRIDES[section].items():
            overrides[f"{section}.{name}.{setting}"] = value
    return list(overrides.items())


def _git_paths(ctx: ToolContext, paths: list[str]) -> list[str]:
    return [ctx.workspace.resolve(p) for p in paths]


def tool_git_status(ctx: ToolContext) -> dict:
    """Show the git status of the workspace repository."""
    return _git(ctx, "status", "--short", "--branch", "--ignore-submodules=dirty")


def tool_git_diff(
    ctx: ToolContext,
    path: A[str | None, "limit the diff to this path"] = None,
    staged: A[bool, "show staged changes instead of unstaged ones"] = False,
) -> dict:
    """Show changes in the workspace repository."""
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"]
    args += ["--staged"] if staged else []
    if path:
        args += ["--", *_git_paths(ctx, [path])]
    return _git(ctx, *args)


def tool_git_add(ctx: ToolContext, paths: A[list[str], "paths to stage"]) -> dict:
    """Stage files for the next commit."""
    if not paths:
        raise ArgumentError("paths must list at least one path")
    return _git(ctx, "add", "--", *_git_paths(ctx, paths))


def tool_git_commit(
    ctx: ToolContext,
    message: A[str, "commit message"],
    allow_empty: A[bool, "allow a commit with no changes"] = False,
) -> dict:
    """Commit the staged changes."""
    if not message.strip():
        raise ArgumentError("message must not be empty")
    if allow_empty:
        return _git(ctx, "commit", "--allow-empty", "-m", message)
    if _git(ctx, "diff", "--staged", "--quiet")["exit_code"] == 0:  # no submodule report
        raise ToolError("nothing is staged to commit: stage changes with git_add first")
    return _git(ctx, "commit", "-m", message)


def tool_git_branch(
    ctx: ToolContext,
    name: A[str | None, "branch name (omit to list branches)"] = None,
    create: A[bool, "create the branch"] = False,
    switch: A[bool, "switch to the branch"] = False,
) -> dict:
    """List, create or switch git branches."""
    if not name:
        return _git(ctx, "branch", "--list", "--no-color")
    if name.startswith("-") or any(ch in name for ch in " ~^:?*[\\") or ".." in name:
        raise ArgumentError(f"invalid branch name {name!r}")
    if create and switch:
        return _git(ctx, "switch", "-c", name)
    if create:
        return _git(ctx, "branch", name)
    if switch:
        return _git(ctx, "switch", name)
    raise ArgumentError("with a name, set create and/or switch")
