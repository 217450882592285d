"""Degree-bucketed neighbour lists: layout invariants and y = Â x against a dense product."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from riskrank_jax.graph.neighbours import (SLAB, SLAB_STEP, SLOT_MULTIPLE, UNROLL_MAX, WIDTHS_UNROLLED, bucket_weights,
                                           neighbour_layout, propagate_bucket_rows, propagate_rows)


def edges_of(a):
    r, s = np.nonzero(a)
    return s.astype(np.int32), r.astype(np.int32), a[r, s]


def test_layout_buckets_and_product():
    rng = np.random.default_rng(0)
    n = 60
    a = (rng.random((n, n)) < 0.08) * rng.random((n, n))
    a[:, 3] = 0.0
    a[3, :] = 0.0  # node 3 has no in-edges
    a[7, 10:60] = rng.random(50) + 0.1  # node 7: over 32 in-edges -> width 64, one unrolled fusion
    np.fill_diagonal(a, 0.0)
    a = a.astype(np.float32)
    snd, rcv, w = edges_of(a)
    lay = neighbour_layout(snd, rcv, n)
    deg = np.bincount(rcv, minlength=n)
    widths = [t.shape[1] for t in lay.nbr]
    assert widths == sorted(widths) and widths[-1] == 64
    assert all(k in WIDTHS_UNROLLED or (k > SLAB and k % SLAB_STEP == 0) for k in widths)
    # each node sits in the narrowest bucket that holds its in-degree
    width_of = np.zeros(n, np.int64)
    starts = np.cumsum([0] + [t.shape[0] for t in lay.nbr])
    for b, t in enumerate(lay.nbr):
        rows = np.asarray(lay.row_of_node)
        width_of[(rows >= starts[b]) & (rows < starts[b + 1])] = t.shape[1]
    ladder = np.array(list(WIDTHS_UNROLLED) + list(range(SLAB + SLAB_STEP, 257, SLAB_STEP)))
    expect = np.where(deg > 0, ladder[np.searchsorted(ladder, deg)], 0)
    assert np.array_equal(width_of, expect)
    assert all(t.size % SLOT_MULTIPLE == 0 for t in lay.nbr)
    assert lay.padded_slots >= snd.size and int(lay.row_of_node[3]) == sum(t.shape[0] for t in lay.nbr)
    # every edge appears exactly once in the slot tables
    slots = np.concatenate([t.ravel() for t in lay.edge])
    assert np.array_equal(np.sort(slots[slots < snd.size]), np.arange(snd.size))
    x = rng.normal(size=(n, 12)).astype(np.float32)
    wt = bucket_weights(lay.edge, jnp.asarray(w))
    y = np.asarray(propagate_rows(jnp.asarray(x), lay.nbr, wt, lay.row_of_node))
    np.testing.assert_allclose(y, a @ x, atol=1e-5)
    assert np.all(y[3] == 0.0) and 48 < deg[7] <= 64
    y_b = np.asarray(propagate_bucket_rows(jnp.asarray(x)[None], lay.nbr, [t[None] for t in wt]))[0]
    np.testing.assert_array_equal(y_b[np.asarray(lay.row_of_node)], y)
    # blocks with their own weights (one graph per block) in one call: block b equals its graph alone
    w2 = w * rng.uniform(0.0, 2.0, size=w.shape).astype(np.float32)
    wt2 = bucket_weights(lay.edge, jnp.asarray(w2))
    x2 = rng.normal(size=(n, 12)).astype(np.float32)
    both = np.asarray(propagate_bucket_rows(jnp.stack([jnp.asarray(x), jnp.asarray(x2)]), lay.nbr,
                                            [jnp.stack([a, b]) for a, b in zip(wt, wt2)]))
    np.testing.assert_array_equal(both[0][np.asarray(lay.row_of_node)], y)
    a2 = np.zeros((n, n), np.float32)
    np.add.at(a2, (rcv, snd), w2)
    np.testing.assert_allclose(both[1][np.asarray(lay.row_of_node)], a2 @ x2, atol=1e-5)
    assert neighbour_layout(snd.copy(), rcv.copy(), n) is lay  # cached by content
    # the compile-light form (one gather and one reduction per bucket, what a Ranker uses) gives the same sums,
    # one graph for all blocks and one graph per block alike
    light = np.asarray(propagate_bucket_rows(jnp.asarray(x)[None], lay.nbr, [t[None] for t in wt], unrolled=False))
    np.testing.assert_allclose(light[0][np.asarray(lay.row_of_node)], a @ x, atol=1e-5)
    both_light = np.asarray(propagate_bucket_rows(jnp.stack([jnp.asarray(x), jnp.asarray(x2)]), lay.nbr,
                                                  [jnp.stack([a, b]) for a, b in zip(wt, wt2)], unrolled=False))
    np.testing.assert_allclose(both_light, both, atol=1e-5)


def test_buckets_wider_than_the_unroll_limit_loop_over_slabs():
    rng = np.random.default_rng(3)
    n = 200
    a = (rng.random((n, n)) < 0.02) * rng.random((n, n))
    a[5, 20:180] = rng.random(160) + 0.1  # node 5: 160+ in-edges -> width above UNROLL_MAX, summed in a loop
    np.fill_diagonal(a, 0.0)
    a = a.astype(np.float32)
    snd, rcv, w = edges_of(a)
    lay = neighbour_layout(snd, rcv, n)
    assert max(t.shape[1] for t in lay.nbr) > UNROLL_MAX
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.asarray(propagate_rows(jnp.asarray(x), lay.nbr, bucket_weights(lay.edge, jnp.asarray(w)), lay.row_of_node))
    np.testing.assert_allclose(y, a @ x, atol=1e-5)
    # three blocks, each with its own weights, through the slab loop: block b reads its own rows (offset b * N)
    scale = rng.uniform(0.5, 2.0, size=(3, 1)).astype(np.float32)
    xs = rng.normal(size=(3, n, 8)).astype(np.float32)
    ys = np.asarray(propagate_bucket_rows(jnp.asarray(xs), lay.nbr, bucket_weights(lay.edge, jnp.asarray(w * scale))))
    for b in range(3):
        np.testing.assert_allclose(ys[b][np.asarray(lay.row_of_node)], scale[b, 0] * (a @ xs[b]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(lay.senders), snd)
    np.testing.assert_array_equal(np.asarray(lay.receivers), rcv)


def test_layout_rejects_bad_edges():
    with pytest.raises(ValueError, match="0..4"):
        neighbour_layout(np.array([0, 5]), np.array([1, 2]), 5)
    with pytest.raises(ValueError, match="1-D"):
        neighbour_layout(np.array([0, 1]), np.array([1]), 5)
