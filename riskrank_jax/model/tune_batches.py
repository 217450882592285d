"""The batches of a tuning run: (query, gold tool) pairs with hard negatives, drawn up front from each model's
seed and packed into rows of token indices into the frozen states.

    schedule = batch_schedule(gold, train_idx, hard, seed, config)   # per step: (query ids, tool ids)
    live, batch = step_batch(data, layout, schedules, lengths, ix, i) # step i of the models ix, as arrays

Why up front: the whole schedule follows from the seed, so a run resumed from a checkpoint takes the steps of
one that never stopped.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from riskrank_jax.encode.batching import ROW_LENGTH as PACK_WIDTH
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.text_states import TextStates
from riskrank_jax.model.tune_config import TuneConfig, epochs_run


class TuneData(NamedTuple):
    """What a tuning run's batches are drawn from: ``states`` of the query and tool texts after the frozen layers;
    query_rows int [Q] / tool_rows int [N]: each query's / tool's text in ``states``; gold int [Q, G] (−1 pad)."""

    states: TextStates
    query_rows: np.ndarray
    tool_rows: np.ndarray
    gold: np.ndarray


def batch_schedule(gold, train_idx, hard, seed: int, config: TuneConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """The whole training schedule, drawn from ``seed``: per step (query ids [Bq], tool ids [Bq · (1 + h)]: the
    queries' sampled gold tools, then their hard negatives). gold int [Q, G] (−1 pad); hard int [Q, P]: each
    query's first-stage best non-gold tools. The last partial batch of an epoch is dropped when one is full."""
    rng = np.random.default_rng(seed)
    train_idx = np.asarray(train_idx, np.int64)
    bq = min(int(config.batch_size), train_idx.size)
    steps = []
    for _ in range(epochs_run(config, train_idx.size)):
        order = rng.permutation(train_idx)
        for s in range(0, order.size - bq + 1, bq):
            qs = order[s:s + bq]
            pos = np.array([rng.choice(gold[q][gold[q] >= 0]) for q in qs], np.int64)
            pool = hard[qs, :max(1, min(config.hard_pool, hard.shape[1]))]
            neg = np.stack([rng.choice(row, size=config.negatives, replace=False) for row in pool])
            steps.append((qs, np.concatenate([pos, neg.reshape(-1)])))
    return steps


def run_schedules(gold, jobs, config: TuneConfig) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """The ``batch_schedule`` of each job (its train_idx, hard and seed); RiskRankError when there is no job, a
    job without a step, or jobs whose steps differ in size (queries, tools)."""
    if not jobs:
        raise RiskRankError("no model to tune")
    schedules = [batch_schedule(gold, j.train_idx, np.asarray(j.hard), j.seed, config) for j in jobs]
    if not all(schedules):
        raise RiskRankError("no training step: fewer training queries than one batch")
    sizes = {(q.size, t.size) for s in schedules for q, t in s[:1]}
    if len(sizes) > 1:
        raise RiskRankError(f"the models of one tuning run need one batch size; their training queries give "
                            f"{sorted(sizes)} (queries, tools) per step")
    return schedules


def run_layout(data: TuneData, schedules, config: TuneConfig) -> tuple:
    """((cap, row width, rows) of the queries, the same of the tools) of every step of a run: each text cut to its
    first ``cap`` tokens (``max_query_tokens`` / ``max_tool_tokens``), packed into rows of ``PACK_WIDTH`` tokens (a
    longer cap: rounded up to a multiple of 8), as many rows as the fullest step of any of the run's models needs:
    fixed for the run, so that its step compiles once. The row count is the one thing a model's computation
    takes from the other models of its run: it changes float rounding only (empty rows add zeros)."""
    out = []
    for cap, pick in ((config.max_query_tokens, lambda qs, ts: data.query_rows[qs]),
                      (config.max_tool_tokens, lambda qs, ts: data.tool_rows[ts])):
        width = max(PACK_WIDTH, -(-int(cap) // 8) * 8)
        rows = max(len(data.states.pack(pick(qs, ts), cap, width)) for s in schedules for qs, ts in s)
        out.append((int(cap), width, rows))
    return tuple(out)


def exclude_mask(gold, qs, tools) -> np.ndarray:
    """bool [Bq, Bt]: tool column j is a gold tool of query i other than its label column i."""
    gold_sets = [set(gold[q][gold[q] >= 0].tolist()) for q in qs]
    mask = np.array([[int(t) in g for t in tools] for g in gold_sets], bool)
    mask[np.arange(len(qs)), np.arange(len(qs))] = False
    return mask


def step_batch(data: TuneData, layout, schedules, lengths, ix, i: int) -> tuple[np.ndarray, tuple]:
    """(live bool [G], (q_tok, q_seg [G, Rq, Wq], t_tok, t_seg [G, Rt, Wt], exclude [G, Bq, Bt])): step ``i`` of
    the models ``ix`` of a run (``lengths`` int [M]: steps of each model's schedule), packed as ``layout`` says; a
    model past its schedule repeats its last batch and is not live."""
    live = np.array([i < lengths[m] for m in ix])
    batches = [schedules[m][min(i, lengths[m] - 1)] for m in ix]
    q = [data.states.packed(data.query_rows[qs], *layout[0]) for qs, _ in batches]
    t = [data.states.packed(data.tool_rows[tools], *layout[1]) for _, tools in batches]
    return live, (np.stack([a for a, _ in q]), np.stack([b for _, b in q]), np.stack([a for a, _ in t]),
                  np.stack([b for _, b in t]), np.stack([exclude_mask(data.gold, qs, tools) for qs, tools in batches]))


__all__ = ["PACK_WIDTH", "TuneData", "batch_schedule", "run_schedules", "run_layout", "exclude_mask", "step_batch"]
