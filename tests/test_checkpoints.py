"""Per-epoch checkpoints: bit-identical resume, reuse of a finished run, refusal of a mismatching one."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from riskrank_jax.checkpoints import diff_keys, hash_arrays, read_run
from riskrank_jax.errors import CacheError
from riskrank_jax.train import TrainConfig, load_trained, train_models

from test_train import CFG, DATA

META = {"encoder": "test-encoder-16d", "benchmark": "tiny", "protocol": "2-fold test"}


class Killed(Exception):
    pass


def _assert_same_result(a, b):
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert np.array_equal(a.train_loss, b.train_loss)
    assert np.array_equal(a.heldout_loss, b.heldout_loss)
    assert np.array_equal(a.best_epoch, b.best_epoch)
    assert a.model_index == b.model_index


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    d = tmp_path_factory.mktemp("straight")
    return d, train_models(*DATA, (1, 2), CFG, checkpoint_dir=d, run_meta=META, progress=False)


def test_hash_and_diff_helpers():
    a = np.arange(4, dtype=np.int32)
    assert hash_arrays(a) == hash_arrays(a.copy())
    assert hash_arrays(a) != hash_arrays(a.astype(np.int64))
    assert hash_arrays(a) != hash_arrays(a.reshape(2, 2))
    assert diff_keys({"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1, "b": {"c": 5}, "e": 0}) == ["b.c", "b.d", "e"]


def test_run_json_records_configuration(straight):
    d, res = straight
    run = read_run(d)
    assert run["status"] == "completed" and run["epochs_done"] == 4
    assert run["config"]["meta"] == META
    assert run["config"]["train_config"] == CFG.to_dict()
    assert run["config"]["seeds"] == [1, 2] and run["config"]["folds"] == [0, 1]
    assert run["data_hash"] == res.data_hash == hash_arrays(*DATA)
    assert sorted(p.name for p in (d / "state").iterdir() if p.name.isdigit()) == ["3", "4"]


def test_killed_run_resumes_bit_identically(straight, tmp_path):
    _, full = straight
    seen = []

    def kill_after_two(epochs_done, train_loss, heldout_loss):
        seen.append(epochs_done)
        if epochs_done == 2:
            raise Killed

    with pytest.raises(Killed):
        train_models(*DATA, (1, 2), CFG, checkpoint_dir=tmp_path, run_meta=META, progress=False,
                     on_epoch_end=kill_after_two)
    assert read_run(tmp_path)["status"] == "running" and read_run(tmp_path)["epochs_done"] == 2
    with pytest.raises(CacheError, match="not completed"):
        load_trained(tmp_path)
    seen.clear()
    resumed = train_models(*DATA, (1, 2), CFG, checkpoint_dir=tmp_path, run_meta=META, progress=False,
                           on_epoch_end=lambda e, *_: seen.append(e))
    assert seen == [3, 4]  # restarted after the last completed epoch
    _assert_same_result(resumed, full)
    _assert_same_result(load_trained(tmp_path), full)


def test_completed_run_is_reused_without_training(straight):
    d, full = straight
    calls = []
    again = train_models(*DATA, (1, 2), CFG, checkpoint_dir=d, run_meta=META, progress=False,
                         on_epoch_end=lambda *a: calls.append(a))
    assert calls == []
    _assert_same_result(again, full)
    loaded = load_trained(d)
    _assert_same_result(loaded, full)
    assert loaded.config == CFG and loaded.data_hash == full.data_hash


def test_mismatching_checkpoint_is_refused(straight):
    d, _ = straight
    with pytest.raises(CacheError) as exc:
        train_models(*DATA, (1, 2), TrainConfig(epochs=4, batch_size=16, hidden=16, lr=2e-3),
                     checkpoint_dir=d, run_meta=META, progress=False)
    assert str(d) in str(exc.value) and "train_config.lr" in str(exc.value)
    assert "data_hash" not in str(exc.value)

    tools, queries, gold, risk, fold_mask = DATA
    risk2 = risk.copy()
    risk2[0] = 1 + risk2[0] % 5
    with pytest.raises(CacheError, match="data_hash"):
        train_models(tools, queries, gold, risk2, fold_mask, (1, 2), CFG, checkpoint_dir=d, run_meta=META,
                     progress=False)

    with pytest.raises(CacheError) as exc:
        train_models(*DATA, (1, 2, 3), CFG, checkpoint_dir=d, run_meta={**META, "encoder": "other"}, progress=False)
    msg = str(exc.value)
    assert "meta.encoder" in msg and "seeds" in msg and "model_index" in msg
    # the refused calls left the finished run untouched
    assert read_run(d)["status"] == "completed"
    assert json.loads((d / "run.json").read_text())["config"]["meta"] == META


def test_state_without_run_file_is_refused(tmp_path):
    (tmp_path / "state").mkdir()
    with pytest.raises(CacheError, match="no run.json"):
        train_models(*DATA, (1,), CFG, checkpoint_dir=tmp_path, progress=False)
