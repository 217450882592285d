"""smoothing_throughput: six well-formed rows, consistent with each other (no speed checks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from riskrank_jax.experiments.throughput import random_scores, smoothing_throughput, top_candidates
from riskrank_jax.graph.smoothing import candidate_subgraphs
from riskrank_jax.graph.tool_graph import build_tool_graph

N, Q, C, D = 200, 50, 20, 16
PATHS = ["riskrank_jax", "scipy_sparse", "dense_matmul"]
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


def test_candidate_rows_count_the_induced_edges(graph, result):
    cand = top_candidates(random_scores(Q, N, seed=7), C)
    padded = candidate_subgraphs(cand, graph)
    e = int(padded.n_edge[:-1].sum())
    assert e > 0
    for r in result["rows"]:
        if r["mode"] == "candidates":
            assert (r["n_edges"], r["n_candidates"], r["edge_budget"]) == (e, C, int(padded.senders.shape[0]))
        else:
            assert (r["n_nodes"], r["n_edges"]) == (N, graph.n_edges)
    # the dense path does more work than the sparse ones on this sparse graph, in both modes
    for mode in ("full", "candidates"):
        rows = {r["path"]: r for r in result["rows"] if r["mode"] == mode}
        assert rows["dense_matmul"]["flops_per_call"] > rows["scipy_sparse"]["flops_per_call"]


def test_rejects_empty_query_batch(graph):
    with pytest.raises(ValueError):
        smoothing_throughput(graph, n_queries=0)
