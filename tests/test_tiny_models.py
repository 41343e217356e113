"""Small models calling tools correctly by construction, against the scripted server: constrained
path arguments chosen among the workspace's own paths, the tool sets (TOOL_SET), the tiny
model's "act, then answer" rule, calls and results written as text for a chat template that
knows no tools, a cut-off answer kept, the prompt's worked examples, and what --embedded sets
for the bundled model."""

from __future__ import annotations

import json

import jsonschema
import pytest

import lmagent.llm.embedded as embedded_llm
from lmagent.core.workspace import Workspace
from lmagent.llm.client import LLMClient
from lmagent.loop.prompts import system_prompt
from lmagent.loop.run import run_agent
from lmagent.runtime import Runtime
from lmagent.sessions.store import SessionStore
from lmagent.tools.files import PATH_CHOICES, existing_paths
from lmagent.tools.registry import Services
from lmagent.tools.toolset import CORE_TOOLS, TINY_TOOLS, build_toolset
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, call, props_without_tools, text, tool_calls


def admitted(body: dict, reply: dict) -> bool:
    schema = body["response_format"]["json_schema"]["schema"]
    try:
        jsonschema.validate(reply, schema)
    except jsonschema.ValidationError:
        return False
    return True


def replying(reply: dict, check=lambda body: None):
    """A turn that checks the request (`check`), then sends `reply`, which the schema admits."""

    def turn(body: dict) -> dict:
        check(body)
        assert admitted(body, reply), reply
        return text(json.dumps(reply))

    return turn


def run(config, task: str):
    events: list[dict] = []
    return run_agent(config, task, sink=events.append), events


def calls(events: list[dict]) -> list[tuple[str, dict]]:
    return [(e["name"], json.loads(e["arguments"])) for e in events if e["type"] == "tool_call"]


