"""Hybrid first stage, correction reranker and risk budget (beyond the paper), on small synthetic data."""

from __future__ import annotations

import numpy as np
import pytest

from riskrank_jax import metrics
from riskrank_jax.model import rerank
from riskrank_jax.rank import risk_budget as budget
from riskrank_jax.retrieve import hybrid
from riskrank_jax.scoring import rank_order


def test_zscore_and_fuse():
    s = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]], np.float32)
    z = np.asarray(hybrid.zscore(s))
    np.testing.assert_allclose(z[0], [-1.2247449, 0.0, 1.2247449], atol=1e-6)
    np.testing.assert_array_equal(z[1], 0.0)  # a constant row maps to 0, not NaN
    d, b = np.array([[0.9, 0.1, 0.5]]), np.array([[0.0, 3.0, 1.0]])
    np.testing.assert_allclose(hybrid.fuse(d, b, 1.0), hybrid.zscore(d), atol=1e-6)
    np.testing.assert_allclose(hybrid.fuse(d, b, 0.0), hybrid.zscore(b), atol=1e-6)
    # scale-free: multiplying BM25 by 10 changes nothing
    np.testing.assert_allclose(hybrid.fuse(d, b, 0.4), hybrid.fuse(d, 10 * b, 0.4), atol=1e-5)


def test_choose_weight_picks_the_informative_retriever():
    rng = np.random.default_rng(0)
    q, n = 40, 30
    gold = rng.integers(0, n, size=(q, 1))
    good = rng.normal(size=(q, n))
    good[np.arange(q), gold[:, 0]] += 5.0  # dense finds the gold tool, BM25 is noise
    noise = rng.normal(size=(q, n))
    w, table = hybrid.choose_weight(good, noise, gold)
    assert w >= 0.8 and table[w] == max(table.values()) and table[1.0] > table[0.0] + 0.5
    w2, _ = hybrid.choose_weight(noise, good, gold)
    assert w2 <= 0.2


def test_choose_weights_per_subset_equals_choose_weight_on_each_subset():
    rng = np.random.default_rng(1)
    q, n = 40, 30
    gold = rng.integers(0, n, size=(q, 1))
    good = rng.normal(size=(q, n))
    good[np.arange(q), gold[:, 0]] += 2.0
    noise = rng.normal(size=(q, n))
    dense = np.where(np.arange(q)[:, None] < 20, good, noise)  # dense informative on the first half only
    bm25 = np.where(np.arange(q)[:, None] < 20, noise, good)
    masks = np.stack([np.arange(q) < 20, np.arange(q) >= 20, np.arange(q) % 3 == 0])
    ws = hybrid.choose_weights(dense, bm25, gold, masks)
    assert ws[0] >= 0.7 and ws[1] <= 0.3
    expected = np.asarray([hybrid.choose_weight(dense[m], bm25[m], gold[m])[0] for m in masks], np.float32)
    np.testing.assert_array_equal(ws, expected)


def _synthetic_registry(seed=0, q=120, n=60, d=16):
    """Queries are noisy linear images of their gold tool's embedding, so a learned map helps."""
    rng = np.random.default_rng(seed)
    t = rng.normal(size=(n, d)).astype(np.float32)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    gold = rng.integers(0, n, size=(q, 1)).astype(np.int32)
    mix = np.eye(d, dtype=np.float32)[rng.permutation(d)]  # queries live in a permuted space
    qe = t[gold[:, 0]] @ mix + 0.3 * rng.normal(size=(q, d)).astype(np.float32)
    qe /= np.linalg.norm(qe, axis=1, keepdims=True)
    bm25 = np.abs(rng.normal(size=(q, n))).astype(np.float32)
    return qe, t, bm25, gold


def test_reranker_learns_and_gate_never_loses_on_heldout():
    qe, t, bm25, gold = _synthetic_registry()
    cfg = rerank.RerankConfig(low_rank=16, steps=200, eval_every=20, negatives=30)
    fold_mask = np.ones((1, qe.shape[0]), bool)
    models = rerank.train_rerankers(qe, t, bm25, gold, fold_mask, (1, 2), cfg)
    assert models.heldout_ndcg_by_gate.shape == (2, len(cfg.gates))
    by_gate = models.heldout_ndcg_by_gate
    chosen = by_gate[np.arange(2), [cfg.gates.index(g) for g in models.gate]]
    assert np.all(chosen >= by_gate[:, 0] - 1e-6)  # never below the first stage (γ = 0) on held-out queries
    assert np.all(models.gate > 0)  # the learned map helps here, so the gate opens
    # scores of unseen queries from the same distribution beat the first stage
    q2, _, b2, g2 = _synthetic_registry(seed=0)  # same tools and mixing, same queries -> check shapes
    s = rerank.rerank_scores(models, q2, t, b2, n_seeds=2, test_fold=np.zeros(q2.shape[0], np.int32))
    assert s.shape == (2, q2.shape[0], t.shape[0])
    first = hybrid.fuse(q2 @ t.T, b2, float(models.weight[0]))
    ndcg = lambda x: float(metrics.ndcg_at_k(rank_order(x), g2, k=5).mean())  # noqa: E731
    assert ndcg(s[0]) > ndcg(first) + 0.1


