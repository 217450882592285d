"""Smoothing (SPEC §7): the package's kernels (neighbour lists, padded candidate batches) against hand-computed
values and a dense float64 reference with Â built explicitly; the dense-matmul peers of the throughput table too."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from riskrank_jax.permissions import permission_mask
from riskrank_jax.experiments.throughput import smooth_candidates_dense, smooth_full_dense
from riskrank_jax.graph import smoothing
from riskrank_jax.graph.smoothing import (candidate_subgraphs, prepare_graph, smooth_candidates, smooth_full,
                                          smooth_full_folds, stack_graphs)
from riskrank_jax.graph.tool_graph import ToolGraph, build_fold_graphs, build_tool_graph, with_edge_types

TOL = 1e-5


def a_hat(a):
    a = np.asarray(a, np.float64)
    deg = a.sum(1)
    dinv = np.zeros_like(deg)
    dinv[deg > 0] = deg[deg > 0] ** -0.5
    return a * dinv[:, None] * dinv[None, :]


def ref_full(s, a, alpha):
    s = np.asarray(s, np.float64)
    h1 = (1 - alpha) * s + alpha * (s @ a_hat(a).T)
    return (s + h1) / 2


def ref_candidates(s, cand, a_of_query, alpha):
    out = np.zeros(s.shape)
    for q in range(s.shape[0]):
        valid = cand[q] >= 0
        sub = np.zeros((cand.shape[1],) * 2)
        idx = np.nonzero(valid)[0]
        sub[np.ix_(idx, idx)] = a_of_query(q)[np.ix_(cand[q, idx], cand[q, idx])]
        out[q] = ref_full(s[q:q + 1], sub, alpha)[0]
    return out


def random_graph(seed, n=50, d=5, isolated=5):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, d)).astype(np.float32)
    emb[isolated:] += 0.8 * emb[0]  # correlated -> semantic edges
    emb[:isolated] = 0.0  # zero embedding: cosine 0 with every tool
    perm = rng.random((n, 5)) < 0.15
    perm[:isolated] = False
    risk = rng.integers(1, 6, n)
    gold = rng.integers(isolated, n, size=(300, 3))
    return build_tool_graph(emb, perm, risk, gold)


def path_graph() -> ToolGraph:
    """0 - 1 - 2 with unit weights (edges both ways)."""
    snd, rcv = np.array([0, 1, 1, 2], np.int32), np.array([1, 0, 2, 1], np.int32)
    gt = jraph.GraphsTuple(nodes=None, edges=np.ones(4, np.float32), senders=snd, receivers=rcv,
                           n_node=np.array([3]), n_edge=np.array([4]), globals=None)
    return ToolGraph(gt, np.zeros((4, 4), np.float32))


def test_hand_computed_path_graph():
    """d = (1, 2, 1), so Â_01 = Â_12 = 1/sqrt(2); S = e_0 gives P = (0, 1/sqrt(2), 0) and, at α = 1/2,
    out = (S + S/2 + P/2) / 2 = (3/4, 1/(4 sqrt 2), 0). Candidates {0, 1}: the induced edge 0 - 1 alone, degrees
    renormalised to (1, 1), so P = (0, 1) and out = (3/4, 1/4)."""
    g = path_graph()
    s = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    r2 = 1 / np.sqrt(2)
    want = np.array([[0.75, 0.25 * r2, 0.0], [0.25 * r2, 0.75, 0.25 * r2]])  # S = e_1: P = (r2, 0, r2)
    np.testing.assert_allclose(np.asarray(smooth_full(s, g, 0.5)), want, atol=1e-7)
    np.testing.assert_allclose(np.asarray(smooth_full(s, g.graph, 0.5)), want, atol=1e-7)
    np.testing.assert_allclose(np.asarray(smooth_full_folds(s, np.zeros(2, int), stack_graphs([g]), 0.5)),
                               want, atol=1e-7)
    np.testing.assert_allclose(np.asarray(smooth_full_dense(s, g, 0.5)), want, atol=1e-7)
    cand = np.array([[0, 1, -1], [0, 1, 2]], np.int32)
    cs = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    want_c = np.array([[0.75, 0.25, 0.0], want[1]])
    np.testing.assert_allclose(np.asarray(smooth_candidates(cs, cand, g, 0.5)), want_c, atol=1e-7)
    np.testing.assert_allclose(np.asarray(smooth_candidates_dense(cs, cand, g, 0.5)), want_c, atol=1e-7)


@pytest.mark.parametrize("seed", [0, 1])
def test_full_matches_dense_reference(seed):
    g = random_graph(seed)
    a = g.dense
    assert (a.sum(1) == 0).any() and g.n_edges > 100
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(9, g.n_nodes)).astype(np.float32)
    for alpha in [0.0, 0.02, 0.2, 1.0]:
        ref = ref_full(s, a, alpha)
        np.testing.assert_allclose(np.asarray(smooth_full(s, g, alpha)), ref, atol=TOL)
        np.testing.assert_allclose(np.asarray(smooth_full_dense(s, g, alpha)), ref, atol=TOL)
    np.testing.assert_allclose(np.asarray(smooth_full(s, g, 0.0)), s, atol=1e-7)
    # isolated nodes: their row of Â is zero, so out = (1 - alpha / 2) s
    iso = a.sum(1) == 0
    np.testing.assert_allclose(np.asarray(smooth_full(s, g, 0.2))[:, iso], 0.9 * s[:, iso], rtol=1e-6)


def test_alpha_array_and_graphs_tuple_input():
    g = random_graph(2)
    s = np.random.default_rng(2).random((4, g.n_nodes)).astype(np.float32)
    alphas = np.array([0.0, 0.1, 0.5], np.float32)
    out = np.asarray(smooth_full(s, g, jnp.asarray(alphas)))
    assert out.shape == (3, 4, g.n_nodes)
    for i, al in enumerate(alphas):
        np.testing.assert_allclose(out[i], ref_full(s, g.dense, al), atol=TOL)
    np.testing.assert_allclose(np.asarray(smooth_full(s, g.graph, 0.1)), out[1], atol=1e-7)


@pytest.mark.parametrize("chunk_bytes", [1, 1 << 30])
def test_full_chunked_path(monkeypatch, chunk_bytes):
    """Tiny budgets force several query blocks (padded last block); chunk_bytes=1 propagates one block per kernel
    call, 1 GiB all blocks in one call."""
    g = random_graph(3)
    monkeypatch.setattr(smoothing, "_BLOCK_BYTES", 1)  # blocks of 8 queries
    monkeypatch.setattr(smoothing, "_CHUNK_BYTES", chunk_bytes)
    c, _, rows, folds, _ = smoothing._cached_plan(np.zeros(11, np.int64), g.n_nodes, 4, 1, True)
    assert (c, len(rows), rows[0].shape[0], folds[0].shape[0]) == ((8, 2, 8, 1) if chunk_bytes == 1 else (8, 1, 16, 2))
    s = np.random.default_rng(3).normal(size=(11, g.n_nodes)).astype(np.float32)  # 11 = 3 + 3 + 3 + 2
    np.testing.assert_allclose(np.asarray(smooth_full(s, g, 0.3)), ref_full(s, g.dense, 0.3), atol=TOL)
    qf = np.arange(11) % 2
    gs = [g, with_edge_types(g, ("semantic",))]
    out = np.asarray(smooth_full_folds(s, qf, gs, 0.3))
    for q in range(11):
        np.testing.assert_allclose(out[q], ref_full(s[q:q + 1], gs[qf[q]].dense, 0.3)[0], atol=TOL)
    np.testing.assert_array_equal(np.asarray(smooth_full_folds(s, qf, gs, 0.3, fixed_shapes=True)), out)


def test_high_degree_hub_prepared_and_traced():
    """A hub with 70 in-neighbours (width 128: summed in slabs) and parallel query blocks; a prepared graph gives
    the same bits, traced scores on a concrete graph the same numbers, traced graph arrays a clear error."""
    n = 90
    hub = np.zeros((n, n), np.float32)
    hub[0, 1:71] = hub[1:71, 0] = np.linspace(0.1, 1.0, 70)
    hub[5, 6] = hub[6, 5] = 0.5
    r, snd = np.nonzero(hub)
    g = jraph.GraphsTuple(nodes=None, edges=hub[r, snd], senders=snd.astype(np.int32), receivers=r.astype(np.int32),
                          n_node=np.array([n]), n_edge=np.array([r.size]), globals=None)
    s = np.random.default_rng(11).normal(size=(20, n)).astype(np.float32)
    out = np.asarray(smooth_full(s, g, 0.4))
    np.testing.assert_allclose(out, ref_full(s, hub, 0.4), atol=TOL)
    prepared = prepare_graph(g)
    assert prepared.n_folds == 1 and prepared.n_nodes == n
    np.testing.assert_array_equal(np.asarray(smooth_full(s, prepared, 0.4)), out)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda s: smooth_full(s, prepared, 0.4))(s)), out, atol=1e-6)
    light = prepare_graph(g, unrolled=False)  # the Ranker's compile-light bucket sums: the same numbers
    assert prepared.unrolled and not light.unrolled
    np.testing.assert_allclose(np.asarray(smooth_full(s, light, 0.4)), out, atol=1e-6)
    traced = jax.jit(lambda s, snd, rcv, w: smooth_full(s, g._replace(senders=snd, receivers=rcv, edges=w), 0.4))
    with pytest.raises(TypeError, match="concrete graph arrays"):
        traced(s, g.senders, g.receivers, g.edges)
    with pytest.raises(ValueError, match="prepared for float32"):
        smooth_full(s.astype(np.float16), prepared, 0.4)
    assert np.asarray(smooth_full(s[:0], prepared, 0.4)).shape == (0, n)


def test_subset_graph_changes_result():
    g = random_graph(4)
    s = np.random.default_rng(4).random((3, g.n_nodes)).astype(np.float32)
    sub = with_edge_types(g, ("permission",))
    np.testing.assert_allclose(np.asarray(smooth_full(s, sub, 0.2)), ref_full(s, sub.dense, 0.2), atol=TOL)
    assert np.abs(np.asarray(smooth_full(s, sub, 0.2)) - np.asarray(smooth_full(s, g, 0.2))).max() > 1e-3


def random_fold_graphs(rng, n=40):
    """(emb, perm, risk, 5 fold ToolGraphs) of a random n-tool registry with 200 training queries."""
    emb = rng.normal(size=(n, 4)).astype(np.float32)
    perm = rng.random((n, 5)) < 0.1
    risk = rng.integers(1, 6, n)
    gold = rng.integers(0, 15, size=(200, 3))
    fold_mask = np.stack([np.arange(200) % 5 != f for f in range(5)])
    return emb, perm, risk, build_fold_graphs(emb, perm, risk, gold, fold_mask)


def test_full_folds():
    rng = np.random.default_rng(5)
    n = 40
    _, _, _, gs = random_fold_graphs(rng, n)
    fg = stack_graphs(gs)
    assert fg.weights.shape == (5, fg.senders.shape[0])
    s = rng.normal(size=(17, n)).astype(np.float32)
    qf = rng.integers(0, 5, 17)
    alphas = jnp.array([0.05, 0.2])
    out = np.asarray(smooth_full_folds(s, qf, gs, alphas))
    assert out.shape == (2, 17, n)
    for i, al in enumerate([0.05, 0.2]):
        for q in range(17):
            np.testing.assert_allclose(out[i, q], ref_full(s[q:q + 1], gs[qf[q]].dense, al)[0], atol=TOL)
    np.testing.assert_allclose(np.asarray(smooth_full_folds(s, qf, fg, 0.2)), out[1], atol=1e-7)
    with pytest.raises(ValueError, match="query_fold"):
        smooth_full_folds(s, np.full(17, 5), gs, 0.2)


def random_candidates(rng, q, c, n, pad=0):
    cand = np.stack([rng.choice(n, c, replace=False) for _ in range(q)]).astype(np.int32)
    if pad:
        cand[:, -pad:] = -1
    return cand


@pytest.mark.parametrize("pad", [0, 3])
def test_candidates_match_reference(pad):
    g = random_graph(6)
    rng = np.random.default_rng(6)
    cand = random_candidates(rng, 12, 15, g.n_nodes, pad)
    s = rng.normal(size=cand.shape).astype(np.float32)
    for alpha in [0.02, 0.2, 0.7]:
        ref = ref_candidates(s, cand, lambda q: g.dense, alpha)
        np.testing.assert_allclose(np.asarray(smooth_candidates(s, cand, g, alpha)), ref, atol=TOL)
        np.testing.assert_allclose(np.asarray(smooth_candidates_dense(s, cand, g, alpha)), ref, atol=TOL)
    alphas = np.array([0.0, 0.3], np.float32)
    out = np.asarray(smooth_candidates(s, cand, g, jnp.asarray(alphas)))
    assert out.shape == (2,) + cand.shape
    np.testing.assert_allclose(out[0], s, atol=1e-7)


def test_candidates_with_repeated_ids():
    """A row that repeats a tool id takes the dense-lookup route; both copies get the tool's edges."""
    g = random_graph(10)
    rng = np.random.default_rng(10)
    cand = random_candidates(rng, 5, 12, g.n_nodes)
    cand[2, 5] = cand[2, 0]
    s = rng.normal(size=cand.shape).astype(np.float32)
    ref = ref_candidates(s, cand, lambda q: g.dense, 0.4)
    np.testing.assert_allclose(np.asarray(smooth_candidates(s, cand, g, 0.4)), ref, atol=TOL)


