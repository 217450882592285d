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

Why array operations: row-blocked matmuls build the graph of thousands of tools without a loop over pairs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import jraph
import numpy as np
import scipy.sparse as sp

from riskrank_jax.scoring import RISK_THRESHOLD, is_high_permission, l2_normalise

EDGE_TYPES: tuple[str, ...] = ("cooccur", "semantic", "permission", "risk_cooccur")


@dataclass(frozen=True)
class GraphConfig:
    """Thresholds and weights of the ToolGraph (docs/method.md §4)."""

    cooccur_min_count: int = 2
    cooccur_weight: float = 0.4
    semantic_threshold: float = 0.65
    semantic_weight: float = 0.3
    permission_min_shared: int = 1
    permission_weight: float = 0.15
    n_permission_categories: int = 5
    risk_threshold: int = RISK_THRESHOLD
    risk_min_cooccur: int = 1
    risk_weight: float = 0.15
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


def build_tool_graph(tool_emb, perm_mask, risk, train_gold, config: GraphConfig = GraphConfig()) -> ToolGraph:
    """Build the four-type ToolGraph of docs/method.md §4.

    Args:
      tool_emb: float [N, d] description embeddings (normalised here before the cosine).
      perm_mask: bool [N, 5] permission categories.
      risk: int [N] risk levels 1..5.
      train_gold: int [Q, G] training gold sets padded with -1 (co-occurrence source).
      config: thresholds and weights.
    Returns:
      ToolGraph with E directed edges.
    """
    n = _check_inputs(tool_emb, perm_mask, risk)
    co, rc = _cooccur_pairs(train_gold, risk, n, config)
    return _assemble(n, [co, _semantic_pairs(tool_emb, config), _permission_pairs(perm_mask, config), rc])


def build_fold_graphs(tool_emb, perm_mask, risk, train_gold, fold_mask,
                      config: GraphConfig = GraphConfig()) -> list[ToolGraph]:
    """One ToolGraph per fold: co-occurrence from ``train_gold[fold_mask[f]]``, the rest shared.

    Args:
      fold_mask: bool [F, Q]; fold f's graph uses the training queries where ``fold_mask[f]`` is True.
    The semantic and permission pair lists are computed once and reused by every fold.
    """
    n = _check_inputs(tool_emb, perm_mask, risk)
    fold_mask = np.asarray(fold_mask, dtype=bool)
    gold = np.asarray(train_gold)
    if fold_mask.ndim != 2 or fold_mask.shape[1] != gold.shape[0]:
        raise ValueError(f"fold_mask must be [F, Q={gold.shape[0]}], got {fold_mask.shape}")
    sem = _semantic_pairs(tool_emb, config)
    perm = _permission_pairs(perm_mask, config)
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
