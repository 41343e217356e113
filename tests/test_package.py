"""The installable package: `pip install .` gives working commands in any directory, and the
settings are read once, with the precedence the README states."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import lmagent.core.config as config_module
from lmagent.core.config import Config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the package installed from this checkout the way the README says
    (`pip install .`; the build backend comes from the package index, the dependencies from
    the interpreter running the tests); returns its bin directory."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, system_site_packages=True, with_pip=True)
    bin_dir = home / "bin"
    subprocess.run(
        [
            bin_dir / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return bin_dir


def run_command(bin_dir: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKSPACE": str(cwd / "ws"), "SANDBOX_BACKEND": "process"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_installed_commands_work_from_another_directory(installed, tmp_path):
    version = run_command(installed, "lmagent", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("lmagent ")
    help_text = run_command(installed, "lmagent", "--help", cwd=tmp_path)
    assert help_text.returncode == 0 and "usage: lmagent" in help_text.stdout
    web = run_command(installed, "lmagent-web", "--help", cwd=tmp_path)
    assert web.returncode == 0 and "usage: lmagent-web" in web.stdout
    check = run_command(installed, "lmagent-sandbox", "--check", cwd=tmp_path)
    assert "backend: process" in check.stdout, check.stdout + check.stderr


def test_the_installed_package_is_the_copy_in_site_packages(installed, tmp_path):
    """Not this checkout found through the current directory: the web UI's pages and the
    sandbox's runner are package data and come along."""
    code = (
        "import lmagent, pathlib; p = pathlib.Path(lmagent.__file__).parent; print(p); "
        "print((p / 'web/templates/index.html').is_file(), (p / 'web/static/js/app.js').is_file(),"
        " (p / 'sandbox/runner.py').is_file(), (p / 'sandbox/Dockerfile').is_file())"
    )
    done = run_command(installed, "python", "-c", code, cwd=tmp_path)
    where, files = done.stdout.splitlines()
    assert not Path(where).is_relative_to(ROOT)
    assert files == "True True True True"


@pytest.fixture
def checkout_env(tmp_path, monkeypatch):
    """A stand-in for the `.env` next to the scripts (the checkout's root)."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setattr(config_module, "SCRIPT_DIR", checkout)
    return checkout / ".env"


def test_the_current_directorys_env_outranks_the_checkouts(checkout_env, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    checkout_env.write_text("LLM_MODEL=from-checkout\nMAX_ITERATIONS=7\n")
    (here / ".env").write_text("LLM_MODEL=from-cwd\n")
    config = Config.load(environ={}, cwd=here)
    assert config.llm_model == "from-cwd"
    assert config.max_iterations == 7  # the checkout's file still fills in what is unset


def test_environment_and_flags_outrank_both_env_files(checkout_env, tmp_path):
    checkout_env.write_text("LLM_MODEL=from-checkout\n")
    (tmp_path / ".env").write_text("LLM_MODEL=from-cwd\nMAX_ITERATIONS=9\n")
    config = Config.load(environ={"LLM_MODEL": "from-env"}, cwd=tmp_path)
    assert config.llm_model == "from-env"
    flagged = Config.load(environ={}, overrides={"max_iterations": 3}, cwd=tmp_path)
    assert flagged.max_iterations == 3


def sandbox_check(cwd: Path) -> subprocess.CompletedProcess:
    """`python sandboxed_shell.py --check` in `cwd`, with no sandbox settings or workspace in
    the environment (so only the `.env` files count)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SANDBOX_", "WORKSPACE"))}
    return subprocess.run(
        [sys.executable, str(ROOT / "sandboxed_shell.py"), "--check"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sandbox_command_reads_the_env_file(tmp_path):
    """`sandboxed_shell.py` takes its settings from the one Config, so `.env` counts (it used to
    read only the environment, with defaults of its own)."""
    (tmp_path / "ws").mkdir()
    (tmp_path / ".env").write_text(
        f"WORKSPACE={tmp_path / 'ws'}\nSANDBOX_BACKEND=process\nSANDBOX_IMAGE=lmagent-test:x\n"
    )
    done = sandbox_check(tmp_path)
    assert "backend: process" in done.stdout
    assert f"workspace: {tmp_path / 'ws'}" in done.stdout


def test_sandbox_command_reports_a_bad_setting_in_one_line(tmp_path):
    (tmp_path / ".env").write_text("SANDBOX_BACKEND=chroot\n")
    done = sandbox_check(tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "SANDBOX_BACKEND" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