def test_candidate_subgraphs_equal_jraph_batch():
    g = random_graph(7)
    rng = np.random.default_rng(7)
    cand = random_candidates(rng, 6, 10, g.n_nodes)
    padded = candidate_subgraphs(cand, g)
    graphs = []
    for q in range(6):
        sub = g.dense[np.ix_(cand[q], cand[q])]
        r, s = np.nonzero(sub)
        graphs.append(jraph.GraphsTuple(nodes=None, edges=sub[r, s], senders=s.astype(np.int32),
                                        receivers=r.astype(np.int32), n_node=np.array([10], np.int32),
                                        n_edge=np.array([len(r)], np.int32), globals=None))
    batched = jraph.batch(graphs)
    e = int(batched.n_edge.sum())
    assert padded.senders.shape == (1024,) and padded.n_node.tolist() == [10] * 6 + [1]
    assert padded.n_edge[:6].tolist() == batched.n_edge.tolist() and padded.n_edge[6] == 1024 - e
    np.testing.assert_array_equal(padded.senders[:e], batched.senders)
    np.testing.assert_array_equal(padded.receivers[:e], batched.receivers)
    np.testing.assert_array_equal(padded.edges[:e], batched.edges)
    assert np.all(padded.senders[e:] == 60) and np.all(padded.edges[e:] == 0)
    assert e > 20


