"""Seconds and peak memory of the sweep's evaluation stages on a real benchmark, old code next to new.

    python benchmarks/evaluate_stages.py --benchmark sealtools [--base /tmp/base] [--memory-budget 1GiB]

Runs, each in a fresh process from cached embeddings, the stages "fit hybrid first stages", "choose λ per
risk budget" and "evaluate <split>" of ``python -m riskrank_jax.sweep`` (every variant), and prints per stage
the wall seconds and the process's peak RSS (``resource.getrusage``) after it. The training runs the stages
need are trained once with few epochs / steps (evaluation cost does not depend on them) and kept in
``--runs-cache``; they are loaded, not trained, in the measured processes.

``--base DIR``: a source tree of another riskrank-jax commit (e.g. ``git archive <commit> | tar -x -C DIR``)
measured the same way right before this tree, so the two columns are side by side in one run; the stages'
outputs (hybrid weights, risk-budget λs, every results.json section) of the two trees are then compared
(exactly, and the largest absolute difference of any number). Measure on a quiet machine, or read ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config(args):
    from riskrank_jax.cli.options import parse_bytes
    from riskrank_jax.experiments.config import default_config

    return default_config(args.benchmark, {
        "train.epochs": args.epochs,
        "runtime.memory_budget": parse_bytes(args.memory_budget), "eval.smoothing_benchmark": False})


def _inputs(args):
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.experiments.stages import embed_all

    bench = load_benchmark(args.benchmark)
    emb = embed_all(bench, load_encoder(None), EmbeddingCache(None), named=True)
    return bench, emb


def _numpy_tree(obj):
    """A training result with its arrays as numpy (picklable across code trees)."""
    import jax
    import numpy as np

    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, params=jax.tree.map(np.asarray, obj.params))
    return np.asarray(obj)


def prepare(args) -> None:
    """Train every run the variants need (few epochs / reranker steps) and pickle them to --runs-cache."""
    from riskrank_jax.experiments import beyond
    from riskrank_jax.experiments.stages import train_run
    from riskrank_jax.experiments.stages import risk_only_scores
    from riskrank_jax.experiments.variants import TRAINING_RUNS
    from riskrank_jax.model.rerank import RerankConfig
    from riskrank_jax.model.risk_head import RiskHeadConfig

    cfg = _config(args)
    bench, emb = _inputs(args)
    fs = beyond.fit_first_stages(bench, emb)
    runs = {}
    with tempfile.TemporaryDirectory() as ckpt:
        for name, run in TRAINING_RUNS.items():
            run_cfg = run.make(cfg, bench.tools.size)
            if isinstance(run_cfg, RerankConfig):
                small = dataclasses.replace(run_cfg, steps=args.rerank_steps, eval_every=args.rerank_steps)
                runs[name] = beyond.fit_rerankers(bench, emb, fs, cfg.seeds, small)
            elif isinstance(run_cfg, RiskHeadConfig):
                runs[name] = risk_only_scores(emb["tools"], bench.tools.risk, cfg.seeds, run_cfg)
            else:
                runs[name] = train_run(bench, emb, cfg.seeds, run_cfg, name, "bench", Path(ckpt), progress=False)
    Path(args.runs_cache).write_bytes(pickle.dumps({k: _numpy_tree(v) for k, v in runs.items()}))


def measure(args) -> None:
    """The timed stages in this process; writes {"seconds", "peak_rss_mb", "rss_before_mb"} and the outputs."""
    from riskrank_jax.experiments import beyond
    from riskrank_jax.experiments import paper as sweep
    from riskrank_jax.experiments.stages import StageLog, peak_rss_mb
    from riskrank_jax.experiments.variants import select_variants

    cfg = _config(args)
    bench, emb = _inputs(args)
    runs = pickle.loads(Path(args.runs_cache).read_bytes())
    variants = select_variants(())
    log = StageLog(args.benchmark)
    before = peak_rss_mb()
    fs = log.run("fit hybrid first stages", beyond.fit_first_stages, bench, emb)
    runs.update(first_stages=fs, hybrid_weights=fs.weights)
    graphs = sweep.build_graphs(bench, emb)
    budgets = log.run("choose λ per risk budget", sweep.budget_lambdas, cfg, bench, emb, runs, variants)
    sections = {split: log.run(f"evaluate {split}", sweep.evaluate_split, cfg, bench, emb, split, runs, graphs,
                               variants, budgets) for split in bench.tests}
    out = Path(args.result)
    out.with_suffix(".json").write_text(json.dumps({"seconds": log.timings, "peak_rss_mb": log.peak_rss_mb,
                                                    "rss_before_mb": before}))
    outputs = {"hybrid_weights": {k: v.tolist() for k, v in fs.weights.items()},
               "budgets": {r: {str(b): [x.tolist() for x in v] for b, v in d.items()} for r, d in budgets.items()},
               "sections": sections}
    out.with_suffix(".pkl").write_bytes(pickle.dumps(outputs))


def _run_tree(tree: Path, mode: str, args, result: Path | None = None) -> None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--mode", mode, "--benchmark", args.benchmark,
           "--memory-budget", args.memory_budget, "--epochs", str(args.epochs), "--runs-cache", args.runs_cache,
           "--rerank-steps", str(args.rerank_steps)] + (["--result", str(result)] if result else [])
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if "RISKRANK_DATA" not in env:  # a base tree unpacked elsewhere does not find the data beside it
        from riskrank_jax.paths import resolve_data_dir

        env["RISKRANK_DATA"] = str(resolve_data_dir())
    subprocess.run(cmd, check=True, env=env, cwd=str(tree))


def _diff(a, b, path="") -> tuple[int, int, float, list]:
    """(numbers compared, numbers differing, largest absolute difference, first differing paths)."""
    if isinstance(a, dict) and isinstance(b, dict):
        tot = [0, 0, 0.0, []]
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                tot[1] += 1
                tot[3].append(f"{path}/{k} (missing on one side)")
                continue
            n, d, m, where = _diff(a[k], b[k], f"{path}/{k}")
            tot = [tot[0] + n, tot[1] + d, max(tot[2], m), tot[3] + where]
        return tot[0], tot[1], tot[2], tot[3][:10]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return _diff(dict(enumerate(a)), dict(enumerate(b)), path)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        same = a == b or (a != a and b != b)
        return 1, int(not same), 0.0 if same else abs(a - b), [] if same else [path]
    return 1, int(a != b), 0.0, [] if a == b else [path]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="sealtools", choices=["demo", "ultratool", "sealtools"])
    p.add_argument("--base", type=Path, default=None, help="another source tree measured first, side by side")
    p.add_argument("--memory-budget", default="1GiB")
    p.add_argument("--epochs", type=int, default=1, help="training epochs of the cached runs")
    p.add_argument("--rerank-steps", type=int, default=20, help="reranker training steps of the cached runs")
    p.add_argument("--runs-cache", default=None, help="pickle of the trained runs (default: a file in /tmp)")
    p.add_argument("--mode", default="compare", choices=["compare", "prepare", "measure"], help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.runs_cache = args.runs_cache or f"{tempfile.gettempdir()}/riskrank-evaluate-stages-{args.benchmark}-" \
                                         f"e{args.epochs}-r{args.rerank_steps}.pkl"
    if args.mode == "prepare":
        return prepare(args)
    if args.mode == "measure":
        return measure(args)
    if not Path(args.runs_cache).exists():
        t0 = time.perf_counter()
        _run_tree(ROOT, "prepare", args)
        print(f"trained the runs once in {time.perf_counter() - t0:.0f} s -> {args.runs_cache}")
    trees = ([("base", args.base.resolve())] if args.base else []) + [("this", ROOT)]
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, tree in trees:
            _run_tree(tree, "measure", args, Path(tmp) / label)
            res[label] = (json.loads((Path(tmp) / f"{label}.json").read_text()),
                          pickle.loads((Path(tmp) / f"{label}.pkl").read_bytes()))
    _print(args, trees, res)


def _print(args, trees, res) -> None:
    labels = [label for label, _ in trees]
    print(f"{args.benchmark}, --memory-budget {args.memory_budget}; peak RSS before the stages: "
          + ", ".join(f"{lb} {res[lb][0]['rss_before_mb']:.0f} MiB" for lb in labels))
    print(f"{'stage':<28}" + "".join(f"{lb + ' s':>12}{lb + ' MiB':>12}" for lb in labels)
          + ("   time ratio base/this" if len(labels) == 2 else ""))
    for stage in res[labels[-1]][0]["seconds"]:
        row = f"{stage:<28}" + "".join(f"{res[lb][0]['seconds'][stage]:>12.1f}{res[lb][0]['peak_rss_mb'][stage]:>12.0f}"
                                       for lb in labels)
        if len(labels) == 2:
            row += f"   {res['base'][0]['seconds'][stage] / max(res['this'][0]['seconds'][stage], 1e-9):.2f}x"
        print(row)
    if len(labels) == 2:
        n, d, m, where = _diff(res["base"][1], res["this"][1])
        print(f"outputs compared: {n} values, {d} differing, largest abs difference {m:.3g}"
              + (f"; first: {', '.join(where)}" if where else ""))


if __name__ == "__main__":
    main()
