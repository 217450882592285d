"""Ranker: built from the demo registry, ranked, saved, loaded, refused when it does not match."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from riskrank_jax.data import load_benchmark
from riskrank_jax.errors import RankerError
from riskrank_jax.experiments.evaluate import EvalSettings, SplitEvaluation, SplitInputs
from riskrank_jax.experiments.variants import BY_NAME
from riskrank_jax.graph.tool_graph import build_fold_graphs
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.rank.ranker import RankConfig, Ranker, query_bucket
from riskrank_jax.retrieve.first_stage import dense_scores
from riskrank_jax.scoring import is_risky, rank_order


def bow(texts, dim=64):
    """Hashed bag of words, L2-normalised (a fast stand-in for the sentence encoder)."""
    out = np.full((len(texts), dim), 1e-3, np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def demo():
    bench = load_benchmark("demo")
    t_emb = bow(bench.tools.descriptions)
    res = train_models(t_emb, bow(bench.train.texts), bench.train.gold, bench.tools.risk, bench.train_fold_mask,
                       TrainConfig(epochs=2), TrainRun((3,), progress=False))
    cfg = BY_NAME["core_graph_rule"].rank_config(lam=0.1, alpha=0.2, k=5, n_candidates=100)
    ranker = Ranker.from_benchmark(bench, t_emb, encoder_id="bow-64", params=res.model_params(0), config=cfg)
    return bench, t_emb, res, ranker, bow(bench.tests["test"].texts)


def test_rank_shape_rule_filter_and_parts(demo):
    bench, _, _, ranker, q = demo
    ids = ranker.rank(q)
    assert ids.shape == (q.shape[0], 5) and ids.dtype == np.int32
    assert all(len(set(row)) == 5 for row in ids)
    parts = ranker.scores(q)
    assert all(x.shape == (q.shape[0], bench.tools.size) for x in parts)
    np.testing.assert_allclose(np.asarray(parts.total),
                               np.asarray(parts.relevance - parts.risk_penalty + parts.graph), atol=1e-5)
    assert float(np.abs(np.asarray(parts.graph)).max()) > 0  # the ToolGraph moved some scores
    # the rule filter admits at most one risky tool into the top 5 unless deferred tools must fill it
    plain = np.asarray(rank_order(parts.total))[:, :5]
    risky = is_risky(bench.tools.risk)
    assert risky[ids].sum() <= risky[plain].sum()
    assert (risky[ids].sum(-1) <= 1).mean() > 0.9


def test_same_ranking_as_the_experiments(demo):
    bench, t_emb, res, ranker, q = demo
    v = BY_NAME["core_graph_rule"]
    qs = bench.tests["test"]
    inputs = SplitInputs(q, bench.test_fold["test"], qs.gold, tuple(qs.texts), t_emb, bench.tools.risk,
                         bench.tools.perm_level, tuple(bench.tools.descriptions))
    graphs = {"train": build_fold_graphs(t_emb, bench.tools.perm_mask, bench.tools.risk, bench.train.gold,
                                         bench.train_fold_mask)}
    ev = SplitEvaluation(inputs, {"core": res}, graphs, EvalSettings((0.0, 0.1), 0.1, 0.2, 5, 100, 1, 1 << 30))
    sweep = np.asarray(ev.ranking(v))[1, 0, :, :5]  # λ = 0.1, the only seed
    same = (sweep == ranker.rank(q)).all(-1)
    assert same.mean() >= 0.97, same.mean()  # jit vs eager rounding may swap near-ties


def test_save_load_identical(demo, tmp_path):
    _, _, _, ranker, q = demo
    ranker.save(tmp_path / "r")
    loaded = Ranker.load(tmp_path / "r", expect_encoder_id="bow-64",
                         expect_registry_fingerprint=ranker.registry_fingerprint)
    np.testing.assert_array_equal(loaded.rank(q, k=10), ranker.rank(q, k=10))
    np.testing.assert_array_equal(np.asarray(loaded.scores(q).total), np.asarray(ranker.scores(q).total))
    assert loaded.config == ranker.config and loaded.tool_names == ranker.tool_names
    assert loaded.risk_source == ranker.risk_source and loaded.provenance["benchmark"] == "demo"


def test_load_refuses_other_encoder_or_registry(demo, tmp_path):
    _, _, _, ranker, _ = demo
    ranker.save(tmp_path / "r")
    with pytest.raises(RankerError, match="encoder 'bow-64'.*'all-MiniLM"):
        Ranker.load(tmp_path / "r", expect_encoder_id="all-MiniLM-L6-v2")
    with pytest.raises(RankerError, match="registry"):
        Ranker.load(tmp_path / "r", expect_registry_fingerprint="0123456789abcdef")
    with pytest.raises(RankerError, match="manifest missing"):
        Ranker.load(tmp_path / "nothing")


def test_bucket_padding_and_candidates(demo):
    _, _, _, ranker, q = demo
    assert query_bucket(1) == 1 and query_bucket(3) == 4 and query_bucket(9) == 16
    one = ranker.rank(q[3:4], k=5)
    np.testing.assert_array_equal(one[0], ranker.rank(q[:9], k=5)[3])
    cand = ranker.with_config(RankConfig(lam=0.1, alpha=0.2, first_stage="dense", n_candidates=20))
    ids = cand.rank(q, k=5)
    top20 = np.asarray(rank_order(dense_scores(q, ranker.tool_emb)))[:, :20]
    assert all(set(row) <= set(t) for row, t in zip(ids, top20))
    assert np.isinf(np.asarray(cand.scores(q).total)).sum(-1).min() == ranker.size - 20


def test_zero_shot_relevance_is_cosine(demo):
    bench, t_emb, _, _, q = demo
    zs = Ranker.from_benchmark(bench, t_emb, encoder_id="bow-64", config=RankConfig(lam=0.2))
    parts = zs.scores(q)
    np.testing.assert_allclose(np.asarray(parts.relevance), np.asarray(dense_scores(q, t_emb)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(parts.risk_penalty[0]), 0.2 * (bench.tools.risk - 1) / 4, atol=1e-6)


def test_config_errors():
    with pytest.raises(RankerError, match="first_stage must be one of none, dense, bm25, hybrid"):
        RankConfig(first_stage="rrf")
    with pytest.raises(RankerError):
        RankConfig(n_candidates=10)  # needs a first stage
    with pytest.raises(RankerError):
        RankConfig(lam=-1.0)


def test_package_exposes_ranker_lazily():
    """`from riskrank_jax import Ranker` works, and importing riskrank_jax alone does not import the ranker."""
    import subprocess
    import sys

    code = ("import sys, riskrank_jax\n"
            "assert 'riskrank_jax.rank.ranker' not in sys.modules\n"
            "from riskrank_jax import RankConfig, Ranker\n"
            "import riskrank_jax.rank.ranker as m\n"
            "assert Ranker is m.Ranker and RankConfig is m.RankConfig\n"
            "try:\n    riskrank_jax.no_such_name\nexcept AttributeError:\n    print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_full_pool_graph_smoothing(demo):
    """Full pool with α > 0: total is the ToolGraph smoothing of relevance − risk_penalty (the sweep's
    neighbour-list kernel on the ranker's graph) and equals the dense formula; rank follows total."""
    from riskrank_jax.graph.smoothing import smooth_full

    _, _, _, ranker, q = demo
    full = ranker.with_config(RankConfig(lam=0.1, alpha=0.2, k=5))
    parts = full.scores(q)
    pen = np.asarray(parts.relevance - parts.risk_penalty, np.float64)
    a = full.graph.dense.astype(np.float64)
    d = a.sum(1)
    dinv = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
    ref = 0.5 * (pen + 0.8 * pen + 0.2 * pen @ (a * dinv[:, None] * dinv[None, :]).T)
    np.testing.assert_allclose(np.asarray(parts.total), ref, atol=1e-5)
    np.testing.assert_allclose(np.asarray(parts.total), np.asarray(smooth_full(pen.astype(np.float32), full.graph, 0.2)),
                               atol=1e-6)
    assert float(np.abs(np.asarray(parts.graph)).max()) > 1e-3
    np.testing.assert_array_equal(full.rank(q), np.asarray(rank_order(parts.total))[:, :5])
    np.testing.assert_array_equal(full.rank(q[:3]), full.rank(q)[:3])  # another query bucket, same lists


def test_prepared_is_built_once_and_follows_the_arrays(demo):
    """``with_config`` copies share the stages' prepared inputs (adding the BM25 index when a config needs it);
    a ranker whose arrays changed builds its own, so no stale graph or embedding is ever used."""
    bench, t_emb, _, ranker, q = demo
    assert ranker.prepared.bm25 is None  # no first stage needs it
    lam0 = ranker.with_config(dataclasses.replace(ranker.config, lam=0.0))
    assert lam0.prepared is ranker.prepared
    hybrid = ranker.with_config(dataclasses.replace(ranker.config, first_stage="hybrid"))
    assert hybrid.prepared.bm25 is not None and hybrid.prepared.device is ranker.prepared.device
    no_graph = dataclasses.replace(ranker, graph=None)
    assert no_graph.prepared is not ranker.prepared and no_graph.prepared.graph_tables is None
    np.testing.assert_array_equal(no_graph.rank(q),
                                  ranker.with_config(dataclasses.replace(ranker.config, alpha=0.0)).rank(q))
    assert not np.array_equal(no_graph.rank(q), ranker.rank(q))  # the graph moved some tools
