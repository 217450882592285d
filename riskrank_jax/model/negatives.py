"""Hard negatives, written once: a query's best-scoring tools that are not gold.

    hard = best_non_gold(first_stage, gold, n)     # int32 [Q, n]

The heads' "hard" and "mixed" negatives (over the frozen cosine), the correction reranker's training candidates,
the tuned encoder's and the cross-encoder's hard negatives (over the hybrid first stage) and ``riskrank-jax fit``
all draw them here; which scores rank the tools is the caller's declared choice.

Why one picker: the four stages each had their own (a top-k with the gold masked, a stable argsort, a top-k
filtered afterwards), with different counts and tie rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.jit
def _masked(scores, gold):
    rows = jnp.arange(gold.shape[0])[:, None]
    is_gold = jnp.zeros(scores.shape, bool).at[rows, jnp.maximum(gold, 0)].max(gold >= 0)
    return jnp.where(is_gold, -jnp.inf, scores.astype(jnp.float32))


def best_non_gold(scores, gold, n: int):
    """int32 [Q, n]: each query's n best tools under scores [Q, N] that are not in gold int [Q, G] (−1 pad); equal
    scores: the lower tool id first (``lax.top_k``). n is capped at N − G, so no row holds a gold tool."""
    gold = jnp.asarray(gold, jnp.int32)
    n = int(min(n, scores.shape[-1] - gold.shape[-1]))
    return jax.lax.top_k(_masked(jnp.asarray(scores), gold), n)[1].astype(jnp.int32)


__all__ = ["best_non_gold"]
