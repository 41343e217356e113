"""The embedded server's speed features against llama.cpp's real server (xllamacpp, as
--embedded runs it) with SmolLM2: a prompt saved by one server process is restored by the next
(which then reads only what is new), a damaged one is refused and replaced, and speculative
decoding does not change a greedy reply."""

from __future__ import annotations

import subprocess
import sys

import pytest

import lmagent.llm.embedded as embedded_llm
from lmagent.llm.client import Callbacks, LLMClient
from tests.cli_process import ROOT, cli_env
from tests.realmodel_fixtures import N_CTX, THREADS, need_model, need_module, real_config

pytestmark = pytest.mark.realmodel

SYSTEM = "You are a helpful assistant who answers in one short sentence. " + " ".join(
    f"Rule {n}: be brief, be kind, and never use more words than needed." for n in range(1, 21)
)


def server(slots=None, speculation="none") -> embedded_llm.EmbeddedServer:
    need_module("xllamacpp")
    return embedded_llm.EmbeddedServer(
        need_model(), n_ctx=N_CTX, threads=THREADS, slots=slots, speculation=speculation
    )


def ask(workspace, running, question: str, system: str = SYSTEM):
    """(the reply, the statuses shown) of one request to `running`."""
    client = LLMClient(real_config(workspace, running, llm_max_tokens=16))
    shown: list[str] = []
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    try:
        return client.chat(messages, callbacks=Callbacks(on_status=shown.append)), shown
    finally:
        client.close()


def test_a_new_server_process_restores_the_saved_prompt(workspace, tmp_path):
    slots = tmp_path / "kv"
    with server(slots) as first:
        cold, shown = ask(workspace, first, "What is the capital of France?")
    assert shown == [] and cold.timings["prompt_n"] > 300  # read whole
    with server(slots) as second:
        warm, shown = ask(workspace, second, "What colour is the sky?")
    assert len(shown) == 1 and shown[0].startswith("reused the saved prompt (")
    assert warm.timings["prompt_n"] < 40  # only the new question was read


def test_a_second_one_shot_embedded_run_says_it_reused_the_saved_prompt(workspace, tmp_path):
    need_module("xllamacpp")
    need_model()
    env = cli_env(workspace, None, EMBEDDED_MODEL="smollm2", XDG_CACHE_HOME=str(tmp_path))
    env.update(LLM_TEMPERATURE="0", LLM_MAX_TOKENS="8", MAX_ITERATIONS="1", LLM_TIMEOUT="180")
    del env["LLM_URL"]  # --embedded alone
    command = [sys.executable, str(ROOT / "agent_main.py"), "--embedded", "say hi"]
    shown = []
    for _ in range(2):
        done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True)
        shown.append(done.stdout + done.stderr)
    assert "reused the saved prompt" not in shown[0]
    assert "· reused the saved prompt (" in shown[1], shown[1]
    assert list((tmp_path / "lmagent" / "kv").glob("*.bin"))


def test_a_users_llamacpp_server_with_slot_save_path_gives_a_new_run_its_saved_prompt(
    workspace, tmp_path
):
    """A user's own llama.cpp server started with --slot-save-path, restarted between two
    one-shot runs (LLM_URL, no --embedded): the second run says it reused the saved prompt."""
    need_module("xllamacpp")
    need_model()
    slots = tmp_path / "server-slots"
    shown = []
    port = None
    for _ in range(2):
        restarted = server(slots)
        restarted.port = port = port or restarted.port  # the user's server keeps its address
        with restarted as running:
            env = cli_env(workspace, running, XDG_CACHE_HOME=str(tmp_path / "cache"))
            env.update(LLM_TEMPERATURE="0", LLM_MAX_TOKENS="8", MAX_ITERATIONS="1")
            command = [sys.executable, str(ROOT / "agent_main.py"), "say hi"]
            done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True)
            shown.append(done.stdout + done.stderr)
    assert "reused the saved prompt" not in shown[0], shown[0]
    assert "· reused the saved prompt (" in shown[1], shown[1]
    assert list((tmp_path / "cache" / "lmagent" / "kv" / "servers").glob("lmagent-*.json"))


def test_a_damaged_saved_prompt_is_refused_and_replaced(workspace, tmp_path):
    slots = tmp_path / "kv"
    with server(slots) as first:
        ask(workspace, first, "What is the capital of France?")
    (state,) = slots.glob("*.bin")
    state.write_bytes(b"not a llama.cpp state file" * 100)
    with server(slots) as second:
        reply, shown = ask(workspace, second, "What colour is the sky?")
        assert second.process.poll() is None  # refused, not crashed
    assert shown == [] and reply.timings["prompt_n"] > 300 and reply.content
    assert state.stat().st_size > 100_000  # saved anew, from this run


def test_speculation_does_not_change_a_greedy_reply(workspace):
    question = (
        "Copy this text exactly: The quick brown fox jumps over the lazy dog. "
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."
    )
    replies = {}
    for speculation in ("none", "ngram-simple"):
        with server(speculation=speculation) as running:
            client = LLMClient(real_config(workspace, running, llm_max_tokens=48))
            messages = [{"role": "user", "content": question}]
            replies[speculation] = client.chat(messages)
            client.close()
    plain, speculated = replies.values()
    assert speculated.timings.get("draft_n", 0) > 0  # it did speculate
    assert speculated.content == plain.content
