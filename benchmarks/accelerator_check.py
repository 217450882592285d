"""Accelerator check: results on the default device (GPU/TPU) equal the CPU's, and kernel throughput there.

    PYTHONPATH=. python benchmarks/accelerator_check.py [--dry-run] [--out DIR]

Correctness (accelerator vs jax's CPU backend in the same process, same inputs; tolerances in TOL):
  smoothing   smooth_full, smooth_full_folds (5 graphs), smooth_candidates on a random 2,032-tool graph
  scoring     model.relevance_full, concat and interact heads, 1,000 x 2,032, d = 384
  rule filter rule_filter top-5 lists must be identical
  training    train_models, 3 seeds x 2 folds vmapped, 1 epoch on a small random registry (losses to 1e-3)
Throughput (accelerator): smoothing full pool (bytes/s of the compulsory 8·Q·N + 12·E traffic vs the device's
memory bandwidth, measured as a jitted copy of a 1 GiB array) and relevance_full (ms, GFLOP/s).
--dry-run runs everything on the CPU against itself with smaller sizes (checks the script, not a device).
Writes accelerator_check.json to --out (default $OUT, else the working directory) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from riskrank_jax.experiments.throughput import timeit  # noqa: E402
from riskrank_jax.graph.smoothing import smooth_candidates, smooth_full, smooth_full_folds  # noqa: E402
from riskrank_jax.graph.tool_graph import build_fold_graphs  # noqa: E402
from riskrank_jax.model import heads as model
from riskrank_jax.model.train import TrainRun, train_models  # noqa: E402
from riskrank_jax.model.train_config import TrainConfig  # noqa: E402
from riskrank_jax.rank.rule_filter import rule_filter  # noqa: E402

TOL = {"smoothing": 1e-5, "scoring": 1e-5, "training_loss": 1e-3}


def unit(rng, n, d):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_inputs(n_tools, n_q, d, seed=0):
    rng = np.random.default_rng(seed)
    t = unit(rng, n_tools, d)
    t[n_tools // 2:] = t[: n_tools - n_tools // 2] + 0.3 * unit(rng, n_tools - n_tools // 2, d)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    q = unit(rng, n_q, d)
    perm = rng.random((n_tools, 5)) < 0.03
    risk = rng.integers(1, 6, n_tools).astype(np.int32)
    gold = rng.integers(0, n_tools, (n_q, 3)).astype(np.int32)
    fold_of = np.arange(n_q) % 5
    folds = build_fold_graphs(t, perm, risk, gold, np.stack([fold_of != f for f in range(5)]))
    return dict(t=t, q=q, perm=perm, risk=risk, gold=gold, fold_of=fold_of, folds=folds)


def on(device, fn):
    with jax.default_device(device):
        return jax.tree.map(np.asarray, fn())


def correctness(acc, cpu, x, train_sizes):
    out = {}
    s = x["q"] @ x["t"].T
    cand = np.argsort(-s, axis=1)[:, :100].astype(np.int32)
    cs = np.take_along_axis(s, cand, 1)
    cases = {
        "smooth_full": lambda: smooth_full(s, x["folds"][0], 0.2),
        "smooth_full_folds": lambda: smooth_full_folds(s, x["fold_of"], x["folds"], 0.2),
        "smooth_candidates": lambda: smooth_candidates(cs, cand, x["folds"][0], 0.2),
    }
    for name, fn in cases.items():
        out[name] = float(np.abs(on(acc, fn) - on(cpu, fn)).max())
    d = x["t"].shape[1]
    for feats in ("concat", "interact"):
        p = model.init_params(jax.random.key(0), d, rel_features=feats)
        fn = lambda p=p: model.relevance_full(p, jnp.asarray(x["q"]), jnp.asarray(x["t"]))  # noqa: E731
        out[f"relevance_full_{feats}"] = float(np.abs(on(acc, fn) - on(cpu, fn)).max())
    perm_level = x["perm"].sum(1)
    rank = np.argsort(-s, axis=1)[:, :50].astype(np.int32)
    fn = lambda: rule_filter(rank, x["risk"], perm_level, x["t"], k=5)  # noqa: E731
    out["rule_filter_top5_identical"] = bool(np.array_equal(on(acc, fn)[:, :5], on(cpu, fn)[:, :5]))
    n_t, n_q = train_sizes
    cfg = TrainConfig(epochs=1)
    fold_mask = np.stack([np.arange(n_q) % 2 != f for f in range(2)])
    fn = lambda: train_models(x["t"][:n_t], x["q"][:n_q], x["gold"][:n_q] % n_t, x["risk"][:n_t], fold_mask,  # noqa
                              cfg, TrainRun((1, 2, 3), progress=False)).heldout_loss
    out["train_heldout_loss"] = float(np.abs(on(acc, fn) - on(cpu, fn)).max())
    out["pass"] = bool(max(out[k] for k in cases) <= TOL["smoothing"]
                       and max(out["relevance_full_concat"], out["relevance_full_interact"]) <= TOL["scoring"]
                       and out["rule_filter_top5_identical"] and out["train_heldout_loss"] <= TOL["training_loss"])
    return out


def best(fn, repeats=5):
    return timeit(fn, repeats, reduce=min)


def throughput(acc, x, copy_bytes):
    with jax.default_device(acc):
        a = jnp.ones(copy_bytes // 4, jnp.float32)
        copy = jax.jit(lambda a: a + 1.0)
        bw = 2.0 * copy_bytes / best(lambda: copy(a))
        del a
        g = x["folds"][0]
        s = jnp.asarray(x["q"] @ x["t"].T)
        q, n = s.shape
        t_s = best(lambda: smooth_full(s, g, 0.2))
        nbytes = 8.0 * q * n + 12.0 * g.n_edges
        p = model.init_params(jax.random.key(0), x["t"].shape[1])
        qe, te = jnp.asarray(x["q"]), jnp.asarray(x["t"])
        rel = jax.jit(model.relevance_full)
        t_r = best(lambda: rel(p, qe, te))
        flops = 2.0 * (q + n) * qe.shape[1] * 64 + 4.0 * q * n * 64
    return {"device_memory_bandwidth_GBps": bw / 1e9, "smooth_full_ms": t_s * 1e3,
            "smooth_full_GBps": nbytes / t_s / 1e9, "smooth_full_fraction_of_bandwidth": nbytes / t_s / bw,
            "relevance_full_ms": t_r * 1e3, "relevance_full_GFLOPps": flops / t_r / 1e9,
            "shape": {"queries": q, "tools": n, "edges": g.n_edges}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU against CPU, small sizes")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    cpu = jax.devices("cpu")[0]
    acc = jax.devices()[0]
    if acc.platform == "cpu" and not args.dry_run:
        sys.exit("error: no accelerator visible to jax (jax.devices() is CPU); use --dry-run to test the script")
    n_tools, n_q, copy_bytes = (2032, 1000, 1 << 30) if not args.dry_run else (400, 120, 1 << 26)
    x = make_inputs(n_tools, n_q, 384)
    t0 = time.perf_counter()
    res = {"device": str(acc), "platform": acc.platform, "dry_run": args.dry_run, "jax": jax.__version__,
           "correctness": correctness(acc, cpu, x, (min(n_tools, 400), min(n_q, 120))),
           "throughput": throughput(acc, x, copy_bytes)}
    res["seconds"] = time.perf_counter() - t0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "accelerator_check.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    sys.exit(0 if res["correctness"]["pass"] else 2)


if __name__ == "__main__":
    main()
