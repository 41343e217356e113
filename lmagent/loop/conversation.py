"""The conversation with the model: what it is sent (the system prompt, then the history with
its calls paired), one reply at a time streamed as events, the tokens counted, the model's
speeds said, and the history compacted before it overflows the context.

The run (lmagent.loop.run) decides what a reply means; this is how the reply is had.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lmagent.core.config import Config
from lmagent.llm.client import Callbacks, ContextOverflow, LLMClient, LLMError, LLMStopped, Reply
from lmagent.llm.tokens import estimate_tokens
from lmagent.loop.compaction import Compactor
from lmagent.loop.history import PairedHistory
from lmagent.loop.policy import reply_rule
from lmagent.loop.progress import Speeds, Ticker
from lmagent.loop.prompts import progress_message, system_prompt
from lmagent.sessions.store import Session
from lmagent.tools.files import existing_paths
from lmagent.tools.registry import ToolContext, Toolset

Emit = Callable[..., None]  # emit(kind, **data): an event of the run
SUMMARY_TOKENS = 1000  # room left for the summary that replaces the head


class Conversation:
    """One run's exchange with the model over its session."""

    def __init__(
        self,
        client: LLMClient,
        toolset: Toolset,
        ctx: ToolContext,
        emit: Emit,
        rules: frozenset[str],
        context_length: int | None = None,
        kept: Callable[[], str] = lambda: "",
        enough: Callable[[str], int | None] | None = None,
    ):
        self.client, self.toolset, self.ctx = client, toolset, ctx
        self.kept = kept  # what a compaction's summary keeps besides the progress recorded
        self.enough = enough  # where a reply in text form may stop being read (client.chat)
        self.emit, self.rules = emit, rules
        self.session: Session = ctx.session
        self.depth, self.stop = ctx.depth, ctx.stop
        self.compactor = _compactor(ctx.config, context_length)
        self.paired = PairedHistory()
        self.speeds = Speeds()  # the model's, as the server measures them
        self.tokens = 0  # used by this run (the session's meta counts its whole life)
        self.prompt_overhead = 0  # tokens the server counts beyond our estimate (tool schemas)
        self._system: tuple[str, dict] | None = None  # (call form, message)

    # ------------------------------------------------------------------ what is sent

    def new_step(self) -> None:
        """The system prompt is made again for a step: progress and context files may change."""
        self._system = None

    def system_message(self) -> dict:
        """Made once per step, and again only if the client fell back to another call form."""
        form = self.client.tool_form
        if self._system is None or self._system[0] != form:
            prompt = system_prompt(self.ctx.workspace, self.session, self.toolset, form)
            self._system = (form, {"role": "system", "content": prompt})
        return self._system[1]

    def messages(self) -> list[dict]:
        """What the model is sent: the system prompt, then the history with calls paired."""
        return [self.system_message(), *self.paired(self.session)]

    def reply_rule(self) -> str:
        """What the next reply must do: "call", "answer" or "" (lmagent.loop.policy)."""
        if "act_then_answer" not in self.rules:
            return ""
        tool_set, form = self.client.config.tool_set, self.client.tool_form
        return reply_rule(tool_set, form, self.session.history)

    def offered_schemas(self) -> list[dict]:
        """The tools' schemas for the request: with constrained calls, a path that must exist
        is chosen among the workspace's own (a small model cannot invent one)."""
        if self.client.tool_form == "constrained":
            return self.toolset.choosing(existing_paths(self.ctx.workspace))
        return self.toolset.schemas() if self.client.uses_tool_schemas else []

    # ------------------------------------------------------------------ a reply

    def query(self, tools: bool, temperature: float | None, unlike: Sequence[str] = ()) -> Reply:
        """One reply (stopped early if it begins as one of `unlike` does: client.chat); a context
        overflow compacts the conversation and retries exactly once."""
        try:
            return self.ask(tools, temperature, unlike)
        except ContextOverflow:
            self.emit("status", message="the context is full; compacting and retrying once")
            if not self.compact(force=True):
                raise
            return self.ask(tools, temperature, unlike)

    def ask(self, tools: bool, temperature: float | None, unlike: Sequence[str] = ()) -> Reply:
        messages = self.messages()
        schemas = self.offered_schemas() if tools else []
        must = self.reply_rule() if schemas else ""
        sent_estimate = estimate_tokens(messages[:1]) + self.session.history_tokens
        slow = self.speeds.slow_step(sent_estimate + self.prompt_overhead)
        if slow and not self.depth:
            self.emit("status", message=slow)
        shown: list[str] = []
        with Ticker(self.emit, "prompt", tokens=sent_estimate + self.prompt_overhead) as reading:
            try:
                reply = self.client.chat(
                    messages,
                    schemas,
                    self.callbacks(reading, shown),
                    self.stop,
                    must,
                    temperature=temperature,
                    enough=self.enough if self.client.tool_form == "text" else None,
                    unlike=unlike,
                )
            except (LLMError, LLMStopped):  # interrupted, or failed, mid-reply
                if shown:
                    self.count_tokens(Reply(raw_content="".join(shown)), sent_estimate)
                raise
        self.count_tokens(reply, sent_estimate)
        self.tell_speeds(reply, sent_estimate + self.prompt_overhead)
        return reply

    def callbacks(self, reading: Ticker, shown: list[str]) -> Callbacks:
        """What the client reports, as events; `reading` ticks until the first token; what
        streams is kept in `shown` too (counted if the reply breaks off)."""

        def streamed(kind: str) -> Callable[[str], None]:
            def emit(text: str) -> None:
                shown.append(text)
                self.emit(kind, text=text)

            return emit

        return Callbacks(
            on_token=streamed("token"),
            on_thinking=streamed("thinking"),
            on_status=lambda text: self.emit("status", message=text),
            on_progress=reading.update,
            on_first_token=reading.stop,
        )

    def tell_speeds(self, reply: Reply, prompt_estimate: int) -> None:
        """After the first reply whose server measured the model's speeds: say them."""
        if not reply.timings:
            return
        prompt = int((reply.usage or {}).get("prompt_tokens") or 0) or prompt_estimate
        line = self.speeds.measured(reply.timings, prompt, reply.completion_tokens)
        if line and not self.depth:
            speeds = {"reading": self.speeds.reading, "writing": self.speeds.writing}
            self.emit("status", message=line, tokens_per_second=speeds)

    def count_tokens(self, reply: Reply, sent_estimate: int) -> None:
        usage = reply.usage or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        total = usage.get("total_tokens") or prompt + int(usage.get("completion_tokens") or 0)
        if not total:
            total = sent_estimate + reply.completion_tokens
        if prompt:
            self.prompt_overhead = max(0, prompt - sent_estimate)
        self.tokens += int(total)
        self.session.meta["tokens"] = self.session.meta.get("tokens", 0) + int(total)
        if reply.elapsed_s:  # not for a reply that broke off
            self.session.meta["last_tokens_per_second"] = round(reply.tokens_per_second, 1)

    # ------------------------------------------------------------------ compaction

    def context_tokens(self) -> int:
        """Estimated prompt size, corrected by what the server last counted beyond our estimate."""
        system = estimate_tokens([self.system_message()])
        return system + self.session.history_tokens + self.prompt_overhead

    def compact_if_needed(self) -> None:
        if self.compactor.too_big(self.context_tokens()):
            self.compact()

    def compact(self, force: bool = False) -> bool:
        """Summarise the head of the history so the context drops to about half the threshold
        (or, after the server reported an overflow, the history to about half its size)."""
        history_tokens = self.session.history_tokens
        if force:  # the server's real limit is below what we assumed: halve the history
            budget = history_tokens // 2 - SUMMARY_TOKENS
        else:
            fixed = self.context_tokens() - history_tokens
            budget = self.compactor.threshold // 2 - fixed - SUMMARY_TOKENS
        plan = self.compactor.compact(self.session.history, max(0, budget))
        if plan is None:
            return False
        end, summary = plan
        # the calls that recorded the progress are summarised, and those that wrote the files
        kept = [text for text in (progress_message(self.session), self.kept()) if text]
        summary = {**summary, "content": "\n\n".join([summary["content"], *kept])}
        before = self.context_tokens()
        self.session.record_compaction(0, end, summary)
        self.emit(
            "status", message=f"compacted the context: ~{before} → ~{self.context_tokens()} tokens"
        )
        return True


def _compactor(config: Config, context_length: int | None) -> Compactor:
    """Compaction from the configured threshold, or earlier in a small loaded window."""
    threshold = config.summarization_threshold
    if context_length:
        threshold = min(threshold, int(context_length * 0.7))
    return Compactor(threshold)
