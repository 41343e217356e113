"""The conversation as recorded and as sent: assistant and tool-result messages built from a
reply, the view that keeps every tool call paired with its result (servers reject orphans),
and the repair of calls a crash left without a result."""

from __future__ import annotations

import json

from lmagent.core.text import cut_middle
from lmagent.llm.client import CUT_REPEATING, Reply
from lmagent.llm.toolcalls import FormatError, extract_text_calls
from lmagent.sessions.store import Session

TOOL_RESULT_CHARS = 30_000  # a longer result is cut in the middle
CHARS_PER_TOKEN = 3  # few: code and logs run 3-4 characters a token
OUTPUT_SHARE = 8  # a command's output takes at most this share of a small window
MIN_OUTPUT_CHARS = 2_000
CALL_CUT_OFF = (
    "the run was cut off (the agent was killed or crashed) while this call ran, so it may or "
    "may not have taken effect. Check whether it did (read the file, list the directory, look "
    "at the processes) before you repeat it."
)

RESULT_TAG = "<tool_result"  # opens a result of calls written as text
# a note kept in the transcript but never sent: an attempt undone (lmagent.loop.restarts). Told
# so, the 1.5B model began 0 of 18 new attempts with a block and wrote twice the tokens; sent
# the opening alone, 17 of 18 (bench/exercism_notes.md), and the request is the cached opening
UNSENT_NOTE = "again"


def ended_text(reply: Reply) -> str:
    """A reply's text, its last fenced block closed when the model stopped inside it (a 1.5B
    model ended `write app.py '''...'''` there, and the write was lost) but not when the reply
    was cut short (at its token limit: the block's text is not whole)."""
    content = before_results(reply.content)
    cut = reply.finish_reason in ("length", CUT_REPEATING)
    return f"{content.rstrip()}\n```" if _open_block(content) and not cut else content


def cut_in_block(reply: Reply) -> bool:
    """A reply cut off at its length limit inside a fenced block (a 1.5B model wrote a page of
    prose and then the file, and its reply ended at 1,024 tokens inside the file's block): what
    the block holds is not whole, so it is neither written nor run."""
    return reply.finish_reason == "length" and _open_block(before_results(reply.content))


def _open_block(content: str) -> bool:
    """Whether `content` ends inside a fenced block (an odd number of fence lines)."""
    return sum(line.lstrip().startswith("```") for line in content.splitlines()) % 2 == 1


def before_results(content: str) -> str:
    """A reply up to the first tool result it wrote itself (what follows is made up: a 1.5B
    model put results in a bash block, their lines came back as errors, and it copied those,
    each reply longer, for five minutes)."""
    return content.split(RESULT_TAG, 1)[0].rstrip()


def assistant_message(reply: Reply, native_calls: list[dict]) -> dict:
    """The reply as recorded. Its thinking is kept for the transcript (`reasoning`); requests
    never carry it (llm_client.clean_message)."""
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning"] = reply.reasoning
    if native_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": _history_arguments(c)},
            }
            for c in native_calls
        ]
    return message


def output_chars(context_length: int | None) -> int:
    """How much of a command's output a tool result carries: an eighth of the model's window
    (at least MIN_OUTPUT_CHARS), the start and the end of it, never more than TOOL_RESULT_CHARS.
    A whole pytest run's 16,600 characters took an 8k-window model on 2 cores two minutes to
    read, and its run ran out of time before the next reply. A file's content is not cut so:
    a model that never saw a file's middle would write it back without it."""
    if not context_length:
        return TOOL_RESULT_CHARS
    share = context_length * CHARS_PER_TOKEN // OUTPUT_SHARE
    return max(MIN_OUTPUT_CHARS, min(TOOL_RESULT_CHARS, share))


def result_messages(
    calls: list[dict], results: list[dict], native: bool, output: int = TOOL_RESULT_CHARS
) -> list[dict]:
    """The history messages carrying tool results: one per native call, or one user message
    with every result of calls written as text; a command's output kept to `output`
    characters (`output_chars`)."""
    results = [_output_cut(result, output) for result in results]
    pairs = zip(calls, results, strict=True)
    if native:
        return [
            {"role": "tool", "tool_call_id": call["id"], "content": _result_text(result)}
            for call, result in pairs
        ]
    text = "\n".join(
        f'{RESULT_TAG} name="{call["name"]}">{_result_text(readable(result))}</tool_result>'
        for call, result in pairs
    )
    return [{"role": "user", "content": text}]


def _history_arguments(call: dict) -> str:
    """Arguments as stored for the server: a JSON object text (servers reject anything else)."""
    arguments = call["arguments"]
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return "{}"
    return arguments if isinstance(value, dict) else "{}"


