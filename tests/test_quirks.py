"""The table of server quirks (lmagent/llm/quirks.py) drives what the client does: which
endpoint names the server, which request fields a server refused, and which are never sent."""

from __future__ import annotations

import pytest

import lmagent.llm.probe as llm_probe
from lmagent.llm.client import LLMClient
from lmagent.llm.errors import LLMError
from lmagent.llm.probe import probe_model
from lmagent.llm.quirks import OPTIONAL_PARAMS, SERVERS, rejected_params, unsent_at_start
from tests.conftest import make_config
from tests.scripted_llm import DEFAULT_PROPS, ScriptedLLM, text

TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]


def test_the_first_server_in_the_table_that_answers_names_the_server(workspace):
    with ScriptedLLM(props=DEFAULT_PROPS) as llm:  # LM Studio's models and llama.cpp's props
        config = make_config(workspace, llm)
        assert probe_model(config).source == SERVERS[0].source == "lmstudio"
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(llm_probe, "SERVERS", SERVERS[1:])
            info = probe_model(config)
        assert (info.source, info.context_length) == ("llama.cpp", 8192)


def test_only_the_openai_model_list_answers(workspace):
    with ScriptedLLM(models=False) as llm:
        info = probe_model(make_config(workspace, llm))
    assert info.source == "openai" and info.model_id == "scripted-model"


@pytest.mark.parametrize(
    ("body", "sent", "named"),
    [
        ("response_format is not supported", ("response_format", "tools"), ["response_format"]),
        ("'tool choice' and tools unsupported", ("tool_choice", "tools"), ["tool_choice", "tools"]),
        ("response_format is not supported", ("tools",), []),  # not sent: not what was refused
        ("messages must alternate", OPTIONAL_PARAMS, []),
    ],
)
def test_a_refused_field_is_one_that_was_sent_and_is_named(body, sent, named):
    assert rejected_params(LLMError("x", 400, body, sent=sent)) == named


def test_a_template_that_knows_no_tools_is_never_sent_them(workspace):
    assert unsent_at_start(False) == {"tools"}
    assert unsent_at_start(None) == unsent_at_start(True) == set()
    with ScriptedLLM([text("ok")]) as llm:
        client = LLMClient(make_config(workspace, llm))
        client.dropped_params |= unsent_at_start(False)
        client.chat([{"role": "user", "content": "hi"}], TOOLS)
        assert "tools" not in llm.requests[0] and "tool_choice" not in llm.requests[0]
