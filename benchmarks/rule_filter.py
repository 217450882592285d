"""Rule filter throughput: early-stopping while_loop vs a plain Python loop vs a scan over all N positions.

    PYTHONPATH=. python benchmarks/rule_filter.py [--queries 1000] [--repeats 5]

Input: 1,000 queries x full rankings of UltraTool's 2,032 tools (real risk labels and perm_level from the
label file when the real data is present (--data-dir / $RISKRANK_DATA), else random labels), tool embeddings = hashed
bag-of-words of the descriptions (so near-duplicate descriptions trip the 0.9 cosine rule), rankings =
argsort of query-tool cosines of the test queries' bag-of-words vectors (random scores without data).

  jax while_loop    ``rule_filter(method="while")``: stops once every query has K accepted (O(visited·K·d))
  python loop       ``rule_filter_reference``: per-query Python loop with early stop, float64 cosines
  jax scan (all N)  ``rule_filter(method="scan")``: visits all L = N positions, accepts nothing after K
Timing: median of --repeats calls after a warm-up (compilation excluded); shared 2-core CPU, ±20 % noise.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np

from riskrank_jax.experiments.throughput import timeit
from riskrank_jax.rank.rule_filter import rule_filter, rule_filter_reference, rule_filter_with_count

sys.path.insert(0, os.path.dirname(__file__))
from smoothing import bow_embed  # noqa: E402


def load(q):
    try:
        from riskrank_jax.data import load_benchmark

        b = load_benchmark("ultratool")
        emb = bow_embed(b.tools.descriptions)
        qe = bow_embed(b.tests["test"].texts)
        reps = -(-q // qe.shape[0])
        scores = np.tile(qe @ emb.T, (reps, 1))[:q]
        return scores, b.tools.risk, b.tools.perm_level, emb, "UltraTool labels, bag-of-words embeddings"
    except Exception as e:  # noqa: BLE001
        print(f"[real data unavailable ({type(e).__name__}: {e}); random]", file=sys.stderr)
        rng = np.random.default_rng(0)
        n = 2032
        emb = rng.normal(size=(n, 64)).astype(np.float32)
        return (rng.normal(size=(q, n)), rng.integers(1, 6, n), rng.integers(0, 4, n), emb, "random")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    scores, risk, perm, emb, desc = load(args.queries)
    ranking = np.argsort(-scores, axis=1).astype(np.int32)
    q, l = ranking.shape
    kw = dict(k=args.k)
    out_w, n_acc = rule_filter_with_count(ranking, risk, perm, emb, **kw)
    out_s = rule_filter(ranking, risk, perm, emb, method="scan", **kw)
    ref = rule_filter_reference(ranking, risk, perm, emb, **kw)
    agree_w = float(np.mean(np.all(np.asarray(out_w) == ref, axis=1)))
    agree_s = float(np.mean(np.all(np.asarray(out_s) == ref, axis=1)))
    # positions the early-stopping walk visits: up to the K-th accepted tool (all L when fewer accepted)
    acc = np.asarray(out_w)[:, : args.k]
    pos_of = np.argsort(ranking, axis=1)
    last = np.where(np.asarray(n_acc) == args.k, pos_of[np.arange(q)[:, None], acc].max(1) + 1, l)
    changed = float(np.mean(np.any(np.asarray(out_w)[:, : args.k] != ranking[:, : args.k], axis=1)))

    t_w = timeit(lambda: rule_filter(ranking, risk, perm, emb, method="while", **kw), args.repeats)
    t_py = timeit(lambda: rule_filter_reference(ranking, risk, perm, emb, **kw), max(1, args.repeats // 2))
    t_s = timeit(lambda: rule_filter(ranking, risk, perm, emb, method="scan", **kw), args.repeats)

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {desc}; Q={q}, L=N={l}, d={emb.shape[1]}, "
          f"K={args.k}")
    print(f"walk length: mean {last.mean():.1f}, max {last.max()} positions (the batched while_loop runs "
          f"max); top-{args.k} changed by the rules in {changed:.1%} of queries; "
          f"agreement with the Python loop: while {agree_w:.1%}, scan {agree_s:.1%}")
    print(f"  {'implementation':<28} {'ms/call':>9} {'queries/s':>10} {'time/while':>11}")
    for name, t in [("jax while_loop (early stop)", t_w), ("python loop", t_py), ("jax scan over all N", t_s)]:
        print(f"  {name:<28} {t * 1e3:9.2f} {q / t:10.0f} {t / t_w:10.2f}x")


if __name__ == "__main__":
    main()
