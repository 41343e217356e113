"""Review and undo in the terminal: --json events carry the diff, --checkpoints / --undo /
--restore (and their refusals), the REPL's /checkpoints and /undo, and what a person sees of a
command's output and of a diff."""

from __future__ import annotations

import argparse
import io
import json

from lmagent.cli.repl import Repl
from lmagent.cli.terminal import TerminalIO
from lmagent.core.workspace import Workspace
from lmagent.loop.run import run_agent
from tests.cli_process import cli, only_session
from tests.conftest import make_config
from tests.scripted_llm import text, tool_call

pytest_plugins = ["tests.sandbox_fixtures"]


def write_then_edit(llm) -> None:
    llm.add(
        tool_call("write", {"path": "app.py", "content": "print('one')\n"}),
        tool_call("edit", {"path": "app.py", "search": "one", "replace": "two"}),
        text("Done.\nTASK_COMPLETE"),
    )


def test_json_tool_results_carry_the_diff_and_the_changed_files(workspace, llm):
    write_then_edit(llm)
    done = cli(workspace, llm, "--json", "make app.py")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    write, edit = [e for e in events if e["type"] == "tool_result"]
    assert write["changed"] == ["app.py"] and "+print('one')" in write["diff"]
    assert edit["changed"] == ["app.py"]
    assert "-print('one')\n+print('two')" in edit["diff"]


def test_checkpoints_undo_and_restore_from_the_command_line(workspace, llm):
    write_then_edit(llm)
    assert cli(workspace, llm, "make app.py").returncode == 0
    session_id = only_session(workspace)["id"]

    listed = cli(workspace, llm, "--checkpoints", session_id)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line[:4] for line in lines] == ["1   ", "2   "]  # each line starts with its step
    assert "write" in lines[0] and "edit" in lines[1] and lines[1].endswith("app.py")
    as_json = cli(workspace, llm, "--checkpoints", "--json")  # the newest session
    assert [json.loads(line)["tool"] for line in as_json.stdout.splitlines()] == ["write", "edit"]

    undone = cli(workspace, llm, "--undo", session_id)
    assert undone.returncode == 0, undone.stderr
    assert "before step 2" in undone.stdout
    assert (workspace / "app.py").read_text() == "print('one')\n"

    (workspace / "app.py").write_text("the user's version\n")
    refused = cli(workspace, llm, "--restore", session_id, "1")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: 1 file(s) changed since the agent's last step: app.py")
    assert "--force" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert (workspace / "app.py").read_text() == "the user's version\n"

    forced = cli(workspace, llm, "--restore", session_id, "1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert not (workspace / "app.py").exists()


def test_bad_restore_arguments_are_one_line_each(workspace, llm):
    write_then_edit(llm)
    cli(workspace, llm, "make app.py")
    session_id = only_session(workspace)["id"]
    cases = {
        ("--restore", session_id, "two"): "STEP must be a step number, not 'two'",
        ("--restore", session_id, "9"): "has no step 9 (its steps: 1, 2)",
        ("--restore", "nosuchsession", "1"): "no session 'nosuchsession'",
        ("--undo", "../etc"): "invalid session id",
    }
    for args, message in cases.items():
        done = cli(workspace, llm, *args)
        assert done.returncode == 1, args
        assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert (workspace / "app.py").read_text() == "print('two')\n"


def test_repl_checkpoints_and_undo(workspace, llm):
    write_then_edit(llm)
    out = io.StringIO()
    script = "make app.py\n/checkpoints\n/undo\n/undo\n/undo nonsense\n"
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO(script))
    repl = Repl(make_config(workspace, llm), argparse.Namespace(resume=None, plan=False), terminal)
    assert repl.loop() == 0
    shown = out.getvalue()
    assert "\n1   " in shown and "\n2   " in shown
    assert "restored the files to before step 2" in shown
    assert "restored the files to before step 3" in shown  # the second /undo undid the first
    assert "usage: /undo" in shown
    assert (workspace / "app.py").read_text() == "print('two')\n"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def terminal_run(workspace, llm, *turns) -> str:
    llm.add(*turns, text("Done.\nTASK_COMPLETE"))
    out = Tty()
    config = make_config(workspace, llm, sandbox_backend="bwrap")
    run_agent(config, "do it", sink=TerminalIO(out=out, err=out).event)
    return out.getvalue()


def test_the_terminal_shows_a_commands_output_tail_dimmed_and_cut(workspace, llm, require_backend):
    require_backend("bwrap")
    shown = terminal_run(workspace, llm, tool_call("shell", {"command": "seq 1 100"}))
    assert "\x1b[2m    │ … 88 earlier line(s) not shown (kept in the transcript)" in shown
    assert "\x1b[2m    │ 100\n" in shown and "│ 88\n" not in shown


