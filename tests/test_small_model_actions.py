"""What a small model writes unasked, made to work (issue 24): fenced blocks as actions in the
text call form, the files a task names shown with it, a Python block holding part of a file
merged into it, results it can read, and a repeated reply broken by sampling.

The replies scripted here are what Qwen2.5-Coder-1.5B wrote in bench/bench_tasks.py runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lmagent.checkpoints.steps import Checkpoints
from lmagent.llm.client import SAME_START
from lmagent.llm.toolcalls import block_actions, extract_text_calls
from lmagent.loop.compaction import SUMMARY_MARK
from lmagent.loop.merge import examples_apart, merge_python
from lmagent.loop.named import named_paths, resembled_file
from lmagent.loop.prompts import SAID_AGAIN
from lmagent.loop.run import NO_PROGRESS_STEPS, RULES, UNSTICK_TEMPERATURE
from lmagent.loop.verify import PYTEST, Check, unpadded
from lmagent.tools.shell import branch_note, explained, syntax_error_hint
from tests.conftest import make_config
from tests.scripted_llm import text
from tests.test_small_models import embedded_config, llama_cpp, run

KNOWN = {"read", "write", "edit", "ls", "grep", "shell"}
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


LEAP = (
    "import sys\n\n\ndef leap_year(year):\n"
    "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n\n\n"
    "if __name__ == '__main__':\n    print(leap_year(int(sys.argv[1])))\n"
)
LEAP_TEST = "from leap import leap_year\n\n\ndef test_2000():\n    assert leap_year(2000)\n"


# the rules but fresh_start: what happens within one attempt, the check failing again
ONE_ATTEMPT = RULES - {"fresh_start"}


def embedded_run(workspace, turns, task="fix the bug", rules=RULES, **changes):
    with llama_cpp(turns) as llm:
        events: list[dict] = []
        result = run(embedded_config(workspace, llm, **changes), task, events, rules=rules)
        llm.assert_all_used()
        return result, llm.requests, events


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("ls", [("shell", {"command": "ls"})]),
        ("  $ git status  \n", [("shell", {"command": "git status"})]),
        ("python3 app.py Ann", [("shell", {"command": "python3 app.py Ann"})]),
        ("ls\nThese are the files.", []),  # more than one line: an answer, not a command
        ("lsblk", []),
        ("Listing is easy.", []),
    ],
)
def test_a_reply_that_is_only_a_command_line_is_that_command(reply, expected):
    calls = extract_text_calls(reply, {"shell", "write"}, blocks=True)
    assert [(c["name"], c["arguments"]) for c in calls] == expected


def test_a_bare_ls_lists_the_workspace(workspace):
    """As a new user saw: asked to list the files, the model answered 'ls', twice, and the run
    ended 'answered without using any tool'."""
    (workspace / "app.py").write_text("print(1)\n")
    _, requests, _ = embedded_run(
        workspace, [text("ls"), text("app.py is here.\nTASK_COMPLETE")], task="list the files"
    )
    assert "app.py" in last_message(requests[1])


def last_message(request: dict) -> str:
    return request["messages"][-1]["content"]


# --------------------------------------------------------------------------- reading blocks


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("```bash\nls -la\n```", [("shell", {"command": "ls -la"})]),
        ("```sh\n$ git init\n$ git add .\n```", [("shell", {"command": "git init\ngit add ."})]),
        ("```console\n$ ls\nREADME.md\n```", [("shell", {"command": "ls"})]),
        (  # a transcript with the output the model imagined: only its commands run
            "```bash\n$ python -m pytest -q t.py\n(exit code 0)\n=== 1 passed ===\n$ ls\n```",
            [("shell", {"command": "python -m pytest -q t.py\nls"})],
        ),
        (
            "app.py\n```python\nprint(1)\n```",
            [("write", {"path": "app.py", "content": "print(1)\n"})],
        ),
        (
            "**`src/app.py`**:\n```\nx = 1\n```",
            [("write", {"path": "src/app.py", "content": "x = 1\n"})],
        ),
        (
            "### File: Makefile\n```make\nall:\n```",
            [("write", {"path": "Makefile", "content": "all:\n"})],
        ),
        (
            "```python\n# calc.py\nx = 2\n```",
            [("write", {"path": "calc.py", "content": "x = 2\n"})],
        ),
        ("run.sh\n```bash\necho hi\n```", [("write", {"path": "run.sh", "content": "echo hi\n"})]),
        (  # the 1.5B model's whole file as a write call's text: taken for prose, never saved
            "write(allergies.py, ```python\nx = 1\n```)",
            [("write", {"path": "allergies.py", "content": "x = 1\n"})],
        ),
        (  # ... its reply read up to the block's end
            'Fixed:\nwrite("allergies.py", ```python\nx = 1\n```',
            [("write", {"path": "allergies.py", "content": "x = 1\n"})],
        ),
        ("read(allergies.py, ```python\nx = 1\n```)", []),  # only a write takes a text
        ("```bash\n# TASK_COMPLETE\n```", []),  # only a comment: nothing to run
        ("```bash\ntask_complete\n```", []),  # the ending word: not a command
        ("Here is the code:\n```python\nprint(3)\n```", []),  # no path: only shown
        ("It goes in the `parser.add_argument` call. The code:\n```python\nx = 1\n```", []),
        ("It prints:\n```\nHELLO ANN\n```", []),  # expected output: only shown
        ("/etc/passwd\n```\nroot::0:0\n```", []),  # not a workspace path
        ("../up.py\n```python\nx\n```", []),
        ("```python\n# This is app.py\nx\n```", []),  # a comment that is not only a path
        (
            "Here's the corrected `calc.py`:\n\n```python\nx = 1\n```",
            [("write", {"path": "calc.py", "content": "x = 1\n"})],
        ),
        (
            "Run `app.py` like this:\n```bash\npython3 app.py\n```",
            [("shell", {"command": "python3 app.py"})],
        ),
        ("The output of `main.py`:\n```\n3 6\n```", []),  # no language: only shown
        ("The output of `main.py`:\n```text\n3 6\n```", []),
        ("Compare `a.py` and `b.py`:\n```python\nx\n```", []),  # which one?
        (
            "`add` in `calc.py` subtracts `b`. Here is `calc.py`:\n```python\nx = 1\n```",
            [("write", {"path": "calc.py", "content": "x = 1\n"})],
        ),
    ],
)
def test_fenced_blocks_that_are_actions(reply, expected):
    assert [(c["name"], c["arguments"]) for c in block_actions(reply, KNOWN)] == expected


def test_blocks_are_actions_in_order_and_only_where_the_prompt_teaches_them():
    reply = "app.py\n```python\nprint(1)\n```\nThen:\n```bash\npython3 app.py\n```"
    calls = extract_text_calls(reply, KNOWN, blocks=True)
    assert [c["name"] for c in calls] == ["write", "shell"]
    assert extract_text_calls(reply, KNOWN) == []  # native and constrained forms: text


def test_a_written_call_wins_over_blocks():
    reply = (
        '<tool_call>{"name": "read", "arguments": {"path": "a.py"}}</tool_call>\n```bash\nls\n```'
    )
    assert [c["name"] for c in extract_text_calls(reply, KNOWN, blocks=True)] == ["read"]


def test_blocks_for_tools_that_are_not_offered_are_not_actions():
    assert block_actions("a.py\n```\nx\n```\n```bash\nls\n```", {"read"}) == []


# --------------------------------------------------------------------------- in the loop


def test_a_file_block_and_a_bash_block_write_and_run_and_the_output_is_read_as_it_is(workspace):
    write = "hello.py\n```python\nprint('Hello, world!')\n```"
    steps = [text(write), text("```bash\npython3 hello.py\n```\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, [*steps, text("It printed Hello, world!\nTASK_COMPLETE")]
    )
    assert result.status == "completed"
    assert (workspace / "hello.py").read_text() == "print('Hello, world!')\n"
    told = last_message(requests[2])
    assert "output:\nHello, world!\n" in told  # not JSON-escaped
    assert len(requests) == 3  # it ran a command it had not seen: the task went on


def test_a_bash_block_is_only_text_with_native_calls(workspace):
    answer = "Use:\n```bash\ntouch made.txt\n```\nTASK_COMPLETE"
    with llama_cpp([text(answer), text(answer)]) as llm:
        result = run(make_config(workspace, llm, enable_mcp=False), "how do I make a file?")
    assert result.status == "completed"
    assert not (workspace / "made.txt").exists()


def test_task_complete_in_a_comment_ends_the_task(workspace):
    (workspace / "hello.py").write_text("print('hi')\n")
    steps = [text("```bash\npython3 hello.py\n```"), text("```bash\n# TASK_COMPLETE\n```")]
    result, requests, events = embedded_run(workspace, steps)
    assert result.status == "completed" and len(requests) == 2
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["shell"]


def test_a_block_with_one_function_of_a_python_file_replaces_only_that_function(workspace):
    (workspace / "calc.py").write_text(CALC)
    fix = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
    done = text("Fixed.\nTASK_COMPLETE")
    result, requests, _ = embedded_run(workspace, [text(fix), done, done])  # the 2nd: unchecked
    assert result.status == "completed"
    assert (workspace / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert "mul kept as they were" in last_message(requests[1])


def test_a_whole_python_file_block_replaces_the_file(workspace):
    (workspace / "calc.py").write_text(CALC)
    new = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b * 1\n"
    _, requests, _ = embedded_run(
        workspace, [text(f"calc.py\n```python\n{new}```"), *[text("Done.\nTASK_COMPLETE")] * 2]
    )
    assert (workspace / "calc.py").read_text() == new
    assert "kept" not in last_message(requests[1])


@pytest.mark.parametrize(
    ("new", "merged"),
    [
        ("def sub(a, b):\n    return a - b\n", CALC + "\n\ndef sub(a, b):\n    return a - b\n"),
        ("import math\ndef mul(a, b):\n    return math.prod((a, b))\n", None),  # checked below
        ("def add(a, b):\n    return a + b\nprint(add(1, 2))\n", None),  # other code: as it is
        ("def add(a, b:\n", None),  # not Python: as it is
    ],
)
def test_merging_python_definitions(new, merged):
    found = merge_python(CALC, new)
    if "import math" in new:
        text_, kept = found
        assert text_.startswith("import math\n") and "math.prod" in text_ and kept == ["add"]
        return
    assert (found[0] if found else None) == merged


ENCODER = (
    "def encode(text):\n    return ''.join(f'{len(g)}{g[0]}' for g in groups(text))\n\n\n"
    "def decode(text):\n    return expand(text)\n"
)


@pytest.mark.parametrize(
    "placeholder",
    [
        "    # Your existing code for decoding goes here\n    pass\n",
        "    ...\n",
        '    """Decode the text."""\n',
    ],
)
def test_a_placeholder_definition_keeps_the_files_own(placeholder):
    """The 1.5B model wrote encode fixed and decode as "# Your existing code for decoding goes
    here": saved as it was, decode was gone. A stub replaced by real code is no placeholder."""
    new = "def encode(text):\n    return fixed(text)\n\n\ndef decode(text):\n" + placeholder
    merged, kept = merge_python(ENCODER, new)
    assert kept == ["decode"] and "return expand(text)" in merged and "fixed(text)" in merged
    stub = ENCODER.replace("return expand(text)", "pass")
    assert merge_python(stub, ENCODER) is None  # the whole file, as it is


WORD_TESTS = (
    "import unittest\n\nfrom word import is_word\n\n\n"
    "class WordTest(unittest.TestCase):\n"
    "    def test_empty(self):\n        self.assertIs(is_word(''), True)\n\n"
    "    def test_mixed_case(self):\n        self.assertIs(is_word('Aa'), True)\n\n"
    "    def test_long(self):\n        self.assertIs(is_word('abc'), True)\n\n\n"
    "if __name__ == '__main__':\n    unittest.main()\n"
)
ONE_METHOD = (
    "class WordTest(unittest.TestCase):\n"
    "    def test_mixed_case(self):\n        self.assertIs(is_word('Aa'), False)\n\n"
    "    def test_new(self):\n        pass\n"
)


WORDS = (
    "import re\n\n\nclass Words:\n    def __init__(self, text):\n        self.text = text\n\n"
    "    def count(self):\n        return 0\n\n\ndef helper():\n    return 1\n"
)
COUNT = "def count(self):\n    return len(self.text.split())\n"


def test_a_method_written_alone_goes_into_its_class():
    """The 1.5B model wrote `def _check_word(self, ...)` alone, three times: dropped each time."""
    merged, kept = merge_python(WORDS, "import re\n" + COUNT)
    assert merged == WORDS.replace("return 0", "return len(self.text.split())")
    assert kept == ["helper", "Words.__init__"]


def test_a_function_of_the_same_name_without_self_is_no_method():
    merged, _ = merge_python(WORDS, "def count(text):\n    return 2\n")
    assert "    def count(self):\n        return 0\n" in merged and merged.endswith("return 2\n")


def test_a_method_block_without_a_path_is_saved_in_its_class(workspace):
    (workspace / "words.py").write_text(WORDS)
    (workspace / "test_words.py").write_text(
        "from words import Words\n\n\ndef test_count():\n    assert Words('a b').count() == 2\n"
    )
    steps = [text(f"```python\n{COUNT}```"), text("Done.\nTASK_COMPLETE")]
    result, _, _ = embedded_run(workspace, steps, task="Make words.py pass its tests.")
    assert (workspace / "words.py").read_text() == WORDS.replace(
        "return 0", "return len(self.text.split())"
    )
    assert result.status == "completed"


def test_a_class_block_holding_some_of_its_methods_keeps_the_others():
    merged, kept = merge_python(WORD_TESTS, ONE_METHOD)
    assert kept == ["WordTest.test_empty", "WordTest.test_long"]
    assert merged == WORD_TESTS.replace("is_word('Aa'), True", "is_word('Aa'), False").replace(
        "\n\n\nif __name__", "\n\n    def test_new(self):\n        pass\n\n\nif __name__"
    )


@pytest.mark.parametrize(
    "new",
    [
        ONE_METHOD.replace("    ", "  "),  # indented otherwise: merged, it would not parse
        ONE_METHOD.replace("class WordTest", "x = 1\nclass WordTest"),  # other code
        ONE_METHOD + "    x = 1\n",  # a class body that is more than methods
    ],
)
def test_a_class_block_that_cannot_be_merged_is_left_as_it_is(new):
    found = merge_python(WORD_TESTS, new)
    assert found is None or "x = 1" not in found[0]  # never half-merged
    assert found is None


def test_a_test_file_keeps_its_tests_when_the_model_writes_one_of_them(workspace):
    """The 1.5B model, shown a failing Exercism test, wrote that test method in its class under
    the test file's name: the file lost its other tests and its imports."""
    (workspace / "word.py").write_text("def is_word(text):\n    return True\n")
    (workspace / "word_test.py").write_text(WORD_TESTS)
    steps = [text(f"word_test.py\n```python\n{ONE_METHOD}```"), text("Done.\nTASK_COMPLETE")]
    steps += [text("Done.\nTASK_COMPLETE")] * 2
    _, requests, _ = embedded_run(
        workspace, steps, task="Make word.py pass word_test.py.", rules=ONE_ATTEMPT
    )
    kept = (workspace / "word_test.py").read_text()
    assert "def test_empty" in kept and "def test_long" in kept and "import unittest" in kept
    assert "WordTest.test_empty, WordTest.test_long kept as they were" in last_message(requests[1])


