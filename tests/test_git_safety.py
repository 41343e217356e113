"""The git tools never run a program the repository names, on Docker and bubblewrap.

A repository is planted with the settings through which git runs programs (fsmonitor, hooks,
filters pulled in by an include, diff drivers, external diff, pager, editor, signing, an alias,
a partial clone's transport, a submodule's own filter). Each points at a script that leaves a
marker in `.git/pwned/`. Plain git in the sandbox's shell shows that the plant works; the tools
must leave no marker and still do their job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_shell_tools import run, shell_env  # noqa: F401 - shell_env is the fixture used here

pytest_plugins = ["tests.sandbox_fixtures"]

HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
)
ATTRIBUTES = "a.txt filter=evil\nb.inc filter=inc\nc.tc diff=tc\nd.dc diff=dc\n"
FILES = {"a.txt": "one\n", "b.inc": "one\n", "c.tc": "one\n", "d.dc": "one\n", "e.ext": "one\n"}
PLANTED_CONFIG = """
[core]
\tfsmonitor = {pwn}/fsmonitor
\tpager = {pwn}/pager
\teditor = {pwn}/editor
\taskPass = {pwn}/askpass
\tsshCommand = {pwn}/ssh
[pager]
\tstatus = {pwn}/pager
\tdiff = {pwn}/pager
[sequence]
\teditor = {pwn}/editor
[credential]
\thelper = !{pwn}/credential
[commit]
\tgpgSign = true
[gpg]
\tprogram = {pwn}/gpg
[diff]
\texternal = {pwn}/extdiff
[diff "tc"]
\ttextconv = {pwn}/textconv
[diff "dc"]
\tcommand = {pwn}/diffcmd
[filter "evil"]
\tclean = {pwn}/clean
\tsmudge = {pwn}/smudge
\trequired = true
[merge "evil"]
\tdriver = {pwn}/merge
[alias]
\tstatus = !{pwn}/alias-status
\tpwnalias = !{pwn}/alias-pwnalias
[hook "pwn"]
\tevent = pre-commit
\tcommand = {pwn}/config-hook
[include]
\tpath = {git}/extra.cfg
"""
SCRIPT_BODY = '[ $# -eq 0 ] && exec cat\n[ $# -eq 1 ] && [ -f "$1" ] && exec cat "$1"\nexit 0\n'
INCLUDED_CONFIG = '[filter "inc"]\n\tprocess = {pwn}/process\n'


def markers(workspace: Path) -> list[str]:
    return sorted(p.name for p in (workspace / ".git" / "pwned").iterdir())


def shell(env, command: str) -> dict:
    result = run(env, "shell", command=command)
    assert result["success"], result
    return result


def plant_script(workspace: Path, name: str, path: Path | None = None) -> Path:
    """An executable that leaves the marker `name`, then copies its input (a filter) or the one
    file it is given (a textconv); otherwise (a hook, an external diff) it just succeeds."""
    marker = workspace / ".git" / "pwned" / name
    script = path or workspace / ".git" / "pwn" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n{SCRIPT_BODY}")
    script.chmod(0o755)
    return script


def plant(workspace: Path, config: str, scripts: list[str]) -> None:
    """Append `config` to .git/config ({pwn}: the scripts, {git}: .git) and make its scripts."""
    git = workspace / ".git"
    (git / "pwned").mkdir(exist_ok=True)
    for name in scripts:
        plant_script(workspace, name)
    with (git / "config").open("a") as f:
        f.write(config.format(pwn=git / "pwn", git=git))


@pytest.fixture
def planted(shell_env, workspace):  # noqa: F811 - the imported fixture
    """A repository (main, and a branch `other` with another a.txt) with changes in the work
    tree, then every executable setting planted in .git/config, an included file and hooks."""
    (workspace / ".gitattributes").write_text(ATTRIBUTES)
    for name, text in FILES.items():
        (workspace / name).write_text(text)
    shell(shell_env, "git init -q -b main && git add -A && git commit -qm base")
    shell(shell_env, "git switch -qc other && echo other > a.txt && git commit -qam other")
    shell(shell_env, "git switch -q main")
    for name in FILES:
        (workspace / name).write_text("two\n")
    names = [line.split("/")[-1] for line in PLANTED_CONFIG.split() if "{pwn}/" in line]
    plant(workspace, PLANTED_CONFIG, [*names, "process"])
    git = workspace / ".git"
    (git / "extra.cfg").write_text(INCLUDED_CONFIG.format(pwn=git / "pwn"))
    for hook in HOOKS:
        plant_script(workspace, hook, git / "hooks" / hook)
    return shell_env


def test_plain_git_runs_the_planted_settings_but_no_alias_replaces_a_command(planted, workspace):
    for command in (
        "git status",
        "git diff -- d.dc e.ext",
        "git diff --no-ext-diff -- c.tc",
        "git add -A",
        "git commit --no-gpg-sign -qm c",
        "git commit --allow-empty -m signed",
        "git switch other",
        "git pwnalias",
    ):
        run(planted, "shell", command=command)
    found = set(markers(workspace))
    expected = {"fsmonitor", "diffcmd", "extdiff", "textconv", "clean", "process", "gpg", "smudge"}
    expected |= {"pre-commit", "commit-msg", "post-commit", "post-checkout", "alias-pwnalias"}
    assert expected <= found
    assert "alias-status" not in found  # an alias never replaces a built-in command


def test_git_tools_run_nothing_the_repository_names_and_still_work(planted, workspace):
    status = run(planted, "git_status")
    assert status["success"], status
    assert "## main" in status["output"] and " M a.txt" in status["output"]
    diff = run(planted, "git_diff")
    assert diff["success"] and "+two" in diff["output"], diff
    assert "+two" in run(planted, "git_diff", path="c.tc")["output"]  # no textconv
    assert run(planted, "git_add", paths=list(FILES))["success"]
    assert "+two" in run(planted, "git_diff", staged=True)["output"]
    committed = run(planted, "git_commit", message="planted")
    assert committed["success"] and "[main " in committed["output"], committed
    assert run(planted, "git_branch", name="other", switch=True)["success"]
    assert (workspace / "a.txt").read_text() == "other\n"  # checked out without the smudge
    assert run(planted, "git_branch", name="feature", create=True, switch=True)["success"]
    assert "* feature" in run(planted, "git_branch")["output"]
    assert markers(workspace) == []


def test_a_partial_clones_lazy_fetch_runs_no_transport(shell_env, workspace):  # noqa: F811
    (workspace / "f.txt").write_text("one\n")
    shell(shell_env, "git init -q && git add f.txt && git commit -qm base")
    shell(shell_env, "rm .git/objects/$(git rev-parse HEAD:f.txt | sed 's|^..|&/|')")
    config = (
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
        '[remote "origin"]\n\turl = ext::{pwn}/transport quit now\n\tpromisor = true\n'
        '[protocol "ext"]\n\tallow = always\n'
    )
    plant(workspace, config, ["transport"])
    (workspace / "f.txt").write_text("two\n")
    diff = run(shell_env, "git_diff")
    assert diff["success"] is False and "unable to read" in diff["output"]
    assert markers(workspace) == []
    run(shell_env, "shell", command="git diff")
    assert markers(workspace) == ["transport"]


def test_nothing_looks_inside_a_submodule_whose_own_config_names_a_filter(
    shell_env,  # noqa: F811
    workspace,
):
    upstream = "git init -q .git/upstream && cd .git/upstream && echo one > s.txt"
    upstream += " && echo 's.txt filter=sub' > .gitattributes && git add -A && git commit -qm s"
    shell(shell_env, f"git init -q && {upstream}")
    shell(shell_env, "git -c protocol.file.allow=always submodule add -q ./.git/upstream sm")
    shell(shell_env, "git commit -qm sm")
    plant_script(workspace, "subclean")
    with (workspace / ".git" / "modules" / "sm" / "config").open("a") as f:
        f.write(f'[filter "sub"]\n\tclean = {workspace}/.git/pwn/subclean\n')
    (workspace / ".git" / "pwned").mkdir()
    shell(shell_env, "touch -d @0 sm/s.txt")  # same content, other mtime: git must clean it
    assert run(shell_env, "git_status")["success"]
    assert run(shell_env, "git_diff")["success"]
    refused = run(shell_env, "git_commit", message="nothing")
    assert refused["success"] is False and "nothing is staged" in refused["error"]
    assert markers(workspace) == []
    run(shell_env, "shell", command="git status")
    assert markers(workspace) == ["subclean"]


@pytest.fixture
def repo(shell_env, workspace):  # noqa: F811
    shell(shell_env, "git init -q")
    (workspace / ".git" / "pwned").mkdir()
    return shell_env


@pytest.mark.parametrize("name", [b"\xff", b"a=b"], ids=["not-utf8", "with-equals"])
def test_a_filter_name_that_cannot_be_overridden_is_refused(repo, workspace, name):
    plant_script(workspace, "clean")
    with (workspace / ".git" / "config").open("ab") as f:
        f.write(b'[filter "%s"]\n\tclean = %s/.git/pwn/clean\n' % (name, bytes(workspace)))
    (workspace / ".gitattributes").write_bytes(b"* filter=%s\n" % name)
    (workspace / "a.txt").write_text("one\n")
    refused = run(repo, "git_add", paths=["a.txt"])
    assert refused["success"] is False and "cannot switch off" in refused["error"]
    assert markers(workspace) == []


def test_a_configuration_too_long_to_check_is_refused(repo, workspace):
    with (workspace / ".git" / "config").open("a") as f:
        f.writelines(f'[filter "f{i:05}"]\n\tclean = cat\n' for i in range(2500))
    refused = run(repo, "git_status")
    assert refused["success"] is False and "too many" in refused["error"]


def test_a_broken_configuration_is_reported(repo, workspace):
    with (workspace / ".git" / "config").open("a") as f:
        f.write("[broken\n")
    refused = run(repo, "git_status")
    assert refused["success"] is False
    assert "cannot read the git configuration" in refused["error"]
    assert "bad config" in refused["error"]
