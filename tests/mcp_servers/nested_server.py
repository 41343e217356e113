"""A real MCP server whose one tool takes nested arguments (an object holding an object and a
list), as MCP servers often do: the schema FastMCP-style servers send uses $defs and $ref."""

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

app = MCPServer("nested")


class Where(BaseModel):
    field: str
    equals: int


@app.tool()
def find(where: Where, columns: list[str]) -> dict:
    """Find the records whose field equals a number; return the columns asked for."""
    return {"matched": f"{where.field} = {where.equals}", "columns": columns}


if __name__ == "__main__":
    app.run()
