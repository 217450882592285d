"""Vectorised training: triplets, equivalence with single-model runs, best-epoch selection, sharding."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from riskrank_jax.model import heads as model
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import TrainConfig, lambda_run_from_plain, model_index, plain_config
from riskrank_jax.model.triplets import build_triplets

N_TOOLS, N_Q, DIM, N_FOLDS = 60, 40, 16, 2
CFG = TrainConfig(epochs=4, batch_size=16, hidden=16)


def make_data(seed: int = 0):
    """A tiny benchmark: unit embeddings, 1..3 gold tools per query, two overlapping folds."""
    rng = np.random.default_rng(seed)
    tools = rng.normal(size=(N_TOOLS, DIM)).astype(np.float32)
    tools /= np.linalg.norm(tools, axis=1, keepdims=True)
    gold = np.full((N_Q, 3), -1, np.int32)
    for i in range(N_Q):
        k = rng.integers(1, 4)
        gold[i, :k] = rng.choice(N_TOOLS, k, replace=False)
    # queries near the mean of their gold tools, so relevance is learnable
    queries = np.stack([tools[g[g >= 0]].mean(0) for g in gold]) + 0.3 * rng.normal(size=(N_Q, DIM))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    risk = rng.integers(1, 6, N_TOOLS).astype(np.int32)
    fold_mask = np.zeros((N_FOLDS, N_Q), bool)
    fold_mask[0, :28] = True
    fold_mask[1, 12:] = True
    return tools, queries, gold, risk, fold_mask


DATA = make_data()


@pytest.fixture(scope="module")
def full_run():
    return train_models(*DATA, CFG, TrainRun((1, 2), progress=False))


def _allclose_tree(a, b, atol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


def test_config_validation():
    with pytest.raises(ValueError):
        TrainConfig(rel_features="bilinear")
    with pytest.raises(ValueError):
        TrainConfig(negative_sampling="random")
    assert TrainConfig(lambdas=[0, 0.1]).lambdas == (0.0, 0.1)
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()


def test_model_order_is_seed_major():
    assert model_index((1, 2), (0, 1), CFG) == [
        {"seed": 1, "fold": 0}, {"seed": 1, "fold": 1}, {"seed": 2, "fold": 0}, {"seed": 2, "fold": 1}]
    lam_cfg = TrainConfig(lambda_aware=True, lambdas=(0.0, 0.5))
    assert [(d["seed"], d["fold"], d["lam"]) for d in model_index((7,), (0, 1), lam_cfg)] == [
        (7, 0, 0.0), (7, 0, 0.5), (7, 1, 0.0), (7, 1, 0.5)]


def _gold_sets(gold):
    return [set(int(g) for g in row if g >= 0) for row in gold]


def _best_non_gold_sets(sims, gsets, n):
    return [set([int(t) for t in np.argsort(-row, kind="stable") if t not in g][:n]) for row, g in zip(sims, gsets)]


@pytest.mark.parametrize("negatives", ["uniform", "hard"])
def test_triplets_follow_spec(negatives):
    tools, queries, gold, _, fold_mask = DATA
    cfg = TrainConfig(negative_sampling=negatives, hard_pool=10)
    tr = build_triplets(gold, fold_mask, 42, 1, N_TOOLS, cfg, query_emb=queries, tool_emb=tools)
    gsets = _gold_sets(gold)
    q = np.concatenate([tr["q"], tr["hold_q"]])
    pos = np.concatenate([tr["pos"], tr["hold_pos"]])
    neg = np.concatenate([tr["neg"], tr["hold_neg"]])
    n_expected = 5 * sum(len(gsets[i]) for i in np.flatnonzero(fold_mask[1]))
    assert len(q) == n_expected
    assert len(tr["hold_q"]) == int(np.floor(0.1 * n_expected + 0.5))
    assert fold_mask[1][q].all()
    assert all(p in gsets[i] for i, p in zip(q, pos))
    assert not any(n in gsets[i] for i, n in zip(q, neg))  # negatives never hit gold
    # exactly 5 negatives per (query, positive)
    pairs, counts = np.unique(np.stack([q, pos], 1), axis=0, return_counts=True)
    assert (counts == 5).all() and len(pairs) == n_expected // 5
    if negatives == "hard":  # the 10 best non-gold tools by the frozen cosine
        top = _best_non_gold_sets(queries @ tools.T, gsets, 10)
        assert all(n in top[i] for i, n in zip(q, neg))
    else:
        assert len(np.unique(neg)) > 0.8 * N_TOOLS  # spread over the pool
    again = build_triplets(gold, fold_mask, 42, 1, N_TOOLS, cfg, query_emb=queries, tool_emb=tools)
    other = build_triplets(gold, fold_mask, 43, 1, N_TOOLS, cfg, query_emb=queries, tool_emb=tools)
    assert all(np.array_equal(tr[k], again[k]) for k in tr)
    assert not np.array_equal(tr["neg"], other["neg"])


def test_uniform_negatives_are_uniform():
    # one query, gold {0, 3}, pool of 6: each of the 4 other tools equally likely
    gold = np.array([[3, 0]], np.int32)
    fm = np.ones((1, 1), bool)
    cfg = TrainConfig(negatives=2000, heldout_fraction=0.0)
    tr = build_triplets(gold, fm, 5, 0, 6, cfg)
    counts = np.bincount(tr["neg"], minlength=6)
    assert counts[0] == counts[3] == 0
    assert counts.sum() == 4000
    assert np.all(np.abs(counts[[1, 2, 4, 5]] / 4000 - 0.25) < 0.03)


def test_loss_decreases_and_shapes(full_run):
    res = full_run
    assert res.n_models == 4 and res.train_loss.shape == res.heldout_loss.shape == (4, 4)
    assert res.params["rel"]["W1"].shape == (4, 2 * DIM, 16)
    assert np.all(np.isfinite(res.train_loss)) and np.all(np.isfinite(res.heldout_loss))
    assert np.all(res.train_loss[:, -1] < res.train_loss[:, 0] - 1e-3)
    assert np.all(np.diff(res.train_loss, axis=1) < 0)
    # models differ (own init / data / order)
    assert not np.allclose(res.params["rel"]["W1"][0], res.params["rel"]["W1"][2])
    assert not np.allclose(res.train_loss[0], res.train_loss[1])


def test_vmapped_model_equals_single_run(full_run):
    single = train_models(*DATA, CFG, TrainRun((2,), folds=(1,), progress=False))
    m = full_run.find(2, 1)
    assert m == 3 and single.model_index == [{"seed": 2, "fold": 1}]
    _allclose_tree(jax.tree.map(lambda x: x[m], full_run.params), single.model_params(0), atol=1e-5)
    np.testing.assert_allclose(full_run.train_loss[m], single.train_loss[0], atol=1e-5)
    np.testing.assert_allclose(full_run.heldout_loss[m], single.heldout_loss[0], atol=1e-5)
    assert full_run.best_epoch[m] == single.best_epoch[0]


def test_best_epoch_is_argmin_heldout_and_keeps_those_params():
    cfg = TrainConfig(epochs=6, batch_size=16, hidden=16, lr=0.05)  # large step: held-out loss turns up
    res = train_models(*DATA, cfg, TrainRun((3,), progress=False))
    np.testing.assert_array_equal(res.best_epoch, np.argmin(res.heldout_loss, axis=1))
    early = [m for m in range(res.n_models) if res.best_epoch[m] < cfg.epochs - 1]
    assert early, f"no model peaked early: {res.heldout_loss}"
    m = early[0]
    b = int(res.best_epoch[m])
    # the same run stopped right after epoch b has that epoch's params as model m's best
    short = train_models(*DATA, TrainConfig(epochs=b + 1, batch_size=16, hidden=16, lr=0.05),
                         TrainRun((3,), progress=False))
    assert short.best_epoch[m] == b
    np.testing.assert_array_equal(short.heldout_loss[m], res.heldout_loss[m, : b + 1])
    _allclose_tree(res.model_params(m), short.model_params(m), atol=0)


def test_lambda_aware_axis():
    cfg = TrainConfig(epochs=2, batch_size=16, hidden=16, lambda_aware=True, lambdas=(0.0, 2.0))
    res = train_models(*DATA, cfg, TrainRun((1,), progress=False))
    assert res.n_models == 4
    assert [ix["lam"] for ix in res.model_index] == [0.0, 2.0, 0.0, 2.0]
    assert res.params["risk"]["V1"].shape == (4, DIM, 16)
    plain = train_models(*DATA, TrainConfig(epochs=2, batch_size=16, hidden=16), TrainRun((1,), progress=False))
    # λ = 0 trains exactly the paper's loss; λ = 2 changes it
    _allclose_tree(res.model_params(0), plain.model_params(0), atol=1e-6)
    _allclose_tree(res.model_params(2), plain.model_params(1), atol=1e-6)
    assert not np.allclose(res.params["risk"]["V1"][1], res.params["risk"]["V1"][0], atol=1e-4)


def test_lambda_run_from_plain_equals_training_every_lambda():
    """The sweep trains a λ-aware run's λ ≠ 0 models only and takes λ = 0 from the plain run: the run that trains
    every λ (model order, params, curves, best epochs), the λ ≠ 0 models bit for bit, the λ = 0 ones up to float
    rounding (same loss and random draws; XLA may sum the risk head's gradient in another order)."""
    full_cfg = TrainConfig(epochs=3, batch_size=16, hidden=16, lambda_aware=True, lambdas=(0.0, 0.5, 2.0))
    full = train_models(*DATA, full_cfg, TrainRun((1, 2), progress=False))
    plain = train_models(*DATA, plain_config(full_cfg), TrainRun((1, 2), progress=False))
    rest = train_models(*DATA, dataclasses.replace(full_cfg, lambdas=(0.5, 2.0)), TrainRun((1, 2), progress=False))
    merged = lambda_run_from_plain(plain, rest, full_cfg)
    assert merged.model_index == full.model_index and merged.config == full_cfg
    zero = np.array([ix["lam"] == 0.0 for ix in full.model_index])
    for a, b in zip(jax.tree.leaves(merged.params), jax.tree.leaves(full.params)):
        np.testing.assert_array_equal(np.asarray(a)[~zero], np.asarray(b)[~zero])
        np.testing.assert_allclose(np.asarray(a)[zero], np.asarray(b)[zero], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(merged.best_epoch, full.best_epoch)
    for name in ("heldout_loss", "train_loss"):
        np.testing.assert_array_equal(getattr(merged, name)[~zero], getattr(full, name)[~zero])
        np.testing.assert_allclose(getattr(merged, name)[zero], getattr(full, name)[zero], rtol=1e-5)
    only_zero = dataclasses.replace(full_cfg, lambdas=(0.0,))
    assert lambda_run_from_plain(plain, None, only_zero).n_models == 2 * N_FOLDS
    with pytest.raises(ValueError, match="other hyper-parameters"):
        lambda_run_from_plain(plain, rest, dataclasses.replace(full_cfg, hidden=8))
    with pytest.raises(ValueError, match="need their run"):
        lambda_run_from_plain(plain, None, full_cfg)


def test_interact_head_with_hard_negatives_trains():
    cfg = TrainConfig(epochs=3, batch_size=16, hidden=16, rel_features="interact", negative_sampling="hard", hard_pool=10)
    res = train_models(*DATA, cfg, TrainRun((1,), progress=True))  # also exercises the tqdm bar
    assert res.params["rel"]["W1"].shape == (2, 4 * DIM + 1, 16)
    assert np.all(res.train_loss[:, -1] < res.train_loss[:, 0])
    tools, queries, gold, _, _ = DATA
    rel = model.relevance_full(res.model_params(0), queries, tools)
    assert rel.shape == (N_Q, N_TOOLS) and np.all(np.isfinite(np.asarray(rel)))


_SHARDED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {tests!r})
    from test_train import DATA, CFG
    from riskrank_jax.model.train import TrainRun, train_models
    assert len(jax.devices()) == 4, jax.devices()
    res = train_models(*DATA, CFG, TrainRun((1, 2, 3), folds=(1,), progress=False))
    out = {{"W1": np.asarray(res.params["rel"]["W1"]).tolist(), "V2": np.asarray(res.params["risk"]["V2"]).tolist(),
           "held": res.heldout_loss.tolist()}}
    print("RESULT" + json.dumps(out))
    """
)


def test_sharded_over_four_host_devices_matches_one_device():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = _SHARDED_SCRIPT.format(root=root, tests=os.path.join(root, "tests"))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    sharded = json.loads(line[len("RESULT"):])
    one = train_models(*DATA, CFG, TrainRun((1, 2, 3), folds=(1,), progress=False))  # 3 models: padded to 4 there
    np.testing.assert_allclose(np.array(sharded["W1"]), np.asarray(one.params["rel"]["W1"]), atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.array(sharded["V2"]), np.asarray(one.params["risk"]["V2"]), atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.array(sharded["held"]), one.heldout_loss, atol=1e-6, rtol=0)


def test_mixed_negatives_two_hard_three_uniform():
    tools, queries, gold, _, fold_mask = DATA
    cfg = TrainConfig(negative_sampling="mixed", hard_pool=10, hard_per_positive=2)
    tr = build_triplets(gold, fold_mask, 42, 1, N_TOOLS, cfg, query_emb=queries, tool_emb=tools)
    gsets = _gold_sets(gold)
    q = np.concatenate([tr["q"], tr["hold_q"]])
    pos = np.concatenate([tr["pos"], tr["hold_pos"]])
    neg = np.concatenate([tr["neg"], tr["hold_neg"]])
    assert not any(n in gsets[i] for i, n in zip(q, neg))
    top = _best_non_gold_sets(queries @ tools.T, gsets, 10)
    in_top = np.array([n in top[i] for i, n in zip(q, neg)])
    # every (query, positive) has at least its 2 hard negatives among the encoder's 10 best non-gold ...
    keys = q * N_TOOLS + pos
    for key in np.unique(keys):
        assert in_top[keys == key].sum() >= 2
    # ... and the 3 uniform ones spread over the pool: far fewer than all negatives are hard
    assert in_top.mean() < 0.8
    with pytest.raises(ValueError, match="hard_per_positive"):
        TrainConfig(negative_sampling="mixed", hard_per_positive=6)
