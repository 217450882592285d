"""Smoothing throughput: jraph/segment-sum message passing vs scipy.sparse vs dense matmul, side by side.

    PYTHONPATH=. python benchmarks/smoothing.py [--embeddings bow|minilm] [--repeats 5]

Cases (real pools when ../shared/datasets is present, else random graphs of the same size):
  full-pool  UltraTool  1,000 x 2,032  (fold-0 ToolGraph: co-occurrence from fold 0's training queries)
  full-pool  Seal-Tools   700 x 4,076  (co-occurrence from the training split)
  candidates UltraTool  1,000 queries x top-100 candidates (by query-tool cosine), per-query induced subgraph
Embeddings: a hashed bag-of-words of the text (512-d; default, no model needed), or all-MiniLM-L6-v2 via
riskrank_jax.encoder / embed_cache (cached on disk) with ``--embeddings minilm``.
Scores are query-tool cosines of those embeddings.

Cost model per call (float32; E = directed edges, Q queries, N nodes):
  sparse paths   flops = 2·Q·E (one multiply-add per message) + 4·Q·N (combination)
                 bytes = 4·(2·Q·N) + 12·E      (read S, write output, read senders/receivers/weights once)
                 the segment-sum path also writes and reads an [E, Q] message buffer: + 8·Q·E
  dense path     flops = 2·Q·N² + 4·Q·N,  bytes = 4·(N² + 2·Q·N)
  candidates     the same with Q graphs of C nodes: E = induced edges (sum over queries), N² -> Q·C²
speedup = time of the first (segment-sum) row / time of this row.
Timing: median of --repeats calls after one warm-up call (compilation excluded); wall clock on a shared
2-core CPU, so expect ±20 % noise.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from riskrank_jax.graph import build_tool_graph, stats
from riskrank_jax.smoothing import (_induced_adjacency, _smooth_candidates_dense_jit, _smooth_full_dense_jit,
                                    _smooth_padded_jit, candidate_subgraphs, smooth_candidates,
                                    smooth_candidates_dense, smooth_full, smooth_full_dense)

ALPHA = 0.2


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


def timeit(fn, repeats):
    jax.block_until_ready(fn())
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def scipy_a_hat(a: sp.csr_matrix) -> sp.csr_matrix:
    deg = np.asarray(a.sum(1)).ravel()
    dinv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0).astype(np.float32)
    return sp.diags(dinv) @ a @ sp.diags(dinv)


def scipy_full(s, a_hat_t):
    p = (a_hat_t.T @ s.T).T  # (S Âᵀ) via csr @ dense
    return 0.5 * (s + (1 - ALPHA) * s + ALPHA * p)


def row(label, t, q, e, flops, nbytes, base):
    return (f"  {label:<34} {t * 1e3:9.2f} {q / t:10.0f} {e / t / 1e6:10.1f} {flops / t / 1e9:8.2f} "
            f"{nbytes / t / 1e9:7.2f} {base / t:7.2f}x")


HEADER = (f"  {'path':<34} {'ms/call':>9} {'queries/s':>10} {'Medges/s':>10} {'GFLOP/s':>8} {'GB/s':>7} "
          f"{'speedup':>8}")


def bench_full(name, g, scores, repeats):
    q, n = scores.shape
    e = g.n_edges
    s = jnp.asarray(scores, jnp.float32)
    s_np = np.asarray(scores, np.float32)
    a_hat_t = scipy_a_hat(g.to_scipy().astype(np.float32)).T.tocsr()
    dense = jnp.asarray(g.dense)
    t_seg = timeit(lambda: smooth_full(s, g, ALPHA), repeats)
    t_sp = timeit(lambda: scipy_full(s_np, a_hat_t), repeats)
    t_dn = timeit(lambda: smooth_full_dense(s, g, ALPHA), repeats)
    t_dn_k = timeit(lambda: _smooth_full_dense_jit(s, dense, jnp.float32(ALPHA)), repeats)
    f_sp, b_sp = 2 * q * e + 4 * q * n, 4 * 2 * q * n + 12 * e
    f_dn, b_dn = 2 * q * n * n + 4 * q * n, 4 * (n * n + 2 * q * n)
    print(f"\nfull pool: {name}, Q={q}, N={n}, E={e} directed edges "
          f"(sparse: {f_sp / 1e9:.3f} GFLOP, {b_sp / 1e6:.1f} MB + segment buffer {8 * q * e / 1e6:.0f} MB; "
          f"dense: {f_dn / 1e9:.2f} GFLOP, {b_dn / 1e6:.1f} MB per call)")
    print(HEADER)
    print(row("jraph/segment_sum (smooth_full)", t_seg, q, q * e, f_sp, b_sp, t_seg))
    print(row("scipy.sparse csr @ dense", t_sp, q, q * e, f_sp, b_sp, t_seg))
    print(row("dense matmul (incl. A transfer)", t_dn, q, q * e, f_dn, b_dn, t_seg))
    print(row("dense matmul (A on device)", t_dn_k, q, q * e, f_dn, b_dn, t_seg))


def bench_candidates(name, g, scores, c, repeats):
    q, n = scores.shape
    cand = np.argsort(-scores, axis=1)[:, :c].astype(np.int32)
    cs = np.take_along_axis(scores, cand, 1).astype(np.float32)
    s = jnp.asarray(cs)
    padded = candidate_subgraphs(cand, g)
    e = int(padded.n_edge[:-1].sum())
    budget = padded.senders.shape[0]
    snd, rcv, w = (jnp.asarray(x) for x in (padded.senders, padded.receivers, padded.edges))
    a_sub = jnp.asarray(_induced_adjacency(cand, g))

    def scipy_cand():
        pg = candidate_subgraphs(cand, g)
        m = q * c + 1
        a = sp.csr_matrix((pg.edges, (pg.receivers, pg.senders)), shape=(m, m))
        p = scipy_a_hat(a) @ np.concatenate([cs.ravel(), [0.0]]).astype(np.float32)
        return 0.5 * (cs + (1 - ALPHA) * cs + ALPHA * p[:-1].reshape(q, c))

    t_seg = timeit(lambda: smooth_candidates(s, cand, g, ALPHA), repeats)
    t_seg_k = timeit(lambda: _smooth_padded_jit(s, snd, rcv, w, jnp.float32(ALPHA)), repeats)
    t_sp = timeit(scipy_cand, repeats)
    t_dn = timeit(lambda: smooth_candidates_dense(s, cand, g, ALPHA), repeats)
    t_dn_k = timeit(lambda: _smooth_candidates_dense_jit(s, a_sub, jnp.float32(ALPHA)), repeats)
    f_sp, b_sp = 2 * e + 4 * q * c, 4 * 2 * q * c + 12 * budget
    f_dn, b_dn = 2 * q * c * c + 4 * q * c, 4 * (q * c * c + 2 * q * c)
    print(f"\ncandidate mode: {name}, Q={q}, C={c}, induced edges E={e} (padded to {budget}; "
          f"mean {e / q:.0f} per query; sparse {f_sp / 1e6:.1f} MFLOP, {b_sp / 1e6:.1f} MB; "
          f"dense {f_dn / 1e6:.1f} MFLOP, {b_dn / 1e6:.1f} MB per call)")
    print(HEADER)
    print(row("jraph padded batch, end to end", t_seg, q, e, f_sp, b_sp, t_seg))
    print(row("  kernel only (graph prebuilt)", t_seg_k, q, e, f_sp, b_sp, t_seg))
    print(row("scipy block-diag csr, end to end", t_sp, q, e, f_sp, b_sp, t_seg))
    print(row("dense [Q,C,C] einsum, end to end", t_dn, q, e, f_dn, b_dn, t_seg))
    print(row("  kernel only ([Q,C,C] on device)", t_dn_k, q, e, f_dn, b_dn, t_seg))


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
