"""Smoothing throughput: neighbour lists (smooth_full) vs a segment sum vs scipy.sparse vs dense matmul.

    PYTHONPATH=. python benchmarks/smoothing.py [--embeddings minilm|bow] [--repeats 5]

Cases (real pools when the datasets are found, else random graphs of the same size):
  full-pool  UltraTool  1,000 x 2,032  (fold-0 ToolGraph: co-occurrence from fold 0's training queries), plus
             all 5 fold graphs at once (smooth_full_folds, each query on its own fold's graph)
  full-pool  Seal-Tools   700 x 4,076  (co-occurrence from the training split)
  candidates UltraTool  1,000 queries x top-100 candidates (by query-tool cosine), per-query induced subgraph
Embeddings: all-MiniLM-L6-v2 via riskrank_jax.encode.encoder / embedding_cache (default encoder, default disk cache;
the sweep's embeddings), or a hashed bag-of-words of the text (512-d, no model needed) with ``--embeddings bow``.
Scores are query-tool cosines of those embeddings.

The segment sum over an [E, Q] message buffer (``smooth_full_segment_sum``, defined here: the package does
not use it) is the alternative the neighbour lists replace; the dense peer is throughput's
``smooth_full_dense_kernel``; "prepared graph" is ``smooth_full`` on ``prepare_graph(g)`` (what a Ranker calls).
Cost model, paths and timing: see riskrank_jax/experiments/throughput.py (this script only builds the cases and prints
the measurements of riskrank_jax.experiments.throughput.measure_full / measure_candidates, plus the dense path with A copied
to the device every call).  Full pool: every path is timed in one interleaved loop (round r times each path once), reporting the
minimum wall time and the minimum process CPU time (all threads) per path; "vs scipy" = scipy's time / this
path's time (> 1 = faster).  GB/s counts the compulsory traffic 8·Q·N + 12·E bytes (read S, write out, read
the edges once), next to this machine's memory bandwidth measured as a numpy copy of a 1 GiB array.
Candidate mode: median of --repeats calls after one warm-up call (riskrank_jax.experiments.throughput).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import zlib

import time

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.experiments.throughput import (cost_full, measure_candidates, scipy_a_hat, scipy_full,
                                                 smooth_full_dense_kernel)
from riskrank_jax.graph.smoothing import (combine, normalized_edge_weights, prepare_graph, smooth_full,
                                          smooth_full_folds, stack_graphs)
from riskrank_jax.graph.tool_graph import build_fold_graphs, build_tool_graph, stats

MSG_BUDGET = 1 << 24  # float32 entries of the segment sum's [E, chunk] message buffer


@jax.jit
def _segment_sum_jit(scores, senders, receivers, weights, alpha):
    """scores [Q, N] -> [(A,) Q, N]: P = S Âᵀ as a segment sum of [E, c] messages, c queries per lax.map step."""
    q, n = scores.shape
    norm_w = normalized_edge_weights(senders, receivers, weights.astype(scores.dtype), n)
    n_chunks = int(max(1, -(-q * max(senders.shape[0], 1) // MSG_BUDGET)))
    chunk = -(-q // n_chunks)
    n_chunks = -(-q // chunk)
    x = jnp.pad(scores, [(0, n_chunks * chunk - q), (0, 0)]).reshape(n_chunks, chunk, n)

    def propagate(s):  # [c, N] -> [c, N]
        msg = s.T[senders] * norm_w[:, None]  # [E, c]
        return jax.ops.segment_sum(msg, receivers, num_segments=n).T

    p = jax.lax.map(propagate, x).reshape(n_chunks * chunk, n)[:q]
    return combine(scores, p, alpha)


def smooth_full_segment_sum(scores, graph, alpha):
    """``smooth_full`` as a segment sum over an [E, Q] message buffer: scores [Q, N], a ToolGraph or its
    GraphsTuple -> [(A,) Q, N]."""
    g = graph.graph if hasattr(graph, "graph") else graph
    scores = jnp.asarray(scores)
    return _segment_sum_jit(scores, jnp.asarray(g.senders), jnp.asarray(g.receivers), jnp.asarray(g.edges),
                            jnp.asarray(alpha, scores.dtype))


def bow_embed(texts, d=512):
    out = np.zeros((len(texts), d), np.float32)
    for i, s in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", s.lower()):
            out[i, zlib.crc32(w.encode()) % d] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def make_embedder(kind):
    if kind == "bow":  # noqa: SIM116
        return bow_embed, "hashed bag-of-words (512-d)"
    from riskrank_jax.encode.embedding_cache import embed_texts
    from riskrank_jax.encode.encoder import load_encoder

    enc = load_encoder(None)
    return (lambda texts: embed_texts(enc, list(texts))), f"{enc.model_id} (cached)"


def load_cases(embed):
    """([(name, graph, scores [Q, N], perm_level, fold_graphs or None, query_fold or None)], description)."""
    try:
        from riskrank_jax.data import load_benchmark

        cases = []
        for name, split in [("ultratool", "test"), ("sealtools", "test_in")]:
            b = load_benchmark(name)
            tool_e = embed(b.tools.descriptions)
            q_e = embed(b.tests[split].texts)
            folds = build_fold_graphs(tool_e, b.tools.perm_mask, b.tools.risk, b.train.gold, b.train_fold_mask)
            qf = b.test_fold[split] if len(folds) > 1 else None
            cases.append((name, folds[0], q_e @ tool_e.T, b.tools.perm_mask.sum(-1), folds if qf is not None else None,
                          qf))
        return cases, "real pools (label files), co-occurrence from each fold's training queries"
    except Exception as e:  # noqa: BLE001
        print(f"[real data unavailable ({type(e).__name__}: {e}); random graphs]", file=sys.stderr)
        rng = np.random.default_rng(0)
        cases = []
        for name, n, q in [("random-2032", 2032, 1000), ("random-4076", 4076, 700)]:
            emb = rng.normal(size=(n, 64)).astype(np.float32)
            emb[n // 2:] = emb[: n - n // 2] + 0.4 * rng.normal(size=(n - n // 2, 64))
            perm = rng.random((n, 5)) < 0.05
            g = build_tool_graph(emb, perm, rng.integers(1, 6, n), rng.integers(0, n, (2000, 3)))
            cases.append((name, g, rng.normal(size=(q, n)).astype(np.float32), perm.sum(-1), None, None))
        return cases, "random graphs of the real sizes"


def memory_bandwidth(n_bytes: int = 1 << 30, repeats: int = 3) -> float:
    """Bytes/s of a numpy copy of an n_bytes float32 array (read + write counted), best of ``repeats``."""
    a = np.ones(n_bytes // 4, np.float32)
    b = np.empty_like(a)
    best = min(_timed(lambda: np.copyto(b, a))[0] for _ in range(repeats))
    del a, b
    return 2.0 * n_bytes / best


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn())
    return time.perf_counter() - t, time.process_time() - c


def interleaved(paths: dict, repeats: int) -> dict:
    """{name: (min wall s, min process-CPU s)}: one warm-up each, then ``repeats`` rounds calling every path once."""
    for fn in paths.values():
        jax.block_until_ready(fn())
    runs = {k: [] for k in paths}
    for _ in range(max(1, repeats)):
        for k, fn in paths.items():
            runs[k].append(_timed(fn))
    return {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in runs.items()}


def full_paths(g, scores, folds, qf):
    """Timed callables of every full-pool path; all device inputs prepared outside the timed call."""
    s = jnp.asarray(scores, jnp.float32)
    s_np = np.asarray(scores, np.float32)
    a_hat_t = scipy_a_hat(g.to_scipy().astype(np.float32)).T.tocsr()
    gd = g.graph._replace(senders=jnp.asarray(g.senders), receivers=jnp.asarray(g.receivers),
                          edges=jnp.asarray(g.weights))
    dense = jnp.asarray(g.dense)
    prepared = prepare_graph(g)
    alpha = jnp.float32(0.2)
    paths = {"scipy.sparse dense @ csr": lambda: scipy_full(s_np, a_hat_t),
             "smooth_full (neighbour lists)": lambda: smooth_full(s, g, 0.2),
             "smooth_full (prepared graph)": lambda: smooth_full(s, prepared, 0.2),
             "segment sum [E, Q]": lambda: smooth_full_segment_sum(s, gd, 0.2),
             "dense matmul (A on device)": lambda: smooth_full_dense_kernel(s, dense, alpha)}
    if folds is not None:
        fg = stack_graphs(folds)
        a_t = [scipy_a_hat(f.to_scipy().astype(np.float32)).T.tocsr() for f in folds]
        rows = [np.nonzero(qf == f)[0] for f in range(len(folds))]

        def scipy_folds():
            out = np.empty_like(s_np)
            for f, r in enumerate(rows):  # F <= 5 folds
                out[r] = scipy_full(s_np[r], a_t[f])
            return out

        paths["scipy.sparse, 5 fold graphs"] = scipy_folds
        paths["smooth_full_folds (5 fold graphs)"] = lambda: smooth_full_folds(s, qf, fg, 0.2)
    return paths


def bench_full(name, g, scores, folds, qf, repeats, bandwidth):
    q, n = scores.shape
    e = g.n_edges
    flops, nbytes = cost_full(q, n, e)["scipy_sparse"]
    ref = np.asarray(smooth_full_segment_sum(scores, g, 0.2))
    diff = float(np.abs(np.asarray(smooth_full(scores, g, 0.2)) - ref).max())
    res = interleaved(full_paths(g, scores, folds, qf), repeats)
    print(f"\nfull pool: {name}, Q={q}, N={n}, E={e} directed edges; compulsory traffic {nbytes / 1e6:.1f} MB, "
          f"{flops / 1e9:.3f} GFLOP per call; max |neighbour lists - segment sum| = {diff:.1e}")
    print(f"  {'path':<36} {'wall ms':>8} {'cpu ms':>8} {'vs scipy':>9} {'(cpu)':>6} {'GB/s':>6} {'of bw':>6}")
    w0, c0 = res["scipy.sparse dense @ csr"]
    for k, (w, c) in res.items():
        base = (res["scipy.sparse, 5 fold graphs"] if "fold" in k else (w0, c0))
        print(f"  {k:<36} {w * 1e3:8.2f} {c * 1e3:8.2f} {base[0] / w:8.2f}x {base[1] / c:5.2f}x "
              f"{nbytes / w / 1e9:6.2f} {nbytes / w / bandwidth:6.1%}")
    return res


def bench_candidates(name, g, scores, c, repeats):
    m = measure_candidates(g, scores, c, repeats)
    q, c, e, budget, sec, kern = m["q"], m["c"], m["e"], m["e_pad"], m["seconds"], m["kernel_seconds"]
    t_sp = sec["scipy_sparse"]
    print(f"\ncandidate mode: {name}, Q={q}, C={c}, induced edges E={e} (padded to {budget}); "
          f"median of {repeats}, end to end (host subgraph build + kernel)")
    print(f"  {'path':<36} {'ms':>8} {'vs scipy':>9}")
    for label, t in [("jraph padded batch (smooth_candidates)", sec["riskrank_jax"]),
                     ("  kernel only (graph prebuilt)", kern["riskrank_jax"]),
                     ("scipy block-diag csr", t_sp), ("dense [Q,C,C] einsum", sec["dense_matmul"])]:
        print(f"  {label:<36} {t * 1e3:8.2f} {t_sp / t:8.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embeddings", choices=["minilm", "bow"], default="minilm")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--cases", type=int, default=2, help="how many of (UltraTool, Seal-Tools) to run")
    args = ap.parse_args()
    embed, emb_desc = make_embedder(args.embeddings)
    cases, data_desc = load_cases(embed)
    cases = cases[: args.cases]
    bw = memory_bandwidth()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} CPUs visible); "
          f"data: {data_desc}; embeddings: {emb_desc}; memory bandwidth (numpy 1 GiB copy): {bw / 1e9:.2f} GB/s")
    for name, g, scores, perm_level, *_ in cases:
        print(f"graph {name}: {stats(g, perm_level)}")
    for name, g, scores, _, folds, qf in cases:
        bench_full(name, g, scores.astype(np.float32), folds, qf, args.repeats, bw)
    name, g, scores, *_ = cases[0]
    bench_candidates(name, g, scores, args.candidates, max(3, args.repeats // 2))


if __name__ == "__main__":
    main()
