"""The OpenAI Agents SDK with riskrank-jax, without network: start examples/gateway/files_server.py through the
SDK's MCPServerStdio, rank its tools, list them again through a risk-aware tool_filter, print which tools are
blocked and which need approval, then run the search function tool for a few requests.

    python examples/openai_agents_filter.py

Why: the filter and the approval map come from each tool's assessed risk level, not a hand-kept list.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from riskrank_jax import RankConfig
from riskrank_jax.integrations.openai_agents import (
    RiskPolicyForAgents,
    search,
    search_tool,
)

SERVER = Path(__file__).resolve().parent / "gateway" / "files_server.py"
REQUESTS = ["show me what is in the notes file", "which files are in the workspace folder",
            "find the files named report"]
K = 3


def server_params() -> dict:
    """How MCPServerStdio starts the example file server (this interpreter, no network)."""
    return {"command": sys.executable, "args": [str(SERVER)]}


async def filtered_listing() -> tuple[RiskPolicyForAgents, list[str], dict]:
    """(policy, tool names the filtered server lists, tool name -> needs approval): list the server's tools,
    rank them, set the risk filter on the live server and list again; approval through the SDK's conversion."""
    from agents import Agent, RunContextWrapper
    from agents.mcp import MCPServerStdio, MCPUtil

    async with MCPServerStdio(params=server_params(), name="files") as server:
        policy = RiskPolicyForAgents.from_mcp_tools(await server.list_tools())
        server.tool_filter = policy.tool_filter(block_above=3)  # a server built later takes it as tool_filter=
        agent = Agent(name="files-agent", mcp_servers=[server])
        listed = await server.list_tools(RunContextWrapper(context=None), agent)
    gated = MCPServerStdio(params=server_params(), name="files", require_approval=policy.require_approval(above=2))
    approval = {t.name: MCPUtil.to_function_tool(t, gated, False, agent).needs_approval for t in listed}
    return policy, [t.name for t in listed], approval


def exposure(policy: RiskPolicyForAgents) -> list[dict]:
    """Per request, the search tool's top K and held-back tools, riskrank-jax default against plain cosine."""
    cosine = RiskPolicyForAgents.from_ranker(policy.ranker.with_config(RankConfig(lam=0.0, first_stage="dense")),
                                             policy.descriptions)
    rows = []
    for q in REQUESTS:
        row = {"query": q}
        for label, p in (("riskrank-jax", policy), ("cosine", cosine)):
            found = search(p, q, K)
            row[label] = {"top": [t["name"] for t in found["tools"]],
                          "risky": [t["name"] for t in found["tools"] if t["risk_level"] >= 3],
                          "held_back": [h["name"] for h in found["held_back"]]}
        rows.append(row)
    return rows


def main() -> int:
    policy, listed, approval = asyncio.run(filtered_listing())
    print("risk per tool:")
    for name, r in policy.risk_table().items():
        print(f"  {name:15s} level {r['risk_level']}  ({r['risk_source']})")
    blocked = [n for n in policy.ranker.tool_names if n not in listed]
    print(f"tool_filter(block_above=3): listed {listed}; blocked {blocked}")
    print(f"require_approval(above=2): needs approval {[n for n, ask in approval.items() if ask]}")
    assert "read_file" in listed and not approval["read_file"], "read_file must pass without approval"
    assert "delete_file" in blocked or approval.get("delete_file")
    tool = search_tool(policy, k=K)
    print(f"function tool {tool.name!r}: {tool.description.splitlines()[0]}")
    found = search(policy, "delete the old report file", K)
    print("search 'delete the old report file':", [t["name"] for t in found["tools"]],
          "held back:", [h["name"] for h in found["held_back"]])
    print(f"risky tools (level >= 3) in the top {K} for read-only requests:")
    for row in exposure(policy):
        ours, cos = row["riskrank-jax"], row["cosine"]
        print(f"  {row['query']!r}\n    riskrank-jax risky {ours['risky']} of {ours['top']}, held back "
              f"{ours['held_back']}\n    cosine       risky {cos['risky']} of {cos['top']}")
    print(json.dumps({"listed": listed, "blocked": blocked, "approval": approval}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
