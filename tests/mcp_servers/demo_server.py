"""A small real MCP server used by the tests: echo, add, an image, a hang and a crash.

Speaks stdio, or streamable HTTP on 127.0.0.1 with `--http PORT`."""

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Image, MCPServer

app = MCPServer("demo")
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def add(a: int, b: int) -> dict:
    """Add two integers."""
    return {"sum": a + b}


@app.tool()
async def hang(seconds: float = 3600) -> str:
    """Never answers in time."""
    await asyncio.sleep(seconds)
    return "late"


@app.tool()
def picture() -> Image:
    """A 1x1 PNG."""
    return Image(data=PIXEL, format="png")


@app.tool()
def crash() -> str:
    """Exit the server process abruptly."""
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
