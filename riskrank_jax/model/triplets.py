"""The dual heads' training triplets, built on the device for every model of a run at once.

    shared, n_gold = shared_inputs_for_run(gold, fold_mask, query_emb, tool_emb, config)
    data = triplet_program(...)(seed [M], fold [M], n_hold [M], shared)   # one model's slots per row
    tr = build_triplets(gold, fold_mask, seed, fold, n_tools, config)    # one model, as numpy (inspection, tests)

For each training query q (``fold_mask[f, q]``) and each gold tool g of q, ``negatives`` negatives drawn
uniformly from the pool minus q's gold set ("uniform", the paper's), or from the frozen encoder's ``hard_pool``
best non-gold tools for q ("hard", beyond the paper; ``model.negatives.best_non_gold``), or
``hard_per_positive`` hard and the rest uniform ("mixed", beyond the paper); a ``heldout_fraction`` of the
triplets (``model.heldout.random_first``) is held out.

Vectorisation: models hold different numbers of triplets (folds differ), so each model's triplets live in one
fixed-size array of Q·G·negatives slots with a role per slot (invalid / train / held out); the static shapes
(``model_counts``) come from all models of the run.

Why on the device: the slots and their random draws are one vmapped program, so a model's triplets depend only
on its (seed, fold), never on which other models share the program.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.model.heldout import n_held, random_first
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.model.train_config import TrainConfig, model_keys
from riskrank_jax.scoring import l2_normalise


def _clean_gold(gold: np.ndarray, n_tools: int) -> np.ndarray:
    """Gold rows with duplicates removed (order kept), still padded with -1."""
    gold = np.asarray(gold)
    if gold.ndim != 2:
        raise ValueError(f"gold must be [Q, G], got shape {gold.shape}")
    if np.any((gold >= n_tools) | (gold < -1)):
        raise ValueError(f"gold holds tool ids outside [0, {n_tools}) (padding must be -1)")
    out = np.full_like(gold, -1, dtype=np.int32)
    for i, row in enumerate(gold):
        seen = list(dict.fromkeys(int(g) for g in row if g >= 0))
        out[i, : len(seen)] = seen
    return out

def _shared_inputs(gold: np.ndarray, fold_mask: np.ndarray, n_tools: int) -> tuple[dict, np.ndarray]:
    """Arrays every model of a run reads (gold sets, sorted gold for uniform sampling, fold mask), and
    the number of gold tools per query."""
    gold_c = _clean_gold(gold, n_tools)
    n_gold = (gold_c >= 0).sum(-1)
    shared = {
        "gold": gold_c,
        "gold_sorted": np.sort(np.where(gold_c >= 0, gold_c, n_tools), axis=1).astype(np.int32),
        "n_allowed": (n_tools - n_gold).astype(np.int32),
        "fold_mask": fold_mask,
    }
    return shared, n_gold

def hard_candidates(query_emb, tool_emb, gold, hard_pool: int):
    """Each query's ``hard_pool`` best non-gold tools by the frozen cosine (``model.negatives.best_non_gold``; at
    most N − G). Returns (order int32 [Q, H], n_hard int32 [Q], H for every query)."""
    scores = l2_normalise(query_emb) @ l2_normalise(tool_emb).T
    order = best_non_gold(scores, gold, min(hard_pool, tool_emb.shape[0] - gold.shape[1]))
    return order, jnp.full(order.shape[0], order.shape[1], jnp.int32)

def _build_triplets(seed, fold, n_hold, shared, *, config: TrainConfig, n_hold_max: int):
    """One model's triplet slots. Slot t = (q·G + g)·negatives + j holds (q, gold[q, g], negative j)."""
    gold = shared["gold"]
    n_q, g_width = gold.shape
    k = config.negatives
    n_slots = n_q * g_width * k
    keys = model_keys(seed, fold)
    q_idx = jnp.repeat(jnp.arange(n_q, dtype=jnp.int32), g_width * k)
    pos = jnp.repeat(gold.reshape(-1), k)
    valid = (pos >= 0) & shared["fold_mask"][fold][q_idx]
    # 32 random bits per slot, reduced modulo the number of allowed tools (bias <= N / 2**32).
    # Drawn 1-D and reshaped: a 2-D draw under vmap compiles several times slower on CPU.
    bits = jax.random.bits(keys["neg"], (n_slots,), jnp.uint32).reshape(n_q, g_width * k)
    if config.negative_sampling in ("uniform", "mixed"):
        # x ~ U{0 .. N − |gold_q| − 1}, then skip over the sorted gold ids: the x-th non-gold tool.
        x = (bits % shared["n_allowed"][:, None].astype(jnp.uint32)).astype(jnp.int32)
        for i in range(g_width):
            x = x + (x >= shared["gold_sorted"][:, i : i + 1]).astype(x.dtype)
        neg = x.reshape(-1)
    if config.negative_sampling in ("hard", "mixed"):
        x = (bits % shared["n_hard"][:, None].astype(jnp.uint32)).astype(jnp.int32)
        hard = jnp.take_along_axis(shared["hard_order"], x, axis=1).reshape(-1)
        if config.negative_sampling == "hard":
            neg = hard
        else:  # negative j of each positive is hard for j < hard_per_positive, uniform otherwise
            neg = jnp.where(jnp.arange(n_slots) % k < config.hard_per_positive, hard, neg)
    n_valid = valid.sum()
    perm = random_first(keys["split"], valid)  # valid slots first, in random order
    rank = jnp.arange(n_slots)
    train_flag = jnp.zeros(n_slots, bool).at[perm].set((rank >= n_hold) & (rank < n_valid))
    hold_idx = perm[:n_hold_max] if n_hold_max <= n_slots else jnp.pad(perm, (0, n_hold_max - n_slots))
    return {
        "q": q_idx,
        "pos": jnp.where(valid, pos, 0).astype(jnp.int32),
        "neg": jnp.where(valid, neg, 0).astype(jnp.int32),
        "train_flag": train_flag,
        "hold_idx": hold_idx.astype(jnp.int32),
        "hold_mask": jnp.arange(n_hold_max) < n_hold,
        "n_train": (n_valid - n_hold).astype(jnp.int32),
        "n_hold": jnp.asarray(n_hold, jnp.int32),
        "n_valid": n_valid.astype(jnp.int32),
    }

