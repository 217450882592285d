"""The demo sweep, rerun from empty caches through the command line, reproduces the committed reference results
within the tolerance results.json states, writes nothing tracked, and survives losing its embedding cache."""

from __future__ import annotations

import json
import shutil

import pytest

from sweep_cli import COMPARE_IGNORED, REPO, compare_results, load_results, run_sweep, sweep_env

REFERENCE = REPO / "experiments" / "results" / "demo" / "results.json"
PAPER_ROWS = ["--variants", "paper", "--no-bench"]
# these runs select other variants (and no throughput benchmark) than the committed one: their "config" differs
ACROSS_CONFIGS = (*COMPARE_IGNORED, "config")
RESULT_SECTIONS = ("main", "lambda_sweep", "edge_ablation", "context", "stress", "exposure")


@pytest.mark.slow
def test_demo_from_empty_caches_matches_the_committed_results(tmp_path):
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
    tol = new["reproducibility"]["across_x86_cpus_abs_tolerance"]
    assert tol == 0.005 and "bit-identical" in new["reproducibility"]["same_machine"]
    assert "Reproducibility:" in (out / "tables.md").read_text()

    # every value of the new run (the paper's rows) against the committed run of all variants
    assert set(new["main"]["test"]) <= set(committed["main"]["test"]), "committed results lack rows of this run"
    report = compare_results(committed, new, tol, ignore=ACROSS_CONFIGS)
    missing = [p for p in report["only_after"] if p.split("/")[0] in RESULT_SECTIONS]
    assert report["compared"] > 300 and not missing, missing[:8]  # every result of this run was compared
    assert not report["differing"], [(p, _at(committed, p), _at(new, p)) for p in report["differing"][:8]]

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