def test_candidates_compile_once_per_bucket():
    g = random_graph(8)
    rng = np.random.default_rng(8)
    cand1 = random_candidates(rng, 5, 12, g.n_nodes)
    cand2 = random_candidates(rng, 5, 12, g.n_nodes)
    s = rng.random(cand1.shape).astype(np.float32)
    smooth_candidates(s, cand1, g, 0.2)
    before = smoothing.smooth_padded_batch._cache_size()
    out = smooth_candidates(s, cand2, g, 0.2)
    assert smoothing.smooth_padded_batch._cache_size() == before
    np.testing.assert_allclose(np.asarray(out), ref_candidates(s, cand2, lambda q: g.dense, 0.2), atol=TOL)


def test_candidates_per_fold():
    rng = np.random.default_rng(9)
    n = 30
    emb = rng.normal(size=(n, 4)).astype(np.float32)
    perm = rng.random((n, 5)) < 0.1
    gold = rng.integers(0, 12, size=(150, 3))
    fold_mask = np.stack([np.arange(150) % 3 != f for f in range(3)])
    gs = build_fold_graphs(emb, perm, rng.integers(1, 6, n), gold, fold_mask)
    cand = random_candidates(rng, 10, 8, n)
    qf = rng.integers(0, 3, 10)
    s = rng.random(cand.shape).astype(np.float32)
    ref = ref_candidates(s, cand, lambda q: gs[qf[q]].dense, 0.2)
    np.testing.assert_allclose(np.asarray(smooth_candidates(s, cand, gs, 0.2, query_fold=qf)), ref, atol=TOL)
    np.testing.assert_allclose(np.asarray(smooth_candidates_dense(s, cand, gs, 0.2, query_fold=qf)), ref, atol=TOL)