def test_the_terminal_shows_a_failed_commands_exit_code_and_its_error_output(
    workspace, llm, require_backend
):
    require_backend("bwrap")
    command = "echo starting; echo 'no such option: -x' >&2; printf '\\033[31mred\\n'; exit 2"
    shown = terminal_run(workspace, llm, tool_call("shell", {"command": command}))
    assert "✗ shell: command exited with code 2" in shown
    assert "    │ no such option: -x\n" in shown
    # the command's own escapes are shown, written out, never passed to the terminal
    assert "    │ \\x1b[31mred\n" in shown


def test_the_terminal_shows_each_change_as_a_coloured_diff(workspace, llm):
    (workspace / "app.py").write_text("print('one')\n")
    shown = terminal_run(
        workspace, llm, tool_call("edit", {"path": "app.py", "search": "one", "replace": "two"})
    )
    assert "\x1b[31m    │ -print('one')\n" in shown
    assert "\x1b[32m    │ +print('two')\n" in shown
    assert "\x1b[36m    │ @@ -1 +1 @@" in shown


def test_a_permission_prompt_shows_the_change_or_the_command_it_asks_about(workspace):
    out = Tty()
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO("y\nn\ny\n"))
    terminal.workspace = Workspace(workspace)
    write = {"path": "app.py", "content": "import sys\n\n\ndef main():\n    pass\n"}
    assert terminal.ask("write", write) == "allow"
    (workspace / "app.py").write_text(write["content"])
    edit = {"path": "app.py", "search": "pass", "replace": "return 0"}
    assert terminal.ask("edit", edit) == "deny"
    assert terminal.ask("shell", {"command": "python3 app.py --check"}) == "allow"
    shown = out.getvalue()
    assert "\x1b[32m    │ +def main():\n" in shown and '"content"' not in shown
    assert "    │ --- /dev/null\n" in shown  # a new file
    assert "\x1b[31m    │ -    pass\n" in shown and "\x1b[32m    │ +    return 0\n" in shown
    assert "    │ $ python3 app.py --check\n" in shown
    assert "? allow write  [y]es / [n]o / [a]uto" in shown


def test_a_write_over_a_file_asks_with_only_what_changes(workspace):
    lines = [f"line {number}\n" for number in range(1, 41)]
    (workspace / "notes.txt").write_text("".join(lines))
    lines[19] = "line twenty\n"
    out = Tty()
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO("n\n"))
    terminal.workspace = Workspace(workspace)
    assert terminal.ask("write", {"path": "notes.txt", "content": "".join(lines)}) == "deny"
    shown = out.getvalue()
    assert "\x1b[31m    │ -line 20\n" in shown and "\x1b[32m    │ +line twenty\n" in shown
    assert "│ +line 1\n" not in shown and "│  line 1\n" not in shown  # not the whole file
    assert "\x1b[36m    │ @@ -17,7 +17,7 @@" in shown
    assert (workspace / "notes.txt").read_text().count("line 20\n") == 1  # nothing written


def test_a_write_that_changes_nothing_says_so(workspace):
    (workspace / "same.txt").write_text("as it is\n")
    out = Tty()
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO("n\n"))
    terminal.workspace = Workspace(workspace)
    assert terminal.ask("write", {"path": "same.txt", "content": "as it is\n"}) == "deny"
    assert "    │ (no change: same.txt already holds exactly this)\n" in out.getvalue()


def test_a_permission_prompt_that_cannot_work_out_the_change_shows_the_arguments(workspace):
    out = Tty()
    terminal = TerminalIO(out=out, err=out, inp=io.StringIO("n\n"))
    terminal.workspace = Workspace(workspace)
    edit = {"path": "missing.py", "search": "a", "replace": "b"}
    assert terminal.ask("edit", edit) == "deny"
    assert '? allow edit {"path": "missing.py", "search": "a", "replace": "b"}' in out.getvalue()


def test_the_terminal_says_what_ls_read_glob_and_grep_found(workspace, llm):
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    (workspace / "src").mkdir()
    for number in range(10):
        (workspace / "src" / f"m{number}.py").write_text("import os\n")
    shown = terminal_run(
        workspace,
        llm,
        tool_call("ls", {}),
        tool_call("read", {"path": "notes.txt"}),
        tool_call("glob", {"pattern": "src/*.py"}),
        tool_call("grep", {"pattern": "plum"}),
    )
    assert "✓ ls — 3 entries: .lmagent/, src/, notes.txt\n" in shown
    assert "✓ read — notes.txt, lines 1-1 of 1\n" in shown
    names = ", ".join(f"src/m{number}.py" for number in range(8))
    assert f"✓ glob — 10 matches: {names}, …\n" in shown  # at most eight names
    assert "✓ grep — 1 match: notes.txt:1\n" in shown
