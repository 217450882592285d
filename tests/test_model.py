"""Dual heads: parameter counts, decomposed full-pool scoring, λ combination."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from riskrank_jax.model import heads as model


def _n_leaves(params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))


def _unit(key, shape):
    x = jax.random.normal(key, shape)
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("dim,expected", [(1024, 196_866), (384, 73_986)])
def test_count_params_matches_paper_and_real_init(dim, expected):
    assert model.count_params(dim) == expected
    shapes = jax.eval_shape(lambda k: model.init_params(k, dim), jax.random.key(0))
    assert _n_leaves(shapes) == expected


def test_count_params_interact_matches_init():
    params = model.init_params(jax.random.key(1), 16, 8, rel_features="interact")
    assert params["rel"]["W1"].shape == (4 * 16 + 1, 8)
    assert _n_leaves(params) == model.count_params(16, 8, "interact") == (65 * 8 + 8 + 8 + 1) + (16 * 8 + 8 + 8 + 1)


def test_init_is_pytorch_uniform_and_seeded():
    p1 = model.init_params(jax.random.key(3), 16)
    p2 = model.init_params(jax.random.key(3), 16)
    for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)):
        assert np.array_equal(a, b)
    w1 = np.asarray(p1["rel"]["W1"])
    assert np.abs(w1).max() <= 1 / np.sqrt(32) + 1e-7
    assert np.abs(np.asarray(p1["rel"]["W2"])).max() <= 1 / 8 + 1e-7


def test_relevance_by_hand():
    # d = 1, h = 1: W1 = [[2], [-1]], b1 = [0.5], W2 = [[3]], b2 = [-1].
    params = {
        "rel": {"W1": jnp.array([[2.0], [-1.0]]), "b1": jnp.array([0.5]), "W2": jnp.array([[3.0]]), "b2": jnp.array([-1.0])},
        "risk": {"V1": jnp.array([[1.0]]), "c1": jnp.array([-0.25]), "V2": jnp.array([[2.0]]), "c2": jnp.array([0.0])},
    }
    q, t = jnp.array([[1.0]]), jnp.array([[0.5]])
    # hidden = relu(2*1 - 0.5 + 0.5) = 2; out = sigmoid(3*2 - 1) = sigmoid(5)
    assert float(model.relevance(params, q, t)[0]) == pytest.approx(1 / (1 + np.exp(-5.0)), abs=1e-7)
    # risk: relu(0.5 - 0.25) = 0.25; sigmoid(0.5)
    assert float(model.risk(params, t)[0]) == pytest.approx(1 / (1 + np.exp(-0.5)), abs=1e-7)
    # relu clips: t = 3 -> 2 - 3 + 0.5 < 0 -> sigmoid(-1)
    assert float(model.relevance(params, q, jnp.array([[3.0]]))[0]) == pytest.approx(1 / (1 + np.exp(1.0)), abs=1e-7)


@pytest.mark.parametrize("rel_features", ["concat", "interact"])
@pytest.mark.parametrize("query_chunk", [None, 3])
def test_relevance_full_equals_concatenated_form(rel_features, query_chunk):
    kq, kt, kp = jax.random.split(jax.random.key(7), 3)
    q, t = _unit(kq, (10, 16)), _unit(kt, (23, 16))
    params = model.init_params(kp, 16, 64, rel_features)
    full = model.relevance_full(params, q, t, query_chunk=query_chunk)
    pairwise = model.relevance(params, q[:, None, :], t[None, :, :])
    assert full.shape == (10, 23)
    x = model.rel_inputs(q[:, None, :], t[None, :, :], rel_features)
    assert x.shape == (10, 23, model.rel_input_dim(16, rel_features))
    np.testing.assert_allclose(np.asarray(full), np.asarray(pairwise), atol=1e-6, rtol=0)
    assert float(jnp.std(full)) > 1e-3  # not a constant output


def test_interact_features_by_hand():
    q, t = jnp.array([1.0, 0.0]), jnp.array([0.6, 0.8])
    x = np.asarray(model.rel_inputs(q, t, "interact"))
    np.testing.assert_allclose(x, [1, 0, 0.6, 0.8, 0.6, 0.0, 0.4, 0.8, 0.6], atol=1e-7)


def test_relevance_full_vmaps_over_models():
    kq, kt = jax.random.split(jax.random.key(2))
    q, t = _unit(kq, (4, 16)), _unit(kt, (9, 16))
    stacked = jax.vmap(lambda k: model.init_params(k, 16, 8))(jax.random.split(jax.random.key(0), 3))
    out = jax.vmap(lambda p: model.relevance_full(p, q, t))(stacked)
    assert out.shape == (3, 4, 9)
    one = model.relevance_full(jax.tree.map(lambda x: x[1], stacked), q, t)
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(one), atol=1e-7)


def test_first_layer_value_and_gradient_equal_the_plain_product():
    """``model.first_layer`` (weight gradient from a materialised xᵀ) is x @ w with x @ w's gradients, for inputs
    with several leading axes (the training loss passes [2, B, 2d])."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, 5, 6)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(6, 3)), jnp.float32)
    weight = jnp.asarray(rng.normal(size=(2, 5, 3)), jnp.float32)
    np.testing.assert_array_equal(np.asarray(model.first_layer(x, w)), np.asarray(x @ w))
    got = jax.grad(lambda a, b: jnp.sum(weight * jnp.tanh(model.first_layer(a, b))), argnums=(0, 1))(x, w)
    want = jax.grad(lambda a, b: jnp.sum(weight * jnp.tanh(a @ b)), argnums=(0, 1))(x, w)
    for g, r in zip(got, want):
        assert g.shape == r.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-6)
