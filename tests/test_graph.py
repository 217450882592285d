"""ToolGraph construction (SPEC §6): hand-computed weights, a pairwise Python reference, edge-type subsets,
fold graphs, and the real UltraTool / Seal-Tools pools."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
import tracemalloc
from types import SimpleNamespace

import jraph
import numpy as np
import pytest

from riskrank_jax.permissions import permission_mask
from riskrank_jax.graph.tool_graph import (EDGE_TYPES, GraphConfig, ToolGraph, build_fold_graphs, build_tool_graph,
                                           stats, with_edge_types)
from riskrank_jax.rank.registry_inputs import REGISTRY_MAX_NEIGHBOURS, RankingInputs, zero_shot_graph


def hand_example():
    emb = np.array([[1, 0, 0], [0.8, 0.6, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1]], np.float32)
    perm = np.zeros((5, 5), bool)
    perm[0, [0, 1]] = True  # shell, write -> perm_level 2
    perm[2, 0] = True  # shell
    perm[3, 2] = True  # network
    risk = np.array([3, 1, 4, 5, 1], np.int32)
    gold = np.array([[0, 2, -1], [0, 2, -1], [0, 2, 3], [1, 3, -1], [3, 4, -1], [3, 4, -1], [1, 1, 4]], np.int32)
    return emb, perm, risk, gold


def edge_dict(g: ToolGraph):
    return {(int(s), int(r)): float(w) for s, r, w in zip(g.senders, g.receivers, g.weights)}


def test_hand_computed_weights():
    emb, perm, risk, gold = hand_example()
    g = build_tool_graph(emb, perm, risk, gold)
    # counts: (0,2)=3 (0,3)=1 (2,3)=1 (1,3)=1 (3,4)=2 (1,4)=1 (duplicate 1 in the last row counts once)
    raw = {
        (0, 1): 0.3 * 0.8,  # semantic
        (0, 2): 0.4 * 3 / 3 + 0.15 * 1 / 5 + 0.15,  # cooccur + permission + risk
        (0, 3): 0.15,  # risk co-occurrence (count 1)
        (2, 3): 0.15,
        (3, 4): 0.4 * 2 / 3,  # cooccur
    }
    top = max(raw.values())
    expected = {}
    for (i, j), w in raw.items():
        expected[(i, j)] = expected[(j, i)] = w / top
    got = edge_dict(g)
    assert set(got) == set(expected)
    for key, w in expected.items():
        assert got[key] == pytest.approx(w, abs=1e-6)
    assert g.weights.max() == pytest.approx(1.0)
    tw = {(int(s), int(r)): row for s, r, row in zip(g.senders, g.receivers, g.type_weights)}
    np.testing.assert_allclose(tw[(0, 2)], [0.4, 0.0, 0.03, 0.15], atol=1e-6)
    np.testing.assert_allclose(tw[(1, 0)], [0.0, 0.24, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(tw[(4, 3)], [0.4 * 2 / 3, 0.0, 0.0, 0.0], atol=1e-6)
    assert stats(g, perm.sum(-1)) == {
        "nodes": 5, "edges_cooccur": 2, "edges_semantic": 1, "edges_permission": 1, "edges_risk_cooccur": 3,
        "edges_total": 5, "tools_with_neighbour": 5, "high_permission_tools": 1}


def test_graphs_tuple_layout():
    emb, perm, risk, gold = hand_example()
    g = build_tool_graph(emb, perm, risk, gold)
    gt = g.graph
    assert isinstance(gt, jraph.GraphsTuple)
    assert gt.n_node.tolist() == [5] and gt.n_edge.tolist() == [10]
    assert gt.senders.dtype == np.int32 and gt.receivers.dtype == np.int32 and gt.edges.dtype == np.float32
    assert g.type_weights.shape == (10, 4) and g.edge_types == EDGE_TYPES
    assert not np.any(gt.senders == gt.receivers)
    np.testing.assert_array_equal(g.dense, g.dense.T)
    np.testing.assert_array_equal(g.to_scipy().toarray(), g.dense)
    order = np.lexsort((gt.senders, gt.receivers))
    np.testing.assert_array_equal(order, np.arange(10))  # sorted by receiver, then sender


def reference_graph(emb, perm, risk, gold, cfg=GraphConfig()):
    """Pairwise Python transcription of SPEC §6 -> dense raw type weights [N, N, 4]."""
    n = emb.shape[0]
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    count = np.zeros((n, n), int)
    for row in gold:
        s = sorted({int(t) for t in row if t >= 0})
        for a, b in itertools.combinations(s, 2):
            count[a, b] += 1
            count[b, a] += 1
    kept = [count[i, j] for i in range(n) for j in range(n) if i != j and count[i, j] >= 2]
    cmax = max(kept) if kept else 1
    tw = np.zeros((n, n, 4))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if count[i, j] >= 2:
                tw[i, j, 0] = 0.4 * count[i, j] / cmax
            cos = float(e[i] @ e[j])
            if cos > 0.65:
                tw[i, j, 1] = 0.3 * cos
            shared = int((perm[i] & perm[j]).sum())
            if shared >= 1:
                tw[i, j, 2] = 0.15 * shared / 5
            if risk[i] >= 3 and risk[j] >= 3 and count[i, j] >= 1:
                tw[i, j, 3] = 0.15
    return tw


def random_inputs(seed, n=40, d=6, q=60):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, d))
    emb[n // 2:] = emb[: n - n // 2] + 0.5 * rng.normal(size=(n - n // 2, d))  # near pairs -> semantic edges
    perm = rng.random((n, 5)) < 0.25
    risk = rng.integers(1, 6, n)
    gold = rng.integers(-1, n // 3, size=(q, 4))  # a small id range so pairs repeat
    return emb.astype(np.float32), perm, risk, gold


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_pairwise_reference(seed):
    emb, perm, risk, gold = random_inputs(seed)
    g = build_tool_graph(emb, perm, risk, gold, GraphConfig(block_size=7))  # several row blocks
    tw = reference_graph(emb, perm, risk, gold)
    total = tw.sum(-1)
    assert (tw[..., 0] > 0).any() and (tw[..., 1] > 0).any() and (tw[..., 3] > 0).any()
    dense_tw = np.zeros_like(tw)
    dense_tw[g.receivers, g.senders] = g.type_weights
    np.testing.assert_allclose(dense_tw, tw, atol=1e-6)
    np.testing.assert_allclose(g.dense, total / total.max(), atol=1e-6)
    assert g.n_edges == int((total > 0).sum())


def test_with_edge_types():
    emb, perm, risk, gold = random_inputs(3)
    g = build_tool_graph(emb, perm, risk, gold)
    tw = reference_graph(emb, perm, risk, gold)
    for subset in [("semantic",), ("cooccur", "risk_cooccur"), ("permission", "semantic", "cooccur")]:
        sub = with_edge_types(g, subset)
        cols = [EDGE_TYPES.index(t) for t in subset]
        total = tw[..., cols].sum(-1)
        np.testing.assert_allclose(sub.dense, total / total.max(), atol=1e-6)
        assert sub.n_edges == int((total > 0).sum())
        assert np.all(sub.weights > 0)
        off = [c for c in range(4) if c not in cols]
        assert np.all(sub.type_weights[:, off] == 0)
        mask = np.isin(np.arange(4), cols)
        np.testing.assert_array_equal(with_edge_types(g, mask).dense, sub.dense)
    full = with_edge_types(g, set(EDGE_TYPES))
    np.testing.assert_allclose(full.dense, g.dense, atol=1e-7)
    with pytest.raises(ValueError, match="unknown edge types"):
        with_edge_types(g, ("semantics",))


def test_fold_graphs_use_fold_training_queries():
    emb, perm, risk, gold = random_inputs(4)
    rng = np.random.default_rng(0)
    fold_mask = rng.random((3, gold.shape[0])) < 0.6
    graphs = build_fold_graphs(emb, perm, risk, gold, fold_mask)
    assert len(graphs) == 3
    for f, g in enumerate(graphs):
        ref = build_tool_graph(emb, perm, risk, gold[fold_mask[f]])
        np.testing.assert_array_equal(g.senders, ref.senders)
        np.testing.assert_array_equal(g.receivers, ref.receivers)
        np.testing.assert_allclose(g.weights, ref.weights, atol=1e-7)
    assert not np.array_equal(graphs[0].dense, graphs[1].dense)


def test_no_edges():
    emb = np.eye(4, dtype=np.float32)
    g = build_tool_graph(emb, np.zeros((4, 5), bool), np.ones(4, int), np.full((2, 2), -1))
    assert g.n_edges == 0 and g.graph.n_node.tolist() == [4]
    assert stats(g, np.zeros(4))["tools_with_neighbour"] == 0


def test_rejects_bad_input():
    emb, perm, risk, gold = hand_example()
    with pytest.raises(ValueError, match="disagree on N"):
        build_tool_graph(emb, perm[:4], risk, gold)
    with pytest.raises(ValueError, match=">= N"):
        build_tool_graph(emb, perm, risk, np.array([[0, 9]]))


def load_pool(root, name):
    path = {"ultratool": root / "ultratool/from_paper_release/ultratool_risk_labels_resolved.json",
            "seal_tools": root / "seal_tools/from_paper_release/sealtools_risk_labels_resolved.json"}[name]
    labels = json.loads(path.read_text())
    desc = [v["description"] for v in labels.values()]
    risk = np.array([2 if v["risk_level"] is None else v["risk_level"] for v in labels.values()], np.int32)
    return desc, risk, permission_mask(desc)


@pytest.mark.realdata
@pytest.mark.parametrize("name,n,perm_edges,high", [("ultratool", 2032, 2707, 7), ("seal_tools", 4076, 4110, 10)])
def test_real_pool_permission_structure(real_data_dir, name, n, perm_edges, high):
    """Permission edges depend only on the descriptions, so their count is fixed by the label files."""
    desc, risk, perm = load_pool(real_data_dir, name)
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(n, 384)).astype(np.float32)  # random 384-d vectors: no pair reaches cosine 0.65
    g = build_tool_graph(emb, perm, risk, np.full((1, 2), -1, np.int32))
    st = stats(g, perm.sum(-1))
    assert st["nodes"] == n
    assert st["edges_permission"] == perm_edges
    assert st["high_permission_tools"] == high
    assert st["edges_cooccur"] == st["edges_risk_cooccur"] == st["edges_semantic"] == 0
    # shared-category counts from the dense product
    pm = perm.astype(int)
    shared = np.triu(pm @ pm.T, 1)
    assert perm_edges == int((shared >= 1).sum())
    assert np.isclose(g.type_weights[:, 2].max(), 0.15 * shared.max() / 5)


def test_semantic_weights_are_float64_cosines_rounded_to_float32():
    # a float32 BLAS product changes with the BLAS's thread count; the graph must not (side-by-side workers run on
    # fewer CPUs than one process): each cosine is the float64 product of the float32 unit vectors, rounded once
    emb, perm, risk, gold = random_inputs(0, n=300, d=384)
    g = build_tool_graph(emb, np.zeros_like(perm), np.ones_like(risk), np.full_like(gold, -1), GraphConfig(block_size=64))
    unit = (emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12)).astype(np.float64)
    cos = (unit @ unit.T).astype(np.float32)
    sem = EDGE_TYPES.index("semantic")
    assert g.n_edges > 100
    np.testing.assert_array_equal(g.type_weights[:, sem],
                                  (0.3 * cos[g.receivers, g.senders].astype(np.float64)).astype(np.float32))


# ----------------------------------------------------------------------------------------------------
# bounded neighbours (max_neighbours): the registry graph


def mutual_top_m_reference(emb, perm, m, cfg=GraphConfig()):
    """Pairwise Python transcription of the bound: each tool's m best semantic partners (cos > threshold; by cos,
    then lower index) and m best permission partners (shared >= 1; by shared, then cos, then lower index); a pair
    is kept when each picked the other. -> {"semantic": {(i, j)}, "permission": {(i, j)}} with i < j."""
    n = emb.shape[0]
    unit = (emb / np.linalg.norm(emb, axis=-1, keepdims=True)).astype(np.float64)
    cos = (unit @ unit.T).astype(np.float32)
    shared = perm.astype(int) @ perm.astype(int).T
    picks = {"semantic": [], "permission": []}
    for i in range(n):
        others = [j for j in range(n) if j != i]
        sem = [j for j in others if cos[i, j] > np.float32(cfg.semantic_threshold)]
        per = [j for j in others if shared[i, j] >= cfg.permission_min_shared]
        picks["semantic"].append(set(sorted(sem, key=lambda j: (-cos[i, j], j))[:m]))
        picks["permission"].append(set(sorted(per, key=lambda j: (-shared[i, j], -cos[i, j], j))[:m]))
    return {t: {(i, j) for i in range(n) for j in p[i] if i < j and i in p[j]} for t, p in picks.items()}


def pairs_of_type(g: ToolGraph, name: str) -> set:
    up = (g.senders < g.receivers) & (g.type_weights[:, EDGE_TYPES.index(name)] > 0)
    return set(zip(g.senders[up].tolist(), g.receivers[up].tolist()))


def tied_inputs(seed, n, d):
    """random_inputs with exact duplicate embeddings (tied cosines) and permission categories on most tools."""
    emb, perm, risk, gold = random_inputs(seed, n=n, d=d)
    rng = np.random.default_rng(seed)
    emb[rng.integers(0, n, n // 5)] = emb[rng.integers(0, n, n // 5)]
    perm = rng.random((n, 5)) < 0.35
    return emb, perm, risk, gold


@pytest.mark.parametrize("seed,n,d,block,m", [(0, 120, 3, 16, 4), (1, 200, 4, 64, 8), (2, 90, 2, 1024, 3),
                                               (3, 150, 5, 7, 12)])
def test_bounded_graph_matches_mutual_top_m_reference(seed, n, d, block, m):
    emb, perm, risk, gold = tied_inputs(seed, n, d)
    g = build_tool_graph(emb, perm, risk, gold, GraphConfig(block_size=block), max_neighbours=m)
    ref = mutual_top_m_reference(emb, perm, m)
    assert ref["semantic"] and ref["permission"]
    assert pairs_of_type(g, "semantic") == ref["semantic"]
    assert pairs_of_type(g, "permission") == ref["permission"]
    # the kept pairs keep the paper's raw weights; co-occurrence edges are not bounded
    full = build_tool_graph(emb, perm, risk, gold)
    kept = {(int(s), int(r)): row for s, r, row in zip(full.senders, full.receivers, full.type_weights)}
    for s, r, row in zip(g.senders, g.receivers, g.type_weights):
        ref_row = kept[(int(s), int(r))].copy()
        for name in ("semantic", "permission"):
            pair = (min(int(s), int(r)), max(int(s), int(r)))
            if pair not in ref[name]:
                ref_row[EDGE_TYPES.index(name)] = 0
        np.testing.assert_array_equal(row, ref_row)
    for name in ("cooccur", "risk_cooccur"):
        assert pairs_of_type(g, name) == pairs_of_type(full, name)


def test_bounded_graph_degree_and_symmetry():
    emb, perm, risk, _ = tied_inputs(5, 400, 4)
    m = 6
    g = build_tool_graph(emb, perm, risk, np.full((1, 1), -1), GraphConfig(block_size=50), max_neighbours=m)
    for name in ("semantic", "permission"):
        has = g.type_weights[:, EDGE_TYPES.index(name)] > 0
        assert np.bincount(g.receivers[has], minlength=400).max() <= m
        assert np.bincount(g.senders[has], minlength=400).max() <= m
        assert has.sum() > 400  # most tools keep neighbours
    edges = edge_dict(g)
    assert all(edges[(r, s)] == w for (s, r), w in edges.items())  # both directions, equal weights
    assert not np.any(g.senders == g.receivers)


@pytest.mark.parametrize("m", [79, 80, 10_000])
def test_bounded_graph_equals_unbounded_when_m_covers_every_tool(m):
    emb, perm, risk, gold = tied_inputs(6, 80, 3)
    full = build_tool_graph(emb, perm, risk, gold, GraphConfig(block_size=16))
    g = build_tool_graph(emb, perm, risk, gold, GraphConfig(block_size=16), max_neighbours=m)
    for name in ("senders", "receivers", "weights", "type_weights"):
        np.testing.assert_array_equal(getattr(g, name), getattr(full, name))
        assert getattr(g, name).dtype == getattr(full, name).dtype
    folds = build_fold_graphs(emb, perm, risk, gold, np.ones((2, gold.shape[0]), bool),
                              GraphConfig(block_size=16), max_neighbours=m)
    np.testing.assert_array_equal(folds[0].weights, full.weights)


def test_bounded_graph_of_30k_tools_never_holds_an_n_by_n_array():
    n, m = 30_000, 8
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    perm = rng.random((n, 5)) < 0.02
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        g = build_tool_graph(emb, perm, np.ones(n, np.int32), np.full((1, 1), -1),
                             max_neighbours=m, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - t0
    assert peak < 300 * 2**20, f"peak {peak / 2**20:.0f} MiB (one float32 N x N array: {4 * n * n / 2**30:.1f} GiB)"
    for name in ("semantic", "permission"):
        has = g.type_weights[:, EDGE_TYPES.index(name)] > 0
        assert has.any() and np.bincount(g.receivers[has], minlength=n).max() <= m
    assert g.n_edges <= 2 * 2 * n * m // 2 and np.array_equal(np.sort(g.senders), np.sort(g.receivers))
    assert seconds < 120, f"{seconds:.0f} s"


def test_bound_is_off_by_default_and_checked():
    emb, perm, risk, gold = random_inputs(0)
    default = build_tool_graph(emb, perm, risk, gold)
    unbounded = build_tool_graph(emb, perm, risk, gold, max_neighbours=None)  # the paper's graph
    np.testing.assert_array_equal(default.weights, unbounded.weights)
    assert "max_neighbours" not in {f.name for f in dataclasses.fields(GraphConfig)}  # the sweep's config tree
    with pytest.raises(ValueError, match="max_neighbours"):
        build_tool_graph(emb, perm, risk, gold, max_neighbours=0)
    one = build_tool_graph(np.ones((1, 3), np.float32), np.ones((1, 5), bool), np.ones(1, int), np.full((1, 1), -1),
                           max_neighbours=4)
    assert one.n_edges == 0


def test_zero_shot_graph_is_bounded():
    n = 3 * REGISTRY_MAX_NEIGHBOURS
    rng = np.random.default_rng(0)
    emb = (np.ones((n, 16)) + 0.01 * rng.normal(size=(n, 16))).astype(np.float32)  # every pair: cosine > 0.65
    perm = np.zeros((n, 5), bool)
    perm[:, 1] = True  # every pair shares a category
    inputs = RankingInputs(None, emb, SimpleNamespace(levels=np.full(n, 3, np.int32)), perm, "test", "none")
    g = zero_shot_graph(inputs)
    for name in ("semantic", "permission"):
        has = g.type_weights[:, EDGE_TYPES.index(name)] > 0
        assert 0 < np.bincount(g.receivers[has], minlength=n).max() <= REGISTRY_MAX_NEIGHBOURS
    full = zero_shot_graph(inputs, max_neighbours=None)  # the paper's graph: every pair
    assert full.n_edges == n * (n - 1) > g.n_edges
