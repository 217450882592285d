"""Peak RSS and wall time of one training stage on a real benchmark, run the way the sweep runs it.

    python benchmarks/train_memory.py --stage lambda_aware [--epochs 2] [--memory-budget 1GiB]
    python benchmarks/train_memory.py --stage rerank [--steps 100]

Loads the benchmark, the encoder and the cached embeddings (as ``python -m riskrank_jax.sweep`` does), then
trains one stage from scratch (a temporary checkpoint directory) and prints one JSON line: the RSS before the
stage (the loaded data + encoder + embeddings baseline), the process's peak RSS after it, and the stage's
seconds (compile included). Run each measurement in a fresh process; to compare two versions of the code run
the script twice with PYTHONPATH pointing at each checkout, side by side. ``--epochs`` / ``--steps`` shorten
the stage (the per-epoch / per-step working set, and so the peak, does not depend on them).

Figures: docs/performance.md, "Memory".
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import inspect
import json
import resource
import tempfile
import time
from pathlib import Path


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="ultratool")
    ap.add_argument("--stage", choices=("lambda_aware", "core", "core_plus", "rerank"), required=True)
    ap.add_argument("--epochs", type=int, default=10, help="training epochs (dual-head stages)")
    ap.add_argument("--steps", type=int, default=None, help="reranker steps (default: its configuration's)")
    ap.add_argument("--memory-budget", default="1GiB")
    ap.add_argument("--drop-encoder", action="store_true", help="free the encoder before the stage")
    args = ap.parse_args()

    import riskrank_jax
    from riskrank_jax.cli.options import parse_bytes
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.experiments import beyond
    from riskrank_jax.experiments.stages import embed_all, train_run
    from riskrank_jax.experiments.config import default_config
    from riskrank_jax.experiments.variants import TRAINING_RUNS

    budget = parse_bytes(args.memory_budget)
    rss0 = _rss_mb()
    bench = load_benchmark(args.benchmark)
    encoder = load_encoder(None)
    emb = embed_all(bench, encoder, EmbeddingCache(), named=True)
    if args.drop_encoder:
        del encoder
        gc.collect()
    run = TRAINING_RUNS[args.stage]
    sweep_cfg = default_config(args.benchmark, {"train.epochs": args.epochs})  # risk_head.epochs follows
    cfg = run.make(sweep_cfg, bench.tools.size)
    seeds = (42, 123, 777)
    extra = {}
    if args.stage == "rerank":
        if args.steps is not None:
            cfg = dataclasses.replace(cfg, steps=args.steps)
        fs = beyond.fit_first_stages(bench, emb)
        if _accepts(beyond.fit_rerankers, "memory_budget"):
            extra["memory_budget"] = budget
        base, peak_before = _rss_mb(), _peak_mb()
        t0 = time.perf_counter()
        out = beyond.fit_rerankers(bench, emb, fs, seeds, cfg, **extra)
        out.gate.tolist()
    else:
        if _accepts(train_run, "memory_budget"):
            extra["memory_budget"] = budget
        base, peak_before = _rss_mb(), _peak_mb()
        with tempfile.TemporaryDirectory() as ckpt:
            t0 = time.perf_counter()
            res = train_run(bench, emb, seeds, cfg, args.stage, "bench", Path(ckpt), progress=False, **extra)
            res.best_epoch.tolist()
    dt = time.perf_counter() - t0
    print(json.dumps({"code": str(Path(riskrank_jax.__file__).parent.parent), "stage": args.stage,
                      "benchmark": args.benchmark, "epochs": args.epochs, "steps": args.steps,
                      "memory_budget": budget if extra else None, "rss_start_mb": round(rss0, 1),
                      "rss_before_stage_mb": round(base, 1), "peak_before_stage_mb": round(peak_before, 1),
                      "peak_rss_mb": round(_peak_mb(), 1),
                      "stage_seconds": round(dt, 2)}))


if __name__ == "__main__":
    main()