@pytest.mark.realdata
def test_real_ultratool_graph(real_data_dir):
    """UltraTool's 2,032-tool pool: risk and permissions from the released labels, random unit embeddings
    (plus planted near-duplicates so semantic edges exist), co-occurrence from a random gold array."""
    path = real_data_dir / "ultratool/from_paper_release/ultratool_risk_labels_resolved.json"
    labels = json.loads(path.read_text())
    desc = [v["description"] for v in labels.values()]
    risk = np.array([2 if v["risk_level"] is None else v["risk_level"] for v in labels.values()], np.int32)
    perm = permission_mask(desc)
    n = len(desc)
    assert n == 2032
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(n, 64)).astype(np.float32)
    emb[1000:1300] = emb[:300] + 0.3 * rng.normal(size=(300, 64))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    gold = rng.integers(0, 400, size=(3000, 3)).astype(np.int32)
    g = build_tool_graph(emb, perm, risk, gold)
    assert g.n_edges > 5000
    s = rng.normal(size=(64, n)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(smooth_full(s, g, 0.2)), ref_full(s, g.dense, 0.2), atol=TOL)
    cand = np.argsort(-s, axis=1)[:, :100].astype(np.int32)
    cs = np.take_along_axis(s, cand, 1)
    ref = ref_candidates(cs, cand, lambda q: g.dense, 0.2)
    assert np.abs(ref - cs).max() > 1e-3
    np.testing.assert_allclose(np.asarray(smooth_candidates(cs, cand, g, 0.2)), ref, atol=TOL)