def seed(workspace) -> None:
    (workspace / "notes.txt").write_text("the secret word is plum\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


READ_NOTES = {"name": "read", "arguments": {"path": "notes.txt"}}
INVENTED = {"name": "read", "arguments": {"path": "notes-old.txt"}}


# --------------------------------------------------------------------------- path choices


def test_a_path_that_must_exist_is_chosen_among_the_workspace_s(workspace, llm):
    seed(workspace)

    def only_real_paths(body: dict) -> None:
        assert not admitted(body, INVENTED)  # the server cannot write a file that is not there
        assert not admitted(body, {"name": "read", "arguments": {"path": ".git/HEAD"}})
        assert not admitted(body, {"name": "ls", "arguments": {"path": "docs"}})
        assert admitted(body, {"name": "read", "arguments": {"path": "src/app.py"}})
        assert admitted(body, {"name": "ls", "arguments": {"path": "src"}})
        assert admitted(body, {"name": "ls", "arguments": {}})  # the default: the workspace
        assert admitted(body, {"name": "write", "arguments": {"path": "new.txt", "content": ""}})

    llm.add(
        replying(READ_NOTES, only_real_paths),
        replying({"answer": "plum\nTASK_COMPLETE"}),
    )
    result, events = run(make_config(workspace, llm, tool_call_mode="constrained"), "read it")
    llm.assert_all_used()
    assert result.status == "completed" and calls(events) == [("read", {"path": "notes.txt"})]


def not_yet_readable(body: dict, path: str) -> None:
    assert not admitted(body, {"name": "read", "arguments": {"path": path}})


def test_a_file_made_during_the_run_can_be_chosen_next(workspace, llm):
    seed(workspace)
    made = {"name": "write", "arguments": {"path": "made.txt", "content": "x"}}
    llm.add(
        replying(made, lambda body: not_yet_readable(body, "made.txt")),
        replying({"name": "read", "arguments": {"path": "made.txt"}}),
        replying({"answer": "done\nTASK_COMPLETE"}),
    )
    result, _ = run(make_config(workspace, llm, tool_call_mode="constrained"), "make it")
    llm.assert_all_used()
    assert result.status == "completed"


def free_path(body: dict) -> None:
    assert admitted(body, INVENTED), "a path was limited in a large workspace"


def test_a_tool_with_no_path_to_name_is_not_offered(workspace, llm):
    (workspace / "docs").mkdir()  # folders, but not one file to read or edit

    def no_reading(body: dict) -> None:
        options = body["response_format"]["json_schema"]["schema"]["anyOf"]
        offered = {o["properties"]["name"]["const"] for o in options if "name" in o["properties"]}
        assert {"ls", "write", "shell"} <= offered and not {"read", "edit"} & offered

    llm.add(replying({"name": "ls", "arguments": {"path": "docs"}}, no_reading))
    llm.add(replying({"answer": "docs is empty\nTASK_COMPLETE"}))
    result, _ = run(make_config(workspace, llm, tool_call_mode="constrained"), "what is here?")
    llm.assert_all_used()
    assert result.status == "completed"


def test_a_large_workspace_leaves_paths_free(workspace, llm):
    for number in range(PATH_CHOICES + 1):
        (workspace / f"f{number}.txt").write_text("x")
    assert existing_paths(Workspace(workspace)) is None
    llm.add(replying({"answer": "ok\nTASK_COMPLETE"}, lambda body: free_path(body)))
    result, _ = run(make_config(workspace, llm, tool_call_mode="constrained"), "hi")
    assert result.status == "completed"


def test_the_listing_skips_the_agent_s_data_and_git(workspace):
    seed(workspace)
    (workspace / ".lmagent").mkdir()
    (workspace / ".lmagent" / "mcp.json").write_text("{}")
    paths = existing_paths(Workspace(workspace))
    assert paths == {"file": ["notes.txt", "src/app.py"], "dir": [".", "src"]}


def test_native_and_text_requests_carry_no_path_choices(workspace, llm):
    seed(workspace)
    llm.add(text("Nothing to do.\nTASK_COMPLETE"))
    run(make_config(workspace, llm), "hi")  # native
    assert "read" in json.dumps(llm.requests[0]["tools"])
    assert "notes.txt" not in json.dumps(llm.requests[0])  # only a schema can hold the model


# --------------------------------------------------------------------------- tool sets


@pytest.mark.parametrize(
    ("tool_set", "context", "offered", "reachable"),
    [
        ("auto", 32768, None, None),
        ("auto", 4096, CORE_TOOLS, None),
        ("full", 4096, None, None),
        ("compact", 32768, CORE_TOOLS, None),
        ("tiny", 32768, TINY_TOOLS, TINY_TOOLS),
    ],
)
def test_tool_set_names_the_tools_offered_and_reachable(
    workspace, tool_set, context, offered, reachable
):
    services = Services(make_config(workspace, tool_set=tool_set))
    toolset = build_toolset(services, context_length=context)
    schemas = {s["function"]["name"] for s in toolset.schemas()}
    every = {"todo_add", "git_commit", "process_kill", "glob", "mkdir", "read", "shell"}
    if offered is None:
        assert every <= schemas
    else:
        assert schemas == set(offered) - {"report_result"}
    if reachable is None:  # the rest is on demand: named in the prompt, run when called
        assert every <= set(toolset.names())
    else:
        assert set(toolset.names()) == set(reachable) - {"report_result"}


# --------------------------------------------------------------------------- tiny: act, answer


def test_a_tiny_model_must_act_first_and_then_answer(workspace, llm):
    seed(workspace)

    def must_call(body: dict) -> None:
        assert not admitted(body, {"answer": "The secret word is banana."})  # no guessing

    def must_answer(body: dict) -> None:
        assert not admitted(body, READ_NOTES)  # no calling the same tool forever

    llm.add(
        replying(READ_NOTES, must_call),
        replying({"answer": "The secret word is plum."}, must_answer),
    )
    config = make_config(workspace, llm, tool_call_mode="constrained", tool_set="tiny")
    result, events = run(config, "Read notes.txt and tell me the secret word")
    llm.assert_all_used()
    assert (result.status, result.message) == ("completed", "The secret word is plum.")
    assert calls(events) == [("read", {"path": "notes.txt"})]
    options = llm.requests[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    offered = {option["properties"]["name"]["const"] for option in options}
    assert offered == set(TINY_TOOLS) - {"report_result"}  # no todo_list to wander off to


def test_tiny_without_a_schema_leaves_the_model_free(workspace, llm):
    seed(workspace)
    llm.add(
        tool_calls(call("ls")),
        tool_calls(call("read", {"path": "notes.txt"}), content="Now the notes."),
        text("plum\nTASK_COMPLETE"),
    )
    result, events = run(make_config(workspace, llm, tool_set="tiny"), "find the word")  # native
    llm.assert_all_used()
    assert [name for name, _ in calls(events)] == ["ls", "read"]  # the second call was run
    assert result.status == "completed"


def test_the_banner_names_a_narrowed_tool_set(workspace, llm):
    runtime = Runtime(make_config(workspace, llm, tool_set="tiny", enable_mcp=False))
    try:
        lines = runtime.banner_lines("auto")
    finally:
        runtime.close()
    assert "tool set tiny: read, write, edit, ls, glob, grep, mkdir, shell" in lines
    full = Runtime(make_config(workspace, llm, enable_mcp=False))
    try:
        assert not any(line.startswith("tool set") for line in full.banner_lines("auto"))
    finally:
        full.close()


def test_other_tool_sets_may_answer_at_once(workspace, llm):
    llm.add(replying({"answer": "Hello.\nTASK_COMPLETE"}))
    config = make_config(workspace, llm, tool_call_mode="constrained", tool_set="compact")
    result, _ = run(config, "hi")
    assert (result.status, result.message) == ("completed", "Hello.")


# --------------------------------------------------------------------------- history as text


def test_a_template_that_knows_no_tools_sees_its_calls_and_results_as_text(workspace):
    seed(workspace)
    probe = text(json.dumps({"ok": True}))
    turns = [probe, replying(READ_NOTES), replying({"answer": "plum\nTASK_COMPLETE"})]
    with ScriptedLLM(turns, models=False, props=props_without_tools()) as llm:
        config = make_config(workspace, llm, enable_mcp=False)
        runtime = Runtime(config)
        try:
            assert runtime.tool_mode.mode == "constrained"
            result = run_agent(config, "Read notes.txt", **runtime.run_options())
        finally:
            runtime.close()
        llm.assert_all_used()
        second = llm.requests[2]["messages"]
    assert result.status == "completed"
    assistant, results = second[-2], second[-1]
    assert assistant == {"role": "assistant", "content": json.dumps(READ_NOTES)}  # as it wrote it
    assert results["role"] == "user" and results["content"].startswith("Tool result: {")
    assert "plum" in results["content"]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in second)


def test_a_client_that_sends_tools_keeps_calls_in_chat_form(workspace, llm):
    client = LLMClient(make_config(workspace, llm, tool_call_mode="constrained"))
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    sent = client.build_body(messages, [], stream=False)["messages"]
    assert sent[1]["tool_calls"] == [call] and sent[2]["role"] == "tool"
    client.dropped_params.add("tools")  # the template turned out to know no tools
    sent = client.build_body(messages, [], stream=False)["messages"]
    assert sent[1] == {"role": "assistant", "content": '{"name": "ls", "arguments": {}}'}
    assert sent[2] == {"role": "user", "content": "Tool result: {}"}


# --------------------------------------------------------------------------- cut-off answers


def test_an_answer_cut_off_at_max_tokens_is_kept_as_in_text_mode(workspace, llm):
    llm.add(text('{"answer": "The secret word is plum, the secret', finish_reason="length"))
    config = make_config(workspace, llm, tool_call_mode="constrained")
    result, _ = run(config, "what is the word?")
    llm.assert_all_used()  # not asked again: an answer is text, nothing is run
    assert (result.status, result.message) == ("completed", "The secret word is plum, the secret")


# --------------------------------------------------------------------------- the prompt


@pytest.mark.parametrize(
    ("form", "present", "absent"),
    [
        (
            "constrained",
            ['{"name": "ls", "arguments": {"path": "docs"}}', "- read("],
            ["<tool_call>"],
        ),
        ("text", ["<tool_call>", "- read(", "TASK_COMPLETE"], ["Examples:", "BLOCKED", "WAIT"]),
        (
            "native",
            ["<tool_call>", "BLOCKED: <reason>", "WAIT: <ISO-8601 time>"],
            ["- read(", "Examples:"],
        ),
    ],
)
def test_the_prompt_teaches_the_form_calls_take(workspace, form, present, absent):
    session = SessionStore(workspace).create("t")
    prompt = system_prompt(Workspace(workspace), session, build_toolset(None), form)
    assert all(piece in prompt for piece in present), prompt
    assert not any(piece in prompt for piece in absent), prompt


# --------------------------------------------------------------------------- --embedded


URL = "http://127.0.0.1:9/v1/chat/completions"


def test_embedded_runs_smollm2_greedy_with_the_tiny_tool_set(workspace):
    changes = embedded_llm.embedded_settings(make_config(workspace, embedded_model="smollm2"), URL)
    assert changes == {
        "llm_url": URL,
        "llm_max_tokens": 1024,
        "llm_temperature": 0.0,
        "tool_set": "tiny",
    }


@pytest.mark.parametrize(
    ("setting", "kept"),
    [
        ({"llm_temperature": 0.3}, {"llm_temperature"}),
        ({"tool_set": "full"}, {"tool_set"}),
        ({"llm_max_tokens": 300}, {"llm_max_tokens"}),
        ({"embedded_model": "other.gguf"}, {"llm_temperature", "tool_set"}),
    ],
)
def test_embedded_keeps_what_the_user_set(workspace, setting, kept):
    config = make_config(workspace, **{"embedded_model": "smollm2", **setting})
    final = config.with_changes(**embedded_llm.embedded_settings(config, URL))
    for name in kept:
        assert getattr(final, name) == getattr(config, name)
