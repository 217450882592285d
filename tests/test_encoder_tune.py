"""Fine-tuning the encoder's top layers (riskrank_jax/model/encoder_tune.py) on a tiny random BERT."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.experiments.run import run_benchmark
from riskrank_jax.model import encoder_tune, groups, tune_step
from riskrank_jax.model.encoder_tune import (TextStates, TunedEncoder, TuneConfig, TuneJob, batch_schedule,
                                             embed_states, save_tuned_encoder, tune_encoder, tune_encoders)
from test_sweep import tiny_benchmark, tiny_config

# one configuration for every training test: the train step compiles once for the whole file
CFG = TuneConfig(layers=1, epochs=12, batch_size=16, lr=3e-3, negatives=1, hard_pool=8, warmup=0.0, checkpoint_every=4)
TRAIN, HELD = np.arange(48), np.arange(48, 64)
WORDS = ("calendar invoice weather repository password email printer backup flight recipe music ticket "
         "contract budget sensor camera").split()


def _task():
    """16 tools, each named by one word; 64 queries, each asking for one tool by its word among others."""
    rng = np.random.default_rng(0)
    tools = [f"{w} tool: manage the {w} records" for w in WORDS]
    gold = rng.integers(0, len(WORDS), 64)
    fill = ["please", "could you", "now", "quickly", "for me", "today"]
    queries = [f"{rng.choice(fill)} open the {WORDS[g]} {rng.choice(fill)}" for g in gold]
    return tools, queries, gold[:, None].astype(np.int32)


@pytest.fixture(scope="module")
def setup(tiny_bert_dir):
    enc = load_encoder(tiny_bert_dir)
    tools, queries, gold = _task()
    states = TextStates.build(enc, tools + queries, frozen_layers=1)
    rows = {"tools": np.arange(len(tools)), "queries": len(tools) + np.arange(len(queries))}
    hard = np.array([[t for t in range(len(tools)) if t != g][:8] for g in gold[:, 0]])
    return enc, tools, queries, gold, states, rows, hard


def _ndcg_at_1(q, t, gold):
    return float(np.mean(np.argmax(q @ t.T, axis=1) == gold[:, 0]))


def test_states_then_untrained_top_equal_the_encoder(setup):
    enc, tools, queries, gold, states, rows, hard = setup
    got = embed_states(TunedEncoder.untrained(enc, 1), enc, states, np.arange(states.size))
    want = enc.encode(tools + queries)
    assert np.abs(got - want).max() < 2e-5
    assert states.states.shape == (int(states.lengths().sum()) + 1, enc.dim) and not states.states[-1].any()


def test_tuning_learns_the_task_and_saves_a_loadable_encoder(setup, tmp_path):
    enc, tools, queries, gold, states, rows, hard = setup
    train, held = TRAIN, HELD

    def held_accuracy(t):
        v = embed_states(t, enc, states, np.concatenate([rows["tools"], rows["queries"][held]]))
        return _ndcg_at_1(v[len(tools):], v[:len(tools)], gold[held])

    tuned = tune_encoder(enc, states, rows["queries"], rows["tools"], gold, train, hard, 1, CFG, progress=False,
                         evaluate=held_accuracy)
    assert len(tuned.losses) == 12 * 3 and tuned.epoch_scores.shape == (12,)
    # the best epoch's layers are returned (ties: the earlier epoch)
    assert held_accuracy(tuned) == tuned.epoch_scores.max()
    assert np.argmax(tuned.epoch_scores) == np.flatnonzero(tuned.epoch_scores == tuned.epoch_scores.max())[0]
    assert tuned.losses[-6:].mean() < 0.5 * tuned.losses[:3].mean()
    vec = embed_states(tuned, enc, states, np.arange(states.size))
    base = enc.encode(tools + queries)
    before = _ndcg_at_1(base[rows["queries"]][held], base[rows["tools"]], gold[held])
    after = _ndcg_at_1(vec[rows["queries"]][held], vec[rows["tools"]], gold[held])
    assert after >= before + 0.25, (before, after)
    out = save_tuned_encoder(enc, tuned, tmp_path / "tuned")
    reloaded = load_encoder(out)
    assert reloaded.model_id != enc.model_id and reloaded.dim == enc.dim
    assert np.abs(reloaded.encode(tools + queries) - vec).max() < 2e-5
    meta = json.loads((out / "riskrank_tune.json").read_text())
    assert meta["base_encoder"] == enc.model_id and meta["frozen_layers"] == 1
    assert not (tmp_path / "tuned.tmp").exists()


def test_a_time_boxed_run_resumes_to_the_uninterrupted_result(setup, tmp_path):
    enc, tools, queries, gold, states, rows, hard = setup
    args = (enc, states, rows["queries"], rows["tools"], gold, TRAIN, hard, 7, CFG)
    whole = tune_encoder(*args, progress=False)
    part = tune_encoder(*args, checkpoint_dir=tmp_path / "run", progress=False, max_steps=10)
    assert part.losses[10:].sum() == 0 and part.losses[:8].tolist() == whole.losses[:8].tolist()
    resumed = tune_encoder(*args, checkpoint_dir=tmp_path / "run", progress=False)
    again = tune_encoder(*args, checkpoint_dir=tmp_path / "run", progress=False)  # finished: reused
    for a, b, c in zip(whole.top, resumed.top, again.top):
        for name in a:
            for x, y, z in zip(a[name], b[name], c[name]):
                np.testing.assert_array_equal(x, y)
                np.testing.assert_array_equal(y, z)
    assert resumed.tuned_id == whole.tuned_id == again.tuned_id


# several models in one run: 48, 32 and 40 training queries (3, 2 and 2 steps an epoch: 12, 8 and 8 steps), so
# the second and third sit out the last 4 steps (padded, masked)
MANY = TuneConfig(layers=1, epochs=4, batch_size=16, lr=3e-3, negatives=1, hard_pool=8, warmup=0.25, checkpoint_every=4)
SIZES = (48, 32, 40)


class Killed(Exception):
    """What a killed run's evaluation raises in these tests."""


