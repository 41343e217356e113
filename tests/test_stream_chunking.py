"""The streaming parser gives the same reply however the server cuts it into events: one
character per event, token-like pieces, whole lines, random cuts, or the whole reply in one
event. Replies hold <think> blocks, reasoning_content, native tool-call arguments and tool calls
written as text."""

from __future__ import annotations

import json
import random
import re

import pytest

from lmagent.llm.client import CUT_REPEATING, Callbacks, LLMClient
from lmagent.llm.toolcalls import extract_text_calls
from tests.conftest import make_config
from tests.scripted_llm import call, text, tool_calls

MESSAGES = [{"role": "user", "content": "go"}]
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("read", "write")
]


def tokens(text: str) -> list[str]:
    """Pieces like a tokenizer's: a word or a run of punctuation with its leading space."""
    return re.findall(r" ?\w+| ?[^\w\s]+|\s+", text)


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def random_cuts(text: str) -> list[str]:
    """Cut anywhere: pieces of 1 to 7 characters, the same cuts on every run."""
    rng, pieces, start = random.Random(len(text)), [], 0
    while start < len(text):
        end = start + rng.randint(1, 7)
        pieces.append(text[start:end])
        start = end
    return pieces


CHUNKINGS = {
    "one character per event": {"chunk_size": 1, "args_chunk_size": 1},
    "token-like pieces": {"chunk_size": tokens, "args_chunk_size": tokens},
    "whole lines": {"chunk_size": lines, "args_chunk_size": lines},
    "random cuts": {"chunk_size": random_cuts, "args_chunk_size": random_cuts},
    "each part in one event": {"chunk_size": 0, "args_chunk_size": 0},
    "the whole reply in one event": {"one_event": True},
}

LOOP = "Counting:\n" + "tick " * 600 + "\nand it never ends."
REPLIES = {
    "<think> block in the content": (
        text(
            "<think>The user wants x < y; </thinking> is not my tag.\n</think>\n"
            "The answer: x < y.\nIt survives: naïve café ✓ 🙂\n"
        ),
        {
            "content": "The answer: x < y.\nIt survives: naïve café ✓ 🙂",
            "reasoning": "The user wants x < y; </thinking> is not my tag.",
            "shown": "\nThe answer: x < y.\nIt survives: naïve café ✓ 🙂\n",
            "thought": "The user wants x < y; </thinking> is not my tag.\n",
        },
    ),
    "reasoning_content and content": (
        text("Done: 42.", reasoning="Step 1: read <think> literally.\nStep 2: answer."),
        {
            "content": "Done: 42.",
            "reasoning": "Step 1: read <think> literally.\nStep 2: answer.",
            "shown": "Done: 42.",
            "thought": "Step 1: read <think> literally.\nStep 2: answer.",
        },
    ),
    "native tool calls": (
        tool_calls(
            call("write", {"path": "a.txt", "content": 'line 1\nline "2" {x}\n'}),
            call("read", {"path": "docs/ü.md", "offset": 2}),
            content="I'll write it, then read.",
        ),
        {
            "content": "I'll write it, then read.",
            "shown": "I'll write it, then read.",
            "calls": [
                ("write", {"path": "a.txt", "content": 'line 1\nline "2" {x}\n'}),
                ("read", {"path": "docs/ü.md", "offset": 2}),
            ],
            "finish": "tool_calls",
        },
    ),
    "native tool calls repeating id and name in every delta": (
        tool_calls(call("read", {"path": "a b/ü.txt"}), repeat_id_name=True),
        {"calls": [("read", {"path": "a b/ü.txt"})], "finish": "tool_calls"},
    ),
    "a <think> block never closed": (
        text("<think>Still weighing x < y", finish_reason="length"),
        {
            "reasoning": "Still weighing x < y",
            "thought": "Still weighing x < y",
            "finish": "length",
        },
    ),
    "a tool call written as text": (
        text(
            '<think>Maybe <tool_call>{"name": "write", "arguments": {}}</tool_call>?</think>\n'
            "I'll read it.\n<tool_call>\n"
            '{"name": "read", "arguments": {"path": "notes.txt", "limit": 5}}\n</tool_call>'
        ),
        {
            "content": (
                "I'll read it.\n<tool_call>\n"
                '{"name": "read", "arguments": {"path": "notes.txt", "limit": 5}}\n</tool_call>'
            ),
            "reasoning": 'Maybe <tool_call>{"name": "write", "arguments": {}}</tool_call>?',
            "shown": (
                "\nI'll read it.\n<tool_call>\n"
                '{"name": "read", "arguments": {"path": "notes.txt", "limit": 5}}\n</tool_call>'
            ),
            "thought": 'Maybe <tool_call>{"name": "write", "arguments": {}}</tool_call>?',
            "text_calls": [{"name": "read", "arguments": {"path": "notes.txt", "limit": 5}}],
        },
    ),
    "a reply stuck in a loop": (
        text(LOOP),
        {"content": "Counting:\ntick", "finish": CUT_REPEATING},
    ),
}


def outcome(reply, tokens_shown: list[str], thinking_shown: list[str]) -> dict:
    return comparable(
        {
            "content": reply.content,
            "reasoning": reply.reasoning,
            "shown": "".join(tokens_shown),
            "thought": "".join(thinking_shown),
            "calls": [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls],
            "text_calls": extract_text_calls(reply.content, {"read", "write"}),
            "finish": reply.finish_reason,
        }
    )


def expected(facts: dict) -> dict:
    nothing = {"content": "", "reasoning": "", "shown": "", "thought": ""}
    return comparable({**nothing, "calls": [], "text_calls": [], "finish": "stop", **facts})


def comparable(result: dict) -> dict:
    """The result without what was streamed when a loop was cut off: an event holding the
    whole reply shows all of it before the cut, single characters only what came before."""
    if result["finish"] == CUT_REPEATING:
        del result["shown"], result["thought"]
    return result


@pytest.mark.parametrize("chunking", CHUNKINGS.values(), ids=CHUNKINGS)
@pytest.mark.parametrize(("turn", "facts"), REPLIES.values(), ids=REPLIES)
def test_every_chunking_gives_the_same_reply(llm, workspace, chunking, turn, facts):
    llm.add({**turn, **chunking})
    shown: list[str] = []
    thought: list[str] = []
    client = LLMClient(make_config(workspace, llm))
    reply = client.chat(MESSAGES, TOOLS, Callbacks(shown.append, thought.append))
    assert outcome(reply, shown, thought) == expected(facts)
    assert len(llm.requests) == 1
    llm.assert_all_used()


def test_the_splitters_cut_the_replies_into_many_pieces_and_lose_nothing():
    sample = REPLIES["a tool call written as text"][0]["content"]
    for split in (tokens, lines, random_cuts):
        pieces = split(sample)
        assert "".join(pieces) == sample and len(pieces) > 3
