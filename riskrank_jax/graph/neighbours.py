"""Padded in-neighbour lists bucketed by in-degree: the kernel behind full-pool smoothing (``graph.smoothing``).

Usage::

    lay = neighbour_layout(senders, receivers, n_nodes)   # int [E] edges; built on the host, cached by content
    w_b = bucket_weights(lay.edge, norm_w)                # norm_w [..., E] -> per bucket [..., m_b, K_b]
    y = propagate_rows(x, lay.nbr, w_b, lay.row_of_node)  # x [N, c] -> [N, c]: y_i = sum_{j->i} w_ji x_j
    yb = propagate_bucket_rows(xb, lay.nbr, w_bb)         # xb [B, N, c], w_bb per bucket [B or 1, m_b, K_b]
                                                          #   -> [B, M + 1, c], rows in bucket order

Nodes are grouped by in-degree into widths K from a fixed ladder (1, 2, 3, 4, 6, 8, 12, ..., 32, then multiples
of 16; padding below 1.5x the edges); each bucket's neighbour table is an int32 [m_b, K] array, and one fused
loop per bucket sums its K gathered rows of x, with c queries on the minor axis so every gather copies a whole
contiguous row. Blocks of queries are read as one row-major [B * N, c] matrix (row ids offset by b * N).
Each bucket's rows are padded (slot weight 0) so that rows x width is a multiple of ``SLOT_MULTIPLE``.
Why: gathers of whole cache-resident rows are cheap where scatters and minor-axis gathers are not, and fixed
widths let graphs of similar degree profile share compiled shapes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

SLOT_MULTIPLE = 64  # rows x width of a bucket is padded to a multiple of this (fewer distinct compiled shapes)
SLAB = 32  # widths up to this come from the ladder WIDTHS_UNROLLED
WIDTHS_UNROLLED = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # bucket widths up to SLAB (ratio <= 1.5 between steps)
SLAB_STEP = 16  # widths above SLAB are multiples of this
UNROLL_MAX = 128  # buckets up to this width are one fusion; wider ones loop over slabs of SLAB_STEP neighbours
# (each loop step has a fixed XLA CPU overhead, so only the rare very wide buckets loop)


@dataclass(frozen=True, eq=False)
class NeighbourLayout:
    """In-neighbour tables of a graph with N nodes and E directed edges, nodes bucketed by in-degree.

    Arrays are device arrays (built once per edge structure and cached).
    nbr:  tuple of int32 [m_b, K_b] sender ids (0 in empty slots), one per bucket, K_b from ``_width``.
    edge: tuple of int32 [m_b, K_b] index of the edge in the input arrays (E in empty slots).
    row_of_node: int32 [N] row of node i in the concatenated bucket outputs; nodes without in-edges point
      at row M = sum m_b, a zero row.
    senders / receivers: int32 [E], the input edge list (kept on the device for the degree computation, so a
      call does not copy it again).
    """

    nbr: tuple
    edge: tuple
    row_of_node: jax.Array
    n_nodes: int
    n_edges: int
    senders: jax.Array
    receivers: jax.Array

    @property
    def padded_slots(self) -> int:
        """Gathered rows per query: sum of m_b * K_b (>= E)."""
        return int(sum(int(np.prod(a.shape)) for a in self.nbr))


def _width(deg: np.ndarray) -> np.ndarray:
    """Bucket width per node (0 for nodes without in-edges): the smallest of WIDTHS_UNROLLED >= the degree,
    or above SLAB the degree rounded up to a multiple of SLAB_STEP (padding < 1.5x, few distinct widths)."""
    ladder = np.asarray(WIDTHS_UNROLLED)
    w = np.zeros(deg.shape, np.int64)
    small = (deg > 0) & (deg <= SLAB)
    w[small] = ladder[np.searchsorted(ladder, deg[small])]
    big = deg > SLAB
    w[big] = -(-deg[big] // SLAB_STEP) * SLAB_STEP
    return w


def _build(senders: np.ndarray, receivers: np.ndarray, n: int) -> NeighbourLayout:
    e = senders.shape[0]
    order = np.argsort(receivers, kind="stable")
    r, s = receivers[order], senders[order]
    deg = np.bincount(r, minlength=n)
    start = np.cumsum(deg) - deg
    slot = np.arange(e) - start[r]
    width = _width(deg)
    row_of_node = np.full(n, 0, np.int32)
    nbrs, edges, offset = [], [], 0
    for k in np.unique(width[width > 0]):
        nodes = np.nonzero(width == k)[0]
        mult = SLOT_MULTIPLE // int(np.gcd(SLOT_MULTIPLE, int(k)))
        m = -(-nodes.size // mult) * mult
        row = np.zeros(n, np.int64)
        row[nodes] = np.arange(nodes.size)
        sel = width[r] == k
        nb = np.zeros((m, k), np.int32)
        ed = np.full((m, k), e, np.int32)
        nb[row[r[sel]], slot[sel]] = s[sel]
        ed[row[r[sel]], slot[sel]] = order[sel]
        nbrs.append(nb)
        edges.append(ed)
        row_of_node[nodes] = offset + np.arange(nodes.size)
        offset += m
    row_of_node[width == 0] = offset
    dev = lambda a: jnp.asarray(a)  # noqa: E731  (kept on the device: reused by every call)
    return NeighbourLayout(tuple(map(dev, nbrs)), tuple(map(dev, edges)), dev(row_of_node), int(n), int(e),
                           dev(senders), dev(receivers))


_CACHE: dict[tuple, NeighbourLayout] = {}
_CACHE_SIZE = 32


def neighbour_layout(senders, receivers, n_nodes: int) -> NeighbourLayout:
    """Bucketed in-neighbour tables of the directed edges (senders[e] -> receivers[e]); cached by content.

    Args:
      senders, receivers: concrete int [E] node ids in 0..n_nodes-1 (any order; parallel edges are kept).
    Returns:
      NeighbourLayout (device arrays; the same object for the same edges and n_nodes while cached).
    """
    snd = np.asarray(senders, np.int32)
    rcv = np.asarray(receivers, np.int32)
    if snd.shape != rcv.shape or snd.ndim != 1:
        raise ValueError(f"senders {snd.shape} and receivers {rcv.shape} must be equal 1-D arrays")
    digest = hashlib.blake2b(np.ascontiguousarray(snd), digest_size=16)
    digest.update(b"|")
    digest.update(np.ascontiguousarray(rcv))
    key = (int(n_nodes), digest.digest())
    lay = _CACHE.get(key)
    if lay is None:  # a cached layout was built from the same content, so was checked then
        if snd.size and (min(snd.min(), rcv.min()) < 0 or max(snd.max(), rcv.max()) >= n_nodes):
            raise ValueError(f"edge endpoints must lie in 0..{n_nodes - 1}")
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        lay = _CACHE[key] = _build(snd, rcv, int(n_nodes))
    return lay


def bucket_weights(edge_tables, values):
    """Per-bucket slot values from per-edge values: values [..., E] -> tuple of [..., m_b, K_b] (0 in empty slots).

    edge_tables: ``NeighbourLayout.edge`` (int32 [m_b, K_b] edge index per slot, E in empty slots)."""
    padded = jnp.concatenate([values, jnp.zeros(values.shape[:-1] + (1,), values.dtype)], axis=-1)
    return tuple(padded[..., t] for t in edge_tables)


def _bucket_sum(x, nb, w, unrolled: bool = True):
    """sum_k w[..., :, k, None] * x[..., nb[:, k], :]: [B, m, c] for x [B, N, c], nb [m, K], w [B or 1, m, K].

    ``unrolled``: one fused multiply-add per neighbour slot (fastest per call, but the program grows with the
    sum of the widths and takes seconds to compile on a wide graph); otherwise one gather of all K slots and one
    reduction over them (compiles in a fraction of that: for callers that smooth a few queries at a time).

    The block axis B is part of every fusion (one fused loop per bucket over all blocks, block-major), so each
    block's [N, c] scores stay in cache while its rows are summed. x is read as one [B * N, c] matrix with row
    ids nb + b * N, a gather of whole rows that XLA's CPU backend keeps row-major (indexing the 3-D x[:, nb, :]
    lets layout assignment store the blocks [N, B, c], so consecutive gathered rows lie far apart)."""
    n_blocks, n, c = x.shape
    x2 = x.reshape(n_blocks * n, c)
    offsets = (jnp.arange(n_blocks, dtype=jnp.int32) * n)[:, None]  # [B, 1]

    def slab_sum(nb_s, w_s):
        acc = x2[nb_s[None, :, 0] + offsets] * w_s[:, :, 0, None]
        for k in range(1, nb_s.shape[1]):
            acc = acc + x2[nb_s[None, :, k] + offsets] * w_s[:, :, k, None]
        return acc

    nb, w = jnp.asarray(nb), jnp.asarray(w)
    m, width = nb.shape
    if not unrolled:  # [B, m, K, c] gathered rows, reduced over the K slots
        w = jnp.broadcast_to(w, (n_blocks, m, width))
        return jnp.einsum("bmkc,bmk->bmc", x2[nb[None] + offsets[:, :, None]], w)
    if width <= UNROLL_MAX:
        return slab_sum(nb, w)
    n_slabs = width // SLAB_STEP
    nb_s = nb.reshape(m, n_slabs, SLAB_STEP).transpose(1, 0, 2)
    w_s = w.reshape(w.shape[0], m, n_slabs, SLAB_STEP).transpose(2, 0, 1, 3)

    def body(i, acc):
        return acc + slab_sum(nb_s[i], w_s[i])

    return jax.lax.fori_loop(0, n_slabs, body, jnp.zeros((x.shape[0], m, x.shape[2]), x.dtype))


def propagate_bucket_rows(x, nbr_tables, weight_tables, *, unrolled: bool = True):
    """y = Â x for blocks of columns, rows in bucket order: x [B, N, c] -> [B, M + 1, c] (row M is zero).

    weight_tables: per bucket [B, m_b, K_b] (each block its own weights: one graph per block) or
    [1, m_b, K_b] (one graph for all blocks). Row ``row_of_node[i]`` of the result is node i's; callers that
    transpose afterwards fold that row lookup into the transposing gather (one pass) instead of reordering here.
    ``unrolled``: see ``_bucket_sum`` (equal up to float rounding; the sweep's numbers come from the unrolled form).
    """
    parts = [_bucket_sum(x, nb, w, unrolled) for nb, w in zip(nbr_tables, weight_tables)]
    parts.append(jnp.zeros((x.shape[0], 1, x.shape[2]), x.dtype))
    return jnp.concatenate(parts, axis=1)


def propagate_rows(x, nbr_tables, weight_tables, row_of_node):
    """y = Â x for one block of columns: y_i = sum_k w_b[i, k] x[nbr_b[i, k]].

    Args:
      x: [N, c] (c queries on the minor axis, so every gather copies a contiguous row).
      nbr_tables / weight_tables: per-bucket int32 / float [m_b, K_b] (``NeighbourLayout.nbr``, ``bucket_weights``).
      row_of_node: int32 [N] (``NeighbourLayout.row_of_node``).
    Returns:
      [N, c].
    """
    return propagate_bucket_rows(x[None], nbr_tables, [w[None] for w in weight_tables])[0][row_of_node]


__all__ = ["NeighbourLayout", "neighbour_layout", "bucket_weights", "propagate_rows", "propagate_bucket_rows", "SLOT_MULTIPLE", "SLAB", "SLAB_STEP", "WIDTHS_UNROLLED", "UNROLL_MAX"]
