"""Smoothing throughput: jraph/segment-sum message passing vs scipy.sparse vs dense matmul, side by side.

    PYTHONPATH=. python benchmarks/smoothing.py [--embeddings bow|minilm] [--repeats 5]

Cases (real pools when ../shared/datasets is present, else random graphs of the same size):
  full-pool  UltraTool  1,000 x 2,032  (fold-0 ToolGraph: co-occurrence from fold 0's training queries)
  full-pool  Seal-Tools   700 x 4,076  (co-occurrence from the training split)
  candidates UltraTool  1,000 queries x top-100 candidates (by query-tool cosine), per-query induced subgraph
Embeddings: a hashed bag-of-words of the text (512-d; default, no model needed), or all-MiniLM-L6-v2 via
riskrank_jax.encoder / embed_cache (cached on disk) with ``--embeddings minilm``.
Scores are query-tool cosines of those embeddings.

Cost model, paths and timing: see riskrank_jax/experiments/throughput.py (this script only builds the cases and prints
the measurements of riskrank_jax.experiments.throughput.measure_full / measure_candidates, plus the dense path with A copied
to the device every call).  speedup = time of the first (segment-sum) row / time of this row.
Timing: median of --repeats calls after one warm-up call (compilation excluded); wall clock on a shared
2-core CPU, so expect ±20 % noise.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import zlib

import jax
import numpy as np

from riskrank_jax.graph import build_tool_graph, stats
from riskrank_jax.experiments.throughput import measure_candidates, measure_full


def bow_embed(texts, d=512):
    out = np.zeros((len(texts), d), np.float32)
    for i, s in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", s.lower()):
            out[i, zlib.crc32(w.encode()) % d] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def make_embedder(kind):
    if kind == "bow":
        return bow_embed, "hashed bag-of-words (512-d)"
    from riskrank_jax.embed_cache import embed_texts
    from riskrank_jax.encoder import load_encoder

    enc = load_encoder(None)
    return (lambda texts: embed_texts(enc, list(texts))), f"{enc.model_id} (cached)"


def load_cases(embed):
    """[(name, graph, scores [Q, N], query_emb)], real pools if available."""
    try:
        from riskrank_jax.data import load_benchmark

        cases = []
        for name, split in [("ultratool", "test"), ("sealtools", "test_in")]:
            b = load_benchmark(name)
            tool_e = embed(b.tools.descriptions)
            qs = b.tests[split]
            q_e = embed(qs.texts)
            gold = b.train.gold[b.train_fold_mask[0]]
            g = build_tool_graph(tool_e, b.tools.perm_mask, b.tools.risk, gold)
            cases.append((name, g, q_e @ tool_e.T, b.tools.perm_mask.sum(-1)))
        return cases, "real pools (label files), co-occurrence from fold-0 / train gold"
    except Exception as e:  # noqa: BLE001
        print(f"[real data unavailable ({type(e).__name__}: {e}); random graphs]", file=sys.stderr)
        rng = np.random.default_rng(0)
        cases = []
        for name, n, q in [("random-2032", 2032, 1000), ("random-4076", 4076, 700)]:
            emb = rng.normal(size=(n, 64)).astype(np.float32)
            emb[n // 2:] = emb[: n - n // 2] + 0.4 * rng.normal(size=(n - n // 2, 64))
            perm = rng.random((n, 5)) < 0.05
            g = build_tool_graph(emb, perm, rng.integers(1, 6, n), rng.integers(0, n, (2000, 3)))
            cases.append((name, g, rng.normal(size=(q, n)).astype(np.float32), perm.sum(-1)))
        return cases, "random graphs of the real sizes"


def row(label, t, q, e, flops, nbytes, base):
    return (f"  {label:<34} {t * 1e3:9.2f} {q / t:10.0f} {e / t / 1e6:10.1f} {flops / t / 1e9:8.2f} "
            f"{nbytes / t / 1e9:7.2f} {base / t:7.2f}x")


HEADER = (f"  {'path':<34} {'ms/call':>9} {'queries/s':>10} {'Medges/s':>10} {'GFLOP/s':>8} {'GB/s':>7} "
          f"{'speedup':>8}")


def bench_full(name, g, scores, repeats):
    m = measure_full(g, scores, repeats, with_transfer=True)
    q, n, e, sec, cost = m["q"], m["n"], m["e"], m["seconds"], m["cost"]
    f_sp, b_sp = cost["scipy_sparse"]
    f_dn, b_dn = cost["dense_matmul"]
    t_seg = sec["jraph_segment_sum"]
    print(f"\nfull pool: {name}, Q={q}, N={n}, E={e} directed edges "
          f"(sparse: {f_sp / 1e9:.3f} GFLOP, {b_sp / 1e6:.1f} MB + segment buffer {8 * q * e / 1e6:.0f} MB; "
          f"dense: {f_dn / 1e9:.2f} GFLOP, {b_dn / 1e6:.1f} MB per call)")
    print(HEADER)
    print(row("jraph/segment_sum (smooth_full)", t_seg, q, q * e, *cost["jraph_segment_sum"], t_seg))
    print(row("scipy.sparse csr @ dense", sec["scipy_sparse"], q, q * e, f_sp, b_sp, t_seg))
    print(row("dense matmul (incl. A transfer)", sec["dense_matmul_incl_transfer"], q, q * e, f_dn, b_dn, t_seg))
    print(row("dense matmul (A on device)", sec["dense_matmul"], q, q * e, f_dn, b_dn, t_seg))


def bench_candidates(name, g, scores, c, repeats):
    m = measure_candidates(g, scores, c, repeats)
    q, c, e, budget, sec, kern, cost = m["q"], m["c"], m["e"], m["e_pad"], m["seconds"], m["kernel_seconds"], m["cost"]
    f_sp, b_sp = cost["scipy_sparse"]
    f_seg, b_seg = cost["jraph_segment_sum"]
    f_dn, b_dn = cost["dense_matmul"]
    t_seg = sec["jraph_segment_sum"]
    print(f"\ncandidate mode: {name}, Q={q}, C={c}, induced edges E={e} (padded to {budget}; "
          f"mean {e / q:.0f} per query; sparse {f_sp / 1e6:.1f} MFLOP, {b_sp / 1e6:.1f} MB; "
          f"dense {f_dn / 1e6:.1f} MFLOP, {b_dn / 1e6:.1f} MB per call)")
    print(HEADER)
    print(row("jraph padded batch, end to end", t_seg, q, e, f_seg, b_seg, t_seg))
    print(row("  kernel only (graph prebuilt)", kern["jraph_segment_sum"], q, e, f_seg, b_seg, t_seg))
    print(row("scipy block-diag csr, end to end", sec["scipy_sparse"], q, e, f_sp, b_sp, t_seg))
    print(row("dense [Q,C,C] einsum, end to end", sec["dense_matmul"], q, e, f_dn, b_dn, t_seg))
    print(row("  kernel only ([Q,C,C] on device)", kern["dense_matmul"], q, e, f_dn, b_dn, t_seg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embeddings", choices=["bow", "minilm"], default="bow")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--candidates", type=int, default=100)
    args = ap.parse_args()
    embed, emb_desc = make_embedder(args.embeddings)
    cases, data_desc = load_cases(embed)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} CPUs visible); "
          f"data: {data_desc}; embeddings: {emb_desc}")
    for name, g, scores, perm_level in cases:
        print(f"graph {name}: {stats(g, perm_level)}")
    for name, g, scores, _ in cases:
        bench_full(name, g, scores, args.repeats)
    name, g, scores, _ = cases[0]
    bench_candidates(name, g, scores, args.candidates, args.repeats)


if __name__ == "__main__":
    main()
