"""integrations.anthropic_tool_search: payloads fit the anthropic SDK's types, risky tools stay out of read-only
requests, deferral, bad tool lists, and the example script (run in this process, as __main__)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_script

anthropic = pytest.importorskip("anthropic")

from anthropic.types import MessageParam, ToolParam, ToolResultBlockParam, ToolUnionParam, ToolUseBlock  # noqa: E402

from riskrank_jax.errors import DataError, DuplicateToolError, RankerError, ToolSpecError  # noqa: E402
from riskrank_jax.integrations.anthropic_tool_search import (  # noqa: E402
    ToolSearch, search_tool_definition, validate, with_deferred)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "anthropic_tool_search.py"
READ, DELETE = "read the config file", "delete the branch feature-x"


def _mcp_as_anthropic() -> list[dict]:
    tools = json.loads((ROOT / "examples" / "mcp_tools.json").read_text())["result"]["tools"]
    return [{"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in tools]


@pytest.fixture(scope="module")
def tools():
    return _mcp_as_anthropic()


@pytest.fixture(scope="module")
def search(tools):
    return ToolSearch.from_tools(tools, k=3, explain=True)


def _use(query, use_id="toolu_01", **extra):
    return ToolUseBlock(type="tool_use", id=use_id, name="tool_search", input={"query": query, **extra})


def _references(result) -> list[str]:
    return [c["tool_name"] for c in result["content"] if c["type"] == "tool_reference"]


def test_payloads_fit_the_sdk_types(search, tools):
    result = search.handle(_use(READ))
    validate(result, ToolResultBlockParam)
    validate(search_tool_definition(), ToolParam)
    validate(search.definition(), ToolParam)
    for tool in with_deferred([search.definition(), *tools]):
        validate(tool, ToolUnionParam)
    validate({"role": "user", "content": [result]}, MessageParam)
    with pytest.raises(DataError, match="does not define"):
        validate({**result, "bogus": 1}, ToolResultBlockParam)
    with pytest.raises(DataError, match="not a valid"):
        validate({"type": "tool_result", "tool_use_id": "x", "content": [{"type": "tool_reference"}]},
                 ToolResultBlockParam)


def test_read_only_request_gets_no_delete_tool_and_delete_request_does(search):
    read = search.handle(_use(READ))
    assert read["type"] == "tool_result" and read["tool_use_id"] == "toolu_01"
    assert "read_file" in _references(read)
    assert not {"delete_file", "git_delete_branch"} & set(_references(read))
    delete = search.handle({"type": "tool_use", "id": "toolu_02", "name": "tool_search", "input": {"query": DELETE}})
    assert _references(delete)[0] == "git_delete_branch"
    assert len(_references(search.handle(_use(DELETE, k=5)))) == 5


def test_explain_names_held_back_tools_in_a_text_block(search):
    query = "show me the recent commits"  # git_push is in the top 5 at λ = 0, not at the default λ
    result = search.handle(_use(query, k=5))
    texts = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert len(texts) == 1 and "git_push (risk 4" in texts[0] and "git_push" not in _references(result)
    validate(result, ToolResultBlockParam)


def test_bad_model_input_is_an_error_result_and_other_blocks_are_refused(search):
    for bad in ({}, {"query": "  "}, {"query": "x", "k": 0}, {"query": "x", "k": "3"}):
        r = search.handle({"type": "tool_use", "id": "toolu_09", "name": "tool_search", "input": bad})
        assert r["is_error"] is True and r["tool_use_id"] == "toolu_09"
        validate(r, ToolResultBlockParam)
    with pytest.raises(RankerError, match="read_file"):
        search.handle({"type": "tool_use", "id": "toolu_09", "name": "read_file", "input": {"query": "x"}})


def test_with_deferred_defers_all_but_the_search_tool_and_kept_names(tools):
    builtin = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    given = [search_tool_definition(), {**tools[0], "risk": 1}, *tools[1:], builtin]
    out = with_deferred(given, keep=("git_status",))
    deferred = {t["name"] for t in out if t.get("defer_loading") is True}
    assert deferred == {t["name"] for t in tools} - {"git_status"}
    assert "risk" not in out[1] and given[1]["risk"] == 1 and "defer_loading" not in given[1]  # a copy


@pytest.mark.parametrize("bad, error, match", [
    ([{"name": "wipe_disk", "input_schema": {"type": "object"}}], ToolSpecError, "wipe_disk"),
    ([{"name": "a", "description": "x", "input_schema": {}}, {"name": "a", "description": "y", "input_schema": {}}],
     DuplicateToolError, "'a'"),
    (["read_file"], ToolSpecError, "tool 1 is a str"),
    ({"name": "read_file"}, ToolSpecError, "list"),
])
def test_bad_tool_lists_raise_errors_naming_the_tool(bad, error, match):
    with pytest.raises(error, match=match):
        ToolSearch.from_tools(bad)


def test_example_runs_end_to_end(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    lines = run_script(EXAMPLE, capsys=capsys, monkeypatch=monkeypatch).splitlines()  # `python EXAMPLE`, here
    read = next(x for x in lines if x.startswith(READ + " -> tool_reference:"))
    delete = next(x for x in lines if x.startswith(DELETE + " -> tool_reference:"))
    assert "read_file" in read and "delete" not in read.split(":", 1)[1]
    assert "git_delete_branch" in delete
    assert any(x.strip().startswith("k=5: riskrank-jax") and "cosine" in x for x in lines)
