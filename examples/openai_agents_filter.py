"""The OpenAI Agents SDK with riskrank-jax, without network: start examples/gateway/files_server.py through the
SDK's MCPServerStdio, rank its tools, list them again through a risk-aware tool_filter, print which tools are
blocked and which need approval, then run the search function tool for a few requests, and finally run an
Agents SDK agent loop (Runner.run) whose model is a scripted stand-in: it calls search_tools, reads the result and
then calls an MCP tool of the filtered server.

    python examples/openai_agents_filter.py

Why: the filter and the approval map come from each tool's assessed risk level, not a hand-kept list.
"""

from __future__ import annotations

import ast
import asyncio
import json
import sys
from pathlib import Path

from agents import Agent, ModelResponse, RunContextWrapper, Runner, Usage, set_tracing_disabled
from agents.exceptions import AgentsException
from agents.mcp import MCPServerStdio, MCPUtil
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

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
READ_REQUEST = "show me what is in notes.txt"
DELETE_REQUEST = "delete report.md"


def server_params() -> dict:
    """How MCPServerStdio starts the example file server (this interpreter, no network)."""
    return {"command": sys.executable, "args": [str(SERVER)]}


async def filtered_listing() -> tuple[RiskPolicyForAgents, list[str], dict]:
    """(policy, tool names the filtered server lists, tool name -> needs approval): list the server's tools,
    rank them, set the risk filter on the live server and list again; approval through the SDK's conversion."""
    async with MCPServerStdio(params=server_params(), name="files") as server:
        policy = RiskPolicyForAgents.from_mcp_tools(await server.list_tools())
        server.tool_filter = policy.tool_filter(block_above=3)  # a server built later takes it as tool_filter=
        agent = Agent(name="files-agent", mcp_servers=[server])
        listed = await server.list_tools(RunContextWrapper(context=None), agent)
    gated = MCPServerStdio(params=server_params(), name="files", require_approval=policy.require_approval(above=2))
    approval = {t.name: MCPUtil.to_function_tool(t, gated, False, agent).needs_approval for t in listed}
    return policy, [t.name for t in listed], approval


def _call(name: str, args: dict, n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", type="function_call", name=name,
                                    arguments=json.dumps(args), status="completed")


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def _outputs(items) -> list[str]:
    return [i["output"] for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def _parse(text):  # a function tool's dict comes back as str(dict); an MCP tool's as a list of content items
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return ast.literal_eval(text)


class ScriptedModel(Model):
    """An ``agents.models.interface.Model`` that plays a tool-using model on one file, without network.
    Turn 1 calls search_tools with the request; turn 2 reads the search result from the input and calls the tool
    it ranks first on ``path``; turn 3 answers with that tool's output. It records the tool names it was offered
    in each turn (the ``tools`` argument of get_response)."""

    def __init__(self, path: str):
        self.path = path
        self.offered: list[list[str]] = []
        self.search: dict | None = None
        self.picked: str | None = None

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **_):
        self.offered.append([t.name for t in tools])
        request = input if isinstance(input, str) else next(
            i["content"] for i in input if isinstance(i, dict) and i.get("role") == "user")
        done = [] if isinstance(input, str) else _outputs(input)
        if not done:  # turn 1: ask the risk-aware search which tools fit
            out = _call("search_tools", {"query": request}, 1)
        elif len(done) == 1:  # turn 2: call the best ranked tool (the model trusts the search)
            self.search = _parse(done[0])
            self.picked = self.search["tools"][0]["name"]
            out = _call(self.picked, {"path": self.path}, 2)
        else:  # turn 3: answer with the tool's output
            try:
                result = _parse(done[-1])
                text = " ".join(c.get("text", "") for c in result) if isinstance(result, list) else result
            except (ValueError, SyntaxError):  # plain text output
                text = str(done[-1])
            out = _say(f"{self.picked}: {text}")
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


async def agent_loop(policy: RiskPolicyForAgents) -> dict:
    """Run Runner.run twice over the filtered, approval-gated server and the search tool, with a scripted model:
    a read-only request (search_tools, then read_file) and a delete request (search_tools, then delete_file)."""
    set_tracing_disabled(True)  # no trace export: nothing leaves this machine
    report = {}
    async with MCPServerStdio(params=server_params(), name="files",
                              tool_filter=policy.tool_filter(block_above=3),
                              require_approval=policy.require_approval(above=2)) as server:
        for label, request, path in (("read", READ_REQUEST, "notes.txt"), ("delete", DELETE_REQUEST, "report.md")):
            model = ScriptedModel(path)
            agent = Agent(name="files-agent", instructions="Use search_tools first, then the tool it ranks first.",
                          model=model, mcp_servers=[server], tools=[search_tool(policy, k=K)])
            row = {"request": request}
            try:
                result = await Runner.run(agent, request, max_turns=4)
                row["final"] = str(result.final_output)
                row["interruptions"] = [getattr(i, "name", None) or getattr(i.raw_item, "name", "?")
                                        for i in getattr(result, "interruptions", [])]
            except AgentsException as e:  # the SDK refuses a call of a tool the filter did not list
                row["refused"] = f"{type(e).__name__}: {e}"
            row["offered"] = model.offered
            row["search"] = {"tools": [t["name"] for t in (model.search or {}).get("tools", [])],
                             "held_back": [h["name"] for h in (model.search or {}).get("held_back", [])]}
            row["called"] = model.picked
            report[label] = row
    return report


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
    loop = asyncio.run(agent_loop(policy))
    read, delete = loop["read"], loop["delete"]
    print(f"agent: read request {read['request']!r} offered tools: {read['offered'][0]}")
    print(f"agent: read request search_tools -> {read['search']['tools']} held back {read['search']['held_back']};"
          f" model called {read['called']!r}; final output {read.get('final', read.get('refused'))!r}")
    assert "delete_file" not in read["offered"][0] and "search_tools" in read["offered"][0]
    assert "delete_file" not in read["search"]["tools"] and read["called"] == "read_file" and "final" in read
    print(f"agent: delete request {delete['request']!r} offered tools: {delete['offered'][0]}")
    print(f"agent: delete request search_tools -> {delete['search']['tools']} held back "
          f"{delete['search']['held_back']}; model called {delete['called']!r}")
    outcome = delete.get("refused") or f"interrupted for approval {delete.get('interruptions')}"
    print(f"agent: delete_file blocked by tool_filter(block_above=3) (level {policy.risk('delete_file')[0]}): "
          f"{outcome}")
    assert delete["search"]["tools"][0] == "delete_file" and "delete_file" not in delete["offered"][0]
    assert "refused" in delete
    print(json.dumps({"listed": listed, "blocked": blocked, "approval": approval}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