TEXT_FIELDS = ("output", "content")  # shown as they are, after the rest, in text results


def readable(result: dict) -> dict | str:
    """A result for a model that calls tools in text: a command's output or a file's content
    as it is, after the other fields (a small model misreads the escaped \\n of JSON and
    copies it into the files it writes)."""
    field = next((f for f in TEXT_FIELDS if "\n" in str(result.get(f, ""))), None)
    if field is None:
        return result
    rest = {key: value for key, value in result.items() if key != field}
    return f"{json.dumps(rest, ensure_ascii=False)}\n{field}:\n{result[field]}"


def _output_cut(result: dict, limit: int) -> dict:
    """`result` with its command output cut in the middle to `limit` characters."""
    output = result.get("output")
    if not isinstance(output, str) or len(output) <= limit:
        return result
    return {
        **result,
        "output": cut_middle(output, limit, "\n[... {} characters of output cut ...]\n"),
    }


def _result_text(result: dict | str) -> str:
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    if len(text) > TOOL_RESULT_CHARS:
        text = cut_middle(text, TOOL_RESULT_CHARS, " …[{} characters cut]… ")
    return text


def cut_off_result(call: dict) -> dict:
    """The result of a call that was recorded but never answered: the process died while it
    ran, so it may have had its effect. Names the call, so the model can check it."""
    return {
        "success": False,
        "error": CALL_CUT_OFF,
        "tool": call["name"],
        "arguments": _decoded(call["arguments"]),
    }


def _decoded(arguments: object) -> object:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def _plain_call(call: dict) -> dict:
    """A recorded native tool call as {"id", "name", "arguments"}."""
    function = call["function"]
    return {"id": call["id"], "name": function["name"], "arguments": function["arguments"]}


def _missing_result(call: dict) -> dict:
    """The tool message for a recorded native `call` without a result."""
    (message,) = result_messages([call], [cut_off_result(call)], native=True)
    return message


class PairedHistory:
    """The history as sent: every assistant tool call directly followed by its result (a missing
    one is filled in), and no tool message without its call. Servers reject either. A note
    marked UNSENT_NOTE is left out.

    Only messages appended since the last call are examined, so a step costs the same at step
    500 as at step 10; a rewrite of the history (compaction) starts over."""

    def __init__(self):
        self.revision: int | None = None
        self.seen = 0
        self.out: list[dict] = []
        self.waiting: list[dict] = []  # the latest calls still without a result (_plain_call)

    def __call__(self, session: Session) -> list[dict]:
        history = session.history
        if session.revision != self.revision or self.seen > len(history):
            self.__init__()
            self.revision = session.revision
        for message in history[self.seen :]:
            self.add(message)
        self.seen = len(history)
        return self.out + [_missing_result(call) for call in self.waiting]

    def add(self, message: dict) -> None:
        if message.get("note") == UNSENT_NOTE:
            return
        if message.get("role") == "tool":
            call = next((c for c in self.waiting if c["id"] == message.get("tool_call_id")), None)
            if call is not None:
                self.waiting.remove(call)
                self.out.append(message)
            return
        self.out.extend([_missing_result(call) for call in self.waiting])
        self.out.append(message)
        self.waiting = [_plain_call(c) for c in message.get("tool_calls") or ()]


def repair_history(session: Session, tool_names: frozenset[str] = frozenset()) -> None:
    """Record a result for every call of the last step that has none: the process died while
    they ran (kill -9, a crash, a power cut), so the model is told that each may have had its
    effect and to check before repeating it. `tool_names` finds calls written as text."""
    calls, native = unanswered_calls(session.history, tool_names)
    if calls:
        session.extend(result_messages(calls, [cut_off_result(c) for c in calls], native))


def unanswered_calls(history: list[dict], tool_names: frozenset[str]) -> tuple[list[dict], bool]:
    """(calls, native): the calls of the last assistant message that have no result."""
    index = len(history) - 1
    while index >= 0 and history[index].get("role") == "tool":
        index -= 1
    if index < 0 or history[index].get("role") != "assistant":
        return [], True
    message = history[index]
    if message.get("tool_calls"):
        answered = {m.get("tool_call_id") for m in history[index + 1 :]}
        calls = [_plain_call(c) for c in message["tool_calls"]]
        return [c for c in calls if c["id"] not in answered], True
    if index < len(history) - 1 or not tool_names:
        return [], False
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    try:  # calls written as text are answered by the next (user) message
        return extract_text_calls(text, set(tool_names)), False
    except FormatError:
        return [], False
