"""Peak memory of scoring many stacked models, per --memory-budget (each budget in a fresh process).

    python benchmarks/scoring_memory.py [--budgets 256MiB 1GiB] [--models 60 --folds 5 --queries 1000 --tools 2032]

Defaults are UltraTool's λ-aware run: 3 seeds x 5 folds x 4 λ = 60 models, 1,000 test queries, 2,032 tools,
d = 384, h = 64 (random parameters and embeddings; memory does not depend on the values). Prints, per
budget, the calls' plan, the wall time and the process's peak RSS (resource.getrusage) after scoring,
next to the peak RSS of the same process before scoring (imports and inputs). Measured on a shared CPU:
compare the rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def one(args) -> dict:
    import jax
    import numpy as np

    from riskrank_jax.model import heads as model
    from riskrank_jax.rank import stacked as pipeline
    from riskrank_jax.cli.options import parse_bytes
    from riskrank_jax.experiments.stages import peak_rss_mb

    rng = np.random.default_rng(0)
    q = rng.normal(size=(args.queries, args.dim)).astype(np.float32)
    t = rng.normal(size=(args.tools, args.dim)).astype(np.float32)
    params = jax.vmap(lambda k: model.init_params(k, args.dim, args.hidden))(jax.random.split(jax.random.key(0),
                                                                                              args.models))
    fold = np.arange(args.queries) % args.folds
    budget = parse_bytes(args.budget)
    before = peak_rss_mb()
    t0 = time.perf_counter()
    rel, risk = pipeline.model_scores(params, q, t, n_seeds=args.models // args.folds, test_fold=fold,
                                      memory_budget=budget)
    jax.block_until_ready(rel)
    plan = pipeline.plan_chunks(args.models // args.folds, args.queries // args.folds, args.tools,
                                pipeline.pair_bytes(params, args.dim), budget)
    return {"budget": args.budget, "models_per_call": plan[0], "query_step": plan[1],
            "seconds": round(time.perf_counter() - t0, 2), "peak_rss_mb_before": before,
            "peak_rss_mb": peak_rss_mb(), "rel_shape": list(rel.shape)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", nargs="+", default=["256MiB", "1GiB"])
    ap.add_argument("--budget", help=argparse.SUPPRESS)
    for name, default in (("models", 60), ("folds", 5), ("queries", 1000), ("tools", 2032), ("dim", 384),
                          ("hidden", 64)):
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args()
    if args.budget:
        print(json.dumps(one(args)))
        return
    print(f"{args.models} models ({args.folds} folds) x {args.queries} queries x {args.tools} tools, d={args.dim}, "
          f"h={args.hidden}")
    for b in args.budgets:
        cmd = [sys.executable, __file__, "--budget", b] + [f"--{n}={getattr(args, n)}" for n in
                                                            ("models", "folds", "queries", "tools", "dim", "hidden")]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout's riskrank_jax
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout.strip().splitlines()[-1]
        print(out)


if __name__ == "__main__":
    main()
