"""ToolGraph (docs/method.md §4): a weighted, undirected tool-tool graph with four edge types.

Usage::

    g = build_tool_graph(tool_emb, perm_mask, risk, train_gold)       # jraph.GraphsTuple inside
    g_sem = with_edge_types(g, ("semantic", "permission"))             # any subset of the four types
    graphs = build_fold_graphs(tool_emb, perm_mask, risk, train_gold, fold_mask)   # one per CV fold

Per unordered pair {i, j} (i != j) the raw type weights are

    cooccur       0.4 * C_ij / max_{kept} C      if C_ij ≥ 2    (C = co-occurrence counts in train gold sets)
    semantic      0.3 * cos(e_i, e_j)            if cos > 0.65
    permission    0.15 * shared_ij / 5           if shared_ij ≥ 1   (shared = perm_mask @ perm_mask.T)
    risk_cooccur  0.15                           if r_i ≥ 3 and r_j ≥ 3 and C_ij ≥ 1

and the edge weight is  w_ij = sum_types / max_{pairs} sum_types.  Edges are stored in both directions,
sorted by (receiver, sender); there are no self-loops.  Everything is computed with array operations
(sparse ``X.T @ X`` for co-occurrence, row-blocked matmuls for cosine and permission overlap); the only
Python loop is over row blocks of ``GraphConfig.block_size`` tools.

Bounded neighbours (``max_neighbours=m`` of ``build_tool_graph`` / ``build_fold_graphs``; the registry graph,
``rank.registry_inputs``): the paper's semantic and permission edges grow with N² when many tools are alike
(5,000 near-identical tools: 11 million pairs, 5 GB; 10,000: 18 GB). With a bound, each tool picks its m best
semantic partners (cos > 0.65, by cosine) and its m best permission partners (shared ≥ 1, by shared
categories, then cosine; ties to the lower index), and a pair is an edge of that type only when each of the
two picked the other (mutual top-m): the graph stays symmetric and no tool has more than m neighbours of
either type (co-occurrence edges come from a query log and are not bounded). The picks are found over
block_size x block_size tiles of the upper triangle (each cosine computed once, used for both tools), merged
into running [N, m] lists, so memory is O(N m + block_size²) and no N x N array exists; the work is still
O(N² d). With m ≥ N − 1 the graph equals the unbounded one. ``None`` (the default) is the paper's graph, which
every committed result uses; the bound is a keyword, not a ``GraphConfig`` field, so the sweep's config tree
(results.json "config", the run key) is unchanged.

Why array operations: row-blocked matmuls build the graph of thousands of tools without a loop over pairs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import jraph
import numpy as np
import scipy.sparse as sp

from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import RISK_THRESHOLD, is_high_permission, l2_normalise

EDGE_TYPES: tuple[str, ...] = ("cooccur", "semantic", "permission", "risk_cooccur")


@dataclass(frozen=True)
class GraphConfig:
    """Thresholds and weights of the ToolGraph (docs/method.md §4), one pair per edge type."""

    cooccur_min_count: int = 2  # co-occurrence: the pair is gold together in at least this many training queries
    cooccur_weight: float = 0.4  # ... and adds this times count / max count
    semantic_threshold: float = 0.65  # semantic: the description embeddings' cosine is above this
    semantic_weight: float = 0.3  # ... and adds this times the cosine
    permission_min_shared: int = 1  # permission overlap: the tools share at least this many categories
    permission_weight: float = 0.15  # ... and add this times shared / n_permission_categories
    n_permission_categories: int = 5
    risk_threshold: int = RISK_THRESHOLD  # risk co-occurrence: both tools of risk >= this,
    risk_min_cooccur: int = 1  # ... gold together in at least this many training queries,
    risk_weight: float = 0.15  # ... add this
    block_size: int = 1024  # rows per block of the N x N cosine / overlap products (memory bound)


@dataclass(frozen=True, eq=False)
class ToolGraph:
    """A ToolGraph as a single-graph ``jraph.GraphsTuple`` plus raw per-type edge weights.

    ``graph.edges`` is the normalised combined weight, float32 [E] (E = 2 x undirected pairs);
    ``graph.senders`` / ``graph.receivers`` int32 [E]; ``graph.n_node = [N]``, ``graph.n_edge = [E]``.
    ``type_weights`` float32 [E, 4]: raw (pre-normalisation) weight of each type per directed edge, columns
    in the order of ``edge_types``; columns of types left out by ``with_edge_types`` are zero.
    """

    graph: jraph.GraphsTuple
    type_weights: np.ndarray
    edge_types: tuple[str, ...] = field(default=EDGE_TYPES)

    @property
    def n_nodes(self) -> int:
        return int(self.graph.n_node[0])

    @property
    def n_edges(self) -> int:
        """Directed edges (twice the undirected pairs)."""
        return int(self.graph.senders.shape[0])

    @property
    def senders(self) -> np.ndarray:
        return self.graph.senders

    @property
    def receivers(self) -> np.ndarray:
        return self.graph.receivers

    @property
    def weights(self) -> np.ndarray:
        return self.graph.edges

    def to_scipy(self) -> sp.csr_matrix:
        """Weighted adjacency A [N, N] (symmetric) as CSR, A[receiver, sender] = w."""
        n = self.n_nodes
        return sp.csr_matrix((self.weights, (self.receivers, self.senders)), shape=(n, n))

    @functools.cached_property
    def dense(self) -> np.ndarray:
        """Weighted adjacency A [N, N] float32 (cached; 4 N^2 bytes)."""
        a = np.zeros((self.n_nodes, self.n_nodes), dtype=np.float32)
        a[self.receivers, self.senders] = self.weights
        return a


# ----------------------------------------------------------------------------------------------------
# per-type pair lists (upper triangle, i < j)


def _cooccur_counts(train_gold: np.ndarray, n: int) -> sp.csr_matrix:
    """C = X.T @ X without the diagonal; X [Q, N] is the binary gold-set indicator (-1 = padding)."""
    gold = np.asarray(train_gold)
    if gold.ndim != 2:
        raise ValueError(f"train_gold must be [Q, G], got shape {gold.shape}")
    q_idx, g_idx = np.nonzero(gold >= 0)
    tools = gold[q_idx, g_idx].astype(np.int64)
    if tools.size and (tools.max() >= n):
        raise ValueError(f"train_gold holds tool id {tools.max()} >= N = {n}")
    x = sp.csr_matrix((np.ones(tools.size, np.int32), (q_idx, tools)), shape=(gold.shape[0], n))
    x.data[:] = 1  # csr sums duplicates: a tool listed twice in one gold set counts once
    c = (x.T @ x).tocsr()
    c.setdiag(0)
    c.eliminate_zeros()
    return c


def _upper(c: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    coo = sp.triu(c, k=1).tocoo()
    return coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data


def _cooccur_pairs(train_gold, risk, n, cfg: GraphConfig):
    """(cooccur pairs, risk-cooccur pairs), each (i, j, raw weight) with i < j."""
    i, j, cnt = _upper(_cooccur_counts(train_gold, n))
    keep = cnt >= cfg.cooccur_min_count
    if keep.any():
        w = cfg.cooccur_weight * cnt[keep] / cnt[keep].max()
    else:
        w = np.zeros(0)
    co = (i[keep], j[keep], w)
    risky = np.asarray(risk) >= cfg.risk_threshold
    rk = (cnt >= cfg.risk_min_cooccur) & risky[i] & risky[j]
    rc = (i[rk], j[rk], np.full(int(rk.sum()), cfg.risk_weight))
    return co, rc


def _blocked_pairs(n, block, fn):
    """Concatenate fn(rows) -> (i, j, w) over row blocks; fn returns pairs with j > i only."""
    out_i, out_j, out_w = [], [], []
    for b0 in range(0, n, block):
        i, j, w = fn(np.arange(b0, min(n, b0 + block)))
        out_i.append(i)
        out_j.append(j)
        out_w.append(w)
    if not out_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_w)


def _semantic_pairs(tool_emb, cfg: GraphConfig):
    e = np.asarray(tool_emb, dtype=np.float32)
    e = l2_normalise(e, np).astype(np.float64)
    n = e.shape[0]
    col = np.arange(n)

    def fn(rows):
        # float64 products rounded to float32: a float32 BLAS product depends on the BLAS's thread count (1 and 2
        # threads differed by up to 9e-8 on UltraTool, which moved rankings), so the graph would depend on the CPUs
        cos = (e[rows] @ e.T).astype(np.float32)  # [b, N]
        hit = (cos > cfg.semantic_threshold) & (col[None, :] > rows[:, None])
        r, c = np.nonzero(hit)
        return rows[r], c, cfg.semantic_weight * cos[r, c].astype(np.float64)

    return _blocked_pairs(n, cfg.block_size, fn)


def _permission_pairs(perm_mask, cfg: GraphConfig):
    pm = np.asarray(perm_mask, dtype=np.int32)
    n = pm.shape[0]
    col = np.arange(n)

    def fn(rows):
        shared = pm[rows] @ pm.T  # [b, N]
        hit = (shared >= cfg.permission_min_shared) & (col[None, :] > rows[:, None])
        r, c = np.nonzero(hit)
        w = cfg.permission_weight * shared[r, c] / cfg.n_permission_categories
        return rows[r], c, w.astype(np.float64)

    return _blocked_pairs(n, cfg.block_size, fn)


# ----------------------------------------------------------------------------------------------------
# bounded neighbours (max_neighbours): mutual top-m pairs from tiles, no N x N array

PROGRESS_MIN_TOOLS = 8192  # a progress bar over the tiles from this many tools (when stderr is a terminal)


def _top_rows(key: np.ndarray, m: int, col0: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's m largest finite entries of key [b, w] (-inf: no candidate; ties: the lower column), in column
    order: (values [b, m], -inf where a row has fewer; global columns col0 + c [b, m], -1 there)."""
    b, w = key.shape
    vals = np.full((b, m), -np.inf, key.dtype)
    cols = np.full((b, m), -1, np.int64)
    if w > m:
        kth = np.partition(key, w - m, axis=1)[:, w - m : w - m + 1]  # the m-th largest of each row
        sel = (key >= kth) & (key > -np.inf)
        over = np.flatnonzero(sel.sum(1) > m)  # ties at the m-th value: the lowest columns among them
        if over.size:
            sub, k = key[over], kth[over]
            gt, eq = sub > k, sub == k
            need = m - gt.sum(1, keepdims=True)
            sel[over] = gt | (eq & (np.cumsum(eq, axis=1) <= need))
    else:
        sel = key > -np.inf
    r, c = np.divmod(np.flatnonzero(sel), w)  # row-major: each row's columns ascending
    cnt = np.bincount(r, minlength=b)
    pos = np.arange(r.size) - (np.cumsum(cnt) - cnt)[r]
    vals[r, pos] = key[r, c]
    cols[r, pos] = col0 + c
    return vals, cols