def _jobs(setup, kill_at=None):
    """Three jobs (seeds 1, 2, 3); the third keeps its best epoch by held-out accuracy. kill_at: its evaluation
    of that epoch raises (a run killed mid-way)."""
    enc, tools, queries, gold, states, rows, hard = setup
    calls = []

    def held_accuracy(t):
        calls.append(1)
        if kill_at is not None and len(calls) == kill_at:
            raise Killed(f"killed at evaluation {kill_at}")
        v = embed_states(t, enc, states, np.concatenate([rows["tools"], rows["queries"][HELD]]))
        return _ndcg_at_1(v[len(tools):], v[:len(tools)], gold[HELD])

    return [TuneJob(TRAIN[:n], hard, s, held_accuracy if s == 3 else None) for s, n in zip((1, 2, 3), SIZES)]


def _max_diff(a: TunedEncoder, b: TunedEncoder) -> float:
    return max(float(np.abs(np.asarray(x) - np.asarray(y)).max())
               for la, lb in zip(a.top, b.top) for name in la for x, y in zip(la[name], lb[name]))


@pytest.fixture(scope="module")
def together(setup):
    """The three models tuned in one run, and each tuned alone (``tune_encoder``: the same code, one model)."""
    enc, tools, queries, gold, states, rows, hard = setup
    args = (enc, states, rows["queries"], rows["tools"], gold)
    many = tune_encoders(*args, _jobs(setup), MANY, progress=False)
    alone = [tune_encoder(*args, j.train_idx, j.hard, j.seed, MANY, progress=False, evaluate=j.evaluate)
             for j in _jobs(setup)]
    return many, alone


def test_models_tuned_together_equal_each_tuned_alone(setup, together):
    """Each model takes its own steps: every step's loss is the one it has alone, up to float rounding. The run's
    packed row count (its fullest step's) is the one thing models share, and a model whose alone run packs into
    fewer rows ends within rounding amplified by AdamW (a near-zero gradient's update is about lr, whatever its
    rounding): less than one step's lr apart, where two seeds end ten of them apart."""
    many, alone = together
    assert [len(t.losses) for t in many] == [12, 8, 8] and [t.seed for t in many] == [1, 2, 3]
    seeds_apart = _max_diff(many[0], many[1])
    for m, a in zip(many, alone):
        assert _max_diff(m, a) < MANY.lr < 0.2 * seeds_apart, (_max_diff(m, a), seeds_apart)
        np.testing.assert_allclose(m.losses, a.losses, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.isnan(m.epoch_scores), np.isnan(a.epoch_scores))
    np.testing.assert_allclose(many[2].epoch_scores, alone[2].epoch_scores, atol=1e-6)
    assert np.isnan(many[0].epoch_scores).all() and not np.isnan(many[2].epoch_scores).any()
    # the models trained: none is the untrained encoder, and different seeds end apart
    untrained = TunedEncoder.untrained(setup[0], 1)
    assert min(_max_diff(m, untrained) for m in many) > 1e-3 and _max_diff(many[0], many[1]) > 1e-3


