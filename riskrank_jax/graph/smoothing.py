"""ToolGraph smoothing of score vectors (docs/method.md): the full-pool and candidate kernels the package runs.

Usage::

    s = smooth_full(scores, graph, 0.2)                          # [Q, N] -> [Q, N]
    s = smooth_full(scores, graph, jnp.array([0.0, 0.1, 0.2]))    # [A, Q, N]: one P, every alpha
    g = prepare_graph(graph); s = smooth_full(scores, g, 0.2)     # a fixed graph: tables and Â built once
    s = smooth_full_folds(scores, query_fold, fold_graphs, 0.2)   # query q smoothed on graph query_fold[q]
    s = smooth_candidates(cand_scores, cand, graph, 0.2)          # [Q, C]: each query's induced subgraph

Definition (A = weighted adjacency, d_i = sum_j A_ij, rows of isolated nodes are zero)::

    Â = D^-1/2 A D^-1/2,   P = S Âᵀ,   H1 = (1 - α) S + α P,   out = (S + H1) / 2

Full pool: P by message passing over degree-bucketed in-neighbour lists (``graph.neighbours``); queries run in
blocks of c, each block transposed to [N, c], blocks propagated in chunks (one compiled kernel call per chunk).
Fold graphs share one union edge list and each block uses its fold's weights. The tables are built on the host,
so the graph arrays must be concrete: jitted callers smooth between their jitted stages.
Candidate mode: each query's induced subgraph (Â renormalised on the induced edges), all queries batched as one
padded ``jraph.GraphsTuple`` (edge budget a power of two) and summed with one segment sum.
Why: gathering whole cache-resident rows of [N, c] blocks avoids an [E, Q] message buffer; candidate subgraphs
differ per query, so they are batched as one padded graph instead of tabled.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from riskrank_jax.graph.neighbours import NeighbourLayout, bucket_weights, neighbour_layout, propagate_bucket_rows
from riskrank_jax.graph.tool_graph import ToolGraph

_BLOCK_BYTES = 1 << 19  # bytes of one transposed [N, c] block of scores (about one core's L2)
_CHUNK_BYTES = 1 << 21  # transposed blocks propagated in one kernel call (small enough to stay in cache)


# ----------------------------------------------------------------------------------------------------
# kernels


def normalized_edge_weights(senders, receivers, weights, n_nodes: int):
    """Â_ij for each directed edge (j -> i): w / sqrt(d_i d_j); d from weighted in-degrees (= degrees)."""
    deg = jax.ops.segment_sum(weights, receivers, num_segments=n_nodes)
    dinv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.where(deg > 0, deg, 1.0)), 0.0)
    return weights * dinv[senders] * dinv[receivers]


def combine(scores, p, alpha):
    """out = (S + (1 - α) S + α P) / 2 for S, P [..., Q, N]: alpha scalar -> [..., Q, N], [A] -> [A, ..., Q, N]."""
    a = jnp.asarray(alpha, scores.dtype)
    a = a.reshape(a.shape + (1,) * scores.ndim)
    h1 = (1.0 - a) * scores + a * p
    return 0.5 * (scores + h1)


# ----------------------------------------------------------------------------------------------------
# neighbour-list kernel (full pool, one or several graphs on one union edge list)


def _widest_block(n_nodes: int, itemsize: int) -> int:
    """The most queries per block (a multiple of 8 in 8..512) whose transposed [N, c] block fits _BLOCK_BYTES."""
    return int(np.clip(_BLOCK_BYTES // max(1, n_nodes * itemsize), 8, 512)) // 8 * 8


def _block_size(n_nodes: int, itemsize: int, group_sizes: np.ndarray) -> int:
    """Queries per block c (multiple of 8): the largest c with [N, c] within _BLOCK_BYTES whose padding,
    when blocks of c queries are filled group by group, is within 5 % of the least possible."""
    c_max = _widest_block(n_nodes, itemsize)
    c_max = min(c_max, -(-int(group_sizes.max(initial=1)) // 8) * 8)
    cs = np.arange(8, c_max + 1, 8)
    padded = (-(-group_sizes[None, :] // cs[:, None]) * cs[:, None]).sum(1)
    return int(cs[np.flatnonzero(padded <= 1.05 * padded.min())[-1]])


def _block_plan(query_fold: np.ndarray, n_folds: int, c: int, n_blocks: int):
    """``n_blocks`` blocks of c queries of one fold each (empty blocks after those the queries need).

    Returns (src int32 [B*c]: query row per block slot; padding slots read the last query, their output is never
    read; dst int32 [Q]: slot of each query; block_fold int32 [B]).
    """
    q = query_fold.shape[0]
    counts = np.bincount(query_fold, minlength=n_folds)
    blocks = -(-counts // c)
    first_slot = (np.cumsum(blocks) - blocks) * c
    order = np.argsort(query_fold, kind="stable")
    rank = np.arange(q) - (np.cumsum(counts) - counts)[query_fold[order]]
    dst = np.empty(q, np.int64)
    dst[order] = first_slot[query_fold[order]] + rank
    total = int(n_blocks)
    if total < blocks.sum():
        raise ValueError(f"n_blocks={n_blocks} < the {int(blocks.sum())} blocks the queries need")
    src = np.full(total * c, max(q - 1, 0), np.int64)
    src[dst] = np.arange(q)
    block_fold = np.zeros(total, np.int64)
    block_fold[:blocks.sum()] = np.repeat(np.arange(n_folds), blocks)
    return src.astype(np.int32), dst.astype(np.int32), block_fold.astype(np.int32)


def fixed_block_plan(n_queries: int, n_nodes: int, n_folds: int, itemsize: int = 4) -> tuple[int, int]:
    """(c, B): a block size and block count that fit any assignment of ``n_queries`` queries to ``n_folds``
    folds (each fold wastes at most one partial block), so the block plan's shapes depend only on
    (Q, N, F). ``smooth_full_folds(..., fixed_shapes=True)`` uses it: one compiled program then serves
    every fold assignment and every graph on the same union edge list."""
    c = _widest_block(n_nodes, itemsize)
    c = min(c, -(-max(1, n_queries) // 8) * 8)
    return c, -(-n_queries // c) + n_folds - 1


@functools.partial(jax.jit, static_argnames=("n_nodes",))
def _slot_weights_jit(edge, senders, receivers, weights, *, n_nodes: int):
    """Â of F graphs on one edge list (weights [F, E]) as per-bucket slot values, tuple of [F, m_b, K_b]."""
    norm_w = jax.vmap(lambda w: normalized_edge_weights(senders, receivers, w, n_nodes))(weights)
    return bucket_weights(edge, norm_w)


@jax.jit
def _take_rows_jit(scores, rows):
    """scores [Q, N], rows int32 [R] -> [R, N] (whole rows)."""
    return scores[rows]


@functools.partial(jax.jit, static_argnames=("c", "unrolled"))
def _propagate_chunk_jit(x, block_fold, nbr, row_of_node, slot_weights, *, c: int, unrolled: bool):
    """P rows of one chunk: x [b * c, N] (b blocks of c query rows) -> [b * c, N], row r = (Â x_r)ᵀ.

    Block j uses graph block_fold[j] (slot_weights per bucket [F, m_b, K_b]). The shapes depend on the graph's
    layout, c and b only, so one compiled program serves every query count (the caller loops over chunks)."""
    rows, n = x.shape
    xs = x.reshape(rows // c, c, n).transpose(0, 2, 1)  # [b, N, c]: each block's queries on the minor axis
    w = [t[block_fold] for t in slot_weights] if slot_weights[0].shape[0] > 1 else slot_weights
    p = propagate_bucket_rows(xs, nbr, w, unrolled=unrolled)  # [b, M + 1, c], rows in bucket order
    # node order restored by a gather of whole rows, then each block transposed back to [c, N] (cheaper than one
    # element-wise gather p[dst_q // c, row_of_node_i, dst_q % c])
    return p[:, row_of_node, :].transpose(0, 2, 1).reshape(rows, n)


@functools.partial(jax.jit, static_argnames=("in_order",))
def _finish_jit(scores, chunks, dst, alpha, *, in_order: bool):
    """Combine: chunks = P rows in slot order; slot dst[q] holds query q (slot q when ``in_order``)."""
    p = jnp.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    p = p[: scores.shape[0]] if in_order else p[dst]
    return combine(scores, p, alpha)


def _chunk_blocks(n_blocks: int, block_bytes: int, chunk_bytes: int) -> tuple[int, int]:
    """(blocks per chunk, chunks): chunks of at most chunk_bytes of transposed scores, as even as possible."""
    per_chunk = max(1, chunk_bytes // max(1, block_bytes))
    n_chunks = -(-n_blocks // per_chunk)
    return -(-n_blocks // n_chunks), n_chunks


def _cached_plan(query_fold: np.ndarray, n_nodes: int, itemsize: int, n_folds: int, fixed_shapes: bool):
    """(c, in_order, rows, folds, dst) for ``_smooth_lists``: per chunk, the query rows of its blocks (int32
    [chunk_blocks * c]) and each block's graph (int32 [chunk_blocks]); dst int32 [Q] the slot of each query.
    Device arrays, cached by the fold assignment's content (an evaluation smooths many score matrices with the
    same queries) and by the byte budgets the plan was made with."""
    qf = np.ascontiguousarray(query_fold, np.int64)
    return _plan(qf.tobytes(), n_nodes, itemsize, n_folds, fixed_shapes, _BLOCK_BYTES, _CHUNK_BYTES)


@functools.lru_cache(maxsize=32)
def _plan(query_fold_bytes: bytes, n_nodes: int, itemsize: int, n_folds: int, fixed_shapes: bool, block_bytes: int,
          chunk_bytes: int):
    """``_cached_plan`` for one key. chunk_bytes sizes the chunks; block_bytes only keys the cache (``_block_size``
    and ``fixed_block_plan`` read _BLOCK_BYTES themselves)."""
    query_fold = np.frombuffer(query_fold_bytes, np.int64)
    counts = np.bincount(query_fold, minlength=n_folds)
    if fixed_shapes:
        c, n_blocks = fixed_block_plan(query_fold.shape[0], n_nodes, n_folds, itemsize)
    else:
        c = _block_size(n_nodes, itemsize, counts)
        n_blocks = int((-(-counts // c)).sum())
    chunk_blocks, n_chunks = _chunk_blocks(n_blocks, n_nodes * c * itemsize, chunk_bytes)
    src, dst, block_fold = _block_plan(query_fold, n_folds, c, chunk_blocks * n_chunks)
    # every query on one graph: the plan keeps the query order (src = 0..Q-1, then padding). Fixed shapes promise
    # one program for every fold assignment, so they always take the gather by dst.
    in_order = not fixed_shapes and bool(np.all(query_fold == query_fold[0]))
    rows = tuple(jnp.asarray(r) for r in src.reshape(n_chunks, -1))
    folds = tuple(jnp.asarray(f) for f in block_fold.reshape(n_chunks, -1))
    return c, in_order, rows, folds, jnp.asarray(dst)


@dataclass(frozen=True, eq=False)
class PreparedGraph:
    """F graphs over N nodes on one edge list, ready for ``smooth_full`` / ``smooth_full_folds``.

    layout: the neighbour tables (``graph.neighbours.NeighbourLayout``); slot_weights: Â of each graph as
    per-bucket slot values, tuple of float [F, m_b, K_b] in ``dtype``. Built once per graph (``prepare_graph``),
    so a caller that smooths many batches on one graph skips the edge hashing and the normalisation.
    unrolled: the bucket sums' form (``graph.neighbours._bucket_sum``): unrolled for batches of many queries
    (the sweep), a gather and a reduction where compile time dominates (a ranker answering a few requests).
    """

    layout: NeighbourLayout
    slot_weights: tuple
    n_folds: int
    dtype: np.dtype
    unrolled: bool = True

    @property
    def n_nodes(self) -> int:
        return self.layout.n_nodes


def _prepare(senders, receivers, weights, n_nodes: int, dtype, unrolled: bool = True) -> PreparedGraph:
    """PreparedGraph of concrete int [E] senders / receivers and float [F, E] weights."""
    lay = neighbour_layout(senders, receivers, n_nodes)
    slot_w = _slot_weights_jit(lay.edge, lay.senders, lay.receivers, jnp.asarray(weights, dtype), n_nodes=n_nodes)
    return PreparedGraph(lay, slot_w, int(np.shape(weights)[0]), np.dtype(dtype), unrolled)


def _concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def prepare_graph(graph, dtype=np.float32, *, unrolled: bool = True) -> PreparedGraph:
    """Neighbour tables and Â slot values of a ToolGraph, a single-graph ``jraph.GraphsTuple`` (edges = weights
    [E]) or a ``FoldGraphs`` (weights [F, E]), for scores of ``dtype``. The graph arrays must be concrete.
    ``unrolled``: see ``PreparedGraph``."""
    if isinstance(graph, FoldGraphs):
        return _prepare(graph.senders, graph.receivers, graph.weights, graph.n_nodes, dtype, unrolled)
    g = graph.graph if isinstance(graph, ToolGraph) else graph
    if not _concrete(g.senders, g.receivers, g.edges):
        raise TypeError("smoothing builds neighbour tables on the host: pass concrete graph arrays (smooth "
                        "between jitted stages, not inside one)")
    return _prepare(np.asarray(g.senders), np.asarray(g.receivers), np.asarray(g.edges)[None], int(np.sum(g.n_node)),
                    dtype, unrolled)


def _smooth_lists(scores, query_fold, prep: PreparedGraph, alpha, fixed_shapes: bool = False):
    """Neighbour-list smoothing of scores [Q, N] (query q on graph query_fold[q] of ``prep``).

    Chunks of about _CHUNK_BYTES of transposed scores are propagated one call each, so every bucket's pass finds
    the chunk in cache and one compiled kernel serves every number of queries."""
    n = scores.shape[-1]
    if prep.n_nodes != n:
        raise ValueError(f"scores have {n} columns, graph has {prep.n_nodes} nodes")
    if prep.dtype != scores.dtype:
        raise ValueError(f"graph prepared for {prep.dtype} scores, got {scores.dtype}")
    if scores.shape[0] == 0:
        return combine(scores, scores, alpha)
    if not prep.slot_weights:  # a graph without edges: P = 0
        return combine(scores, jnp.zeros_like(scores), alpha)
    lay = prep.layout
    c, in_order, rows, folds, dst = _cached_plan(query_fold, n, scores.dtype.itemsize, prep.n_folds, fixed_shapes)
    chunks = [_propagate_chunk_jit(_take_rows_jit(scores, r), f, lay.nbr, lay.row_of_node, prep.slot_weights, c=c,
                                   unrolled=prep.unrolled) for r, f in zip(rows, folds)]
    alpha = alpha if isinstance(alpha, jax.Array) else np.asarray(alpha, scores.dtype)
    return _finish_jit(scores, chunks, dst, alpha, in_order=in_order)


def smooth_full(scores, graph: ToolGraph | jraph.GraphsTuple | PreparedGraph, alpha):
    """Full-pool smoothing over the whole ToolGraph.

    Args:
      scores: float [Q, N] score vectors (N = graph nodes).
      graph: ToolGraph, its single-graph GraphsTuple (``edges`` = weights [E]), or ``prepare_graph`` of one;
        concrete arrays (scores may be traced).
      alpha: scalar or float [A].
    Returns:
      float [Q, N], or [A, Q, N] when alpha is an array.
    """
    scores = scores if isinstance(scores, jax.Array) else jnp.asarray(scores)
    prep = graph if isinstance(graph, PreparedGraph) else prepare_graph(graph, scores.dtype)
    if prep.n_folds != 1:
        raise ValueError(f"smooth_full takes one graph, got {prep.n_folds} (use smooth_full_folds)")
    return _smooth_lists(scores, np.zeros(scores.shape[0], np.int32), prep, alpha)


# ----------------------------------------------------------------------------------------------------
# per-fold graphs


@dataclass(frozen=True, eq=False)
class FoldGraphs:
    """Several ToolGraphs over the same N on one shared (union) edge list.

    senders / receivers int32 [E] (union over folds), weights float32 [F, E] (0 where fold f lacks the edge).
    """

    senders: np.ndarray
    receivers: np.ndarray
    weights: np.ndarray
    n_nodes: int

    @property
    def n_folds(self) -> int:
        return int(self.weights.shape[0])


def stack_graphs(graphs: Sequence[ToolGraph], *, union: FoldGraphs | None = None, n_rows: int | None = None
                 ) -> FoldGraphs:
    """Put F ToolGraphs on their union edge list (array ops; no loop over edges).

    ``union``: put them on that FoldGraphs' edge list instead (it must hold every edge of every graph); graphs
    on one edge list share the neighbour tables and compiled smoothing programs. ``n_rows``: pad the weights
    with all-zero rows to [n_rows, E] (row f is graph f; same shapes for a different number of graphs).
    Missing edges get weight 0, which leaves Â unchanged (degrees are weighted)."""
    n = graphs[0].n_nodes
    if any(g.n_nodes != n for g in graphs):
        raise ValueError("all fold graphs must have the same number of nodes")
    keys = [g.receivers.astype(np.int64) * n + g.senders.astype(np.int64) for g in graphs]
    if union is None:
        ukey = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    else:
        if union.n_nodes != n:
            raise ValueError(f"union edge list has {union.n_nodes} nodes, the graphs {n}")
        ukey = union.receivers.astype(np.int64) * n + union.senders.astype(np.int64)
    w = np.zeros((max(len(graphs), n_rows or 0), ukey.shape[0]), np.float32)
    for f, (g, k) in enumerate(zip(graphs, keys)):  # F <= 5 folds
        pos = np.minimum(np.searchsorted(ukey, k), max(ukey.shape[0] - 1, 0))
        if k.size and (ukey.size == 0 or not np.array_equal(ukey[pos], k)):
            raise ValueError(f"graph {f} has edges outside the union edge list")
        w[f, pos] = g.weights
    return FoldGraphs((ukey % n).astype(np.int32), (ukey // n).astype(np.int32), w, n)


def union_edges(graph_lists: Sequence[Sequence[ToolGraph]]) -> FoldGraphs:
    """The union edge list of several lists of ToolGraphs (weights: one row per graph, in order), for
    ``stack_graphs(..., union=...)``."""
    return stack_graphs([g for graphs in graph_lists for g in graphs])


def smooth_full_folds(scores, query_fold, graphs: Sequence[ToolGraph] | FoldGraphs | PreparedGraph, alpha, *,
                      fixed_shapes: bool = False):
    """Full-pool smoothing where query q uses graph ``query_fold[q]`` (UltraTool's 5-fold protocol).

    No loop over queries or folds: the fold graphs share a union edge list, queries are grouped by fold into
    blocks, and each block uses its fold's normalised weights.

    Args:
      scores: float [Q, N]; query_fold: int [Q] in 0..F-1; graphs: F ToolGraphs, ``stack_graphs`` of them, or
        ``prepare_graph`` of that; alpha: scalar or float [A].
      fixed_shapes: use ``fixed_block_plan`` (padded block count, block size from N only), so that calls with
        the same Q, N, F and union edge list reuse one compiled program whatever the fold assignment and
        weights (an evaluation smoothing many graphs); the result is the same.
    Returns:
      float [Q, N] or [A, Q, N].
    """
    fg = graphs if isinstance(graphs, (FoldGraphs, PreparedGraph)) else stack_graphs(graphs)
    scores = jnp.asarray(scores)
    qf = np.asarray(query_fold)
    if qf.shape != scores.shape[:1] or (qf.size and (qf.min() < 0 or qf.max() >= fg.n_folds)):
        raise ValueError(f"query_fold must be [Q={scores.shape[0]}] in 0..{fg.n_folds - 1}")
    if scores.shape[-1] != fg.n_nodes:
        raise ValueError(f"scores have {scores.shape[-1]} columns, graphs have {fg.n_nodes} nodes")
    prep = fg if isinstance(fg, PreparedGraph) else prepare_graph(fg, scores.dtype)
    return _smooth_lists(scores, qf.astype(np.int64), prep, alpha, fixed_shapes)


# ----------------------------------------------------------------------------------------------------
# candidate mode


def _bucket(n: int, minimum: int = 1024) -> int:
    return int(max(minimum, 1 << int(np.ceil(np.log2(max(n, 1))))))


def induced_adjacency(cand, graph: ToolGraph | Sequence[ToolGraph], query_fold=None) -> np.ndarray:
    """A[cand[q, a], cand[q, b]] -> float32 [Q, C, C] for cand int [Q, C] (query q on graph query_fold[q] when
    graph is a list); rows/cols of negative (padding) candidates are zero. The route for repeated tool ids."""
    cand = np.asarray(cand)
    valid = cand >= 0
    c = np.where(valid, cand, 0)
    def lookup(dense, rows):  # one flat take: cheaper than 3-D fancy indexing
        cr = rows.astype(np.int64)
        return dense.ravel().take(cr[:, :, None] * dense.shape[0] + cr[:, None, :])

    if isinstance(graph, ToolGraph):
        a = lookup(graph.dense, c)
    else:
        graphs = list(graph)
        qf = np.asarray(query_fold)
        if qf.shape != cand.shape[:1]:
            raise ValueError("query_fold must be [Q] when a list of fold graphs is given")
        a = np.zeros(cand.shape + cand.shape[-1:], np.float32)
        for f, g in enumerate(graphs):  # F <= 5 folds
            rows = np.nonzero(qf == f)[0]
            a[rows] = lookup(g.dense, c[rows])
    return np.where(valid[:, :, None] & valid[:, None, :], a, 0.0).astype(np.float32)


def _induced_edges_one(cand, graph: ToolGraph):
    """Edges of the candidate-induced subgraphs from the graph's CSR rows, O(sum of candidate degrees).

    Returns (q, a, b, w): for query q an edge from position b to position a with A[cand[q,a], cand[q,b]] = w,
    ordered by (q, a, b).  Falls back to the dense [Q, C, C] lookup when a row repeats a tool id.
    """
    q, c = cand.shape
    n = graph.n_nodes
    qi, ai = np.nonzero(cand >= 0)
    u = cand[qi, ai].astype(np.int64)
    if u.size and u.max() >= n:
        raise ValueError(f"candidate id {u.max()} >= N = {n}")
    pos = np.full((q, n), -1, np.int32)  # position of each tool in the query's candidate list
    pos[qi, u] = ai
    if np.any(pos[qi, u] != ai):  # repeated tool ids: use the dense lookup, which handles them
        a = induced_adjacency(cand, graph)
        gq, ra, sb = np.nonzero(a)
        return gq, ra, sb, a[gq, ra, sb]
    recv = graph.receivers
    if np.any(recv[1:] < recv[:-1]):
        order = np.argsort(recv, kind="stable")
        recv, send, wts = recv[order], graph.senders[order], graph.weights[order]
    else:
        send, wts = graph.senders, graph.weights
    indptr = np.searchsorted(recv, np.arange(n + 1))
    start = indptr[u]
    deg = indptr[u + 1] - start
    rep = np.repeat(np.arange(u.size), deg)
    idx = np.arange(int(deg.sum())) - np.repeat(np.cumsum(deg) - deg, deg) + np.repeat(start, deg)
    b = pos[qi[rep], send[idx]]
    keep = b >= 0
    gq, ra, sb, w = qi[rep][keep], ai[rep][keep], b[keep], wts[idx][keep]
    # canonical (query, receiver, sender) order, as the dense lookup gives; (q, a) is already sorted, so a
    # stable (timsort) argsort of the combined key is nearly linear
    order = np.argsort((gq.astype(np.int64) * c + ra) * c + sb, kind="stable")
    return gq[order], ra[order], sb[order], w[order]


def _induced_edges(cand, graph, query_fold=None):
    cand = np.asarray(cand)
    if isinstance(graph, ToolGraph):
        return _induced_edges_one(cand, graph)
    graphs = list(graph)
    qf = np.asarray(query_fold)
    if qf.shape != cand.shape[:1]:
        raise ValueError("query_fold must be [Q] when a list of fold graphs is given")
    parts = []
    for f, g in enumerate(graphs):  # F <= 5 folds
        rows = np.nonzero(qf == f)[0]
        gq, ra, sb, w = _induced_edges_one(cand[rows], g)
        parts.append((rows[gq], ra, sb, w))
    gq, ra, sb, w = (np.concatenate(x) for x in zip(*parts))
    order = np.lexsort((sb, ra, gq))
    return gq[order], ra[order], sb[order], w[order]


def candidate_subgraphs(cand, graph: ToolGraph | Sequence[ToolGraph], *, query_fold=None,
                        edge_budget: int | None = None) -> jraph.GraphsTuple:
    """Batch the Q candidate-induced subgraphs into one padded ``jraph.GraphsTuple``.

    Graph q has nodes q*C .. q*C+C-1 (candidate order) and the nonzero entries of A[cand_q, cand_q] as
    directed edges, sorted by (receiver, sender).  The result equals ``jraph.batch`` of the Q subgraphs, built with
    array ops (CSR row expansion of the candidates and a [Q, N] position table), then
    ``jraph.pad_with_graphs`` to Q*C+1 nodes, ``edge_budget`` edges (default: next power of two >= the
    edge count, at least 1024) and Q+1 graphs.

    Args:
      cand: int [Q, C] tool ids (negative = padding, no edges).
      graph: a ToolGraph, or F ToolGraphs with ``query_fold`` int [Q] choosing one per query.
    """
    cand = np.asarray(cand)
    q, c = cand.shape
    gq, ra, sb, w = _induced_edges(cand, graph, query_fold)
    e = gq.shape[0]
    budget = _bucket(e) if edge_budget is None else int(edge_budget)
    g = jraph.GraphsTuple(
        nodes=None,
        edges=np.asarray(w, np.float32),
        senders=(gq * c + sb).astype(np.int32),
        receivers=(gq * c + ra).astype(np.int32),
        n_node=np.full(q, c, np.int32),
        n_edge=np.bincount(gq, minlength=q).astype(np.int32),
        globals=None,
    )
    return jraph.pad_with_graphs(g, n_node=q * c + 1, n_edge=budget, n_graph=q + 1)


@jax.jit
def smooth_padded_batch(scores, senders, receivers, weights, alpha):
    """Candidate kernel: scores [Q, C] over a padded batch of Q graphs with Q*C + 1 nodes (the last one is
    padding; ``candidate_subgraphs``), int32 / float [E_pad] edges, alpha scalar or [A] -> [Q, C] or [A, Q, C]."""
    q, c = scores.shape
    n = q * c + 1
    x = jnp.concatenate([scores.reshape(-1), jnp.zeros((1,), scores.dtype)])
    norm_w = normalized_edge_weights(senders, receivers, weights.astype(scores.dtype), n)
    p = jax.ops.segment_sum(norm_w * x[senders], receivers, num_segments=n)[:-1].reshape(q, c)
    return combine(scores, p, alpha)


def smooth_candidates(scores, cand, graph: ToolGraph | Sequence[ToolGraph], alpha, *, query_fold=None,
                      edge_budget: int | None = None):
    """Candidate-mode smoothing: each query on the subgraph induced by its candidates.

    Args:
      scores: float [Q, C] scores of the candidates; cand: int [Q, C] their tool ids (negative = padding).
      graph: a ToolGraph, or F fold ToolGraphs with ``query_fold`` int [Q].
      alpha: scalar or float [A].
      edge_budget: padded edge count (default: power-of-two bucket); fixes the compiled shape.
    Returns:
      float [Q, C] or [A, Q, C].
    """
    scores = jnp.asarray(scores)
    if scores.shape != np.shape(cand):
        raise ValueError(f"scores {scores.shape} and cand {np.shape(cand)} differ")
    g = candidate_subgraphs(cand, graph, query_fold=query_fold, edge_budget=edge_budget)
    return smooth_padded_batch(scores, jnp.asarray(g.senders), jnp.asarray(g.receivers), jnp.asarray(g.edges),
                               jnp.asarray(alpha, scores.dtype))


__all__ = ["smooth_full", "smooth_full_folds", "smooth_candidates", "prepare_graph", "PreparedGraph",
           "candidate_subgraphs", "smooth_padded_batch", "induced_adjacency", "stack_graphs", "union_edges",
           "fixed_block_plan", "FoldGraphs", "normalized_edge_weights", "combine"]
