"""What the command line says is true, as a new user meets it: where it works (the folder it is
started in, named on the banner's first line; a missing --workspace is an error, nothing
created; a task about a file that is not there names the workspace and how to pick another),
how a run ended (interrupted, a server error with its status and message, counts in the right
number, tokens that streamed counted), which timeout ran out, messages cut only at a word, and
the model's measured speeds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lmagent.cli.main import build_parser, load_config
from lmagent.core.text import shortened
from lmagent.llm.client import Callbacks, LLMClient
from lmagent.llm.embedded import DEFAULT_MODEL
from lmagent.llm.toolcalls import FormatError
from tests.cli_process import cli, cli_env
from tests.conftest import make_config
from tests.pty_terminal import cli_with_terminal
from tests.scripted_llm import error, text, tool_call

ROOT = Path(__file__).resolve().parent.parent


def unset_workspace(env: dict) -> dict:
    return {k: v for k, v in env.items() if k != "WORKSPACE"}


# --------------------------------------------------------------------------- where it works


def test_at_a_terminal_the_folder_it_is_started_in_is_the_workspace_named_first(workspace, llm):
    llm.add(text("Nothing here.\nTASK_COMPLETE"))
    env = unset_workspace(cli_env(workspace, llm))
    done = cli_with_terminal(workspace, "list the files here", env=env)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"· workspace {workspace.resolve()} ·"), done.stdout


def test_what_lmagent_will_keep_in_a_new_folder_is_said_first(workspace, llm):
    llm.add(text("Nothing here.\nTASK_COMPLETE"), text("Still nothing.\nTASK_COMPLETE"))
    done = cli_with_terminal(workspace, "list the files here", env=cli_env(workspace, llm))
    said = " ".join(done.stdout.split())
    assert (
        f"new here: LMAgent keeps .lmagent/ (sessions, checkpoints) in {workspace.resolve()}"
        in said
    )
    assert (workspace / ".lmagent").is_dir()
    again = cli_with_terminal(workspace, "list them again", env=cli_env(workspace, llm))
    assert "new here" not in again.stdout  # said once, when they are new


def test_a_sandbox_says_it_will_make_lmagent_md(tmp_path):
    from lmagent.runtime import new_files_line

    (line,) = new_files_line(tmp_path, sandboxed=True)
    assert ".lmagent.md (project notes read into every prompt; read-only to commands)" in line
    (tmp_path / ".lmagent").mkdir()
    (tmp_path / ".lmagent.md").write_text("# notes\n")
    assert new_files_line(tmp_path, sandboxed=True) == []


def test_the_repls_first_line_names_the_workspace(workspace, llm):
    env = unset_workspace(cli_env(workspace, llm))
    done = cli_with_terminal(workspace, "--url", llm.url, typed="quit\n", env=env)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"LMAgent · workspace {workspace.resolve()} ·"), done.stdout


def test_embedded_without_workspace_works_in_the_current_folder(tmp_path, monkeypatch):
    """--embedded goes through the same load_config as every run: WORKSPACE unset and no
    terminal to ask, the workspace is the folder it is started in, not ~/lm_workspace."""
    monkeypatch.delenv("WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["--embedded", "list the files here"])
    assert load_config(args).workspace == tmp_path.resolve()


def test_embedded_at_a_terminal_asks_only_for_the_workspace(workspace, tmp_path):
    from tests.pty_terminal import Terminal

    env = unset_workspace(cli_env(workspace, None, HOME=str(tmp_path), TERM="dumb"))
    env["EMBEDDED_MODEL"] = str(tmp_path / "no-such-model.gguf")  # stops before any download
    terminal = Terminal(["--embedded", "list the files here"], cwd=workspace, env=env)
    try:
        terminal.expect("no WORKSPACE set. One question, then whether to save the answer.")
        terminal.expect(f"Use the current directory {workspace.resolve()} as the workspace?")
        terminal.type("y")
        terminal.expect("Save it to")
        terminal.type("n")
        assert terminal.finish() == 1
    finally:
        terminal.close()
    assert "Server URL" not in terminal.shown  # --embedded brings its own server
    assert "EMBEDDED_MODEL=" in terminal.shown and "is not a file" in terminal.shown


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_workspace_that_does_not_exist_is_an_error_naming_it_and_nothing_is_made(
    workspace, tmp_path, how
):
    missing = tmp_path / "typo" / "project"
    env = cli_env(workspace, None)
    if how == "flag":
        done = cli(workspace, None, "--workspace", str(missing), "say hi", env=env)
        named = "--workspace"
    else:
        done = cli(workspace, None, "say hi", env={**env, "WORKSPACE": str(missing)})
        named = "WORKSPACE"
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {named} {missing} does not exist; nothing was created")
    assert not (tmp_path / "typo").exists()


def test_the_web_front_end_refuses_a_missing_workspace_too(tmp_path, capsys):
    from lmagent.web.main import main

    missing = tmp_path / "nope"
    assert main(["--workspace", str(missing)]) == 1
    assert f"--workspace {missing} does not exist" in capsys.readouterr().err
    assert not missing.exists()


def test_a_task_about_a_file_not_in_the_workspace_names_the_workspace(workspace, llm):
    """The user is told which workspace and how to pick another; the model is never told to
    write the file (told so, it wrote a fresh hello-world app.py)."""
    llm.add(
        tool_call("shell", {"command": "python3 app.py"}),
        text("app.py is not here.\nBLOCKED: app.py is not in the workspace"),
        text("BLOCKED: app.py is not in the workspace"),
    )
    done = cli(workspace, llm, "Running python3 app.py crashes. Fix it.")
    said = " ".join(done.stdout.split())
    assert f"app.py, named in the task, is not in the workspace {workspace.resolve()}" in said
    assert "start lmagent there, or pass --workspace DIR" in said
    told = json.dumps(llm.requests[1]["messages"])
    assert f"app.py does not exist in the workspace ({workspace.resolve()})" in told
    assert "write it" not in told
    assert not (workspace / "app.py").exists()


def test_a_task_that_makes_the_file_it_names_is_not_stopped(workspace, llm):
    llm.add(
        tool_call("write", {"path": "app.py", "content": "print('hi')\n"}),
        text("Written.\nTASK_COMPLETE"),
    )
    done = cli(workspace, llm, "Write app.py that prints hi, then fix any error")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "app.py").exists()


# --------------------------------------------------------------------------- endings


def test_one_reply_is_one_iteration(workspace, llm):
    llm.add(text("Hi.\nTASK_COMPLETE"))
    done = cli(workspace, llm, "say hi")
    assert done.returncode == 0, done.stderr
    assert " · 1 iteration · " in done.stdout and "1 iterations" not in done.stdout


def test_a_server_error_says_its_status_and_message_and_no_answer(workspace, llm):
    llm.add(error(404, {"error": {"message": "model 'qwen-x' not found"}}))
    done = cli(workspace, llm, "say hi")
    assert done.returncode == 1
    assert "HTTP 404" in done.stderr and "model 'qwen-x' not found" in done.stderr
    assert "stopped by an error before any tool ran" in done.stdout
    assert "answered" not in done.stdout


def test_an_interrupted_reply_says_interrupted_and_counts_what_streamed(workspace, llm, running):
    lines = "".join(f"line {n} of a long answer\n" for n in range(200))
    llm.add(text(lines, chunk_size=25, chunk_delay=0.05))
    run = running(workspace, llm, "write a long answer")
    run.wait_for("line 3 of a long answer")
    run.proc.send_signal(signal.SIGINT)
    code, _ = run.finish()
    assert code == 130
    ending = run.wait_for("— interrupted")
    assert "interrupted before any tool ran" in ending and "answered" not in ending
    assert " · 0 tokens" not in ending and " tokens · session" in ending


# --------------------------------------------------------------------------- messages


def test_a_reply_that_stops_coming_names_the_timeout_and_its_value(workspace, llm):
    llm.add(
        text("first words, then silence", chunk_size=6, chunk_delay=3),
        text("Done.\nTASK_COMPLETE"),
    )
    said: list[str] = []
    client = LLMClient(make_config(workspace, llm, llm_timeout=1.0))
    client.chat([{"role": "user", "content": "hi"}], callbacks=Callbacks(on_status=said.append))
    assert said == ["the reply broke off: no data for LLM_TIMEOUT=1 s; asking again; try 2"]


def test_a_long_message_is_cut_at_a_word_with_an_ellipsis():
    problem = str(FormatError("the JSON is invalid or cut off"))
    cut = shortened(problem, 200)
    assert len(cut) <= 200 and cut.endswith("…")
    words = problem.split()
    assert all(word in words for word in cut.removesuffix("…").split())
    assert shortened("short enough", 200) == "short enough"


def test_the_embedded_servers_help_is_whole():
    done = subprocess.run(
        [sys.executable, "-m", "lmagent.llm.embedded", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    said = " ".join(done.stdout.split())
    assert "`lmagent --embedded` starts it as a child process." in said
    assert "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched once, 1.1 GB)" in said
    assert "context window in tokens" in said


def test_requirements_local_names_the_model_it_brings():
    said = " ".join((ROOT / "requirements-local.txt").read_text().split())
    assert DEFAULT_MODEL.file == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert round(DEFAULT_MODEL.size / 1e9, 1) == 1.1
    assert "The bundled model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB)" in said


# --------------------------------------------------------------------------- speeds

TIMINGS = {
    "prompt_n": 600,
    "prompt_per_second": 38.4,
    "predicted_n": 20,
    "predicted_per_second": 14.2,
}


def test_the_measured_speeds_are_said_once_after_the_first_reply(workspace, llm):
    (workspace / "a.txt").write_text("hello\n")
    llm.add(
        tool_call("read", {"path": "a.txt"}, timings=TIMINGS),
        text("It says hello.\nTASK_COMPLETE", timings=TIMINGS),
    )
    done = cli(workspace, llm, "what does a.txt say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("· model speed: reading 38 tokens/s, writing 14 tokens/s") == 1
    before, _, after = done.stdout.partition("model speed")
    assert "reading the prompt" in before and "It says hello." in after  # after the first reply


def test_json_gets_the_speeds_as_a_status_event(workspace, llm):
    import json

    llm.add(text("Hi.\nTASK_COMPLETE", timings=TIMINGS))
    done = cli(workspace, llm, "--json", "say hi")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (speed,) = [e for e in events if e["type"] == "status" and "tokens_per_second" in e]
    assert speed["tokens_per_second"] == {"reading": 38.4, "writing": 14.2}


def test_a_step_that_will_take_minutes_is_said_once_with_the_faster_choices(workspace, llm):
    (workspace / "big.txt").write_text("word " * 4000)
    slow = {"prompt_n": 600, "prompt_per_second": 5.0, "predicted_per_second": 2.0}
    llm.add(
        tool_call("read", {"path": "big.txt"}, timings=slow),
        tool_call("read", {"path": "big.txt", "offset": 1}, timings=slow),
        text("Read it.\nTASK_COMPLETE", timings=slow),
    )
    done = cli(workspace, llm, "what does big.txt say?")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert said.count("this step will take about") == 1
    assert "min at this speed" in said and "a smaller model" in said
    assert "SUMMARIZATION_THRESHOLD" in said


def test_a_slow_speed_keeps_a_decimal():
    from lmagent.loop.progress import rate

    assert (rate(38.4), rate(9.44), rate(1.04)) == ("38", "9.4", "1.0")  # never "1 tokens/s"
