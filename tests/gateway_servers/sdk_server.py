"""An MCP server on the SDK's MCPServer without ``subscriptions/listen`` (as the published Python servers are
built: it negotiates the newest revision and answers listen with "Method not found"), with a tool that
reports progress and one that waits until it is cancelled: ``python sdk_server.py CALLS_LOG``.

Why: the gateway's listen fallback, progress relay and cancellation are tested without the network.
"""

import json
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

CALLS_LOG = sys.argv[1]
server = MCPServer("nolisten", subscriptions=False)
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)  # robustness tests, not the risk gate


def record(entry: dict) -> None:
    with open(CALLS_LOG, "a") as f:
        f.write(json.dumps({"server": "nolisten", **entry}) + "\n")


@server.tool(annotations=READ_ONLY)
async def count_slowly(n: int, ctx: Context) -> str:
    """Count from 1 to n, one step at a time, reporting progress."""
    record({"tool": "count_slowly", "arguments": {"n": n}})
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1} of {n}")
        await anyio.sleep(0.02)
    return f"counted to {n}"


@server.tool(annotations=READ_ONLY)
async def wait_for_approval(ticket: str) -> str:
    """Wait until the change ticket is approved by a reviewer."""
    record({"tool": "wait_for_approval", "arguments": {"ticket": ticket}})
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        record({"cancelled": "wait_for_approval"})
        raise
    return "approved"


@server.tool(annotations=READ_ONLY)
def world_clock(city: str) -> str:
    """Tell the current time in a city."""
    record({"tool": "world_clock", "arguments": {"city": city}})
    return f"it is noon in {city}"


if __name__ == "__main__":
    server.run()