def _merge_lists(vals, cols, owners, new_vals, new_cols, m: int) -> None:
    """Fold candidates into the running lists vals / cols [N, m] in place: list owners[a] is offered
    new_vals / new_cols [A, w] (-inf / -1 pad them) and keeps its m best, value descending, then lower column.

    The offered columns come after every column the list holds (tiles arrive in block order), and equal offered
    values come in ascending column order, so a stable sort on the value alone breaks ties by column."""
    v = np.concatenate([vals[owners], new_vals], axis=1)
    c = np.concatenate([cols[owners], new_cols], axis=1)
    order = np.argsort(-v, axis=1, kind="stable")[:, :m]
    vals[owners] = np.take_along_axis(v, order, 1)
    cols[owners] = np.take_along_axis(c, order, 1)


def _offer_tile(vals, cols, cos, perm, floor, i0: int, j0: int, m: int, transposed: bool) -> None:
    """Offer one tile (rows: tools i0 + r, columns: tools j0 + c) to the running lists vals / cols [N, m] of its
    row tools (``transposed``: of its column tools, each offered the row tools).

    Keys: the cosine cos [bi, bj] (float32) when ``perm`` is None, else the permission key 4 * shared + cos for
    perm = (shared [bi, bj], that key in float32): screened in float32 (rounded by < 1e-6, so a margin of 1e-5
    loses no candidate), computed exactly in float64 for the entries that pass. An entry is a candidate when its
    key is above ``floor`` (the type's threshold in key units) and above the list's current m-th value (an equal
    value has a higher column, so loses the tie). After a list's first tiles few entries pass, so each list is
    offered a handful of padded candidates; in its first tiles each owner's m best are picked first (a sort of
    the candidates, or a partition of the tile's rows when most entries are candidates)."""
    o0, c0, n_own = (j0, i0, cos.shape[1]) if transposed else (i0, j0, cos.shape[0])
    kth = np.maximum(vals[o0:o0 + n_own, m - 1], floor)
    if perm is None:
        approx, lo = cos, kth.astype(np.float32)
    else:
        (shared, approx), lo = perm, (kth - 1e-5).astype(np.float32)
    # row-major (np.flatnonzero: 2-D np.nonzero is 10x slower)
    flat = np.flatnonzero(approx > (lo[None, :] if transposed else lo[:, None]))
    r, c = np.divmod(flat, cos.shape[1])
    own = c if transposed else r
    if perm is None:
        v = cos[r, c]
    else:
        v = 4.0 * shared[r, c] + cos[r, c].astype(np.float64)
        keep = v > kth[own]
        r, c, own, v = r[keep], c[keep], own[keep], v[keep]
    if r.size == 0:
        return
    cnt = np.bincount(own, minlength=n_own)
    other = r if transposed else c
    if cnt.max() > 2 * m:  # a list's first tiles: each owner's m best first
        if r.size > cos.size // 4:  # dense: a partition of the tile's rows
            k = np.full(cos.shape, -np.inf, vals.dtype)
            k[r, c] = v
            top_v, top_c = _top_rows(np.ascontiguousarray(k.T) if transposed else k, m, c0)
            _merge_lists(vals, cols, o0 + np.arange(n_own), top_v, top_c, m)
            return
        order = np.lexsort((other, -v, own))  # by owner, value descending, then column
        own, other, v = own[order], other[order], v[order]
        rank = np.arange(own.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        keep = rank < m
        own, other, v = own[keep], other[keep], v[keep]
        cnt = np.minimum(cnt, m)
    elif transposed:  # owner-major, the offered columns ascending within an owner
        order = np.argsort(own, kind="stable")
        own, other, v = own[order], other[order], v[order]
    aff = np.flatnonzero(cnt)
    pos = np.arange(own.size) - np.repeat(np.cumsum(cnt[aff]) - cnt[aff], cnt[aff])
    slot = np.searchsorted(aff, own)
    w = int(cnt.max())
    new_v = np.full((aff.size, w), -np.inf, vals.dtype)
    new_c = np.full((aff.size, w), -1, np.int64)
    new_v[slot, pos] = v
    new_c[slot, pos] = c0 + other
    _merge_lists(vals, cols, o0 + aff, new_v, new_c, m)


def _mutual_pairs(vals: np.ndarray, cols: np.ndarray):
    """Pairs (i < j) in which each tool picked the other (cols [N, m], -1: no pick), with the value of i's pick:
    (i, j, value), ordered by (i, j)."""
    n = vals.shape[0]
    i, slot = np.nonzero(cols >= 0)
    j = cols[i, slot]
    fwd = i * n + j
    rev = np.sort(j * n + i)  # b * n + a for each pick a -> b: fwd i * n + j is in it iff j picked i
    keep = np.zeros(fwd.shape, bool)
    if rev.size:
        keep = (i < j) & (rev[np.minimum(np.searchsorted(rev, fwd), rev.size - 1)] == fwd)
    i, j, slot = i[keep], j[keep], slot[keep]
    order = np.argsort(i * n + j, kind="stable")
    return i[order], j[order], vals[i[order], slot[order]]


def _bounded_pairs(tool_emb, perm_mask, cfg: GraphConfig, max_neighbours: int, progress: bool | None = None):
    """(semantic pairs, permission pairs) of the bounded graph, each (i, j, raw weight) with i < j.

    Upper-triangle tiles of block_size x block_size tools: one float64 cosine product per tile (rounded to
    float32, as in the unbounded graph), each tool's top-m candidates of the tile (rows, and columns for the
    tile's transpose) merged into its running list. Peak memory: the running lists, N x m x 28 bytes, and a few
    tile-sized arrays."""
    n = np.asarray(tool_emb).shape[0]
    m = min(int(max_neighbours), n - 1)  # no tool has more than N - 1 partners
    if m < 1:
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        return empty, empty
    e = l2_normalise(np.asarray(tool_emb, dtype=np.float32), np).astype(np.float64)
    pm = np.asarray(perm_mask, dtype=bool)
    if pm.shape[1] > 8:
        raise ValueError(f"the bounded graph takes at most 8 permission categories, got {pm.shape[1]}")
    code = (pm.astype(np.uint8) << np.arange(pm.shape[1], dtype=np.uint8)).sum(1, dtype=np.uint8)
    popcount = np.array([x.bit_count() for x in range(256)], np.uint8)  # shared = popcount(code_i & code_j)
    has_code = code > 0
    b = int(cfg.block_size)
    starts = list(range(0, n, b))
    # running lists, value descending: semantic cos (float32), permission 4 * shared + cos (float64: shared
    # categories first, then the cosine, |cos| <= 1); a key above 4 * min_shared - 2 has shared >= min_shared
    run = {"semantic": (np.full((n, m), -np.inf, np.float32), np.full((n, m), -1, np.int64)),
           "permission": (np.full((n, m), -np.inf), np.full((n, m), -1, np.int64))}
    floor = {"semantic": np.float32(cfg.semantic_threshold), "permission": 4.0 * cfg.permission_min_shared - 2.0}
    n_tiles = len(starts) * (len(starts) + 1) // 2
    show = n >= PROGRESS_MIN_TOOLS if progress is None else bool(progress)
    bar = progress_bar(enabled=show, total=n_tiles, unit="tile", desc=f"ToolGraph ({n} tools, top {m})", leave=False)
    try:
        for a, i0 in enumerate(starts):
            ri = slice(i0, min(n, i0 + b))
            for j0 in starts[a:]:
                rj = slice(j0, min(n, j0 + b))
                cos = (e[ri] @ e[rj].T).astype(np.float32)  # see _semantic_pairs: float64, then float32
                if i0 == j0:
                    np.fill_diagonal(cos, -np.inf)  # no self-pairs (-inf is below every floor)
                types = [("semantic", None)]
                if has_code[ri].any() and has_code[rj].any():  # else no pair of the tile shares a category
                    shared = popcount[code[ri, None] & code[None, rj]]
                    approx = np.multiply(shared, np.float32(4.0), dtype=np.float32)
                    approx += cos
                    types.append(("permission", (shared, approx)))
                for t, perm in types:
                    vals, cols = run[t]
                    _offer_tile(vals, cols, cos, perm, floor[t], i0, j0, m, transposed=False)
                    if j0 != i0:  # the transposed tile: the column tools' candidates among the row tools
                        _offer_tile(vals, cols, cos, perm, floor[t], i0, j0, m, transposed=True)
                bar.update(1)
    finally:
        bar.close()
    si, sj, cos = _mutual_pairs(*run["semantic"])
    sem = (si, sj, cfg.semantic_weight * cos.astype(np.float64))  # cos: the float32 cosine, as unbounded
    pi, pj, _ = _mutual_pairs(*run["permission"])
    shared = (pm[pi] & pm[pj]).sum(-1)
    perm = (pi, pj, (cfg.permission_weight * shared / cfg.n_permission_categories).astype(np.float64))
    return sem, perm


def _semantic_and_permission(tool_emb, perm_mask, cfg: GraphConfig, max_neighbours: int | None,
                             progress: bool | None = None):
    """(semantic pairs, permission pairs): every pair above the thresholds, or the bounded ones."""
    if max_neighbours is None:
        return _semantic_pairs(tool_emb, cfg), _permission_pairs(perm_mask, cfg)
    if int(max_neighbours) < 1:
        raise ValueError(f"max_neighbours must be None or >= 1, got {max_neighbours}")
    return _bounded_pairs(tool_emb, perm_mask, cfg, int(max_neighbours), progress)


# ----------------------------------------------------------------------------------------------------
# assembly


def _assemble(n: int, per_type: Sequence[tuple], edge_types=EDGE_TYPES) -> ToolGraph:
    """Union the per-type pair lists, normalise the summed weight, store both directions."""
    keys, cols, vals = [], [], []
    for t, (i, j, w) in enumerate(per_type):
        keys.append(i.astype(np.int64) * n + j.astype(np.int64))
        cols.append(np.full(i.shape[0], t, np.int64))
        vals.append(np.asarray(w, np.float64))
    key = np.concatenate(keys)
    col = np.concatenate(cols)
    val = np.concatenate(vals)
    ukey, inv = np.unique(key, return_inverse=True)
    tw = np.zeros((ukey.shape[0], len(per_type)), np.float64)
    np.add.at(tw, (inv, col), val)
    return _from_pairs(n, ukey // n, ukey % n, tw, edge_types)


def _from_pairs(n, i, j, tw, edge_types) -> ToolGraph:
    """Undirected pairs (i < j) with raw type weights tw [P, T] -> directed, normalised ToolGraph."""
    total = tw.sum(-1)
    keep = total > 0
    i, j, tw, total = i[keep], j[keep], tw[keep], total[keep]
    w = total / total.max() if total.size else total
    senders = np.concatenate([i, j])
    receivers = np.concatenate([j, i])
    order = np.lexsort((senders, receivers))  # by receiver, then sender
    senders, receivers = senders[order], receivers[order]
    w = np.concatenate([w, w])[order]
    tw = np.concatenate([tw, tw])[order]
    e = senders.shape[0]
    g = jraph.GraphsTuple(
        nodes=None,
        edges=w.astype(np.float32),
        senders=senders.astype(np.int32),
        receivers=receivers.astype(np.int32),
        n_node=np.array([n], np.int32),
        n_edge=np.array([e], np.int32),
        globals=None,
    )
    return ToolGraph(g, tw.astype(np.float32), tuple(edge_types))


def _check_inputs(tool_emb, perm_mask, risk):
    n = np.asarray(tool_emb).shape[0]
    if np.asarray(perm_mask).shape[0] != n or np.asarray(risk).shape[0] != n:
        raise ValueError(
            f"tool_emb, perm_mask and risk disagree on N: {np.asarray(tool_emb).shape[0]}, "
            f"{np.asarray(perm_mask).shape[0]}, {np.asarray(risk).shape[0]}")
    return n


def build_tool_graph(tool_emb, perm_mask, risk, train_gold, config: GraphConfig = GraphConfig(), *,
                     max_neighbours: int | None = None, progress: bool | None = None) -> ToolGraph:
    """Build the four-type ToolGraph of docs/method.md §4.

    Args:
      tool_emb: float [N, d] description embeddings (normalised here before the cosine).
      perm_mask: bool [N, 5] permission categories.
      risk: int [N] risk levels 1..5.
      train_gold: int [Q, G] training gold sets padded with -1 (co-occurrence source).
      config: thresholds and weights.
      max_neighbours: m bounds the semantic and permission edges to mutual top-m partners (at most m per tool
        and type, O(N m) memory; the registry graph); None (default) keeps every pair above the thresholds
        (the paper's graph: O(N²) edges when many tools are alike).
      progress: a bar over the bounded graph's tiles (None: from PROGRESS_MIN_TOOLS tools; drawn only on a
        terminal); the unbounded graph draws none.
    Returns:
      ToolGraph with E directed edges.
    """
    n = _check_inputs(tool_emb, perm_mask, risk)
    co, rc = _cooccur_pairs(train_gold, risk, n, config)
    sem, perm = _semantic_and_permission(tool_emb, perm_mask, config, max_neighbours, progress)
    return _assemble(n, [co, sem, perm, rc])


def build_fold_graphs(tool_emb, perm_mask, risk, train_gold, fold_mask,
                      config: GraphConfig = GraphConfig(), *, max_neighbours: int | None = None) -> list[ToolGraph]:
    """One ToolGraph per fold: co-occurrence from ``train_gold[fold_mask[f]]``, the rest shared.

    Args:
      fold_mask: bool [F, Q]; fold f's graph uses the training queries where ``fold_mask[f]`` is True.
      max_neighbours: as for ``build_tool_graph``.
    The semantic and permission pair lists are computed once and reused by every fold.
    """
    n = _check_inputs(tool_emb, perm_mask, risk)
    fold_mask = np.asarray(fold_mask, dtype=bool)
    gold = np.asarray(train_gold)
    if fold_mask.ndim != 2 or fold_mask.shape[1] != gold.shape[0]:
        raise ValueError(f"fold_mask must be [F, Q={gold.shape[0]}], got {fold_mask.shape}")
    sem, perm = _semantic_and_permission(tool_emb, perm_mask, config, max_neighbours)
    out = []
    for f in range(fold_mask.shape[0]):  # F <= 5 folds
        co, rc = _cooccur_pairs(gold[fold_mask[f]], risk, n, config)
        out.append(_assemble(n, [co, sem, perm, rc]))
    return out


def _type_mask(graph: ToolGraph, types) -> np.ndarray:
    if isinstance(types, str):
        types = (types,)
    arr = np.asarray(types) if not isinstance(types, (set, frozenset)) else None
    if arr is not None and arr.dtype == bool:
        if arr.shape != (len(graph.edge_types),):
            raise ValueError(f"bool edge-type mask must have shape [{len(graph.edge_types)}], got {arr.shape}")
        return arr
    names = list(types)
    unknown = [t for t in names if t not in graph.edge_types]
    if unknown:
        raise ValueError(f"unknown edge types {unknown}; known: {graph.edge_types}")
    return np.array([t in names for t in graph.edge_types])


def with_edge_types(graph: ToolGraph, types: Iterable[str] | np.ndarray) -> ToolGraph:
    """The graph restricted to a subset of edge types (names, or a bool mask [4]).

    weight = sum of the chosen raw type weights / its max over pairs; edges whose chosen sum is zero are
    dropped; columns of the other types are zeroed.  Derive subsets from the full graph.
    """
    mask = _type_mask(graph, types)
    tw = np.where(mask[None, :], graph.type_weights, 0.0).astype(np.float64)
    up = graph.senders < graph.receivers  # each undirected pair once
    return _from_pairs(graph.n_nodes, graph.senders[up].astype(np.int64),
                       graph.receivers[up].astype(np.int64), tw[up], graph.edge_types)


def stats(graph: ToolGraph, perm_level) -> dict:
    """ToolGraph counts: nodes, undirected edges per type and in total, tools with a neighbour, high-perm."""
    up = graph.senders < graph.receivers
    tw = graph.type_weights[up]
    out = {"nodes": graph.n_nodes}
    for t, name in enumerate(graph.edge_types):
        out[f"edges_{name}"] = int((tw[:, t] > 0).sum())
    out["edges_total"] = int(up.sum())
    out["tools_with_neighbour"] = int(np.unique(graph.senders).size)
    out["high_permission_tools"] = int(is_high_permission(np.asarray(perm_level)).sum())
    return out


__all__ = ["EDGE_TYPES", "GraphConfig", "ToolGraph", "build_tool_graph", "build_fold_graphs",
           "with_edge_types", "stats"]
