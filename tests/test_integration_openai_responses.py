"""OpenAI Responses API client-executed tool search (riskrank_jax.integrations.openai_tool_search), checked
against the openai SDK's own param types; no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")

from riskrank_jax.encode.embedding_cache import EmbeddingCache  # noqa: E402
from riskrank_jax.errors import DuplicateToolError, RankerError, ToolSpecError  # noqa: E402
from riskrank_jax.integrations.openai_tool_search import ResponsesToolSearch  # noqa: E402

MCP = Path(__file__).resolve().parent.parent / "examples" / "mcp_tools.json"


def _function_tools() -> list[dict]:
    doc = json.loads(MCP.read_text())["result"]["tools"]
    return [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["inputSchema"], "strict": False} for t in doc]


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    return ResponsesToolSearch.from_tools(_function_tools(), k=3, cache=EmbeddingCache(tmp_path_factory.mktemp("c")))


def test_search_output_loads_the_risk_aware_top_k(search):
    assert search.definition()["execution"] == "client"
    assert all(t["defer_loading"] for t in search.deferred())
    read = search.output({"type": "tool_search_call", "call_id": "c1", "arguments": {"query": "read the config file"}})
    names = [t["name"] for t in read["tools"]]
    assert read["call_id"] == "c1" and len(names) == 3 and "read_file" in names and "delete_file" not in names
    delete = search.output({"type": "tool_search_call", "call_id": "c2",
                            "arguments": json.dumps({"query": "delete the branch feature-x"})})
    assert "git_delete_branch" in [t["name"] for t in delete["tools"]]


def test_bad_input_names_the_tool(search):
    tools = _function_tools()
    with pytest.raises(ToolSpecError, match="'read_file' has no description"):
        ResponsesToolSearch.from_tools([dict(tools[0], description=" ")])
    with pytest.raises(DuplicateToolError, match="'read_file' is used twice"):
        ResponsesToolSearch.from_tools([tools[0], tools[0]])
    with pytest.raises(ToolSpecError, match="tool 1 is not a Responses API function tool"):
        ResponsesToolSearch.from_tools([{"name": "x"}])
    with pytest.raises(RankerError, match="no query"):
        search.output({"type": "tool_search_call", "arguments": {}})
