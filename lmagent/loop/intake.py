"""A model's reply read for what it asks for: the assistant message to record and the calls in
it (lmagent.loop.parsing), or, when it cannot be used as it is, the model told so: a format
error, results it wrote for its own actions, a reply cut off inside a block, a loop the server
cut. With TOOL_SET=tiny, an answer where one is due ends the run. The run (lmagent.loop.run)
runs the calls or judges the answer."""

from __future__ import annotations

from collections.abc import Callable

from lmagent.core.config import Config
from lmagent.llm.client import CUT_REPEATING, Reply
from lmagent.llm.toolcalls import FormatError
from lmagent.loop.endings import Completed
from lmagent.loop.history import RESULT_TAG, assistant_message, before_results, cut_in_block
from lmagent.loop.parsing import ReplyParser
from lmagent.loop.policy import Nudges
from lmagent.loop.prompts import MADE_UP_RESULTS, NUDGE_REPEATING, cut_in_block_nudge, final_text

Asked = tuple[dict, list[dict], bool]  # (assistant message, calls, native)


class ReplyIntake:
    """The replies of one run, read by `parser`; what cannot be used is recorded (`append`)
    and the model told (`nudges`). `text_calls` says whether the model calls tools as text (a
    small one); `rules`, the small-model rules applied (lmagent.loop.policy)."""

    def __init__(
        self,
        config: Config,
        parser: ReplyParser,
        nudges: Nudges,
        append: Callable[[dict], None],
        text_calls: Callable[[], bool],
        rules: frozenset[str],
    ):
        self.config, self.parser, self.nudges, self.append = config, parser, nudges, append
        self.text_calls, self.rules = text_calls, rules

    def read(self, reply: Reply, answering: bool) -> Asked | None:
        """(message, calls, native) of a reply that can be used (no calls: an answer); None
        when the model was told why it cannot be. An answer where one is due (`answering`)
        ends the run completed."""
        if answering and reply.content.strip():  # TOOL_SET=tiny: its answer ends the task
            self.append(assistant_message(reply, []))
            raise Completed(final_text(reply.content))
        if reply.finish_reason == CUT_REPEATING:
            self.append(assistant_message(reply, []))  # kept to one copy of the loop
            self.nudges.push(NUDGE_REPEATING, "the model keeps repeating itself")
            return None
        made_up = self.text_calls() and RESULT_TAG in reply.content
        if made_up:  # results a small model writes for its own actions: made up, not kept
            reply.content = before_results(reply.content)
        try:
            calls, native = self.parser.parse(reply)
        except FormatError as exc:
            self.append(assistant_message(reply, []))
            self.nudges.reprompt(str(exc))
            return None
        message = assistant_message(reply, calls if native else [])
        if not calls and made_up:
            self.append(message)
            self.nudges.reprompt(MADE_UP_RESULTS)
            return None
        if not calls and self.text_calls() and "cut_in_block" in self.rules and cut_in_block(reply):
            self.append(message)
            self.nudges.push(
                cut_in_block_nudge(self.config.llm_max_tokens),
                "the model's replies keep being cut off at their length limit",
                "the reply was cut off inside a code block; asking for it again, shorter",
            )
            return None
        return message, calls, native
