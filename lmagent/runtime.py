"""What every front end sets up once per process: the model probe and the profile chosen from
it, MCP servers, the vision tool, the sandbox services, and the tool set each run is offered."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from lmagent.core.config import Config
from lmagent.llm.client import LLMClient, auth_headers, base_url
from lmagent.llm.embedded import kv_cache
from lmagent.llm.kvcache import PromptCache, server_cache
from lmagent.llm.probe import ModelInfo, probe_model, unreachable_message
from lmagent.llm.profile import Facts, choose_profile
from lmagent.llm.quirks import server_named, unsent_at_start
from lmagent.llm.tokens import estimate_tokens
from lmagent.llm.toolmode import choose as choose_tool_mode
from lmagent.sandbox.base import SandboxConfig
from lmagent.sandbox.select import sandbox_summary
from lmagent.subagents.tools import agent_toolset
from lmagent.tools.mcp import MCPManager, describe_command
from lmagent.tools.processes import process_lines
from lmagent.tools.registry import Services, Toolset
from lmagent.tools.toolset import SMALL_CONTEXT, kept_tools
from lmagent.tools.vision import vision_tool

SCHEDULER_RUNS_AUTO = "the scheduler (its tasks run in auto permission mode)"
ROOMY_WINDOW = 16384  # tokens: a window that holds a task's files and results comfortably


def unsandboxed_auto_refusal(
    config: Config, mode: str, what: str = "auto permission mode"
) -> str | None:
    """Why `what` may not start: in auto mode with the process backend every command would run
    unisolated on the host without anyone being asked. None when that is not so, or the user
    confirmed it (ALLOW_UNSANDBOXED_AUTO / --allow-unsandboxed-auto)."""
    if mode != "auto" or config.sandbox_backend != "process" or config.allow_unsandboxed_auto:
        return None
    return (
        f"{what} with SANDBOX_BACKEND=process would run every command unisolated on the host "
        "without asking; use a sandbox (SANDBOX_BACKEND=auto, with Docker or bubblewrap) or "
        "another permission mode, or confirm it with --allow-unsandboxed-auto "
        "(ALLOW_UNSANDBOXED_AUTO=true)"
    )


def unisolated_warning(config: Config) -> str | None:
    """What every front end's banner and status say when commands run without a sandbox."""
    if config.sandbox_backend != "process":
        return None
    if config.allow_unsandboxed_auto:
        return (
            "commands run unisolated on the host (SANDBOX_BACKEND=process), in auto mode "
            "without asking (ALLOW_UNSANDBOXED_AUTO=true)"
        )
    return (
        "commands run unisolated on the host (SANDBOX_BACKEND=process); auto mode is refused "
        "unless confirmed with ALLOW_UNSANDBOXED_AUTO=true"
    )


@contextlib.contextmanager
def shared_runtime(config: Config, runtime: Runtime | None = None) -> Iterator[Runtime]:
    """The one way a front end gets its Runtime: `runtime` when the caller already has one (it
    stays open), else one started here and closed when the block ends."""
    if runtime is not None:
        yield runtime
        return
    own = Runtime(config).start()
    try:
        yield own
    finally:
        own.close()


