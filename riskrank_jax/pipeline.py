"""The reranking pipeline as composable pure functions: score -> penalise -> smooth -> rank -> filter.

Every function keeps leading batch axes (seeds, λ values) in front of the [Q, N] query x tool axes, so a
whole grid of settings flows through one call::

    rel, risk = model_scores(params, q_emb, t_emb, n_seeds=S, test_fold=fold)  # [S, Q, N] each
    s = penalise(rel, risk, lambdas)                                            # [L, S, Q, N]
    s = smooth_per_fold(s, graphs, fold, alpha)                                 # ToolGraph smoothing
    ranking = rank(s)                                                           # [L, S, Q, N] int32
    ranking = apply_rule_filter(ranking, registry, t_emb)                       # audited registries
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import model as model_lib
from riskrank_jax import smoothing
from riskrank_jax.rule_filter import rule_filter


def model_scores(params, q_emb, t_emb, *, n_seeds: int, test_fold: np.ndarray):
    """Relevance and predicted risk of every test query under the model of its own fold.

    Args:
      params: stacked parameters, leading model axis M = n_seeds * F (seed-major, fold-minor).
      q_emb: [Q, d] test query embeddings; t_emb: [N, d] tool embeddings.
      n_seeds: S; test_fold: int [Q], the fold model that evaluates each query.

    Returns:
      rel [S, Q, N] and risk [S, Q, N] (risk broadcast per query because folds differ).
    """
    rel, risk = _all_model_scores(params, jnp.asarray(q_emb), jnp.asarray(t_emb))  # [M, Q, N], [M, N]
    m = rel.shape[0]
    n_folds = m // n_seeds
    fold = jnp.asarray(test_fold)
    rel = rel.reshape(n_seeds, n_folds, *rel.shape[1:])
    risk = risk.reshape(n_seeds, n_folds, -1)
    q_idx = jnp.arange(fold.shape[0])
    rel_q = rel[:, fold, q_idx, :]  # [S, Q, N]
    risk_q = risk[:, fold, :]  # [S, Q, N]
    return rel_q, risk_q


@jax.jit
def _all_model_scores(params, q_emb, t_emb):
    rel = jax.vmap(lambda p: model_lib.relevance_full(p, q_emb, t_emb, query_chunk=256))(params)
    risk = jax.vmap(lambda p: model_lib.risk(p, t_emb))(params)
    return rel, risk


def penalise(rel, risk, lambdas):
    """s = f_rel - λ f_risk. rel, risk [..., Q, N]; lambdas scalar or [L] -> [..., Q, N] or [L, ..., Q, N]."""
    lam = jnp.asarray(lambdas, dtype=rel.dtype)
    if lam.ndim == 0:
        return rel - lam * risk
    return rel[None] - lam.reshape((-1,) + (1,) * rel.ndim) * risk[None]


def rank(scores):
    """Descending order over the last axis, ties broken by the lower tool index. int32 [..., N]."""
    return jnp.argsort(-scores, axis=-1, stable=True).astype(jnp.int32)


def smooth_per_fold(scores, graphs: Sequence, test_fold: np.ndarray, alpha: float):
    """ToolGraph smoothing in full-pool mode, each query on its own fold's graph (one jitted call).

    scores [..., Q, N] (leading axes, e.g. λ and seeds, are folded into the query batch); graphs: one
    ToolGraph per fold; test_fold int [Q].
    """
    scores = jnp.asarray(scores)
    flat = scores.reshape(-1, scores.shape[-1])
    if len(graphs) == 1:
        return smoothing.smooth_full(flat, graphs[0], alpha).reshape(scores.shape)
    n_lead = flat.shape[0] // scores.shape[-2]
    fold = np.tile(np.asarray(test_fold), n_lead)
    return smoothing.smooth_full_folds(flat, fold, graphs, alpha).reshape(scores.shape)


def smooth_candidates_per_fold(cand_scores, cand, graphs: Sequence, test_fold: np.ndarray, alpha: float):
    """Candidate-mode smoothing: cand_scores [..., Q, C] over candidates cand [Q, C] of each query."""
    cand_scores = jnp.asarray(cand_scores)
    flat = cand_scores.reshape(-1, cand_scores.shape[-1])
    n_lead = flat.shape[0] // cand_scores.shape[-2]
    c = np.tile(np.asarray(cand), (n_lead, 1))
    if len(graphs) == 1:
        out = smoothing.smooth_candidates(flat, c, graphs[0], alpha)
    else:
        out = smoothing.smooth_candidates(flat, c, list(graphs), alpha, query_fold=np.tile(np.asarray(test_fold), n_lead))
    return jnp.asarray(out).reshape(cand_scores.shape)


def apply_rule_filter(ranking, risk_levels, perm_level, t_emb, *, k: int = 5):
    """Rule filter (SPEC §8) on rankings [..., Q, L]; leading axes are flattened into the query batch."""
    ranking = jnp.asarray(ranking)
    flat = rule_filter(ranking.reshape(-1, ranking.shape[-1]), risk_levels, perm_level, t_emb, k=k)
    return flat.reshape(ranking.shape)


def candidate_ranking(scores, cand):
    """Rerank each query's candidates: scores [..., Q, C] over cand [Q, C] -> tool ids [..., Q, C]."""
    order = rank(scores)
    return jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(cand), scores.shape), order, axis=-1)
