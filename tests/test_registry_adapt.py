"""Relevance adapted to a registry without a log (riskrank_jax/model/registry_adapt.py): the pairs a registry's
texts make, the held-out gate, the cache by fingerprint, and risk read from the base encoder either way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from conftest import cli_invoker

from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.model.registry_adapt import AdaptConfig, adapt_encoder, pseudo_pairs, tool_fields
from riskrank_jax.model.tune_config import TuneConfig
from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.registry import load_registry

SERVERS = Path(__file__).resolve().parents[1] / "experiments" / "mcp_risk" / "corpus" / "servers"
FILES = [str(SERVERS / f) for f in ("airtable-mcp-server.json", "ssh-mcp.json")]  # 30 real tools
QUICK = TuneConfig(layers=1, epochs=2, batch_size=8, hard_pool=5)


def test_tool_fields_read_the_registry_layout_and_a_plain_description():
    text = "list bases: Lists all accessible Airtable bases. Returns ids. Parameters: limit (How many); offset."
    assert tool_fields("list_bases", text) == ("list bases", "Lists all accessible Airtable bases. Returns ids.",
                                               "limit (How many); offset.")
    assert tool_fields("analyze_evidence", "Analyze the chemical evidence") == (
        "analyze evidence", "Analyze the chemical evidence", "")


def test_pseudo_pairs_one_per_tool_and_kind_never_the_query_inside_its_view():
    names = ["list_bases", "list_sources", "ping"]
    texts = ["list bases: Lists all bases. Each with its name. Parameters: limit (How many).",
             "list sources: Lists the sources of a base.", "ping:"]
    p = pseudo_pairs(names, texts)
    assert list(zip(p.kind, p.queries, p.views)) == [
        ("sentence", "Lists all bases.", "list bases: Each with its name. Parameters: limit (How many)."),
        ("name", "list bases", "Lists all bases. Each with its name. Parameters: limit (How many)."),
        ("sentence", "Lists the sources of a base.", "list sources:"),
        ("name", "list sources", "Lists the sources of a base.")]
    assert p.gold.tolist() == [0, 1, 2, 3] and p.tool_of_view.tolist() == [0, 0, 1, 1]  # "ping" has no pair
    only = pseudo_pairs(names, texts, kinds=("name",))
    assert only.kind == ["name", "name"] and only.queries == ["list bases", "list sources"]


def test_the_gate_the_cache_and_what_is_not_adapted(tiny_bert_dir, tmp_path):
    reg = load_registry(FILES)
    enc = load_encoder(tiny_bert_dir)
    always = AdaptConfig(min_tools=10, margin=-1.0, tune=QUICK)  # any tuned encoder passes
    first = adapt_encoder(enc, reg.names, reg.texts, reg.fingerprint(), always, cache_dir=tmp_path, progress=False)
    r = first.report
    assert r["used"] and r["tools"] == 30 and r["kinds"] == {"sentence": 30, "name": 30}
    assert r["train_pairs"] + r["heldout_pairs"] == 60 and r["heldout_pairs"] == 12  # the pairs of 6 held-out tools
    assert 0 <= r["heldout_ndcg5_frozen"] <= 1 and len(r["epoch_scores"]) == 2
    assert first.encoder.model_id != enc.model_id and first.encoder.risk_encoder is enc
    report_file = Path(r["cache"]) / "report.json"
    stamp = report_file.stat().st_mtime_ns
    again = adapt_encoder(enc, reg.names, reg.texts, reg.fingerprint(), always, cache_dir=tmp_path, progress=False)
    assert again.encoder.model_id == first.encoder.model_id and report_file.stat().st_mtime_ns == stamp
    texts = ["delete a record", "upload a file over sftp"]
    np.testing.assert_array_equal(again.encoder.encode(texts), first.encoder.encode(texts))
    # a margin no tuned encoder can reach: the frozen encoder stays, and says why
    never = AdaptConfig(min_tools=10, margin=1.0, tune=QUICK)
    kept = adapt_encoder(enc, reg.names, reg.texts, reg.fingerprint(), never, cache_dir=tmp_path, progress=False)
    assert kept.encoder is enc and not kept.report["used"] and "does not beat" in kept.report["reason"]
    assert json.loads((Path(kept.report["cache"]) / "report.json").read_text())["used"] is False
    small = adapt_encoder(enc, reg.names, reg.texts, reg.fingerprint(), AdaptConfig(), cache_dir=tmp_path)
    assert small.encoder is enc and small.report["reason"] == "fewer than 40 tools"


def test_an_adapted_ranker_keeps_the_risk_the_frozen_one_assessed(tmp_path):
    cache = EmbeddingCache(tmp_path)
    enc = load_encoder(None)
    frozen = Ranker.from_registry(FILES, encoder=enc, cache=cache)
    adapted = Ranker.from_registry(FILES, encoder=enc, cache=cache,
                                   adapt=AdaptConfig(min_tools=10, margin=-1.0, tune=QUICK))
    report = adapted.provenance["adapted"]
    assert report["used"] and adapted.encoder_id != frozen.encoder_id
    np.testing.assert_array_equal(adapted.risk_levels, frozen.risk_levels)
    assert adapted.risk_source == frozen.risk_source
    assert not np.allclose(adapted.tool_emb, frozen.tool_emb)
    hits = adapted.rank_queries(["delete some airtable records"], k=3)[0]
    assert len(hits) == 3


def test_rank_adapt_says_what_it_did(tmp_path):
    cli = cli_invoker(str(tmp_path))
    res = cli("rank", *FILES, "--query", "delete some records", "--adapt")
    assert "adapt: not used: fewer than 40 tools" in res.stderr and "delete_records" in res.output
    refused = cli("rank", *FILES, "--query", "x", "--adapt", "--model", tmp_path, code=2)
    assert "--adapt adapts the zero-shot ranker" in refused.output
