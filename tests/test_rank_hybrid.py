"""Ranker with first_stage='hybrid', and Ranker.from_registry over inline tool lists (hashed bag-of-words
encoder, declared risk: no model download, no risk head)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from riskrank_jax.data import load_benchmark
from riskrank_jax.errors import RankerError
from riskrank_jax.rank.ranker import RankConfig, Ranker
from riskrank_jax.retrieve import hybrid
from riskrank_jax.retrieve.baselines import bm25_scores
from riskrank_jax.retrieve.first_stage import dense_scores
from riskrank_jax.scoring import level_to_score, rank_order


def bow(texts, dim=64):
    out = np.full((len(texts), dim), 1e-3, np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().replace(".", " ").replace(":", " ").split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


class BowEncoder:
    model_id, dim = "bow-64", 64

    def encode(self, texts, *, batch_size=64, progress=None):
        return bow(list(texts))


@pytest.fixture(scope="module")
def demo():
    bench = load_benchmark("demo")
    t_emb = bow(bench.tools.descriptions)
    qs = bench.tests["test"]
    return bench, t_emb, bow(qs.texts), list(qs.texts)


def test_hybrid_first_stage_is_the_z_score_fusion(demo):
    bench, t_emb, q_emb, texts = demo
    r = Ranker.from_benchmark(bench, t_emb, encoder_id="bow-64",
                              config=RankConfig(lam=0.5, first_stage="hybrid", hybrid_weight=0.3))
    dense = np.asarray(dense_scores(q_emb, t_emb))
    bm25 = bm25_scores(list(bench.tools.descriptions), texts)
    fused = np.asarray(hybrid.fuse(dense, bm25, 0.3))
    np.testing.assert_allclose(r.first_stage_scores(q_emb, texts), fused, atol=1e-5)
    # zero-shot: relevance is the fused score, total = fused − λ·(r − 1)/4 (no graph)
    parts = r.scores(q_emb, texts)
    np.testing.assert_allclose(np.asarray(parts.relevance), fused, atol=1e-5)
    expected = fused - 0.5 * level_to_score(bench.tools.risk)
    np.testing.assert_allclose(np.asarray(parts.total), expected, atol=1e-5)
    np.testing.assert_array_equal(r.rank(q_emb, k=5, q_texts=texts), np.asarray(rank_order(expected))[:, :5])
    # the fused stage differs from either retriever alone on these queries
    assert (np.asarray(rank_order(fused))[:, 0] != np.asarray(rank_order(dense))[:, 0]).any()


def test_hybrid_candidates_and_errors(demo, tmp_path):
    bench, t_emb, q_emb, texts = demo
    r = Ranker.from_benchmark(bench, t_emb, encoder_id="bow-64",
                              config=RankConfig(lam=0.5, first_stage="hybrid", n_candidates=20))
    ids = r.rank(q_emb, k=5, q_texts=texts)
    cand = np.asarray(rank_order(r.first_stage_scores(q_emb, texts)))[:, :20]
    assert all(set(row) <= set(c) for row, c in zip(ids, cand))
    with pytest.raises(RankerError, match="needs q_texts"):
        r.rank(q_emb, k=5)
    with pytest.raises(RankerError, match="hybrid_weight"):
        RankConfig(first_stage="hybrid", hybrid_weight=1.5)
    loaded = Ranker.load(r.with_config(RankConfig(first_stage="hybrid", hybrid_weight=0.8)).save(tmp_path / "r"))
    assert loaded.config.first_stage == "hybrid" and loaded.config.hybrid_weight == 0.8


TOOLS = [
    {"name": "read_file", "description": "Read the contents of a file.", "risk": 1},
    {"name": "delete_file", "description": "Delete a file permanently.", "risk": 4},
    {"name": "list_files", "description": "List the files in a folder.", "risk": 1},
    {"name": "overwrite_file", "description": "Overwrite a file with new contents.", "risk": 3},
    {"name": "send_payment", "description": "Send a payment to a recipient.", "risk": 5},
    {"name": "get_weather", "description": "Get the weather forecast for a city."},
]


def test_from_registry_records_and_min_score(tmp_path):
    from riskrank_jax.encode.embedding_cache import EmbeddingCache

    r = Ranker.from_registry(TOOLS[:5], encoder=BowEncoder(), cache=EmbeddingCache(tmp_path),
                             config=RankConfig(lam=1.0, alpha=0.2, first_stage="hybrid"))
    assert r.size == 5 and r.risk_source == ("declared",) * 5 and r.graph is not None
    assert r.provenance["risk_head"] == "dimensions (every level declared: no risk model used)"
    hits = r.rank_queries(["delete the file", "read the file"], k=3)
    assert [len(h) for h in hits] == [3, 3]
    top = hits[0][0]
    assert (top.rank, top.name, top.risk_level, top.risk_source, top.risky) == (1, "delete_file", 4, "declared", True)
    assert all(a.score >= b.score for a, b in zip(hits[1], hits[1][1:]))
    cut = (hits[1][1].score + hits[1][2].score) / 2
    kept = r.rank_queries("read the file", k=3, min_score=cut)[0]
    assert [h.name for h in kept] == [h.name for h in hits[1][:2]]
    # λ = 0 keeps a risky tool in the read-only request's top 3 that λ = 1 pushes out
    zero = r.with_config(RankConfig(lam=0.0, alpha=0.2, first_stage="hybrid"))
    risky = lambda hs: sum(h.risky for h in hs)  # noqa: E731
    assert risky(r.rank_queries(["read the file"], k=3)[0]) < risky(zero.rank_queries(["read the file"], k=3)[0])


def test_from_registry_errors(tmp_path):
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.registry import EmptyRegistryError, RiskHeadError

    cache = EmbeddingCache(tmp_path)
    r = Ranker.from_registry(TOOLS[:5], encoder=BowEncoder(), cache=cache)
    for bad, msg in (([], "no query"), (["  "], "query 1 is empty"), ([3], "not a string")):
        with pytest.raises(RankerError, match=msg):
            r.rank_queries(bad)
    with pytest.raises(RankerError, match="k must be in 1..5"):
        r.rank_queries(["x"], k=6)
    with pytest.raises(EmptyRegistryError):
        Ranker.from_registry([], encoder=BowEncoder(), cache=cache)
    # an undeclared risk needs the shipped risk model, which is for another encoder
    with pytest.raises(RiskHeadError, match="trained on"):
        Ranker.from_registry(TOOLS, encoder=BowEncoder(), cache=cache)
