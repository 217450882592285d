"""riskrank_jax.integrations.langgraph_bigtool: a bigtool agent (offline scripted chat model) binds the tools
riskrank-jax retrieves; sync and async retrieval agree; bad registries raise errors naming the tool; the
example runs."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from conftest import run_script

pytest.importorskip("langgraph_bigtool")

from langchain_core.tools import StructuredTool, tool
from langchain_core.messages import HumanMessage
from langgraph_bigtool import create_agent

from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.errors import DuplicateToolError, ToolSpecError
from riskrank_jax.integrations.langgraph_bigtool import (
    RiskAwareRetriever,
    tools_document,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "langgraph_bigtool_agent.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("langgraph_bigtool_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _load_example()


@pytest.fixture(scope="module")
def retriever(example, tmp_path_factory):
    cache = EmbeddingCache(tmp_path_factory.mktemp("emb-cache"))
    return RiskAwareRetriever.from_tools(example.make_registry(), k=example.K, lam=example.LAM, cache=cache)


def test_agent_binds_riskrank_tools(example, retriever):
    registry = example.make_registry()
    read = example.run_agent(retriever, registry, example.READ_REQUEST)
    delete = example.run_agent(retriever, registry, example.DELETE_REQUEST)
    assert "delete_file" not in read and "read_file" in read
    assert "delete_file" in delete
    # what was bound is exactly what riskrank-jax returned, mapped from ids to tool names
    assert read == [registry[i].name for i in retriever.retrieve(example.READ_REQUEST)]
    assert len(read) == example.K


def test_function_and_coroutine_agree(example, retriever):
    for q in (example.READ_REQUEST, example.DELETE_REQUEST):
        ids = retriever.retrieve_tools_function(q)
        assert ids == asyncio.run(retriever.retrieve_tools_coroutine(q))
        assert all(i.startswith("tool-") for i in ids)
    # the schema bigtool builds from the function: one `query` argument, named retrieve_tools
    wrapped = StructuredTool.from_function(func=retriever.retrieve_tools_function,
                                           coroutine=retriever.retrieve_tools_coroutine)
    assert wrapped.name == "retrieve_tools" and set(wrapped.args) == {"query"} and wrapped.description


def test_async_agent_matches_sync(example, retriever):
    llm = example.ScriptedChatModel()
    agent = create_agent(llm, example.make_registry(), retrieve_tools_coroutine=retriever.retrieve_tools_coroutine)
    asyncio.run(agent.compile().ainvoke({"messages": [HumanMessage(example.DELETE_REQUEST)]}))
    assert "delete_file" in llm.bound[-1]


def test_input_schema_is_read_from_the_tool(example):
    doc, id_of = tools_document(example.make_registry())
    by_name = {t["name"]: t for t in doc["tools"]}
    assert id_of["send_email"] == "tool-send_email"
    schema = by_name["send_email"]["inputSchema"]
    assert schema["type"] == "object" and set(schema["properties"]) == {"to", "subject", "body"}
    assert set(schema["required"]) == {"to", "subject", "body"}


def test_bad_registries_name_the_tool(example):
    @tool
    def read_file(path: str) -> str:
        """Another read_file."""
        return path

    no_doc = StructuredTool.from_function(func=lambda path: path, name="mystery_tool", description="")
    with pytest.raises(ToolSpecError, match="mystery_tool.*no description"):
        tools_document({"a": example.read_file, "b": no_doc})
    with pytest.raises(DuplicateToolError, match="'read_file'.*'a'.*'b'"):
        tools_document({"a": example.read_file, "b": read_file})
    with pytest.raises(ToolSpecError, match="'plain'.*not a LangChain tool"):
        tools_document({"a": example.read_file, "plain": lambda q: q})
    with pytest.raises(ToolSpecError, match="non-empty dict"):
        tools_document({})


def test_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RISKRANK_CACHE", str(tmp_path))
    out = run_script(EXAMPLE, capsys=capsys, monkeypatch=monkeypatch)  # as `python EXAMPLE`, in this process
    assert "delete request does: True" in out and "plain cosine" in out
