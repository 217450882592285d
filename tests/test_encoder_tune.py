"""Fine-tuning the encoder's top layers (riskrank_jax/model/encoder_tune.py) on a tiny random BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest

from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.model.encoder_tune import (TextStates, TunedEncoder, TuneConfig, batch_schedule, embed_states,
                                             save_tuned_encoder, tune_encoder)

# one configuration for every training test: the train step compiles once for the whole file
CFG = TuneConfig(layers=1, epochs=12, batch=16, lr=3e-3, hard_negatives=1, hard_pool=8, warmup=0.0, checkpoint_every=4)
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


def test_schedule_is_drawn_from_the_seed_and_masks_nothing_it_should_not(setup):
    enc, tools, queries, gold, states, rows, hard = setup
    cfg = TuneConfig(epochs=2, batch=16, hard_negatives=2, hard_pool=4)
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
    from test_sweep import tiny_benchmark, tiny_config

    from riskrank_jax.experiments.run import run_benchmark

    enc = load_encoder(tiny_bert_dir)
    rows = "ft_hybrid_risk,hybrid_risk"
    quick = dict(eval__variants=rows, eval__smoothing_benchmark=False, tune__batch=16)
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