def test_groups_of_models_do_not_change_the_models(setup, together):
    """A memory budget too small for two models runs the three in groups of one (three calls per step); the
    models are those of the one-group run within float rounding."""
    enc, tools, queries, gold, states, rows, hard = setup
    state, step = encoder_tune.tune_bytes(TunedEncoder.untrained(enc, 1).top, 16, 32, 16, 16, enc.shape.num_heads)
    assert [n for _, n in encoder_tune._groups(3, state, step, state + step)] == [1, 1, 1]
    assert [n for _, n in encoder_tune._groups(3, state, step, 1 << 40)] == [3]
    alone = tune_encoders(enc, states, rows["queries"], rows["tools"], gold, _jobs(setup), MANY, progress=False,
                          memory_budget=state + step)
    for a, m in zip(alone, together[0]):
        assert _max_diff(a, m) < 1e-5 and a.losses.tolist() == pytest.approx(m.losses.tolist(), rel=1e-5)
        np.testing.assert_array_equal(a.epoch_scores, m.epoch_scores)


def test_vmapped_models_equal_each_tuned_alone(setup, together, monkeypatch):
    """On one CPU device the model axis runs as lax.map; on an accelerator as jax.vmap (batched matmuls): forced
    here, the same encoders within float rounding. Compared by their vectors: the attention's key bias gets no
    gradient but rounding noise, which Adam scales to steps of lr, so that bias alone differs by ~lr."""
    enc, tools, queries, gold, states, rows, hard = setup
    monkeypatch.setattr(groups, "map_models", lambda fn, in_axes: jax.vmap(fn, in_axes=tuple(in_axes)))
    tune_step.compiled_step.cache_clear()
    try:
        vmapped = tune_encoders(enc, states, rows["queries"], rows["tools"], gold, _jobs(setup), MANY, progress=False)
    finally:
        tune_step.compiled_step.cache_clear()  # the other tests' programs map as the backend says
    every = np.arange(states.size)
    for v, a in zip(vmapped, together[1]):
        got, want = embed_states(v, enc, states, every), embed_states(a, enc, states, every)
        assert np.abs(got - want).max() < 1e-5 and np.abs(want - enc.encode(tools + queries)).max() > 1e-2
        np.testing.assert_allclose(v.losses, a.losses, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(v.epoch_scores, a.epoch_scores)


def test_a_padded_model_is_unchanged_by_the_padded_steps(setup, together):
    """Models 2 and 3 end their schedules at step 8 of 12: stopped there, model 2 holds the very layers it ends
    the whole run with (model 3 keeps its best epoch, so only the layers of a stopped run are compared)."""
    enc, tools, queries, gold, states, rows, hard = setup
    at8 = tune_encoders(enc, states, rows["queries"], rows["tools"], gold, _jobs(setup), MANY, progress=False,
                        max_steps=8)
    many = together[0]
    assert _max_diff(at8[1], many[1]) == 0.0 and at8[1].losses.tolist() == many[1].losses.tolist()
    assert _max_diff(at8[0], many[0]) > 1e-4  # model 1 still trains in steps 9-12


def test_a_killed_run_of_many_models_resumes_to_the_uninterrupted_result(setup, together, tmp_path):
    """Killed at model 3's third evaluation (step 6; last checkpoint at its second, step 4), the same call
    resumes from the checkpoint and ends with the uninterrupted run's layers, losses and epoch scores."""
    enc, tools, queries, gold, states, rows, hard = setup
    args = (enc, states, rows["queries"], rows["tools"], gold)
    with pytest.raises(Killed):
        tune_encoders(*args, _jobs(setup, kill_at=3), MANY, checkpoint_dir=tmp_path / "run", progress=False)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "running" and run["epochs_done"] == 4
    resumed = tune_encoders(*args, _jobs(setup), MANY, checkpoint_dir=tmp_path / "run", progress=False)
    again = tune_encoders(*args, _jobs(setup, kill_at=1), MANY, checkpoint_dir=tmp_path / "run",
                          progress=False)  # finished: reused, nothing evaluated
    for whole, r, a in zip(together[0], resumed, again):
        assert _max_diff(whole, r) == 0.0 and _max_diff(r, a) == 0.0
        assert whole.losses.tolist() == r.losses.tolist() == a.losses.tolist()
        np.testing.assert_array_equal(whole.epoch_scores, r.epoch_scores)


def test_schedule_is_drawn_from_the_seed_and_masks_nothing_it_should_not(setup):
    enc, tools, queries, gold, states, rows, hard = setup
    cfg = TuneConfig(epochs=2, batch_size=16, negatives=2, hard_pool=4)
    a = batch_schedule(gold, np.arange(64), hard, 3, cfg)
    b = batch_schedule(gold, np.arange(64), hard, 3, cfg)
    c = batch_schedule(gold, np.arange(64), hard, 4, cfg)
    assert len(a) == 8 and all(q.size == 16 and t.size == 16 * 3 for q, t in a)
    assert all((x[0] == y[0]).all() and (x[1] == y[1]).all() for x, y in zip(a, b))
    assert any((x[0] != y[0]).any() for x, y in zip(a, c))
    for qs, ts in a:
        assert (ts[:16] == gold[qs, 0]).all()  # each query's label column is its gold tool
        assert all(t in hard[q, :4] for q, row in zip(qs, ts[16:].reshape(16, 2)) for t in row)


def test_wrong_states_are_refused(setup):
    enc, tools, queries, gold, states, rows, hard = setup
    with pytest.raises(Exception, match="layer"):
        tune_encoder(enc, states, rows["queries"], rows["tools"], gold, np.arange(64), hard, 0,
                     TuneConfig(layers=2), progress=False)


def test_the_sweep_rows_gate_against_the_frozen_encoder(tiny_bert_dir, tmp_path):
    """ft_* rows in a sweep: with a zero learning rate the tuned encoder is the frozen one, every gate ties and
    γ = 0 is kept, so ft_hybrid_risk equals hybrid_risk exactly; with training, the chosen γ is the best on the
    held-out queries, and each model's arrays are saved for a second run."""
    enc = load_encoder(tiny_bert_dir)
    rows = "ft_hybrid_risk,hybrid_risk"
    quick = dict(eval__variants=rows, eval__smoothing_benchmark=False, tune__batch_size=16)
    frozen = run_benchmark(tiny_config(tmp_path / "a", **quick, tune__lr=0.0, tune__epochs=1),
                           workdir=tmp_path / "a" / "out", bench=tiny_benchmark(), encoder=enc)
    t = frozen["tuned_encoder"]
    assert t["kept_tuned"] == 0 and t["of"] == 2
    assert frozen["main"]["test"]["ft_hybrid_risk"] == frozen["main"]["test"]["hybrid_risk"]
    cfg = tiny_config(tmp_path / "b", **quick, tune__lr=3e-3, tune__epochs=3)
    trained = run_benchmark(cfg, workdir=tmp_path / "b" / "out", bench=tiny_benchmark(), encoder=enc)
    t = trained["tuned_encoder"]
    for m, table in zip(t["models"], t["heldout_ndcg@5_by_gate"]):
        assert table[t["gates"].index(m["gate"])] == max(table) and m["steps"] == 3 * (48 // 16)
        assert m["epoch"] == 1 + int(np.nanargmax(m["heldout_ndcg@5_by_epoch"]))
    assert len(list((tmp_path / "b" / "ckpt" / "tiny").glob("tuned-*/seed*-fold0/arrays.npz"))) == 2  # for a rerun


def test_a_step_budget_shortens_a_long_run_to_whole_epochs():
    """4 epochs of 64 queries in batches of 16 are 16 steps: a budget of 10 runs 2 whole epochs, a budget below
    one epoch still runs one, no budget runs all 4; every epoch is a permutation of the training queries."""
    gold = np.arange(64)[:, None] % 8
    hard = np.tile(np.arange(8), (64, 1))
    train = np.arange(64)
    for budget, epochs in ((None, 4), (10, 2), (3, 1), (100, 4)):
        cfg = TuneConfig(epochs=4, batch_size=16, hard_pool=8, step_budget=budget)
        assert encoder_tune.epochs_run(cfg, train.size) == epochs
        steps = batch_schedule(gold, train, hard, 0, cfg)
        assert len(steps) == 4 * epochs
        for e in range(epochs):
            assert sorted(np.concatenate([q for q, _ in steps[4 * e:4 * e + 4]]).tolist()) == train.tolist()