class Runtime:
    """Long-lived state of one process: shared by the REPL, one-shot runs, web and scheduler."""

    def __init__(self, config: Config, *, probe: bool = True):
        self.model = probe_model(config) if probe else ModelInfo()
        facts = Facts(self.model.parameters, self.model.context_length, self.model.source)
        self.profile = choose_profile(facts)
        # the settings in force: the profile's where the user left a setting at its default
        self.config = config = config.with_changes(**self.profile.settings(config))
        self.services = Services(config)
        self.tool_mode = choose_tool_mode(config, self.model)
        self.warnings: list[str] = []
        if not self.model.reachable:
            self.warnings.append(unreachable_message(config.llm_url))
        self.mcp: MCPManager | None = None
        if config.enable_mcp:
            self.mcp = MCPManager(config.workspace)
        self.prompts = self._keep_prompts()
        self.vision_model = self._choose_vision_model()
        if self.vision_model is not None:
            self.services.extra_tools.append(vision_tool(self.vision_model))

    def start(self) -> Runtime:
        """Start MCP servers (once per process) and check the context window."""
        if self.mcp is not None:
            self.mcp.start(self.config.mcp_start_timeout)
            self.services.extra_tools.extend(self.mcp.tools())
        self._check_context()
        return self

    def close(self) -> None:
        if self.prompts is not None:
            self.prompts.unregister(save=True)
        if self.mcp is not None:
            self.mcp.close()
        self.services.close()

    # ------------------------------------------------------------------ model

    @property
    def context_length(self) -> int | None:
        return self.model.context_length

    def _keep_prompts(self) -> PromptCache | None:
        """A user's llama.cpp server that keeps slots (--slot-save-path, one slot) keeps the
        prompt across processes, as the embedded server does (kvcache.py)."""
        if self.model.source != "llama.cpp":
            return None
        folder = kv_cache() / "servers"
        url = base_url(self.config.llm_url)
        headers = auth_headers(self.config.llm_api_key)
        cache = server_cache(url, folder, self.model.props, headers)
        return cache.register() if cache is not None else None

    def _choose_vision_model(self) -> str | None:
        setting = self.config.vision_enabled
        if setting == "false":
            return None
        models = self.model.vision_models
        if models:
            return self.config.llm_model if self.config.llm_model in models else models[0]
        if setting == "true":
            return self.config.llm_model or self.model.model_id or "default"
        return None

    def client(self) -> LLMClient:
        """A client for one run; a blank LLM_MODEL means the model the server has loaded."""
        client = LLMClient(self.config, model=self.config.llm_model or self.model.model_id)
        client.dropped_params |= unsent_at_start(self.model.supports_tools)
        self.tool_mode = choose_tool_mode(self.config, self.model)  # a run may have learned
        client.tool_mode = self.tool_mode.mode
        client.profile = self.profile.as_event(self.config)
        return client

    def _check_context(self) -> None:
        window = self.context_length
        if not window:
            return
        overhead = (
            estimate_tokens([{"role": "system", "content": json.dumps(self.toolset().schemas())}])
            + 800
        )
        if overhead > window * 0.5:
            self.warnings.append(
                f"the model's context window ({window} tokens) is too small for the system prompt "
                f"and tool definitions (~{overhead} tokens). In LM Studio, raise 'Context Length' "
                f"in the model's load settings ({ROOMY_WINDOW} or more) and reload the model."
            )
        if window < SMALL_CONTEXT and self.config.tool_set == "auto":
            self.warnings.append(f"small context window ({window}): offering a compact tool set")
        fix = getattr(server_named(self.model.source), "window_fix", "")
        if fix and window < ROOMY_WINDOW:
            how = "its default for a model not loaded yet" if self.model.window_assumed else "set"
            self.warnings.append(
                f"the server runs the model with a {window}-token window ({how}); prompts are "
                f"kept under it (a longer one would be cut without an error). For more: {fix}"
            )

    # ------------------------------------------------------------------ runs

    def toolset(self, depth: int = 0) -> Toolset:
        return agent_toolset(
            self.config, self.services, depth=depth, context_length=self.context_length
        )

    def run_options(self) -> dict:
        """Keyword arguments for lmagent.loop.run.run_agent shared by every front end."""
        return {
            "services": self.services,
            "toolset": self.toolset(),
            "client": self.client(),
            "context_length": self.context_length,
        }

    # ------------------------------------------------------------------ reporting

    def tool_set_names(self) -> list[str]:
        """The built-in tools TOOL_SET keeps (a sub-agent's report_result aside)."""
        kept = kept_tools(self.config.tool_set, self.context_length) or ()
        return [name for name in kept if name != "report_result"]

    def banner_lines(self, mode: str | None = None) -> list[str]:
        """Where and how the agent works, in two lines (`mode`: the permission mode, when the
        front end has one), then vision, MCP servers and warnings."""
        model = self.config.llm_model or self.model.name or "(the server's loaded model)"
        window = f"{self.context_length} tokens" if self.context_length else "unknown"
        permission = f" · permission mode {mode}" if mode else ""
        calls = self.tool_mode.describe() if self.model.reachable else "tool calls: not known yet"
        lines = [
            f"workspace {self.config.workspace} · sandbox {self.sandbox_description()}{permission}",
            f"model {model} at {self.config.llm_url} · context {window} · {calls}",
            self.profile.describe(self.config),
        ]
        if self.config.tool_set in ("compact", "tiny"):
            more = " (the others on demand)" if self.config.tool_set == "compact" else ""
            names = ", ".join(self.tool_set_names())
            lines.append(f"tool set {self.config.tool_set}: {names}{more}")
        isolated = self.config.sandbox_backend != "process"  # its mount point for .lmagent.md
        lines.extend(new_files_line(self.config.workspace, isolated))
        unisolated = unisolated_warning(self.config)
        if unisolated:
            lines.append(f"warning: {unisolated}")
        if self.vision_model:
            lines.append(f"vision via {self.vision_model}")
        if self.mcp is not None:
            for name, state in self.mcp.servers.items():
                lines.append(
                    f"MCP {name} (runs on the host: {describe_command(state.spec)}) — "
                    f"{state.status}{': ' + state.error if state.error else ''}"
                )
            if self.mcp.config_problem:
                lines.append(f"MCP config problem: {self.mcp.config_problem}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines

    def sandbox_description(self) -> str:
        return sandbox_summary(SandboxConfig.from_config(self.config))

    def status_lines(self, session_meta: dict | None = None, mode: str | None = None) -> list[str]:
        lines = self.banner_lines(mode)
        if session_meta:
            lines.append(
                f"session {session_meta['id']}: {session_meta.get('status')}, "
                f"{session_meta.get('tokens', 0)} tokens used, "
                f"{session_meta.get('last_tokens_per_second', 0)} tokens/s last reply"
            )
        lines.extend(f"process {line}" for line in process_lines(self.services))
        return lines


def new_files_line(workspace: Path, sandboxed: bool) -> list[str]:
    """A line saying what LMAgent will keep in a folder that has none of it yet (it never
    writes into the user's folder without a word); `sandboxed`: a Docker or bwrap sandbox,
    which makes `.lmagent.md` (its mount point) where there is none."""
    data, notes = workspace / ".lmagent", workspace / ".lmagent.md"
    new = [f"{data.name}/ (sessions, checkpoints)"] if not data.exists() else []
    if sandboxed and not notes.exists():
        new.append(f"{notes.name} (project notes read into every prompt; read-only to commands)")
    return [f"new here: LMAgent keeps {' and '.join(new)} in {workspace}"] if new else []
