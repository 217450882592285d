"""Training in groups of models sized by bytes: results per model do not depend on the grouping."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from riskrank_jax import metrics
from riskrank_jax.model import rerank
from riskrank_jax.model.groups import group_size, plan_groups
from riskrank_jax.scoring import top_order
from riskrank_jax.model.train import TrainConfig, model_bytes, train_models
from tests.test_beyond import _synthetic_registry
from tests.test_train import DATA

LAMBDA_CFG = TrainConfig(epochs=3, batch_size=16, hidden=16, lambda_aware=True, lambdas=(0.0, 0.1, 0.2))


def _equal_trees(a, b, atol=0.0):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


def test_plan_groups_balances_and_pads_with_the_last_model():
    assert group_size(60, 20 << 20, 1 << 30) == 30  # 51 fit: two balanced groups of 30
    assert group_size(15, 100, 1) == 1  # nothing fits: one model per group
    groups = plan_groups(7, 10, 30)  # 3 fit -> groups of 3, the last padded
    assert [n for _, n in groups] == [3, 3, 1]
    assert groups[2][0].tolist() == [6, 6, 6]
    assert group_size(5, 10, 30, multiple=4) == 4  # a multiple of the device count
    with pytest.raises(ValueError):
        group_size(0, 10, 30)


def test_model_bytes_grows_with_the_heldout_rows_and_the_interact_head():
    base = model_bytes(TrainConfig(), 384, 35_000, 850)
    assert 10 << 20 < base < 40 << 20  # XLA counts ~12.7 MB per model for UltraTool's λ-aware run
    assert model_bytes(TrainConfig(), 384, 35_000, 1700) > base
    assert model_bytes(TrainConfig(rel_features="interact"), 384, 35_000, 850) > base


def test_dual_heads_one_model_per_group_equal_one_group():
    one = train_models(*DATA, (1, 2), LAMBDA_CFG, progress=False, memory_budget=1)  # 12 groups of 1
    every = train_models(*DATA, (1, 2), LAMBDA_CFG, progress=False, memory_budget=1 << 40)  # 1 group of 12
    assert one.n_models == 12
    # not bit-identical: XLA's CPU kernels for the vmapped matmuls differ with the model-axis width (measured:
    # 2.2e-7 on parameters, 3e-8 on losses, the same for groups of 1, 2, 3, 4 and 6)
    _equal_trees(one.params, every.params, atol=1e-6)
    np.testing.assert_allclose(one.heldout_loss, every.heldout_loss, atol=1e-6, rtol=0)
    np.testing.assert_allclose(one.train_loss, every.train_loss, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(one.best_epoch, every.best_epoch)


def test_reranker_one_model_per_group_equals_one_group_and_scores_heldout_queries_only():
    qe, t, bm25, gold = _synthetic_registry()
    cfg = rerank.RerankConfig(rank=8, steps=40, eval_every=10, n_candidates=20)
    fold_mask = np.zeros((2, qe.shape[0]), bool)
    fold_mask[0, :80], fold_mask[1, 40:] = True, True
    one = rerank.train_rerankers(qe, t, bm25, gold, fold_mask, (1, 2), cfg, memory_budget=1)  # 1 query per block
    every = rerank.train_rerankers(qe, t, bm25, gold, fold_mask, (1, 2), cfg, memory_budget=1 << 40)
    _equal_trees(one.params, every.params, atol=1e-6)  # measured 1.6e-7 (matmul kernels, as above)
    np.testing.assert_array_equal(one.gate, every.gate)
    np.testing.assert_allclose(one.heldout_ndcg_by_gate, every.heldout_ndcg_by_gate, atol=1e-6, rtol=0)
    # the held-out NDCG@5 per gate is the full-pool one, masked to each model's held-out queries
    feats = rerank.features(qe, t, bm25)
    for m in range(4):
        p = jax.tree.map(lambda x: x[m], every.params)  # noqa: B023
        for i, g in enumerate(cfg.gates):
            s = rerank.gated_scores(p, float(every.weight[m]), g, qe, t, feats)
            per_q = np.asarray(metrics.ndcg_at_k(top_order(s, 5), gold, k=5))
            held = every.heldout_mask[m]
            np.testing.assert_allclose(every.heldout_ndcg_by_gate[m, i], per_q[held].mean(), atol=1e-6)


def test_map_models_equals_vmap():
    """map_models over a model axis (lax.map on one CPU device) gives vmap's result; shared args are not mapped."""
    import jax
    import jax.numpy as jnp

    from riskrank_jax.model.groups import map_models

    def fn(w, x, b):  # one model: w [3, 4], shared x [5, 3], b [4]
        return jnp.tanh(x @ w + b).sum(0), (w * 2.0).max()

    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(6, 3, 4)), jnp.float32)
    x = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)
    got = jax.jit(map_models(fn, in_axes=(0, None, 0)))(w, x, b)
    want = jax.vmap(fn, in_axes=(0, None, 0))(w, x, b)
    assert got[0].shape == (6, 4) and got[1].shape == (6,)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), atol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), atol=0)
    with pytest.raises(ValueError, match="in_axes"):
        map_models(fn, in_axes=(1, None, 0))
