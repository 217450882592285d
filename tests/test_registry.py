"""Registry adapters: every accepted format, annotation defaults, merging, namespacing, bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from riskrank_jax.errors import RiskRankError
from riskrank_jax.registry import (ACCEPTED_FORMATS, DuplicateToolError, EmptyRegistryError, MalformedJSONError,
                                   RegistryWarning, ToolSpecError, UnknownFormatError, load_registry, tool_text)

SCHEMA = {"type": "object", "properties": {"repo": {"type": "string", "description": "owner/name"},
                                           "force": {"type": "boolean"}}, "required": ["repo"]}
MCP_TOOLS = [
    {"name": "delete_repo", "title": "Delete repository", "description": "Delete a repository.", "inputSchema": SCHEMA,
     "annotations": {"destructiveHint": True, "readOnlyHint": None}},
    {"name": "list_repos", "description": "List repositories.", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "star_repo", "description": "Star a repository.", "inputSchema": {"type": "object"}},
]


def write(tmp_path, name, obj, jsonl=False):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(o) for o in obj) + "\n" if jsonl else json.dumps(obj, indent=2))
    return p


@pytest.mark.parametrize("doc", [
    {"jsonrpc": "2.0", "id": 1, "result": {"tools": MCP_TOOLS}},
    {"tools": MCP_TOOLS, "nextCursor": None},
    MCP_TOOLS,
    [{"jsonrpc": "2.0", "id": 1, "result": {"tools": MCP_TOOLS[:2], "nextCursor": "c1"}},
     {"jsonrpc": "2.0", "id": 2, "result": {"tools": MCP_TOOLS[2:]}}],
])
def test_mcp_shapes_give_the_same_tools(tmp_path, doc):
    reg = load_registry(write(tmp_path, "gh.json", doc))
    assert reg.names == ("delete_repo", "list_repos", "star_repo")
    assert {t.format for t in reg.tools} == {"mcp"}
    assert reg.tools[0].params == (("repo", "owner/name"), ("force", ""))
    assert reg.sources == ("gh",)


def test_mcp_annotation_defaults_apply_when_absent_or_null():
    reg = load_registry(MCP_TOOLS)
    a_del, a_list, a_star = reg.annotations
    # readOnlyHint null -> default False; destructiveHint declared
    assert (a_del.read_only, a_del.destructive, a_del.idempotent, a_del.open_world) == (False, True, False, True)
    assert a_del.declared == frozenset({"destructiveHint"})
    assert a_list.read_only is True and a_list.destructive is True and a_list.declared == frozenset({"readOnlyHint"})
    assert a_star.as_dict() == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                                "openWorldHint": True} and not a_star.declared
    assert not a_star.declared_true("destructiveHint") and a_del.declared_true("destructiveHint")


def test_openai_chat_and_responses_and_skipped_builtin(tmp_path):
    doc = {"tools": [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                          "parameters": {"type": "object", "properties": {"city": {"description": "City"}}},
                                          "strict": True}},
        {"type": "function", "name": "send_sms", "description": "Send a text message.", "parameters": {}},
        {"type": "web_search_preview"},
    ]}
    with pytest.warns(RegistryWarning, match="web_search_preview"):
        reg = load_registry(write(tmp_path, "oa.json", doc))
    assert reg.names == ("get_weather", "send_sms")
    assert [t.format for t in reg.tools] == ["openai-chat", "openai-responses"]
    assert reg.tools[0].params == (("city", "City"),)
    assert len(reg.warnings) == 1 and "oa.json:" in reg.warnings[0]


def test_anthropic_with_server_tool(tmp_path):
    doc = [{"name": "get_stock", "description": "Latest price of a stock.",
            "input_schema": {"type": "object", "properties": {"ticker": {"type": "string"}}}},
           {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}]
    with pytest.warns(RegistryWarning, match="tool_search_tool_bm25_20251119"):
        reg = load_registry(write(tmp_path, "an.json", doc))
    assert reg.names == ("get_stock",) and reg.tools[0].format == "anthropic"
    assert reg.tools[0].annotations is None


def test_plain_json_jsonl_and_beir(tmp_path):
    plain = [{"name": "a", "description": "Read a file.", "risk": 1}, {"name": "b", "description": "Wipe a disk."}]
    r1 = load_registry(write(tmp_path, "plain.json", plain))
    r2 = load_registry(write(tmp_path, "plain.jsonl", plain, jsonl=True))
    assert r1.names == r2.names == ("a", "b") and r1.declared_risk == (1, None)
    assert r2.tools[1].line == 2
    beir = [{"_id": "t1", "title": "lookup", "text": "Look up a word.", "metadata": {}},
            {"_id": 7, "title": "", "text": "Delete a page.", "metadata": {"risk": 4}}]
    r3 = load_registry(write(tmp_path, "corpus.jsonl", beir, jsonl=True))
    assert r3.names == ("t1", "7") and r3.declared_risk == (None, 4) and r3.tools[0].format == "beir"


def test_tool_text_is_documented_layout():
    reg = load_registry(MCP_TOOLS[:1])
    assert tool_text(reg.tools[0]) == ("delete repo: Delete repository. Delete a repository. "
                                       "Parameters: repo (owner/name); force.")
    assert reg.texts[0] == tool_text(reg.tools[0])


def test_collisions_are_namespaced_by_file_stem_or_server(tmp_path):
    a = write(tmp_path, "github.json", {"tools": MCP_TOOLS[:2]})
    b = write(tmp_path, "other.json", {"serverInfo": {"name": "gitlab"}, "tools": MCP_TOOLS[:1]})
    reg = load_registry([a, b])
    assert reg.names == ("github/delete_repo", "list_repos", "gitlab/delete_repo")
    assert reg.sources == ("github", "gitlab")
    assert "also in gitlab" in reg.tools[0].warnings[-1]
    assert reg.texts[0] == reg.texts[2]  # the namespace is not part of the text


def test_fingerprint_tracks_names_texts_and_declared_risk():
    base = [{"name": "a", "description": "x"}]
    fp = load_registry(base).fingerprint()
    assert len(fp) == 16 and fp == load_registry([dict(base[0])]).fingerprint()
    assert fp != load_registry([{"name": "a", "description": "y"}]).fingerprint()
    assert fp != load_registry([{"name": "a", "description": "x", "risk": 2}]).fingerprint()


def test_to_tool_registry():
    reg = load_registry([{"name": "a", "description": "Run a shell command.", "risk": 4},
                         {"name": "b", "description": "Describe a product.", "risk": 1}])
    tr = reg.to_tool_registry()
    assert tr.names == ("a", "b") and tr.risk.tolist() == [4, 1]
    assert tr.perm_mask[:, 0].tolist() == [True, False]  # shell; "describe" does not match "script"
    with pytest.raises(RiskRankError, match="declare no risk"):
        load_registry([{"name": "c", "description": "x"}]).to_tool_registry()
    assert load_registry([{"name": "c", "description": "x"}]).to_tool_registry(np.array([3])).risk.tolist() == [3]


def test_warnings_empty_description_and_unreadable_schema():
    reg = load_registry([{"name": "a", "inputSchema": {"properties": ["x"]}},
                         {"name": "b", "description": "ok", "inputSchema": "nope"},
                         {"name": "c", "description": "ok", "annotations": {"readOnlyHint": "yes"}}])
    w = [t.warnings for t in reg.tools]
    assert w[0] == ("empty description", "unreadable schema: 'properties' is a list, not an object")
    assert w[1] == ("unreadable schema: 'inputSchema' is a string, not an object",)
    assert w[2] == ("unreadable schema: no 'inputSchema'", "annotation readOnlyHint ignored: a string, not a boolean")


# ---- bad input: each a RiskRankError subclass naming file and line ----

def test_malformed_json_names_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"tools": [\n  {"name": "a",\n   "description": "x"\n  ,]\n}')
    with pytest.raises(MalformedJSONError, match=r"bad.json:4: malformed JSON: .*\(line 4, column 4\)"):
        load_registry(p)
    q = tmp_path / "bad.jsonl"
    q.write_text('{"name": "a"}\n{"name": \n')
    with pytest.raises(MalformedJSONError, match=r"bad.jsonl:2: .*line 2, column 10"):
        load_registry(q)


def test_unknown_format_lists_accepted_formats(tmp_path):
    with pytest.raises(UnknownFormatError, match="accepted formats: MCP") as e:
        load_registry(write(tmp_path, "x.json", {"foo": 1}))
    assert all(f in str(e.value) for f in ACCEPTED_FORMATS)
    with pytest.raises(UnknownFormatError, match=r"x.json:5: unrecognised tool entry"):
        load_registry(write(tmp_path, "x.json", [{"name": "a"}, {"bar": 2}]))
    with pytest.raises(UnknownFormatError, match="got a string"):
        load_registry(write(tmp_path, "y.json", "tools"))


@pytest.mark.parametrize("tools, cls, msg", [
    ([{"description": "no name", "inputSchema": {}}], ToolSpecError, "MCP tool without a name"),
    ([{"name": "  ", "description": "x"}], ToolSpecError, "without a name"),
    ([{"name": 3, "description": "x"}], ToolSpecError, "name must be a string, got a number"),
    ([{"name": "a", "description": ["x"]}], ToolSpecError, "description of tool 'a' must be a string, got a list"),
    ([{"name": "a", "description": {"en": "x"}}], ToolSpecError, "must be a string, got an object"),
    ([{"name": "a", "description": "x", "risk": 6}], ToolSpecError, "risk of tool 'a' is 6"),
    ([{"name": "a", "description": "x", "risk": 2.5}], ToolSpecError, "expected an integer 1..5"),
    ([{"name": "a", "description": "x", "risk": True}], ToolSpecError, "risk of tool 'a' is True"),
    ([{"name": "a", "description": "x"}, {"name": "a", "description": "y"}], DuplicateToolError,
     "duplicate tool name 'a' in one source \\(first on line 2\\)"),
    ([], EmptyRegistryError, "no tools"),
    ([{"type": "web_search"}], EmptyRegistryError, "1 built-in tools skipped"),
])
def test_bad_entries(tmp_path, tools, cls, msg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RegistryWarning)
        with pytest.raises(cls, match=msg) as e:
            load_registry(write(tmp_path, "t.json", tools))
    assert "t.json" in str(e.value)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.json").write_text("  \n")
    with pytest.raises(EmptyRegistryError, match="e.json: no tools: the file is empty"):
        load_registry(tmp_path / "e.json")
    with pytest.raises(MalformedJSONError, match="nope.json: file not found"):
        load_registry(tmp_path / "nope.json")
    (tmp_path / "bin.json").write_bytes(b'{"a":\n "\xff"}')
    with pytest.raises(MalformedJSONError, match="not UTF-8 text \\(line 2, column 3\\)"):
        load_registry(tmp_path / "bin.json")
