"""Hybrid first stage: BM25 and dense cosine fused per query.

    z = zscore(scores)                                  # per query: (s − mean) / std over the pool
    s = fuse(dense, bm25, w)                            # w·z(dense) + (1 − w)·z(bm25)     [..., Q, N]
    w, table = choose_weight(dense, bm25, gold)         # w on a grid, by NDCG@5 on labelled queries
    ws = choose_weights(dense, bm25, gold, fold_mask)   # one w per query subset [F], one jitted call

Why a z-score sum and not reciprocal rank fusion: RRF throws away how far apart the scores are, and a tool
both retrievers score far above the rest is a near-certain hit (the NDCG@5 comparison is in docs/beyond.md §2).
The weight is chosen on labelled training queries; without any, ``DEFAULT_WEIGHT`` (0.6, the
median of the weights chosen on the three benchmarks) is used.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.scoring import top_order

DEFAULT_WEIGHT = 0.6
WEIGHT_GRID = tuple(round(0.1 * i, 1) for i in range(11))
_EPS = 1e-6


def zscore(scores):
    """(s − mean_N s) / std_N s over the last axis; a constant row maps to 0. [..., N] -> [..., N]."""
    s = jnp.asarray(scores, jnp.float32)
    mean = s.mean(-1, keepdims=True)
    std = s.std(-1, keepdims=True)
    return (s - mean) / jnp.maximum(std, _EPS)


@jax.jit
def fuse(dense, bm25, weight):
    """w·z(dense) + (1 − w)·z(bm25). dense, bm25 [..., Q, N]; weight scalar -> [..., Q, N]."""
    return weight * zscore(dense) + (1.0 - weight) * zscore(bm25)


@jax.jit
def reciprocal_rank_fusion(dense, bm25, k: float = 60.0):
    """Σ_r 1/(k + rank_r(t)) over the two rankings (rank 0 = best). [..., Q, N] -> [..., Q, N]."""
    def ranks(s):
        order = jnp.argsort(-s, axis=-1, stable=True)
        return jnp.argsort(order, axis=-1).astype(jnp.float32)
    return 1.0 / (k + ranks(jnp.asarray(dense))) + 1.0 / (k + ranks(jnp.asarray(bm25)))


def choose_weight(dense, bm25, gold, *, grid=WEIGHT_GRID, k: int = 5):
    """The w of ``grid`` with the highest mean NDCG@k of ``fuse`` on labelled queries (ties: the larger w).

    Every weight of the grid is scored in one call (a [W, Q, N] block, top-k instead of a full sort).

    Args:
      dense, bm25: [Q, N] scores of labelled queries. gold: int [Q, G] padded with -1.

    Returns:
      (w, {w: NDCG@k}).
    """
    ndcg = np.asarray(_ndcg_per_weight(jnp.asarray(dense), jnp.asarray(bm25), jnp.asarray(gold),
                                       jnp.asarray(grid, jnp.float32), k))
    table = {float(w): float(x) for w, x in zip(grid, ndcg)}
    return _best_weight(table), table


def _best_weight(table: dict) -> float:
    """The weight with the highest NDCG (compared to 6 decimals; ties: the larger weight)."""
    return max(table, key=lambda w: (round(table[w], 6), w))


def choose_weights(dense, bm25, gold, masks, *, grid=WEIGHT_GRID, k: int = 5) -> np.ndarray:
    """``choose_weight`` for each of several query subsets (e.g. each fold's training queries) from one jitted
    call: NDCG@k of every weight and query [W, Q] once, then each subset's mean.

    Args:
      dense, bm25: [Q, N]; gold: int [Q, G]; masks: bool [F, Q] (the queries of each subset).

    Returns:
      float32 [F]: the chosen weight of each subset (ties: the larger w).
    """
    per_query = np.asarray(_ndcg_per_query(jnp.asarray(dense), jnp.asarray(bm25), jnp.asarray(gold),
                                           jnp.asarray(grid, jnp.float32), k))
    return np.asarray([_best_weight({float(w): float(x) for w, x in zip(grid, per_query[:, m].mean(-1))})
                       for m in np.asarray(masks, bool)], np.float32)


@functools.partial(jax.jit, static_argnames=("k",))
def _ndcg_per_weight(dense, bm25, gold, weights, k):
    return _ndcg_per_query(dense, bm25, gold, weights, k).mean(-1)


@functools.partial(jax.jit, static_argnames=("k",))
def _ndcg_per_query(dense, bm25, gold, weights, k):
    """float32 [W, Q]: NDCG@k of each query under each fusion weight (one weight at a time, ``lax.map``)."""
    zd, zb = zscore(dense), zscore(bm25)

    def one(w):
        return metrics.ndcg_at_k(top_order(w * zd + (1.0 - w) * zb, k), gold, k=k)

    return jax.lax.map(one, weights)


__all__ = ["DEFAULT_WEIGHT", "WEIGHT_GRID", "zscore", "fuse", "reciprocal_rank_fusion", "choose_weight", "choose_weights"]
