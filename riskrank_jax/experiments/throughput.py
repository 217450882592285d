"""Smoothing throughput: our message passing (full pool, candidates) vs scipy.sparse vs dense matmul.

Usage::

    res = smoothing_throughput(tool_graph, n_queries=1000)   # {"rows": [...], "device", "repeats", "cost_model"}

``benchmarks/smoothing.py`` prints the same measurements (plus a few extra variants) as tables.

Paths (alpha = 0.2, float32):
  full pool   riskrank_jax  ``smooth_full`` (degree-bucketed neighbour lists) with the graph's index/weight arrays already on the device
              scipy_sparse       (S Âᵀ) as CSR @ dense on the host (scipy is CPU-only: "host": true)
              dense_matmul       the jitted dense kernel with A [N, N] already on the device (``smooth_full_dense``
                                 is that peer, defined here: the package itself smooths with neighbour lists)
  candidates  each query on the subgraph induced by its top-C candidates; every path is timed end to end
              (host-side subgraph / induced-adjacency construction + kernel), since that construction is part
              of every call; the jraph and dense rows also carry ``kernel_seconds_per_call`` (graph prebuilt).

Cost model per call (float32; Q queries, N nodes, E directed edges)::

  full        sparse  flops = 2·Q·E + 4·Q·N          bytes = 8·Q·N + 12·E   (read S, write out, read senders/
                                                                          receivers/weights once)
              both riskrank_jax (neighbour lists) and scipy_sparse are charged this compulsory traffic; the
              neighbour-list kernel's transposed blocks are re-read from cache (2 MiB chunks) and not counted.
              A segment sum over an [E, Q] message buffer (``benchmarks/smoothing.py``, not timed here) would also
              write and read that buffer: bytes += 8·Q·E
              dense   flops = 2·Q·N² + 4·Q·N         bytes = 4·N² + 8·Q·N
  candidates  Q graphs of C nodes; E = induced edges summed over queries, E_pad = padded edge budget
              sparse  flops = 2·E + 4·Q·C            bytes = 8·Q·C + 12·E_pad
              the segment-sum path also writes and reads its [E_pad] message buffer:  bytes += 8·E_pad
              dense   flops = 2·Q·C² + 4·Q·C         bytes = 4·Q·C² + 8·Q·C
``edges_per_s`` counts messages: Q·E per call in full mode, E per call in candidate mode.

Timing: median of ``repeats`` calls after one warm-up call (so compilation is excluded), each ended with
``jax.block_until_ready``; wall clock, so noisy on a shared CPU.

Why in the sweep: each run records what smoothing cost on its own machine, beside its results.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from riskrank_jax.graph.smoothing import (candidate_subgraphs, combine, induced_adjacency, smooth_candidates,
                                          smooth_full, smooth_padded_batch)
from riskrank_jax.graph.tool_graph import ToolGraph

ALPHA = 0.2
PATHS = ("riskrank_jax", "scipy_sparse", "dense_matmul")
COST_MODEL = ("float32; full: sparse flops=2QE+4QN, bytes=8QN+12E (compulsory; the neighbour-list kernel's blocks are "
              "re-read from cache), "
              "dense flops=2QN^2+4QN, bytes=4N^2+8QN; candidates (Q graphs of C nodes, E=induced edges, "
              "E_pad=padded edge budget): sparse flops=2E+4QC, bytes=8QC+12E_pad (+8E_pad segment-sum "
              "messages), dense flops=2QC^2+4QC, bytes=4QC^2+8QC; edges_per_s counts messages "
              "(QE full, E candidates)")


# ----------------------------------------------------------------------------------------------------
# dense-matmul peers (the dense_matmul rows; tests compare the package's kernels against them too)


def dense_normalized_adjacency(a):
    """Â = D^-1/2 A D^-1/2 for a (batch of) dense symmetric adjacency [..., N, N]."""
    deg = a.sum(-1)
    dinv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.where(deg > 0, deg, 1.0)), 0.0)
    return a * dinv[..., :, None] * dinv[..., None, :]


@jax.jit
def smooth_full_dense_kernel(scores, a, alpha):
    """Full-pool smoothing as one matmul: scores [Q, N], dense A [N, N], alpha scalar or [A] -> [(A,) Q, N]."""
    a_hat = dense_normalized_adjacency(a.astype(scores.dtype))
    return combine(scores, scores @ a_hat.T, alpha)


def smooth_full_dense(scores, graph: ToolGraph, alpha):
    """``smooth_full`` with a dense [N, N] Â and one matmul (O(Q N^2) flops; A copied to the device per call)."""
    scores = jnp.asarray(scores)
    return smooth_full_dense_kernel(scores, jnp.asarray(graph.dense), jnp.asarray(alpha, scores.dtype))


@jax.jit
def smooth_candidates_dense_kernel(scores, a_sub, alpha):
    """Candidate smoothing as a batched matvec: scores [Q, C], induced A_sub [Q, C, C] -> [(A,) Q, C]."""
    a_hat = dense_normalized_adjacency(a_sub.astype(scores.dtype))
    return combine(scores, jnp.einsum("qij,qj->qi", a_hat, scores), alpha)


def smooth_candidates_dense(scores, cand, graph, alpha, *, query_fold=None):
    """``smooth_candidates`` with dense induced adjacencies [Q, C, C] (``induced_adjacency``), end to end."""
    scores = jnp.asarray(scores)
    a_sub = induced_adjacency(cand, graph, query_fold)
    return smooth_candidates_dense_kernel(scores, jnp.asarray(a_sub), jnp.asarray(alpha, scores.dtype))


# ----------------------------------------------------------------------------------------------------
# helpers


def timeit(fn, repeats: int, reduce=np.median) -> float:
    """Median (or ``reduce``, e.g. min) wall time of ``repeats`` calls of fn after one warm-up call (results
    block_until_ready)."""
    jax.block_until_ready(fn())
    ts = []
    for _ in range(max(1, int(repeats))):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t)
    return float(reduce(ts))


def scipy_a_hat(a: sp.csr_matrix) -> sp.csr_matrix:
    """Â = D^-1/2 A D^-1/2 as CSR (rows of isolated nodes zero)."""
    deg = np.asarray(a.sum(1)).ravel()
    dinv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0).astype(np.float32)
    return sp.diags(dinv) @ a @ sp.diags(dinv)


def scipy_full(s, a_hat_t, alpha=ALPHA):
    """Full-pool smoothing on the host: s [Q, N] numpy, a_hat_t = Âᵀ as CSR.

    Written as a numpy user would at their best (measured against three other spellings on the UltraTool and
    Seal-Tools graphs): one dense @ sparse product and an in-place combine (1 - α/2) S + (α/2) P, which is
    (S + (1 - α) S + α P) / 2 without the temporaries.
    """
    p = s @ a_hat_t  # S Âᵀ, dense @ sparse
    out = s * (1.0 - alpha / 2)
    out += (alpha / 2) * p
    return out


def scipy_candidates(cs, cand, graph: ToolGraph, alpha=ALPHA):
    """Candidate-mode smoothing on the host, end to end: block-diagonal CSR of the induced subgraphs."""
    q, c = cs.shape
    pg = candidate_subgraphs(cand, graph)
    m = q * c + 1
    a = sp.csr_matrix((pg.edges, (pg.receivers, pg.senders)), shape=(m, m))
    p = scipy_a_hat(a) @ np.concatenate([cs.ravel(), [0.0]]).astype(np.float32)
    return 0.5 * (cs + (1 - alpha) * cs + alpha * p[:-1].reshape(q, c))


def random_scores(n_queries: int, n_nodes: int, seed: int = 0) -> np.ndarray:
    """Deterministic standard-normal scores float32 [n_queries, n_nodes]."""
    return np.random.default_rng(seed).standard_normal((n_queries, n_nodes), dtype=np.float32)


def top_candidates(scores: np.ndarray, n_candidates: int) -> np.ndarray:
    """Ids of the top-n_candidates scores per row, descending score (ties in order by id), int32 [Q, C].

    argpartition + sort of the kept C: deterministic, and much faster than a full argsort of N tools.
    """
    scores = np.asarray(scores)
    q, n = scores.shape
    c = int(min(n_candidates, n))
    top = np.argpartition(-scores, c - 1, axis=1)[:, :c] if c < n else np.broadcast_to(np.arange(n), (q, n))
    order = np.lexsort((top, -np.take_along_axis(scores, top, 1)), axis=1)
    return np.take_along_axis(top, order, 1).astype(np.int32)


def cost_full(q: int, n: int, e: int) -> dict[str, tuple[float, float]]:
    """(flops, bytes) per call of each path in full-pool mode (see the module docstring)."""
    f_sp, b_sp = 2.0 * q * e + 4.0 * q * n, 8.0 * q * n + 12.0 * e
    return {"riskrank_jax": (f_sp, b_sp),  # neighbour lists: no [E, Q] message buffer
            "scipy_sparse": (f_sp, b_sp),
            "dense_matmul": (2.0 * q * n * n + 4.0 * q * n, 4.0 * n * n + 8.0 * q * n)}


def cost_candidates(q: int, c: int, e: int, e_pad: int) -> dict[str, tuple[float, float]]:
    """(flops, bytes) per call of each path in candidate mode (see the module docstring)."""
    f_sp, b_sp = 2.0 * e + 4.0 * q * c, 8.0 * q * c + 12.0 * e_pad
    return {"riskrank_jax": (f_sp, b_sp + 8.0 * e_pad),
            "scipy_sparse": (f_sp, b_sp),
            "dense_matmul": (2.0 * q * c * c + 4.0 * q * c, 4.0 * q * c * c + 8.0 * q * c)}


def _on_device(graph: ToolGraph):
    g = graph.graph
    return g._replace(senders=jnp.asarray(g.senders), receivers=jnp.asarray(g.receivers),
                      edges=jnp.asarray(g.edges, jnp.float32))


# ----------------------------------------------------------------------------------------------------
# measurements


def measure_full(graph: ToolGraph, scores: np.ndarray, repeats: int, *, with_transfer: bool = False) -> dict:
    """Time the three full-pool paths on scores [Q, N].

    Returns {"q", "n", "e", "seconds": {path: s}, "cost": {path: (flops, bytes)}}; with ``with_transfer`` also
    seconds["dense_matmul_incl_transfer"] (``smooth_full_dense``, copying A host -> device every call).
    """
    q, n = scores.shape
    e = graph.n_edges
    s = jnp.asarray(scores, jnp.float32)
    s_np = np.asarray(scores, np.float32)
    a_hat_t = scipy_a_hat(graph.to_scipy().astype(np.float32)).T.tocsr()
    g_dev = _on_device(graph)
    dense = jnp.asarray(graph.dense)
    alpha = jnp.float32(ALPHA)
    sec = {"riskrank_jax": timeit(lambda: smooth_full(s, g_dev, alpha), repeats),
           "scipy_sparse": timeit(lambda: scipy_full(s_np, a_hat_t), repeats)}
    if with_transfer:
        sec["dense_matmul_incl_transfer"] = timeit(lambda: smooth_full_dense(s, graph, ALPHA), repeats)
    sec["dense_matmul"] = timeit(lambda: smooth_full_dense_kernel(s, dense, alpha), repeats)
    del dense
    return {"q": q, "n": n, "e": e, "seconds": sec, "cost": cost_full(q, n, e)}


def measure_candidates(graph: ToolGraph, scores: np.ndarray, n_candidates: int, repeats: int) -> dict:
    """Time the three candidate-mode paths (top-C of scores [Q, N] per query), end to end and kernel-only.

    Returns {"q", "c", "n", "e", "e_pad", "seconds": {path: s}, "kernel_seconds": {path: s} (jraph, dense),
    "cost": {path: (flops, bytes)}}.
    """
    q, n = scores.shape
    c = int(min(n_candidates, n))
    cand = top_candidates(scores, c)
    cs = np.take_along_axis(scores, cand, 1).astype(np.float32)
    s = jnp.asarray(cs)
    padded = candidate_subgraphs(cand, graph)
    e = int(padded.n_edge[:-1].sum())
    e_pad = int(padded.senders.shape[0])
    snd, rcv, w = (jnp.asarray(x) for x in (padded.senders, padded.receivers, padded.edges))
    a_sub = jnp.asarray(induced_adjacency(cand, graph))
    alpha = jnp.float32(ALPHA)
    sec = {"riskrank_jax": timeit(lambda: smooth_candidates(s, cand, graph, alpha), repeats),
           "scipy_sparse": timeit(lambda: scipy_candidates(cs, cand, graph), repeats),
           "dense_matmul": timeit(lambda: smooth_candidates_dense(s, cand, graph, alpha), repeats)}
    kern = {"riskrank_jax": timeit(lambda: smooth_padded_batch(s, snd, rcv, w, alpha), repeats),
            "dense_matmul": timeit(lambda: smooth_candidates_dense_kernel(s, a_sub, alpha), repeats)}
    return {"q": q, "c": c, "n": n, "e": e, "e_pad": e_pad, "seconds": sec, "kernel_seconds": kern,
            "cost": cost_candidates(q, c, e, e_pad)}


def _rows(mode: str, m: dict) -> list[dict]:
    q = m["q"]
    msgs = q * m["e"] if mode == "full" else m["e"]
    t_dense = m["seconds"]["dense_matmul"]
    rows = []
    for path in PATHS:
        t = m["seconds"][path]
        flops, nbytes = m["cost"][path]
        r = {"mode": mode, "path": path, "queries_per_s": float(q / t), "edges_per_s": float(msgs / t),
             "ratio_vs_dense": float(t_dense / t), "bytes_per_call": float(nbytes), "flops_per_call": float(flops),
             "seconds_per_call": float(t), "n_queries": int(q), "n_nodes": int(m["n"]), "n_edges": int(m["e"]),
             "host": path == "scipy_sparse"}
        if mode == "full":
            r["timed"] = "kernel, graph arrays on device" if path != "scipy_sparse" else "host csr @ dense"
        else:
            r.update(n_candidates=int(m["c"]), edge_budget=int(m["e_pad"]),
                     timed="end to end (host subgraph build + kernel)")
            if path in m["kernel_seconds"]:
                r["kernel_seconds_per_call"] = float(m["kernel_seconds"][path])
        rows.append(r)
    return rows


def smoothing_throughput(graph: ToolGraph, *, n_queries: int, n_candidates: int = 100, repeats: int = 3,
                         seed: int = 0) -> dict:
    """Measure smoothing throughput of the three paths on ``graph``, full-pool and candidate mode.

    Scores are deterministic random float32 [n_queries, N] (``random_scores(n_queries, N, seed)``); candidate
    sets are their top-``n_candidates`` per query.  Returns {"rows": [6 row dicts, full then candidates, each
    in PATHS order], "device": platform, "repeats", "cost_model": one-line formula text, "alpha"}.
    Row keys: mode, path, queries_per_s, edges_per_s, ratio_vs_dense (dense time / this time in the same mode;
    > 1 = faster than dense), bytes_per_call, flops_per_call, seconds_per_call, n_queries, n_nodes, n_edges
    (directed edges; induced edges summed over queries in candidate mode), host (True for scipy), timed;
    candidate rows also n_candidates, edge_budget and (jraph, dense) kernel_seconds_per_call.
    """
    if n_queries < 1:
        raise ValueError(f"n_queries must be >= 1, got {n_queries}")
    scores = random_scores(int(n_queries), graph.n_nodes, seed)
    full = measure_full(graph, scores, repeats)
    cand = measure_candidates(graph, scores, n_candidates, repeats)
    return {"rows": _rows("full", full) + _rows("candidates", cand), "device": jax.devices()[0].platform,
            "repeats": int(repeats), "cost_model": COST_MODEL, "alpha": ALPHA}


__all__ = ["smoothing_throughput", "measure_full", "measure_candidates", "cost_full", "cost_candidates", "timeit",
           "scipy_a_hat", "scipy_full", "scipy_candidates", "random_scores", "top_candidates", "COST_MODEL", "PATHS",
           "smooth_full_dense", "smooth_full_dense_kernel", "smooth_candidates_dense", "smooth_candidates_dense_kernel",
           "dense_normalized_adjacency"]
