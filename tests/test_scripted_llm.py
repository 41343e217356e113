"""Proves ScriptedLLM speaks the OpenAI / LM Studio / llama.cpp wire format.

Uses plain ``requests`` (never the agent's client) so the fake is validated on its own.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

from tests.scripted_llm import (
    NO_TURNS_LEFT,
    ScriptedLLM,
    call,
    context_overflow,
    drop,
    error,
    loading,
    text,
    tool_call,
    tool_calls,
)

MSGS = [{"role": "user", "content": "hello"}]


def chat(llm: ScriptedLLM, stream: bool = False, timeout: float = 5, **extra):
    body = {"model": "m", "messages": MSGS, "stream": stream, **extra}
    return requests.post(llm.url, json=body, stream=stream, timeout=timeout)


def sse(resp: requests.Response) -> tuple[list[dict], bool]:
    """Parse an SSE body into (chunks, saw_done), the way an OpenAI client does."""
    chunks, done = [], False
    for line in resp.iter_lines():
        if not line:
            continue
        assert line.startswith(b"data: "), line
        data = line[len(b"data: ") :]
        if data == b"[DONE]":
            done = True
            continue
        assert not done, "data after [DONE]"
        chunks.append(json.loads(data.decode("utf-8")))
    return chunks, done


def deltas(chunks: list[dict]) -> list[dict]:
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def joined(chunks: list[dict], key: str) -> str:
    return "".join(d.get(key) or "" for d in deltas(chunks))


def assemble_tool_calls(chunks: list[dict], *, repeat_ok: bool = False) -> list[dict]:
    calls: dict[int, dict] = {}
    for d in deltas(chunks):
        for tc in d.get("tool_calls") or []:
            slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
            if tc.get("id"):
                slot["id"] = tc["id"]
            name = (tc.get("function") or {}).get("name")
            if name:
                if repeat_ok:
                    slot["name"] = name
                else:
                    assert not slot["name"], "name repeated in a later delta"
                    slot["name"] = name
            slot["arguments"] += (tc.get("function") or {}).get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


# --------------------------------------------------------------------------- streaming


def test_streamed_text_reassembles_with_role_reasoning_and_finish():
    content = "Hello, wörld — ünïcode ✓ and some more text"
    with ScriptedLLM([text(content, reasoning="let me think")], chunk_size=5) as llm:
        resp = chat(llm, stream=True)
        assert resp.status_code == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        chunks, done = sse(resp)
        llm.assert_all_used()
    assert done
    ds = deltas(chunks)
    assert ds[0]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert joined(chunks, "content") == content
    assert joined(chunks, "reasoning_content") == "let me think"
    content_pieces = [d["content"] for d in ds if d.get("content")]
    assert len(content_pieces) == -(-len(content) // 5)
    assert all(len(p) <= 5 for p in content_pieces)
    # reasoning is streamed before content
    first_content = next(i for i, d in enumerate(ds) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(ds) if d.get("reasoning_content"))
    assert last_reasoning < first_content
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert not any("usage" in c for c in chunks)  # not requested, not scripted


def test_streamed_tool_calls_reassemble_by_index():
    turn = tool_calls(
        call("read", {"path": "a.txt"}),
        call("write", {"path": "b.txt", "content": "x" * 20}, id="call_custom"),
        content="Reading.",
    )
    with ScriptedLLM([turn]) as llm:
        chunks, done = sse(chat(llm, stream=True))
    assert done
    calls = assemble_tool_calls(chunks)
    assert [c["name"] for c in calls] == ["read", "write"]
    assert json.loads(calls[0]["arguments"]) == {"path": "a.txt"}
    assert json.loads(calls[1]["arguments"]) == {"path": "b.txt", "content": "x" * 20}
    assert calls[0]["id"] and calls[1]["id"] == "call_custom"
    assert joined(chunks, "content") == "Reading."
    # arguments arrive split over several deltas of at most 4 characters
    arg_pieces = [
        tc["function"]["arguments"]
        for d in deltas(chunks)
        for tc in d.get("tool_calls") or []
        if tc["index"] == 0 and tc["function"].get("arguments")
    ]
    assert len(arg_pieces) > 3 and all(len(p) <= 4 for p in arg_pieces)
    # only the first delta of each call carries id/name
    tc_deltas = [tc for d in deltas(chunks) for tc in d.get("tool_calls") or []]
    assert sum(1 for tc in tc_deltas if "id" in tc) == 2
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_call_only_reply_has_null_content_in_role_chunk_and_raw_arguments():
    with ScriptedLLM([tool_call("bash", '{"cmd": "ls"', id="c1")]) as llm:
        chunks, _ = sse(chat(llm, stream=True))
    assert deltas(chunks)[0] == {"role": "assistant", "content": None}
    assert assemble_tool_calls(chunks) == [
        {"id": "c1", "name": "bash", "arguments": '{"cmd": "ls"'}
    ]


def test_repeat_id_name_quirk():
    with ScriptedLLM([tool_call("read", {"path": "a.txt"}, repeat_id_name=True)]) as llm:
        chunks, _ = sse(chat(llm, stream=True))
    tc_deltas = [tc for d in deltas(chunks) for tc in d.get("tool_calls") or []]
    assert len(tc_deltas) > 2
    assert all(tc["id"] == tc_deltas[0]["id"] for tc in tc_deltas)
    assert all(tc["function"]["name"] == "read" for tc in tc_deltas)
    calls = assemble_tool_calls(chunks, repeat_ok=True)
    assert json.loads(calls[0]["arguments"]) == {"path": "a.txt"}


def test_usage_chunk_when_requested_or_scripted():
    usage = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    with ScriptedLLM([text("hi"), text("yo", usage=usage)]) as llm:
        chunks1, _ = sse(chat(llm, stream=True, stream_options={"include_usage": True}))
        chunks2, done2 = sse(chat(llm, stream=True))
    for chunks in (chunks1, chunks2):
        assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    u = chunks1[-1]["usage"]
    assert (
        u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    )
    assert chunks2[-1]["usage"] == usage and done2


def test_no_done_and_empty():
    with ScriptedLLM([text("abc", no_done=True), {"empty": True}]) as llm:
        chunks, done = sse(chat(llm, stream=True))
        assert joined(chunks, "content") == "abc" and not done
        resp = chat(llm, stream=True)
        assert resp.status_code == 200
        chunks, done = sse(resp)
        assert chunks == [] and done


def test_drop_after_breaks_the_stream():
    with ScriptedLLM([drop("abcdefghijklmnop", after=2)]) as llm:
        resp = chat(llm, stream=True)
        assert resp.status_code == 200
        got = []
        with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.ConnectionError)):
            for line in resp.iter_lines():
                got.append(line)
    payloads = [json.loads(x[6:]) for x in got if x.startswith(b"data: {")]
    assert joined(payloads, "content") == "abcdef"  # role chunk + 2 content chunks
    assert b"data: [DONE]" not in got


# --------------------------------------------------------------------------- non-stream


def test_non_stream_json_shape():
    turn = tool_call("read", {"path": "a.txt"}, content=None, reasoning="hmm")
    with ScriptedLLM([text("plain"), turn]) as llm:
        r1 = chat(llm)
        r2 = chat(llm)
    assert r1.headers["Content-Type"].startswith("application/json")
    j1 = r1.json()
    assert j1["object"] == "chat.completion"
    assert j1["choices"][0]["message"] == {"role": "assistant", "content": "plain"}
    assert j1["choices"][0]["finish_reason"] == "stop"
    assert set(j1["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    m2 = r2.json()["choices"][0]
    assert m2["finish_reason"] == "tool_calls"
    assert m2["message"]["content"] is None
    assert m2["message"]["reasoning_content"] == "hmm"
    (tc,) = m2["message"]["tool_calls"]
    assert tc["type"] == "function" and tc["id"]
    assert tc["function"]["name"] == "read"
    assert json.loads(tc["function"]["arguments"]) == {"path": "a.txt"}


def test_accepts_assistant_content_null_and_records_requests():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ]
    with ScriptedLLM([text("ok")]) as llm:
        r = requests.post(llm.url, json={"messages": messages}, timeout=5)
        assert r.status_code == 200
        assert llm.requests == [{"messages": messages}]
        llm.assert_all_used()


# --------------------------------------------------------------------------- errors


def test_error_statuses():
    turns = [
        error(500, "internal boom"),
        loading(),
        context_overflow(4096),
        error(429, {"error": "slow down"}, headers={"Retry-After": "1"}),
    ]
    with ScriptedLLM(turns) as llm:
        r = chat(llm, stream=True)
        assert r.status_code == 500 and r.text == "internal boom"
        assert r.headers["Content-Type"].startswith("text/plain")
        r = chat(llm)
        assert r.status_code == 503 and r.json() == {"error": "Model is loading"}
        r = chat(llm)
        assert r.status_code == 400 and "context" in r.json()["error"]["message"]
        r = chat(llm)
        assert r.status_code == 429 and r.headers["Retry-After"] == "1"
        llm.assert_all_used()


def test_no_turns_left_is_500_and_reported():
    with ScriptedLLM([text("only")]) as llm:
        assert chat(llm).status_code == 200
        r = chat(llm)
        assert r.status_code == 500 and r.json() == NO_TURNS_LEFT
        assert llm.exhausted and len(llm.unscripted) == 1
        with pytest.raises(AssertionError, match="no turns left"):
            llm.assert_all_used()


def test_unused_turns_and_expect_failures_are_reported():
    with ScriptedLLM([text("a"), text("b")]) as llm:
        chat(llm)
        with pytest.raises(AssertionError, match="1 unused"):
            llm.assert_all_used()

    def no_orphans(body):
        assert body["messages"][-1]["role"] != "tool", "orphan tool result"

    with ScriptedLLM([text("x", expect=no_orphans)]) as llm:
        requests.post(
            llm.url, json={"messages": [{"role": "tool", "content": "?"}]}, timeout=5
        ).raise_for_status()
        with pytest.raises(AssertionError, match="orphan tool result"):
            llm.assert_all_used()


def test_callable_turn_and_add():
    llm = ScriptedLLM()
    llm.add(lambda body: text(f"echo {body['messages'][-1]['content']}"))
    with llm:
        assert chat(llm).json()["choices"][0]["message"]["content"] == "echo hello"
        llm.add(text("later"))
        assert chat(llm).json()["choices"][0]["message"]["content"] == "later"
        llm.assert_all_used()


def test_unknown_turn_key_is_rejected():
    with pytest.raises(ValueError, match="tool_call"):
        ScriptedLLM([{"tool_call": {"name": "x"}}])


# --------------------------------------------------------------------------- other endpoints


def test_models_endpoints():
    with ScriptedLLM() as llm:
        assert requests.get(f"{llm.base_url}/v1/models", timeout=5).json()["data"] == [
            {"id": "scripted-model", "object": "model", "owned_by": "organization_owner"}
        ]
        (m,) = requests.get(f"{llm.base_url}/api/v0/models", timeout=5).json()["data"]
        assert m == {
            "id": "scripted-model",
            "object": "model",
            "type": "llm",
            "state": "loaded",
            "max_context_length": 32768,
            "loaded_context_length": 8192,
            "capabilities": ["tool_use"],
        }
        assert requests.get(f"{llm.base_url}/props", timeout=5).status_code == 404

    models = ["a", {"id": "v", "type": "vlm", "state": "not-loaded"}]
    with ScriptedLLM(models=models) as llm:
        data = requests.get(f"{llm.base_url}/api/v0/models", timeout=5).json()["data"]
        assert [m["id"] for m in data] == ["a", "v"]
        assert data[1]["type"] == "vlm" and data[1]["state"] == "not-loaded"
        assert "loaded_context_length" not in data[1]
        one = requests.get(f"{llm.base_url}/api/v0/models/v", timeout=5).json()
        assert one["id"] == "v"
        ids = [m["id"] for m in requests.get(f"{llm.base_url}/v1/models", timeout=5).json()["data"]]
        assert ids == ["a", "v"]


def test_llamacpp_shape_props_and_404s():
    with ScriptedLLM(models=False, props=4096) as llm:
        assert requests.get(f"{llm.base_url}/api/v0/models", timeout=5).status_code == 404
        props = requests.get(f"{llm.base_url}/props", timeout=5).json()
        assert props["default_generation_settings"]["n_ctx"] == 4096
        assert requests.get(f"{llm.base_url}/v1/models", timeout=5).json()["data"]
        assert requests.head(f"{llm.base_url}/v1/models", timeout=5).status_code == 404
        assert requests.get(f"{llm.base_url}/nope", timeout=5).status_code == 404
        assert requests.post(f"{llm.base_url}/v1/embeddings", json={}, timeout=5).status_code == 404


# --------------------------------------------------------------------------- timing


def test_wait_for_requests_and_concurrent_order():
    with ScriptedLLM([text("0"), text("1"), text("2")]) as llm:
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(chat(llm).json())) for _ in range(3)
        ]
        for t in threads:
            t.start()
        assert len(llm.wait_for_requests(3, timeout=5)) == 3
        for t in threads:
            t.join(5)
        assert sorted(r["choices"][0]["message"]["content"] for r in results) == ["0", "1", "2"]
        llm.assert_all_used()
        with pytest.raises(AssertionError, match="expected 4"):
            llm.wait_for_requests(4, timeout=0.05)


def test_chunk_delay_paces_the_stream():
    with ScriptedLLM([text("abcdef", chunk_delay=0.05)], chunk_size=2) as llm:
        resp = chat(llm, stream=True)
        stamps = []
        for line in resp.iter_lines():
            if line:
                stamps.append(time.monotonic())
    # role + 3 content + finish + [DONE] -> 5 gaps of >= 50 ms
    assert stamps[-1] - stamps[0] >= 0.2


def test_stop_is_fast_with_a_delayed_turn_in_flight():
    llm = ScriptedLLM([text("late", delay=30)]).start()
    outcome = {}

    def client():
        try:
            outcome["resp"] = chat(llm, timeout=10)
        except requests.RequestException as exc:
            outcome["exc"] = exc

    t = threading.Thread(target=client)
    t.start()
    llm.wait_for_requests(1)
    t0 = time.monotonic()
    llm.stop()
    assert time.monotonic() - t0 < 1.0
    t.join(2)
    assert not t.is_alive()
    assert "exc" in outcome  # connection cut, no reply


def _raw_request(llm: ScriptedLLM, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", llm.port), timeout=5)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return sock


def test_client_disconnect_interrupts_delay_and_chunk_delay():
    with ScriptedLLM([text("x", delay=30), text("abcdefghij", chunk_delay=30)]) as llm:
        sock = _raw_request(llm, {"messages": MSGS})
        llm.wait_for_requests(1)
        sock.close()
        llm.wait_idle(timeout=2)

        sock = _raw_request(llm, {"messages": MSGS, "stream": True})
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.close()
        llm.wait_idle(timeout=2)
        assert llm.disconnects == 2
