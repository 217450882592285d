"""The shared definitions: penalty (scalar and λ grid), ranking order, thresholds."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from riskrank_jax.scoring import (rank_order_host, PERM_THRESHOLD, RISK_THRESHOLD, SEVERE_THRESHOLD, is_high_permission,
                                  is_risky, is_severe, level_to_score, penalise, rank_order)


def test_penalty_scalar_and_grid():
    rel = jnp.array([[0.9, 0.5, 0.2], [0.1, 0.6, 0.7]])
    rk = jnp.array([0.0, 0.5, 1.0])
    s = penalise(rel, rk, 0.1)
    np.testing.assert_allclose(np.asarray(s), [[0.9, 0.45, 0.1], [0.1, 0.55, 0.6]], atol=1e-7)
    grid = penalise(rel, rk, (0.0, 0.05, 0.1, 0.2))
    assert grid.shape == (4, 2, 3)
    np.testing.assert_array_equal(np.asarray(grid[0]), np.asarray(rel))
    np.testing.assert_allclose(np.asarray(grid[3, 1]), [0.1, 0.5, 0.5], atol=1e-7)
    for i, lam in enumerate((0.0, 0.05, 0.1, 0.2)):  # each grid slice is exactly the scalar penalty
        np.testing.assert_array_equal(np.asarray(grid[i]), np.asarray(penalise(rel, rk, lam)))
    with pytest.raises(ValueError):
        penalise(rel, rk, jnp.zeros((2, 2)))


def test_penalty_grid_over_seeds_with_per_seed_risk():
    rel = jnp.arange(2 * 3 * 4, dtype=jnp.float32).reshape(2, 3, 4) / 24  # [S, Q, N]
    risk = jnp.array([[[0.0, 1.0, 0.5, 0.25]], [[1.0, 0.0, 0.0, 0.5]]])  # [S, 1, N]
    grid = penalise(rel, risk, jnp.array([0.0, 0.2]))
    assert grid.shape == (2, 2, 3, 4)
    np.testing.assert_allclose(np.asarray(grid[1, 1, 2]), np.asarray(rel[1, 2]) - 0.2 * np.array([1.0, 0, 0, 0.5]),
                               atol=1e-7)


def test_rank_order_descending_ties_to_lower_index():
    s = jnp.array([[0.2, 0.9, 0.2, 0.9, -1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(np.asarray(rank_order(s)), [[1, 3, 0, 2, 4], [0, 1, 2, 3, 4]])
    assert rank_order(s).dtype == jnp.int32


def test_thresholds():
    levels = np.array([1, 2, 3, 4, 5])
    assert (RISK_THRESHOLD, SEVERE_THRESHOLD, PERM_THRESHOLD) == (3, 4, 2)
    np.testing.assert_array_equal(is_risky(levels), [False, False, True, True, True])
    np.testing.assert_array_equal(is_severe(levels), [False, False, False, True, True])
    np.testing.assert_array_equal(np.asarray(is_risky(jnp.asarray(levels))), [False, False, True, True, True])
    np.testing.assert_array_equal(is_high_permission([0, 1, 2, 3]), [False, False, True, True])
    np.testing.assert_allclose(level_to_score(levels), [0.0, 0.25, 0.5, 0.75, 1.0])


def tricky_scores(rng, q=24, n=300):
    """Scores with every hard case of the order: ±0.0, ties, ±inf, NaN of both signs, a whole-NaN row."""
    x = rng.normal(size=(q, n)).astype(np.float32)
    x[:, :50] = 0.0
    x[:, 50:80] = -0.0
    x[:, 80:90] = np.inf
    x[:, 90:95] = -np.inf
    x[:, 95:140] = np.round(x[:, 95:140])  # many exact ties
    x[3, 5], x[4, 7] = np.nan, -np.nan
    x[5] = np.nan
    return x


def test_rank_order_host_equals_rank_order():
    rng = np.random.default_rng(0)
    x = tricky_scores(rng)
    np.testing.assert_array_equal(rank_order_host(x), np.asarray(rank_order(x)))
    np.testing.assert_array_equal(rank_order_host(x, threads=1), np.asarray(rank_order(x)))
    # -0.0 and 0.0 are equal (ties to the lower index), NaN ranks last, +inf first
    np.testing.assert_array_equal(rank_order_host(np.array([0.0, -0.0, np.nan, 1.0, -np.inf, np.inf], np.float32)),
                                  [5, 3, 0, 1, 4, 2])
    x3 = rng.normal(size=(2, 3, 17)).astype(np.float32)
    out = rank_order_host(x3, threads=3)
    assert out.shape == (2, 3, 17) and out.dtype == np.int32
    np.testing.assert_array_equal(out, np.asarray(rank_order(x3)))
