"""Choosing on held-out queries, written once for every learned stage: which items a model holds out, and which
gate γ it keeps.

    train_ids, held_ids = heldout_split(ids, fraction, seed, fold)     # queries: reranker, tuned encoder, ...
    perm = random_first(split_key(seed, fold), valid)                  # the heads' triplets (inside their program)
    i = gate_index(ndcg_by_gate)                                       # [..., len(GATES)] -> the kept γ's index

The split: a seeded permutation of the items, the first ``n_held`` held out. Query-level stages (the correction
reranker, the tuned encoder, the cross-encoder, ``riskrank-jax fit``, a transfer source) call ``heldout_split``,
drawn from numpy's generator on (seed, fold), or on the seed alone for a stage trained once (no folds). The
paper's dual heads hold out a share of their *triplets* inside their jitted program (the faithful protocol,
docs/method.md §3): they call ``random_first`` on ``split_key`` with the same rounding, ``n_held(..., at_least=0)``.

The gate: every gated stage mixes its first stage with what it learned, ``(1 − γ)·first + γ·learned``, γ from one
grid ``GATES``, and keeps the smallest γ whose held-out NDCG@5 is within ``GATE_TIE`` of the best, so that a tie
never moves a ranking away from the first stage (γ = 0).

Why one module: the split and the tie rule decide which model a stage keeps; written once, changing either
changes every stage at once and none silently keeps the old rule.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

GATES = (0.0, 0.25, 0.5, 0.75, 1.0)
GATE_TIE = 1e-6  # NDCG@5 differences below this are ties (float32 sums over a few hundred queries)


def n_held(n: int, fraction: float, at_least: int = 1) -> int:
    """Items held out of n: round-half-up of fraction · n, at least ``at_least``, and at least one left to train on
    when n ≥ 2."""
    h = max(int(math.floor(fraction * n + 0.5)), int(at_least))
    return min(h, n - 1) if n >= 2 else min(h, n)


def heldout_split(ids, fraction: float, seed: int, fold: int | None = None,
                  groups=None) -> tuple[np.ndarray, np.ndarray]:
    """(training ids, held-out ids), each sorted: ``n_held(len(ids), fraction)`` of ids (int [n], or a bool mask
    [Q] of the candidates) held out, drawn from numpy's generator on [seed, fold] (on seed alone when fold is
    None: a stage trained once). groups: int [len(ids)], ids of one group (one request text logged many times)
    fall on one side: ``n_held`` of the groups are held out, numbered in order of first appearance, so that ids
    in groups of one are split exactly as without ``groups``."""
    ids = np.asarray(ids)
    ids = np.flatnonzero(ids) if ids.dtype == bool else ids.astype(np.int64)
    rng = np.random.default_rng(int(seed) if fold is None else [int(seed), int(fold)])
    if groups is None:
        group_of, n_groups = np.arange(ids.size), ids.size
    else:
        _, first, group_of = np.unique(np.asarray(groups), return_index=True, return_inverse=True)
        group_of = np.argsort(np.argsort(first))[group_of]  # groups renumbered by first appearance
        n_groups = first.size
    held = np.zeros(n_groups, bool)
    held[rng.permutation(n_groups)[:n_held(n_groups, fraction)]] = True
    return np.sort(ids[~held[group_of]]), np.sort(ids[held[group_of]])


def split_key(seed, fold):
    """The heads' split key of model (seed, fold): fold_in(fold_in(key(seed), 2), fold) (traceable)."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 2), fold)


def random_first(key, flag):
    """A permutation of range(len(flag)) with the True entries first, each group in random order.

    One PRNG call (cheap to compile under vmap): sort by (not flag, 31 random bits), stable."""
    bits = jax.random.bits(key, flag.shape, jnp.uint32) >> 1
    return jnp.argsort(bits | jnp.where(flag, jnp.uint32(0), jnp.uint32(1 << 31)), stable=True)


def gate_index(ndcg_by_gate):
    """int [...]: the index of the smallest γ (``GATES`` ascending) whose held-out NDCG is within ``GATE_TIE`` of
    the best, for ndcg_by_gate [..., n_gates] (numpy or traced)."""
    xp = jnp if isinstance(ndcg_by_gate, jax.Array) else np
    table = xp.asarray(ndcg_by_gate)
    return xp.argmax(table >= table.max(-1, keepdims=True) - GATE_TIE, axis=-1)


__all__ = ["GATES", "GATE_TIE", "n_held", "heldout_split", "split_key", "random_first", "gate_index"]
