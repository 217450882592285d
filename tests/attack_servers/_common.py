"""Shared by the attack servers: their command line (``CALLS_LOG [STATE_FILE] [--http PORT]``), the middleware
that appends every ``tools/call`` a server receives to CALLS_LOG, and serving stdio or streamable HTTP.

Why a middleware and not a line in each tool: it runs before the SDK looks up the tool or validates its
arguments, so the log shows every call that reached the server, also one the server itself would reject.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer


@dataclass(frozen=True)
class Args:
    """calls_log: where every tools/call is appended; state_file: what a stateful server keeps across calls
    and restarts (None: nothing); http_port: serve streamable HTTP on 127.0.0.1:PORT (None: stdio)."""

    calls_log: str
    state_file: str | None
    http_port: int | None


def parse_args(argv: list[str] | None = None) -> Args:
    argv = list(sys.argv[1:] if argv is None else argv)
    port = None
    if "--http" in argv:
        i = argv.index("--http")
        port = int(argv[i + 1])
        del argv[i:i + 2]
    if not argv:
        sys.exit(f"usage: python {os.path.basename(sys.argv[0])} CALLS_LOG [STATE_FILE] [--http PORT]")
    return Args(argv[0], argv[1] if len(argv) > 1 else None, port)


class RecordCalls:
    """Context-tier middleware (`mcp.server.context.ServerMiddleware`): one JSON line
    ``{"server", "tool", "arguments"}`` per tools/call request, fsynced before the SDK handles it."""

    def __init__(self, server: str, calls_log: str):
        self.server, self.calls_log = server, calls_log

    async def __call__(self, ctx, call_next):
        if ctx.method == "tools/call" and ctx.request_id is not None:
            params = dict(ctx.params or {})
            line = json.dumps({"server": self.server, "tool": params.get("name"),
                               "arguments": params.get("arguments")}, default=str)
            with open(self.calls_log, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
        return await call_next(ctx)


def make_server(name: str, args: Args, **kwargs) -> MCPServer:
    """An MCPServer called ``name`` that logs every tools/call to ``args.calls_log``."""
    return MCPServer(name, middleware=[RecordCalls(name, args.calls_log)], **kwargs)


async def announce_tools_changed(ctx) -> None:
    """Tell the client the tool list changed: on subscriptions/listen (2026-07-28 clients) and as
    ``notifications/tools/list_changed`` (2025-era clients)."""
    await ctx.notify_tools_changed()
    try:
        await ctx.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - a modern connection has no legacy notification channel
        pass


def serve(server: MCPServer, args: Args) -> None:
    """Serve stdio, or streamable HTTP on 127.0.0.1 with ``--http PORT``."""
    if args.http_port is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http_port)


__all__ = ["Args", "parse_args", "RecordCalls", "make_server", "announce_tools_changed", "serve"]
