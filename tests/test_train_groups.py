"""Training in groups of models sized by bytes: results per model do not depend on the grouping."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from riskrank_jax import metrics
from riskrank_jax.experiments.evaluate import queries_per_chunk
from riskrank_jax.model import rerank
from riskrank_jax.model.groups import group_size, map_models, plan_groups
from riskrank_jax.model.train import TrainRun, model_bytes, train_models
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.rank.stacked import plan_chunks
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET, halved_to_fit
from riskrank_jax.scoring import top_order
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
    one = train_models(*DATA, LAMBDA_CFG, TrainRun((1, 2), progress=False, memory_budget=1))  # 12 groups of 1
    every = train_models(*DATA, LAMBDA_CFG, TrainRun((1, 2), progress=False, memory_budget=1 << 40))  # 1 group of 12
    assert one.n_models == 12
    # not bit-identical: XLA's CPU kernels for the vmapped matmuls differ with the model-axis width (measured:
    # 2.2e-7 on parameters, 3e-8 on losses, the same for groups of 1, 2, 3, 4 and 6)
    _equal_trees(one.params, every.params, atol=1e-6)
    np.testing.assert_allclose(one.heldout_loss, every.heldout_loss, atol=1e-6, rtol=0)
    np.testing.assert_allclose(one.train_loss, every.train_loss, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(one.best_epoch, every.best_epoch)


def test_reranker_one_model_per_group_equals_one_group_and_scores_heldout_queries_only():
    qe, t, bm25, gold = _synthetic_registry()
    cfg = rerank.RerankConfig(low_rank=8, steps=40, eval_every=10, negatives=20)
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


# The planners as they were before their rules moved to runtime.memory: chunk and group sizes must not change.
def _old_group_size(n_models, bytes_per_model, budget, multiple=1):
    fit = max(1, int(budget) // max(1, int(bytes_per_model)))
    n_groups = -(-n_models // fit)
    size = -(-n_models // n_groups)
    return max(multiple, -(-size // multiple) * multiple)


def _old_plan_chunks(n_models, n_queries, n_tools, bytes_per_pair, budget):
    per_query = max(1, n_tools * bytes_per_pair)
    q = max(1, min(256, n_queries))
    while q > 1 and q * per_query > budget:
        q = (q + 1) // 2
    return int(max(1, min(n_models, budget // (q * per_query)))), q


def _old_queries_per_chunk(n_queries, n_tools, rows, budget, step=64):
    per_query = max(1, 4 * n_tools * rows)
    c_max = int(max(1, budget // per_query))
    if c_max >= step:
        c_max -= c_max % step
    n_chunks = max(1, -(-n_queries // c_max))
    c = max(1, -(-n_queries // n_chunks))
    return min(c_max, -(-c // step) * step) if c_max >= step else c


def _old_held_chunk(fixed, per_row, n_held, budget):
    chunk = max(1, n_held)
    while chunk > 1 and fixed + chunk * per_row > budget:
        chunk = (chunk + 1) // 2
    return chunk


def test_planners_keep_their_sizes_at_the_default_budget_and_beyond():
    budgets = (DEFAULT_MEMORY_BUDGET, 1 << 20, 1 << 24, 3 << 28, 1 << 33, 1, 0)
    tools = (1, 50, 263, 2032, 4076, 9999)  # demo 263, Seal-Tools / UltraTool-sized registries
    queries = (0, 1, 63, 64, 65, 149, 654, 700, 1000, 5000)
    for budget in budgets:
        for n in (1, 2, 3, 5, 7, 12, 15, 36, 60, 61):
            for per in (1, 10, 768, 20 << 20, 5 << 30):
                for mult in (1, 2, 4):
                    assert group_size(n, per, budget, mult) == _old_group_size(n, per, budget, mult)
        for n_t in tools:
            for n_q in queries:
                for rows in (1, 12, 145, 400):
                    assert queries_per_chunk(n_q, n_t, rows, budget) == _old_queries_per_chunk(n_q, n_t, rows, budget)
                for m in (0, 1, 3, 15, 60):
                    for bpp in (0, 204, 768, 3840):
                        assert plan_chunks(m, n_q, n_t, bpp, budget) == _old_plan_chunks(m, n_q, n_t, bpp, budget)
        for fixed in (0, 1 << 20, 900 << 20, 2 << 30):
            for per_row in (1, 40 * 263 * 2, 40 * 4076 * 3):
                for held in (0, 1, 15, 149, 1000):
                    assert halved_to_fit(held, per_row, budget, fixed) == _old_held_chunk(fixed, per_row, held, budget)


def test_the_demo_sweeps_plans_at_the_default_budget():
    # what `python -m riskrank_jax.sweep --benchmark demo` planned (its calls logged), unchanged
    B = DEFAULT_MEMORY_BUDGET

    assert [group_size(m, b, B) for m, b in ((3, 8504592), (9, 8504592), (3, 12472632), (3, 21025676))] == [3, 9, 3, 3]
    assert rerank.plan_memory(203, 263, 3, 22, 384, rerank.RerankConfig(), B) == (21025676, 22)
    assert queries_per_chunk(149, 263, 194, B) == 192
    assert [plan_chunks(m, 192, 263, b, B) for m, b in ((3, 768), (12, 768), (3, 3840))] == [(3, 192), (12, 192), (3, 192)]
