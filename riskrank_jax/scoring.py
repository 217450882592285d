"""The definitions every stage shares, each written once: the risk penalty, the ranking order and the
risk / permission thresholds.

    s = penalise(rel, risk, 0.1)                          # [..., Q, N]: f_rel − λ·f_risk
    s = penalise(rel, risk, jnp.array([0., .1, .2]))      # [L, ..., Q, N]: a whole λ grid at once
    ranking = rank_order(s)                               # int32 [..., N], best first, ties → lower index
    risky = is_risky(levels)                              # r ≥ RISK_THRESHOLD (3)

Risk levels are integers 1..5 (audited labels, or a prediction mapped back to levels). A tool is *risky*
when r ≥ 3 (RVR, NeedRisk-Hit, the rule filter, risk co-occurrence edges, high-risk queries), *severe*
when r ≥ 4 (SRR, sNDCG) and *high-permission* when perm_level ≥ 2 (the rule filter, graph statistics).
The risk head is trained towards ``level_to_score(r) = (r − 1)/4``, which is also the risk score a ranker
uses for a tool whose risk comes from a label rather than from a head.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

RISK_THRESHOLD = 3  # r >= this: risky (violating) tool
SEVERE_THRESHOLD = 4  # r >= this: severe risk
PERM_THRESHOLD = 2  # perm_level >= this: high-permission tool
RISK_LEVELS = (1, 2, 3, 4, 5)


def _array(x):
    return np.asarray(x) if isinstance(x, (list, tuple, int)) else x


def is_risky(levels):
    """bool [...]: r ≥ RISK_THRESHOLD. numpy in, numpy out; jax in, jax out."""
    return _array(levels) >= RISK_THRESHOLD


def is_severe(levels):
    """bool [...]: r ≥ SEVERE_THRESHOLD."""
    return _array(levels) >= SEVERE_THRESHOLD


def is_high_permission(perm_level):
    """bool [...]: perm_level ≥ PERM_THRESHOLD."""
    return _array(perm_level) >= PERM_THRESHOLD


def level_to_score(levels):
    """float32 [...]: (r − 1)/4, the risk head's training target (1 → 0.0, 5 → 1.0)."""
    if isinstance(levels, (list, tuple, int, np.ndarray, np.generic)):
        return (np.asarray(levels, np.float32) - 1.0) / 4.0
    return (jnp.asarray(levels, jnp.float32) - 1.0) / 4.0


def penalise(rel, risk, lambdas):
    """s = f_rel − λ·f_risk, for one λ or a grid of them.

    Args:
      rel: relevance [..., Q, N].
      risk: risk scores broadcastable against rel ([N], [..., Q, N], [S, 1, N], ...).
      lambdas: a scalar λ, or [L] values.

    Returns:
      [..., Q, N] for a scalar λ; [L, ..., Q, N] for a grid (λ on a new leading axis).
    """
    rel = jnp.asarray(rel)
    lam = jnp.asarray(lambdas, dtype=rel.dtype)
    if lam.ndim == 0:
        return rel - lam * risk
    if lam.ndim != 1:
        raise ValueError(f"lambdas must be a scalar or 1-D, got shape {lam.shape}")
    risk = jnp.asarray(risk)
    return rel[None] - lam.reshape((-1,) + (1,) * max(rel.ndim, risk.ndim)) * risk[None]


def rank_order(scores):
    """int32 [..., N]: tool ids by descending score, ties broken by the lower tool index (stable sort)."""
    return jnp.argsort(-jnp.asarray(scores), axis=-1, stable=True).astype(jnp.int32)


def top_order(scores, k: int):
    """int32 [..., k]: the first k entries of ``rank_order(scores)`` (``lax.top_k`` keeps the lower index first
    among equal scores), without sorting the whole pool."""
    import jax

    return jax.lax.top_k(jnp.asarray(scores), k)[1].astype(jnp.int32)


__all__ = ["RISK_THRESHOLD", "SEVERE_THRESHOLD", "PERM_THRESHOLD", "RISK_LEVELS", "is_risky", "is_severe",
           "is_high_permission", "level_to_score", "penalise", "rank_order", "top_order"]