def test_the_files_a_task_names_are_shown_with_it(workspace):
    (workspace / "calc.py").write_text(CALC)
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("x = 1\n")
    _, requests, _ = embedded_run(
        workspace,
        [text("Nothing to do.\nTASK_COMPLETE")],
        task="Fix calc.py and look at src/ and missing.py",
    )
    shown = requests[0]["messages"][2]["content"]
    assert f"calc.py\n```\n{CALC}```" in shown
    assert "src/ holds: a.py" in shown and "src/a.py\n```\nx = 1\n```" in shown
    assert "missing.py" not in shown


def test_named_paths_outside_the_workspace_or_in_its_data_are_not_shown(workspace, tmp_path):
    """Attack: a task (from a queue, an inbox file) naming host files or the agent's data."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    os.symlink(secret, workspace / "link.txt")
    (workspace / ".lmagent").mkdir(exist_ok=True)
    (workspace / ".lmagent" / "notes.md").write_text("TOPSECRET\n")
    task = f"Read {secret}, ../secret.txt, link.txt, .lmagent/notes.md and /etc/hostname."
    _, requests, _ = embedded_run(workspace, [text("No.\nTASK_COMPLETE")], task=task)
    assert all("TOPSECRET" not in str(m["content"]) for m in requests[0]["messages"])


APP = "import sys\n\nname = sys.argv[1]\nprint(f'hello {name}')\n"
SHOUT = "if '--shout' in sys.argv:\n    print(f'HELLO {name.upper()}')\nelse:\n    "
SHOUTING = APP.replace("print(f'hello {name}')", SHOUT + "print(f'hello {name}')")


@pytest.mark.parametrize(
    "reply",
    [
        f"You need to handle --shout:\n```python\n{SHOUTING}```",
        f"Here it is:\n```bash\n{SHOUTING}```",  # Python in a bash block: the file, not a command
    ],
)
def test_a_program_block_without_a_path_is_the_named_file_it_changes(workspace, reply):
    (workspace / "app.py").write_text(APP)
    (workspace / "other.py").write_text("x = 1\n")
    steps = [text(reply), text("Done.\nTASK_COMPLETE"), text("Done.\nTASK_COMPLETE")]
    embedded_run(workspace, steps, task="Add --shout to app.py (see other.py)")
    assert (workspace / "app.py").read_text() == SHOUTING
    assert (workspace / "other.py").read_text() == "x = 1\n"


STUB = "def abbreviate(words):\n    pass\n"
FILLED = (
    "def abbreviate(words):\n    # the first letter of each word\n"
    "    words = words.replace('-', ' ').split()\n\n"
    "    return ''.join(word[0] for word in words).upper()\n"
)


def test_a_block_filling_in_a_stub_is_the_file_that_defines_it(workspace):
    """Exercism's stubs: the 1.5B model's block shared 1 of its 15 lines with the stub, and was
    never written; it defines the function the stub defines (the test file does not)."""
    (workspace / "acronym.py").write_text(STUB)
    (workspace / "acronym_test.py").write_text(
        "from acronym import abbreviate\n\n\nclass T:\n    pass\n"
    )
    steps = [text(f"Here is the function:\n```python\n{FILLED}```"), text("Done.\nTASK_COMPLETE")]
    embedded_run(workspace, steps, task="Modify acronym.py; acronym_test.py has its tests.")
    assert (workspace / "acronym.py").read_text() == FILLED


@pytest.mark.parametrize(
    ("reply", "finishes"),
    [
        ("Use it like this:\n```python\nimport app\napp.main()\n```", 1),  # an example: shown
        ("```bash\npython3 app.py Ann --shout\n```", 1),  # a command: run
    ],
)
def test_a_block_unlike_any_named_file_is_not_written(workspace, reply, finishes):
    """(a named file that exists: a block unlike it may be an example of its use)"""
    (workspace / "app.py").write_text(APP)
    steps = [text(reply), *[text("Done.\nTASK_COMPLETE")] * finishes]
    embedded_run(workspace, steps, task="Add --shout to app.py")
    assert (workspace / "app.py").read_text() == APP


@pytest.mark.parametrize(
    ("task", "written", "then"),
    [
        ("Create hello.py that prints hi and run it.", "hello.py", "next, run it to check it"),
        ("Create hello.py and hello.sh.", "hello.py", "next, run it to check it"),
        ("Create hello.py and test_hello.py.", None, ""),  # which one?
        ("Create a program that prints hi.", None, ""),  # none named
    ],
)
def test_a_python_block_without_a_path_is_the_one_python_file_the_task_creates(
    workspace, task, written, then
):
    steps = [text("```python\nprint('hi')\n```"), text("Done.\nTASK_COMPLETE")]
    if written:
        steps.insert(1, text(f"```bash\npython3 {written}\n```"))
    _, requests, _ = embedded_run(workspace, steps, task=task)
    if written:  # the next step is named
        assert then in last_message(requests[1])
    created = sorted(p.name for p in workspace.iterdir() if not p.name.startswith(".lmagent"))
    assert created == ([written] if written else [])


@pytest.mark.parametrize(
    ("files", "task", "then"),
    [
        ({"test_leap.py": LEAP_TEST}, "Make leap.py pass its tests.", "python3 -m pytest -q"),
        ({}, "Fix leap.py so that `python3 leap.py 2000` prints True.", "python3 leap.py 2000"),
        ({}, "Fix leap.py.", "run it to check it does what the task asks: python3 leap.py"),
    ],
)
def test_the_next_step_after_a_write_is_the_check_a_finish_would_run(workspace, files, task, then):
    """Told to run `python3 acronym.py` where the exercise's tests were the check, the 1.5B
    model ran a program that prints nothing and finished; the check it is pointed to is the
    one its finish gets: the workspace's tests, else the command the task quotes."""
    (workspace / "leap.py").write_text("def leap_year(year):\n    pass\n")
    for name, content in files.items():
        (workspace / name).write_text(content)
    block = "leap.py\n```python\n" + LEAP + "```"
    steps = [text(block), text("```bash\npython3 leap.py 2000\n```"), text("TASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task=task)
    assert then in last_message(requests[1])


def test_a_python_block_replaces_the_named_file_the_model_made_wrongly_in_this_task(workspace):
    steps = [
        text('```bash\necho "Hello, world!" > hello.py\n```'),
        text("```python\nprint('Hello, world!')\n```"),
        text("```bash\npython3 hello.py\n```"),
        text("Done.\nTASK_COMPLETE"),
    ]
    embedded_run(workspace, steps, task="Create hello.py that prints Hello, world!")
    assert (workspace / "hello.py").read_text() == "print('Hello, world!')\n"


def test_equally_resembled_files_are_not_guessed_between():
    files = {"a.py": "x = 1\ny = 2\n", "b.py": "x = 1\ny = 2\n"}
    look = lambda name, arguments: {"success": True, "content": files[arguments["path"]]}  # noqa: E731
    assert resembled_file("x = 1\ny = 3\n", ["a.py", "b.py"], look) == ""
    assert resembled_file("x = 1\ny = 3\n", ["a.py"], look) == "a.py"


def test_a_block_resembling_a_file_outside_the_workspace_is_not_written_there(workspace, tmp_path):
    """Attack: a task naming a host file and a link leading out, and a reply that is a changed
    version of them; neither may be written (nor read to compare)."""
    outside = tmp_path / "outside.py"
    outside.write_text(APP)
    os.symlink(outside, workspace / "link.py")
    reply = f"```python\n{SHOUTING}```"  # no action: asked once, then the answer stands
    steps = [text(reply), text("Done.\nTASK_COMPLETE")]
    embedded_run(workspace, steps, task=f"Add --shout to {outside}, ../outside.py and link.py")
    assert outside.read_text() == APP
    assert sorted(p.name for p in workspace.iterdir() if p.name != ".lmagent") == ["link.py"]


def test_named_paths_are_words_with_an_extension_or_a_slash():
    task = "python3 test_calc.py fails: fix calc.py (see src/ and logs/app.log, version 1.0)."
    assert named_paths(task)[:4] == ["test_calc.py", "calc.py", "src/", "logs/app.log"]


def test_a_repeated_reply_is_asked_for_again_sampled_and_never_enters_the_history(workspace):
    same = text("```bash\ncat missing.txt\n```")
    done = text("It does not exist.\nTASK_COMPLETE")
    _, requests, events = embedded_run(workspace, [same, same, done])
    assert [r["temperature"] for r in requests] == [0.0, 0.0, UNSTICK_TEMPERATURE]
    assert requests[2]["messages"] == requests[1]["messages"]  # the same prompt: cached
    # front ends end the streamed reply that was not taken (a step event) before the new one
    kinds = [e["type"] for e in events if e["type"] in ("iteration", "status", "token")]
    asked = kinds.index("status", kinds.index("token"))
    assert kinds[asked + 1] == "iteration" and kinds[asked + 2] == "token"


def test_a_rule_switched_off_changes_only_what_it_does(workspace):
    """The small-model rules are named pieces (lmagent.loop.policy.RULES). Without "resample"
    the repeated reply above is taken at once, not asked for again; the rules beside it still
    apply: it failed before, so it is not run again, and the reply after it is sampled."""
    same = text("```bash\ncat missing.txt\n```")
    done = text("It does not exist.\nTASK_COMPLETE")
    with llama_cpp([same, same, done]) as llm:
        config = embedded_config(workspace, llm)
        result = run(config, "fix the bug", rules=RULES - {"resample"})
        llm.assert_all_used()
    assert [r["temperature"] for r in llm.requests] == [0.0, 0.0, UNSTICK_TEMPERATURE]
    assert last_message(llm.requests[2]).startswith("Not run: cat missing.txt would fail")
    assert result.status == "completed" and result.message == "It does not exist."


def test_a_command_run_again_after_a_fix_is_taken_as_it_is(workspace):
    (workspace / "calc.py").write_text(CALC)
    run_it = text("```bash\npython3 calc.py\n```")
    fix = text("calc.py\n```python\n" + CALC.replace("a - b", "a + b") + "```")
    done = text("Fixed.\nTASK_COMPLETE")  # once: a clean run without output is a check too
    _, requests, _ = embedded_run(workspace, [run_it, fix, run_it, done])
    assert [r["temperature"] for r in requests] == [0.0] * 4  # no reply asked for again


def test_a_reply_repeated_after_every_resample_is_taken_and_the_next_one_is_sampled(workspace):
    same = text("```bash\nls\n```")
    steps = [same, same, same, same, text("Nothing here.\nTASK_COMPLETE")]
    _, requests, events = embedded_run(workspace, steps)
    temperatures = [0.0, 0.0, UNSTICK_TEMPERATURE, UNSTICK_TEMPERATURE, UNSTICK_TEMPERATURE]
    assert [r["temperature"] for r in requests] == temperatures
    assert len([e for e in events if e["type"] == "tool_call"]) == 2  # run again, as it was
    assert "already succeeded before" in last_message(requests[4])


def test_a_sample_that_is_the_repeat_word_for_word_is_not_asked_for_again(workspace):
    """At temperature 1.0 a 1.5B model gave one 182-token reply three times (a quarter of its
    tokens in some Exercism runs): the model is sure of it, a second sample would be the same."""
    same = text("```bash\nls\n```")
    steps = [same, same, same, text("Nothing here.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps)
    temperatures = [0.0, 0.0, UNSTICK_TEMPERATURE, UNSTICK_TEMPERATURE]
    assert [r["temperature"] for r in requests] == temperatures
    statuses = [e["message"] for e in events if e["type"] == "status"]
    assert statuses.count("the reply repeats an earlier one; asking again") == 1
    assert "no new reply; taking the repeated one" in statuses
    assert result.status == "completed"


def test_a_failed_reply_repeated_after_every_resample_is_not_run_and_the_error_said_again(
    workspace,
):
    """Run again, its failure enters the history twice, and the model copies it again."""
    same = text("```bash\ncat missing.txt\n```")
    steps = [same, same, same, same, text("It does not exist.\nTASK_COMPLETE")]
    _, requests, events = embedded_run(workspace, steps)
    assert len([e for e in events if e["type"] == "tool_call"]) == 1
    assert last_message(requests[4]) == (
        "Not run: cat missing.txt would fail the same way, as nothing has changed. Command "
        "exited with code 1: cat: missing.txt: No such file or directory. Change what the "
        "error points at first, or do something else."
    )


def test_a_failed_reply_from_files_as_they_were_before_is_a_repeat(workspace):
    """The 1.5B model wrote "Hello, world!" into hello.py, then "SyntaxError: invalid
    syntax", then the first again, running it each time: 27 requests, never a repeat by a
    count of changes. The files are as they were when the same reply failed before."""
    one = text('```bash\necho "Hello, world!" > hello.py\npython3 hello.py\n```')
    two = text('```bash\necho "SyntaxError: invalid syntax" > hello.py\npython3 hello.py\n```')
    fixed = text("hello.py\n```python\nprint('Hello, world!')\n```")
    run_it = text("```bash\npython3 hello.py\n```")
    steps = [one, two, one, two, two, two, fixed, run_it, text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Create hello.py and run it")
    assert [r["temperature"] for r in requests[3:6]] == [0.0, *[UNSTICK_TEMPERATURE] * 2]
    assert last_message(requests[6]).startswith("Not run: it would fail the same way")
    assert result.status == "completed"


def test_a_model_that_keeps_repeating_a_failed_reply_is_blocked(workspace):
    same = text("```bash\ncat missing.txt\n```")
    # each repeat asked for again once: a sample the same word for word is not asked again
    result, requests, _ = embedded_run(workspace, [same] * 9)
    assert result.status == "blocked" and "repeating actions that fail" in result.message
    assert "Not run:" in last_message(requests[-1])


def test_part_of_a_failed_command_run_again_alone_is_asked_for_again(workspace):
    """`python3 hello.py` failed inside the command that wrote hello.py; alone, unchanged
    since, it fails the same: the 1.5B model ran it five times."""
    wrote = text('```bash\necho "Hello, world!" > hello.py\npython3 hello.py\n```')
    fixed = text("hello.py\n```python\nprint('Hello, world!')\n```")
    run_it = text("```bash\npython3 hello.py\n```")
    steps = [wrote, run_it, fixed, run_it, text("TASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Create hello.py and run it")
    assert [r["temperature"] for r in requests[1:3]] == [0.0, UNSTICK_TEMPERATURE]
    assert (workspace / "hello.py").read_text() == "print('Hello, world!')\n"


@pytest.mark.parametrize(
    "command",
    [
        "cat > notes.txt <<EOF\npython3 notes.txt\nEOF",  # a here-document's lines
        'echo "one\ncat notes.txt"',  # quotes across lines
        "for f in *.txt; do\ncat notes.txt\ndone",  # a loop's body
    ],
)
def test_a_line_of_a_command_that_is_not_a_command_is_no_repeat(workspace, command):
    steps = [text(f"```bash\n{command}\n```"), text("```bash\ncat notes.txt\n```")]
    _, requests, _ = embedded_run(workspace, [*steps, text("Done.\nTASK_COMPLETE")])
    assert [r["temperature"] for r in requests] == [0.0] * 3


def test_a_grep_without_match_and_a_lone_cd_are_explained(workspace):
    (workspace / "sub").mkdir()
    steps = [
        text("```bash\ngrep -r nothing_here .\n```"),
        text("```bash\ncd sub\n```"),
        text("Done.\nTASK_COMPLETE"),
    ]
    _, requests, _ = embedded_run(workspace, steps)
    told = last_message(requests[1])
    assert '"success": true' in told and "grep found no match (exit code 1" in told
    assert "cd alone changes nothing" in last_message(requests[2])


def test_finishing_after_a_change_without_looking_is_questioned_once(workspace):
    steps = [
        text("```bash\necho \"print('Hello')\" > hello.py\n```"),
        text("TASK_COMPLETE"),
        text("```bash\npython3 hello.py\n```"),
        text("It prints Hello; fixing.\nhello.py\n```python\nprint('Hello, world!')\n```"),
        text("TASK_COMPLETE"),  # changed again, unchecked: asked only once, so accepted
    ]
    result, requests, _ = embedded_run(workspace, steps, task="make hello.py and run it")
    assert result.status == "completed"
    assert "$ python3 hello.py\nHello\n" in last_message(requests[2])  # the harness ran it
    assert "Before finishing" not in last_message(requests[4])


@pytest.mark.parametrize(
    ("change", "look", "asked"),
    [  # showing a changed program is not running it; a data file written silently is shown
        ("echo 'print(1)' > hello.py\ncat hello.py", "python3 hello.py", "$ python3 hello.py\n1"),
        (
            "echo 8421 > answer.txt",
            "cat answer.txt",
            "made with the task:\n\nanswer.txt\n```\n8421\n```",
        ),
        ("printf 'a\\0b' > a.bin", "ls", "check your work"),  # none to show: binary
    ],
)
def test_finishing_unchecked_is_asked_for_the_right_check(workspace, change, look, asked):
    steps = [text(f"```bash\n{change}\n```"), text("TASK_COMPLETE")]
    steps += [text(f"```bash\n{look}\n```"), text("Checked.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="make the file")
    assert asked in last_message(requests[2])
    assert result.status == "completed" and len(requests) == 4


def test_an_answer_after_a_command_made_a_file_unseen_shows_that_file_first(workspace):
    """A 1.5B model's awk wrote older.txt empty and it answered with a summary of what it
    meant to do: the run ended completed, the file never seen. An answer is a finish: the file
    is shown (its first lines, how many in all) before it is accepted."""
    (workspace / "people.csv").write_text("name,age\nAda,36\nBob,25\n")
    steps = [
        text(
            "```bash\ngrep -E 'age > 30' people.csv | cut -d, -f1 > older.txt\nseq 30 > n.txt\n```"
        ),
        text("The names are written to older.txt."),
        text("```bash\nawk -F, 'NR > 1 && $2 > 30 {print $1}' people.csv > older.txt\n```"),
        text("The names are written to older.txt."),
    ]
    result, requests, _ = embedded_run(workspace, steps, task="Write the names of those over 30")
    nudge = last_message(requests[2])
    assert "older.txt\n```\n(empty)\n```" in nudge
    assert "n.txt\n```\n1\n2\n" in nudge and "20\n… (30 lines in all)\n```" in nudge
    assert "\n21\n" not in nudge
    assert (workspace / "older.txt").read_text() == "Ada\n"
    assert result.status == "completed" and len(requests) == 4  # asked once


@pytest.mark.parametrize(
    ("path", "content", "told"),
    [
        ("settings.json", "true true 3", "not valid JSON now (Extra data: line 1 column 6"),
        ("settings.json", '{"debug": true}', "saved; if that was all the task asks"),
        ("tsconfig.json", '{"a": 1, // a comment\n}', "saved; if that was all the task asks"),
        ("notes.txt", "true true 3", "saved; if that was all the task asks"),
    ],
)
def test_a_json_file_written_is_parsed_and_a_broken_one_is_said(workspace, path, content, told):
    """Told "saved; if that was all the task asks, reply TASK_COMPLETE" after writing `true
    true 3` into settings.json, a 1.5B model finished. A file with comments (JSONC, as
    tsconfig.json) is not judged."""
    call = {"name": "write", "arguments": {"path": path, "content": content}}
    steps = [text(f"<tool_call>{json.dumps(call)}</tool_call>"), text("Done.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="set debug to true")
    assert told in last_message(requests[1])


def test_without_the_data_check_a_broken_json_file_is_not_said(workspace):
    call = {"name": "write", "arguments": {"path": "a.json", "content": "{"}}
    steps = [text(f"<tool_call>{json.dumps(call)}</tool_call>"), text("Done.\nTASK_COMPLETE")]
    rules = RULES - {"data_check"}
    _, requests, _ = embedded_run(workspace, steps, task="write a.json", rules=rules)
    assert "not valid JSON" not in last_message(requests[1])


def test_a_broken_json_file_written_again_unchanged_is_not_run_again(workspace):
    """The step failed: the same write, nothing changed since, would fail the same way."""
    call = {"name": "write", "arguments": {"path": "a.json", "content": "{"}}
    reply = f"<tool_call>{json.dumps(call)}</tool_call>"
    steps = [text(reply), text(reply), text(reply), text("Done.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="write a.json", rules=ONE_ATTEMPT)
    told = [last_message(r) for r in requests[1:]]
    assert any("it is not valid JSON now" in message for message in told)
    assert any(message.startswith("Not ") for message in told)


def test_finishing_after_looking_at_the_change_ends_at_once(workspace):
    steps = [
        text("hello.py\n```python\nprint('hi')\n```"),
        text("```bash\npython3 hello.py\n```"),
        text("It prints hi.\nTASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(workspace, steps, task="make hello.py and run it")
    assert result.status == "completed" and len(requests) == 3


def test_actions_after_a_failed_one_in_the_same_reply_are_not_run(workspace):
    write = {"name": "write", "arguments": {"path": ".lmagent/notes.txt", "content": "x"}}
    touch = {"name": "shell", "arguments": {"command": "touch after.txt"}}
    reply = "".join(f"<tool_call>{json.dumps(call)}</tool_call>\n" for call in (write, touch))
    steps = [text(reply), text("It is protected.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="commit")
    assert not (workspace / "after.txt").exists()
    assert "an action before it in your reply failed" in last_message(requests[1])


def test_a_command_names_the_files_it_changed(workspace):
    steps = [text("```bash\necho 50 > total.txt\n```"), text("```bash\ncat total.txt\n```")]
    steps.append(text("Done.\nTASK_COMPLETE"))
    _, requests, _ = embedded_run(workspace, steps, task="write 50 to total.txt")
    assert '"files_changed": ["total.txt"]' in last_message(requests[1])
    assert "files_changed" not in last_message(requests[2])  # cat changed nothing


def test_a_reply_is_read_only_up_to_its_first_action(workspace):
    """What follows a command, before its output, is made up: the model's own 'output' and
    commands built on it; what follows a file, before its check, was a rewrite of the test
    file it had been told was correct. The stream is closed after the first action."""
    rambling = (
        "a.py\n```python\nprint(1)\n```\n```bash\npython3 a.py\n```\n"
        "output:\n```\n2\n```\n```bash\ntouch made_up.txt\n```\nTASK_COMPLETE"
    )
    run_it = "```bash\npython3 a.py\n```\noutput:\n```\n2\n```\n```bash\ntouch made_up.txt\n```"
    steps = [text(rambling), text(run_it), text("It printed 1.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="make a.py and run it")
    assert result.status == "completed"
    assert (workspace / "a.py").exists() and not (workspace / "made_up.txt").exists()
    kept = requests[1]["messages"][-2]["content"]
    assert kept.endswith("a.py\n```python\nprint(1)\n```") and "bash" not in kept
    assert "output:\n1\n" not in last_message(requests[1])  # the command was never read
    kept = requests[2]["messages"][-2]["content"]
    assert kept.endswith("```bash\npython3 a.py\n```") and "output:" not in kept
    assert "output:\n1\n" in last_message(requests[2])


def test_a_reply_ends_with_its_solution_before_it_rewrites_the_tests(workspace):
    """Held-out anagram: a block without a path (the named file's solution), then "let's
    update the test file" and a rewrite of it, which broke the tests before the solution's
    check had been shown."""
    calc_project(workspace)
    rewrite = "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 6\n"
    reply = (
        "Here is a possible implementation:\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
        f"Now, let's update the test file:\n\ntest_calc.py\n```python\n{rewrite}```\n"
    )
    steps = [text(reply, chunk_size=8), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, steps, task="Fix calc.py; the tests are in test_calc.py."
    )
    assert (workspace / "test_calc.py").read_text() == TEST_CALC
    assert "saved and checked: the check below passes" in last_message(requests[1])
    assert requests[1]["messages"][-2]["content"].endswith("return a + b\n```")
    assert result.status == "completed"


def test_a_reply_is_read_to_its_end_without_the_one_action_rule(workspace):
    rambling = "a.py\n```python\nprint(1)\n```\n```bash\npython3 a.py\n```\nIt prints 1."
    steps = [text(rambling), text("It printed 1.\nTASK_COMPLETE")]
    with llama_cpp(steps) as llm:
        run(embedded_config(workspace, llm), "make a.py and run it", rules=RULES - {"one_action"})
        requests = llm.requests
    assert requests[1]["messages"][-2]["content"].endswith("It prints 1.")
    assert "output:\n1\n" in last_message(requests[1])


@pytest.mark.parametrize(
    "block",
    ["port = 8421", "prices = [3, 4, 5]\nfor p in prices:\n    print(p)", "import os\nprint(1)"],
)
def test_python_in_a_bash_block_is_not_run_and_the_model_is_told_how(workspace, block):
    steps = [text(f"```bash\n{block}\n```"), text("answer.txt\n```\n8421\n```")]
    steps += [text("Saved.\nTASK_COMPLETE")]
    _, requests, events = embedded_run(workspace, steps, task="save the port")
    told = last_message(requests[1])
    assert "holds Python (or a file's content), not shell commands" in told
    assert not [e for e in events if e["type"] == "tool_result" and e["name"] == "shell"]
    assert (workspace / "answer.txt").read_text() == "8421\n"


def test_a_function_fixed_in_a_bash_block_over_a_test_run_is_saved_then_the_tests_run(workspace):
    """The 1.5B model wrote its fix of a function in a bash block and ran the tests under it:
    bash stopped at the def's parenthesis, and the model sent the same block again."""
    calc_project(workspace)
    block = (
        "```bash\n# Fix add so it adds\ndef add(a, b):\n    return a + b\n\n"
        "# Run the tests again\npython3 -m pytest -q test_calc.py\n```"
    )
    steps = [text(block), text("Fixed.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps, task="Fix calc.py.")
    assert (workspace / "calc.py").read_text() == ADD_BUG.replace("a - b", "a + b")
    ran = [e["arguments"] for e in events if e["type"] == "tool_call" and e["name"] == "shell"]
    assert ran == [{"command": "python3 -m pytest -q test_calc.py"}]
    assert "1 passed" in last_message(requests[1]) and result.status == "completed"


@pytest.mark.parametrize(
    "command", ["ls -la", "x=1\necho $x", "for f in *.py; do echo $f; done", "cat a | wc -l"]
)
def test_shell_commands_are_not_taken_for_python(command):
    assert [c.get("refused") for c in block_actions(f"```bash\n{command}\n```", KNOWN)] == [None]


def test_tools_called_the_way_the_prompt_lists_them_are_calls():
    known = {"edit": ["path", "search", "replace"], "read": ["path", "offset", "limit"]}
    reply = "TOOL: edit(data.py, get_data, load_data)\nread(path='a.py')\nTASK_COMPLETE"
    assert extract_text_calls(reply, known, blocks=True) == [
        {
            "name": "edit",
            "arguments": {"path": "data.py", "search": "get_data", "replace": "load_data"},
        },
        {"name": "read", "arguments": {"path": "a.py"}},
    ]
    in_code = "app.py\n```python\nread('config.ini')\n```"  # a program's own read(): code
    assert [c["name"] for c in extract_text_calls(in_code, known | {"write": []}, True)] == [
        "write"
    ]
    assert extract_text_calls("print(add(1, 2))\nedit(1, 2, 3, 4)", known, blocks=True) == []


@pytest.mark.parametrize(
    "block",
    [
        "write(settings.json, '{\"debug\": true}')",
        'write(settings.json, """{"debug": true}""")',
        "write(\n    settings.json,\n    '{\"debug\": true}',\n)",
        "# Create the file:\nwrite(settings.json, '{\"debug\": true}')",
        'TOOL=write\narguments={"path": "settings.json", "content": "{\\"debug\\": true}"}',
    ],
)
def test_a_tool_call_put_in_a_bash_block_is_that_call(block):
    known = {"write": ["path", "content"], "shell": ["command"]}
    calls = extract_text_calls(f"```bash\n{block}\n```", known, blocks=True)
    assert calls == [
        {"name": "write", "arguments": {"path": "settings.json", "content": '{"debug": true}'}}
    ]


@pytest.mark.parametrize(
    "block, expected",
    [
        ("write count.txt 17", ("write", {"path": "count.txt", "content": "17"})),
        (
            'edit hello.py "Hello, world" "Bye"',
            ("edit", {"path": "hello.py", "search": "Hello, world", "replace": "Bye"}),
        ),
        ("# save it\nwrite 'a b.txt' 'x\ny'", ("write", {"path": "a b.txt", "content": "x\ny"})),
        ('write a.txt "open', ("shell", {"command": 'write a.txt "open'})),
        ("edit a.py -search x", ("edit", {"path": "a.py", "search": "x"})),  # as flags
        (
            "edit app.py --search 'emial' --replace=email",
            ("edit", {"path": "app.py", "search": "emial", "replace": "email"}),
        ),
        ("edit --replace y a.py x", ("edit", {"path": "a.py", "search": "x", "replace": "y"})),
        ("write a.txt x y", ("shell", {"command": "write a.txt x y"})),  # more than it takes
        ("write", ("shell", {"command": "write"})),
        ("write\necho hi", ("shell", {"command": "write\necho hi"})),  # a name alone: no call
        ("grep -n x a.py", ("shell", {"command": "grep -n x a.py"})),  # a real command
        ('shell -c "python3 a.py"', ("shell", {"command": "python3 a.py"})),
        ("shell echo 'a  b'", ("shell", {"command": "echo 'a  b'"})),
        ("shell python3 a.py Ann", ("shell", {"command": "python3 a.py Ann"})),
    ],
)
def test_a_tool_written_as_a_command_is_that_tool(block, expected):
    known = {"write": ["path", "content"], "edit": ["path", "search", "replace"], "grep": ["p"]}
    calls = extract_text_calls(f"```bash\n{block}\n```", {**known, "shell": ["command"]}, True)
    assert [(c["name"], c["arguments"]) for c in calls] == [expected]


@pytest.mark.parametrize(
    "block, problem",
    [
        ("edit app.py --old emial --new email", "`--old` is none of its parameters"),
        ("edit app.py --search", "`--search` needs one value"),
        ("edit app.py --search a --search b", "`--search` needs one value"),
    ],
)
def test_a_tool_written_as_a_command_that_cannot_be_read_says_what_was_not_read(block, problem):
    """Not run as a shell command (whose only answer is 'not found'): the model is told which
    flag could not be read and the parameters the tool has."""
    known = {"edit": ["path", "search", "replace"], "shell": ["command"]}
    (call,) = extract_text_calls(f"```bash\n{block}\n```", known, True)
    assert call["name"] == "edit" and problem in call["refused"]
    assert "path, search, replace" in call["refused"]


def test_a_typo_fixed_with_the_edit_tool_written_as_a_command_is_fixed(workspace):
    """As a new user saw: `edit app.py --search 'emial' --replace 'email'`, ten times, each
    answered "`edit` is one of your tools, not a shell command"."""
    (workspace / "app.py").write_text("print('emial')\n")
    fix = "```bash\nedit app.py --search 'emial' --replace 'email'\n```"
    steps = [text(fix), text("```bash\npython3 app.py\n```"), text("TASK_COMPLETE")]
    result, _, _ = embedded_run(workspace, steps, task="Fix the typo in app.py.")
    assert (workspace / "app.py").read_text() == "print('email')\n"
    assert result.status == "completed"


def test_an_answer_without_any_action_is_questioned_once(workspace):
    steps = [text("The port is 8421 as set in config.ini under [server]. " * 2)]
    steps += [text("answer.txt\n```\n8421\n```"), text("Written.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="write the port to answer.txt")
    assert result.status == "completed"
    told = last_message(requests[1])
    assert told.startswith("Nothing has been done yet: no file was written and no command")
    assert "tool" not in told  # a model calling tools as text was never shown them as tools
    assert "path on the line just before its block" in told and "```bash block" in told
    assert told.endswith("The task: write the port to answer.txt")
    assert (workspace / "answer.txt").read_text() == "8421\n"


def test_a_short_answer_to_a_task_that_needs_an_action_is_told_nothing_was_done(workspace):
    """No rule guesses from the task's words that the answer belongs in answer.txt: told that
    nothing was done, with the task again, the model acts."""
    steps = [text("8421"), text('```bash\necho "8421" > answer.txt\n```')]
    steps += [text("Written.\nTASK_COMPLETE")] * 2  # the second after being asked to check
    result, requests, _ = embedded_run(workspace, steps, task="write the port to answer.txt")
    assert result.status == "completed"
    assert last_message(requests[1]).startswith("Nothing has been done yet")
    assert last_message(requests[1]).endswith("The task: write the port to answer.txt")
    assert (workspace / "answer.txt").read_text() == "8421\n"


def test_a_plain_answer_is_accepted_the_second_time(workspace):
    steps = [text("4"), text("4\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="what is 2 + 2?")
    assert (result.status, result.message, len(requests)) == ("completed", "4", 2)


def test_a_failed_call_repeated_unchanged_is_not_run_again(workspace):
    """Other words around the same command are the same action: asked for again, twice."""
    again, done = "```bash\npython3 missing.py\n```", "Gone.\nTASK_COMPLETE"
    steps = [text(again), text("Trying again:\n" + again), text(again), text(again), text(done)]
    _, requests, _ = embedded_run(workspace, steps)
    assert [r["temperature"] for r in requests[2:4]] == [UNSTICK_TEMPERATURE] * 2
    assert last_message(requests[4]) == (
        "Not run: python3 missing.py would fail the same way, as nothing has changed. "
        f"missing.py does not exist in the workspace ({workspace})."
    )


def test_a_reply_copying_the_stand_in_for_a_repeat_is_that_repeat(workspace):
    """Its history holding SAID_AGAIN for each repeat of a failing command, the 1.5B model wrote
    it as its next reply, and the run ended "completed" with every test failing. It is the
    reply before it again: not run, and the run ends blocked."""
    calc_project(workspace)
    failing = text("```bash\n# fix it\npython3 -m pytest -q test_calc.py\n```")
    steps = [failing] * 3 + [text(SAID_AGAIN)] + [failing] * 5
    result, _, _ = embedded_run(workspace, steps, task="Fix calc.py.", rules=ONE_ATTEMPT)
    assert result.status == "blocked"
    assert result.message == "the model keeps repeating actions that fail"


def streamed_steps(events: list[dict]) -> list[str]:
    """The text streamed in each step of a run (a step begins with an "iteration" event)."""
    kept = [e for e in events if e["type"] in ("iteration", "token")]
    return "".join("\f" if e["type"] == "iteration" else e["text"] for e in kept).split("\f")


def test_a_sample_that_begins_as_the_repeat_did_is_stopped_early_and_not_asked_again(workspace):
    """At temperature 1.0 the 1.5B model wrote the same 300-500-token reply again in 8 of 15
    samples; one that begins the same for SAME_START characters is not read to its end."""
    said = "I will look at the file the task names, to see what it holds. " * 5
    again = text(f"{said}\n```bash\npython3 missing.py\n```", chunk_size=8)
    steps = [again, again, again, text("Gone.\nTASK_COMPLETE")]
    _, requests, events = embedded_run(workspace, steps)
    assert [r["temperature"] for r in requests] == [0.0, 0.0, *[UNSTICK_TEMPERATURE] * 2]
    sample = streamed_steps(events)[3]  # the third request: the sample, stopped early
    assert SAME_START <= len(sample) < len(said)
    assert last_message(requests[3]).startswith("Not run: python3 missing.py would fail")


def test_a_write_that_failed_its_check_begun_again_word_for_word_is_stopped_early(workspace):
    """After a write whose check failed, the 1.5B model wrote the same write word for word 116
    times in 207, each in full; stopped at SAME_START characters, it is that write again: not
    saved, and the attempt begun again."""
    calc_project(workspace)
    helpers = "".join(f"\n\ndef helper_{n}(x):\n    return x + {n}\n" for n in range(20))
    written = f"calc.py\n```python\ndef add(a, b):\n    return b - a\n{helpers}```"
    failing = text(written, chunk_size=8)
    steps = [failing, failing, text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps, task="Fix calc.py.")
    assert result.status == "completed"
    assert SAME_START <= len(streamed_steps(events)[2]) < len(written) // 2
    assert requests[2]["messages"] == requests[0]["messages"]  # begun again


REASONED = "The test fails because add does not add its two numbers; it must add them. " * 3


def test_a_reply_that_begins_as_an_earlier_one_did_is_stopped_and_asked_again(workspace):
    """Told its change failed its check, the 1.5B model wrote the same 350-token reply again,
    greedy: stopped after its first SAME_START characters, it is asked for again, sampled."""
    calc_project(workspace)
    wrong = text(f"{REASONED}\n{STILL_WRONG}", chunk_size=8)
    steps = [wrong, wrong, text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(
        workspace, steps, task="Fix calc.py.", rules=ONE_ATTEMPT
    )
    assert [r["temperature"] for r in requests] == [0.0, 0.0, UNSTICK_TEMPERATURE, 0.0]
    assert SAME_START <= len(streamed_steps(events)[2]) < len(REASONED)  # stopped early
    assert "saved and checked: the check below passes" in last_message(requests[3])
    assert result.status == "completed"


@pytest.mark.parametrize("rules", [RULES, RULES - {"stop_repeat"}])
def test_a_reply_that_begins_with_the_same_block_is_read_to_its_end(workspace, rules):
    """A file rewritten whole, changed near its end, begins as it did before (its first write
    failed no check: there is none); and without the rule, a reply beginning as an earlier
    one did is read to its end."""
    calc_project(workspace)
    if rules == RULES:
        (workspace / "test_calc.py").unlink()
    helpers = "".join(f"def helper_{n}(x):\n    return x + {n}\n\n\n" for n in range(8))
    wrong = f"calc.py\n```python\n{helpers}def add(a, b):\n    return b - a\n```"
    first = text(wrong) if rules == RULES else text(f"{REASONED}\n{STILL_WRONG}")
    fixed = wrong.replace("b - a", "a + b") if rules == RULES else f"{REASONED}\n{FIXED}"
    steps = [first, text(fixed, chunk_size=8), *[text("Fixed.\nTASK_COMPLETE")] * 3]
    with llama_cpp(steps) as llm:
        result = run(embedded_config(workspace, llm), "Fix calc.py.", rules=rules)
    assert {r["temperature"] for r in llm.requests} == {0.0}
    assert "return a + b" in (workspace / "calc.py").read_text()
    assert result.status == "completed"


def test_a_small_model_announcing_work_is_told_how_to_act_in_its_prompt_s_words(workspace):
    steps = [text("I will write the file now."), text("hello.py\n```python\nprint(1)\n```")]
    steps += [text("Written.\nTASK_COMPLETE"), text("It prints 1.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="write hello.py printing 1")
    told = last_message(requests[1])
    assert "write its path on the line just before its block" in told
    assert "call" not in told
    assert result.status == "completed"


def test_a_tool_run_as_a_command_is_pointed_at_the_tool(workspace):
    steps = [text("```bash\nedit hello.py a b c\n```"), text("I see.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps)  # more words than edit has arguments
    assert "`edit` is one of your tools, not a shell command" in last_message(requests[1])


def test_the_ending_word_put_in_a_bash_block_ends_the_task(workspace):
    steps = [text("```bash\nls\n```"), text("```bash\ntask_complete\n```")]
    result, requests, _ = embedded_run(workspace, steps)
    assert (result.status, len(requests)) == ("completed", 2)


def test_a_tool_written_as_a_command_runs_as_that_tool(workspace):
    steps = [text("```bash\nwrite count.txt 17\n```"), text("Written.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="write 17 to count.txt")
    assert (workspace / "count.txt").read_text() == "17"
    assert '"created": true' in last_message(requests[1])
    assert "if that was all the task asks, reply TASK_COMPLETE" in last_message(requests[1])
    assert result.status == "completed"


def test_tool_arguments_that_are_not_python_are_read_as_written():
    known = {"shell": ["command", "timeout"]}
    reply = "```bash\nshell(python3 squares.py, timeout=10)\n```"
    assert extract_text_calls(reply, known, blocks=True) == [
        {"name": "shell", "arguments": {"command": "python3 squares.py", "timeout": "10"}}
    ]


# --------------------------------------------------------------------------- files asked for


SHOUT_TASK = "Add a --shout flag to app.py: with it, the greeting is printed in upper case."


@pytest.mark.parametrize(
    ("task", "command"),
    [
        ("What does app.py print for Ann?", "python3 app.py Ann"),  # a question: no change
        ("Add app.py to git and commit it.", "git init -q && git add app.py"),  # .git changed
        ("Fix app.py if it is wrong.", "python3 app.py Ann"),  # no change asked for by words
    ],
)
def test_a_finish_with_no_change_ends_as_the_model_says(workspace, task, command):
    (workspace / "app.py").write_text(APP)
    steps = [text(f"```bash\n{command}\n```"), text("It is right.\nTASK_COMPLETE")]
    result, _, _ = embedded_run(workspace, steps, task=task)
    assert result.status == "completed" and (workspace / "app.py").read_text() == APP


COMMIT = "git -c user.name=a -c user.email=a@b.c commit -qm notes"


def test_a_commit_names_finishing_as_the_next_step(workspace):
    """Committed as asked, the 1.5B model went on to ls, git status, git diff and the same
    commit again."""
    (workspace / "README.md").write_text("# demo\n")
    steps = [text(f"```bash\ngit init -q\ngit add README.md\n{COMMIT}\n```"), text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Commit README.md.")
    told = last_message(requests[1])
    assert '"next": "committed; if that was all the task asks, reply TASK_COMPLETE"' in told
    assert result.status == "completed"


def test_a_task_that_asks_no_commit_ends_with_changes_uncommitted(workspace):
    steps = [text("```bash\ngit init -q\necho x > notes.txt\ncat notes.txt\n```")]
    steps += [text("Done.\nTASK_COMPLETE")]
    result, _, _ = embedded_run(workspace, steps, task="Start a repository with notes.txt.")
    assert result.status == "completed"


def test_a_file_to_change_that_leads_out_of_the_workspace_is_never_read(workspace, tmp_path):
    """Attack: the task names a link to a host file as the file to change; it is read through
    the workspace's rules (refused: not a file to change), so nothing of it reaches the model
    and finishing without changing it is not questioned."""
    secret = tmp_path / "secret.py"
    secret.write_text("host-secret = 1\n")
    (workspace / "link.py").symlink_to(secret)
    steps = [text("```bash\nls\n```"), text("Nothing to fix.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Fix the bug in link.py.")
    assert result.status == "completed" and len(requests) == 2
    assert all("host-secret" not in str(r["messages"]) for r in requests)


@pytest.mark.parametrize(
    "task",
    [
        "Write that file's name (like src/x.py) to todo.txt.",  # an example of a form
        "Bump the version from 1.0 to 1.1 in todo.txt.",  # numbers
    ],
)
def test_examples_and_numbers_are_not_files_the_task_asks_for(workspace, task):
    steps = [text("todo.txt\n```\nsrc/c.py\n```"), text("Done.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task=task)
    assert "saved; if that was all the task asks, reply TASK_COMPLETE" in last_message(requests[1])
    assert result.status == "completed" and len(requests) == 2


def test_a_changed_program_that_leads_out_of_the_workspace_is_never_checked(workspace, tmp_path):
    """Attack: the model makes a changed program a link to a host file; the check at the end
    reads it through the workspace's rules (refused: not a program to check), so nothing of
    the host file reaches the model, not even in a compiler's error."""
    secret = tmp_path / "secret.py"
    secret.write_text("host-secret =\n")
    steps = [text(f"```bash\nln -s {secret} app.py\n```")]
    steps += [text("Done.\nTASK_COMPLETE")] * 2  # the second after being asked to check
    result, requests, _ = embedded_run(workspace, steps, task="Make app.py.")
    assert result.status == "completed"
    assert all("host-secret" not in str(r["messages"]) for r in requests)


# --------------------------------------------------------------------------- checks by running


ADD_BUG = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXED = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
STILL_WRONG = "calc.py\n```python\ndef add(a, b):\n    return b - a\n```"


def calc_project(workspace):
    (workspace / "calc.py").write_text(ADD_BUG)
    (workspace / "test_calc.py").write_text(TEST_CALC)


@pytest.mark.parametrize(
    "task",
    [
        "Running python3 report.py crashes. Fix report.py.",  # written in the text
        "Fix report.py: `python3 report.py` crashes.",  # quoted as code
    ],
)
def test_a_command_the_task_names_is_run_before_the_first_reply(workspace, task):
    (workspace / "report.py").write_text("print(1 / 0)\n")
    steps = [text("I see.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task=task)
    shown = str(requests[0]["messages"])
    assert "The commands named in the task, run before you start" in shown
    assert "$ python3 report.py" in shown and "ZeroDivisionError" in shown
    assert result.status == "completed"  # nothing changed: an answer, not a finish to check


def test_a_named_command_that_only_wants_its_arguments_is_not_shown(workspace):
    """The task names `python3 app.py Ann --shout`; run as `python3 app.py`, argparse's
    usage error tells the model nothing the task does not."""
    app = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('name')\n"
    (workspace / "app.py").write_text(app + "print(parser.parse_args().name)\n")
    task = "Add a --shout flag to app.py (python3 app.py Ann --shout prints HELLO ANN)."
    _, requests, _ = embedded_run(workspace, [text("I see.\nTASK_COMPLETE")], task=task)
    assert "The commands named in the task" not in str(requests[0]["messages"])


def test_a_named_test_run_where_every_test_fails_is_shown_after_the_first_change(workspace):
    """Shown an exercise's stub failing all its tests before its first reply, the 1.5B model
    began 11 of 16 replies explaining the failures; all failing, they say only that nothing
    is written yet. The check after the first write shows them."""
    (workspace / "calc.py").write_text("def add(a, b):\n    pass\n")
    tests = "".join(
        f"\n\ndef test_add_{n}():\n    assert add({n}, 3) == {n + 3}\n" for n in range(3)
    )
    (workspace / "test_calc.py").write_text("from calc import add\n" + tests)
    steps = [text(STILL_WRONG), text(FIXED), text("TASK_COMPLETE")]
    task = "Implement add in calc.py: `pytest -q test_calc.py` runs its tests."
    result, requests, _ = embedded_run(workspace, steps, task=task)
    assert "run before you start" not in str(requests[0]["messages"])
    shown = str(requests[1]["messages"][-1]["content"])
    assert "___ test_add_1 ___" in shown and "assert 2 == 4" in shown
    assert "2 failed, 1 passed" in shown
    assert result.status == "completed"


@pytest.mark.parametrize(
    ("tests", "all_failed"),
    [
        (["assert add(1, 1) == 2"] * 3, True),  # a stub: every test fails
        (["assert add(1, 1) == 2"] * 2, False),  # one or two failing tests: a bug to see
        (["assert add(1, 1) == 2"] * 3 + ["pass"], False),  # one passes
        (["assert add(1, 1) == 2"] * 3 + ["raise_me(1"], False),  # in error: not collected
    ],
)
def test_a_test_run_is_all_failed_only_when_every_one_of_several_tests_fails(
    tmp_path, tests, all_failed
):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    pass\n")
    for n, body in enumerate(tests):
        test = f"from calc import add\n\n\ndef test_{n}():\n    {body}\n"
        (tmp_path / f"test_{n}.py").write_text(test)
    assert pytest_check(tmp_path).all_failed is all_failed


SQUARES = "squares.py\n```python\nopen('squares.txt', 'w').write('1\\n4\\n')\n```"


def test_a_changed_program_is_run_at_the_finish_as_a_step_that_can_be_undone(workspace):
    """The 1.5B model wrote squares.py and finished without running it: a compile check
    passed it. Now the program runs (it wants no arguments), and what it wrote is a step."""
    steps = [text(SQUARES), *[text("Done.\nTASK_COMPLETE")] * 2]  # the 2nd: asked to check
    result, _, _ = embedded_run(workspace, steps, task="Write squares.py that writes 1, 4.")
    assert result.status == "completed"
    assert (workspace / "squares.txt").read_text() == "1\n4\n"
    checkpoints = Checkpoints(workspace)
    made = [s for s in checkpoints.steps(result.session_id) if "squares.txt" in s["changed"]]
    assert [s["call_id"] for s in made] == ["check-1"]
    checkpoints.restore(result.session_id, made[0]["step"])
    assert not (workspace / "squares.txt").exists()


@pytest.mark.parametrize(
    "program",
    [
        "import sys\nprint(sys.argv[1])\n",  # wants an argument: compiled only
        "import time\ntime.sleep(600)\n",  # still running after PROGRAM_SECONDS: serves
    ],
    ids=["reads arguments", "still running"],
)
def test_a_changed_program_that_needs_arguments_or_keeps_running_is_no_failure(workspace, program):
    steps = [text(f"app.py\n```python\n{program}```"), *[text("Done.\nTASK_COMPLETE")] * 2]
    result, _, _ = embedded_run(workspace, steps, task="Write app.py.")
    assert result.status == "completed"


def test_a_finish_is_refused_while_the_tests_fail_and_accepted_when_they_pass(workspace):
    calc_project(workspace)
    steps = [text(STILL_WRONG), text("Fixed.\nTASK_COMPLETE"), text(FIXED)]
    steps += [text("Fixed.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(
        workspace, steps, task="Fix the bug in calc.py.", rules=ONE_ATTEMPT
    )
    checked, refused = last_message(requests[1]), last_message(requests[2])
    assert "python3 -m pytest" in checked and "assert 1 == 5" in checked  # the write's check
    assert refused.startswith("Not finished: the check fails as shown above (1 failed in ")
    assert "not finished: the check fails" in [e.get("message") for e in events]
    assert result.status == "completed" and len(requests) == 4


def test_a_long_failing_test_run_shows_its_first_failures_short_the_next_listed_and_counts(
    workspace,
):
    """The check's output as the model sees it: short tracebacks (the failing line and its
    error; a test's 20 lines of dict literals came before the TypeError that mattered) of the
    first two failing tests, the next six as one line each with their error, how many more,
    and the counts at the end (24 failing tests shown whole filled 1,500 characters with
    tracebacks of the same error, read again at every check)."""
    tests = "".join(
        f"def test_{n}():\n    expected = {{'n': {n}}}\n    assert {{'n': -1}} == expected, "
        f"'failure number {n}'\n\n\n"
        for n in range(40)
    )
    (workspace / "test_many.py").write_text(tests + "def test_passes():\n    pass\n")
    steps = [text("I see.\nTASK_COMPLETE")]
    task = "Make `python3 -m pytest -q test_many.py` pass."
    _, requests, _ = embedded_run(workspace, steps, task=task)
    shown = last_message(requests[0])
    assert "$ python3 -m pytest -q test_many.py --tb=short" in shown
    assert "\n=== FAILURES ===\n___ test_0 ___\n" in shown and "\n___ test_1 ___\n" in shown
    assert "\n=== the other failing tests ===\nFAILED test_2 - AssertionError: failure" in shown
    assert "FAILED test_7 - " in shown and "test_8" not in shown and "___ test_2" not in shown
    assert "\n(and 32 more)\n40 failed, 1 passed" in shown and "characters cut" not in shown


def failing_at_length(workspace, message: str, count: int, passing: bool = False) -> None:
    """calc.py with its bug and `count` tests of it failing with `message`, a long line (and a
    test that passes, with `passing`)."""
    calc_project(workspace)
    tests = "".join(
        f"\n\ndef test_add_{n}():\n    assert add(2, 3) == 5, {message!r}\n" for n in range(count)
    )
    passes = "\n\ndef test_passes():\n    pass\n" if passing else ""
    (workspace / "test_calc.py").write_text("from calc import add\n" + tests + passes)


def test_the_lines_of_failures_a_check_shows_are_not_cut_at_80_columns(workspace):
    """pytest cuts a failure's summary line to the terminal's width: "FAILED
    all_your_base_test.py::...::test_input_base_is_zero - Asse..." hid what was expected; the
    task's own command, run before the first reply, showed "FAILED test_x - Assertion..."."""
    message = "the input base must be at least 2, and this message says so in a long line"
    failing_at_length(workspace, message, 3, passing=True)  # shown before the start
    steps = [text(STILL_WRONG), text(FIXED), text("TASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Fix calc.py: `pytest -q test_calc.py`")
    first, shown = last_message(requests[0]), str(requests[1]["messages"][-1]["content"])
    assert f"FAILED test_add_2 - AssertionError: {message}" in first  # the task's command
    assert f"FAILED test_add_2 - AssertionError: {message}" in shown  # the third: listed
    assert "\n=== FAILURES ===\n___ test_add_0 ___\n" in shown  # not padded
    assert "FFF. [100%]" in shown and "=" * 4 not in shown and "_" * 4 not in shown


def test_the_models_own_test_run_is_shown_as_a_check_is(workspace):
    """The 1.5B model's first reply to an exercise ran its tests: shown as pytest printed them,
    26 long tracebacks filled 3,100 characters and each summary line was cut at 80 columns
    ("- AssertionError: None !=..."). Its own run is condensed as the harness's checks are:
    the first failures traced, the others listed whole."""
    message = "add must return the sum of its two arguments, and this message says so at length"
    failing_at_length(workspace, message, 9)
    own_run = text("```bash\npython -m pytest -q test_calc.py\n```")
    steps = [own_run, text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Fix the bug in calc.py.")
    shown = last_message(requests[1]).split("output:\n", 1)[1]
    assert shown.startswith("FFFFFFFFF [100%]\n=== FAILURES ===\n___ test_add_0 ___\n"), shown
    assert shown.count("\n___ test_add_") == 2 and "=" * 4 not in shown and "_" * 4 not in shown
    assert (
        f"\n=== the other failing tests ===\nFAILED test_add_2 - AssertionError: {message}" in shown
    )
    assert "\n(and 1 more)\n9 failed in " in shown
    assert result.status == "completed"


def test_commands_are_not_cut_at_80_columns(workspace):
    """A model's command writes for a reader, not a terminal: pytest's summary lines and other
    programs' tables are as wide as 160 columns."""
    program = "width.py\n```python\nimport os\nprint('columns', os.environ['COLUMNS'])\n```"
    steps = [text(program), text("```bash\npython3 width.py\n```"), text("TASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Create width.py printing the width")
    assert "output:\ncolumns 160" in last_message(requests[2])


def pytest_check(folder) -> Check:
    """pytest run in `folder` as the harness runs it, as the check it makes."""
    command = PYTEST
    env = {**os.environ, "COLUMNS": "160", "PYTHONDONTWRITEBYTECODE": "1"}
    ran = subprocess.run(
        command.split(), cwd=folder, env=env, capture_output=True, text=True, check=False
    )
    return Check(command, {"output": ran.stdout + ran.stderr, "exit_code": ran.returncode})


def test_the_tracebacks_shown_are_of_different_errors_when_the_tests_fail_differently(tmp_path):
    """16 tests failed on a missing attribute and 10 on `move()`'s arguments: the first two
    tracebacks, both of the missing attribute, never showed how the tests call `move`."""
    (tmp_path / "robot.py").write_text("class Robot:\n    def move(self):\n        pass\n")
    tests = [
        f"def test_place_{n}():\n    assert Robot().coordinates == ({n}, 0)\n" for n in range(4)
    ]
    tests += [f"def test_move_{n}():\n    Robot().move('R' * {n})\n" for n in range(3)]
    (tmp_path / "test_robot.py").write_text("from robot import Robot\n\n\n" + "\n\n".join(tests))
    shown = pytest_check(tmp_path).shown()
    traced = shown.split("=== the other failing tests ===")[0]
    assert "___ test_place_0 ___" in traced and "___ test_move_0 ___" in traced, shown
    assert "Robot().move('R' * 0)" in traced and "has no attribute 'coordinates'" in traced
    assert "___ test_place_1 ___" not in traced and "\nFAILED test_place_1 - Attr" in shown
    assert "\nFAILED test_move_1 - TypeError" in shown and "FAILED test_move_0" not in shown


def test_a_test_file_that_cannot_be_imported_shows_its_error_once(tmp_path):
    """A collection error (the solution's syntax error) is shown as pytest gave it, once: not
    again as a line of the other failing tests, nor pytest's "Interrupted" banner."""
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a +\n")
    (tmp_path / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    pass\n")
    shown = pytest_check(tmp_path).shown()
    assert "\n=== ERRORS ===\n___ ERROR collecting test_calc.py ___\n" in shown, shown
    assert "SyntaxError" in shown and "other failing" not in shown and "!" not in shown
    assert shown.splitlines()[-1].startswith("1 error in")


def test_a_passing_test_run_is_shown_as_pytest_printed_it(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    check = pytest_check(tmp_path)
    assert check.shown().endswith(unpadded(str(check.result["output"]).strip()))
    assert check.shown().endswith(". [100%]\n1 passed in " + check.last_line().split(" in ")[1])


def test_a_programs_own_rules_are_shown_as_it_printed_them(workspace):
    """Only pytest's padded rules are narrowed: a program's line of dashes is its output."""
    program = "report.py\n```python\nprint('-' * 40)\nprint('total: 3')\nraise SystemExit(1)\n```"
    steps = [text(program), *[text("It prints them.\nTASK_COMPLETE")] * 3]
    _, requests, _ = embedded_run(workspace, steps, task="Create report.py printing a rule")
    shown = [str(r["messages"][-1]["content"]) for r in requests]
    checked = [m for m in shown if "python3 report.py\n(exit code 1)" in m]
    assert checked and "-" * 40 + "\ntotal: 3" in checked[0], shown


def test_a_changed_program_runs_with_the_checks_environment(workspace):
    """Every check runs with the same environment (160 columns, no bytecode cache read): the
    task's command and the tests had it, a changed program run as the check did not."""
    program = "width.py\n```python\nimport os\nprint('columns', os.environ['COLUMNS'])\n```"
    steps = [text(program), *[text("It prints them.\nTASK_COMPLETE")] * 2]
    _, requests, _ = embedded_run(workspace, steps, task="Create width.py printing the width")
    checked = str(requests[2]["messages"][-1]["content"])  # the finish's check
    assert "$ python3 width.py\ncolumns 160\n" in checked, checked
    assert "PYTHONPYCACHEPREFIX" not in checked


def test_the_check_after_a_write_counts_every_test(workspace):
    """With -x the check said "1 failed" after a fix that made 3 of 10 tests pass where none
    had: every test runs, so the counts show the progress."""
    (workspace / "ops.py").write_text("def one():\n    return 0\n\n\ndef two():\n    return 0\n")
    (workspace / "test_ops.py").write_text(
        "from ops import one, two\n\n\ndef test_one():\n    assert one() == 1\n\n\n"
        "def test_two():\n    assert two() == 2\n"
    )
    fix_one = text("ops.py\n```python\ndef one():\n    return 1\n```")
    steps = [fix_one, text("```python\ndef two():\n    return 2\n```\nTASK_COMPLETE")]
    steps += [text("ops.py\n```python\ndef two():\n    return 2\n```"), text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, steps, task="Make the tests pass.", rules=ONE_ATTEMPT
    )
    assert "1 failed, 1 passed" in last_message(requests[1])
    assert "2 passed" in last_message(requests[3]) and result.status == "completed"


def test_a_write_or_edit_is_followed_by_the_check_its_finish_would_run(workspace):
    """As aider's --auto-test: told to run the tests next, the 1.5B model answered its written
    solution with a WAIT or a TASK_COMPLETE, unchecked. The harness runs the check itself,
    after a write and after an edit, and the result says whether it passes."""
    calc_project(workspace)
    edit = "```bash\nedit calc.py --search 'return b - a' --replace 'return a + b'\n```"
    steps = [text(STILL_WRONG), text(edit), text("Fixed.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps, task="Fix the bug in calc.py.")
    failed, passed = last_message(requests[1]), last_message(requests[2])
    assert '"next": "saved and checked: the check below fails; fix what it shows"' in failed
    assert "$ python3 -m pytest -q --tb=short" in failed and "assert 1 == 5" in failed
    assert "the check below passes; if that was all the task asks, reply TASK_COMPLETE" in passed
    assert "1 passed" in passed
    statuses = [e["message"] for e in events if e["type"] == "status"]
    checking = "checking: python3 -m pytest -q --tb=short -p no:cacheprovider"
    assert statuses.count(checking) == 3  # +finish
    assert result.status == "completed" and len(requests) == 3


def test_a_check_that_ends_as_the_one_shown_before_says_so_and_is_not_shown_again(workspace):
    """The same pytest run was shown again and again: the model's own run of the tests its
    write's check had just run, a refused finish; and a change that changed no test's outcome
    was not told so."""
    calc_project(workspace)
    wrong_again = "calc.py\n```python\ndef add(a, b):\n    return a * b\n```"
    steps = [
        text(STILL_WRONG),
        text("```bash\npython -m pytest -v\n```"),
        text(wrong_again),
        text("Fixed.\nTASK_COMPLETE"),
        text(FIXED),
        text("Fixed.\nTASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(
        workspace, steps, task="Fix the bug in calc.py.", rules=ONE_ATTEMPT
    )
    assert last_message(requests[1]).count("E   assert 1 == 5") == 1  # the write's check
    own_run = last_message(requests[2])
    assert "(the same result as the check above, whose output is there: 1 failed)" in own_run
    assert "assert 1 == 5" not in own_run
    again = last_message(requests[3])  # another change, the same test failing
    assert "fails as it did before this change, the same tests" in again
    assert "assert 6 == 5" in again  # its output is shown: it says how
    refused = last_message(requests[4])
    assert refused.startswith("Not finished: the check fails as shown above (1 failed in ")
    assert "assert" not in refused
    assert result.status == "completed" and len(requests) == 6


def test_a_write_of_what_the_file_already_holds_says_so_and_is_no_finish(workspace):
    """The 1.5B model wrote a file again byte for byte: it was "saved and checked", shown the
    whole failing output again, and its TASK_COMPLETE after it ended the run completed (no
    file had changed, so no finish check ran)."""
    calc_project(workspace)
    same = text("calc.py\n```python\n" + (workspace / "calc.py").read_text() + "```")
    steps = [same, text("Done.\nTASK_COMPLETE"), text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, steps, task="Fix the bug in calc.py.", rules=ONE_ATTEMPT
    )
    told = last_message(requests[1])
    assert '"unchanged": "nothing changed: the file already held exactly this"' in told
    output = told.split("output:\n", 1)[1]  # the command and the check's last line only
    assert output.startswith("$ python3 -m pytest") and output.count("\n") == 1
    assert "1 failed in" in output
    assert last_message(requests[2]).startswith("Not finished: the check fails as shown above")
    assert result.status == "completed" and len(requests) == 4


def test_the_same_failing_write_again_is_not_saved_and_asked_to_change(workspace):
    """A write whose check failed did not work, though the file was saved: the 1.5B model wrote
    the same wrong proverb.py four times, told each time after the second "this exact call
    already succeeded before. If the task is done, reply ... TASK_COMPLETE". The same write
    again, nothing changed since, is asked for again (sampled), then not saved, and the model
    is told that the check failed on this very change."""
    calc_project(workspace)
    same = text(STILL_WRONG)
    steps = [same, same, same, same, text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    task = "Fix the bug in calc.py."
    result, requests, _ = embedded_run(workspace, steps, task=task, rules=ONE_ATTEMPT)
    temperatures = [r["temperature"] for r in requests]
    assert temperatures[:4] == [0.0, 0.0, UNSTICK_TEMPERATURE, UNSTICK_TEMPERATURE]
    told = last_message(requests[4])
    assert told.startswith("Not saved: this is the same change as before, and its check fails")
    sent = [str(m["content"]) for m in requests[4]["messages"]]
    assert "already succeeded" not in "".join(sent)
    assert sum(STILL_WRONG in content for content in sent) == 1  # the repeat is not copied in
    assert result.status == "completed"


def test_example_lines_of_a_block_go_under_the_main_guard_so_the_tests_can_import_it(workspace):
    """The 1.5B model ended a held-out exercise's solution with "# Example usage" and a call
    that raised: saved as written, every check was one import error and no test ever ran."""
    calc_project(workspace)
    example = "\n# Example usage\nprint(add(2))\n```"  # raises TypeError when it runs
    steps = [text(FIXED.removesuffix("```") + example), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Make the tests pass.")
    saved = (workspace / "calc.py").read_text()
    assert saved.endswith(
        '\n\nif __name__ == "__main__":\n    # Example usage\n    print(add(2))\n'
    )
    assert "return a + b" in saved
    told = str(requests[1]["messages"][-1]["content"])
    assert "so importing calc.py does not run them" in told and "1 passed" in told
    assert result.status == "completed"


SCRIPT = "import sys\n\n\ndef main():\n    print(sys.argv)\n\n\nmain()\n"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (SCRIPT, "def main():\n    print(1)\n\n\nmain()\n"),  # a script runs code: as it is
        (ADD_BUG, "print(add(2, 3))\n"),  # nothing defined: as it is
        (ADD_BUG, "def add(a, b):\n    return a + b\n\n\nWHITE = 'W'\n"),  # a constant stays
        (ADD_BUG, "def add(a, b:\n"),  # not Python: as it is
    ],
)
def test_lines_that_are_no_example_stay_where_the_block_has_them(old, new):
    assert examples_apart(old, new) == (new, "")


def test_a_finish_with_a_block_that_was_not_saved_says_so(workspace):
    """After a first write, the 1.5B model sent one method without a path and TASK_COMPLETE,
    three times; each was refused with the failing check alone, never told the block was not
    saved, and the run ended "not verified"."""
    calc_project(workspace)
    unsaved = text("```python\ndef add(a, b):\n    return a + b\n```\nTASK_COMPLETE")
    steps = [text(STILL_WRONG), unsaved, text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, steps, task="Make the tests pass.", rules=ONE_ATTEMPT
    )
    refused = last_message(requests[2])
    assert refused.startswith("Nothing was saved: the code in your reply was only shown (to save")
    assert "Not finished: the check fails as shown above (1 failed in" in refused
    assert result.status == "completed" and len(requests) == 4


def test_code_shown_again_and_never_saved_is_no_finish_while_the_check_fails(workspace):
    """The 1.5B model showed its poker.py three times, never saved; the run ended "completed
    · answered without using any tool" with the task's tests all failing. Code shown again
    after being told it does nothing is refused like a finish while the check fails, and the
    run ends "not verified", never "completed"."""
    calc_project(workspace)
    shown = [text(f"Like this:\n```python\n>>> add({n}, 1)\n{n + 1}\n```") for n in range(4)]
    steps = [shown[0], text("TASK_COMPLETE"), shown[1], shown[2], shown[3]]
    result, requests, _ = embedded_run(
        workspace, steps, task="Fix the bug in calc.py.", rules=ONE_ATTEMPT
    )
    refused = last_message(requests[3])
    assert refused.startswith("Nothing was saved: the code in your reply was only shown (")
    assert "Not finished: the check below fails." in refused and "assert -1 == 5" in refused
    assert result.status == "blocked" and result.message.startswith("not verified: python3 -m")


def test_code_shown_again_then_saved_finishes_when_the_check_passes(workspace):
    calc_project(workspace)
    shown = [text(f"Like this:\n```python\n>>> add({n}, 1)\n{n + 1}\n```") for n in range(2)]
    steps = [shown[0], text("TASK_COMPLETE"), shown[1], text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    result, _, _ = embedded_run(workspace, steps, task="Fix the bug in calc.py.")
    assert result.status == "completed" and "a + b" in (workspace / "calc.py").read_text()


def test_code_shown_for_a_question_with_no_check_is_an_answer(workspace):
    (workspace / "notes.txt").write_text("add two numbers\n")
    shown = [text(f"Like this:\n```python\n>>> add({n}, 1)\n{n + 1}\n```") for n in range(2)]
    steps = [shown[0], text("TASK_COMPLETE"), shown[1]]
    result, _, _ = embedded_run(workspace, steps, task="How would add(1, 1) be called?")
    assert result.status == "completed" and result.message.startswith("Like this:")


def test_without_auto_check_a_write_names_the_check_to_run(workspace):
    calc_project(workspace)
    with llama_cpp([text(FIXED), text("Fixed.\nTASK_COMPLETE")]) as llm:
        result = run(embedded_config(workspace, llm), "Fix calc.py.", rules=RULES - {"auto_check"})
        llm.assert_all_used()
    told = last_message(llm.requests[1])
    assert "saved; next, check it does what the task asks: python3 -m pytest" in told
    assert "checked" not in told and result.status == "completed"


def test_a_person_asked_for_permission_is_asked_for_the_finishs_check_not_at_every_write(
    workspace,
):
    calc_project(workspace)
    asked: list[tuple[str, dict]] = []
    ask = lambda tool, arguments: asked.append((tool, arguments)) or "allow"  # noqa: E731
    steps = [text(STILL_WRONG), text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    with llama_cpp(steps) as llm:
        config = embedded_config(workspace, llm, permission_mode="normal")
        result = run(config, "Fix the bug in calc.py.", ask=ask)
        llm.assert_all_used()
    assert "checked" not in last_message(llm.requests[1])
    commands = [arguments.get("command", "") for tool, arguments in asked if tool == "shell"]
    assert [tool for tool, _ in asked] == ["write", "write", "shell"]
    assert "python3 -m pytest" in commands[0] and result.status == "completed"


def test_a_write_is_not_checked_without_the_permission_a_command_needs(workspace):
    """Attack on the gate: the check after a write is a command like the model's; in normal
    mode with nobody to ask it is not run (a test file that writes when imported)."""
    calc_project(workspace)
    (workspace / "test_calc.py").write_text("open('ran.txt', 'w').write('ran')\n" + TEST_CALC)
    steps = [text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Fix calc.py.", permission_mode="normal")
    assert not (workspace / "ran.txt").exists()
    assert "checked" not in last_message(requests[1])


SCRIPT_TEST = "from calc import add\n\nassert add(2, 3) == 5, 'add(2, 3) should be 5'\n"


def test_a_test_file_with_asserts_at_the_top_level_is_run_as_a_script(workspace):
    """pytest collects no test from such a file (exit code 5): the bench's fix-test task ended
    "not verified" after a right fix. The file is run as a program instead."""
    (workspace / "calc.py").write_text(ADD_BUG)
    (workspace / "test_calc.py").write_text(SCRIPT_TEST)
    steps = [text(STILL_WRONG), text("Fixed.\nTASK_COMPLETE"), text(FIXED)]
    steps += [text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(
        workspace, steps, task="Fix the bug in calc.py.", rules=ONE_ATTEMPT
    )
    assert "AssertionError: add(2, 3) should be 5" in last_message(requests[1])  # as a script
    assert last_message(requests[2]).startswith("Not finished: the check fails as shown above")
    assert result.status == "completed" and len(requests) == 4  # the script passed: accepted


def test_a_finish_whose_tests_keep_failing_ends_not_verified_never_completed(workspace):
    """The issue's sub-agent said "Implemented…" and the run ended completed with all the
    tests failing: after MAX_REFUSALS the run ends blocked, naming the check."""
    calc_project(workspace)
    steps = [text(STILL_WRONG), *[text("Implemented.\nTASK_COMPLETE")] * 3]
    result, _, _ = embedded_run(workspace, steps, task="Make the tests pass.", rules=ONE_ATTEMPT)
    assert result.status == "blocked"
    assert result.message.startswith("not verified: python3 -m pytest")


def test_a_test_file_pytest_cannot_collect_is_no_finish(workspace):
    """The 1.5B model appended \\n-escaped text to its test file with echo >>, was told it ran
    without an error, and finished: no test had ever run."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    append = "```bash\necho 'def test_add():\\n    assert add(1, 1) == 2' >> test_calc.py\n```"
    steps = [text(append), *[text("Tests written.\nTASK_COMPLETE")] * 3]
    result, requests, _ = embedded_run(
        workspace, steps, task="Write pytest tests for calc.py.", rules=ONE_ATTEMPT
    )
    assert "SyntaxError" in last_message(requests[2])
    assert result.status == "blocked" and result.message.startswith("not verified")


def test_a_changed_program_that_does_not_compile_is_no_finish(workspace):
    steps = [text("hello.py\n```python\nprint('hi'\n```"), text("Done.\nTASK_COMPLETE")]
    steps += [text("hello.py\n```python\nprint('hi')\n```")]
    steps += [text("Done.\nTASK_COMPLETE")] * 2  # the second after being asked to run it
    result, requests, _ = embedded_run(workspace, steps, task="Make hello.py print hi.")
    assert "SyntaxError" in last_message(requests[2])
    assert result.status == "completed" and len(requests) == 5


def test_no_message_asks_to_rewrite_a_file_the_task_only_names(workspace):
    """Told users.json "has not changed" by a rule reading "Convert" as a change to it, the
    1.5B model added a made-up user to it and never wrote users.csv."""
    users = '[{"name": "Ann", "age": 36}]\n'
    (workspace / "users.json").write_text(users)
    steps = [text("users.csv\n```\nname,age\nAnn,36\n```"), text("Done.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Convert users.json into users.csv.")
    assert result.status == "completed" and len(requests) == 2
    assert (workspace / "users.json").read_text() == users
    assert all("users.json has not changed" not in str(r["messages"]) for r in requests)


def test_blocked_before_any_action_is_nudged_once(workspace):
    """Shown an exercise's failing tests with the task, the 1.5B model's first reply was
    BLOCKED; nudged once, a second BLOCKED ends the run."""
    steps = [text("BLOCKED: the tests fail."), text("BLOCKED: it cannot be done.")]
    result, requests, _ = embedded_run(workspace, steps, task="Make the tests pass.")
    assert last_message(requests[1]).startswith("Do not give up before trying.")
    assert result.status == "blocked" and result.message == "it cannot be done."


def test_the_same_blocked_again_after_the_nudge_is_asked_for_again_warm(workspace):
    """Told not to give up, the 1.5B model said the same BLOCKED twice, word for word, in 3 of
    16 Exercism runs, and the run ended with nothing tried: asked again, warm, it may try."""
    (workspace / "leap.py").write_text("def leap_year(year):\n    pass\n")
    blocked = text("BLOCKED: the tests fail.")
    fix = text("leap.py\n```python\n" + LEAP + "```")
    steps = [blocked, blocked, fix, text("```bash\npython3 leap.py 2000\n```")]
    steps.append(text("TASK_COMPLETE"))
    result, requests, _ = embedded_run(workspace, steps, task="Make leap.py work.")
    assert [r.get("temperature") for r in requests[1:3]] == [0.0, 1.0]
    assert result.status == "completed" and "year % 400" in (workspace / "leap.py").read_text()


def test_the_same_answer_again_after_being_told_nothing_was_done_is_asked_for_again(workspace):
    """Told nothing was done, the 1.5B model answered "17" again where the task asked for
    count.txt; asked again, warm, it may write it. A repeated TASK_COMPLETE or WAIT stands."""
    (workspace / "app.log").write_text("a\nb\n")
    steps = [text("2"), text("2"), text("```bash\necho 2 > count.txt\ncat count.txt\n```")]
    steps.append(text("TASK_COMPLETE"))
    task = "How many lines does app.log have? Write the number to count.txt."
    result, requests, _ = embedded_run(workspace, steps, task=task)
    assert [r.get("temperature") for r in requests[1:3]] == [0.0, 1.0]
    assert result.status == "completed" and (workspace / "count.txt").read_text() == "2\n"


def test_a_small_models_first_wait_is_nudged_once_then_parks(workspace):
    """Told not to give up, the 1.5B model answered `WAIT: <tomorrow>: BLOCKED: ...`, and the
    run was parked with nothing tried; asked to act, a second WAIT parks it (a task may ask
    to wait)."""
    wait = text("WAIT: 2099-01-01T00:00:00Z: BLOCKED: the tests fail.")
    result, requests, _ = embedded_run(workspace, [wait, wait], task="Make the tests pass.")
    assert last_message(requests[1]).startswith("WAIT parks the task until that time")
    assert result.status == "waiting" and len(requests) == 2


def test_a_wait_after_an_untested_change_gets_the_finish_check(workspace):
    """After writing a solution it never ran, the 1.5B model parked the run with `WAIT: ...:
    The task is now waiting for you to continue.`; nudged, its TASK_COMPLETE is checked."""
    (workspace / "test_leap.py").write_text(LEAP_TEST)
    steps = [
        text("leap.py\n```python\ndef leap_year(year):\n    return False\n```"),
        text("WAIT: 2099-01-01T00:00:00Z: The task is now waiting for you to continue."),
        text("TASK_COMPLETE"),
        text("leap.py\n```python\n" + LEAP + "```"),
        text("TASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(
        workspace, steps, task="Make leap.py pass its tests.", rules=ONE_ATTEMPT
    )
    assert "Not finished: the check fails as shown above" in last_message(requests[3])
    assert result.status == "completed" and len(requests) == 5


def test_a_bare_task_complete_before_acting_is_no_ending(workspace):
    """The 1.5B model's only reply to a refactoring task was "Task_COMPLETE" (3 tokens)."""
    steps = [text("Task_COMPLETE"), text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Move parse_date into dates.py.")
    assert last_message(requests[1]).startswith("Nothing has been done yet")
    assert result.status == "blocked" and result.message.startswith("nothing done")


def test_a_greeting_answered_then_confirmed_ends_with_the_answer(workspace):
    """ "hi", answered "Hello! How can I help?", told that nothing had been done, confirmed with
    a bare TASK_COMPLETE: the answer stands (it ended "nothing done: ... without acting or
    answering", blocked, in a real-model run)."""
    steps = [text("Hello! How can I help you today?"), text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="hi")
    assert last_message(requests[1]).startswith("Nothing has been done yet")
    assert (result.status, result.message) == ("completed", "Hello! How can I help you today?")


def test_an_answer_confirmed_while_the_tests_fail_is_no_ending(workspace):
    """The same answer and confirmation where the workspace's tests fail: nothing was done,
    and the run does not end completed."""
    (workspace / "test_leap.py").write_text(LEAP_TEST)
    steps = [text("A leap year is divisible by 4, except centuries."), text("TASK_COMPLETE")]
    result, _, _ = embedded_run(
        workspace, steps, task="Make leap.py pass its tests.", rules=ONE_ATTEMPT
    )
    assert result.status == "blocked" and result.message.startswith("nothing done")


def test_another_answer_after_nothing_was_done_is_no_ending_while_the_tests_fail(workspace):
    """Never having acted, told that nothing was done, the 1.5B model answered with the
    nudge's own words; the run ended completed with all the exercise's tests failing."""
    (workspace / "test_leap.py").write_text(LEAP_TEST)
    steps = [text("A leap year is divisible by 4."), text("To save a file, write its path.")]
    result, _, _ = embedded_run(
        workspace, steps, task="Make leap.py pass its tests.", rules=ONE_ATTEMPT
    )
    assert result.status == "blocked" and result.message.startswith("nothing done")


def test_steps_that_achieve_nothing_end_the_run_early(workspace):
    """Failing replies that are each new: no loop of the same call, and MAX_ITERATIONS is
    500."""
    steps = [text(f"```bash\ncat missing{n}.txt\n```") for n in range(NO_PROGRESS_STEPS)]
    result, _, _ = embedded_run(workspace, steps, task="Fix missing.py.")
    assert result.status == "blocked"
    assert result.message.startswith(f"no progress in {NO_PROGRESS_STEPS} steps: ")
    assert "missing" in result.message


def test_checks_need_the_permission_the_models_commands_need(workspace):
    """Attack on the gate: a task naming a command is no way to run it without permission;
    in normal mode with nobody to ask, the harness runs nothing (the model is not shown it)."""
    (workspace / "report.py").write_text("open('ran.txt', 'w').write('ran')\n")
    steps = [text("I see.\nTASK_COMPLETE")]
    task = "Why does `python3 report.py` crash?"
    _, requests, _ = embedded_run(workspace, steps, task=task, permission_mode="normal")
    assert not (workspace / "ran.txt").exists()
    assert "run before you start" not in str(requests[0]["messages"])


# --------------------------------------------------------------------------- results


def test_a_program_python_cannot_read_is_named_with_its_line(workspace):
    steps = [
        text('```bash\necho "Hello, world!" > hello.py\npython3 hello.py\n```'),
        text("hello.py\n```python\nprint('Hello, world!')\n```"),
        text("```bash\npython3 hello.py\n```"),
        text("Done.\nTASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(workspace, steps, task="Create hello.py that prints hi")
    assert (
        '"error": "hello.py is not valid Python: SyntaxError at line 1 (invalid syntax). Fix '
        "hello.py first: write it again, whole, as Python code (its path on a line of its own, "
        'then a ```python block); then run it"'
    ) in last_message(requests[1])
    assert result.status == "completed"


@pytest.mark.parametrize(
    ("command", "path"),
    [("python3 squares.py", "squares.py"), ("git init -q && git add notes.txt", "notes.txt")],
)
def test_a_command_given_a_file_not_written_yet_says_it_is_not_there(workspace, command, path):
    steps = [text(f"```bash\n{command}\n```")]
    steps += [text("Nothing to do.\nTASK_COMPLETE")]  # nothing asked from the task's words
    _, requests, _ = embedded_run(workspace, steps, task=f"Write {path} and use it")
    told = last_message(requests[1])
    assert f'"error": "{path} does not exist in the workspace ({workspace})"' in told
    assert "write it" not in told


def test_a_syntax_error_in_a_file_outside_the_workspace_is_left_as_it_is():
    output = 'Traceback:\n  File "/usr/lib/python3/x.py", line 3\n    x =\n SyntaxError: bad\n'
    result = {"success": False, "error": "command exited with code 1", "output": output}
    assert syntax_error_hint(dict(result), "/work/ws") == result


PARSED_APP = "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('name')\n"
PARSED_APP += "args = parser.parse_args()\nprint(f'hello {args.name}')\n"


def test_an_argument_a_workspace_program_refuses_is_to_be_added_to_its_parser(workspace):
    (workspace / "app.py").write_text(PARSED_APP)
    steps = [text("```bash\npython3 app.py Ann --shout\n```"), text("I see.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="What does app.py do with --shout?")
    told = last_message(requests[1])
    assert (
        "app.py does not take --shout yet: write app.py again, whole, with --shout added to its "
        "parser (its path on a line of its own, then a ```python block), then run it again"
    ) in told


def test_a_flag_declared_to_take_a_value_is_to_be_declared_store_true(workspace):
    (workspace / "app.py").write_text(
        PARSED_APP.replace("args =", "parser.add_argument('--shout')\nargs =")
    )
    steps = [text("```bash\npython3 app.py Ann --shout\n```"), text("I see.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="What does app.py do with --shout?")
    assert (
        "app.py declares --shout as taking a value. A flag that takes none is declared with "
        "action='store_true'"
    ) in last_message(requests[1])


def test_an_argument_refused_by_a_program_outside_the_workspace_is_left_as_it_is():
    output = "usage: tool.py [-h]\ntool.py: error: unrecognized arguments: --x\n"
    result = {"success": False, "error": "command exited with code 2", "output": output}
    assert explained(dict(result), "python3 /usr/lib/tool.py --x", "/work/ws") == result


def test_a_branch_made_without_switching_to_it_is_said_to_be_not_the_current_one(workspace):
    start = f"git init -q && {COMMIT} --allow-empty"
    steps = [text(f"```bash\n{start}\ngit branch feature\n```"), text("OK.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Make a branch feature")
    told = last_message(requests[1])
    assert "git branch feature made the branch, but you are still on the branch you" in told


@pytest.mark.parametrize(
    ("command", "output", "note"),
    [
        ("git branch feature", "", "still on the branch you were on: switch to it with"),
        ("git branch f\ngit add a\ngit commit -m a", "[main (root-commit) 36e1f08] a", "on main"),
        ("git branch f\ngit status", "On branch dev\nnothing to commit", "still on dev: switch"),
        ("git branch feature && git checkout feature", "", None),
        ("git branch feature\ngit switch feature\ngit commit -m a", "[feature 36e1f08] a", None),
        ("git branch feature\ngit checkout main", "Switched to branch 'main'", None),
        ("git branch feature", "fatal: a branch named 'feature' already exists", None),
        ("git branch feature", "fatal: not a valid object name: 'main'", None),  # no commit yet
        ("git branch -d old", "", None),
        ("git branch", "* main", None),
    ],
)
def test_a_note_says_when_a_new_branch_is_not_the_one_committed_to(command, output, note):
    told = branch_note({"success": True, "output": output}, command).get("note")
    assert (note in told) if note else told is None


CLEAN = "On branch main\nnothing to commit, working tree clean\n"


@pytest.mark.parametrize(
    ("command", "output", "error"),
    [
        ("git commit -m again", CLEAN, "nothing to commit: every change is already committed"),
        (
            "git add notes.txt\ngit commit -m notes",
            "fatal: pathspec 'notes.txt' did not match any files\n" + CLEAN,
            "notes.txt does not exist in the workspace (/work/ws)",  # the cause, not the effect
        ),
    ],
)
def test_a_commit_with_nothing_new_says_the_work_is_committed(command, output, error):
    result = {"success": False, "exit_code": 1, "error": "exited with code 1", "output": output}
    assert explained(result, command, "/work/ws")["error"].startswith(error)


CONTENT = 'import sys\nsys.stdout.write("\\n")\n'  # a triple-quoted file: "\\n" stays as written
QUOTED = "import argparse\nparser.add_argument('name')\nprint(f'hello {args.name}')"


@pytest.mark.parametrize(
    ("call", "content"),
    [
        (f'write(sq.py, """\n{CONTENT}""")', CONTENT),
        ('write sq.py "print(1)"', "print(1)"),
        ('write sq.py "\nprint(1)\n"', "\nprint(1)\n"),  # its quotes span lines
        (f"write sq.py '''{QUOTED}'''", QUOTED),  # its own quotes inside, as written
        (f'write sq.py """\n{CONTENT}"""', CONTENT),
    ],
)
def test_a_tool_call_with_commands_under_it_is_the_call_then_the_commands(call, content):
    known = {"write": ["path", "content"], "shell": ["command"]}
    block = f"```bash\n# Create it\n{call}\npython3 sq.py\ngit add sq.py\n```"
    assert extract_text_calls(block, known, blocks=True) == [
        {"name": "write", "arguments": {"path": "sq.py", "content": content}},
        {"name": "shell", "arguments": {"command": "python3 sq.py\ngit add sq.py"}},
    ]


@pytest.mark.parametrize(
    ("block", "content"),
    [
        (f"write sq.py '''{QUOTED}'''", QUOTED),
        (f'write sq.py """\n{CONTENT}"""', CONTENT),
    ],
)
def test_a_tool_written_as_a_command_with_a_triple_quoted_text_is_that_call(block, content):
    known = {"write": ["path", "content"], "shell": ["command"]}
    assert extract_text_calls(f"```bash\n{block}\n```", known, blocks=True) == [
        {"name": "write", "arguments": {"path": "sq.py", "content": content}},
    ]


@pytest.mark.parametrize(
    "command", ["echo '''hi'''", "write sq.py '''x''' and more words", "ls '''x"]
)
def test_triple_quotes_that_are_no_tool_call_stay_a_command(command):
    known = {"write": ["path", "content"], "shell": ["command"]}
    calls = extract_text_calls(f"```bash\n{command}\n```", known, blocks=True)
    assert calls == [{"name": "shell", "arguments": {"command": command}}]


def test_a_block_the_model_stopped_in_is_taken_as_ended(workspace):
    """The 1.5B model ended its reply inside the block, after `write app.py '''...'''`."""
    steps = [text(f"```bash\nwrite app.py '''\n{QUOTED}\n'''"), text("Done.\nTASK_COMPLETE")]
    steps += [text("Done.\nTASK_COMPLETE")]  # asked once to run app.py
    embedded_run(workspace, steps, task="Write app.py")
    assert (workspace / "app.py").read_text() == QUOTED + "\n"


def test_a_block_cut_at_the_token_limit_is_not_run_and_the_model_is_told(workspace):
    cut = text("```bash\nwrite app.py '''\nimport argparse\n", finish_reason="length")
    steps = [cut, text("Nothing done.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="What is in this folder?")
    assert last_message(requests[1]).startswith(
        "Your reply reached the length limit of one reply (1024 tokens) inside a code block"
    )
    assert result.status == "completed"
    assert not (workspace / "app.py").exists()


POKER = "def best_hands(hands):\n    pass\n"
SOLVED = "def best_hands(hands):\n    return hands[:1]\n"
POKER_TEST = "from poker import best_hands\n\n\ndef test_one():\n    assert best_hands([1])\n"
EXPLAINED = "The task is to fix `best_hands`. The rules are:\n" + "- a rule\n" * 40


def test_a_file_cut_off_after_a_page_of_prose_is_asked_for_again_shorter(workspace):
    """The 1.5B model wrote a page of rules, then "Here's the updated `poker.py` file:" and
    the file, repeating sections, until its reply ended at 1,024 tokens inside the block. Told
    "that code was only shown", it answered TASK_COMPLETE; the run ended "completed" with
    nothing written. It is told its reply was cut off, and writes the file again."""
    (workspace / "poker.py").write_text(POKER)
    (workspace / "poker_test.py").write_text(POKER_TEST)
    cut = f"{EXPLAINED}\nHere's the updated `poker.py` file:\n\n```python\n{SOLVED}    # more"
    steps = [text(cut, finish_reason="length"), text(f"poker.py\n```python\n{SOLVED}```")]
    steps += [text("Done.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps, task="Fix poker.py")
    told = last_message(requests[1])
    assert "cut off there, and nothing in that block was saved or run" in told
    assert "the reply was cut off inside a code block; asking for it again, shorter" in [
        e.get("message") for e in events
    ]
    assert (workspace / "poker.py").read_text() == SOLVED
    assert result.status == "completed"


def test_replies_cut_off_again_and_again_end_the_run_blocked(workspace):
    (workspace / "poker.py").write_text(POKER)
    cut = text(f"poker.py\n```python\n{SOLVED}    # more", finish_reason="length")
    # each told once, and each repeat asked for again once, sampled (repeats.py)
    result, _, _ = embedded_run(workspace, [cut] * 7, task="Fix poker.py")
    assert result.status == "blocked"
    assert result.message == "the model's replies keep being cut off at their length limit"
    assert (workspace / "poker.py").read_text() == POKER


def test_a_long_output_is_kept_to_a_share_of_a_small_window_and_a_file_is_not(workspace):
    """A whole pytest run's 16,600 characters took the 1.5B model (8k window, 2 cores) two
    minutes to read. A command's output takes at most an eighth of the window, its start and
    its end; a file read whole is not cut (written back, its middle would be lost)."""
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(1500)))
    steps = [text("```bash\nseq 1 6000\n```"), text("read(path='big.txt')")]
    steps += [text("Done.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="What is in big.txt?")
    shown = last_message(requests[1])
    assert len(shown) < 2_200  # a 4,096-token window: 2,000 characters of the 28,893
    assert "\n1\n2\n3\n" in shown and shown.rstrip().endswith("5999\n6000\n</tool_result>")
    assert "characters of output cut ...]" in shown
    read = last_message(requests[2])
    assert "line 0\n" in read and "line 750\n" in read and "line 1499" in read


MADE_UP = '<tool_result name="shell">{"success": true}\noutput:\nDone\n</tool_result>'


def test_a_reply_that_is_only_made_up_results_is_not_run(workspace):
    """The 1.5B model put results in a bash block; run, their lines came back as errors."""
    steps = [text(f"```bash\n{MADE_UP}\n```"), text("Nothing to do.\nTASK_COMPLETE")]
    result, requests, events = embedded_run(workspace, steps, task="What is in this folder?")
    assert last_message(requests[1]).startswith("Not run: your reply wrote a tool result itself")
    assert not [e for e in events if e["type"] == "tool_call"]
    assert "<tool_result" not in requests[1]["messages"][-2]["content"]  # not kept
    assert result.status == "completed"


def test_actions_before_made_up_results_run_and_the_results_are_dropped(workspace):
    steps = [text(f"notes.txt\n```\nA note.\n```\n{MADE_UP}"), text("Done.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Write notes.txt")
    assert (workspace / "notes.txt").read_text() == "A note.\n"
    assert requests[1]["messages"][-2]["content"] == "notes.txt\n```\nA note.\n```"


def test_a_long_named_file_is_shown_with_its_line_count_and_a_short_one_without(workspace):
    (workspace / "logs").mkdir()
    (workspace / "logs" / "app.log").write_text("".join(f"line {n}\n" for n in range(17)))
    (workspace / "config.ini").write_text("[server]\nport = 8421\n")
    steps = [text("Counted.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Count logs/app.log; read config.ini")
    shown = requests[0]["messages"][2]["content"]
    assert "line 16\n```\n(17 lines)" in shown  # a small model counted 17 lines as 1 or 32
    assert "port = 8421\n```" in shown and "(2 lines)" not in shown  # "2" taken for the answer


LONG_TESTS = (
    "import unittest\nfrom board import (\n    Board,\n    WHITE,\n)\n\n\n"
    "class BoardTest(unittest.TestCase):\n"
    "    def new_board(self, rows):\n        return Board(rows)\n\n"
    "    def test_a_corner(self):\n        board = self.new_board(['B '])\n"
    "        self.assertEqual(board.owner(0, 0), WHITE)\n\n"
    + "".join(
        f"    def test_case_{n}(self):\n        self.assertEqual(Board(['{n}' * 40]).owner(0, 0), "
        f"'{n}')\n\n"
        for n in range(60)
    )
)


def test_a_test_file_too_long_to_show_is_shown_as_its_imports_and_first_test(workspace):
    """Shown only as a name ("213+ lines, too long to show here"), a long test file was never
    read by the 1.5B model, which wrote a module without the names the tests import."""
    (workspace / "board.py").write_text("class Board:\n    pass\n")
    (workspace / "board_test.py").write_text(LONG_TESTS)
    steps = [text("Read.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Make board_test.py pass with board.py")
    shown = requests[0]["messages"][2]["content"]
    assert "board_test.py: 195 lines, too long to show whole; its imports and first test:" in shown
    outline = shown.split("its imports and first test:\n```\n")[1].split("```")[0]
    assert outline == (
        "import unittest\nfrom board import (\n    Board,\n    WHITE,\n)\n\n"
        "class BoardTest(unittest.TestCase):\n"
        "    def new_board(self, rows):\n        return Board(rows)\n\n"
        "    def test_a_corner(self):\n        board = self.new_board(['B '])\n"
        "        self.assertEqual(board.owner(0, 0), WHITE)\n"
    )
    assert "test_case_0" not in shown


def test_a_long_file_without_tests_is_named_only(workspace):
    (workspace / "big.py").write_text(
        "".join(f"def f{n}():\n    return {n}\n\n" for n in range(400))
    )
    _, requests, _ = embedded_run(workspace, [text("Seen.\nTASK_COMPLETE")], task="Look at big.py")
    assert "big.py: 1200 lines, too long to show here" in requests[0]["messages"][2]["content"]


def test_a_clean_run_of_what_was_changed_names_the_ending_as_the_next_step(workspace):
    """A small model that saw its program work went on to `ls`, `rm hello.py` and `git init`."""
    (workspace / "hello.py").write_text("print('hello')\n")
    steps = [
        text("```bash\npython3 hello.py\n```"),  # nothing changed yet: no next step
        text("hello.py\n```python\nprint('hi')\n```"),
        text("```bash\npython3 hello.py\n```"),
        text("It prints hi.\nTASK_COMPLETE"),
    ]
    _, requests, _ = embedded_run(workspace, steps, task="Make hello.py print hi")
    ran_next = '"next": "it ran without an error; if its output is what the task asks for'
    assert ran_next not in last_message(requests[1])
    assert ran_next in last_message(requests[3])


def test_a_program_written_and_run_cleanly_by_one_command_names_the_ending(workspace):
    steps = [text("```bash\necho \"print('hi')\" > hello.py\npython3 hello.py\n```")]
    steps.append(text("It prints hi.\nTASK_COMPLETE"))
    _, requests, _ = embedded_run(workspace, steps, task="Create hello.py that prints hi")
    assert '"next": "it ran without an error' in last_message(requests[1])


def test_a_resample_that_writes_tool_results_itself_is_not_taken(workspace):
    """At temperature 1.0, one sample in ten wrote made-up results and BLOCKED."""
    again = text("```bash\ncat missing.txt\n```")
    made_up = text('<tool_result name="shell">{"success": true}</tool_result>\nBLOCKED: no file')
    steps = [again, again, made_up, text("```bash\nls\n```"), text("Nothing there.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps)
    assert result.status == "completed" and len(requests) == 5
    assert [r["temperature"] for r in requests[2:4]] == [UNSTICK_TEMPERATURE] * 2
    said = [m["content"] for m in requests[4]["messages"] if m["role"] == "assistant"]
    assert said == [again["content"], "```bash\nls\n```"]


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (  # a tool given a bare file name opens it: actions, not the program to create
            'edit(hello.py, "Hello", "print(1)")\npython3 hello.py',
            [
                ("edit", {"path": "hello.py", "search": "Hello", "replace": "print(1)"}),
                ("shell", {"command": "python3 hello.py"}),
            ],
        ),
        ('edit("hello.py", "a", "b")\nprint(2)', []),  # a program calling its own edit()
        ("print(open('hello.py').read())", []),
    ],
)
def test_a_python_block_opening_with_a_tool_call_on_a_bare_file_name_is_actions(block, expected):
    known = {"write": ["path", "content"], "edit": ["path", "search", "replace"]}
    calls = extract_text_calls(f"```python\n{block}\n```", {**known, "shell": ["command"]}, True)
    assert [(c["name"], c["arguments"]) for c in calls] == expected


SHELL_CALL = 'shell("python3 hello.py", timeout=10, max_memory_mb=1024, background=False)'
RUN_HELLO = (
    "shell",
    {"command": "python3 hello.py", "timeout": 10, "max_memory_mb": 1024, "background": False},
)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (  # each call of a tool in a shell block is that call: shell stops at "("
            f'```bash\nwrite("hello.py", "print(1)")\n{SHELL_CALL}\n```',
            [("write", {"path": "hello.py", "content": "print(1)"}), RUN_HELLO],
        ),
        (
            f'```bash\nedit("hello.py", "1", "2")\n{SHELL_CALL}\n```',
            [("edit", {"path": "hello.py", "search": "1", "replace": "2"}), RUN_HELLO],
        ),
        (  # calls, then commands
            '```bash\nwrite(a.py, "x")\nedit(a.py, "x", "y")\npython3 a.py\nls\n```',
            [
                ("write", {"path": "a.py", "content": "x"}),
                ("edit", {"path": "a.py", "search": "x", "replace": "y"}),
                ("shell", {"command": "python3 a.py\nls"}),
            ],
        ),
        (  # a triple-quoted text, then a call: not one call up to the last parenthesis
            "```bash\nwrite('app.py', '''import sys\nprint(sys.argv)\n''')\n"
            "shell('python3 app.py Ann --shout')\n```",
            [
                ("write", {"path": "app.py", "content": "import sys\nprint(sys.argv)\n"}),
                ("shell", {"command": "python3 app.py Ann --shout"}),
            ],
        ),
        (f"```python\n{SHELL_CALL}\n```", [RUN_HELLO]),  # no program: nothing defines shell
        (f"```python\nfrom tools import shell\n{SHELL_CALL}\n```", []),  # a program
        (f"```python\ndef shell(*a, **k):\n    pass\n\n\n{SHELL_CALL}\n```", []),
    ],
)
def test_calls_of_tools_in_a_block_are_those_calls(block, expected):
    """The 1.5B model wrote `write(...)` then `shell("python3 hello.py", timeout=10, ...)` in
    one bash block: the second line went to bash, a syntax error, seven times in one run; the
    shell call alone in a python block was saved as hello.py."""
    known = {
        "write": ["path", "content"],
        "edit": ["path", "search", "replace"],
        "shell": ["command", "timeout", "max_memory_mb", "background"],
    }
    calls = extract_text_calls(block, known, True)
    assert [(c["name"], c["arguments"]) for c in calls] == expected


def test_a_tool_call_under_a_write_in_a_shell_block_runs_as_that_tool(workspace):
    block = f'```bash\nwrite("hello.py", "print(\'Hello, world!\')")\n{SHELL_CALL}\n```'
    steps = [text(block), text("It prints Hello, world!\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Create hello.py and run it.")
    assert result.status == "completed"
    assert (workspace / "hello.py").read_text() == "print('Hello, world!')"
    ran = last_message(requests[1])
    assert "Hello, world!" in ran.split('<tool_result name="shell">')[1]
    assert "syntax error" not in ran


def test_a_model_calling_tools_as_text_is_not_told_the_tools_on_demand_which_still_run(
    workspace,
):
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("a\n")
    status = '<tool_call>{"name": "git_status", "arguments": {}}</tool_call>'
    steps = [text(status), text("One file is new.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="What does git status say?")
    system = requests[0]["messages"][0]["content"]
    assert "More tools" not in system and "git_commit" not in system and "delegate" not in system
    assert "shell(command" in system  # the tools described are still there
    assert "a.txt" in last_message(requests[1]) and result.status == "completed"


def test_a_changed_program_that_runs_cleanly_and_prints_nothing_counts_as_run(workspace):
    """utils.py written, run (no output), then TASK_COMPLETE: asked to run it again, a small
    model broke the file."""
    steps = [
        text("utils.py\n```python\ndef is_even(n):\n    return n % 2 == 0\n```"),
        text("```bash\npython3 utils.py\n```"),
        text("Done.\nTASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(workspace, steps, task="Implement is_even in utils.py")
    assert '"next": "it ran without an error and printed nothing' in last_message(requests[2])
    assert result.status == "completed" and len(requests) == 3


@pytest.mark.parametrize(
    ("command", "printed"),
    [
        ("sed -i 's/Hi//' hello.py", "(it printed nothing)"),
        ("cp hello.py copy.py", "Hi"),
        ("chmod +x hello.py", "Hi"),
    ],
)
def test_a_command_that_only_names_a_changed_program_has_not_run_it(workspace, command, printed):
    """After `sed -i` emptied hello.py, "it ran without an error" ended a small model's run.
    At the finish, the harness's own clean run of it is shown, not asked for."""
    steps = [
        text("hello.py\n```python\nprint('Hi')\n```"),
        text(f"```bash\n{command}\n```"),
        text("TASK_COMPLETE"),
        text("It prints what was asked.\nTASK_COMPLETE"),
    ]
    result, requests, _ = embedded_run(workspace, steps, task="Create hello.py that prints Hi")
    assert "it ran without an error" not in last_message(requests[2])
    nudge = last_message(requests[3])
    assert nudge.startswith("Before finishing, compare what you changed with the task")
    assert f"```\n$ python3 hello.py\n{printed}\n```" in nudge
    assert result.status == "completed" and len(requests) == 4


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            "```\necho \"print('Hello, world!')\" > hello.py\n```",
            [("shell", {"command": "echo \"print('Hello, world!')\" > hello.py"})],
        ),
        (
            "Run it:\n```\n$ python3 app.py --name Ann\n```",
            [("shell", {"command": "python3 app.py --name Ann"})],
        ),
        ("```\n8421\n```", []),  # an answer shown, not a command
        ("```\n$ python3 hello.py\nHello\n```", []),  # a run with its output, made up
        ("```\nprint('x')\n```", []),  # Python shown
        (
            "answer.txt\n```\necho hi\n```",
            [("write", {"path": "answer.txt", "content": "echo hi\n"})],
        ),
    ],
)
def test_a_block_without_a_language_holding_only_commands_runs(reply, expected):
    """The 1.5B model wrote `echo ... > hello.py` in a block without a language twice, and
    was told only that its finish failed: the block had been taken for text."""
    known = {"write": ["path", "content"], "shell": ["command"]}
    calls = extract_text_calls(reply, known, True)
    assert [(c["name"], c["arguments"]) for c in calls] == expected


def test_a_failed_commit_run_again_after_git_add_is_no_repeat(workspace):
    """`git add` changes no file: the same commit after it was "not run: it would fail the same
    way, as nothing has changed"."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "settings.json").write_text('{"debug": true}\n')
    commit = text('```bash\ngit -c user.name=a -c user.email=a@b commit -m "Set debug"\n```')
    steps = [commit, text("```bash\ngit add settings.json\n```"), commit, text("TASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Commit settings.json")
    assert "Not run" not in last_message(requests[3])
    assert "1 file changed" in last_message(requests[3])
    log = subprocess.run(["git", "-C", str(workspace), "log", "--oneline"], capture_output=True)
    assert b"Set debug" in log.stdout and result.status == "completed"


def test_a_compaction_keeps_the_files_the_run_changed_as_they_are(workspace):
    """The summary kept a line per step, not the code being fixed: the 1.5B model, compacted
    while fixing clock.py, no longer had it."""
    steps = [text("clock.py\n```python\ndef hours(h):\n    return h % 24\n```")]
    for n in range(8):
        (workspace / f"notes{n}.txt").write_text(f"note {n} " + "lorem ipsum " * 150)
        steps.append(text(f"```bash\ncat notes{n}.txt\n```"))
    steps += [text("Read.\nTASK_COMPLETE")] * 2  # the second after seeing clock.py's run
    _, requests, _ = embedded_run(
        workspace, steps, task="Read the notes", summarization_threshold=2500
    )
    summaries = [r["messages"][1]["content"] for r in requests if SUMMARY_MARK in str(r)]
    assert summaries, "no compaction happened"
    kept = "The files changed in this task, as they are now:\n\nclock.py\n```\n"
    assert kept + "def hours(h):\n    return h % 24\n```" in summaries[-1]


def test_the_model_s_run_of_tests_that_just_passed_points_at_the_check(workspace):
    calc_project(workspace)
    steps = [text(FIXED), text("```bash\npython3 -m pytest\n```"), text("Fixed.\nTASK_COMPLETE")]
    result, requests, _ = embedded_run(workspace, steps, task="Fix the bug in calc.py.")
    told = last_message(requests[2])
    assert "(the same result as the check above, whose output is there: 1 passed)" in told
    assert result.status == "completed"


def test_a_check_runs_the_source_not_bytecode_cached_in_the_workspace(workspace):
    """After the model's own pytest cached calc.py, a rewrite of the same size within the same
    second was checked against the old bytecode, and a right fix was refused. A cache Python
    never checks against its source stands for that here."""
    import py_compile

    calc_project(workspace)
    cached = workspace / "__pycache__" / f"calc.{sys.implementation.cache_tag}.pyc"
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(workspace / "calc.py"), cfile=str(cached), invalidation_mode=mode)
    result, requests, _ = embedded_run(workspace, [text(FIXED), text("Fixed.\nTASK_COMPLETE")])
    assert "saved and checked: the check below passes" in last_message(requests[1])
    assert result.status == "completed"


def test_the_model_s_runs_leave_no_bytecode_in_the_workspace(workspace):
    """The model's own `pytest` and `python3 -c "import calc"` wrote __pycache__ folders into
    the user's workspace: changed files it was shown, left behind when the run ended."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "test_calc.py").write_text(TEST_CALC)
    command = "python3 -c 'import calc' && python3 -m pytest -q -p no:cacheprovider"
    steps = [text(f"```bash\n{command}\n```"), text("It passes.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="check calc.py")
    assert "1 passed" in last_message(requests[1])  # the run did import calc.py
    assert not list(workspace.rglob("__pycache__")) and not list(workspace.rglob("*.pyc"))


def test_a_block_that_leaves_the_file_as_it_was_is_said_so_once(workspace):
    """A block of one function, merged, gave the file it already was: the result said
    "unchanged", and also "this exact call failed before … nothing has changed since"."""
    (workspace / "test_calc.py").write_text(TEST_CALC)
    whole = "def add(a, b):\n    return b - a\n\n\ndef sub(a, b):\n    return a - b\n"
    steps = [text(f"calc.py\n```python\n{whole}```")]
    steps.append(text("calc.py\n```python\ndef add(a, b):\n    return b - a\n```"))
    steps += [text(FIXED), text("Fixed.\nTASK_COMPLETE")]
    _, requests, _ = embedded_run(workspace, steps, task="Fix calc.py", rules=ONE_ATTEMPT)
    told = last_message(requests[2])
    assert '"unchanged": "nothing changed: the file already held exactly this"' in told
    assert "this exact call" not in told and "nothing has changed since" not in told


def test_a_sample_that_begins_as_an_earlier_reply_of_the_run_did_is_stopped_early(workspace):
    """A reply repeated the first one's command in other words; asked again, the model wrote
    the first reply word for word, twice, each read to its end."""
    first = "I will look at the file the task names, to see what it holds. " * 5
    other = "Let me try that command once more, it may work this time around. " * 5
    command = "\n```bash\npython3 missing.py\n```"
    steps = [text(first + command), text(other + command, chunk_size=8)]
    steps += [text(first + command, chunk_size=8), text("Gone.\nTASK_COMPLETE")]
    _, requests, events = embedded_run(workspace, steps)
    assert [r["temperature"] for r in requests] == [0.0, 0.0, *[UNSTICK_TEMPERATURE] * 2]
    streamed = streamed_steps(events)
    assert SAME_START <= len(streamed[3]) < len(first)  # the sample, stopped early
    assert last_message(requests[3]).startswith("Not run: python3 missing.py would fail")
