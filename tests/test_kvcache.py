"""The embedded server's prompt kept across processes (lmagent/llm/kvcache.py), against the
scripted server's llama.cpp slot endpoints: each "process" is a new PromptCache and client on the
same cache folder, as a new `--embedded` run makes them. The real llama.cpp server is exercised
by tests/test_kvcache_realmodel.py."""

from __future__ import annotations

import json

import pytest

from lmagent.llm import kvcache
from lmagent.llm.client import Callbacks, LLMClient
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text

IDENTITY = {"model": ["/models/m.gguf", 1000, 1], "n_ctx": 8192, "llama.cpp": "1"}
SYSTEM = "You are LMAgent. The tools: read, write."


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "kv"
    folder.mkdir()
    with ScriptedLLM(slot_save_path=folder) as llm:
        yield llm


def run_process(server, workspace, task: str, system: str = SYSTEM, identity=IDENTITY, replies=1):
    """One run against the server: a new prompt cache and client, `replies` requests, then the
    server's stop. The statuses it showed."""
    cache = kvcache.PromptCache(server.base_url, server.slot_save_path, "m", identity).register()
    client = LLMClient(make_config(workspace, server))
    shown: list[str] = []
    messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    try:
        for n in range(replies):
            server.add(text(f"reply {n}"))
            reply = client.chat(messages, callbacks=Callbacks(on_status=shown.append))
            messages.append({"role": "assistant", "content": reply.content})
    finally:
        cache.unregister(save=True)
        client.close()
    return shown


def record(server) -> dict:
    return json.loads((server.slot_save_path / "m.json").read_text())


def test_the_first_prompt_is_saved_and_a_new_process_restores_it(server, workspace):
    assert run_process(server, workspace, "list the files") == []
    assert server.slot_actions == ["save"]
    assert record(server)["prompt"] == kvcache.prompt_key([{"role": "system", "content": SYSTEM}])

    tokens = record(server)["tokens"]
    shown = run_process(server, workspace, "read app.py")
    assert server.slot_actions[:2] == ["save", "restore"]  # restored before the request
    assert shown == [f"reused the saved prompt ({tokens} tokens) from the cache"]


def test_a_longer_conversation_is_saved_when_the_server_stops(server, workspace):
    run_process(server, workspace, "list the files")
    run_process(server, workspace, "read app.py", replies=3)
    assert server.slot_actions == ["save", "restore", "save"]  # once, at the end (--resume)
    assert json.loads((server.slot_save_path / "m.bin").read_text())[-1]["content"] == "reply 1"


def test_a_prompt_of_another_system_prompt_is_refused_and_removed(server, workspace):
    run_process(server, workspace, "list the files")
    shown = run_process(server, workspace, "list the files", system=SYSTEM + " And grep.")
    assert shown == []
    assert server.slot_actions == ["save", "save"]  # never restored: read anew and saved anew
    assert record(server)["prompt"] != kvcache.prompt_key([{"role": "system", "content": SYSTEM}])


def test_a_prompt_of_another_model_file_is_refused_and_removed(server, workspace):
    run_process(server, workspace, "list the files")
    changed = {**IDENTITY, "model": ["/models/m.gguf", 1000, 2]}  # the file was replaced
    assert run_process(server, workspace, "list the files", identity=changed) == []
    assert server.slot_actions == ["save", "save"]
    assert record(server)["identity"] == changed


def test_a_damaged_saved_prompt_is_removed_and_the_prompt_read_normally(server, workspace):
    run_process(server, workspace, "list the files")
    (server.slot_save_path / "m.bin").write_text("garbage")
    cache = kvcache.PromptCache(server.base_url, server.slot_save_path, "m", IDENTITY)
    shown: list[str] = []
    cache.before(record(server)["prompt"], shown.append)
    assert server.slot_actions == ["save", "restore"] and shown == []
    assert list(server.slot_save_path.iterdir()) == []  # refused by the server: deleted


def test_a_damaged_record_is_removed(server, workspace):
    run_process(server, workspace, "list the files")
    (server.slot_save_path / "m.json").write_text("{not json")
    assert run_process(server, workspace, "list the files") == []
    assert server.slot_actions == ["save", "save"]
    assert record(server)["identity"] == IDENTITY


def test_a_client_of_another_server_keeps_no_prompt(server, workspace):
    """Only the embedded server's clients save: another server (LM Studio) is left alone."""
    server.add(text("hi"))
    LLMClient(make_config(workspace, server)).chat([{"role": "user", "content": "hi"}])
    assert server.slot_actions == []
