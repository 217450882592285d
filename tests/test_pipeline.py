"""Stacked-model stages: per-fold model scoring (with memory chunking) and per-fold smoothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.graph import smoothing
from riskrank_jax.graph.tool_graph import build_fold_graphs
from riskrank_jax.model import heads as model
from riskrank_jax.rank import stacked as pipeline

S, F, Q, N, D = 2, 3, 7, 11, 8


def _stacked_params(rel_features="concat"):
    keys = jax.random.split(jax.random.key(0), S * F)  # model m = s * F + f
    return jax.vmap(lambda k: model.init_params(k, D, 16, rel_features))(keys)


def _data():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(Q, D)).astype(np.float32)
    t = rng.normal(size=(N, D)).astype(np.float32)
    fold = np.array([0, 2, 1, 2, 0, 1, 2])
    return q, t, fold


def _expected(params, q, t, fold):
    rel = np.zeros((S, Q, N), np.float32)
    risk = np.zeros((S, Q, N), np.float32)
    for s in range(S):
        for i in range(Q):
            p = jax.tree.map(lambda x: x[s * F + fold[i]], params)
            rel[s, i] = np.asarray(model.relevance_full(p, q[i:i + 1], t))[0]
            risk[s, i] = np.asarray(model.risk(p, t))
    return rel, risk


def test_model_scores_use_each_querys_fold_model():
    params = _stacked_params()
    q, t, fold = _data()
    rel, risk = pipeline.model_scores(params, q, t, n_seeds=S, test_fold=fold)
    want_rel, want_risk = _expected(params, q, t, fold)
    assert rel.shape == (S, Q, N) and risk.shape == (S, Q, N)
    np.testing.assert_allclose(np.asarray(rel), want_rel, atol=1e-6)
    np.testing.assert_allclose(np.asarray(risk), want_risk, atol=1e-6)


def test_model_scores_chunked_by_memory_budget_match():
    params = _stacked_params("interact")
    q, t, fold = _data()
    full = pipeline.model_scores(params, q, t, n_seeds=S, test_fold=fold)
    tiny = pipeline.pair_bytes(params, D) * N * 2  # room for two (model, query) pairs per call
    assert pipeline.plan_chunks(S, Q, N, pipeline.pair_bytes(params, D), tiny) == (1, 2)
    chunked = pipeline.model_scores(params, q, t, n_seeds=S, test_fold=fold, memory_budget=tiny)
    for a, b in zip(full, chunked):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_plan_chunks_respects_budget():
    # 60 models x 256 queries x 2032 tools x 768 bytes would be 8 GB; 1 GiB allows two models per call
    m, q = pipeline.plan_chunks(60, 1000, 2032, 768, 1 << 30)
    assert (m, q) == (2, 256) and m * q * 2032 * 768 <= 1 << 30
    assert pipeline.plan_chunks(3, 149, 263, 768, 1 << 30) == (3, 149)


def test_single_fold_risk_broadcasts():
    params = jax.tree.map(lambda x: x[:S], _stacked_params())  # F = 1
    q, t, _ = _data()
    rel, risk = pipeline.model_scores(params, q, t, n_seeds=S, test_fold=np.zeros(Q, np.int32))
    assert rel.shape == (S, Q, N) and risk.shape == (S, 1, N)
    np.testing.assert_allclose(np.asarray(risk[1, 0]), np.asarray(model.risk(jax.tree.map(lambda x: x[1], params), t)),
                               atol=1e-7)


def test_smooth_per_fold_uses_each_querys_graph():
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(N, D)).astype(np.float32)
    perm = rng.random((N, 5)) < 0.3
    risk = rng.integers(1, 6, N)
    gold = rng.integers(0, N, size=(30, 3))
    fold_mask = np.stack([np.arange(30) % 3 != f for f in range(3)])
    graphs = build_fold_graphs(emb, perm, risk, gold, fold_mask)
    assert len({g.n_edges for g in graphs}) > 1 or not np.array_equal(graphs[0].weights, graphs[1].weights)
    _, _, fold = _data()
    scores = jnp.asarray(rng.normal(size=(2, S, Q, N)).astype(np.float32))  # [L, S, Q, N]
    out = pipeline.smooth_per_fold(scores, graphs, fold, 0.2)
    assert out.shape == scores.shape
    for i in range(Q):
        want = smoothing.smooth_full(scores[:, :, i].reshape(-1, N), graphs[fold[i]], 0.2).reshape(2, S, N)
        np.testing.assert_allclose(np.asarray(out[:, :, i]), np.asarray(want), atol=1e-6)
