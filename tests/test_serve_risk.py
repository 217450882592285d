"""The gateway's gate over risk dimensions: per-call SQL decisions, the session-flow rule, dimensions in
search results, refusals and the audit log — on a catalog built from MCP tool lists as the servers send them."""

from __future__ import annotations

import json

import pytest

from riskrank_jax.serve.catalog import build_catalog, catalog_state, search
from riskrank_jax.serve.config import GatewaySettings, RankSettings, RuntimeSettings
from riskrank_jax.serve.gateway import Gated, Gateway
from riskrank_jax.serve.policy import Policy, decide_call
from riskrank_jax.serve.sessions import Sessions
from riskrank_jax.serve.store import open_store


def _tool(name, description, props=None, annotations=None):
    t = {"name": name, "description": description, "inputSchema": {"type": "object", "properties": props or {}}}
    if annotations is not None:
        t["annotations"] = annotations
    return t


SERVERS = [
    ("postgres", [_tool("query", "Run a read-only SQL query", {"sql": {"type": "string"}})]),
    ("fetch", [_tool("fetch", "Fetches a URL from the internet and extracts its contents as markdown",
                     {"url": {"type": "string"}})]),
    ("slack", [_tool("slack_post_message", "Post a new message to a Slack channel",
                     {"channel_id": {"type": "string"}, "text": {"type": "string"}})]),
    ("notes", [_tool("read_note", "Read a note from the local notes folder", {"name": {"type": "string"}},
                     {"readOnlyHint": True})]),
]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.encoder import load_encoder

    cache = EmbeddingCache(tmp_path_factory.mktemp("cache"))
    return build_catalog(SERVERS, [], RankSettings(), load_encoder(), cache, trusted_servers=("notes",))


def _gateway(catalog, tmp_path, policy=Policy()):
    gw = Gateway(GatewaySettings(policy=policy, runtime=RuntimeSettings(audit_log=str(tmp_path / "audit.jsonl"),
                                                                        state_dir=str(tmp_path / "state"))))
    gw.catalog = catalog
    return gw


def _gate(catalog, name, arguments, policy=Policy(), flow=None):
    """decide_call on the tool as the catalog assessed it (its server listing that same definition now)."""
    i = catalog.by_name[name]
    return i, decide_call(policy, catalog_state(catalog, i), arguments, flow)


def test_sql_calls_are_decided_by_their_statement_and_the_audit_names_the_rule(catalog, tmp_path):
    gw = _gateway(catalog, tmp_path)
    i, select = _gate(catalog, "postgres.query", {"sql": "SELECT id, name FROM customers LIMIT 10"})
    _, delete = _gate(catalog, "postgres.query", {"sql": "DELETE FROM customers"})
    assert (select.action, select.rule) == ("allow", "sql: one read-only statement (SELECT)")
    assert (delete.action, delete.rule) == ("confirm", "sql: DELETE is not read-only")
    gw.record(Gated(catalog, i, catalog_state(catalog, i), delete), "postgres.query",
              {"sql": "DELETE FROM customers"}, "refused", delete.reason)
    line = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert line["rule"] == "sql: DELETE is not read-only"
    assert "execution (sql: DELETE is not read-only)" in line["dimensions"]
    assert "DELETE" not in json.dumps({k: v for k, v in line.items() if k not in ("rule", "dimensions", "reason")})


def test_the_audit_line_records_the_dimensions_the_decision_was_made_on(catalog, tmp_path, monkeypatch):
    """The call's dimension row is computed once, by decide_call (the argument rule judges the statement once),
    carried in the Decision and recorded as it is."""
    from riskrank_jax.registry.dimensions import describe
    from riskrank_jax.registry import arguments as arguments_module  # serve.policy imports it on a first call

    judged = []
    judge = arguments_module.judge_arguments
    monkeypatch.setattr(arguments_module, "judge_arguments",
                        lambda rule, args: judged.append(rule) or judge(rule, args))
    gw = _gateway(catalog, tmp_path)
    args = {"sql": "DELETE FROM customers"}
    gated = gw.gate("postgres.query", args)
    gw.record(gated, "postgres.query", args, "refused", gated.decision.reason)
    assert judged == ["sql:sql"]
    line = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert gated.decision.dimensions["execution"] == {"value": True, "source": "sql: DELETE is not read-only"}
    assert line["dimensions"] == describe(gated.decision.dimensions)
    assert gw.gate("postgres.query", None).decision.dimensions is None  # no call: no call dimensions


def test_a_sink_that_passes_asks_once_untrusted_content_has_answered(catalog, tmp_path):
    policy = Policy(allow_dimensions=("public_sink", "destructive"))
    gw = _gateway(catalog, tmp_path, policy)
    args = {"channel_id": "C1", "text": "hi"}
    assert _gate(catalog, "slack.slack_post_message", args, policy)[1].action == "allow"
    fetch = catalog.by_name["fetch.fetch"]
    assert catalog.ranker.risk_dimensions[fetch]["untrusted_content"]["value"] is True
    gw.note_answer(catalog, fetch)
    assert gw.sessions.flow(None) == "fetch.fetch"
    # the flow is in the state store: a second replica on the same store reads it
    assert Sessions(open_store(tmp_path / "state"), "other replica").flow(None) == "fetch.fetch"
    after = _gate(catalog, "slack.slack_post_message", args, policy, gw.sessions.flow(None))[1]
    assert (after.action, after.rule) == ("confirm", "session flow")
    assert "'fetch.fetch' returned untrusted content earlier in this session" in after.reason
    assert _gate(catalog, "notes.read_note", {"name": "todo"}, policy, gw.sessions.flow(None))[1].action == "allow"


def test_search_results_and_refusals_show_dimensions_and_sources(catalog, tmp_path):
    out = search(catalog, "post a message to the team channel", 4, Policy())
    slack = next(t for t in out["tools"] if t["name"] == "slack.slack_post_message")
    assert slack["dimensions"]["public_sink"] == {"value": True, "source": "keywords:post message"}
    assert slack["call"] == "needs confirmation" and "public_sink (keywords:post message)" in slack["risk_source"]
    assert len(out["tools"]) == 4  # k = every tool of the catalog
    q = next(t for t in out["tools"] if t["name"] == "postgres.query")
    assert q["call"] == "needs confirmation (allowed without it for one read-only sql argument)"
    assert q["dimensions"]["argument_rule"] == "sql:sql"
    refused = _gate(catalog, "slack.slack_post_message", {"channel_id": "C1", "text": "hi"}, Policy(confirm="refuse"))[1]
    assert refused.action == "refuse"
    assert "public_sink (keywords:post message)" in refused.reason and "confirm: refuse" in refused.reason


def test_one_servers_unreadable_tool_list_is_left_out_alone():
    from riskrank_jax.serve.catalog import readable_servers

    bad = [{"name": "dup", "description": "x"}, {"name": "dup", "description": "y"}]  # never past vet_tools
    ok, left_out = readable_servers([SERVERS[0], ("broken", bad), SERVERS[1]])
    assert [name for name, _ in ok] == ["postgres", "fetch"]
    assert list(left_out) == ["broken"] and "duplicate tool name 'dup'" in left_out["broken"]