def test_training_candidates_put_gold_first_and_exclude_it_from_negatives():
    feats = rerank.features(np.eye(4, dtype=np.float32), np.eye(4, dtype=np.float32), np.ones((4, 4), np.float32))
    gold = np.array([[2, -1], [0, 1], [3, -1], [1, -1]], np.int32)
    cand = np.asarray(rerank.training_candidates(feats, gold, 1.0, 2))
    np.testing.assert_array_equal(cand[:, :2], gold)
    for row, g in zip(cand, gold):
        assert not set(row[2:].tolist()) & set(g[g >= 0].tolist())


def test_lambda_for_budget():
    lams = (0.0, 0.5, 1.0, 2.0)
    assert budget.lambda_for_budget([0.3, 0.12, 0.05, 0.01], lams, 0.05) == (1.0, 2)
    assert budget.lambda_for_budget([0.3, 0.12, 0.05, 0.01], lams, 0.5) == (0.0, 0)
    assert budget.lambda_for_budget([0.3, 0.2, 0.15, 0.1], lams, 0.05) == (2.0, 3)  # unreachable: largest λ


def test_rvr_by_lambda_falls_as_lambda_grows():
    rel = np.array([[1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]], np.float32)
    levels = np.array([5, 4, 3, 1, 1, 1, 1, 1])
    risk = (levels - 1) / 4.0
    rvr = np.asarray(budget.rvr_by_lambda(rel, risk, levels, (0.0, 1.0, 3.0), k=5))
    np.testing.assert_allclose(rvr[:, 0], [0.6, 0.2, 0.0], atol=1e-6)


def test_rvr_by_lambda_over_stacked_models_equals_one_model_at_a_time():
    rng = np.random.default_rng(3)
    rel = rng.normal(size=(4, 6, 30)).astype(np.float32)  # 4 models x 6 queries x 30 tools
    levels = rng.integers(1, 6, 30)
    risk = rng.uniform(size=(4, 1, 30)).astype(np.float32)  # each model's own risk scores
    lams = (0.0, 0.5, 1.0, 2.0)
    stacked = np.asarray(budget.rvr_by_lambda(rel, risk, levels, lams, k=5))
    assert stacked.shape == (4, 4, 6)
    for m in range(4):
        one = np.asarray(budget.rvr_by_lambda(rel[m], risk[m, 0], levels, lams, k=5))
        np.testing.assert_array_equal(stacked[:, m], one)
    assert not np.array_equal(stacked[0], stacked[-1])  # λ changes the top 5


def test_pair_products_value_and_gradient():
    """rerank.pair_products (matmul + gather, custom scatter gradient) equals gathering the factor rows, also
    with repeated candidate ids (padding slots all point at tool 0)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    qu = jnp.asarray(rng.normal(size=(7, 4)), jnp.float32)
    tv = jnp.asarray(rng.normal(size=(11, 4)), jnp.float32)
    cand = jnp.asarray(np.concatenate([rng.integers(0, 11, (7, 5)), np.zeros((7, 2), int)], 1), jnp.int32)
    weight = jnp.asarray(rng.normal(size=(7, 7)), jnp.float32)

    def ref(a, b):
        return jnp.einsum("qr,qkr->qk", a, b[cand])

    np.testing.assert_allclose(np.asarray(rerank.pair_products(qu, tv, cand)), np.asarray(ref(qu, tv)), atol=1e-6)
    g_new = jax.grad(lambda a, b: jnp.sum(weight * rerank.pair_products(a, b, cand)), argnums=(0, 1))(qu, tv)
    g_ref = jax.grad(lambda a, b: jnp.sum(weight * ref(a, b)), argnums=(0, 1))(qu, tv)
    for got, want in zip(g_new, g_ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
        assert np.abs(np.asarray(want)).max() > 0.1