def shared_inputs_for_run(gold_in, fold_mask, query_emb, tool_emb, config: TrainConfig) -> tuple[dict, np.ndarray]:
    """``_shared_inputs`` plus, for hard/mixed negatives, each query's hard candidates ("hard_order" int32
    [Q, H], "n_hard" int32 [Q]); clear errors when no negative can be drawn."""
    n_tools = tool_emb.shape[0]
    shared, n_gold = _shared_inputs(gold_in, fold_mask, n_tools)
    if np.any(shared["n_allowed"] < 1):
        raise ValueError("a query's gold set covers the whole pool: no negative can be drawn")
    if config.negative_sampling in ("hard", "mixed"):
        if config.hard_pool > n_tools:
            raise ValueError(f"hard_pool={config.hard_pool} exceeds the pool size {n_tools}")
        order, n_hard = hard_candidates(jnp.asarray(query_emb), jnp.asarray(tool_emb), jnp.asarray(shared["gold"]),
                                        config.hard_pool)
        shared["hard_order"], shared["n_hard"] = np.asarray(order), np.asarray(n_hard)
    return shared, n_gold

def model_counts(index, n_gold, fold_mask, config: TrainConfig):
    """Per-model triplet counts on the host, which fix the static shapes.

    Returns (n_valid int [M], n_hold int32 [M], steps per epoch, held-out width)."""
    n_valid = np.array([config.negatives * int(n_gold[fold_mask[ix["fold"]]].sum()) for ix in index])
    n_hold = np.array([n_held(int(v), config.heldout_fraction, at_least=0) for v in n_valid], np.int32)
    n_train = n_valid - n_hold
    if np.any(n_train < 1):
        raise ValueError("some model has no training triplets (empty fold or no gold tools)")
    steps = int(math.ceil(n_train.max() / config.batch_size))
    n_hold_max = max(1, int(n_hold.max()))
    return n_valid, n_hold, steps, n_hold_max

@functools.lru_cache(maxsize=32)
def triplet_program(negative_sampling: str, negatives: int, n_hold_max: int, hard_per_positive: int):
    cfg = TrainConfig(negative_sampling=negative_sampling, negatives=negatives, hard_per_positive=hard_per_positive)
    fn = functools.partial(_build_triplets, config=cfg, n_hold_max=n_hold_max)
    return jax.jit(jax.vmap(fn, in_axes=(0, 0, 0, None)))

def build_triplets(gold, fold_mask, seed: int, fold: int, n_tools: int, config: TrainConfig = TrainConfig(), *,
                   query_emb=None, tool_emb=None) -> dict:
    """One model's triplets as numpy (for inspection and tests): the same code the training runs.

    Returns {"q", "pos", "neg"} for the training triplets and {"hold_q", "hold_pos", "hold_neg"} for
    the held-out ones (int32 arrays in slot order / held-out order). ``query_emb``/``tool_emb`` are
    needed for ``negative_sampling="hard"``.
    """
    fold_mask = np.asarray(fold_mask, bool)
    shared, n_gold = _shared_inputs(np.asarray(gold, np.int32), fold_mask, n_tools)
    if config.negative_sampling in ("hard", "mixed"):
        order, n_hard = hard_candidates(jnp.asarray(query_emb), jnp.asarray(tool_emb), jnp.asarray(shared["gold"]),
                                        config.hard_pool)
        shared["hard_order"], shared["n_hard"] = order, n_hard
    n_valid = config.negatives * int(n_gold[fold_mask[fold]].sum())
    n_hold = n_held(n_valid, config.heldout_fraction, at_least=0)
    program = triplet_program(config.negative_sampling, config.negatives, max(1, n_hold), config.hard_per_positive)
    one = lambda v: np.asarray([v], np.int32)  # noqa: E731  (a model axis of 1: the training program)
    d = program(one(seed), one(fold), one(n_hold), shared)
    d = jax.tree.map(lambda x: np.asarray(x)[0], d)
    tr = d["train_flag"]
    hi = d["hold_idx"][d["hold_mask"]]
    return {
        "q": d["q"][tr], "pos": d["pos"][tr], "neg": d["neg"][tr],
        "hold_q": d["q"][hi], "hold_pos": d["pos"][hi], "hold_neg": d["neg"][hi],
    }


__all__ = ["hard_candidates", "shared_inputs_for_run", "model_counts", "triplet_program", "build_triplets"]