def test_graphs_on_a_union_edge_list_and_fixed_shapes():
    """Fold graphs, an edge-type subset and a registry graph put on ONE union edge list (padded weight rows)
    give the result each gives alone; with fixed_shapes every one (and any fold assignment) runs one program."""
    rng = np.random.default_rng(9)
    n = 40
    emb, perm, risk, gs = random_fold_graphs(rng, n)
    sub = [with_edge_types(g, ("semantic", "permission")) for g in gs]
    registry = [build_tool_graph(emb, perm, risk, np.full((1, 1), -1))]
    union = smoothing.union_edges([gs, sub, registry])
    assert union.senders.shape[0] >= max(g.n_edges for g in gs + sub + registry)
    s = rng.normal(size=(24, n)).astype(np.float32)
    qf = rng.integers(0, 5, 24)
    compiles = []
    for graphs, fold in ((gs, qf), (sub, qf), (registry, np.zeros(24, int)), (gs, np.sort(qf))):
        fg = stack_graphs(graphs, union=union, n_rows=5)
        assert fg.weights.shape == (5, union.senders.shape[0])
        before = smoothing._propagate_chunk_jit._cache_size()
        got = np.asarray(smooth_full_folds(s, fold, fg, 0.2, fixed_shapes=True))
        compiles.append(smoothing._propagate_chunk_jit._cache_size() - before)
        for q in range(24):
            np.testing.assert_allclose(got[q], ref_full(s[q:q + 1], graphs[fold[q]].dense, 0.2)[0], atol=TOL)
        np.testing.assert_allclose(got, np.asarray(smooth_full_folds(s, fold, graphs, 0.2)), atol=1e-6)
    assert compiles[1:] == [0, 0, 0]  # one compiled program for all of them
    with pytest.raises(ValueError, match="outside the union"):
        stack_graphs(gs, union=smoothing.union_edges([sub]))


def test_graph_without_edges_smooths_to_the_definition():
    """No edges: P = 0, so out = (S + (1 - α) S) / 2 (a two-tool registry whose tools share nothing)."""
    emb = np.eye(2, 4, dtype=np.float32)
    g = build_tool_graph(emb, np.zeros((2, 5), bool), np.array([1, 5]), np.full((1, 1), -1, np.int32))
    assert g.n_edges == 0
    s = jnp.asarray([[1.0, -2.0]], jnp.float32)
    out = smoothing.smooth_full(s, smoothing.prepare_graph(g, unrolled=False), 0.2)
    np.testing.assert_allclose(np.asarray(out), np.asarray(s) * 0.9, rtol=1e-6)
