"""TOOL_CALL_MODE=constrained against the scripted server: the reply's JSON schema (what it
admits, MCP-style schemas), the streamed answer, the history sent back, and the fallbacks
(schema refused, schema ignored, reply cut off at max_tokens)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from lmagent.llm.client import Callbacks, LLMClient
from lmagent.llm.constrained import AnswerStream, CutOff, NotConstrained, read_reply, reply_schema
from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.tools.toolset import build_toolset
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, error, props_without_tools, text

MCP_TOOL = {
    "type": "function",
    "function": {
        "name": "mcp_db_query",
        "description": "query",
        "parameters": {
            "type": "object",
            "properties": {
                "filter": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string"},
                        "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                    "required": ["field", "value"],
                },
                "columns": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "limit": {"type": "integer", "minimum": 1, "description": "rows"},
            },
            "required": ["filter"],
        },
    },
}
NODE = {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}
REF_TOOL = {  # a recursive reference: no grammar can be written out for it
    "type": "function",
    "function": {
        "name": "mcp_x_refs",
        "parameters": {
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": NODE},
        },
    },
}
PYDANTIC_TOOL = {  # what FastMCP sends for an argument that is a pydantic model
    "type": "function",
    "function": {
        "name": "mcp_db_find",
        "parameters": {
            "type": "object",
            "properties": {"where": {"$ref": "#/$defs/Where"}},
            "required": ["where"],
            "$defs": {
                "Where": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "equals": {"type": "integer"}},
                    "required": ["field", "equals"],
                }
            },
        },
    },
}


def admitted(schema: dict, reply: dict) -> bool:
    try:
        jsonschema.validate(reply, schema)
    except jsonschema.ValidationError:
        return False
    return True


def honoured(reply: dict | str, **kw):
    """A turn of a server that honours the schema: the reply must be one the schema admits."""

    def turn(body: dict) -> dict:
        schema = body["response_format"]["json_schema"]["schema"]
        assert "tools" not in body and "tool_choice" not in body
        content = reply if isinstance(reply, str) else json.dumps(reply)
        if isinstance(reply, dict):
            assert admitted(schema, reply), reply
        return text(content, **kw)

    return turn


def run(config, task="do the task"):
    events: list[dict] = []
    return run_agent(config, task, sink=events.append), events


def shown(events: list[dict]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "token")


def statuses(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "status"]


@pytest.fixture
def constrained(workspace, llm):
    return make_config(workspace, llm, tool_call_mode="constrained")


# --------------------------------------------------------------------------- the schema


def test_the_schema_admits_one_valid_call_of_an_offered_tool_or_an_answer(workspace):
    schema = reply_schema([*build_toolset(None).schemas(), MCP_TOOL])
    assert admitted(schema, {"name": "read", "arguments": {"path": "a.txt", "limit": 3}})
    assert admitted(schema, {"answer": "Done.\nTASK_COMPLETE"})
    nested = {"filter": {"field": "id", "value": 7}, "columns": ["a"], "limit": 2}
    assert admitted(schema, {"name": "mcp_db_query", "arguments": nested})
    refused = [
        {"name": "nope", "arguments": {}},  # not offered
        {"name": "read", "arguments": {}},  # required path missing
        {"name": "read", "arguments": {"path": 3}},  # wrong type
        {"name": "read", "arguments": {"notes": "a.txt"}},  # invented argument
        {"name": "mcp_db_query", "arguments": {"filter": {"field": "id", "value": [1]}}},
        {"name": "mcp_db_query", "arguments": {"filter": {"field": "id"}}},  # nested required
        {"name": "mcp_db_query", "arguments": {"filter": nested["filter"], "columns": ["z"]}},
        {"name": "mcp_db_query", "arguments": {"filter": nested["filter"], "limit": 0}},
        {"answer": ""},
        {"answer": "hi", "name": "read"},
        [{"name": "read", "arguments": {"path": "a"}}],  # two calls at once
    ]
    assert [admitted(schema, reply) for reply in refused] == [False] * len(refused)


def test_references_to_definitions_are_written_out():
    schema = reply_schema([PYDANTIC_TOOL])
    assert "$ref" not in json.dumps(schema)
    good = {"name": "mcp_db_find", "arguments": {"where": {"field": "id", "equals": 3}}}
    assert admitted(schema, good)
    assert not admitted(schema, {"name": "mcp_db_find", "arguments": {"where": {"field": "id"}}})


def test_a_tool_whose_schema_cannot_be_expressed_takes_any_arguments_alone(workspace):
    schema = reply_schema([REF_TOOL, MCP_TOOL])
    assert "$ref" not in json.dumps(schema)
    assert admitted(schema, {"name": "mcp_x_refs", "arguments": {"node": {"any": 1}}})
    assert not admitted(schema, {"name": "mcp_x_refs", "arguments": "text"})
    assert not admitted(schema, {"name": "mcp_db_query", "arguments": {"filter": 1}})


# --------------------------------------------------------------------------- the streamed answer


ANSWER = {"answer": 'Line one\nsays "hi" \\ caf\u00e9 \U0001f600 {not json}'}


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_only_the_answer_text_is_shown_however_the_stream_is_cut(size):
    raw = json.dumps(ANSWER)  # ASCII escapes: \n, \", \\, \u00e9 and a surrogate pair
    stream = AnswerStream()
    pieces = [stream.feed(raw[i : i + size]) for i in range(0, len(raw), size)]
    assert "".join(pieces) == ANSWER["answer"]
    call = json.dumps({"name": "write", "arguments": {"path": "a", "content": "answer"}})
    assert AnswerStream().feed(call) == ""


def test_reading_a_finished_reply():
    assert read_reply('{"answer": "ok"}').answer == "ok"
    call = read_reply('{"name": "ls", "arguments": {"path": "."}}')
    assert (call.name, json.loads(call.arguments)) == ("ls", {"path": "."})
    with pytest.raises(CutOff):
        read_reply('{"name": "write", "arguments": {"path": "a", "content": "ha')
    for ignored in ("<tool_call>{}</tool_call>", '{"name": "ls"}', "{broken}", '{"x": 1}'):
        with pytest.raises(NotConstrained):
            read_reply(ignored)


# --------------------------------------------------------------------------- whole runs


def test_constrained_calls_run_and_the_history_stays_in_chat_form(constrained, llm, workspace):
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    llm.add(
        honoured({"name": "read", "arguments": {"path": "notes.txt"}}),
        honoured({"answer": "The secret word is plum.\nTASK_COMPLETE"}),
    )
    result, events = run(constrained, "Read notes.txt and tell me the secret word")
    llm.assert_all_used()
    assert (result.status, result.message) == ("completed", "The secret word is plum.")
    assert shown(events) == "The secret word is plum.\nTASK_COMPLETE"  # prose, never JSON
    call = next(e for e in events if e["type"] == "tool_call")
    assert (call["name"], json.loads(call["arguments"])) == ("read", {"path": "notes.txt"})
    second = llm.requests[1]["messages"]
    assistant, tool = second[-2], second[-1]
    assert assistant["tool_calls"][0]["function"]["name"] == "read"
    assert tool["role"] == "tool" and "plum" in tool["content"]
    system = llm.requests[0]["messages"][0]["content"]
    assert "- read(path, offset, limit)" in system  # the tools are described in the prompt


def test_a_refused_schema_falls_back_to_text_calls_with_one_note(constrained, llm, workspace):
    refusal = error(400, {"error": {"message": "failed to parse json_schema: unsupported"}})
    llm.add(
        refusal,
        text('<tool_call>{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}'),
        text("Wrote it.\nTASK_COMPLETE"),
    )
    result, events = run(constrained)
    llm.assert_all_used()
    assert result.status == "completed" and (workspace / "a.txt").read_text() == "x"
    notes = [s for s in statuses(events) if "JSON schema" in s]
    assert notes == [
        "the server refused the JSON schema for tool calls; tool calls are read "
        "from the text from now on"
    ]
    assert "response_format" in llm.requests[0]
    assert not any("response_format" in body or "tools" in body for body in llm.requests[1:])


def test_a_server_that_ignores_the_schema_is_read_as_text(constrained, llm, workspace):
    llm.add(
        text('Let me look.\n<tool_call>{"name": "ls", "arguments": {}}</tool_call>'),
        text("Nothing here.\nTASK_COMPLETE"),
    )
    result, events = run(constrained)
    llm.assert_all_used()
    assert result.status == "completed"
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["ls"]
    assert any("ignored the JSON schema" in s for s in statuses(events))
    assert "Let me look." in shown(events)  # held back as possible JSON, then shown
    assert "response_format" in llm.requests[0] and "response_format" not in llm.requests[1]


def test_a_call_cut_off_at_max_tokens_is_asked_again_once(constrained, llm, workspace):
    cut = '{"name": "write", "arguments": {"path": "a.txt", "content": "hal'
    llm.add(
        text(cut, finish_reason="length"),
        honoured({"name": "write", "arguments": {"path": "a.txt", "content": "whole"}}),
        honoured({"answer": "Done.\nTASK_COMPLETE"}),
    )
    result, events = run(constrained)
    llm.assert_all_used()
    assert result.status == "completed" and (workspace / "a.txt").read_text() == "whole"
    assert llm.requests[0]["messages"] == llm.requests[1]["messages"]  # the same question
    assert sum("cut off" in s for s in statuses(events)) == 1
    assert not any("restarted differently" in s for s in statuses(events))


def test_a_call_cut_off_twice_is_never_run(constrained, llm, workspace):
    cut = '{"name": "write", "arguments": {"path": "a.txt", "content": "hal'
    llm.add(
        text(cut, finish_reason="length"),
        text(cut + "f", finish_reason="length"),
        honoured({"answer": "I could not write it.\nBLOCKED: replies too long"}),
    )
    result, events = run(constrained)
    llm.assert_all_used()
    assert not (workspace / "a.txt").exists()
    assert not [e for e in events if e["type"] == "tool_call"]
    assert any("not run" in s for s in statuses(events))
    assert result.status == "blocked"


def test_the_client_streams_prose_of_an_answer(workspace):
    with ScriptedLLM([honoured(ANSWER, chunk_size=2)]) as llm:
        client = LLMClient(make_config(workspace, llm, tool_call_mode="constrained"))
        tokens: list[str] = []
        reply = client.chat(
            [{"role": "user", "content": "hi"}],
            build_toolset(None).schemas(),
            Callbacks(on_token=tokens.append),
        )
    assert reply.content == ANSWER["answer"].strip() and not reply.tool_calls
    assert "".join(tokens) == ANSWER["answer"] and len(tokens) > 5  # live, piece by piece


# --------------------------------------------------------------------------- auto


def test_auto_picks_constrained_when_the_template_knows_no_tools_and_a_schema_is_kept(workspace):
    probe_reply = honoured({"ok": True})
    with ScriptedLLM([probe_reply], models=False, props=props_without_tools()) as llm:
        runtime = Runtime(make_config(workspace, llm, enable_mcp=False))
        again = Runtime(make_config(workspace, llm, enable_mcp=False))  # decided once
        llm.assert_all_used()
    assert runtime.tool_mode == again.tool_mode
    assert runtime.tool_mode.mode == "constrained" and runtime.client().constrained
    assert any("tool calls: constrained (auto:" in line for line in runtime.banner_lines())


def test_auto_picks_text_when_the_schema_is_refused(workspace):
    with ScriptedLLM([error(400)], models=False, props=props_without_tools()) as llm:
        runtime = Runtime(make_config(workspace, llm, enable_mcp=False))
    assert runtime.tool_mode.mode == "text" and "refused" in runtime.tool_mode.reason
    assert not runtime.client().uses_tool_schemas


def test_auto_is_native_without_a_request_where_tools_are_taken(workspace):
    with ScriptedLLM([]) as llm:
        runtime = Runtime(make_config(workspace, llm, enable_mcp=False))
    assert runtime.tool_mode.mode == "native" and "LM Studio" in runtime.tool_mode.reason
    assert runtime.client().native_tools
