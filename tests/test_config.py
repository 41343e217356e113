"""Config.load: defaults, then .env files, then the environment, then command-line flags."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

import pytest

from lmagent.core.config import SCRIPT_DIR, Config, ConfigError, describe_settings


@pytest.fixture(autouse=True)
def no_dotenv_next_to_the_scripts():
    """A developer's own .env next to the scripts would (rightly) take part in every load."""
    if (SCRIPT_DIR / ".env").exists():
        pytest.skip(f"{SCRIPT_DIR / '.env'} exists and would change what these tests load")


def test_defaults_match_the_contract(tmp_path):
    config = Config.load(environ={}, cwd=tmp_path)
    assert config.workspace == tmp_path.resolve()  # the folder it is started in
    assert config.llm_url == "http://localhost:1234/v1/chat/completions"
    assert (config.permission_mode, config.max_iterations) == ("normal", 500)
    assert (config.summarization_threshold, config.llm_temperature) == (80000, 0.65)
    assert config.thinking_model is True


def test_a_blank_workspace_is_the_folder_it_is_started_in(tmp_path):
    assert Config.load(environ={"WORKSPACE": "  "}, cwd=tmp_path).workspace == tmp_path.resolve()


def test_a_dotenv_in_the_current_directory_fills_in_what_the_environment_does_not_set(tmp_path):
    (tmp_path / ".env").write_text(
        "MAX_ITERATIONS=7\n"
        "PERMISSION_MODE=manual\n"
        "LLM_MODEL='qwen2.5-coder'\n"
        "UNRELATED_SECRET=ignored\n"
        "# a comment\n"
    )
    config = Config.load(environ={"PERMISSION_MODE": "auto"}, cwd=tmp_path)
    assert config.max_iterations == 7  # from .env
    assert config.llm_model == "qwen2.5-coder"
    assert config.permission_mode == "auto"  # a real environment variable is never overridden


def test_flags_override_environment_and_dotenv(tmp_path):
    (tmp_path / ".env").write_text("PERMISSION_MODE=manual\nWORKSPACE=/from/dotenv\n")
    config = Config.load(
        environ={"PERMISSION_MODE": "normal"},
        overrides={"permission_mode": "auto", "workspace": str(tmp_path / "ws"), "llm_model": None},
        cwd=tmp_path,
    )
    assert config.permission_mode == "auto"
    assert config.workspace == (tmp_path / "ws").resolve()


def test_workspace_is_expanded_and_resolved(tmp_path):
    config = Config.load(environ={"WORKSPACE": "~/somewhere/../ws"}, cwd=tmp_path)
    assert config.workspace == (Path.home() / "ws").resolve()


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("PERMISSION_MODE", "bogus", "auto, normal, manual"),
        ("MAX_ITERATIONS", "abc", "a whole number of at least 1"),
        ("MAX_ITERATIONS", "0", "a whole number of at least 1"),
        ("AGENT_PORT", "70000", "a whole number from 1 to 65535"),
        ("LLM_TEMPERATURE", "-1", "a number from 0 to 2"),
        ("VISION_ENABLED", "sometimes", "auto, true, false"),
        ("TOOL_SET", "core", "auto, full, compact, tiny"),
        ("ENABLE_SUB_AGENTS", "perhaps", "true, false"),
        ("WORKSPACE", "/tmp/a\x00b", "usable directory path"),
        ("LLM_TIMEOUT", "nan", "a number of at least 1"),
        ("LLM_TIMEOUT", "inf", "a number of at least 1"),
        ("LLM_URL", "http://[::1", "an http:// or https:// URL"),
        ("LLM_URL", "http://localhost:99999/v1", "an http:// or https:// URL"),
        ("LLM_URL", "localhost:1234", "an http:// or https:// URL"),
        ("LLM_URL", "ftp://localhost/v1", "an http:// or https:// URL"),
        ("AGENT_HOST", "my host", "an IP address"),
        ("AGENT_HOST", "999.1.1.1", "an IP address"),
        ("AGENT_HOST", "-box.local", "an IP address"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_is_allowed(tmp_path, variable, value, allowed):
    with pytest.raises(ConfigError) as caught:
        Config.load(environ={variable: value}, cwd=tmp_path)
    message = str(caught.value)
    assert variable in message and allowed in message
    assert "\n" not in message


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
@pytest.mark.parametrize(
    "variable", [f.metadata["env"] for f in fields(Config) if f.type in ("int", "float")]
)
def test_every_numeric_setting_refuses_non_finite_numbers(tmp_path, variable, value):
    with pytest.raises(ConfigError) as caught:
        Config.load(environ={variable: value}, cwd=tmp_path)
    assert str(caught.value).startswith(f"{variable}={value!r} is not")


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("LLM_URL", "http://[::1]:1234/v1", "http://[::1]:1234/v1"),
        ("LLM_URL", " https://box.lan/v1/chat/completions ", "https://box.lan/v1/chat/completions"),
        ("LLM_URL", "embedded", "embedded"),
        ("AGENT_HOST", "127.0.0.1", "127.0.0.1"),
        ("AGENT_HOST", "::", "::"),
        ("AGENT_HOST", "my-box.local", "my-box.local"),
        ("AGENT_HOST", "localhost", "localhost"),
    ],
)
def test_good_urls_and_hosts_are_accepted(tmp_path, variable, value, expected):
    config = Config.load(environ={variable: value}, cwd=tmp_path)
    assert getattr(config, variable.lower()) == expected


def test_a_symlink_loop_as_workspace_is_refused_with_the_reason(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match=r"WORKSPACE=.* is not a usable directory path"):
        Config.load(environ={"WORKSPACE": str(tmp_path / "a")}, cwd=tmp_path)


def test_a_dotenv_that_is_not_utf8_names_the_file_and_the_fix(tmp_path):
    (tmp_path / ".env").write_bytes(b"LLM_MODEL=caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        Config.load(environ={}, cwd=tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / '.env'} is not UTF-8 text (byte 0xe9 at offset 13); save it as UTF-8"
    )


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/mem, which fails with EIO")
def test_a_dotenv_that_cannot_be_read_names_the_file_and_the_reason(tmp_path):
    (tmp_path / ".env").symlink_to("/proc/self/mem")  # a regular file whose read fails
    with pytest.raises(ConfigError) as caught:
        Config.load(environ={}, cwd=tmp_path)
    assert str(caught.value) == f"cannot read {tmp_path / '.env'}: Input/output error"


def test_a_dotenv_saved_with_a_byte_order_mark_is_read(tmp_path):
    (tmp_path / ".env").write_bytes("\ufeffMAX_ITERATIONS=9\n".encode())
    assert Config.load(environ={}, cwd=tmp_path).max_iterations == 9


def test_a_bad_value_in_dotenv_is_reported_too(tmp_path):
    (tmp_path / ".env").write_text("SANDBOX_NETWORK=everywhere\n")
    with pytest.raises(ConfigError, match=r"SANDBOX_NETWORK='everywhere'.*none, bridge"):
        Config.load(environ={}, cwd=tmp_path)


def test_every_setting_is_documented_in_env_example():
    example = (Path(__file__).resolve().parent.parent / ".env.example").read_text()
    for variable, default, _ in describe_settings():
        assert f"{variable}={default}" in example


def test_with_changes_returns_a_new_config(tmp_path):
    config = Config.load(environ={}, cwd=tmp_path)
    changed = config.with_changes(max_iterations=3)
    assert (config.max_iterations, changed.max_iterations) == (500, 3)
    with pytest.raises(AttributeError):
        config.max_iterations = 1  # frozen: never mutated at run time
