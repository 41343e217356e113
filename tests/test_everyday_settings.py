"""Settings as a new user writes them: a typo in .env is named once with the fix, and a URL
that cannot work is refused at start-up with one line."""

from __future__ import annotations

import pytest

from lmagent.core.config import Config, ConfigError
from tests.cli_process import cli, cli_env
from tests.scripted_llm import text


def test_a_typo_in_dotenv_is_warned_about_once_naming_the_right_variable(workspace, llm):
    (workspace / ".env").write_text("PERMISION_MODE=auto\n")
    llm.add(text("Done.\nTASK_COMPLETE"))
    env = cli_env(workspace, llm)
    del env["PERMISSION_MODE"]
    done = cli(workspace, llm, "say hi", env=env)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert "unknown setting PERMISION_MODE is ignored; did you mean PERMISSION_MODE?" in line
    assert str(workspace / ".env") in line
    assert "permission mode normal" in done.stdout  # the typo did not switch to auto


def test_an_unknown_key_without_a_close_match_points_at_the_example(workspace, llm):
    (workspace / ".env").write_text("GREETING=hello\nLLM_MODEL=m\n")
    done = cli(workspace, llm, "--list-sessions")
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert "unknown setting GREETING is ignored; every variable is listed in .env.example" in line


def test_the_warning_is_given_once_per_process(workspace, capsys):
    (workspace / ".env").write_text("LLM_MODLE=qwen\n")
    environ = {"WORKSPACE": str(workspace)}
    first = Config.load(environ=environ, cwd=workspace)
    Config.load(environ=environ, cwd=workspace)
    assert capsys.readouterr().err.count("did you mean LLM_MODEL?") == 1
    assert first.llm_model == ""


def test_known_keys_are_not_warned_about(workspace, capsys):
    (workspace / ".env").write_text("LLM_MODEL=qwen\nSANDBOX_DEBIAN_MIRROR=http://mirror\n")
    config = Config.load(environ={"WORKSPACE": str(workspace)}, cwd=workspace)
    assert config.llm_model == "qwen"
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("url", ["localhost:1234", "http://", "http://host:port/v1", "embeded"])
def test_a_url_in_dotenv_that_cannot_work_stops_the_start_with_one_line(workspace, url):
    (workspace / ".env").write_text(f"LLM_URL={url}\n")
    env = cli_env(workspace)
    del env["LLM_URL"]
    done = cli(workspace, None, "say hi", env=env)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: LLM_URL={url!r} is not valid")
    assert "http://localhost:1234/v1/chat/completions" in line and done.stdout == ""


def test_a_bad_url_is_refused_by_config_itself(workspace):
    with pytest.raises(ConfigError, match="LLM_URL='localhost:1234' is not valid"):
        Config.load(environ={"WORKSPACE": str(workspace), "LLM_URL": "localhost:1234"})
