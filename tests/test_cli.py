"""The `riskrank-jax` commands on the embedded demo benchmark (real default encoder, temporary caches), invoked
in-process; `--help` through the real entry points (`python -m riskrank_jax`, `python -m riskrank_jax.sweep`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import cli_invoker
from riskrank_jax.cli.options import expand_multi_value_options


def run_cli(*args, env_cache):
    """stdout of `riskrank-jax ARGS` (exit status 0, no traceback), run in this process."""
    return cli_invoker(str(env_cache))(*args).stdout


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_embed_then_cached(cache):
    first = run_cli("embed", "--benchmark", "demo", env_cache=cache)
    assert "tools 263, train 225, test 149; 637 unique" in first
    assert "encoded 637 new texts, 0 from cache" in first
    second = run_cli("embed", "--benchmark", "demo", env_cache=cache)
    assert "encoded 0 new texts, 637 from cache" in second


def test_graph_stats_json(cache):
    out = json.loads(run_cli("graph", "stats", "--benchmark", "demo", "--json", env_cache=cache))
    assert len(out["graphs"]) == 1 and out["graphs"][0]["fold"] == 0
    g = out["graphs"][0]
    assert g["nodes"] == 263 and g["high_permission_tools"] == 22
    assert g["edges_total"] >= max(g["edges_cooccur"], g["edges_semantic"], g["edges_permission"]) > 0


def test_train_twice_reuses_checkpoint(cache, tmp_path):
    args = ("train", "--benchmark", "demo", "--seeds", "42", "7", "--epochs", "2", "--checkpoint-dir", str(tmp_path))
    first = run_cli(*args, env_cache=cache)
    assert "2 models (2 seeds x 1 folds)" in first and "best epoch" in first
    second = run_cli(*args, env_cache=cache)
    losses = lambda s: [line.split("held-out loss")[1] for line in s.splitlines() if "held-out loss" in line]  # noqa: E731
    assert losses(first) == losses(second)
    assert (tmp_path / "demo").is_dir()


def test_train_reads_its_config_from_the_tree(cache):
    """train's TrainConfig is the config tree's train leaves: the tree's defaults, then the flags, then --set;
    a leaf outside train.* or an unknown one is a usage error naming --set."""
    import dataclasses

    from riskrank_jax.experiments.config import default_config

    shown = json.loads(run_cli("train", "--show-config", env_cache=cache))
    assert shown == json.loads(json.dumps(dataclasses.asdict(default_config("demo").train)))
    got = json.loads(run_cli("train", "--show-config", "--epochs", "3", "--lambda-aware", "--lambdas", "0", "0.5",
                             "--set", "train.negatives=7", "--set", "train.epochs=4", env_cache=cache))
    assert (got["epochs"], got["lambda_aware"], got["lambdas"], got["negatives"]) == (4, True, [0.0, 0.5], 7)
    assert {k: v for k, v in got.items() if k not in ("epochs", "lambda_aware", "lambdas", "negatives")} == {
        k: v for k, v in shown.items() if k not in ("epochs", "lambda_aware", "lambdas", "negatives")}
    for bad, words in (("eval.k=3", "train.* only"), ("train.bogus=1", "unknown config path 'train.bogus'")):
        r = cli_invoker(str(cache))("train", "--set", bad, "--show-config", code=2)
        assert words in r.output + r.stderr and "--set" in r.output + r.stderr


def test_evaluate_baseline_json(cache):
    out = json.loads(run_cli("evaluate-baseline", "--benchmark", "demo", "--retriever", "bm25", "--json",
                             env_cache=cache))
    m = out["metrics"]["test"]
    assert 0.0 < m["ndcg@5"] <= 1.0 and 0.0 <= m["rvr@5"] <= 1.0 and "safe_rvr@5" in m


def test_multi_value_options():
    assert expand_multi_value_options(["train", "--seeds", "1", "2", "--lambdas", "0", "-0.5", "--json"]) == [
        "train", "--seeds", "1", "--seeds", "2", "--lambdas", "0", "--lambdas", "-0.5", "--json"]


def test_help_lists_commands():
    r = subprocess.run([sys.executable, "-m", "riskrank_jax", "--help"], capture_output=True, text=True, check=True)
    for cmd in ("data", "embed", "evaluate-baseline", "graph", "train"):
        assert cmd in r.stdout
    r = subprocess.run([sys.executable, "-m", "riskrank_jax.sweep", "--help"], capture_output=True, text=True,
                       check=True)
    assert "--benchmark" in r.stdout and "--lambdas" in r.stdout
