"""The embedded server's prompt, kept across processes (llama.cpp's slot save and restore).

A one-shot `--embedded` run starts a fresh server, which would read the whole system prompt
again (~550 tokens, ~15 s on two cores). Instead, after a process's first reply the server saves
slot 0's KV state (the system prompt and what followed) into the cache folder, and again when the
server stops (a conversation to --resume); the next process's first request with the same system
prompt restores it first, and the server reads only what is new.

One file per model file: `<name>.bin` (llama.cpp's state file) and `<name>.json`, which says what
it holds: the model file (path, size, modification time), the server settings that shape the KV
state, llama.cpp's version, and a hash of the system prompt (and tool schemas). A file that does
not match all of them, or that the server cannot load, is stale: it is deleted, and the prompt is
read normally (and saved anew after the reply).

A user's own llama.cpp server started with `--slot-save-path` and one slot gets the same
(`server_cache`): the state file is then in the server's folder, under the same name, and only
the record is kept here; a server without the option refuses the first save (501), and nothing
is asked of it again. The identity is the server's address, its model file, window and build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import requests

SLOT = 0  # the embedded server runs one slot
TIMEOUT = 120  # seconds for a save or restore (a full 8,192-token context is ~230 MB)
_caches: dict[str, PromptCache] = {}  # by server base URL: the embedded servers of this process


def prompt_key(messages: list[dict], tools: list[dict] | None = None) -> str:
    """What decides the start of the server's prompt: the system message and any tool schemas."""
    system = messages[0].get("content") if messages and messages[0]["role"] == "system" else None
    head = {"system": system, "tools": tools or None}
    return hashlib.sha256(json.dumps(head, sort_keys=True).encode("utf-8")).hexdigest()


class PromptCache:
    """Saves and restores slot 0 of the llama.cpp server at `base_url`, whose --slot-save-path
    is `folder`; `identity` is everything besides the prompt that must match (the model file,
    the server's settings and version), `name` the files' name."""

    def __init__(
        self,
        base_url: str,
        folder: Path,
        name: str,
        identity: dict,
        state_here: bool = True,
        headers: dict | None = None,
    ):
        self.base_url = base_url
        self.headers = headers or {}  # the server's key (client.auth_headers), if it asks one
        self.folder = folder
        self.name = name
        self.identity = identity
        self.state_here = state_here  # the state file is in `folder` (else the server's own)
        self._lock = threading.Lock()
        self._refused = False  # the server refused a save: it keeps no slots (not asked again)
        self._checked = False  # the first request looked for a saved prompt
        self._first = ""  # the key of the process's first prompt: the one kept
        self._kept = False  # the files hold that prompt (restored, or saved by this process)
        self._unsaved = False  # the slot holds more of that prompt's conversation than saved

    @property
    def state_file(self) -> Path:
        return self.folder / f"{self.name}.bin"

    @property
    def record_file(self) -> Path:
        return self.folder / f"{self.name}.json"

    def before(self, key: str, on_status: Callable[[str], None]) -> None:
        """Before a request: the first one of the process restores the saved prompt for `key`
        when there is a valid one (and says so), or drops a stale one."""
        with self._lock:
            if self._checked:
                return
            self._checked = True
            self._first = key
            record = self._record()
            if record is None:
                return
            if record != self._expected(key, record.get("tokens")):
                self.drop()
                return
            restored = self._slot_action("restore")
            if restored is None:
                self.drop()
                return
            self._kept = True
            tokens = restored.get("n_restored", record["tokens"])
            on_status(f"reused the saved prompt ({tokens} tokens) from the cache")

    def after(self, key: str) -> None:
        """After a complete reply: the process's first prompt is saved at once (the next run
        needs only its beginning); the conversation that follows it when the server stops
        (`unregister`)."""
        with self._lock:
            if key != self._first or self._refused:
                self._unsaved = False  # the slot now holds another prompt (a sub-agent's)
                return
            if self._kept:
                self._unsaved = True
            else:
                self._save(key)

    def register(self) -> PromptCache:
        """Offer this cache to the clients of this process that talk to `base_url`."""
        _caches[self.base_url] = self
        return self

    def unregister(self, save: bool) -> None:
        """No more requests; with `save` (the server still runs), keep the conversation of the
        first prompt beyond what was saved (--resume continues it)."""
        _caches.pop(self.base_url, None)
        with self._lock:
            if save and self._unsaved:
                self._save(self._first)

    def drop(self) -> None:
        """Delete the saved prompt (stale or damaged)."""
        kept_here = [self.state_file] if self.state_here else []  # else the server's to keep
        for path in [*kept_here, self.record_file]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _save(self, key: str) -> None:
        self._unsaved = False
        self.record_file.unlink(missing_ok=True)  # never a record beside a half-written file
        saved = self._slot_action("save")
        if saved is None:
            self._refused = True
            self.drop()
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.record_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(self._expected(key, saved.get("n_saved"))))
        os.replace(temporary, self.record_file)
        self._kept = True

    def _expected(self, key: str, tokens: object) -> dict:
        return {"identity": self.identity, "prompt": key, "tokens": tokens}

    def _record(self) -> dict | None:
        """The saved prompt's record; None (the files deleted when damaged) without one."""
        try:
            record = json.loads(self.record_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict) or (self.state_here and not self.state_file.is_file()):
            self.drop()
            return None
        return record

    def _slot_action(self, action: str) -> dict | None:
        """The server's answer to /slots/0?action=..., or None when it refused or failed."""
        try:
            response = requests.post(
                f"{self.base_url}/slots/{SLOT}?action={action}",
                json={"filename": self.state_file.name},
                headers=self.headers,
                timeout=TIMEOUT,
            )
            answer = response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None
        return answer if isinstance(answer, dict) and "error" not in answer else None


def cache_for(base_url: str) -> PromptCache | None:
    """The prompt cache of the embedded server at `base_url` in this process, if any."""
    return _caches.get(base_url)


def server_cache(
    base_url: str, folder: Path, props: dict, headers: dict | None = None
) -> PromptCache | None:
    """The prompt cache of a user's llama.cpp server at `base_url` that answered /props with
    `props`: one whose slot our requests use (one slot) and not the embedded server of this
    process (it has its own); records kept in `folder`; `headers`: LLM_API_KEY's. None otherwise."""
    if props.get("total_slots") != 1 or cache_for(base_url) is not None:
        return None
    model = str(props.get("model_path") or "")
    settings = props.get("default_generation_settings") or {}
    identity = {
        "server": base_url,
        "model": model,
        "n_ctx": settings.get("n_ctx") or props.get("n_ctx"),
        "llama.cpp": props.get("build_info") or "",
    }
    name = hashlib.sha256(f"{base_url} {model}".encode()).hexdigest()[:16]
    return PromptCache(
        base_url, folder, f"lmagent-{name}", identity, state_here=False, headers=headers
    )
