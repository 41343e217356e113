"""Text tool calls: a corpus of what real local models write, and fuzzing for crashes.

tests/data/toolcall_corpus.json holds each case with the calls it must yield, or "format_error"
when the reply has to go back to the model with a format-error message.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lmagent.llm.toolcalls import FORMAT_HINT, FormatError, extract_text_calls, strip_calls

CORPUS = json.loads((Path(__file__).parent / "data" / "toolcall_corpus.json").read_text("utf-8"))
KNOWN = set(CORPUS["known"])
CASES = CORPUS["cases"]
VALID = [case for case in CASES if isinstance(case["expect"], list) and case["expect"]]


def parse(text: str) -> list[dict] | str:
    """The calls, or "format_error"; any other exception fails the test."""
    try:
        calls = extract_text_calls(text, KNOWN)
    except FormatError as exc:
        assert FORMAT_HINT in str(exc)  # the model is told how to write a call
        return "format_error"
    assert isinstance(calls, list)
    for call in calls:
        assert set(call) == {"name", "arguments"}
        assert isinstance(call["name"], str) and call["name"]
        assert isinstance(call["arguments"], dict)
    return calls


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus(case):
    assert parse(case["text"]) == case["expect"], case["source"]


def test_corpus_covers_both_outcomes():
    outcomes = [case["expect"] for case in CASES]
    assert sum(o == "format_error" for o in outcomes) >= 10
    assert sum(o == [] for o in outcomes) >= 8  # prose and JSON data left alone
    assert sum(isinstance(o, list) and len(o) > 1 for o in outcomes) >= 5


@pytest.mark.parametrize("case", VALID, ids=[case["id"] for case in VALID])
def test_every_truncation_of_a_valid_call_is_refused_or_exact(case):
    """A cut-off reply never yields a call with a cut-off value: each call it yields is one of
    the complete calls, or a call with fewer arguments whose values are all complete."""
    wanted = case["expect"]
    text = case["text"]
    for end in range(len(text)):
        result = parse(text[:end])
        if result == "format_error":
            continue
        for call in result:
            assert any(
                call["name"] == full["name"]
                and all(
                    full["arguments"].get(k, object()) == v for k, v in call["arguments"].items()
                )
                for full in wanted
            ), (text[:end], call)


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "read>",
    "</function>",
    "<parameter=",
    "path>",
    "</parameter>",
    "<think>",
    "</think>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|tool_call|>",
    "```json\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ",",
    ":",
    "\\",
    "\n",
    " ",
    '"name"',
    '"arguments"',
    '"parameters"',
    '"function"',
    '"read"',
    '"functions.read"',
    "null",
    "true",
    "True",
    "1e999",
    "-",
    "0",
    "a.txt",
    "é",
    "中",
    "🎉",
    "\x00",
    "**",
    "lambda",
]


@pytest.mark.parametrize("seed", range(4))
def test_random_garbage_only_ever_raises_format_error(seed):
    rng = random.Random(seed)
    for _ in range(1500):
        parse("".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 40))))


def test_mutated_valid_calls_only_ever_raise_format_error():
    rng = random.Random(7)
    for case in VALID:
        text = case["text"]
        for _ in range(60):
            chars = list(text)
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(len(chars) + 1)
                if rng.random() < 0.5 and position < len(chars):
                    del chars[position]
                else:
                    chars.insert(position, rng.choice(FRAGMENTS))
            parse("".join(chars))


def test_huge_and_deeply_nested_inputs_are_quick_and_safe():
    parse("<tool_call>" + "{" * 100_000)
    parse("[" * 100_000)
    parse("{'a': " * 20_000)
    parse('{"name": "write", "arguments": {"content": "' + "x," * 200_000 + '",}}')
    assert parse("a, b, c}" * 50_000) == []


def test_strip_calls_keeps_the_prose():
    text = (
        'Reading now.\n<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>\n'
        "<function=ls><parameter=path>.</parameter></function>\nDone."
    )
    assert strip_calls(text) == "Reading now.\n\n\nDone."
