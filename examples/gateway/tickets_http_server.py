"""A ticket tracker over streamable HTTP on 127.0.0.1:PORT (argv[1]): search, read and close tickets."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import record  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

server = MCPServer("tickets")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def search_tickets(text: str) -> list[str]:
    """Search the support tickets by text."""
    record("tickets", "search_tickets", {"text": text})
    return ["T-1: printer on fire"]


@server.tool()
def close_ticket(ticket_id: str) -> str:
    """Close a support ticket."""
    record("tickets", "close_ticket", {"ticket_id": ticket_id})
    return f"closed {ticket_id}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
