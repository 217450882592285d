"""Per-epoch checkpoints: bit-identical resume, reuse of a finished run, refusal of a mismatching one."""

from __future__ import annotations

import json
import logging
import shutil

import jax
import numpy as np
import pytest

from riskrank_jax.errors import CacheError
from riskrank_jax.model.checkpoints import diff_keys, hash_arrays, read_run
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.model.train_store import load_trained

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
    return d, train_models(*DATA, CFG, TrainRun((1, 2), checkpoint_dir=d, run_meta=META, progress=False))


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
        train_models(*DATA, CFG, TrainRun((1, 2), checkpoint_dir=tmp_path, run_meta=META, progress=False,
                                          on_epoch_end=kill_after_two))
    assert read_run(tmp_path)["status"] == "running" and read_run(tmp_path)["epochs_done"] == 2
    with pytest.raises(CacheError, match="not completed"):
        load_trained(tmp_path)
    seen.clear()
    resumed = train_models(*DATA, CFG, TrainRun((1, 2), checkpoint_dir=tmp_path, run_meta=META, progress=False,
                                                on_epoch_end=lambda e, *_: seen.append(e)))
    assert seen == [3, 4]  # restarted after the last completed epoch
    _assert_same_result(resumed, full)
    _assert_same_result(load_trained(tmp_path), full)


def test_completed_run_is_reused_without_training(straight):
    d, full = straight
    calls = []
    again = train_models(*DATA, CFG, TrainRun((1, 2), checkpoint_dir=d, run_meta=META, progress=False,
                                              on_epoch_end=lambda *a: calls.append(a)))
    assert calls == []
    _assert_same_result(again, full)
    loaded = load_trained(d)
    _assert_same_result(loaded, full)
    assert loaded.config == CFG and loaded.data_hash == full.data_hash


def _copy_run(src, dst):
    shutil.copytree(src, dst)
    return dst


def _set_aside_dirs(d):
    return sorted(p for p in d.parent.iterdir() if p.name.startswith(d.name + ".stale-"))


def _retrains_after_setting_aside(d, caplog, why, full, **kwargs):
    """Train into `d`; expect one warning naming `why` and the new place, a fresh result equal to `full`."""
    caplog.clear()
    calls = []
    with caplog.at_level(logging.WARNING, logger="riskrank_jax.model.checkpoints"):
        res = train_models(*kwargs.pop("data", DATA), kwargs.pop("config", CFG),
                           TrainRun(kwargs.pop("seeds", (1, 2)), checkpoint_dir=d, run_meta=kwargs.pop("meta", META),
                                    progress=False, on_epoch_end=lambda e, *_: calls.append(e), **kwargs))
    moved = _set_aside_dirs(d)
    assert len(moved) == 1, moved
    lines = [r.getMessage() for r in caplog.records if r.name == "riskrank_jax.model.checkpoints"]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert why in lines[0] and str(moved[0]) in lines[0] and "training from scratch" in lines[0]
    assert calls == list(range(1, CFG.epochs + 1))  # trained from scratch
    assert read_run(d)["status"] == "completed"
    if full is not None:
        _assert_same_result(res, full)
    return res, moved[0]


def test_mismatching_config_is_set_aside_and_retrained(straight, tmp_path, caplog):
    src, _ = straight
    d = _copy_run(src, tmp_path / "run")
    other = TrainConfig(epochs=4, batch_size=16, hidden=16, lr=2e-3)
    res, moved = _retrains_after_setting_aside(d, caplog, "train_config.lr", None, config=other)
    assert res.config == other and read_run(d)["config"]["train_config"]["lr"] == 2e-3
    assert read_run(moved)["config"]["train_config"] == CFG.to_dict()  # the old run is kept, untouched


def test_mismatching_data_is_set_aside(straight, tmp_path, caplog):
    src, _ = straight
    d = _copy_run(src, tmp_path / "run")
    tools, queries, gold, risk, fold_mask = DATA
    risk2 = risk.copy()
    risk2[0] = 1 + risk2[0] % 5
    _retrains_after_setting_aside(d, caplog, "data_hash", None, data=(tools, queries, gold, risk2, fold_mask))


def test_data_id_is_the_identity_not_the_float_bits(tmp_path, caplog, straight):
    _, full = straight
    d = tmp_path / "run"
    first = train_models(*DATA, CFG, TrainRun((1, 2), checkpoint_dir=d, run_meta=META, progress=False,
                                              data_id="texts-v1"))
    assert read_run(d)["data_hash"] == first.data_hash == "texts-v1"
    _assert_same_result(first, full)
    # embeddings moved by one ulp (a re-encoding): same data_id, so the finished run is reused as is
    tools, queries, gold, risk, fold_mask = DATA
    nudged = np.nextafter(tools, np.float32(np.inf))
    calls = []
    again = train_models(nudged, queries, gold, risk, fold_mask, CFG,
                         TrainRun((1, 2), checkpoint_dir=d, run_meta=META, progress=False, data_id="texts-v1",
                                  on_epoch_end=lambda *a: calls.append(a)))
    assert calls == [] and _set_aside_dirs(d) == []
    _assert_same_result(again, full)
    # another data_id (other texts, labels or splits): set aside, retrained
    _retrains_after_setting_aside(d, caplog, "data_hash", full, data_id="texts-v2")
    assert read_run(d)["data_hash"] == "texts-v2"


def test_truncated_run_json_is_set_aside(straight, tmp_path, caplog):
    src, full = straight
    d = _copy_run(src, tmp_path / "run")
    text = (d / "run.json").read_text()
    (d / "run.json").write_text(text[: len(text) // 2])
    with pytest.raises(CacheError, match="not valid JSON"):
        read_run(d)
    _retrains_after_setting_aside(d, caplog, "not valid JSON", full)


def test_corrupt_state_is_set_aside(straight, tmp_path, caplog):
    src, full = straight
    d = _copy_run(src, tmp_path / "run")
    damaged = 0
    for f in (d / "state" / "4").rglob("*"):
        if f.is_file() and f.stat().st_size > 0:
            f.write_bytes(b"\0" * 7)
            damaged += 1
    assert damaged > 0
    with pytest.raises(CacheError, match="cannot restore"):
        load_trained(d)
    _retrains_after_setting_aside(d, caplog, "cannot restore", full)


def test_state_without_run_file_is_set_aside(tmp_path, caplog, straight):
    _, full = straight
    d = tmp_path / "run"
    (d / "state").mkdir(parents=True)
    _retrains_after_setting_aside(d, caplog, "no run.json", full)
