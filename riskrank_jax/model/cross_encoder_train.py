"""Training a cross-encoder on a benchmark's queries, and gating its scores onto the first stage's candidates.

    cand = candidates(first_stage, top)                        # int32 [Q, C], the first stage's best C
    ce_s = ce_scores_for(ce, query_texts, tool_texts, cand)    # float32 [Q, C]
    rel = rerank_relevance(first_stage, cand, ce_s, gamma)     # float32 [Q, N]
    ce_tuned, report = train_cross_encoder(ce, query_texts, gold, tool_texts, first_stage, seed, config)

Gate: ``rerank_relevance`` keeps the first stage (z-scored over the pool) and replaces only the candidates'
scores by ``(1 − γ)·z(first) + γ·z(ce)`` re-standardised onto the candidates' own first-stage mean and std;
γ is chosen on held-out training queries by NDCG@5 (``model.heldout``: its split, its grid, ties to the smaller
γ), as in ``model.rerank``, so γ = 0,
exactly the first stage, is kept unless the cross-encoder helps on queries it was not trained on.

Training (``train_cross_encoder``): listwise softmax cross-entropy per query over its positives (its gold
tools among the candidates ∪ one gold sampled per epoch) and ``negatives`` hard negatives (by default the
first stage's best non-gold tools, ``model.negatives.best_non_gold``; ``hard_pool`` > ``negatives`` samples
them from that many), Adam, no dropout (the model's own compiled step, ``CrossEncoder.train_step``); the whole schedule is drawn from the seed
up front, so a run is deterministic and a killed run resumes bit-identically from its last orbax checkpoint
(``model.checkpoints.RunStore``, which counts steps here); a finished run is reused without training.

Why a gated correction of the candidates' order only: the first stage's scale, which the risk penalty is
measured in, is kept, and γ = 0 is the first stage itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.checkpoints import RunStore, hash_arrays
from riskrank_jax.model.cross_encoder import CrossEncoder, CrossEncoderConfig
from riskrank_jax.model.heldout import gate_index, heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.retrieve.hybrid import zscore
from riskrank_jax.runtime.heap import release_freed_heap
from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import top_order

PROGRESS_MIN_PAIRS = 2000  # ce_scores_for shows a bar from this many pairs


def candidates(first_stage, top: int) -> np.ndarray:
    """int32 [Q, C], C = min(top, N): each query's best C tools of first_stage [Q, N], best first (equal
    scores: the lower index first)."""
    first = jnp.asarray(first_stage, jnp.float32)
    return np.asarray(top_order(first, min(int(top), first.shape[-1])), np.int32)


def rerank_relevance(first_stage, cand, ce_scores, gamma):
    """float32 [Q, N]: z(first_stage) over the pool, the candidates' entries replaced by
    ``mean_c + std_c · z_C((1 − γ)·z_C(first at cand) + γ·z_C(ce_scores))``, where z_C is a z-score over the C
    candidates and mean_c / std_c are the mean and std of the candidates' own z(first). Non-candidates are
    unchanged; γ = 0 returns z(first_stage) itself (the first stage's order). first_stage [Q, N], cand int
    [Q, C], ce_scores [Q, C]; one compiled program per shape (γ is an argument)."""
    return _rerank_relevance(jnp.asarray(first_stage, jnp.float32), jnp.asarray(cand, jnp.int32),
                             jnp.asarray(ce_scores, jnp.float32), jnp.asarray(gamma, jnp.float32))


@jax.jit
def _rerank_relevance(first_stage, cand, ce_scores, gamma):
    z = zscore(first_stage)
    zc = jnp.take_along_axis(z, cand, axis=1)
    mean, std = zc.mean(-1, keepdims=True), zc.std(-1, keepdims=True)
    mix = (1.0 - gamma) * zscore(zc) + gamma * zscore(ce_scores)
    new = mean + std * zscore(mix)
    out = z.at[jnp.arange(z.shape[0])[:, None], cand].set(new)
    return jnp.where(gamma == 0, z, out)


def gate_table(first_stage, cand, ce_scores, gold, gates: Sequence[float]) -> dict[float, float]:
    """{γ: mean NDCG@5 of ``rerank_relevance``} over the queries given: first_stage [Q, N], cand [Q, C],
    ce_scores [Q, C], gold int [Q, G] (-1 pad)."""
    out = {}
    for g in gates:
        rel = rerank_relevance(first_stage, cand, ce_scores, g)
        out[float(g)] = float(metrics.ndcg_at_k(top_order(rel, min(5, rel.shape[-1])), jnp.asarray(gold), k=5).mean())
    return out


def choose_gate(table: dict[float, float]) -> float:
    """The γ of ``gate_table`` that ``model.heldout.gate_index`` keeps (the best NDCG; ties to the smaller γ)."""
    gates = sorted(table)
    return gates[int(gate_index(np.asarray([table[g] for g in gates])))]


def ce_scores_for(ce: CrossEncoder, query_texts: Sequence[str], tool_texts: Sequence[str], cand, *,
                  batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """float32 [Q, C]: ``ce``'s score of every query with each of its candidates cand int [Q, C] (a progress
    bar from PROGRESS_MIN_PAIRS pairs)."""
    cand = np.asarray(cand)
    if cand.shape[0] != len(query_texts):
        raise RiskRankError(f"ce_scores_for: {len(query_texts)} queries but cand has {cand.shape[0]} rows")
    qs = [query_texts[q] for q in range(cand.shape[0]) for _ in range(cand.shape[1])]
    ts = [tool_texts[int(t)] for t in cand.reshape(-1)]
    s = ce.score_pairs(qs, ts, batch_size, progress=progress and len(qs) >= PROGRESS_MIN_PAIRS)
    return s.reshape(cand.shape)


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------


def training_plan(gold, cand, hard, train_rows, seed: int, config: CrossEncoderConfig) -> dict[str, np.ndarray]:
    """Every step's lists, drawn from the seed up front: {"queries": int32 [S, B] (-1 pad), "tools": int32
    [S, B, W] (-1 pad), "positive": bool [S, B, W]} with W = G + negatives, B = config.batch_size.

    Per epoch the training queries that have gold are shuffled and split into steps of B; a query's list is its
    positives (its gold among cand [Q, C] ∪ one gold sampled per epoch), then its negatives from hard int [Q, P]
    (the first stage's best non-gold tools, ``model.negatives.best_non_gold``): the best ``negatives``, or
    ``negatives`` drawn from the best ``hard_pool`` when larger."""
    gold, cand, hard = np.asarray(gold), np.asarray(cand), np.asarray(hard)
    rows = [int(q) for q in train_rows if (gold[q] >= 0).any()]
    if not rows:
        raise RiskRankError("train_cross_encoder: no training query has a gold tool")
    b, n_neg = config.batch_size, config.negatives
    pool = max(n_neg, config.hard_pool or n_neg)
    width, per_epoch = gold.shape[1] + n_neg, -(-len(rows) // b)
    tools = np.full((config.epochs * per_epoch, b, width), -1, np.int32)
    positive = np.zeros(tools.shape, bool)
    queries = np.full(tools.shape[:2], -1, np.int32)
    for e in range(config.epochs):
        rng = np.random.default_rng([int(seed), e, 23])
        for j, q in enumerate(rng.permutation(rows)):
            g = gold[q][gold[q] >= 0]
            pos = sorted({int(t) for t in cand[q] if t in g} | {int(rng.choice(g))})
            non_gold = [int(t) for t in hard[q, :pool]]
            neg = list(rng.permutation(non_gold)[:n_neg]) if pool > n_neg else non_gold[:n_neg]
            items = pos + neg
            s, r = e * per_epoch + j // b, j % b
            tools[s, r, :len(items)], positive[s, r, :len(pos)], queries[s, r] = items, True, q
    return {"queries": queries, "tools": tools, "positive": positive}


def step_batch(ce: CrossEncoder, tools, positive, q_ids, query_texts, tool_texts, rows_multiple: int):
    """One step's arrays: the valid pairs of tools int [B, W] flattened and padded to a multiple of
    ``rows_multiple`` rows -> (ids, mask, types int32 [M, L], index int32 [B, W] into the M pairs (-1 pad),
    positive bool [B, W]). q_ids int [B]: each row's query."""
    index = np.full(tools.shape, -1, np.int32)
    qs, ts = [], []
    for r, w in zip(*np.nonzero(tools >= 0)):
        index[r, w] = len(qs)
        qs.append(query_texts[int(q_ids[r])])
        ts.append(tool_texts[int(tools[r, w])])
    ids, types = ce.encode_pairs(qs, ts)
    arrays = ce.pad_batch(ids, types, max(rows_multiple, -(-len(ids) // rows_multiple) * rows_multiple))
    return (*arrays, index, np.asarray(positive & (tools >= 0)))


def _texts_hash(texts: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\x00".join(texts).encode("utf-8"), np.uint8)


def _run_store(checkpoint_dir, ce: CrossEncoder, config, seed: int, n_steps: int, arrays) -> RunStore:
    """The orbax run store, keyed by the configuration, the seed, the model and the data (RunStore counts
    steps: its train_config.epochs is the number of steps)."""
    run_config = {"format": "riskrank-jax/cross-encoder/1", "model": ce.name, "kind": ce.kind,
                  "train_config": {"epochs": int(n_steps), "config": config.to_dict(), "seed": int(seed)}}
    data_hash = hash_arrays(*arrays, *jax.tree.leaves(ce.params))
    return RunStore(checkpoint_dir, run_config, data_hash)


def _state(params, opt_state, step: int, losses) -> dict:
    leaves = jax.tree.leaves(opt_state)
    return jax.device_get({"params": params, "opt": {f"{i:04d}": x for i, x in enumerate(leaves)},
                           "step": np.asarray(step, np.int64), "losses": np.asarray(losses, np.float32)})


def _fit(ce: CrossEncoder, plan, texts, config, store: RunStore | None, progress: bool):
    """(params, losses [S], steps run now, step resumed from): the plan's steps from the last checkpoint on."""
    opt, step = ce.train_step(config.lr)
    params = ce.params
    opt_state = opt.init(params)
    n_steps = plan["tools"].shape[0]
    losses, start = np.full(n_steps, np.nan, np.float32), 0
    if store is not None:
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype),
                                _state(params, opt_state, 0, losses))
        status, start, saved = store.open(abstract)
        if saved is not None:
            params = jax.tree.map(jnp.asarray, saved["params"])
            treedef = jax.tree.structure(opt_state)
            opt_state = jax.tree.unflatten(treedef, [jnp.asarray(saved["opt"][k]) for k in sorted(saved["opt"])])
            losses = np.asarray(saved["losses"], np.float32).copy()
        if status == "completed":
            store.close()
            return params, losses, 0, start
        store.begin()
    bar = progress_bar(range(start, n_steps), enabled=progress, total=n_steps, initial=start,
                       desc="cross-encoder training", unit="step")
    for s in bar:
        batch = step_batch(ce, plan["tools"][s], plan["positive"][s], plan["queries"][s], *texts, config.batch_size)
        params, opt_state, loss = step(params, opt_state, *batch)
        losses[s] = float(loss)
        bar.set_postfix(loss=f"{losses[s]:.4f}")
        if store is not None and (s + 1 == n_steps or (s + 1) % config.checkpoint_every == 0):
            store.save_epoch(s + 1, _state(params, opt_state, s + 1, losses))
        release_freed_heap()  # a new pair length compiles a new step; its compiler's memory goes back to the OS
    if store is not None:
        store.complete()
    return params, losses, n_steps - start, start


def train_cross_encoder(ce: CrossEncoder, query_texts: Sequence[str], gold, tool_texts: Sequence[str], first_stage,
                        seed: int, config: CrossEncoderConfig = CrossEncoderConfig(), *, checkpoint_dir=None,
                        progress: bool = True) -> tuple[CrossEncoder, dict]:
    """Fine-tune ``ce`` on the training share of the queries and choose its gate on the held-out share.

    Args:
      query_texts: Q strings; gold int [Q, G] padded with -1; tool_texts: N strings; first_stage [Q, N];
      seed: the schedule's seed (see CrossEncoderConfig); checkpoint_dir: orbax checkpoints (resumed, or reused
      when finished); progress: a bar with the loss on a terminal.

    Returns:
      (the tuned CrossEncoder, report {"gate", "heldout_ndcg@5_by_gate", "steps", "steps_run", "resumed_from",
      "seconds", "train_pairs", "losses", "heldout_queries", "train_queries"}).
    """
    gold, first = np.asarray(gold, np.int32), np.asarray(first_stage, np.float32)
    if not (len(query_texts) == gold.shape[0] == first.shape[0]) or first.shape[1] != len(tool_texts):
        raise RiskRankError(f"train_cross_encoder: {len(query_texts)} queries, gold {gold.shape}, first_stage "
                            f"{first.shape}, {len(tool_texts)} tools do not match")
    t0 = time.perf_counter()
    ce = ce.with_params(ce.params, max_tokens=config.max_tokens)
    cand = candidates(first, config.top)
    split_seed = seed if config.heldout_seed is None else config.heldout_seed
    train_rows, held_rows = heldout_split(np.arange(len(query_texts)), config.heldout_fraction, split_seed)
    hard = np.asarray(best_non_gold(first, gold, max(config.negatives, config.hard_pool or config.negatives)))
    plan = training_plan(gold, cand, hard, train_rows, seed, config)
    store = None
    if checkpoint_dir is not None:
        store = _run_store(checkpoint_dir, ce, config, seed, plan["tools"].shape[0],
                           (gold, first, _texts_hash(query_texts), _texts_hash(tool_texts)))
    params, losses, ran, start = _fit(ce, plan, (query_texts, tool_texts), config, store, progress)
    seconds = time.perf_counter() - t0
    tuned = ce.with_params(params)
    held_cand = cand[held_rows]
    held_ce = ce_scores_for(tuned, [query_texts[q] for q in held_rows], tool_texts, held_cand,
                            batch_size=config.score_batch_size, progress=progress)
    table = gate_table(first[held_rows], held_cand, held_ce, gold[held_rows], sorted(config.gates))
    report = {"gate": choose_gate(table), "heldout_ndcg@5_by_gate": table, "steps": int(plan["tools"].shape[0]),
              "steps_run": int(ran), "resumed_from": int(start), "seconds": seconds,
              "train_pairs": int((plan["tools"] >= 0).sum()), "losses": [float(x) for x in losses],
              "heldout_queries": [int(q) for q in held_rows], "train_queries": [int(q) for q in train_rows]}
    return tuned, report


__all__ = ["PROGRESS_MIN_PAIRS", "candidates", "rerank_relevance", "gate_table", "choose_gate",
           "ce_scores_for", "training_plan", "step_batch", "train_cross_encoder"]
