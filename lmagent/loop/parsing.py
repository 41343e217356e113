"""How a model's reply becomes tool calls: native tool calls win; otherwise calls written as
text (lmagent.llm.toolcalls). With text calls (a small model), fenced blocks are actions where
the prompt teaches them, a program block without a path is the named file it is for
(lmagent.loop.named), and a reply being streamed is read up to its first action.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from lmagent.core.config import Config
from lmagent.llm.client import LLMClient, Reply
from lmagent.llm.toolcalls import FormatError, extract_text_calls, first_action_end
from lmagent.llm.toolmode import calls_came_as_text
from lmagent.loop.history import ended_text
from lmagent.loop.named import TaskAsks, file_for_block
from lmagent.tools.registry import Toolset

Look = Callable[[str, dict], dict]  # a reading tool's result, run for the model


class ReplyParser:
    """The calls in a reply, for one run. `asks`: what its task names (set for a new task)."""

    def __init__(
        self,
        config: Config,
        client: LLMClient,
        toolset: Toolset,
        look: Look,
        say: Callable[[str], None],
        task: str,
    ):
        self.config, self.client, self.toolset = config, client, toolset
        self.look, self.say = look, say
        self.asks = TaskAsks(task)  # the paths it names

    def new_task(self, task: str) -> TaskAsks:
        """What a new task names, looked up in the workspace (a block may be for one of its
        files)."""
        self.asks = TaskAsks(task, self.look)
        return self.asks

    def parse(self, reply) -> tuple[list[dict], bool]:
        """(calls, native): native tool_calls win; otherwise calls written as text."""
        if reply.tool_calls:
            return [dict(c) for c in reply.tool_calls], True
        try:
            calls = self.text_calls_in(reply)
        except FormatError:
            self.calls_came_as_text()  # even a broken call written as text: not native
            raise
        if calls:
            self.calls_came_as_text()
        for index, call in enumerate(calls):
            call["id"] = f"text_{uuid.uuid4().hex[:8]}_{index}"
        return calls, False

    def text_calls_in(self, reply: Reply) -> list[dict]:
        """Calls written as text; fenced blocks are actions where the prompt teaches them, and
        a program block without a path is the named file it is for (lmagent.loop.named)."""
        content = ended_text(reply)
        if self.client.tool_form != "text":
            return extract_text_calls(content, self.parameters())
        return extract_text_calls(content, self.parameters(), blocks=True, place=self.place)

    def place(self, body: str, language: str) -> str:
        """The file a program block without a path is for (lmagent.loop.named), or ""."""
        return file_for_block(body, language, self.asks.named, self.asks.to_create, self.look)

    def action_end(self, text: str) -> int | None:
        """Where a reply being streamed may stop: after its first action."""
        return first_action_end(text, self.parameters(), self.place)

    def parameters(self) -> dict[str, list[str]]:
        """Each tool's parameters in order (calls written as text may give them by position)."""
        tools = self.toolset.tools
        return {name: list(tools[name].parameters.get("properties", {})) for name in tools}

    def calls_came_as_text(self) -> None:
        """Offered native tools, the model wrote a call as text: text calls from now on."""
        if not self.client.native_tools:
            return
        mode = calls_came_as_text(self.config, self.client.model or "")
        if mode is not None:
            self.client.tool_mode = "text"
            self.say(mode.describe())
