"""The first run, driven through a real pseudo-terminal as a new user meets it: nothing
configured, questions for the workspace and the server, .env offered; never asked without a
terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from dotenv import dotenv_values

from lmagent.cli.firstrun import FirstRun
from tests.cli_process import cli, cli_env, closed_port_url
from tests.pty_terminal import Terminal
from tests.scripted_llm import ScriptedLLM, text


@pytest.fixture
def home(tmp_path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def terminals():
    opened: list[Terminal] = []

    def open_terminal(*args, **kw) -> Terminal:
        opened.append(Terminal(list(args), **kw))
        return opened[-1]

    yield open_terminal
    for terminal in opened:
        terminal.close()


def unconfigured_env(home: Path, servers: str, **extra) -> dict:
    """A new user's shell: no WORKSPACE, no LLM_URL; the probed servers are the test's."""
    env = cli_env(home, None, HOME=str(home), TERM="dumb", FIRST_RUN_SERVERS=servers, **extra)
    del env["WORKSPACE"], env["LLM_URL"]
    return env


def test_first_run_asks_saves_dotenv_and_the_next_start_does_not_ask(project, home, llm, terminals):
    servers = f"Nothing here={closed_port_url()},Scripted={llm.url}"
    env = unconfigured_env(home, servers)
    repl = terminals(cwd=project, env=env)
    repl.expect("First run")
    repl.expect(f"Use the current directory {project} as the workspace? [Y/n]")
    repl.type("y")
    shown = repl.expect("[" + llm.url + "]: ")
    assert f"1) Scripted at {llm.url}" in shown and "Nothing here" not in shown
    repl.type("1")
    repl.expect("Save these to")
    repl.type("")
    started = repl.expect("Type a task")
    assert f"workspace {project}" in started and f"at {llm.url}" in started
    repl.type("quit")
    assert repl.finish() == 0
    saved = dotenv_values(project / ".env")
    assert saved == {"WORKSPACE": str(project), "LLM_URL": llm.url}

    again = terminals(cwd=project, env=env)
    started = again.expect("Type a task")
    assert "First run" not in started and f"workspace {project}" in started
    again.type("quit")
    assert again.finish() == 0


def test_declining_asks_for_a_folder_a_typed_url_and_saves_nothing(project, home, llm, terminals):
    llm.add(text("Hello.\nTASK_COMPLETE"))
    env = unconfigured_env(home, f"LM Studio={closed_port_url()}")
    elsewhere = home / "work" / "new"
    run = terminals("say hello", cwd=project, env=env)
    run.expect("as the workspace? [Y/n]")
    run.type("n")
    run.expect("Workspace directory: ")
    run.type("")  # no default folder: asked again
    run.expect("type the path of a folder")
    run.type(str(elsewhere))
    run.expect(f"{elsewhere} does not exist. Create it? [Y/n]")
    assert not elsewhere.exists()  # only when the answer is yes
    run.type("y")
    shown = run.expect("Server URL [http://localhost:1234/v1/chat/completions]: ")
    assert f"created {elsewhere}" in shown
    assert "No LLM server answered (LM Studio" in shown
    assert "run with --embedded: a small bundled model" in " ".join(shown.split())
    run.type("localhost:1234")  # no scheme: refused, asked again
    run.expect("is not valid")
    run.type(llm.url)
    run.expect("[Y/n]")
    run.type("n")
    assert run.finish() == 0, run.shown
    assert f"workspace {elsewhere}" in run.shown
    assert not (project / ".env").exists()
    assert len(llm.requests) == 1


def test_a_closed_terminal_during_the_questions_is_one_clear_line(project, home, terminals):
    run = terminals("say hello", cwd=project, env=unconfigured_env(home, ""))
    run.expect("[Y/n]")
    run.type("\x04")  # Ctrl+D: end of input
    assert run.finish() == 1
    assert "error: first run cancelled; set WORKSPACE and LLM_URL" in run.shown
    assert not (project / ".env").exists()


def test_a_configured_shell_is_never_asked(project, home, llm, terminals):
    env = {**unconfigured_env(home, llm.url), "WORKSPACE": str(project)}
    repl = terminals(cwd=project, env=env)
    started = repl.expect("Type a task")
    assert "First run" not in started
    repl.type("quit")
    assert repl.finish() == 0


def test_without_a_terminal_nothing_is_asked(project, home, llm):
    env = unconfigured_env(home, f"Scripted={llm.url}")
    done = cli(project, llm, input="quit\n", env=env)  # the REPL, its input a pipe
    assert done.returncode == 0, done.stderr
    assert "First run" not in done.stdout and "[Y/n]" not in done.stdout
    assert f"workspace {project}" in done.stdout  # the folder it was started in
    assert not (home / "lm_workspace").exists()
    assert not (project / ".env").exists()


def test_several_servers_are_offered_by_number_and_a_bad_number_is_asked_again():
    with ScriptedLLM(models=["alpha"]) as first, ScriptedLLM(models=["beta"]) as second:
        answers = iter(["7", "2"])
        said: list[str] = []
        chooser = FirstRun(ask=lambda prompt: said.append(prompt) or next(answers), say=said.append)
        url = chooser.choose_server([("One", first.url), ("Two", second.url)])
        assert url == second.url
        assert f"  1) One at {first.url} (model alpha)" in said
        assert f"  2) Two at {second.url} (model beta)" in said
    assert any("is not valid" in line for line in said)  # "7" is neither a choice nor a URL
