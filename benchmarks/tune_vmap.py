"""Tuning the encoder's top layers for S seeds x F folds: every model in one program per step vs one at a time.

Both paths call ``model.encoder_tune.tune_encoders`` on the same data: once with all S x F models (the sweep's
way), then once per model (a model axis of 1, what ``tune_encoder`` does). On one CPU device the model axis runs
as ``lax.map`` (``model.groups.map_models``); ``--vmap`` adds a third run with ``jax.vmap`` forced, what an
accelerator runs. Each path is compiled first (one step, not timed), then timed over ``--steps`` steps of every
model, ``--repeat`` times in alternation (the best of each kept: on a shared CPU the others' load comes and
goes); the ratio is looped seconds / together seconds, in this run.

Data: the embedded demo benchmark and the embedded all-MiniLM-L6-v2, the sweep's tuning configuration (top 2
layers, batch 32, 1 hard negative per query); fold f of F trains on the training queries outside the f-th of F
equal parts (F = 1: all of them), so the folds' schedules differ in length as a real benchmark's do; hard
negatives are random non-gold tools (the arithmetic does not depend on which).

    python benchmarks/tune_vmap.py [--seeds 3] [--folds 2] [--steps 3] [--repeat 1] [--vmap]

Why: the tuned-encoder stage is most of a sweep on a CPU; this shows what running its models together buys.
Figures: docs/performance.md, "Tuning the encoder and the cross-encoder".
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _data(n_folds: int):
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.experiments.config import SweepConfig
    from riskrank_jax.model.encoder_tune import TextStates

    bench, enc = load_benchmark("demo"), load_encoder()
    tune = SweepConfig().tune
    texts = list(bench.tools.named_texts) + list(bench.train.texts)
    t0 = time.perf_counter()
    states = TextStates.build(enc, texts, enc.shape.num_layers - tune.layers, progress=False)
    n = bench.tools.size
    gold = np.asarray(bench.train.gold)
    rng = np.random.default_rng(0)
    hard = np.stack([rng.choice(np.setdiff1d(np.arange(n), g), tune.hard_pool, replace=False) for g in gold])
    parts = np.array_split(rng.permutation(gold.shape[0]), n_folds)
    folds = [np.sort(np.concatenate([p for j, p in enumerate(parts) if j != f or n_folds == 1]))
             for f in range(n_folds)]
    return enc, tune, states, np.arange(n), n + np.arange(gold.shape[0]), gold, hard, folds, \
        time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="steps of every model, timed")
    ap.add_argument("--repeat", type=int, default=1, help="timings of each path, alternating; the best is kept")
    ap.add_argument("--vmap", action="store_true", help="also time the model axis as jax.vmap (forced)")
    args = ap.parse_args()
    import jax

    from riskrank_jax.model import encoder_tune, groups, tune_step
    from riskrank_jax.model.encoder_tune import TuneJob, tune_encoders

    enc, tune, states, tool_rows, query_rows, gold, hard, folds, states_s = _data(args.folds)
    jobs = [TuneJob(train, hard, 42 + s) for s in range(args.seeds) for train in folds]
    base = (enc, states, query_rows, tool_rows, gold)

    def run(models, steps):
        return tune_encoders(*base, models, tune, progress=False, max_steps=steps)

    def timed(models, compile_first: bool = True) -> float:
        if compile_first:
            run(models, 1)
        t0 = time.perf_counter()
        out = run(models, args.steps)
        jax.block_until_ready([t.top for t in out])
        return time.perf_counter() - t0

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    steps = [len(encoder_tune.batch_schedule(gold, j.train_idx, hard, j.seed, tune)) for j in jobs[:args.folds]]
    print(f"{len(jobs)} models ({args.seeds} seeds x {args.folds} folds; a full run of {tune.epochs} epochs takes "
          f"{steps} steps per fold), {args.steps} timed steps each, batch {tune.batch_size} queries + "
          f"{tune.batch_size * (1 + tune.negatives)} tools, top {tune.layers} layers of {enc.model_id}; "
          f"{jax.devices()[0].platform} ({jax.device_count()} device(s), {cores} cores, {platform.processor() or platform.machine()}); "
          f"lower-layer states {states_s:.1f} s (not timed)")
    looped, together = [], []
    for r in range(args.repeat):
        looped.append(sum(timed([j], r == 0) for j in jobs))
        together.append(timed(jobs, r == 0))
    looped, together = min(looped), min(together)
    print(f"one model at a time: {looped:.1f} s; all {len(jobs)} together ({'lax.map' if groups.maps_sequentially() else 'vmap'}): "
          f"{together:.1f} s; ratio {looped / together:.2f}x")
    if args.vmap:
        mapped = groups.map_models
        groups.map_models = lambda fn, in_axes: jax.vmap(fn, in_axes=tuple(in_axes))
        tune_step.compiled_step.cache_clear()
        try:
            vm = timed(jobs)
        finally:
            groups.map_models = mapped
            tune_step.compiled_step.cache_clear()
        print(f"all {len(jobs)} together, jax.vmap forced: {vm:.1f} s; ratio to one at a time {looped / vm:.2f}x")


if __name__ == "__main__":
    main()
