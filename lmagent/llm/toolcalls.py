"""Tool calls that local models write as text instead of native `tool_calls`.

Accepted forms (text around them is allowed):
  <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (closing or opening tag may be missing)
  <function=NAME><parameter=ARG>value</parameter></function>  (optionally inside <tool_call>)
  <function=NAME>{"arg": ...}</function>                      (Llama 3.1)
  [TOOL_CALLS][{"name": ..., "arguments": {...}}]  or  [TOOL_CALLS]NAME[ARGS]{...}   (Mistral)
  a JSON object {"name": ..., "arguments": ...} (or a list of them) in a ``` fence or in prose,
  also with its braces doubled ({{"name": ...}}, copied from a chat template) or with an extra
  key beside name and arguments (then only for a known tool)
With `blocks` (TOOL_CALL_MODE=text, whose prompt teaches them), fenced blocks are actions too,
when the reply has no call in the forms above (see `block_actions`):
  ```bash / ```sh / ```shell block       -> shell with its commands (a transcript, ```console
                                            or first line "$ ...": its "$ " lines)
  a path on its own line, then a fence   -> write that file with the block's content
  a fence whose first line is only "# path" or "// path" -> the same
  a tool written as a command in a shell block -> that tool (`write count.txt 17`,
      `edit app.py --search emial --replace email`); a flag it does not have is refused,
      naming the flag and the tool's parameters
Tolerated: trailing commas, raw line breaks inside strings, single quotes, Python literals,
"parameters" for "arguments", arguments as a JSON string, "functions.NAME", think blocks (calls
inside them are thoughts, also in a block that was never closed).
A reply that clearly attempts a call but cannot be read (cut off, no name, invalid JSON) raises
FormatError, whose message is what the model is told. Nothing else is ever raised. Arguments
nested too deeply for the JSON decoder stay text (the whole call's text when the call object
itself cannot be decoded): the tool registry refuses them as bad arguments the model can read.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import re
import shlex
import warnings
from collections.abc import Callable, Iterator

OPEN, CLOSE = "<tool_call>", "</tool_call>"
ALIASES = {"<|tool_call|>": OPEN, "<|/tool_call|>": CLOSE, "<|python_tag|>": ""}
MARKERS = (OPEN, CLOSE, "<function=", "<parameter=", "[TOOL_CALLS]")
CALL_KEYS = {"name", "arguments", "parameters", "function", "id", "type"}
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(</function>|\Z)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(</parameter>|(?=<parameter=)|\Z)", re.S)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S)
_TRAILING = re.compile(r"\s*[}\]]")
_CALL_START = re.compile(r"""\{+\s*["']?(?:name|function)["']?\s*:\s*["']([^"']+)""")
MAX_NESTING = 100  # levels of objects and lists a call's arguments may nest
FORMAT_HINT = (
    'Write exactly one call per block: <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call> '
    "with valid JSON (double quotes, no trailing commas), or reply with your answer and "
    "TASK_COMPLETE."
)


class FormatError(ValueError):
    """The reply tried to call a tool but could not be parsed."""

    def __init__(self, problem: str):
        super().__init__(f"Your tool call could not be read: {problem}. {FORMAT_HINT}")


class _TooDeep(FormatError):
    """JSON nested deeper than the decoder can go."""

    def __init__(self):
        super().__init__("the JSON is nested too deeply")


Known = set[str] | dict[str, list[str]]  # the tools offered, with their parameters
Place = Callable[[str, str], str]  # a block's (content, language) -> the file it is, or ""


def extract_text_calls(
    text: str, known: set[str], blocks: bool = False, place: Place | None = None
) -> list[dict]:
    """Tool calls written in `text`, as [{"name", "arguments"}]; [] when there are none.
    Arguments are a dict, or text when nested too deeply to decode. With `blocks`, fenced
    blocks are actions when no call is written in another form."""
    text = _without_thinking(text or "")
    for alias, tag in ALIASES.items():
        text = text.replace(alias, tag)
    for find in (_tagged_calls, _bare_function_calls, _mistral_calls, _json_calls):
        calls = find(text, known)
        if calls:
            return calls
    if any(marker in text for marker in MARKERS):
        raise FormatError("no call with a tool name was found")
    if not blocks:
        return []
    calls = function_style_calls(text, known) or block_actions(text, known, place)
    return calls or bare_command(text, known)


# a reply that is nothing but one command line, unfenced: how a small model answers "list the
# files here" ("ls"); it is that command (the reply's form decides, never the task's words)
_BARE_COMMAND = re.compile(
    r"\$?[ \t]*((?:ls|cat|pwd|python3?|pytest|git|grep|find|head|tail|wc|tree|make|pip3?|node|"
    r"npm)(?:[ \t][^\n`]*)?)"
)


def bare_command(text: str, known: Known) -> list[dict]:
    """[the shell call] when the whole reply is one command line, else []."""
    found = _BARE_COMMAND.fullmatch(text.strip())
    if not found or "shell" not in known:
        return []
    return [{"name": "shell", "arguments": {"command": found.group(1).strip()}}]


def _without_thinking(text: str) -> str:
    """The reply minus <think> blocks, anything before a lone closing tag, and a block never
    closed (as llm_client.split_thinking does: a call drafted while thinking is not made)."""
    return _THINK.sub("", text).rsplit("</think>", 1)[-1].split("<think>", 1)[0]


# --------------------------------------------------------------------------- the forms


def _tagged_calls(text: str, known: set[str]) -> list[dict]:
    calls = []
    for body, closed in _tool_call_blocks(text):
        calls += _block_calls(body, closed, known)
    return calls


def _tool_call_blocks(text: str) -> list[tuple[str, bool]]:
    """(body, closed) of each <tool_call> block, also one missing its opening or closing tag."""
    blocks = []
    for index, piece in enumerate(text.split(OPEN)):
        segments = piece.split(CLOSE)
        blocks += [(segment, True) for segment in segments[:-1]]
        if index and len(segments) == 1:
            blocks.append((piece, False))  # never closed: runs to the next block or the end
    return blocks


def _block_calls(body: str, closed: bool, known: set[str]) -> list[dict]:
    """The calls in one block: all of it is meant as calls, so unreadable JSON is an error."""
    if "<function=" in body:
        return _function_calls(body, closed, known)
    text = _unfenced(body).strip()
    if not text:
        return []
    try:
        return _calls_from_data(_loads(text), known)
    except FormatError:
        calls = _calls_in_prose(text, known)  # prose before a call that lost its opening tag
        if calls:
            return calls
        raise


def _bare_function_calls(text: str, known: set[str]) -> list[dict]:
    return _function_calls(text, False, known) if "<function=" in text else []


def _function_calls(text: str, closed: bool, known: set[str]) -> list[dict]:
    calls = []
    for match in _FUNCTION.finditer(text):
        name, ended = _canonical(match.group(1), known), closed or bool(match.group(3))
        calls.append({"name": name, "arguments": _parameters(match.group(2), ended, name)})
    return calls


def _parameters(body: str, ended: bool, name: str) -> dict | str:
    if "<parameter=" not in body:  # <function=NAME>{"arg": ...}</function>
        return _arguments(body, name)
    arguments = {}
    for match in _PARAMETER.finditer(body):
        if not (ended or match.group(3) or match.end() < len(body)):
            raise FormatError(f"the value of <parameter={match.group(1)}> is cut off")
        arguments[match.group(1)] = _strip_newlines(match.group(2))
    return arguments


def _strip_newlines(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _mistral_calls(text: str, known: set[str]) -> list[dict]:
    calls = []
    for segment in text.split("[TOOL_CALLS]")[1:]:
        name, args_tag, rest = segment.partition("[ARGS]")
        if not args_tag:  # [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
            calls += _block_calls(segment, True, known)
            continue
        arguments = next(_objects_in(rest), rest)
        calls.append(_call_from_object({"name": name.strip(), "arguments": arguments}, known))
    return calls


def _json_calls(text: str, known: set[str]) -> list[dict]:
    calls = []
    for block in _FENCE.findall(text):
        calls += _calls_in_prose(block, known)
    return calls or _calls_in_prose(text, known)


def _calls_in_prose(text: str, known: set[str]) -> list[dict]:
    """JSON objects in text that look like calls; other JSON and braces are left alone."""
    calls = []
    for found in _objects_in(text):
        candidate = _single_braced(found)
        try:
            data = _loads(candidate)
        except _TooDeep:
            start = _CALL_START.match(candidate)
            if start:  # the registry refuses the text as bad arguments, naming the depth
                calls.append({"name": _canonical(start.group(1), known), "arguments": candidate})
            continue
        except FormatError:
            start = _CALL_START.match(candidate)
            if start and (_canonical(start.group(1), known) in known or "arguments" in candidate):
                raise FormatError("the call's JSON is invalid or cut off") from None
            continue
        if _is_call(data, known):
            calls.append(_call_from_object(data, known))
    return calls


# --------------------------------------------------------------------------- fenced blocks

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "zsh", "console", "terminal"})
# what each line of a block without a language may start with, for it to be run
COMMAND_WORDS = frozenset({"awk", "bash", "cat", "cd", "chmod", "cp", "curl", "cut", "diff"})
COMMAND_WORDS |= {"echo", "find", "git", "grep", "head", "ls", "make", "mkdir", "mv", "node"}
COMMAND_WORDS |= {"npm", "pip", "pip3", "printf", "pytest", "python", "python3", "rm", "sed"}
COMMAND_WORDS |= {"sh", "sort", "tail", "touch", "tr", "uniq", "wc"}
_FIRST_WORD = re.compile(r"^\s*(?:\$\s+)?(?:\w+=\S*\s+)*([\w.+-]+)(?:\s|$)")
# a fenced block, its fence on a line of its own or opening a write call whose path comes first
# (the 1.5B model wrote `write(allergies.py, ```python` over a whole file, closed by "```)" or,
# the reply read up to its block's end, by "```"; taken for prose, the file was never saved)
_BLOCK = re.compile(
    r"^[ \t]*(?:write\(\s*[\"']?([\w./-]+)[\"']?\s*,\s*)?```[ \t]*([\w.+-]*)[^\n]*\n(.*?)"
    r"^[ \t]*```[ \t]*\)?[ \t]*$",
    re.S | re.M,
)
LANGUAGE_SUFFIXES = {  # a fenced block's language -> the file names it can be
    "python": (".py",),
    "py": (".py",),
    "javascript": (".js", ".mjs"),
    "js": (".js", ".mjs"),
    "json": (".json",),
    "yaml": (".yaml", ".yml"),
    "html": (".html", ".htm"),
    "css": (".css",),
    "ini": (".ini", ".cfg"),
    "toml": (".toml",),
}
_PATH = re.compile(r"(?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*")
_HEADER_WORDS = re.compile(r"^(?:file(?:name)?|path|create|save(?: as)?|update|in)\s*:?\s+", re.I)
_COMMENT_PATH = re.compile(r"^\s*(?:#|//|--)\s*(?:file(?:name)?:\s*)?(\S+)\s*$", re.I)
_BACKTICKED = re.compile(r"`([^`\s]+)`")
NOT_CODE = frozenset({"text", "txt", "output", "plaintext", "plain", "log", "diff"})
_NAMES_WITHOUT_DOT = frozenset({"Makefile", "Dockerfile", "Procfile", "LICENSE", "Gemfile"})


def block_actions(text: str, known: set[str], place: Place | None = None) -> list[dict]:
    """The reply's fenced blocks that are actions, in order: a shell-language block runs
    (unless a file path names it: then it is that file), a block named by a path is written,
    and so is a program without a path that `place` finds a file for. Any other
    block (an example, expected output) is only text."""
    return [action for _, actions in _blocks_as_actions(text, known, place) for action in actions]


def first_action_end(text: str, known: Known, place: Place | None = None) -> int | None:
    """Where the reply's first block that is an action ends (a file written, commands run):
    the reply is not read further. After a command, what a small model writes before its
    output is made up (outputs, then more commands built on them); after a file, it went on
    to rewrite the test file it had been told was correct, 500 tokens of it, which broke the
    tests, before the check of its first file had been shown to it."""
    if any(marker in text for marker in MARKERS):
        return None  # calls in another form: read as they are
    for end, actions in _blocks_as_actions(text, known, place):
        if actions:
            return end
    return None


def _blocks_as_actions(
    text: str, known: Known, place: Place | None
) -> Iterator[tuple[int, list[dict]]]:
    """(end, the actions it is) of each closed fenced block of the reply."""
    for end, written_as, path, body in _fenced_blocks(text):
        language = "bash" if _calls_as_python(written_as, path, body, known) else written_as
        meant = _meant_call(body, known) if language in SHELL_LANGUAGES else None
        actions = []
        if language in SHELL_LANGUAGES and not (meant or path):
            calls, body = _calls_then_commands(body, known)
            actions += calls
            written, body = _program_then_commands(body, known, place)
            actions += written
        if not path and not meant and place and _is_program(language, body):
            path = place(body, "python" if language in SHELL_LANGUAGES else language)
        if path and "write" in known:
            arguments = {"path": path, "content": body}
            actions.append({"name": "write", "arguments": arguments, "block": True})
        elif meant:
            actions.append(meant)
        elif language in SHELL_LANGUAGES and "shell" in known:
            command = _commands_of(body, language)
            if command:
                action = {"name": "shell", "arguments": {"command": command}}
                actions.append(
                    {**action, "refused": PYTHON_IN_SHELL} if is_python(body) else action
                )
        yield end, actions


def _program_then_commands(body: str, known: Known, place: Place | None) -> tuple[list[dict], str]:
    """Python definitions at the top of a shell block, with commands under them, where
    `place` finds the file they belong in: ([that write], the commands); ([], the block)
    otherwise. The 1.5B model fixed a function in a bash block and ran the tests under it,
    three times in one A/B of eleven held-out exercises: bash stopped at the def's
    parenthesis, a syntax error, and the model sent the same block again."""
    lines = body.splitlines(keepends=True)
    split = len(lines)
    while split and (_comment_or_blank(lines[split - 1]) or _only_commands(lines[split - 1])):
        split -= 1
    start = next((i for i in range(split) if not _comment_or_blank(lines[i])), split)
    program, commands = "".join(lines[start:split]), "".join(lines[split:])  # no narration
    if not (place and "write" in known and split and _only_commands(commands)):
        return [], body
    if not (is_python(program) and _DEFINES.search(program)):
        return [], body
    path = place(program, "python")
    if not path:
        return [], body
    return [
        {"name": "write", "arguments": {"path": path, "content": program}, "block": True}
    ], commands


_DEFINES = re.compile(r"^(?:def|class) ", re.M)
_WHOLE_CALL = re.compile(r"^\s*(?:TOOL\s*:\s*)?(\w+)\((.*)\)\s*$", re.S)
_ASSIGNED_CALL = re.compile(r"^\s*TOOL\s*[=:]\s*(\w+)\s*\n\s*arguments\s*[=:]\s*(\{.*\})\s*$", re.S)


def _meant_call(body: str, known: Known) -> dict | None:
    """A tool call put in a shell block (`write(a.json, '{...}')`, or TOOL=write and
    arguments={...} on two lines): what the model meant, not a command. Not a call with more
    under it (`write('app.py', '''...''')`, then `shell('python3 app.py')`): read whole, as
    one call up to the last parenthesis, the second call had become the end of app.py."""
    code = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    first, rest = _call_then_commands(code, known)
    if first is not None and rest.strip():
        return None
    whole = _WHOLE_CALL.match(code)  # also over several lines: write(a.txt, """...""")
    parameters = known.get(whole.group(1)) if whole and isinstance(known, dict) else None
    if whole and parameters is not None:
        arguments = _function_arguments(whole.group(2), parameters)
        if arguments is not None:
            return {"name": whole.group(1), "arguments": arguments}
    assigned = _ASSIGNED_CALL.match(code)
    if assigned and assigned.group(1) in known:
        with contextlib.suppress(FormatError):
            arguments = _loads(assigned.group(2))
            if isinstance(arguments, dict):
                return {"name": assigned.group(1), "arguments": arguments}
    triple = _triple_quoted_call(code, known)
    if triple and not triple[1].strip():
        return triple[0]
    return _command_style_call(code, known)


_BARE_PATH_CALL = re.compile(r"(\w+)\(\s*[\w./-]+\.\w+\s*,")  # edit(hello.py, ...


def _calls_as_python(language: str, path: str, body: str, known: Known) -> bool:
    """A ```python block, under no path, that opens with a tool call given a bare file name
    (`edit(hello.py, "x", "y")`, then `python3 hello.py`), or that is only calls of tools
    (`shell("python3 hello.py", timeout=10)`): the model's actions, read as a ```bash block.
    No program passes a file name unquoted, nor calls a function it never defines or imports;
    written into the one Python file the task creates, each replaced hello.py."""
    if language not in ("python", "py") or path:
        return False
    code = [line for line in body.splitlines() if not _comment_or_blank(line)]
    call = _BARE_PATH_CALL.match(code[0].strip()) if code else None
    return (bool(call) and call.group(1) in known) or _only_tool_calls(body, known)


def _only_tool_calls(code: str, known: Known) -> bool:
    """Python code that is nothing but calls of the tools by name, as statements."""
    try:
        statements = ast.parse(code).body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return bool(statements) and all(
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and isinstance(s.value.func, ast.Name)
        and s.value.func.id in known
        for s in statements
    )


def _calls_then_commands(body: str, known: Known) -> tuple[list[dict], str]:
    """The tool calls at the top of a shell block, one after another (`write(hello.py, ...)`
    then `shell("python3 hello.py", timeout=10)`), and the commands under them: shell
    would stop at each call's parenthesis (the 1.5B model's `shell(...)` line under its
    write went to bash, a syntax error, seven times in one run)."""
    calls: list[dict] = []
    while True:
        call, rest = _call_then_commands(body, known)
        if call is None:
            break
        calls.append(call)
        body = rest
    last = _meant_call(body, known) if calls and body.strip() else None
    return ([*calls, last], "") if last else (calls, body)


def _call_then_commands(body: str, known: Known) -> tuple[dict | None, str]:
    """A tool call at the top of a shell block, with commands under it (`write(squares.py,
    '''...''')` or `write notes.txt "A note."`, then `python3 squares.py`): (the call, the
    commands);
    (None, the block) otherwise. Shell would stop at the call's parenthesis."""
    lines = body.splitlines()
    start = next((i for i, line in enumerate(lines) if not _comment_or_blank(line)), len(lines))
    if start >= len(lines) - 1:
        return None, body
    triple = _triple_quoted_call("\n".join(lines[start:]), known)
    if triple:
        return triple
    end = start  # write notes.txt "A note." (its quotes may span lines)
    while end < len(lines) - 2 and not _quotes_closed("\n".join(lines[start : end + 1])):
        end += 1
    as_command = _command_style_call("\n".join(lines[start : end + 1]), known)
    if as_command:
        return as_command, "\n".join(lines[end + 1 :])
    if not re.match(r"\s*\w+\(", lines[start]):
        return None, body
    for end in range(start, len(lines) - 1):
        whole = lines[end].rstrip().endswith(")") and _WHOLE_CALL.match(
            "\n".join(lines[start : end + 1])
        )
        parameters = known.get(whole.group(1)) if whole and isinstance(known, dict) else None
        if parameters is None or not _is_python_call(whole.group(0)):
            continue  # a line of the file's text that ends with ")"
        arguments = _function_arguments(whole.group(2), parameters)
        if arguments is not None:
            return {"name": whole.group(1), "arguments": arguments}, "\n".join(lines[end + 1 :])
    return None, body


_TRIPLE_COMMAND = re.compile(r"[ \t]*(\w+)((?:[ \t]+[^\s'\"]+)*)[ \t]+('\'\'|\"\"\")")


def _triple_quoted_call(text: str, known: Known) -> tuple[dict, str] | None:
    """A tool written as a command whose last argument is triple-quoted (`write app.py
    '''...'''`, the quotes spanning lines, quotes of the file's own inside): (the call,
    its last argument as written, like a here-document; the text after it). Shell would
    have read the file's quotes as its own."""
    found = _TRIPLE_COMMAND.match(text)
    name = found.group(1) if found else ""
    parameters = known.get(name) if isinstance(known, dict) and name in TOOLS_NOT_COMMANDS else None
    close = text.find(found.group(3), found.end()) if parameters else -1
    if close < 0:
        return None
    words = [*found.group(2).split(), text[found.end() : close].removeprefix("\n")]
    rest, _, after = text[close + 3 :].partition("\n")
    if rest.strip() or len(words) > len(parameters):
        return None
    return {"name": name, "arguments": dict(zip(parameters, words, strict=False))}, after


def _quotes_closed(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def _is_python_call(code: str) -> bool:
    try:
        return isinstance(ast.parse(code.strip(), mode="eval").body, ast.Call)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False


def _comment_or_blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


# Tools whose names are no shell command (in the sandbox or anywhere): run as one, the model
# meant the tool. `grep`, `ls` and `read` (a bash builtin) are commands and stay commands.
TOOLS_NOT_COMMANDS = frozenset({"write", "edit", "shell", "glob", "todo_add", "git_commit"})


def _command_style_call(code: str, known: Known) -> dict | None:
    """A tool written as a command, with the tool's arguments in order (`write count.txt 17`,
    `edit hello.py "Hello" "Bye"`) or as flags (`--search x`): that call; refused (told why)
    when a flag cannot be read. Not when its words are more than the tool has arguments
    (`write a.txt x` and a second command under it)."""
    first = code.split(maxsplit=1)[0] if code.strip() else ""
    parameters = known.get(first) if isinstance(known, dict) else None
    if (
        first not in TOOLS_NOT_COMMANDS
        or parameters is None
        or code.strip().startswith(f"{first}\n")
    ):
        return None  # a tool's name alone on its line is no call
    try:
        words = shlex.split(code)[1:]
    except ValueError:  # an open quote
        return None
    if first == "shell" and words:  # `shell -c "python3 a.py"`, `shell python3 a.py`
        words = words[1:] if words[0] == "-c" else words
        command = words[0] if len(words) == 1 else shlex.join(words)  # -c "one string"
        return {"name": first, "arguments": {"command": command}} if words else None
    arguments, problem = _flag_arguments(words, parameters)
    if problem:
        return {
            "name": first,
            "arguments": {},
            "refused": _not_a_command(first, parameters, problem),
        }
    return {"name": first, "arguments": arguments} if arguments else None


def _flag_arguments(words: list[str], parameters: list[str]) -> tuple[dict, str]:
    """A command's words as a tool's arguments: `--search x` or `--search=x` by the
    parameter's name, the other words in order (`edit app.py --search emial --replace email`),
    and what could not be read ("" when all could); no arguments when there are more words
    than parameters (`write a.txt x` with a second command under it)."""
    arguments: dict = {}
    rest = iter(words)
    positional = iter(parameters)
    for word in rest:
        if word.startswith("-"):
            name, equals, value = word.lstrip("-").partition("=")
            value = value if equals else next(rest, None)
            if name not in parameters:
                return {}, f"`{word}` is none of its parameters"
            if name in arguments or value is None:
                return {}, f"`{word}` needs one value"
        else:
            name, value = next((n for n in positional if n not in arguments), None), word
            if name is None:  # more words than parameters: a second command under it, or none
                return {}, ""
        arguments[name] = value
    return arguments, ""


def _not_a_command(tool: str, parameters: list[str], problem: str) -> str:
    """What a model is told for a tool written as a command that cannot be read."""
    example = " ".join(f"--{name} VALUE" for name in parameters)
    return (
        f"not run: `{tool}` is one of your tools, not a shell command, and {problem}. Its "
        f"parameters are {', '.join(parameters)}: write `{tool} {example}` alone in the "
        "block, or call it as your instructions show"
    )


PYTHON_IN_SHELL = (
    "not run: that ```bash block holds Python (or a file's content), not shell commands. To "
    "save it as a file, write the file's path on its own line, then the whole content in a "
    "```python block; to run a Python file, use a ```bash block with python3 FILE"
)
_PYTHON_ONLY = re.compile(
    r"^\s*(?:\w+(?:\[[^]]*\])?\s+=\s|def |class |import |from \S+ import |print\(|"
    r"(?:for|if|while|with|elif|else|try|except)\b.*:\s*$)",
    re.M,
)


def is_python(text: str) -> bool:
    """A shell block that is Python: valid Python with a line that shell would not take as
    meant (`x = 1` runs a command x; `def`, `import`, `print(`, a `for ...:` line)."""
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return _PYTHON_ONLY.search(text) is not None


_FUNCTION_LINE = re.compile(r"^[ \t>*_`]*(?:TOOL[*_`]*:\s*)?(\w+)\((.*)\)[*_`]*\s*$", re.M)


def function_style_calls(text: str, known: Known) -> list[dict]:
    """Lines that call a tool the way the prompt lists it: `edit(data.py, get_data, load_data)`,
    `read(path="a.py")`. A bare word (data.py) is its own text; positional arguments take the
    tool's parameters in order (`known` maps each tool to them)."""
    calls = []
    for match in _FUNCTION_LINE.finditer(_BLOCK.sub("", text)):  # code in a block is code
        name, inner = match.group(1), match.group(2)
        parameters = known.get(name) if isinstance(known, dict) else None
        if parameters is None:
            continue
        arguments = _function_arguments(inner, parameters)
        if arguments is not None:
            calls.append({"name": name, "arguments": arguments})
    return calls


def _function_arguments(inner: str, parameters: list[str]) -> dict | None:
    source = f"f({inner})"
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _loose_arguments(inner, parameters)
    if not isinstance(node, ast.Call) or len(node.args) > len(parameters):
        return None
    arguments = {
        name: _argument_text(source, value)
        for name, value in zip(parameters, node.args, strict=False)
    }
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            return None
        arguments[keyword.arg] = _argument_text(source, keyword.value)
    return arguments


def _loose_arguments(inner: str, parameters: list[str]) -> dict | None:
    """Arguments that are not Python (`shell(python3 a.py, timeout=10)`): split at the commas
    outside quotes and braces; `name=value` by name, the rest in order, quotes taken off."""
    cuts = [i for i, char, depth in _outside_strings(inner) if char == "," and not depth]
    pieces = [inner[a + 1 : b].strip() for a, b in itertools.pairwise([-1, *cuts, len(inner)])]
    arguments: dict = {}
    for index, piece in enumerate(piece for piece in pieces if piece):
        name, equals, value = piece.partition("=")
        if equals and name.strip() in parameters:
            arguments[name.strip()] = _unquoted(value.strip())
        elif index < len(parameters) and not arguments.keys() - set(parameters[:index]):
            arguments[parameters[index]] = _unquoted(piece)
        else:
            return None
    return arguments or None


def _unquoted(text: str) -> str:
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _argument_text(source: str, node: ast.expr) -> object:
    """A literal's value; any other expression as written (data.py, get_data). A triple-quoted
    string is a file's text as written, like a here-document: `"\\n"` in the Python inside it
    stays `"\\n"`, and a first line break after the quotes is not part of it."""
    segment = ast.get_source_segment(source, node) or ""
    if isinstance(node, ast.Constant) and segment[:3] in ('"""', "'''") and len(segment) >= 6:
        return segment[3:-3].removeprefix("\n")
    try:
        return _literal(node)
    except ValueError:
        return ast.get_source_segment(source, node)


def _fenced_blocks(text: str) -> Iterator[tuple[int, str, str, str]]:
    """(end, language, path it names or "", content) of each closed fenced block; a block
    without a language or a path holding only commands is a shell block (the 1.5B model
    wrote `echo "print('Hello, world!')" > hello.py` in one, twice, and was only told its
    finish failed: the block had been taken for text)."""
    for match in _BLOCK.finditer(text):
        language, body = match.group(2).lower(), match.group(3)
        path = _as_path(match.group(1) or "")  # write(path, ```python
        if not path:
            path, body = _named_path(text[: match.start()], body, language)
        if not language and not path and _only_commands(body):
            language = "bash"
        yield match.end(), language, path, body


def _only_commands(body: str) -> bool:
    """Every line that is no comment starts with a common command (after a "$ " prompt or
    variables set for it), and the block is not Python."""
    lines = [line for line in body.splitlines() if _is_command(line)]
    firsts = [_FIRST_WORD.match(line) for line in lines]
    known = [first and first.group(1) in COMMAND_WORDS for first in firsts]
    return bool(lines) and all(known) and not is_python(body)


def _named_path(before: str, body: str, language: str) -> tuple[str, str]:
    """(path, content): the path on the line just before the fence (decorated as markdown may
    decorate it: **app.py**, `app.py`, ### app.py, File: app.py), or named in that line when
    it introduces a program's code ("Here is the corrected `calc.py`:" over a ```python
    block; not over a shell block, an output or a block without a language), else the block's
    first line when it is only a comment naming a path (then left out of the content)."""
    line = before.rstrip("\n").rsplit("\n", 1)[-1]
    header = _as_path(line) or (_introduced_path(line, language) if _is_code(language) else "")
    if header:
        return header, body
    first, _, rest = body.partition("\n")
    match = _COMMENT_PATH.match(first)
    if match and _as_path(match.group(1)):
        return _as_path(match.group(1)), rest
    return "", body


def _is_program(language: str, body: str) -> bool:
    return _is_code(language) or (language in SHELL_LANGUAGES and is_python(body))


def _is_code(language: str) -> bool:
    return bool(language) and language not in SHELL_LANGUAGES | NOT_CODE


def _introduced_path(line: str, language: str) -> str:
    """The one path in backticks of a line ending with a colon (other `words` may be there
    too) that can hold the block's language (not "the `parser.add_argument` call" over a
    ```python block); "" otherwise."""
    suffixes = LANGUAGE_SUFFIXES.get(language)
    words = (word for word in _BACKTICKED.findall(line) if not suffixes or word.endswith(suffixes))
    paths = {path for word in words if (path := _as_path(word))}
    if not line.rstrip().rstrip("*_").endswith(":") or len(paths) != 1:
        return ""
    return paths.pop()


def _as_path(line: str) -> str:
    """`line` as a relative file path when that is all it says; "" otherwise."""
    text = line.strip().strip("*_`#>").strip()
    text = _HEADER_WORDS.sub("", text).strip().strip("*_`").rstrip(":").strip().strip("*_`")
    if not _PATH.fullmatch(text) or text.startswith("/") or ".." in text.split("/"):
        return ""
    name = text.rsplit("/", 1)[-1]
    has_extension = "." in name.strip(".") and not name.endswith(".")
    return text if has_extension or name in _NAMES_WITHOUT_DOT else ""


def _is_command(line: str) -> bool:
    """Not blank, not a comment, not the word that ends a task (a model ends a reply with
    "# TASK_COMPLETE" or "task_complete" in a block)."""
    text = line.strip()
    return bool(text) and not text.startswith("#") and text.upper() != "TASK_COMPLETE"


def _commands_of(body: str, language: str) -> str:
    """A shell block's commands: in a console transcript (a console block, or any shell block
    whose first command has a "$ " prompt) only its "$ " lines, the rest being output (the
    1.5B model showed `$ python -m pytest` with the output it imagined, "(exit code 0)", in a
    bash block, and each line of it ran as a command); a "$ " prompt in front of every command
    line is dropped."""
    lines = [line for line in body.strip("\n").splitlines() if _is_command(line)]
    prompted = [line for line in lines if line.lstrip().startswith("$ ")]
    transcript = language in ("console", "terminal") or (lines and lines[0] in prompted)
    if transcript and prompted:
        lines = prompted
    if lines and len(prompted) == len(lines):
        lines = [line.lstrip()[2:] for line in lines]
    return "\n".join(lines).strip()


# --------------------------------------------------------------------------- one call


def _is_call(data: object, known: set[str]) -> bool:
    """A call object; one with keys beyond a call's ({"name", "arguments", "reason"}) only
    when it names a known tool and has arguments (other JSON in prose is left alone)."""
    if not isinstance(data, dict):
        return False
    name = _name_of(data, known)
    has_arguments = "arguments" in data or "parameters" in data or "function" in data
    if not set(data) <= CALL_KEYS:
        return name in known and has_arguments
    return bool(name) and (name in known or has_arguments)


def _single_braced(text: str) -> str:
    """{{...}} (braces doubled, as a chat template's example shows them) as {...}: the outer
    pair undoubled, else every pair; the text as it is when neither is valid JSON."""
    if not text.startswith("{{"):
        return text
    body = text.rstrip()
    tries = [body[1:-1]] if body.endswith("}}") else []
    tries.append(body.replace("{{", "{").replace("}}", "}"))
    for attempt in tries:
        with contextlib.suppress(ValueError, RecursionError):
            json.loads(attempt)
            return attempt
    return text


def _calls_from_data(data: object, known: set[str]) -> list[dict]:
    items = data if isinstance(data, list) else [data]
    if not items:
        raise FormatError("the list of calls is empty")
    return [_call_from_object(item, known) for item in items]


def _call_from_object(data: object, known: set[str]) -> dict:
    if not isinstance(data, dict):
        raise FormatError("a tool call must be a JSON object")
    name = _name_of(data, known)
    if not name:
        raise FormatError('the call has no "name"')
    holder = data["function"] if isinstance(data.get("function"), dict) else data
    arguments = holder.get("arguments", holder.get("parameters"))
    if isinstance(arguments, str):
        return {"name": name, "arguments": _arguments(arguments, name)}
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise FormatError(f'"arguments" of {name} must be a JSON object')
    return {"name": name, "arguments": arguments}


def _arguments(text: str, name: str) -> dict | str:
    """Arguments written as JSON text (blank: none); text nested too deeply to decode is kept
    as it is, for the tool registry to refuse."""
    if not text.strip():
        return {}
    try:
        arguments = _loads(text)
    except _TooDeep:
        return text
    if not isinstance(arguments, dict):
        raise FormatError(f'"arguments" of {name} must be a JSON object')
    return arguments


def _name_of(data: dict, known: set[str]) -> str:
    function = data.get("function")
    name = data.get("name") or (function.get("name") if isinstance(function, dict) else function)
    return _canonical(name, known) if isinstance(name, str) else ""


def _canonical(name: str, known: set[str]) -> str:
    """ "functions.read" → "read" when read is a known tool."""
    name = name.strip()
    short = name.rsplit(".", 1)[-1]
    return short if name not in known and short in known else name


# --------------------------------------------------------------------------- lenient JSON


def _loads(text: str) -> object:
    """JSON, tolerating trailing commas and Python literals; FormatError otherwise. _TooDeep
    when it nests deeper than a call with MAX_NESTING levels of arguments (in a list of calls)
    could, or deeper than the decoder can go."""
    text = text.strip()
    try:
        value = json.loads(text)
    except RecursionError:
        raise _TooDeep() from None
    except ValueError:
        value = _lenient_loads(text)
    return _shallow(value)


def _lenient_loads(text: str) -> object:
    """JSON with trailing commas or raw line breaks and tabs inside strings (a file's content
    written as it is), or a Python literal (single quotes, True, None)."""
    fixed = _without_trailing_commas(text)
    with contextlib.suppress(ValueError, RecursionError):
        return json.loads(fixed, strict=False)
    try:
        with warnings.catch_warnings():  # invalid escapes like "\e" warn while parsing
            warnings.simplefilter("ignore")
            return _literal(ast.parse(fixed, mode="eval").body)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise FormatError(f"the JSON is invalid or cut off: {text[:120]!r}") from None


def _shallow(value: object) -> object:
    if nesting_depth(value) > MAX_NESTING + 2:
        raise _TooDeep()
    return value


def nesting_depth(value: object) -> int:
    """How many levels of dicts and lists `value` has (0 for a plain value), level by level
    rather than by recursion, so no depth can overflow the stack."""
    depth, level = 0, [value]
    while level := [item for item in level if isinstance(item, dict | list)]:
        depth += 1
        level = [child for item in level for child in _children(item)]
    return depth


def _children(container: dict | list) -> list:
    return list(container.values()) if isinstance(container, dict) else container


_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def _literal(node: ast.AST) -> object:
    """A Python literal with JSON's true/false/null allowed (single-quoted JSON)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Dict):
        return {
            _literal(key): _literal(value)
            for key, value in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, (int, float)):
            return -value
    raise ValueError("not a literal")


def _outside_strings(text: str, quotes_in_braces_only: bool = False):
    """(index, character, brace depth before it) for each character outside quoted strings.
    With quotes_in_braces_only, quotes open a string only inside braces, so that apostrophes in
    the prose around a JSON object do not count."""
    depth, quote, escaped = 0, "", False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'" and (depth or not quotes_in_braces_only):
            quote = char
            continue
        yield index, char, depth
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1


def _without_trailing_commas(text: str) -> str:
    """Drop commas that directly precede } or ], but never inside a string."""
    drop = {
        index
        for index, char, _ in _outside_strings(text)
        if char == "," and _TRAILING.match(text, index + 1)
    }
    return "".join(char for index, char in enumerate(text) if index not in drop)


def _objects_in(text: str):
    """Top-level balanced {...} spans (string-aware); an unbalanced tail is yielded as is."""
    start = -1
    for index, char, depth in _outside_strings(text, quotes_in_braces_only=True):
        if char == "{" and depth == 0:
            start = index
        elif char == "}" and depth == 1:
            yield text[start : index + 1]
            start = -1
    if start >= 0:
        yield text[start:]


def _unfenced(text: str) -> str:
    fenced = _FENCE.search(text)
    return fenced.group(1) if fenced else text.strip().strip("`")


def strip_calls(text: str) -> str:
    """The prose of a reply with any text-format tool calls removed (for display/history)."""
    text = re.sub(r"<tool_call>.*?(?:</tool_call>|\Z)", "", text, flags=re.S)
    return _FUNCTION.sub("", text).replace(CLOSE, "").strip()
