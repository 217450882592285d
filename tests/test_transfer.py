"""Risk-head transfer: tiny synthetic registries (the head transfers when both follow one rule), the
recommendation follows the numbers, absent benchmarks are skipped, and the real UltraTool → Seal-Tools run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from riskrank_jax.registry.permissions import permission_mask_words
from riskrank_jax.experiments import transfer
from riskrank_jax.model.risk_head import HeadConfig
from riskrank_jax.registry.risk import DEFAULT_KEYWORD_FLOORS, keyword_floor
from riskrank_jax.registry.risk_agreement import auc

SMALL = transfer.TransferConfig(seeds=(0, 1), folds=3, head=HeadConfig(hidden=8, epochs=40, batch_size=16))


def synthetic_set(name: str, n: int, seed: int) -> transfer.LabelledSet:
    """n tools in 8-d: risk grows with the first coordinate (the same rule in every registry); a third of the
    risky tools say "delete" (keyword floor 3), a few safe ones say "download" (network: floor 1)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    risk = np.clip(np.digitize(x[:, 0], [-0.8, 0.0, 0.6, 1.4]) + 1, 1, 5).astype(np.int32)
    texts = tuple("delete the record" if (r >= 3 and i % 3 == 0) else ("download a page" if i % 5 == 0 else
                  "show the record") for i, r in enumerate(risk))
    return transfer.LabelledSet(name, texts, risk, x / np.linalg.norm(x, axis=1, keepdims=True))


@pytest.fixture(scope="module")
def synthetic_result():
    sets = {"ultratool": synthetic_set("ultratool", 90, 1), "sealtools": synthetic_set("sealtools", 70, 2)}
    return sets, transfer.run_transfer(sets, SMALL)


def test_transfer_settings_and_scores(synthetic_result):
    sets, res = synthetic_result
    assert list(res["settings"]) == ["ultratool → sealtools", "sealtools → ultratool", "ultratool (5-fold CV)",
                                     "sealtools (5-fold CV)"]
    s = res["settings"]["ultratool → sealtools"]
    assert (s["kind"], s["n_train"], s["n_test"]) == ("transfer", 90, 70)
    assert s["n_test_high"] == int((sets["sealtools"].risk >= 3).sum())
    learned = s["sources"]["learned head f_risk"]["auc_r>=3"]
    assert len(learned["per_seed"]) == 2 and learned["mean"] > 0.9  # one rule in both registries: it transfers
    kw = s["sources"]["keywords, word rule (floors)"]["auc_r>=3"]
    test = sets["sealtools"]
    expected = auc(keyword_floor(permission_mask_words(list(test.texts)), DEFAULT_KEYWORD_FLOORS), test.risk)
    assert kw["mean"] == pytest.approx(expected, abs=1e-4) and kw["std"] == 0.0
    assert 0.5 < kw["mean"] < learned["mean"]
    assert res["settings"]["ultratool (5-fold CV)"]["kind"] == "cv"


def test_markdown_and_files(synthetic_result, tmp_path):
    _, res = synthetic_result
    res = {"encoder": "test-encoder", **res, "skipped": ["demo (missing)"]}
    j, md = transfer.write_results(res, tmp_path)
    assert json.loads(j.read_text())["settings"].keys() == res["settings"].keys()
    text = md.read_text()
    assert text.count("| ultratool → sealtools |") == 2  # AUC table and ρ table
    assert "docs/metrics.md" in text and res["recommendation"] in text and "Skipped: demo (missing)" in text
    assert "SPEC" not in text


def _fake_result(aucs: dict, rhos: dict) -> dict:
    def cell(v):
        return {"mean": v, "std": 0.0, "per_seed": [v]}

    sources = {row: {"auc_r>=3": cell(aucs[row]), "spearman": cell(rhos[row])} for row in transfer.SHOWN}
    return {"settings": {"a → b": {"kind": "transfer", "train": "a", "test": "b", "sources": sources}}}


def test_recommendation_follows_the_numbers():
    rows = list(transfer.SHOWN)
    kw_best = _fake_result(dict(zip(rows, (.6, .8, .7, .65))), dict(zip(rows, (.5, .3, .4, .45))))
    text = transfer.recommendation(kw_best)
    assert "the permission keywords alone" in text and "0.800 / 0.300" in text and "with mean Spearman" in text
    learned_best = _fake_result(dict(zip(rows, (.9, .6, .85, .8))), dict(zip(rows, (.7, .2, .6, .5))))
    assert "the learned head's f_risk alone" in transfer.recommendation(learned_best)
    assert "and the highest mean Spearman" in transfer.recommendation(learned_best)


def test_absent_benchmarks_are_skipped(tmp_path):
    def embed(texts):
        return np.ones((len(texts), 4), np.float32) / 2.0

    sets, skipped = transfer.load_sets(tmp_path, embed)
    assert list(sets) == ["demo"] and sets["demo"].emb.shape == (len(sets["demo"].risk), 4)
    assert [s.split(" ")[0] for s in skipped] == ["ultratool", "sealtools"]
    assert "does not exist" in skipped[0]


@pytest.mark.realdata
def test_ultratool_to_sealtools_transfer(real_data_dir):
    """The learned head trained on UltraTool's labels ranks Seal-Tools' risky tools far better than the
    keywords, and raising it to the keyword floors does not hurt (measured: 0.80 / 0.67 / 0.84 AUC)."""
    sets, _ = transfer.load_sets(real_data_dir, transfer.default_embed(), names=("ultratool", "sealtools"))
    res = transfer.run_transfer(sets, transfer.TransferConfig(seeds=(0,), within=False))
    src = res["settings"]["ultratool → sealtools"]["sources"]
    a = {k: src[k]["auc_r>=3"]["mean"] for k in transfer.SHOWN}
    assert a["keywords, word rule (floors)"] == pytest.approx(0.6725, abs=1e-3)
    assert a["learned head f_risk"] > 0.75 and a["combined score max(f_risk, floors)"] > a["learned head f_risk"]
