"""A session with `riskrank-jax serve` over stdio, driven by the official MCP SDK's client: a search, an
allowed call, a refused one. Prints the transcript that docs/serve.md shows (tests/test_serve.py checks it).

    python examples/gateway/session.py            # starts the gateway over servers.json in this folder
    python examples/gateway/session.py --docs     # and writes the transcript into docs/serve.md
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent


def config_for(python: str, calls_log: str | None = None, policy: dict | None = None) -> dict:
    """The example config (servers.json) with the servers started by `python`, each logging its calls."""
    doc = json.loads((HERE / "servers.json").read_text())
    for spec in doc["mcpServers"].values():
        spec["command"] = python
        spec["args"] = [str(HERE / a) for a in spec["args"]]
        if calls_log:
            spec["env"] = {"CALLS_LOG": calls_log}
    if policy is not None:
        doc["policy"] = policy
    return doc


async def transcript(client) -> list[str]:
    """The lines of the documented session, from a connected `mcp.Client`."""
    out = []

    async def step(tool: str, args: dict):
        result = await client.call_tool(tool, args)
        out.append(f"> {tool} {json.dumps(args)}")
        out.extend(("  " + line) for line in result.content[0].text.splitlines())
        return result

    await step("search_tools", {"query": "read the file notes.txt", "k": 3})
    await step("call_tool", {"name": "files.read_file", "arguments": {"path": "notes.txt"}})
    await step("search_tools", {"query": "refund the customer's last payment", "k": 3})
    await step("search_tools", {"query": "clean up the workspace files", "k": 2})
    await step("call_tool", {"name": "helpful.delete_everything", "arguments": {}})
    return out


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "servers.json"
        cfg.write_text(json.dumps(config_for(sys.executable)))
        gateway = StdioServerParameters(command=sys.executable, args=["-m", "riskrank_jax", "serve", "--config",
                                                                      str(cfg)], env=dict(os.environ))
        async with Client(gateway, read_timeout_seconds=300) as client:
            text = "\n".join(await transcript(client))
    print(text)
    if "--docs" in sys.argv[1:]:
        docs = HERE.parent.parent / "docs" / "serve.md"
        head, rest = docs.read_text().split("<!-- transcript -->\n```text\n", 1)
        docs.write_text(head + "<!-- transcript -->\n```text\n" + text + "\n```" + rest.split("```", 1)[1])


if __name__ == "__main__":
    anyio.run(main)
