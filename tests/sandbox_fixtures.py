"""Fixtures for the sandbox tests; test modules load them with pytest_plugins.

One fixture (`sandbox_engines`) probes Docker and bubblewrap once per session. A test that needs
an engine that is missing is skipped with the reason, except under CI=true, where it fails: CI
must run the sandbox tests on a real engine. Containers made for test workspaces are removed at
the end of the session.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import describe_backend, open_sandbox

ISOLATING_BACKENDS = ("docker", "bwrap")
SANDBOX_IMAGE = os.environ.get("SANDBOX_IMAGE") or SandboxConfig.image  # as the agent reads it


@pytest.fixture(scope="session")
def sandbox_engines() -> dict[str, tuple[bool, str]]:
    """{backend: (usable, reason)} for docker and bwrap, probed once."""
    probe_dir = Path(tempfile.gettempdir()).resolve()
    engines = {}
    for backend in ISOLATING_BACKENDS:
        cfg = SandboxConfig(workspace=probe_dir, backend=backend, image=SANDBOX_IMAGE)
        name, reason = describe_backend(cfg)
        engines[backend] = (name == backend, reason)
    return engines


def require_engine(engines: dict[str, tuple[bool, str]], backend: str) -> None:
    usable, reason = engines.get(backend, (True, ""))
    if usable:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the {backend} sandbox must be available in CI: {reason}")
    pytest.skip(f"{backend} sandbox unavailable: {reason}")


@pytest.fixture
def require_backend(sandbox_engines):
    """require_backend("docker"): skip (or fail under CI=true) unless that backend works."""
    return lambda backend: require_engine(sandbox_engines, backend)


@pytest.fixture(scope="session")
def test_workspaces(sandbox_engines):
    """Workspaces handed to sandboxes in this session; their containers go at the end."""
    workspaces: list[Path] = []
    yield workspaces
    if not sandbox_engines["docker"][0]:
        return
    from lmagent.sandbox.docker import remove_containers

    for workspace in workspaces:
        remove_containers(workspace=workspace)


class SandboxMaker:
    """make(backend, workspace=None, **config) -> an open sandbox; close_all() closes them."""

    def __init__(self, engines, workspaces, tmp_path_factory):
        self.engines, self.workspaces, self.tmp = engines, workspaces, tmp_path_factory
        self.opened = []

    def __call__(self, backend: str, workspace: Path | None = None, **config):
        require_engine(self.engines, backend)
        workspace = (workspace or self.tmp.mktemp(f"ws-{backend}")).resolve()
        self.workspaces.append(workspace)
        config.setdefault("image", SANDBOX_IMAGE)
        sandbox = open_sandbox(SandboxConfig(workspace=workspace, backend=backend, **config))
        self.opened.append(sandbox)
        return sandbox

    def close_all(self) -> None:
        for sandbox in self.opened:
            sandbox.close()


@pytest.fixture
def sandbox_image() -> str:
    """The image the Docker sandboxes of the tests use (SANDBOX_IMAGE, as for the agent)."""
    return SANDBOX_IMAGE


@pytest.fixture
def make_sandbox(sandbox_engines, test_workspaces, tmp_path_factory):
    """A SandboxMaker whose sandboxes are closed after the test."""
    maker = SandboxMaker(sandbox_engines, test_workspaces, tmp_path_factory)
    yield maker
    maker.close_all()


@pytest.fixture(params=ISOLATING_BACKENDS)
def sandbox(request, make_sandbox):
    """A fresh sandbox (own workspace) on each isolating backend."""
    return make_sandbox(request.param)


@pytest.fixture(scope="module", params=ISOLATING_BACKENDS)
def shared_sandbox(request, sandbox_engines, test_workspaces, tmp_path_factory):
    """One sandbox per backend for a whole module, for tests that leave nothing behind."""
    maker = SandboxMaker(sandbox_engines, test_workspaces, tmp_path_factory)
    yield maker(request.param)
    maker.close_all()
