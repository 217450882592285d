"""A file server over stdio (the official SDK's MCPServer): read, list, write and delete in a workspace, and a
`load_plugins` tool that adds `get_forecast` and announces it with list_changed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import record  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

server = MCPServer("files")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def read_file(path: str) -> str:
    """Read the complete contents of a text file from the workspace."""
    record("files", "read_file", {"path": path})
    return f"contents of {path}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def list_directory(path: str = ".") -> list[str]:
    """List the files and folders in a workspace directory."""
    record("files", "list_directory", {"path": path})
    return ["notes.txt", "report.md"]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def search_files(pattern: str) -> list[str]:
    """Search the workspace for files whose names match a pattern."""
    record("files", "search_files", {"pattern": pattern})
    return ["notes.txt"]


@server.tool()
def write_file(path: str, content: str) -> str:
    """Write text to a file in the workspace, creating it or overwriting it."""
    record("files", "write_file", {"path": path})
    return f"wrote {len(content)} characters to {path}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_file(path: str) -> str:
    """Delete a file from the workspace permanently."""
    record("files", "delete_file", {"path": path})
    return f"deleted {path}"


def get_forecast(city: str) -> str:
    """Get the weather forecast for a city for the next three days."""
    record("files", "get_forecast", {"city": city})
    return f"sunny in {city}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
async def load_plugins(ctx: Context) -> str:
    """Load the workspace plugins (adds the tools they provide)."""
    record("files", "load_plugins", {})
    if all(t.name != "get_forecast" for t in await server.list_tools()):
        server.add_tool(get_forecast, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.notify_tools_changed()  # 2026-07-28 clients (subscriptions/listen)
    try:
        await ctx.session.send_tool_list_changed()  # 2025-era clients
    except Exception:  # noqa: BLE001 - a modern connection has no legacy notification channel
        pass
    return "loaded 1 plugin"


if __name__ == "__main__":
    server.run()
