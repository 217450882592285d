"""Rule filter for audited registries (docs/method.md §6; the paper's Appendix C).

Usage::

    out = rule_filter(ranking, risk, perm_level, tool_emb, k=5)          # [Q, L] -> [Q, L]
    out, n_acc = rule_filter_with_count(ranking, risk, perm_level, tool_emb, k=5)

Walk each query's ranking in order; tool t at the current position is accepted unless

    r_t ≥ 3         and #accepted with r ≥ 3         ≥ risk_cap  (1), or
    perm_t ≥ 2      and #accepted with perm ≥ 2      ≥ perm_cap  (2), or
    max_{a accepted} cos(e_t, e_a) > sim_threshold   (0.9),

until k tools are accepted.  Output: the accepted tools in reranked order, then every other tool in
reranked order.  When fewer than k are accepted, the first positions after them are therefore the
deferred (rejected) tools in reranked order, which is the paper's fill rule; the positions after the
first k keep the remaining tools in reranked order.

Implementation: per query the walk keeps O(k) state (three counts, the accepted tools' ids and positions);
a step gathers the k accepted tools' normalised embeddings and takes k dot products, O(k d), so the whole
filter is O(L_visited k d).
``method="while"`` (default) is a ``lax.while_loop`` that stops once k tools are accepted or the list
ends; vmapped over queries it runs until the slowest query in the batch is done (finished queries are
carried unchanged).  ``method="scan"`` is a ``lax.scan`` over all L positions that carries a done flag
and accepts nothing once done (same result, no early stop; it still evaluates every step).  The final
stable partition (accepted first) is an O(k L) gather.

Why a while_loop with O(k) state: it stops once k tools are accepted, never walking the whole ranking.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.scoring import PERM_THRESHOLD, RISK_THRESHOLD, l2_normalise


@dataclass(frozen=True)
class RuleFilterCaps:
    """The rule filter's caps, as ``rule_filter`` keywords: accepted risky tools, accepted high-permission tools,
    and the cosine above which a tool counts as a near-duplicate of an accepted one."""

    risk_cap: int = 1
    perm_cap: int = 2
    sim_threshold: float = 0.9


def _init_state(k: int, l: int):
    # (n_acc, n_risk, n_perm, acc_tool [k], acc_pos [k]); slots >= n_acc are unused
    return (jnp.int32(0), jnp.int32(0), jnp.int32(0), jnp.zeros((k,), jnp.int32), jnp.full((k,), l, jnp.int32))


def _step(state, pos, tool, emb, risky, high, caps, k: int):
    """Consider the tool at position `pos`; accept it if the rules allow and fewer than k are accepted."""
    n_acc, n_risk, n_perm, acc_tool, acc_pos = state
    risk_cap, perm_cap, sim_threshold = caps
    r = risky[tool]
    h = high[tool]
    sims = emb[acc_tool] @ emb[tool]  # [k] cosines with the accepted tools, gathered on the fly
    redundant = jnp.any((sims > sim_threshold) & (jnp.arange(k) < n_acc))
    ok = (n_acc < k) & ~(r & (n_risk >= risk_cap)) & ~(h & (n_perm >= perm_cap)) & ~redundant
    put = ok & (jnp.arange(k) == n_acc)  # one-hot slot update (cheaper than a scatter under vmap)
    acc_tool = jnp.where(put, tool, acc_tool)
    acc_pos = jnp.where(put, pos, acc_pos)
    oki = ok.astype(jnp.int32)
    return (n_acc + oki, n_risk + oki * r, n_perm + oki * h, acc_tool, acc_pos)


def _partition(row, acc_pos, n_acc):
    """Stable partition of one ranking row: accepted positions first, the rest after, both in order.

    A gather, not a scatter: output slot j < n_acc takes position acc_pos[j]; slot j >= n_acc takes the
    (j − n_acc)-th position that was not accepted, found by stepping over the accepted positions in ascending
    order (the walk accepts in position order; unused slots hold L, past every position). k passes over the row:
    on a CPU a scatter of every position is several times slower (docs/performance.md, "Rule filter")."""
    l = row.shape[0]
    j = jnp.arange(l, dtype=jnp.int32)
    src = j - n_acc
    for a in acc_pos:  # ascending: each accepted position at or before the running index pushes it one further
        src = src + (a <= src).astype(jnp.int32)
    src = jnp.where(j < n_acc, acc_pos[jnp.minimum(j, acc_pos.shape[0] - 1)], src)
    return row[src]


def _filter_one(row, emb, risky, high, caps, k: int, method: str):
    l = row.shape[0]
    state = _init_state(k, l)
    if method == "while":
        def cond(c):
            pos, st = c
            return (pos < l) & (st[0] < k)

        def body(c):
            pos, st = c
            return pos + 1, _step(st, pos, row[pos], emb, risky, high, caps, k)

        _, state = jax.lax.while_loop(cond, body, (jnp.int32(0), state))
    elif method == "scan":
        def f(st, xs):
            pos, tool = xs
            return _step(st, pos, tool, emb, risky, high, caps, k), None

        state, _ = jax.lax.scan(f, state, (jnp.arange(l, dtype=jnp.int32), row))
    else:
        raise ValueError(f"method must be 'while' or 'scan', got {method!r}")
    n_acc, _, _, _, acc_pos = state
    return _partition(row, acc_pos, n_acc), n_acc


@functools.partial(jax.jit, static_argnames=("k", "method"))
def _rule_filter_jit(ranking, risky, high, emb, risk_cap, perm_cap, sim_threshold, *, k, method):
    emb = l2_normalise(emb)
    caps = (risk_cap, perm_cap, sim_threshold)
    return jax.vmap(lambda row: _filter_one(row, emb, risky, high, caps, k, method))(ranking)


def rule_filter_with_count(ranking, risk, perm_level, tool_emb, *, k: int = 5, risk_cap: int = 1,
                           perm_cap: int = 2, sim_threshold: float = 0.9, risk_threshold: int = RISK_THRESHOLD,
                           perm_threshold: int = PERM_THRESHOLD, method: str = "while"):
    """``rule_filter`` that also returns int32 [Q] the number of tools accepted by the rules (<= k)."""
    ranking = jnp.asarray(ranking, jnp.int32)
    if ranking.ndim != 2:
        raise ValueError(f"ranking must be [Q, L], got shape {ranking.shape}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    risky = jnp.asarray(risk) >= risk_threshold
    high = jnp.asarray(perm_level) >= perm_threshold
    emb = jnp.asarray(tool_emb, jnp.float32)
    return _rule_filter_jit(ranking, risky, high, emb, jnp.int32(risk_cap), jnp.int32(perm_cap),
                            jnp.float32(sim_threshold), k=int(k), method=method)


def rule_filter(ranking, risk, perm_level, tool_emb, *, k: int = 5, risk_cap: int = 1, perm_cap: int = 2,
                sim_threshold: float = 0.9, risk_threshold: int = RISK_THRESHOLD, perm_threshold: int = PERM_THRESHOLD,
                method: str = "while"):
    """Apply the rule filter (docs/method.md §6) to reranked lists.

    Args:
      ranking: int [Q, L] tool ids in reranked order (L <= N, valid ids).
      risk: int [N] risk levels; perm_level: int [N]; tool_emb: float [N, d] (normalised here).
      k: accepted-set size (static); risk_cap / perm_cap: accepted r >= risk_threshold / perm_level >=
        perm_threshold tools allowed; sim_threshold: reject when cosine with an accepted tool is greater.
      method: "while" (early stop, default) or "scan" (all L steps).
    Returns:
      int32 [Q, L], a permutation of each row.
    """
    out, _ = rule_filter_with_count(ranking, risk, perm_level, tool_emb, k=k, risk_cap=risk_cap,
                                    perm_cap=perm_cap, sim_threshold=sim_threshold,
                                    risk_threshold=risk_threshold, perm_threshold=perm_threshold,
                                    method=method)
    return out


def rule_filter_reference(ranking, risk, perm_level, tool_emb, *, k: int = 5, risk_cap: int = 1,
                          perm_cap: int = 2, sim_threshold: float = 0.9, risk_threshold: int = RISK_THRESHOLD,
                          perm_threshold: int = PERM_THRESHOLD) -> np.ndarray:
    """Plain-Python, float64 transcription of the rules (docs/method.md §6): the reference for tests and benchmarks."""
    emb = np.asarray(tool_emb, np.float64)
    emb = l2_normalise(emb, np)
    out = []
    for row in np.asarray(ranking).tolist():
        accepted, deferred = [], []
        n_risk = n_perm = 0
        for t in row:
            if len(accepted) == k:
                break
            r = risk[t] >= risk_threshold
            h = perm_level[t] >= perm_threshold
            if r and n_risk >= risk_cap:
                deferred.append(t)
            elif h and n_perm >= perm_cap:
                deferred.append(t)
            elif any(float(emb[t] @ emb[a]) > sim_threshold for a in accepted):
                deferred.append(t)
            else:
                accepted.append(t)
                n_risk += int(r)
                n_perm += int(h)
        top = accepted + deferred[: max(0, k - len(accepted))]
        used = set(top)
        out.append(top + [t for t in row if t not in used])
    return np.asarray(out, dtype=np.int32).reshape(np.shape(ranking))


__all__ = ["RuleFilterCaps", "rule_filter", "rule_filter_with_count", "rule_filter_reference"]
