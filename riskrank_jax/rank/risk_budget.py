"""Risk budget: choose λ so that the expected share of risky tools in the top-k stays within a budget B.

    rvr = rvr_by_lambda(rel, risk_score, risk_levels, lambdas, k=5)      # [L, Q] RVR@k of each query per λ
    lam, i = lambda_for_budget(rvr.mean(-1), lambdas, budget=0.05)        # smallest λ with mean RVR@k ≤ B

Instead of guessing λ, a user states the exposure they accept (e.g. "at most 5% of the tools an agent sees
may be risky") and λ is read off labelled held-out queries: the smallest λ of the grid whose mean RVR@k on
those queries is within the budget (the smallest keeps relevance highest). When no λ of the grid reaches
the budget, the largest λ is returned and the caller should report that the budget was not met there.

Why a budget: an exposure users can state is easier to choose than a penalty weight.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.scoring import penalise, top_order

BUDGETS = (0.02, 0.05, 0.10)
LAMBDA_GRID = tuple(round(0.1 * i, 1) for i in range(41))  # 0.0 .. 4.0, z-scale λ (per-query std units)


def rvr_by_lambda(rel, risk_score, risk_levels, lambdas, *, k: int = 5):
    """RVR@k of every query for every λ.

    Args:
      rel: relevance [..., Q, N] (e.g. [M, Q, N] for M models); risk_score: the penalty's risk [N] (or
        broadcastable to rel, e.g. [M, 1, N]);
      risk_levels: int [N] levels 1..5 (what counts as risky); lambdas: [L].

    Returns:
      float32 [L, ..., Q].
    """
    return _rvr_by_lambda(jnp.asarray(rel), jnp.asarray(risk_score), jnp.asarray(risk_levels),
                          jnp.asarray(lambdas, jnp.float32), k=k)


@functools.partial(jax.jit, static_argnames=("k",))
def _rvr_by_lambda(rel, risk_score, risk_levels, lambdas, *, k):
    """One λ at a time (``lax.map``), so the working set is one penalised [..., Q, N] block, not L of them."""
    def one(lam):
        return metrics.rvr_at_k(top_order(penalise(rel, risk_score, lam), k), risk_levels, k=k)

    return jax.lax.map(one, lambdas)


def lambda_for_budget(mean_rvr, lambdas, budget: float) -> tuple[float, int]:
    """(λ, its index): the smallest λ whose mean RVR@k is ≤ budget; the largest λ when none is.

    Args:
      mean_rvr: [L] mean RVR@k per λ (same order as lambdas, ascending λ).
    """
    mean_rvr = np.asarray(mean_rvr)
    ok = np.flatnonzero(mean_rvr <= budget + 1e-9)
    i = int(ok[0]) if ok.size else len(lambdas) - 1
    return float(lambdas[i]), i


__all__ = ["BUDGETS", "LAMBDA_GRID", "rvr_by_lambda", "lambda_for_budget"]
