"""The embedded server's prompt kept across processes (lmagent/llm/kvcache.py), against the
scripted server's llama.cpp slot endpoints: each "process" is a new PromptCache and client on the
same cache folder, as a new `--embedded` run makes them. The real llama.cpp server is exercised
by tests/test_kvcache_realmodel.py."""

from __future__ import annotations

import json

import pytest

from lmagent.llm import kvcache
from lmagent.llm.client import Callbacks, LLMClient
from lmagent.runtime import Runtime
from tests.conftest import make_config
from tests.scripted_llm import DEFAULT_PROPS, ScriptedLLM, text

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
    try:
        return converse(server, client, task, system, replies)
    finally:
        cache.unregister(save=True)
        client.close()


def converse(server, client, task: str, system: str, replies: int) -> list[str]:
    """`replies` requests of one conversation; the statuses they showed."""
    shown: list[str] = []
    messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for n in range(replies):
        server.add(text(f"reply {n}"))
        reply = client.chat(messages, callbacks=Callbacks(on_status=shown.append))
        messages.append({"role": "assistant", "content": reply.content})
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


# --------------------------------------------------------------------------- a user's server


def user_process(llm, workspace, task: str, system: str = SYSTEM, replies: int = 1) -> list[str]:
    """One process run against a user's llama.cpp server (LLM_URL, no --embedded): its Runtime
    (the probe, the prompt cache), `replies` requests, its close. The statuses it showed."""
    runtime = Runtime(make_config(workspace, llm))
    client = runtime.client()
    try:
        return converse(llm, client, task, system, replies)
    finally:
        client.close()
        runtime.close()


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "lmagent" / "kv" / "servers"


def test_a_users_llamacpp_server_with_slot_save_path_keeps_the_prompt(
    tmp_path, cache_home, workspace
):
    """llama.cpp started with --slot-save-path: a new process (after a restart of the server)
    restores what the last one read; the state file is the server's, the record ours."""
    folder = tmp_path / "server-slots"
    folder.mkdir()
    with ScriptedLLM(props=DEFAULT_PROPS, models=False, slot_save_path=folder) as llm:
        assert user_process(llm, workspace, "list the files", replies=2) == []
        assert llm.slot_actions == ["save", "save"]  # the prompt at once, all of it at the end
        (state,) = folder.iterdir()
        (kept,) = cache_home.iterdir()
        assert kept.name == state.name.replace(".bin", ".json")
        record = json.loads(kept.read_text())
        assert record["identity"]["server"] == llm.base_url
        assert record["identity"]["model"] == DEFAULT_PROPS["model_path"]
        shown = user_process(llm, workspace, "read app.py")
        assert llm.slot_actions[2] == "restore"
        assert shown == [f"reused the saved prompt ({record['tokens']} tokens) from the cache"]


def test_a_users_server_without_slot_save_path_is_asked_once_and_nothing_kept(
    cache_home, workspace
):
    with ScriptedLLM(props=DEFAULT_PROPS, models=False) as llm:
        assert user_process(llm, workspace, "list the files", replies=3) == []
        assert llm.slot_actions == ["save"]  # refused (501): not asked again, nor at the end
        assert user_process(llm, workspace, "list the files") == []
    assert not cache_home.exists()


def test_a_users_server_with_several_slots_is_not_asked(tmp_path, cache_home, workspace):
    """Which slot a request lands in is the server's choice: none is saved or overwritten."""
    folder = tmp_path / "server-slots"
    folder.mkdir()
    props = {**DEFAULT_PROPS, "total_slots": 4}
    with ScriptedLLM(props=props, models=False, slot_save_path=folder) as llm:
        user_process(llm, workspace, "list the files", replies=2)
        assert llm.slot_actions == []


def test_a_record_of_another_users_server_model_is_refused(tmp_path, cache_home, workspace):
    folder = tmp_path / "server-slots"
    folder.mkdir()
    with ScriptedLLM(props=DEFAULT_PROPS, models=False, slot_save_path=folder) as llm:
        user_process(llm, workspace, "list the files")
        llm.props = {**DEFAULT_PROPS, "model_path": "/models/other.gguf"}
        assert user_process(llm, workspace, "list the files") == []
        assert llm.slot_actions == ["save", "save"]  # never restored into the other model
