"""The demo sweep, rerun from empty caches through the command line, reproduces the committed reference results
within the flip bounds results.json states (in query units: the (query, seed) pairs whose ranking may change on
another CPU), writes nothing tracked, and survives losing its embedding cache."""

from __future__ import annotations

import json
import shutil

import pytest

from riskrank_jax.data import load_benchmark
from riskrank_jax.experiments.reproducibility import COMPARED_SECTIONS, compare_in_query_units, query_counts
from sweep_cli import COMPARE_IGNORED, REPO, compare_results, load_results, run_sweep, sweep_env

REFERENCE = REPO / "experiments" / "results" / "demo" / "results.json"
PAPER_ROWS = ["--variants", "paper", "--no-bench"]
# these runs select other variants (and no throughput benchmark) than the committed one: their "config" differs
ACROSS_CONFIGS = (*COMPARE_IGNORED, "config")
RESULT_SECTIONS = COMPARED_SECTIONS


@pytest.mark.slow
def test_demo_from_empty_caches_matches_the_committed_results(tmp_path, report_line):
    committed_bytes = REFERENCE.read_bytes()
    committed = json.loads(committed_bytes)
    runs, cache, ckpt = tmp_path / "runs", tmp_path / "cache", tmp_path / "ckpt"
    env = sweep_env(tmp_path / "jax-cache", RISKRANK_CACHE=cache, RISKRANK_RUNS=runs)  # output root from the env
    first = run_sweep([*PAPER_ROWS, "--checkpoint-dir", ckpt], env)
    assert first.returncode == 0, first.stderr[-3000:]
    out = runs / "demo"
    last = first.stdout.strip().splitlines()
    assert last[-1].startswith(f"[demo] wrote {out}/results.json, tables.md, lambda_sweep.png, tradeoff.png")
    assert any(line.startswith("core_graph_rule ") for line in last[-14:])  # the main table just above
    assert REFERENCE.read_bytes() == committed_bytes  # the committed reference is never rewritten by a run
    new = load_results(runs)
    rep = new["reproducibility"]
    assert "bit-identical" in rep["same_machine"] and rep == committed["reproducibility"]
    bounds = rep["flip_bounds"]
    assert set(bounds) == {"ndcg", "mrr", "recall", "exposure", "needrisk"} and all(0 < b <= 20 for b in bounds.values())
    assert "Reproducibility:" in (out / "tables.md").read_text()

    # every value of the new run (the paper's rows) against the committed run of all variants: the same keys, and
    # every mean / std within its family's bound in query units (a mean over Q queries and S seeds moves by
    # 1/(Q·S) per (query, seed) pair whose ranking changed)
    assert set(new["main"]["test"]) <= set(committed["main"]["test"]), "committed results lack rows of this run"
    structure = compare_results(committed, new, float("inf"), ignore=ACROSS_CONFIGS)
    missing = [p for p in structure["only_after"] if p.split("/")[0] in RESULT_SECTIONS]
    assert structure["compared"] > 300 and not missing and not structure["differing"], missing[:8]
    counts = query_counts(load_benchmark("demo"))
    assert counts["test"]["all"] == new["splits"]["test"] and counts["test"]["high_risk"] > 0
    report = compare_in_query_units(committed, new, counts, len(new["seeds"]), bounds)
    report_line(f"demo rerun against the committed results: {report['changed']} of {report['compared']} values "
                f"moved; largest (query, seed) pairs flipped in one value, per family: {report['max_units']}; "
                f"summed over the means: {report['flipped']}")
    assert report["compared"] > 300 and not report["missing"], report["missing"][:8]
    assert not report["exceeding"], [(p, u, b, _at(committed, p), _at(new, p)) for p, u, b in report["exceeding"][:8]]
    # the rule is not vacuous: one row losing bound + 1 queries in every seed is over its family's bound
    worse = json.loads(json.dumps(new))
    worse["main"]["test"]["core"]["ndcg@5"]["mean"] -= (bounds["ndcg"] + 1) / counts["test"]["all"]
    assert compare_in_query_units(committed, worse, counts, len(new["seeds"]), bounds)["exceeding"]

    # lose the embedding cache: the sweep succeeds (checkpoints reused, nothing set aside) and gives the same
    # numbers, bit for bit (a few of the rows, which train the same run, keep this part short)
    run_files = {p: p.stat().st_mtime_ns for p in ckpt.rglob("run.json")}
    assert len(run_files) == 1  # one training run (core) for the paper's rows
    shutil.rmtree(cache)
    second = run_sweep(["--variants", "dense", "core", "core_graph_rule", "--no-bench", "--checkpoint-dir", ckpt,
                        "--out", runs], env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "not reusable" not in second.stderr
    assert {p: p.stat().st_mtime_ns for p in ckpt.rglob("run.json")} == run_files  # reused, not retrained
    again = load_results(runs)
    exact = compare_results(new, again, 0.0, ignore=ACROSS_CONFIGS)
    assert exact["compared"] > 100 and not exact["differing"] and not exact["only_after"]
    assert set(again["main"]["test"]) == {"dense", "core", "core_graph_rule"}


def _at(tree, path: str):
    for part in path.split("/"):
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    return tree


def _tree(per_seed: dict, split: str = "test") -> dict:
    """A results.json with one row "r" whose per-seed means are ``per_seed`` ({metric: [S values]})."""
    import numpy as np

    from riskrank_jax import metrics

    summary = metrics.summarize({m: np.asarray(v) for m, v in per_seed.items()})
    return {"main": {split: {"r": {m: summary[m] for m in per_seed if m != "needrisk_hit@5"}}},
            "context": {split: {"r": {m: summary[m] for m in per_seed if m == "needrisk_hit@5"}}}}


def test_query_units_count_flipped_query_seed_pairs():
    """One query of 10 changing its NDCG@5 by 1 in one of 3 seeds is 1 unit of the mean; a context metric counts
    over its own subset (4 high-risk queries); a value over its family's bound is reported, equal NaNs are not."""
    counts = {"test": {"all": 10, "high_risk": 4, "safe": 6}}
    bounds = {"ndcg": 1, "mrr": 1, "recall": 1, "exposure": 1, "needrisk": 1}
    before = _tree({"ndcg@5": [0.5, 0.6, 0.7], "mrr": [0.2, 0.2, 0.2], "needrisk_hit@5": [0.5, 0.5, 0.5]})
    after = _tree({"ndcg@5": [0.5, 0.7, 0.7], "mrr": [0.2, 0.2, 0.2], "needrisk_hit@5": [0.5, 0.75, 0.75]})
    r = compare_in_query_units(before, after, counts, n_seeds=3, bounds=bounds)
    assert r["compared"] == 6 and not r["missing"]
    assert r["flipped"]["ndcg"] == pytest.approx(1.0) and r["flipped"]["mrr"] == 0.0
    assert r["flipped"]["needrisk"] == pytest.approx(2.0)  # one query of the 4, in two seeds
    # the std moved by 0.144 = 0.82 units (4 queries, √2): within the bound; the mean's 2 units are not
    assert [(p, round(u, 4)) for p, u, _ in r["exceeding"]] == [("context/test/r/needrisk_hit@5/mean", 2.0)]
    assert r["max_units"]["ndcg"] <= 1.0 + 1e-6  # the std moved too, by no more than the flipped pair
    looser = compare_in_query_units(before, after, counts, n_seeds=3, bounds={**bounds, "needrisk": 2})
    assert not looser["exceeding"]
    nan = _tree({"ndcg@5": [float("nan")] * 3})
    assert not compare_in_query_units(nan, nan, counts, 3, bounds)["exceeding"]
    extra = _tree({"ndcg@5": [0.5, 0.6, 0.7], "recall@10": [0.1, 0.1, 0.1]})
    assert compare_in_query_units(before, extra, counts, 3, bounds)["missing"] == ["main/test/r/recall@10/mean",
                                                                                 "main/test/r/recall@10/std"]
