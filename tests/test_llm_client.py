"""The LLM client against the scripted OpenAI-compatible server: streaming, tool-call deltas,
thinking, the retry policy, stopping, and what the server reports about the loaded model."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field

import pytest

import lmagent.llm.client as llm_client
from lmagent.core.stop import StopToken
from lmagent.llm.client import (
    RETRY_POLICY,
    Callbacks,
    ContextOverflow,
    LLMClient,
    LLMError,
    LLMStopped,
    LLMUnreachable,
    RetryRule,
    rule_for,
)
from lmagent.llm.probe import ModelInfo, probe_model
from lmagent.loop.run import run_agent
from tests.conftest import free_port, make_config
from tests.scripted_llm import (
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

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


@dataclass
class Seen:
    """What the callbacks delivered, in order."""

    tokens: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)

    def callbacks(self) -> Callbacks:
        return Callbacks(self.tokens.append, self.thinking.append, self.status.append)


def ask(llm, workspace, *turns, tools=None, seen=None, stop=None, client=None, **changes):
    """Script `turns`, make one chat request, return the Reply."""
    llm.add(*turns)
    client = client or LLMClient(make_config(workspace, llm, **changes))
    return client.chat(MESSAGES, tools, (seen or Seen()).callbacks(), stop)


# --------------------------------------------------------------------------- streaming


def test_streamed_text_reaches_on_token_while_the_server_is_still_sending(llm, workspace):
    content = "Hello there, streaming world!"
    first_token = threading.Event()
    still_sending = []

    def on_token(piece: str) -> None:
        if not first_token.is_set():
            try:  # the server is between two chunks of this reply right now
                llm.wait_idle(timeout=0)
                still_sending.append(False)
            except AssertionError:
                still_sending.append(True)
            first_token.set()
        pieces.append(piece)

    pieces: list[str] = []
    llm.add(text(content, chunk_delay=0.08))
    reply = LLMClient(make_config(workspace, llm)).chat(MESSAGES, None, Callbacks(on_token))
    assert first_token.is_set() and still_sending == [True]
    assert reply.content == content and "".join(pieces) == content
    assert len(pieces) > 5  # token by token, not one block at the end
    assert reply.finish_reason == "stop" and reply.first_token_s < reply.elapsed_s
    assert llm.requests[0]["stream"] is True
    llm.assert_all_used()


def test_empty_stream_falls_back_to_one_non_streamed_request(llm, workspace):
    seen = Seen()
    reply = ask(llm, workspace, {"empty": True}, text("from JSON", reasoning="hm"), seen=seen)
    assert reply.content == "from JSON" and reply.reasoning == "hm"
    assert [r["stream"] for r in llm.requests] == [True, False]
    assert "stream_options" not in llm.requests[1]
    assert "".join(seen.tokens) == "from JSON" and seen.thinking == ["hm"]
    llm.assert_all_used()


def test_empty_stream_and_empty_fallback_give_an_empty_reply_not_a_loop(llm, workspace):
    reply = ask(llm, workspace, {"empty": True, "no_done": True}, {"empty": True})
    assert reply.content == "" and reply.tool_calls == []
    assert len(llm.requests) == 2
    llm.assert_all_used()


def test_a_server_that_ignores_stream_true_and_answers_json(llm, workspace):
    def json_anyway(body: dict) -> dict:
        body["stream"] = False  # this server always answers with one JSON object
        return tool_call("read", {"path": "a.txt"}, content="Reading it.")

    seen = Seen()
    reply = ask(llm, workspace, json_anyway, tools=TOOLS, seen=seen)
    assert reply.content == "Reading it." and "".join(seen.tokens) == "Reading it."
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [
        ("read", {"path": "a.txt"})
    ]
    assert reply.finish_reason == "tool_calls" and reply.usage["completion_tokens"] > 0
    assert len(llm.requests) == 1


def test_stream_without_done_is_accepted(llm, workspace):
    reply = ask(llm, workspace, text("complete anyway", no_done=True))
    assert reply.content == "complete anyway"
    assert len(llm.requests) == 1


def test_usage_comes_from_the_servers_usage_chunk(llm, workspace):
    usage = {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}
    reply = ask(llm, workspace, text("counted", usage=usage))
    assert reply.usage == usage and reply.completion_tokens == 56
    assert llm.requests[0]["stream_options"] == {"include_usage": True}


def test_non_ascii_text_survives_streaming_one_character_per_chunk(llm, workspace):
    content = "héllo wörld — 中文字符 🎉🚀 ünïcode ✓"
    seen = Seen()
    reply = ask(llm, workspace, text(content, reasoning="思考 🤔", chunk_size=1), seen=seen)
    assert reply.content == content and "".join(seen.tokens) == content
    assert reply.reasoning == "思考 🤔"
    reply = ask(llm, workspace, tool_call("read", {"path": "données/中文 🎉.txt"}), tools=TOOLS)
    assert json.loads(reply.tool_calls[0]["arguments"]) == {"path": "données/中文 🎉.txt"}
    assert llm.requests[0]["messages"] == MESSAGES


def test_null_assistant_content_is_sent_as_an_empty_string(llm, workspace):
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    llm.add(text("ok"))
    LLMClient(make_config(workspace, llm)).chat(history, TOOLS)
    sent = llm.requests[0]["messages"]
    assert sent[2]["content"] == "" and sent[2]["tool_calls"] == history[2]["tool_calls"]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "{}"}


# --------------------------------------------------------------------------- tool calls


def test_tool_call_arguments_split_across_chunks_reassemble(llm, workspace):
    arguments = {"path": "src/deeply/nested/file.py", "offset": 10, "limit": 200}
    reply = ask(llm, workspace, tool_call("read", arguments, args_chunk_size=3), tools=TOOLS)
    assert len(reply.tool_calls) == 1
    assert reply.tool_calls[0]["name"] == "read"
    assert json.loads(reply.tool_calls[0]["arguments"]) == arguments
    assert reply.tool_calls[0]["id"] == "call_0_0" and reply.finish_reason == "tool_calls"
    assert llm.requests[0]["tools"] == TOOLS and llm.requests[0]["tool_choice"] == "auto"


def test_two_parallel_tool_calls_stay_apart(llm, workspace):
    turn = tool_calls(
        call("read", {"path": "a.txt"}, id="first"),
        call("write", {"path": "b.txt", "content": "x" * 30}, id="second"),
        content="Doing both.",
    )
    reply = ask(llm, workspace, turn, tools=TOOLS)
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [
        ("first", "read", {"path": "a.txt"}),
        ("second", "write", {"path": "b.txt", "content": "x" * 30}),
    ]
    assert reply.content == "Doing both."


def test_id_and_name_repeated_in_every_delta_do_not_pile_up(llm, workspace):
    turn = tool_calls(
        call("read", {"path": "a_rather_long_path.txt"}),
        call("read_file", {"path": "b.txt"}),
        repeat_id_name=True,
    )
    reply = ask(llm, workspace, turn, tools=TOOLS)
    assert [c["name"] for c in reply.tool_calls] == ["read", "read_file"]  # not "readread..."
    assert json.loads(reply.tool_calls[0]["arguments"]) == {"path": "a_rather_long_path.txt"}
    assert [c["id"] for c in reply.tool_calls] == ["call_0_0", "call_0_1"]


def test_arguments_given_as_a_json_object(llm, workspace):
    completion = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "t1", "function": {"name": "read", "arguments": {"path": "é.txt"}}}
                    ],
                },
            }
        ],
    }
    reply = ask(llm, workspace, {"status": 200, "body": completion}, tools=TOOLS)
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [
        ("t1", "read", {"path": "é.txt"})
    ]
    assert reply.content == ""


# --------------------------------------------------------------------------- thinking


def test_reasoning_content_stays_out_of_the_reply_text(llm, workspace):
    seen = Seen()
    reply = ask(
        llm, workspace, text("The answer.", reasoning="Let me think this through."), seen=seen
    )
    assert reply.content == "The answer." and "".join(seen.tokens) == "The answer."
    assert reply.reasoning == "".join(seen.thinking) == "Let me think this through."


@pytest.mark.parametrize(
    ("raw", "content", "thought"),
    [
        ("<think>plan the work</think>The answer.", "The answer.", "plan the work"),
        ("Intro. <think>aside</think> Outro.", "Intro.  Outro.", "aside"),
        ("<think>still thinking when the reply ended", "", "still thinking when the reply ended"),
    ],
    ids=["paired", "in-between", "never-closed"],
)
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5])
def test_think_blocks_are_removed_even_when_tags_are_split(
    llm, workspace, raw, content, thought, chunk_size
):
    seen = Seen()
    reply = ask(llm, workspace, text(raw, chunk_size=chunk_size), seen=seen)
    assert reply.content == content
    assert "".join(seen.tokens).strip() == content
    assert "".join(seen.thinking) == thought
    assert reply.reasoning == thought  # kept for the transcript
    assert reply.raw_content == raw


@pytest.mark.parametrize("chunk_size", [1, 4])
def test_a_lone_closing_tag_ends_thinking_that_had_no_opening_tag(llm, workspace, chunk_size):
    # Qwen3 / DeepSeek-R1 templates open <think> in the prompt; the reply only closes it.
    reply = ask(
        llm, workspace, text("weighing options</think>\n\nUse a list.", chunk_size=chunk_size)
    )
    assert reply.content == "Use a list."


def test_think_blocks_are_kept_when_thinking_model_is_false(llm, workspace):
    seen = Seen()
    raw = "<think>plan</think>The answer."
    reply = ask(llm, workspace, text(raw, chunk_size=2), seen=seen, thinking_model=False)
    assert reply.content == raw and "".join(seen.tokens) == raw and seen.thinking == []


# --------------------------------------------------------------------------- looping replies


LOOPED = "Let me create the file.\n" + "# hello\n#\n" * 2000  # 20 KB of one 10-character piece


def test_a_reply_stuck_in_a_loop_is_cut_off_early_and_kept_to_one_copy(llm, workspace):
    seen = Seen()
    client = LLMClient(make_config(workspace, llm))
    reply = ask(llm, workspace, text(LOOPED, chunk_size=10), seen=seen, client=client)
    assert reply.finish_reason == "repeating"
    assert reply.content == "Let me create the file.\n# hello\n#"
    shown = "".join(seen.tokens)
    assert len(shown) < 3000 < len(LOOPED)  # it stopped reading early
    assert any("repeating itself" in s for s in seen.status)
    # the cut connection is not reused: the next request gets a clean answer
    assert ask(llm, workspace, text("fine"), client=client).content == "fine"


def test_thinking_stuck_in_a_loop_is_cut_off_too(llm, workspace):
    reply = ask(llm, workspace, text("x", reasoning="Wait, let me think. " * 600, chunk_size=20))
    assert reply.finish_reason == "repeating"
    assert reply.reasoning == "Wait, let me think. "


@pytest.mark.parametrize(
    "content",
    [
        "".join(f"line {n}: value {n * n}\n" for n in range(400)),  # long, each line different
        "=" * 1500 + "\nThe table above is a separator.",  # repetition, but shorter than the window
        "".join(f"| {n:>4} | {'ok' if n % 2 else 'no'} |\n" for n in range(300)),
    ],
    ids=["numbered-lines", "short-repeat", "table"],
)
def test_long_answers_that_merely_repeat_a_little_are_not_cut(llm, workspace, content):
    reply = ask(llm, workspace, text(content, chunk_size=50))
    assert reply.finish_reason == "stop"
    assert reply.content == content.strip()


CYCLE = "".join(
    f"The `PhoneNumber` class should be modified to include the `{name}` attribute that "
    f"stores the cleaned {name.replace('_', ' ')}.\n\n"
    for name in ("number", "area_code", "exchange_code", "subscriber_number")
)


def test_loop_period_and_without_loop():
    assert llm_client.loop_period("ab" * 1000) == 2
    assert llm_client.loop_period("Intro.\n" + CYCLE * 6) == len(CYCLE) > 400  # a paragraph
    numbered = "".join(f"{n}. {CYCLE[:100]} {n * n}\n" for n in range(30))  # alike, not the same
    assert llm_client.loop_period(CYCLE * 2 + numbered) == 0
    assert llm_client.loop_period("intro " + "xyz-" * 600) == 4
    assert llm_client.loop_period("ab" * 900) == 0  # under the window
    assert llm_client.loop_period("".join(str(n) for n in range(2000))) == 0
    assert llm_client.without_loop("intro " + "xyz-" * 600, 4) == "intro xyz-"
    assert llm_client.without_loop("intro " + "xyz-" * 600 + "xy", 4) == "intro xyz-"
    assert llm_client.without_loop("same", 0) == "same"


# --------------------------------------------------------------------------- retry policy


@pytest.mark.parametrize(
    ("failure", "action"),
    [
        (LLMUnreachable("refused"), "backoff"),
        (llm_client.LLMTimeout("no answer"), "fail"),
        (llm_client.StreamBroken("cut"), "resume"),
        (LLMError("x", 400, '{"error": "exceeds the available context size (8192)"}'), "compact"),
        (LLMError("x", 500, "the prompt is too long for n_ctx"), "compact"),
        (LLMError("x", 400, "tool_choice unsupported", sent=("tool_choice",)), "drop_param"),
        (LLMError("x", 503, "Service Unavailable"), "wait"),
        (LLMError("x", 500, '{"error": "Loading model"}'), "wait"),
        (LLMError("x", 502, "bad gateway"), "backoff"),
        (LLMError("x", 429, "slow down"), "backoff"),
        (LLMError("x", 404, "no such endpoint"), "fail"),
        (LLMError("x", 400, "messages must alternate"), "fail"),
        (LLMError("LLM_URL is not a URL"), "fail"),
    ],
)
def test_retry_policy_table_decides_each_failure(failure, action):
    assert rule_for(failure).action == action
    assert rule_for(failure) in RETRY_POLICY


def test_the_table_alone_drives_the_client(llm, workspace, monkeypatch):
    # The same 503 that is normally waited for fails at once when the table says so.
    monkeypatch.setattr(llm_client, "RETRY_POLICY", (RetryRule(Exception, (), (), "fail", "no"),))
    with pytest.raises(LLMError) as raised:
        ask(llm, workspace, loading(), text("never reached"))
    assert raised.value.status == 503 and len(llm.requests) == 1


def test_connection_refused_backs_off_then_names_the_url(workspace):
    url = f"http://127.0.0.1:{free_port()}/v1/chat/completions"
    config = make_config(workspace, None, llm_url=url, llm_retry_delay=0.05, llm_retries=3)
    seen = Seen()
    started = time.monotonic()
    with pytest.raises(LLMUnreachable) as raised:
        LLMClient(config).chat(MESSAGES, None, seen.callbacks())
    assert url in str(raised.value) and "connection refused" in str(raised.value)
    assert len(seen.status) == 3  # one message per retry, then the error
    assert all("cannot reach the LLM server" in s for s in seen.status)
    assert time.monotonic() - started >= 0.05 + 0.1 + 0.2  # delays double


def test_no_answer_within_llm_timeout_is_not_retried(llm, workspace):
    started = time.monotonic()
    with pytest.raises(LLMUnreachable) as raised:
        ask(llm, workspace, text("too late", delay=5), text("unused"), llm_timeout=1)
    assert "LLM_TIMEOUT" in str(raised.value) and len(llm.requests) == 1
    assert time.monotonic() - started < 2.5


def test_server_error_then_recovery(llm, workspace):
    seen = Seen()
    reply = ask(llm, workspace, error(500), error(502, "Bad Gateway"), text("recovered"), seen=seen)
    assert reply.content == "recovered" and len(llm.requests) == 3
    assert len(seen.status) == 2 and "HTTP 500" in seen.status[0]
    llm.assert_all_used()


def test_server_errors_give_up_after_llm_retries(llm, workspace):
    with pytest.raises(LLMError) as raised:
        ask(llm, workspace, *[error(500)] * 5, llm_retries=2)
    assert raised.value.status == 500 and len(llm.requests) == 3


def test_loading_model_is_waited_for_with_progress_messages(llm, workspace):
    seen = Seen()
    turns = [loading()] * 4  # more polls than LLM_RETRIES: loading is waited for by time
    reply = ask(llm, workspace, *turns, text("loaded"), seen=seen, llm_retries=1)
    assert reply.content == "loaded" and len(llm.requests) == 5
    assert len(seen.status) == 4 and all("still loading" in s for s in seen.status)
    llm.assert_all_used()


def test_loading_model_gives_up_after_llm_timeout(llm, workspace):
    started = time.monotonic()
    with pytest.raises(LLMError) as raised:
        ask(llm, workspace, *[loading()] * 100, llm_timeout=1, llm_retry_delay=0.1)
    assert raised.value.status == 503
    assert 1 <= time.monotonic() - started < 3


def test_dropped_stream_is_retried_and_every_token_shown_once(llm, workspace):
    content = "One, two, three, four, five, six."
    seen = Seen()
    reply = ask(
        llm,
        workspace,
        drop(content, after=4, reasoning="think"),
        text(content, reasoning="think"),
        seen=seen,
    )
    assert reply.content == content
    assert "".join(seen.tokens) == content  # the retried prefix is not shown twice
    assert "".join(seen.thinking) == "think"
    assert len(llm.requests) == 2 and any("broke off" in s for s in seen.status)
    llm.assert_all_used()


def test_dropped_tool_call_stream_is_retried_without_doubled_arguments(llm, workspace):
    turn = tool_call("read", {"path": "a.txt"})
    reply = ask(llm, workspace, {**turn, "drop_after": 3}, turn, tools=TOOLS)
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [
        ("read", {"path": "a.txt"})
    ]


def test_a_stream_closed_cleanly_mid_reply_is_retried_and_the_reply_is_whole(llm, workspace):
    content = "One, two, three, four, five, six."
    seen = Seen()
    reply = ask(llm, workspace, text(content, end_after=4), text(content), seen=seen)
    assert (reply.content, reply.finish_reason) == (content, "stop")
    assert "".join(seen.tokens) == content  # what the cut stream showed is not shown twice
    assert len(llm.requests) == 2
    assert any("cut off mid-reply" in s for s in seen.status), seen.status
    llm.assert_all_used()


def test_a_stream_closed_cleanly_mid_tool_call_arguments_is_retried(llm, workspace):
    turn = tool_call("write", {"path": "notes.txt", "content": "all of it"})
    cut = {**turn, "end_after": 4}  # role, the call's name, then 3 pieces of its arguments
    reply = ask(llm, workspace, cut, turn, tools=TOOLS)
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [
        ("write", {"path": "notes.txt", "content": "all of it"})
    ]
    assert len(llm.requests) == 2
    llm.assert_all_used()


def test_a_stream_that_keeps_closing_mid_reply_ends_the_run_saying_it_was_cut(llm, workspace):
    llm.add(*[text("Partial answer that never ends", end_after=3)] * 3)
    config = make_config(workspace, llm, llm_retries=2)
    result = run_agent(config, "answer")
    assert result.status == "error"
    assert result.message == (
        "LLM request failed: the stream was cut off mid-reply (no finish reason, no [DONE])"
    )
    assert len(llm.requests) == 3
    llm.assert_all_used()


def test_a_retry_that_says_something_else_is_shown_and_announced(llm, workspace):
    seen = Seen()
    reply = ask(
        llm, workspace, drop("Hello world, this is", after=2), text("Different."), seen=seen
    )
    assert reply.content == "Different."
    assert "".join(seen.tokens).endswith("Different.")
    assert any("restarted differently" in s for s in seen.status)


def test_stream_that_keeps_breaking_gives_up(llm, workspace):
    with pytest.raises(llm_client.StreamBroken):
        ask(llm, workspace, *[drop("abcdef", after=1)] * 3, llm_retries=2)
    assert len(llm.requests) == 3


def test_context_overflow_raises_without_retrying(llm, workspace):
    with pytest.raises(ContextOverflow) as raised:
        ask(llm, workspace, context_overflow(8192), text("unused"))
    assert raised.value.status == 400 and "8192" in str(raised.value)
    assert len(llm.requests) == 1


def test_rejected_tool_choice_is_dropped_and_remembered(llm, workspace):
    client = LLMClient(make_config(workspace, llm))
    seen = Seen()
    rejection = error(400, {"error": {"message": "tool_choice is not supported"}})
    reply = ask(llm, workspace, rejection, text("first"), tools=TOOLS, client=client, seen=seen)
    assert reply.content == "first"
    reply = ask(llm, workspace, text("second"), tools=TOOLS, client=client)
    assert reply.content == "second"
    assert ["tool_choice" in r for r in llm.requests] == [True, False, False]
    assert all(r["tools"] == TOOLS for r in llm.requests)  # only the rejected field goes
    assert client.native_tools and any("tool_choice" in s for s in seen.status)


def test_vllm_style_tool_choice_rejection_is_recognised(llm, workspace):
    message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
    reply = ask(
        llm, workspace, error(400, {"error": {"message": message}}), text("ok"), tools=TOOLS
    )
    assert reply.content == "ok" and "tool_choice" not in llm.requests[1]


def test_rejected_tools_switch_the_client_to_text_tool_calls(llm, workspace):
    client = LLMClient(make_config(workspace, llm))
    rejection = error(400, {"error": {"message": "tools param requires --jinja flag"}})
    assert ask(llm, workspace, rejection, text("ok"), tools=TOOLS, client=client).content == "ok"
    assert "tools" not in llm.requests[1] and "tool_choice" not in llm.requests[1]
    assert client.native_tools is False


def test_other_client_errors_raise_after_exactly_one_request(llm, workspace):
    body = {"error": {"message": "'messages' must alternate between user and assistant"}}
    with pytest.raises(LLMError) as raised:
        ask(llm, workspace, error(400, body), text("unused"), tools=TOOLS)
    assert raised.value.status == 400 and "must alternate" in str(raised.value)
    assert len(llm.requests) == 1


def test_a_400_naming_a_field_that_was_not_sent_is_not_retried(llm, workspace):
    with pytest.raises(LLMError):
        ask(llm, workspace, error(400, "tool_choice is invalid"), text("unused"))  # no tools
    assert len(llm.requests) == 1


def test_an_error_object_sent_with_status_200_is_classified_like_an_http_error(llm, workspace):
    failure = {"status": 200, "body": {"error": {"code": 400, "message": "n_ctx exceeded"}}}
    with pytest.raises(ContextOverflow):
        ask(llm, workspace, failure)


# --------------------------------------------------------------------------- stopping


def stop_when(event: threading.Event, stop: StopToken, stopped_at: list) -> threading.Thread:
    def run():
        if event.wait(30):
            stopped_at.append(time.monotonic())
            stop.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_stop_mid_stream_raises_before_the_next_token(llm, workspace):
    first_token, stop, stopped_at = threading.Event(), StopToken(), []
    stop_when(first_token, stop, stopped_at)
    llm.add(text("a long reply " * 20, chunk_delay=2))  # a token every 2 s
    client = LLMClient(make_config(workspace, llm))
    with pytest.raises(LLMStopped):
        client.chat(MESSAGES, None, Callbacks(on_token=lambda t: first_token.set()), stop)
    assert time.monotonic() - stopped_at[0] < 1.9  # not at the next token
    llm.wait_idle(timeout=2)
    assert llm.disconnects == 1  # the server was told, so it stops generating


def test_stop_while_the_server_reads_the_prompt(llm, workspace):
    request_sent, stop, stopped_at = threading.Event(), StopToken(), []
    stop_when(request_sent, stop, stopped_at)
    llm.add(text("late", delay=10))
    threading.Thread(target=lambda: llm.wait_for_requests(1) and request_sent.set()).start()
    with pytest.raises(LLMStopped):
        LLMClient(make_config(workspace, llm)).chat(MESSAGES, None, None, stop)
    assert time.monotonic() - stopped_at[0] < 1


def test_stop_during_a_back_off_wait(llm, workspace):
    retrying, stop, stopped_at = threading.Event(), StopToken(), []
    stop_when(retrying, stop, stopped_at)
    llm.add(error(500), text("unused"))
    client = LLMClient(make_config(workspace, llm, llm_retry_delay=20))
    with pytest.raises(LLMStopped):
        client.chat(MESSAGES, None, Callbacks(on_status=lambda s: retrying.set()), stop)
    assert time.monotonic() - stopped_at[0] < 1 and len(llm.requests) == 1


def test_an_already_stopped_token_sends_nothing(llm, workspace):
    stop = StopToken()
    stop.stop()
    with pytest.raises(LLMStopped):
        ask(llm, workspace, text("unused"), stop=stop)
    assert llm.requests == []


# --------------------------------------------------------------------------- URLs


def test_a_base_url_gets_the_chat_completions_path(llm, workspace):
    for url in (llm.base_url, llm.base_url + "/v1", llm.base_url + "/v1/"):
        assert ask(llm, workspace, text("ok"), llm_url=url).content == "ok"
    assert len(llm.requests) == 3


def test_an_invalid_llm_url_is_reported_without_retrying(workspace):
    config = make_config(workspace, None, llm_url="localhost:1234/v1/chat/completions")
    with pytest.raises(LLMError) as raised:
        LLMClient(config).chat(MESSAGES)
    assert "LLM_URL" in str(raised.value)


# --------------------------------------------------------------------------- probe_model


LMSTUDIO_MODELS = [
    {"id": "qwen2.5-coder-7b", "loaded_context_length": 16384, "max_context_length": 32768},
    {"id": "llava-v1.6", "type": "vlm", "loaded_context_length": 4096},
    {"id": "big-model", "state": "not-loaded", "max_context_length": 131072},
]


def test_probe_reads_lm_studio_loaded_model_and_context(workspace):
    with ScriptedLLM(models=LMSTUDIO_MODELS) as server:
        info = probe_model(make_config(workspace, server))
    assert (info.model_id, info.context_length, info.source) == (
        "qwen2.5-coder-7b",
        16384,
        "lmstudio",
    )
    assert info.vision_models == ["llava-v1.6"]


@pytest.mark.parametrize(("wanted", "context"), [("llava-v1.6", 4096), ("big-model", None)])
def test_probe_honours_llm_model(workspace, wanted, context):
    with ScriptedLLM(models=LMSTUDIO_MODELS) as server:
        info = probe_model(make_config(workspace, server, llm_model=wanted))
    # a model that is not loaded yet has no known context length (not its maximum)
    assert (info.model_id, info.context_length) == (wanted, context)


def test_probe_reads_llama_cpp_n_ctx(workspace):
    with ScriptedLLM(models=False, props=4096) as server:
        info = probe_model(make_config(workspace, server))
    assert (info.context_length, info.source) == (4096, "llama.cpp")


def test_probe_without_either_endpoint_knows_no_context(workspace):
    with ScriptedLLM(models=False) as server:
        info = probe_model(make_config(workspace, server))
    assert info.context_length is None and info.vision_models == []


def test_probe_of_a_dead_server_is_quick_and_empty(workspace):
    config = make_config(workspace, None, llm_url=f"http://127.0.0.1:{free_port()}/v1")
    started = time.monotonic()
    assert probe_model(config) == ModelInfo(reachable=False)
    assert time.monotonic() - started < 1


def test_probe_of_a_server_that_never_answers_gives_up_after_one_timeout(workspace):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
        started = time.monotonic()
        info = probe_model(make_config(workspace, None, llm_url=url), timeout=0.5)
    assert info == ModelInfo()  # slow is not absent: the run will still try
    assert time.monotonic() - started < 1.2  # one timeout, not one per endpoint


def test_probe_of_a_host_that_takes_no_connection_is_unreachable(workspace):
    """A host that drops packets: connecting times out (here: a listener whose backlog is
    full, so the kernel drops the new connection's SYN). That is absent, not loading."""
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        queued.connect(listener.getsockname())  # fills the backlog; nothing accepts
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
        started = time.monotonic()
        info = probe_model(make_config(workspace, None, llm_url=url), timeout=0.5)
    assert info == ModelInfo(reachable=False)
    assert time.monotonic() - started < 1.2


def test_the_request_body_stays_exact_while_the_message_cache_reuses_encodings():
    """Encodings are reused as the history grows; a rewritten history (compaction) or a list the
    cache never saw is encoded afresh; the bytes always equal a plain encoding of the body."""
    from lmagent.llm.client import MessageCache

    cache = MessageCache()
    history = [{"role": "user", "content": "tâche"}]
    for step in range(30):
        messages = [{"role": "system", "content": f"prompt {step}"}, *history]
        body = {"messages": cache.clean(messages), "stream": True, "temperature": 0.5}
        assert json.loads(b"".join(cache.encode_body(body))) == body
        assert body["messages"][0]["content"] == f"prompt {step}"
        history.append({"role": "assistant", "content": None, "tool_calls": [{"id": str(step)}]})
        history.append({"role": "tool", "tool_call_id": str(step), "content": "ok"})
        if step == 20:
            history = [{"role": "user", "content": "summary"}, *history[-4:]]
    other = {"messages": [{"role": "user", "content": "elsewhere"}]}
    assert json.loads(b"".join(cache.encode_body(other))) == other


def test_a_kept_connection_the_server_closed_is_replaced_with_the_same_patience(
    llm, workspace, monkeypatch
):
    """The server restarted between two requests: the fresh connection waits LLM_TIMEOUT for
    the reply, not the connect timeout (a reply that took longer than 10 s to start broke off,
    said 'no data for LLM_TIMEOUT=560 s', and was asked again)."""
    monkeypatch.setattr(llm_client, "CONNECT_TIMEOUT", 0.3)
    client = LLMClient(make_config(workspace, llm))
    assert ask(llm, workspace, text("one"), client=client).content == "one"
    llm.stop()
    llm.start()  # the same URL: the connection the client kept is stale
    seen = Seen()
    reply = ask(llm, workspace, text("two", delay=1.0), client=client, seen=seen)
    assert reply.content == "two"
    assert not any("broke off" in s or "no answer" in s for s in seen.status), seen.status
