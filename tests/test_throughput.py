"""smoothing_throughput: six well-formed rows whose flops/bytes follow the documented cost model (no speed checks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from riskrank_jax.graph import build_tool_graph
from riskrank_jax.smoothing import candidate_subgraphs
from riskrank_jax.throughput import COST_MODEL, random_scores, smoothing_throughput, top_candidates

N, Q, C, D = 200, 50, 20, 16
PATHS = ["jraph_segment_sum", "scipy_sparse", "dense_matmul"]
KEYS = {"mode", "path", "queries_per_s", "edges_per_s", "ratio_vs_dense", "bytes_per_call", "flops_per_call"}


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(N, D)).astype(np.float32)
    emb[N // 2:] = emb[: N // 2] + 0.3 * rng.normal(size=(N // 2, D))  # near-duplicates -> semantic edges
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    perm = rng.random((N, 5)) < 0.05
    risk = rng.integers(1, 6, N)
    gold = rng.integers(0, N, size=(400, 3))
    return build_tool_graph(emb, perm, risk, gold)


@pytest.fixture(scope="module")
def result(graph):
    return smoothing_throughput(graph, n_queries=Q, n_candidates=C, repeats=1, seed=7)


def test_rows_shape(result):
    rows = result["rows"]
    assert len(rows) == 6
    assert [(r["mode"], r["path"]) for r in rows] == [(m, p) for m in ("full", "candidates") for p in PATHS]
    for r in rows:
        assert KEYS <= set(r)
        for k in ("queries_per_s", "edges_per_s", "ratio_vs_dense", "bytes_per_call", "flops_per_call"):
            assert isinstance(r[k], float) and math.isfinite(r[k]) and r[k] > 0, (r["mode"], r["path"], k, r[k])
        assert r["host"] == (r["path"] == "scipy_sparse")
        assert r["n_queries"] == Q
        if r["path"] == "dense_matmul":
            assert r["ratio_vs_dense"] == 1.0
    assert result["repeats"] == 1
    assert isinstance(result["device"], str) and result["device"]
    assert isinstance(result["cost_model"], str) and "\n" not in result["cost_model"]
    assert COST_MODEL == result["cost_model"]


def test_ratio_is_dense_time_over_path_time(result):
    for mode in ("full", "candidates"):
        rows = {r["path"]: r for r in result["rows"] if r["mode"] == mode}
        t_dense = rows["dense_matmul"]["seconds_per_call"]
        for r in rows.values():
            assert r["ratio_vs_dense"] == pytest.approx(t_dense / r["seconds_per_call"])
            assert r["queries_per_s"] == pytest.approx(Q / r["seconds_per_call"])


def test_full_mode_cost_formulas(graph, result):
    e = graph.n_edges
    assert e > 0
    rows = {r["path"]: r for r in result["rows"] if r["mode"] == "full"}
    sparse_flops = 2 * Q * e + 4 * Q * N
    sparse_bytes = 8 * Q * N + 12 * e
    expect = {"jraph_segment_sum": (sparse_flops, sparse_bytes + 8 * Q * e),
              "scipy_sparse": (sparse_flops, sparse_bytes),
              "dense_matmul": (2 * Q * N * N + 4 * Q * N, 4 * N * N + 8 * Q * N)}
    for path, (f, b) in expect.items():
        r = rows[path]
        assert (r["n_nodes"], r["n_edges"]) == (N, e)
        assert r["flops_per_call"] == float(f) and r["bytes_per_call"] == float(b), path
        assert r["edges_per_s"] == pytest.approx(Q * e / r["seconds_per_call"])


def test_candidate_mode_cost_formulas(graph, result):
    cand = top_candidates(random_scores(Q, N, seed=7), C)
    padded = candidate_subgraphs(cand, graph)
    e = int(padded.n_edge[:-1].sum())
    e_pad = int(padded.senders.shape[0])
    assert e > 0
    rows = {r["path"]: r for r in result["rows"] if r["mode"] == "candidates"}
    sparse_flops = 2 * e + 4 * Q * C
    sparse_bytes = 8 * Q * C + 12 * e_pad
    expect = {"jraph_segment_sum": (sparse_flops, sparse_bytes + 8 * e_pad),
              "scipy_sparse": (sparse_flops, sparse_bytes),
              "dense_matmul": (2 * Q * C * C + 4 * Q * C, 4 * Q * C * C + 8 * Q * C)}
    for path, (f, b) in expect.items():
        r = rows[path]
        assert (r["n_edges"], r["n_candidates"], r["edge_budget"]) == (e, C, e_pad)
        assert r["flops_per_call"] == float(f) and r["bytes_per_call"] == float(b), path
        assert r["edges_per_s"] == pytest.approx(e / r["seconds_per_call"])


def test_rejects_empty_query_batch(graph):
    with pytest.raises(ValueError):
        smoothing_throughput(graph, n_queries=0)
