"""The model profile: how the agent works with the model a server has loaded (the tools it is
offered, the form its calls take, its sampling, its reply cap and the window it plans for),
chosen from what the server reports (probe.py), on any server, with no settings.

A small model (at most SMALL_PARAMETERS billion parameters) gets what --embedded measured for
the 1.5B model it bundles; a tiny one what it measured for SmolLM2-135M; a model of unknown
size, or a larger one, the defaults. Only settings the user left at their default change
(TOOL_SET, TOOL_CALL_MODE, LLM_TEMPERATURE, LLM_MAX_TOKENS): each stays the user's to set. A
value set to its own default cannot be told from one left unset.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmagent.core.config import Config

SMALL_PARAMETERS = 4.0  # billions: a model this size or smaller gets the small profile
TINY_PARAMETERS = 0.5  # billions: this size or smaller, the tiny one
# a small model can ramble until its context is full: each reply capped
REPLY_CAP = 1024


@dataclass(frozen=True)
class Facts:
    """What the profile is chosen from."""

    parameters: float | None = None  # billions; None: not reported
    context_length: int | None = None  # the window the server runs the model with
    source: str = ""  # which kind of server (quirks.SERVERS)

    def describe(self) -> str:
        size = _size(self.parameters) if self.parameters else "size unknown"
        window = f"{round(self.context_length / 1024)}k context" if self.context_length else ""
        return ", ".join(part for part in (size, window) if part)


@dataclass(frozen=True)
class Profile:
    """How the agent works with one model, and the facts that chose it."""

    name: str  # tiny | small | default
    tool_set: str  # TOOL_SET it asks for
    tool_call_mode: str  # TOOL_CALL_MODE it asks for
    temperature: float | None  # LLM_TEMPERATURE it asks for; None: as set
    max_tokens: int  # LLM_MAX_TOKENS it asks for; 0: the server's own
    facts: Facts = Facts()

    def settings(self, config: Config) -> dict:
        """The changes to `config` this profile makes: only to settings left at their default."""
        wanted = {
            "tool_set": self.tool_set,
            "tool_call_mode": self.tool_call_mode,
            "llm_temperature": self.temperature,
            "llm_max_tokens": self.max_tokens,
        }
        return {
            name: value
            for name, value in wanted.items()
            if value is not None and _is_default(config, name) and value != getattr(config, name)
        }

    def describe(self, config: Config) -> str:
        """One line for the banner: the profile, what it was chosen from, and what it does."""
        if self.name == "default":
            return f"profile: default ({self.facts.describe()})"
        doing = [f"{config.tool_set} tools"]
        if config.tool_call_mode == "text":
            doing.append("calls as text")
        doing.append(f"temperature {config.llm_temperature:g}")
        if config.llm_max_tokens:
            doing.append(f"replies up to {config.llm_max_tokens} tokens")
        return f"profile: {self.name} model ({self.facts.describe()}) — {', '.join(doing)}"

    def as_event(self, config: Config) -> dict:
        """The profile for --json and the web UI: its name, the facts, the settings in force."""
        return {
            "name": self.name,
            "parameters_b": self.facts.parameters,
            "context_length": self.facts.context_length,
            "server": self.facts.source,
            "tool_set": config.tool_set,
            "tool_call_mode": config.tool_call_mode,
            "temperature": config.llm_temperature,
            "max_tokens": config.llm_max_tokens,
        }


def choose_profile(facts: Facts) -> Profile:
    """The profile for a model: tiny, small, or (larger, or of unknown size) the defaults."""
    parameters = facts.parameters
    if parameters is None or parameters > SMALL_PARAMETERS:
        return Profile("default", "auto", "auto", None, 0, facts=facts)
    if parameters <= TINY_PARAMETERS:
        # measured with SmolLM2-135M: offered 30 tools at temperature 0.65 it picks one at
        # random; greedy, with files and shell only, it does one step and answers. Its chat
        # template knows no tools: TOOL_CALL_MODE=auto finds the form (constrained, or text)
        return Profile("tiny", "tiny", "auto", 0.0, REPLY_CAP, facts=facts)
    # measured with Qwen2.5-Coder-1.5B: greedy sampling follows the call format more
    # reliably; llama.cpp returned native tool_calls for 0 of 24 of its requests (it writes
    # its calls as text) and the native schemas cost 2,875 tokens: calls as text, six core
    # tools described in the prompt and the others on demand
    return Profile("small", "compact", "text", 0.0, REPLY_CAP, facts=facts)


def _is_default(config: Config, name: str) -> bool:
    default = type(getattr(config, name))(config.default(name))
    return getattr(config, name) == default


def _size(parameters: float) -> str:
    if parameters < 1:
        return f"{parameters * 1000:.0f}M"
    return f"{parameters:.1f}B".replace(".0B", "B")
