"""riskrank_jax.integrations.openai_agents against the real example file server over stdio (the SDK's
MCPServerStdio): the risk filter, the approval map, the search function tool, input errors, and the example.

One module fixture starts the server once (lists it, then lists it through each filter) and builds one ranker;
the example script runs in this process (its own server subprocess over stdio as in the SDK)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from conftest import run_script

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunContextWrapper  # noqa: E402
from agents.mcp import MCPServerStdio, MCPUtil  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

from riskrank_jax.encode.embedding_cache import EmbeddingCache  # noqa: E402
from riskrank_jax.errors import (
    DuplicateToolError,
    RankerError,
    RiskRankError,
    ToolSpecError,
)
from riskrank_jax.integrations.openai_agents import (
    RiskPolicyForAgents,
    check_tools,
    search_tool,
)

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "examples" / "gateway" / "files_server.py"
EXAMPLE = ROOT / "examples" / "openai_agents_filter.py"


async def _list_through_sdk(cache_dir):
    """(policy, tool names listed through three filters, tool name -> needs_approval) from one server start."""
    params = {"command": sys.executable, "args": [str(SERVER)]}
    ctx = RunContextWrapper(context=None)
    got = {}
    async with MCPServerStdio(params=params, name="files") as server:
        policy = RiskPolicyForAgents.from_mcp_tools(await server.list_tools(), cache=EmbeddingCache(cache_dir))
        agent = Agent(name="files-agent", mcp_servers=[server])
        filters = {"default": policy.tool_filter(), "strict": policy.tool_filter(block_above=3),
                   "by_name": policy.tool_filter(block_above=1, allow=["write_file"], block=["read_file"])}
        for label, tool_filter in filters.items():
            server.tool_filter = tool_filter
            got[label] = await server.list_tools(ctx, agent)
    gated = MCPServerStdio(params=params, name="files", require_approval=policy.require_approval(above=3))
    got["approvals"] = {t.name: MCPUtil.to_function_tool(t, gated, False, agent).needs_approval
                        for t in got["default"]}
    return policy, {**{k: [t.name for t in v] for k, v in got.items() if k != "approvals"},
                    "approvals": got["approvals"]}


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    return asyncio.run(_list_through_sdk(tmp_path_factory.mktemp("cache")))


def test_filter_blocks_high_risk_tools_and_keeps_read_file(listed):
    policy, got = listed
    assert policy.risk("delete_file")[0] >= 4 and policy.risk("read_file")[0] <= 2
    assert "destructive" in policy.risk("delete_file")[1]  # the source says why (its risk dimensions)
    assert "read_file" in got["strict"] and "delete_file" not in got["strict"]
    assert got["strict"] == [n for n in policy.ranker.tool_names if policy.risk(n)[0] <= 3]
    assert got["default"] == [n for n in policy.ranker.tool_names if policy.risk(n)[0] <= 4]
    assert got["by_name"] == [n for n in policy.ranker.tool_names
                              if n == "write_file" or (policy.risk(n)[0] <= 1 and n != "read_file")]
    assert policy.risk("get_forecast") is None
    assert policy.tool_filter()(None, type("T", (), {"name": "get_forecast"})()) is False  # unseen: blocked
    assert policy.tool_filter(unknown="allow")(None, type("T", (), {"name": "get_forecast"})()) is True
    assert policy.static_tool_filter(block_above=3) == {"blocked_tool_names": sorted(policy.names_above(3))}


def test_approval_map_lists_tools_above_level_3(listed):
    policy, got = listed
    approval = policy.require_approval(above=3)
    above = [n for n in policy.ranker.tool_names if policy.risk(n)[0] > 3]
    assert approval["always"]["tool_names"] == above and "delete_file" in above
    assert set(approval["never"]["tool_names"]) == set(policy.ranker.tool_names) - set(above)
    assert got["approvals"]["delete_file"] is True and got["approvals"]["read_file"] is False
    ask = policy.needs_approval(above=3)
    assert ask(None, None, type("T", (), {"name": "get_forecast"})()) is True
    assert ask(None, None, type("T", (), {"name": "read_file"})()) is False
    table = policy.risk_table()
    assert table["delete_file"]["risk_level"] == policy.risk("delete_file")[0] and table["read_file"]["risk_source"]


def test_search_tool_returns_read_tools_and_holds_back_delete(listed):
    policy, _ = listed
    tool = search_tool(policy, k=3)
    assert isinstance(tool, FunctionTool) and tool.name == "search_tools"
    assert tool.params_json_schema["required"] == ["query"]
    args = json.dumps({"query": "which files are in the workspace folder"})
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="call-1", tool_arguments=args)
    out = asyncio.run(tool.on_invoke_tool(ctx, args))
    out = out if isinstance(out, dict) else json.loads(out)
    names = [t["name"] for t in out["tools"]]
    assert "list_directory" in names and "delete_file" not in names
    assert all(t["risk_level"] < 3 for t in out["tools"]) and out["tools"][0]["description"]
    assert [h["name"] for h in out["held_back"]] == ["delete_file"]
    assert "risk level 4" in out["held_back"][0]["reason"]


def test_bad_inputs_raise_errors_naming_the_tool(listed):
    policy, _ = listed
    ok = {"name": "read_file", "description": "Read a file."}
    with pytest.raises(ToolSpecError, match="tool 'list_dir' has no description"):
        check_tools([ok, {"name": "list_dir", "inputSchema": {}}])
    with pytest.raises(ToolSpecError, match="description of tool 'x' must be a string"):
        check_tools({"tools": [{"name": "x", "description": 3}]})
    with pytest.raises(DuplicateToolError, match="duplicate tool name 'read_file'"):
        check_tools({"tools": [ok, ok]})
    with pytest.raises(ToolSpecError, match="tool 2 is a str"):
        check_tools([ok, "delete_file"])
    with pytest.raises(ToolSpecError, match="expected a list of tools"):
        check_tools("read_file")
    with pytest.raises(ToolSpecError, match="tool 1 has no name"):
        check_tools([{"description": "nameless"}])
    with pytest.raises(RankerError, match="expected a riskrank_jax Ranker"):
        search_tool({"tools": [ok]})
    with pytest.raises(RankerError, match="k must be an integer"):
        search_tool(policy, k=0)
    with pytest.raises(RankerError, match="threshold"):
        policy.tool_filter(block_above="4")
    with pytest.raises(RankerError, match="list of tool names"):
        policy.tool_filter(block="delete_file")
    assert issubclass(ToolSpecError, RiskRankError)
    openai = [{"type": "function", "function": {"name": "get_weather"}}]
    with pytest.raises(ToolSpecError, match="tool 'get_weather' has no description"):
        RiskPolicyForAgents.from_registry(openai)


def test_example_script_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RISKRANK_CACHE", str(tmp_path))
    monkeypatch.chdir(ROOT)
    stdout = run_script(EXAMPLE, capsys=capsys, monkeypatch=monkeypatch)  # as `python EXAMPLE`, in this process
    last = json.loads(stdout.strip().splitlines()[-1])
    # write_file of this untrusted, unannotated server is presumed destructive (level 4): blocked above 3
    assert "read_file" in last["listed"] and {"delete_file", "write_file"} <= set(last["blocked"])
    assert last["approval"]["read_file"] is False and "write_file" not in last["approval"]
    assert "risky tools (level >= 3) in the top" in stdout
    offered = next(line for line in stdout.splitlines() if line.startswith("agent: read request ")
                   and "offered tools:" in line)  # the scripted Runner.run loop ran over the filtered server
    assert "search_tools" in offered and "read_file" in offered and "delete_file" not in offered
    assert "model called 'read_file'" in stdout and "Tool delete_file not found" in stdout
