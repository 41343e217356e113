"""MCP servers as tools, through the official `mcp` SDK.

Servers come from `<workspace>/.lmagent/mcp.json` (`{"mcpServers": {name: {command, args, env}}}`
for stdio, `{url}` for streamable HTTP). They are started together, once per process, on a
private asyncio loop thread and reused by every run. A server that fails to start, crashes or
hangs is reported once and its tools are left out; the agent keeps working. Calls are never
retried (they may have had side effects).

Start-up is bounded in all (MCP_START_TIMEOUT, 30 s by default): a server that has not listed
its tools by then is stopped and reported failed. Every process a stdio server starts carries a
mark in its environment, so `close()` can make sure none of them outlives the agent: the SDK
stops each server (stdin closed, then its process group terminated and killed), then anything
left with the mark is killed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import re
import secrets
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

from lmagent.core.files import atomic_write, read_json
from lmagent.tools.registry import Tool, ToolContext, ToolError

STOP_TIMEOUT = 10.0  # seconds close() gives the servers to stop before killing what is left
CALL_TIMEOUT = 60.0
OWNER_VARIABLE = "LMAGENT_MCP_OWNER"  # in the environment of every stdio server process


@dataclass
class ServerState:
    name: str
    spec: dict
    status: str = "stopped"  # starting | ready | failed | crashed
    error: str = ""
    tools: list = field(default_factory=list)  # mcp Tool definitions
    client: object = None
    scope: object = None  # the anyio CancelScope of the connection: cancelling it stops the server
    stopping: bool = False  # close() was called (read and written on the loop thread only)
    settled: threading.Event = field(default_factory=threading.Event)  # no longer "starting"
    ended: threading.Event = field(default_factory=threading.Event)  # connection and process gone
    lock: threading.Lock = field(default_factory=threading.Lock)

    def settle(self, status: str, error: str = "") -> bool:
        """Leave "starting" for `status` (ready or failed); False when it already had."""
        with self.lock:
            if self.status != "starting":
                return False
            self.status, self.error = status, error
        self.settled.set()
        return True

    def stop(self) -> None:
        """Cancel the connection (on the loop thread): the SDK stops the server process."""
        self.stopping = True
        if self.scope is not None:
            self.scope.cancel()

    def describe(self) -> str:
        if self.status == "ready":
            names = ", ".join(t.name for t in self.tools) or "no tools"
            return f"{self.name}: ready ({names})"
        return f"{self.name}: {self.status}" + (f" — {self.error}" if self.error else "")


def load_specs(workspace: Path) -> tuple[dict[str, dict], str]:
    """Server specs from mcp.json, and a problem message ('' when fine or absent)."""
    path = Path(workspace) / ".lmagent" / "mcp.json"
    if not path.exists():
        return {}, ""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        return {}, f'{path} is not valid: expected {{"mcpServers": {{name: {{command, args}}}}}}'
    specs, problems = {}, []
    for name, spec in data["mcpServers"].items():
        if isinstance(spec, dict) and (spec.get("command") or spec.get("url")):
            specs[name] = spec
        else:
            problems.append(f"server {name!r} needs a command or a url")
    return specs, "; ".join(problems)


def describe_command(spec: dict) -> str:
    if spec.get("url"):
        return spec["url"]
    return " ".join([spec["command"], *[str(a) for a in spec.get("args", [])]])


def tool_name(server: str, tool: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp_{server}_{tool}")[:64]


class MCPManager:
    """Starts the configured servers once and exposes their tools as registry Tools."""

    def __init__(self, workspace: Path, call_timeout: float = CALL_TIMEOUT):
        self.workspace = Path(workspace)
        self.call_timeout = call_timeout
        specs, self.config_problem = load_specs(self.workspace)
        self.servers = {name: ServerState(name, spec) for name, spec in specs.items()}
        self._mark = secrets.token_hex(8)  # OWNER_VARIABLE's value in this manager's servers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float) -> None:
        """Start every server at once; after `timeout` s at most, each is ready or failed (one
        that hung is stopped)."""
        if not self.servers:
            return
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout  # asyncio's clock: loop.time() is monotonic
        late = f"did not start within {timeout:g} s; stopped"
        for state in self.servers.values():
            state.status = "starting"
            asyncio.run_coroutine_threadsafe(self._serve(state, deadline, late), self._loop)
        try:
            for state in self.servers.values():
                state.settled.wait(max(0.0, deadline - time.monotonic()))
        except BaseException:  # Ctrl+C while waiting: leave nothing running
            self.close()
            raise
        for state in self.servers.values():
            state.settle("failed", late)

    async def _serve(self, state: ServerState, deadline: float, late: str) -> None:
        """Own one server connection for its whole life (anyio scopes stay in one task). Its
        scope ends it: at `deadline` unless it is ready by then, or when close() cancels it."""
        import anyio
        from mcp import Client

        try:
            with anyio.CancelScope(deadline=deadline) as state.scope:
                if state.stopping:
                    state.scope.cancel()
                async with Client(self._target(state.spec)) as client:
                    listing = await client.list_tools()
                    state.scope.deadline = math.inf
                    state.client, state.tools = client, list(listing.tools)
                    if state.settle("ready"):
                        await anyio.sleep_forever()
            if state.scope.cancelled_caught:
                state.settle("failed", late)
        except Exception as exc:  # the SDK raises exception groups from its task groups
            if not state.settle("failed", _describe_exception(exc)) and state.status == "ready":
                state.status, state.error = "crashed", _describe_exception(exc)
        finally:
            state.client = None
            state.ended.set()

    def _target(self, spec: dict):
        """What the SDK connects to: a URL, or a command whose processes carry our mark."""
        if spec.get("url"):
            return spec["url"]
        from mcp.client.stdio import StdioServerParameters

        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        return StdioServerParameters(
            command=spec["command"],
            args=[str(a) for a in spec.get("args", [])],
            env={**env, OWNER_VARIABLE: self._mark},
            cwd=str(self.workspace),
        )

    def close(self) -> None:
        """Stop every server, wait for them (STOP_TIMEOUT s at most in all), then kill any
        process of theirs still running (a server's children, a server that would not stop)."""
        if self._loop is None:
            return
        for state in self.servers.values():
            self._loop.call_soon_threadsafe(state.stop)
        deadline = time.monotonic() + STOP_TIMEOUT
        for state in self.servers.values():
            state.ended.wait(max(0.0, deadline - time.monotonic()))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop = None
        kill_marked_processes(self._mark)

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[Tool]:
        result = []
        for state in self.servers.values():
            if state.status != "ready":
                continue
            for definition in state.tools:
                result.append(self._make_tool(state, definition))
        return result

    def _make_tool(self, state: ServerState, definition) -> Tool:
        schema = dict(getattr(definition, "input_schema", None) or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        schema.setdefault("required", [])

        def call(ctx: ToolContext, **arguments) -> dict:
            return self.call(state.name, definition.name, arguments)

        description = (definition.description or definition.name).strip()
        return Tool(
            name=tool_name(state.name, definition.name),
            function=call,
            description=f"[MCP {state.name}] {description}"[:1000],
            parameters=schema,
            changes_things=True,  # unknown side effects: normal mode asks
        )

    def call(self, server: str, tool: str, arguments: dict) -> dict:
        state = self.servers[server]
        if state.status != "ready" or state.client is None:
            raise ToolError(f"MCP server {server} is not available ({state.status}: {state.error})")
        future = asyncio.run_coroutine_threadsafe(
            state.client.call_tool(tool, arguments, read_timeout_seconds=self.call_timeout),
            self._loop,
        )
        try:
            result = future.result(timeout=self.call_timeout + 5)
        except FutureTimeout:
            future.cancel()
            raise ToolError(f"MCP tool {tool} timed out after {self.call_timeout:.0f} s") from None
        except Exception as exc:
            text = _describe_exception(exc)
            if "timed out" in text.lower():
                raise ToolError(
                    f"MCP tool {tool} timed out after {self.call_timeout:.0f} s (not retried)"
                ) from None
            if state.status == "ready" and "closed" in text.lower():
                state.status, state.error = "crashed", text
            raise ToolError(
                f"MCP server {server} failed during {tool}: {text} (not retried)"
            ) from None
        return convert_result(result, self.workspace)

    def status_lines(self) -> list[str]:
        lines = [state.describe() for state in self.servers.values()]
        if self.config_problem:
            lines.append(f"mcp.json: {self.config_problem}")
        return lines


def convert_result(result, workspace: Path) -> dict:
    """An MCP CallToolResult as a tool result: text, structured content, and images saved under
    `.lmagent/mcp_images/` (readable, so the vision tool can show them to a vision model;
    base64 in the context would only waste it)."""
    texts, images = [], []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)
        elif kind == "image":
            images.append(save_image(workspace, item.mime_type, item.data))
        else:
            texts.append(json.dumps(item.model_dump(mode="json"), ensure_ascii=False)[:4000])
    output: dict = {"success": not result.is_error, "content": "\n".join(texts)}
    if result.structured_content is not None:
        output["structured"] = result.structured_content
    if images:
        output["images"] = images
        output["note"] = "images were saved; call the vision tool (when offered) on their paths"
    if result.is_error:
        output["error"] = output["content"] or "the MCP tool reported an error"
    return output


IMAGE_SUFFIXES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


def save_image(workspace: Path, mime_type: str, data: str) -> dict:
    """Write one base64 image from an MCP result; its workspace-relative path, or why not."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (ValueError, TypeError):
        return {"mime_type": mime_type, "error": "the server sent an image that is not base64"}
    folder = workspace / ".lmagent" / "mcp_images"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
    path = folder / (name + IMAGE_SUFFIXES.get(mime_type, ".bin"))
    atomic_write(path, raw)
    relative = path.relative_to(workspace).as_posix()
    return {"mime_type": mime_type, "bytes": len(raw), "path": relative}


def kill_marked_processes(mark: str) -> None:
    """Kill every process whose environment has OWNER_VARIABLE=mark, and wait for them."""
    import psutil

    marked = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(OWNER_VARIABLE) == mark:
                process.kill()
                marked.append(process)
    psutil.wait_procs(marked, timeout=5)


def _describe_exception(exc: BaseException) -> str:
    while getattr(exc, "exceptions", None):  # unwrap exception groups (Python 3.10 has no type)
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]
