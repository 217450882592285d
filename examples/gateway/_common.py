"""Shared by the example MCP servers: every call a server receives is appended to $CALLS_LOG, so a test can
prove that a refused call never reached the server."""

from __future__ import annotations

import json
import os


def record(server: str, tool: str, arguments: dict) -> None:
    path = os.environ.get("CALLS_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"server": server, "tool": tool, "arguments": arguments}) + "\n")
            f.flush()
            os.fsync(f.fileno())
