"""The definitions every stage shares, each written once: the risk penalty, the ranking order and the
risk / permission thresholds.

    s = penalise(rel, risk, 0.1)                          # [..., Q, N]: f_rel − λ·f_risk
    s = penalise(rel, risk, jnp.array([0., .1, .2]))      # [L, ..., Q, N]: a whole λ grid at once
    ranking = rank_order(s)                               # int32 [..., N], best first, ties → lower index
    s = tie_snapped(s)                                    # scores within float noise of each other made equal
    ranking = rank_order_host(np.asarray(s))              # the same order, sorted by numpy (CPU evaluation)
    risky = is_risky(levels)                              # r ≥ RISK_THRESHOLD (3)

Risk levels are integers 1..5 (audited labels, or a prediction mapped back to levels). A tool is *risky*
when r ≥ 3 (RVR, NeedRisk-Hit, the rule filter, risk co-occurrence edges, high-risk queries), *severe*
when r ≥ 4 (SRR, sNDCG) and *high-permission* when perm_level ≥ 2 (the rule filter, graph statistics).
The risk head is trained towards ``level_to_score(r) = (r − 1)/4``, which is also the risk score a ranker
uses for a tool whose risk comes from a label rather than from a head.

Ties: every ordering here (``rank_order``, ``rank_order_host``, ``top_order``) first snaps each row of scores
to a grid of ``2**TIE_BITS`` ulps of the row's largest finite magnitude (``tie_snapped``), so that scores that
differ only by float rounding (two tools with the same text, a sum taken in another order by another CPU's
kernels) are equal and ordered by the lower tool index. Two machines then disagree only where scores differ by
more than float noise, or straddle a grid line (docs/protocols.md, "Reproducibility").

Why written once: the Ranker, the experiments and the metrics cannot disagree on a threshold or an order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.runtime.cpus import usable_cpus

RISK_THRESHOLD = 3  # r >= this: risky (violating) tool
SEVERE_THRESHOLD = 4  # r >= this: severe risk
PERM_THRESHOLD = 2  # perm_level >= this: high-permission tool
RISK_LEVELS = (1, 2, 3, 4, 5)
# scores within 2**TIE_BITS ulps (float32) of the row's largest finite |score| are ties, ordered by tool index:
# above the rounding another CPU's kernels leave in a score (a few ulps), far below a real difference
TIE_BITS = 4
_MANTISSA_BITS = 24  # float32 significand, implicit bit included


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


def l2_normalise(x, xp=jnp, eps: float = 1e-12):
    """x [..., d] / max(‖x‖₂, eps) over the last axis, computed by ``xp`` (``jnp`` or ``np``) in x's dtype.

    A zero row stays zero. The one L2 normalisation of embeddings (encoder output, hard negatives, semantic
    graph edges, the rule filter's near-duplicate test).
    """
    return x / xp.maximum(xp.linalg.norm(x, axis=-1, keepdims=True), eps)


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


def tie_snapped(scores, xp=jnp):
    """float32 [..., N]: each row of ``scores`` rounded to a multiple of 2**(e − 24 + TIE_BITS), e the binary
    exponent of the row's largest finite |score| (one float32 ulp of it, times 2**TIE_BITS), by ``xp`` (``jnp``
    or ``np``).

    Scaling by a power of two is exact, so the only change is the rounding; ±inf and NaN stay as they are, a row
    without a finite nonzero score is returned unchanged. Why per row and not per score: the rounding error of
    a dot product or a fused score is set by the magnitude of its terms, not of its result (a score near 0 is as
    noisy as one near the top).
    """
    s = xp.asarray(scores, dtype=xp.float32)
    finite = xp.isfinite(s)
    top = xp.max(xp.where(finite, xp.abs(s), xp.float32(0.0)), axis=-1, keepdims=True)
    _, exponent = xp.frexp(top)  # top = m · 2**exponent, m in [0.5, 1); one ulp of top is 2**(exponent − 24)
    shift = (exponent - _MANTISSA_BITS + TIE_BITS).astype(xp.int32)
    snapped = xp.ldexp(xp.round(xp.ldexp(s, -shift)), shift).astype(xp.float32)
    return xp.where(finite, snapped, s)


def rank_order(scores):
    """int32 [..., N]: tool ids by descending score, ties (equal after ``tie_snapped``) broken by the lower tool
    index (stable sort)."""
    return jnp.argsort(-tie_snapped(scores), axis=-1, stable=True).astype(jnp.int32)


def _order_keys(scores: np.ndarray) -> np.ndarray:
    """uint64 [R, N]: one key per entry whose ascending order is ``rank_order``'s: the high word maps −score
    to an unsigned integer in the same order (−0.0 and 0.0 equal, NaN last, as XLA's sort compares floats),
    the low word is the tool index (ties to the lower index); every key is distinct."""
    r, n = scores.shape
    bits = (np.float32(0.0) - scores).view(np.int32)  # 0 − s: −0.0 becomes 0.0
    keys = np.empty((r, n), np.uint64)
    words = keys.view(np.uint32).reshape(r, n, 2)  # the two 32-bit words of each key, in memory order
    hi, lo = (1, 0) if np.little_endian else (0, 1)
    words[..., hi] = (bits ^ ((bits >> 31) & np.int32(0x7FFFFFFF))).view(np.uint32) ^ np.uint32(1 << 31)
    words[..., hi][np.isnan(scores)] = np.uint32(0xFFFFFFFF)
    words[..., lo] = np.arange(n, dtype=np.uint32)
    return keys


def rank_order_host(scores, *, threads: int | None = None) -> np.ndarray:
    """``rank_order`` computed by numpy on the host: int32 [..., N], the identical order.

    One distinct uint64 key per entry (``_order_keys``) and an unstable single-key sort, which numpy runs
    much faster than XLA's CPU sort of (score, index) pairs (docs/performance.md, "Evaluation"); rows are split
    over ``threads`` threads (default: the CPUs this process may use, ``cpus.usable_cpus``; numpy releases the GIL while sorting). For
    evaluation on the CPU backend: under ``jit`` or on an accelerator use ``rank_order``.
    """
    s = np.ascontiguousarray(tie_snapped(np.asarray(scores, np.float32), np), dtype=np.float32)
    if s.shape[-1] >= 1 << 32:
        raise ValueError(f"rank_order_host supports fewer than 2**32 tools, got {s.shape[-1]}")
    flat = s.reshape(-1, s.shape[-1])
    out = np.empty(flat.shape, np.int32)

    def sort_rows(lo: int, hi: int) -> None:
        keys = _order_keys(flat[lo:hi])
        keys.sort(axis=-1)
        out[lo:hi] = (keys & np.uint64(0xFFFFFFFF)).astype(np.int32)

    n_threads = max(1, min(threads or len(usable_cpus()), flat.shape[0]))
    bounds = np.linspace(0, flat.shape[0], n_threads + 1).astype(int)
    if n_threads == 1:
        sort_rows(0, flat.shape[0])
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(sort_rows, bounds[:-1], bounds[1:]))
    return out.reshape(s.shape)


def top_order(scores, k: int):
    """int32 [..., k]: the first k entries of ``rank_order(scores)`` (``lax.top_k`` of the snapped scores keeps
    the lower index first among equal ones), without sorting the whole pool."""
    return jax.lax.top_k(tie_snapped(scores), k)[1].astype(jnp.int32)


__all__ = ["RISK_THRESHOLD", "SEVERE_THRESHOLD", "PERM_THRESHOLD", "RISK_LEVELS", "is_risky", "is_severe",
           "is_high_permission", "level_to_score", "l2_normalise", "penalise", "rank_order", "rank_order_host", "top_order", "tie_snapped", "TIE_BITS"]
