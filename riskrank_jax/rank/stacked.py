"""The reranking pipeline over stacked models: score -> penalise -> smooth -> rank -> filter.

Every function keeps leading batch axes (seeds, λ values) in front of the [Q, N] query x tool axes, so a
whole grid of settings flows through one call (the experiments score every seed and fold at once; a
``Ranker`` runs the same functions for one model)::

    rel, risk = model_scores(params, q_emb, t_emb, n_seeds=S, test_fold=fold)  # [S, Q, N], [S, Q|1, N]
    s = scoring.penalise(rel, risk, lambdas)                                    # [L, S, Q, N]
    s = smooth_per_fold(s, graphs, fold, alpha)                                 # ToolGraph smoothing
    ranking = scoring.rank_order(s)                                             # [L, S, Q, N] int32
    ranking = apply_rule_filter(ranking, risk_levels, perm_level, t_emb)        # audited registries

Memory: ``model_scores`` evaluates each fold's models on that fold's queries only, in calls sized so the
largest intermediate (models x queries x tools x hidden) stays within ``memory_budget`` bytes.

Why leading axes: every seed, fold and λ of an experiment flows through one call of each stage.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.graph import smoothing
from riskrank_jax.model import heads
from riskrank_jax.rank.rule_filter import rule_filter
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET, halved_to_fit, units_per_step
from riskrank_jax.scoring import rank_order

MAX_QUERY_CHUNK = 256  # queries per step of relevance_full's lax.map


def pair_bytes(params, dim: int) -> int:
    """Bytes of relevance_full's live intermediates per (model, query, tool): about three [h] vectors, plus
    two [d] vectors for the interaction head."""
    hidden = params["rel"]["W1"].shape[-1]
    extra = 2 * dim if params["rel"]["W1"].shape[-2] != 2 * dim else 0
    return 4 * (3 * hidden + extra)


def plan_chunks(n_models: int, n_queries: int, n_tools: int, bytes_per_pair: int, budget: int) -> tuple[int, int]:
    """(models per call, queries per lax.map step) with models x queries x tools x bytes_per_pair <= budget.

    The query step shrinks (halving from 256) only when one model alone exceeds the budget.
    """
    per_query = max(1, n_tools * bytes_per_pair)
    q = halved_to_fit(min(MAX_QUERY_CHUNK, n_queries), per_query, budget)
    return max(1, min(n_models, units_per_step(q * per_query, budget))), q


@functools.partial(jax.jit, static_argnames=("query_chunk",))
def _all_model_scores(params, q_emb, t_emb, *, query_chunk: int = MAX_QUERY_CHUNK):
    rel = jax.vmap(lambda p: heads.relevance_full(p, q_emb, t_emb, query_chunk=query_chunk))(params)
    risk = jax.vmap(lambda p: heads.risk(p, t_emb))(params)
    return rel, risk


def _chunked_model_scores(params, q_emb, t_emb, m_chunk: int, q_chunk: int):
    """rel [M, Q, N], risk [M, N] of M stacked models, m_chunk models per call (the last call padded)."""
    n_models = jax.tree.leaves(params)[0].shape[0]
    if m_chunk >= n_models:
        return _all_model_scores(params, q_emb, t_emb, query_chunk=q_chunk)
    rels, risks = [], []
    for m0 in range(0, n_models, m_chunk):
        sel = np.minimum(np.arange(m0, m0 + m_chunk), n_models - 1)
        rel, risk = _all_model_scores(jax.tree.map(lambda x: np.asarray(x)[sel], params), q_emb, t_emb,
                                      query_chunk=q_chunk)
        n = min(m_chunk, n_models - m0)
        rels.append(np.asarray(rel)[:n])
        risks.append(np.asarray(risk)[:n])
    return jnp.asarray(np.concatenate(rels)), jnp.asarray(np.concatenate(risks))


def model_scores(params, q_emb, t_emb, *, n_seeds: int, test_fold: np.ndarray,
                 memory_budget: int = DEFAULT_MEMORY_BUDGET):
    """Relevance and predicted risk of every test query under the model of its own fold.

    Args:
      params: stacked parameters, leading model axis M = n_seeds * F (seed-major, fold-minor).
      q_emb: [Q, d] test query embeddings; t_emb: [N, d] tool embeddings.
      n_seeds: S; test_fold: int [Q], the fold model that evaluates each query.
      memory_budget: bytes allowed for the scoring intermediates (see ``plan_chunks``).

    Returns:
      rel [S, Q, N] and risk [S, 1, N] (one fold) or [S, Q, N] (risk per query, because folds differ).
    """
    q_emb, t_emb = jnp.asarray(q_emb), jnp.asarray(t_emb)
    n_folds = jax.tree.leaves(params)[0].shape[0] // n_seeds
    fold = np.asarray(test_fold)
    m_chunk, q_chunk = plan_chunks(n_seeds, q_emb.shape[0], t_emb.shape[0], pair_bytes(params, t_emb.shape[1]),
                                   memory_budget)
    if n_folds == 1:
        rel, risk = _chunked_model_scores(params, q_emb, t_emb, m_chunk, q_chunk)
        return rel, risk[:, None, :]
    rel = np.zeros((n_seeds, q_emb.shape[0], t_emb.shape[0]), np.float32)
    risk = np.zeros_like(rel)
    params = jax.tree.map(np.asarray, params)  # on the host once: each fold's models are sliced there
    for f in range(n_folds):  # F <= 5 folds; each fold's models see only that fold's queries
        idx = np.nonzero(fold == f)[0]
        if idx.size:
            p_f = jax.tree.map(lambda x: x[f::n_folds], params)  # models s * F + f
            r, k = _chunked_model_scores(p_f, q_emb[idx], t_emb, m_chunk, q_chunk)
            rel[:, idx] = np.asarray(r)
            risk[:, idx] = np.asarray(k)[:, None, :]
    return jnp.asarray(rel), jnp.asarray(risk)


def smooth_per_fold(scores, graphs, test_fold: np.ndarray, alpha: float, *, fixed_shapes: bool = False):
    """ToolGraph smoothing in full-pool mode, each query on its own fold's graph (neighbour-list kernel; the graphs
    must be concrete, so call it between jitted stages).

    scores [..., Q, N] (leading axes, e.g. λ and seeds, are folded into the query batch); graphs: one
    ToolGraph per fold, or a ``graph.smoothing.FoldGraphs`` (rows = folds); test_fold int [Q].
    ``fixed_shapes``: see ``graph.smoothing.smooth_full_folds`` (one compiled program for many graphs).
    """
    scores = jnp.asarray(scores)
    flat = scores.reshape(-1, scores.shape[-1])
    single = not isinstance(graphs, smoothing.FoldGraphs) and len(graphs) == 1  # one graph for every query
    if single and not fixed_shapes:
        return smoothing.smooth_full(flat, graphs[0], alpha).reshape(scores.shape)
    test_fold = np.asarray(test_fold)
    fold = np.tile(np.zeros_like(test_fold) if single else test_fold, flat.shape[0] // scores.shape[-2])
    return smoothing.smooth_full_folds(flat, fold, graphs, alpha, fixed_shapes=fixed_shapes).reshape(scores.shape)


def smooth_candidates_per_fold(cand_scores, cand, graphs: Sequence, test_fold: np.ndarray, alpha: float):
    """Candidate-mode smoothing: cand_scores [..., Q, C] over candidates cand [Q, C] of each query, each on the
    subgraph of its fold's graph (graphs: one ToolGraph, or one per fold with test_fold int [Q]) its candidates
    induce -> [..., Q, C]."""
    cand_scores = jnp.asarray(cand_scores)
    flat = cand_scores.reshape(-1, cand_scores.shape[-1])
    n_lead = flat.shape[0] // cand_scores.shape[-2]
    c = np.tile(np.asarray(cand), (n_lead, 1))
    if len(graphs) == 1:
        out = smoothing.smooth_candidates(flat, c, graphs[0], alpha)
    else:
        out = smoothing.smooth_candidates(flat, c, list(graphs), alpha, query_fold=np.tile(np.asarray(test_fold), n_lead))
    return jnp.asarray(out).reshape(cand_scores.shape)


def apply_rule_filter(ranking, risk_levels, perm_level, t_emb, *, k: int = 5, **caps):
    """Rule filter on rankings [..., Q, L]; leading axes are flattened into the query batch.

    ``caps``: risk_cap, perm_cap, sim_threshold of ``rule_filter.rule_filter``.
    """
    ranking = jnp.asarray(ranking)
    flat = rule_filter(ranking.reshape(-1, ranking.shape[-1]), risk_levels, perm_level, t_emb, k=k, **caps)
    return flat.reshape(ranking.shape)


def candidate_ranking(scores, cand):
    """Rerank each query's candidates: scores [..., Q, C] over cand [Q, C] -> tool ids [..., Q, C]."""
    order = rank_order(scores)
    return jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(cand), scores.shape), order, axis=-1)


def gather_candidates(scores, cand):
    """scores [..., Q, N] at each query's candidates cand [Q, C] -> [..., Q, C]."""
    scores = jnp.asarray(scores)
    return jnp.take_along_axis(scores, jnp.broadcast_to(cand, scores.shape[:-1] + cand.shape[-1:]), axis=-1)


__all__ = ["DEFAULT_MEMORY_BUDGET", "plan_chunks", "pair_bytes", "model_scores", "smooth_per_fold",
           "smooth_candidates_per_fold", "apply_rule_filter", "candidate_ranking", "gather_candidates"]
