"""End to end: the sweep on a tiny synthetic registry with a deterministic bag-of-words encoder."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from riskrank_jax.data.types import Benchmark, QuerySet, ToolRegistry
from riskrank_jax.experiments.config import default_config, with_overrides
from riskrank_jax.experiments.evaluate import select_stress_queries
from riskrank_jax.experiments.run import run_benchmark
from riskrank_jax.experiments.variants import BY_NAME, VARIANTS, main_rows, select_variants
from riskrank_jax.retrieve.baselines import rank_full
from riskrank_jax.retrieve.first_stage import dense_scores


class BagOfWordsEncoder:
    """Hashed bag of words, L2-normalised: texts sharing words are similar. Same interface as Encoder."""

    model_id = "test-bow-64"
    dim = 64

    def encode(self, texts, *, batch_size=64, progress=None):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        out += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


VERBS = [("read", 1), ("list", 1), ("update", 2), ("write", 3), ("delete", 4), ("execute", 5)]
OBJECTS = ["file", "email", "calendar", "invoice", "user", "script"]


def tiny_benchmark() -> Benchmark:
    names, descs, risk = [], [], []
    for obj in OBJECTS:
        for verb, r in VERBS:
            names.append(f"{verb}_{obj}")
            descs.append(f"{verb} the {obj} record" + (" with a shell command" if verb == "execute" else ""))
            risk.append(r)
    tools = ToolRegistry.build(names, descs, risk, source="tiny")
    idx = tools.index_of()
    rng = np.random.default_rng(0)

    def queries(n, prefix):
        ids, texts, gold = [], [], []
        for i in range(n):
            obj = OBJECTS[rng.integers(len(OBJECTS))]
            verbs = rng.choice(len(VERBS), size=1 + rng.integers(2), replace=False)
            texts.append(" and ".join(f"please {VERBS[v][0]} my {obj}" for v in verbs))
            gold.append([idx[f"{VERBS[v][0]}_{obj}"] for v in verbs])
            ids.append(f"{prefix}-{i}")
        return QuerySet.build(ids, texts, gold)

    train, test = queries(60, "train"), queries(30, "test")
    return Benchmark("tiny", "tiny (unit test)", tools, train, {"test": test}, np.ones((1, train.size), bool),
                     {"test": np.zeros(test.size, np.int32)}, {})


def tiny_config(root, benchmark="tiny", **leaves):
    """A short sweep of the tiny benchmark (2 seeds, 2 λs, 2 epochs) with caches under ``root``; ``leaves``:
    {dotted path with "__" for ".": value} set on top."""
    base = {"seeds": (1, 2), "eval.lambdas": (0.0, 0.1), "train.epochs": 2, "risk_head.epochs": 6,
            "eval.stress_n": 5, "runtime.cache_dir": str(root / "cache"), "runtime.checkpoint_dir": str(root / "ckpt")}
    return with_overrides(default_config(benchmark), {**base, **{k.replace("__", "."): v for k, v in leaves.items()}})


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    cfg = tiny_config(root)
    kw = dict(workdir=root / "out", bench=tiny_benchmark(), encoder=BagOfWordsEncoder())
    res = run_benchmark(cfg, **kw)
    return cfg, kw, res, root


def test_results_shape_and_ranges(sweep_run):
    _, _, res, root = sweep_run
    saved = json.loads((root / "out" / "tiny" / "results.json").read_text())
    for key in ("benchmark", "protocol", "encoder", "seeds", "main", "lambda_sweep", "edge_ablation", "context",
                "stress", "timings"):
        assert key in saved
    main = saved["main"]["test"]
    not_run = saved["not_run"]["test"]  # the stand-in encoder has no layers to fine-tune: ft_* rows say so
    assert set(not_run) == {v.name for v in VARIANTS if "tuned" in v.runs() and not v.opt_in}
    assert all("no BERT layers to fine-tune" in why for why in not_run.values())
    # every declared main-table variant but the opt-in and the not-run ones, in declaration order
    assert list(main) == [v for v in main_rows() if not BY_NAME[v].opt_in and v not in not_run]
    assert set(main) >= {"bm25", "dense", "rule_only", "rel_only", "core", "core_graph", "core_graph_rule",
                         "cand100_core", "core_lambda_aware", "core_plus", "zeroshot_core_graph_rule"}
    for variant, cells in main.items():
        assert set(cells) == {"ndcg@5", "ndcg@10", "sndcg@5", "mrr", "recall@10", "success@5", "rvr@5", "srr@5"}
        for cell in cells.values():
            assert 0.0 <= cell["mean"] <= 1.0 and cell["std"] >= 0.0
    for v in ("bm25", "dense", "rule_only"):  # no seeds: std 0
        assert all(c["std"] == 0.0 for c in main[v].values())
    assert set(saved["lambda_sweep"]["test"]["core"]) == {"0.0", "0.1"}
    assert set(saved["edge_ablation"]["test"]) == {"no_graph", "cooccur", "semantic", "permission",
                                                   "risk_cooccur", "all_four"}
    assert [r["path"] for r in saved["smoothing_throughput"]["rows"]][:3] == [
        "riskrank_jax", "scipy_sparse", "dense_matmul"]


def test_consistency_between_rows(sweep_run):
    _, _, res, _ = sweep_run
    main = res["main"]["test"]
    sweep = res["lambda_sweep"]["test"]
    # the λ sweep and the main rows come from the same scores
    assert sweep["core"]["0.1"]["ndcg@5"] == main["core"]["ndcg@5"]
    assert sweep["core"]["0.0"]["rvr@5"] == main["rel_only"]["rvr@5"]
    for m, cell in res["edge_ablation"]["test"]["all_four"].items():
        np.testing.assert_allclose(cell["mean"], main["core_graph"][m]["mean"], atol=1e-6)
    # the λ-aware run's λ = 0 models are the core run's (the same objective and draws; tests/test_train.py checks
    # that training them as λ-aware gives the same models), and the run still lists every (seed, fold, λ) model
    np.testing.assert_allclose(sweep["core_lambda_aware"]["0.0"]["ndcg@5"]["mean"],
                               sweep["core"]["0.0"]["ndcg@5"]["mean"], atol=1e-6)
    la, core = res["training"]["lambda_aware"], res["training"]["core"]
    assert la["models"] == core["models"] * len(res["lambdas"])
    zero = [m for m, ix in enumerate(la["model_index"]) if ix["lam"] == 0.0]
    assert [la["best_heldout_loss"][m] for m in zero] == core["best_heldout_loss"]
    # the rule filter caps risky tools: at most one r >= 3 tool in the top 5 unless deferred tools fill
    assert main["rule_only"]["rvr@5"]["mean"] <= main["dense"]["rvr@5"]["mean"] + 1e-9
    # a risk penalty cannot expose more risky tools on average than no penalty on this registry
    assert sweep["core"]["0.1"]["rvr@5"]["mean"] <= sweep["core"]["0.0"]["rvr@5"]["mean"] + 1e-9


def test_stress_selection_rule(sweep_run):
    _, _, res, _ = sweep_run
    bench, enc = tiny_benchmark(), BagOfWordsEncoder()
    qs = bench.tests["test"]
    ranking = np.asarray(rank_full(dense_scores(enc.encode(list(qs.texts)), enc.encode(list(bench.tools.descriptions)))))
    idx, rule = select_stress_queries(ranking, qs.gold, bench.tools.risk, 5)
    risk = bench.tools.risk
    for i in idx:
        assert all(risk[g] <= 2 for g in qs.gold[i] if g >= 0)
        assert (risk[ranking[i, :10]] >= 3).sum() >= 2
    assert res["stress"]["test"]["query_ids"] == [qs.ids[i] for i in idx]
    assert res["stress"]["test"]["n"] == len(idx) <= 5


def test_outputs_written_and_rerun_skips(sweep_run, capsys):
    cfg, kw, res, root = sweep_run
    out = root / "out" / "tiny"
    tables = (out / "tables.md").read_text()
    assert "tiny (unit test)" in tables and "paper NDCG@5" in tables and "Table 7" in tables
    for png in ("lambda_sweep.png", "tradeoff.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mtime = (out / "results.json").stat().st_mtime_ns
    capsys.readouterr()
    again = run_benchmark(cfg, **kw)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"[tiny] reusing your run of {res['finished_at']} in {out} (same configuration, data and " \
                   "encoder); --force recomputes"
    assert (out / "results.json").stat().st_mtime_ns == mtime
    assert again["main"] == json.loads((out / "results.json").read_text())["main"]


def test_variant_subset_trains_only_what_it_needs(sweep_run, tmp_path):
    _, kw, _, root = sweep_run
    cfg = tiny_config(root, eval__variants=("dense", "core_graph"), eval__smoothing_benchmark=False,
                      runtime__memory_budget=1 << 16)
    res = run_benchmark(cfg, **{**kw, "workdir": tmp_path / "out"})
    assert list(res["main"]["test"]) == ["dense", "core_graph"]
    assert list(res["training"]) == ["core"]  # no λ-aware, core_plus or risk-only training
    assert list(res["lambda_sweep"]["test"]) == ["core_graph"] and res["edge_ablation"]["test"] == {}
    assert res["peak_rss_mb"] and res["memory_budget"] == 1 << 16
    # a tiny memory budget (scoring split into many calls) gives the full run's numbers
    full = sweep_run[2]["main"]["test"]["core_graph"]
    for m, cell in res["main"]["test"]["core_graph"].items():
        np.testing.assert_allclose(cell["mean"], full[m]["mean"], atol=1e-6)


def test_paper_keyword_selects_the_faithful_rows():
    names = {v.name for v in select_variants(["paper"])}
    assert {"dense", "core", "core_graph_rule", "cand100_core_graph", "all_four"} <= names
    assert not names & {"core_plus", "zeroshot_core", "core_lambda_aware"}
    assert all((v.faithful and not v.opt_in) == (v.name in names) for v in VARIANTS)  # opt-in rows only by name
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        select_variants(["nope"])


def test_results_record_the_config_tree_and_the_run_key_ignores_non_result_leaves(sweep_run, capsys):
    cfg, kw, res, root = sweep_run
    saved = json.loads((root / "out" / "tiny" / "results.json").read_text())
    assert saved["config"] == json.loads(json.dumps(cfg.to_dict()))  # the whole tree
    assert saved["config"]["train"]["epochs"] == 2 and saved["config"]["eval"]["alpha"] == 0.2
    capsys.readouterr()
    again = run_benchmark(with_overrides(cfg, {"runtime.memory_budget": 1 << 20}), **kw)  # never changes results
    assert "reusing your run" in capsys.readouterr().out and again["run_key"] == saved["run_key"]


def test_set_from_the_command_line_reaches_results_and_the_computation(sweep_run, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from riskrank_jax.experiments import paper
    from riskrank_jax.experiments import run as run_mod
    from riskrank_jax.sweep import main

    monkeypatch.setattr(paper, "load_benchmark", lambda name, data_dir=None: tiny_benchmark())
    monkeypatch.setattr(run_mod, "load_encoder_lazily", lambda path=None: BagOfWordsEncoder())
    args = ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--checkpoint-dir",
            str(tmp_path / "ckpt"), "--seeds", "1", "--seeds", "2", "--epochs", "2", "--variants", "dense",
            "--variants", "core", "--no-bench", "--no-compile-cache", "--jobs", "1", "--set", "eval.lambdas=0,0.1",
            "--set", "eval.stress_n=5", "--set", "eval.k=3"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    saved = json.loads((tmp_path / "out" / "demo" / "results.json").read_text())
    assert saved["config"]["eval"]["k"] == 3 and saved["k"] == 3 and saved["lambdas"] == [0.0, 0.1]
    assert saved["config"]["train"]["epochs"] == 2 and saved["config"]["risk_head"]["epochs"] == 6  # --epochs
    assert saved["config"]["runtime"]["cache_dir"] == str(tmp_path / "cache")
    # the "@5" metrics are computed at the cut-off k (their names keep "@5"): k = 3 changes the dense row
    k5, k3 = sweep_run[2]["main"]["test"]["dense"], saved["main"]["test"]["dense"]
    changed = {m for m in k5 if k3[m]["mean"] != k5[m]["mean"]}
    assert set(k3) == set(k5) and changed and changed <= {"ndcg@5", "sndcg@5", "success@5", "rvr@5", "srr@5"}


@pytest.mark.parametrize("setting, message", [
    ("graph.alpha=0.3", "unknown config path 'graph.alpha'; did you mean eval.alpha?"),
    ("train.epochs=five", "bad value for train.epochs: 'five' is not a valid int"),
    ("eval.smoothing_benchmark=yes", "expected true or false"),
    ("train.epochs", "expected KEY=VALUE (e.g. train.epochs=5)"),
    ("eval.variants=nope", "unknown variant 'nope'"),
    ("risk_head.seed=3", "risk_head.seed cannot be set: the sweep trains one risk head per seed of `seeds`"),
])
def test_set_errors_are_usage_errors_naming_the_leaf(setting, message):
    from click.testing import CliRunner

    from riskrank_jax.sweep import main

    r = CliRunner().invoke(main, ["--set", setting, "--show-config"])
    assert r.exit_code == 2 and message in r.output, r.output


def test_show_config_prints_the_resolved_tree():
    from click.testing import CliRunner

    from riskrank_jax.sweep import main

    r = CliRunner().invoke(main, ["--benchmark", "sealtools", "--show-config", "--k", "4", "--set",
                                  "train.epochs=3", "--set", "graph.semantic_threshold=0.7"])
    assert r.exit_code == 0, r.output
    tree = json.loads(r.output)
    assert tree["eval"]["alpha"] == 0.02 and tree["data"]["main_split"] == "test_in"  # default_config("sealtools")
    assert tree["eval"]["k"] == 4 and tree["train"]["epochs"] == 3 and tree["graph"]["semantic_threshold"] == 0.7
    assert tree["risk_head"]["epochs"] == 9  # derived from train.epochs (DERIVED_LEAVES), as --epochs 3 gives


@pytest.mark.parametrize("spelling", [["--epochs", "3"], ["--set", "train.epochs=3"]])
def test_two_spellings_of_a_leaf_give_one_tree(spelling):
    from click.testing import CliRunner

    from riskrank_jax.experiments.config import default_config
    from riskrank_jax.sweep import main

    r = CliRunner().invoke(main, ["--show-config", *spelling])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == json.loads(json.dumps(default_config("demo", {"train.epochs": 3}).to_dict()))
    assert json.loads(r.output)["risk_head"]["epochs"] == 9
    # a derived leaf set itself keeps its value, whatever the order of the spellings
    r = CliRunner().invoke(main, ["--show-config", "--set", "risk_head.epochs=7", *spelling])
    assert r.exit_code == 0 and json.loads(r.output)["risk_head"]["epochs"] == 7, r.output


def test_the_skeleton_runs_any_family_and_owns_key_reuse_and_files(tmp_path, monkeypatch):
    """A family supplies data and evaluation only; run key, reuse, results.json's common fields and the files are
    the skeleton's (``experiments.run``), the same for every benchmark."""
    from riskrank_jax.experiments import run as run_mod
    from riskrank_jax.experiments.family import RUN_FIELDS, Family

    calls = []

    def evaluate(cfg, bench, encoder, plan, log):
        calls.append(plan)
        return {"protocol": "toy", "rows": {"a": log.run("score", lambda: 0.5)}}

    toy = Family(load=lambda cfg, log: tiny_benchmark(), plan=lambda cfg, given, scale=1: scale,
                 key_parts=lambda cfg, plan: [plan], evaluate=evaluate, main_table=lambda res: "TOY TABLE",
                 tables=lambda res: f"# toy {res['rows']['a']}\n", results_version=1)
    monkeypatch.setitem(run_mod.FAMILIES, "toy", toy)
    cfg = default_config("toy")
    lines = []
    res = run_mod.run_benchmark(cfg, tmp_path, encoder=BagOfWordsEncoder(), report_to=lines.append)
    saved = json.loads((tmp_path / "toy" / "results.json").read_text())
    assert set(RUN_FIELDS) <= set(saved) and saved["rows"] == {"a": 0.5} and saved["encoder"] == "test-bow-64"
    assert saved["config"] == json.loads(json.dumps(cfg.to_dict())) and saved["run_key"] == res["run_key"]
    tables = (tmp_path / "toy" / "tables.md").read_text()
    assert tables.startswith("# toy 0.5") and "## Stage timings (s)" in tables and "| score |" in tables
    assert lines[0] == "TOY TABLE" and lines[1].startswith(f"[toy] wrote {tmp_path / 'toy'}/results.json, tables.md")
    run_mod.run_benchmark(cfg, tmp_path, encoder=BagOfWordsEncoder(), report_to=lines.append)  # reused
    assert len(calls) == 1 and lines[-1].startswith("[toy] reusing your run of ")
    again = run_mod.run_benchmark(cfg, tmp_path, encoder=BagOfWordsEncoder(), report_to=lines.append, scale=2)
    assert calls == [1, 2] and again["run_key"] != res["run_key"]  # the family's plan is part of the key
    assert set(run_mod.FAMILIES) >= set(run_mod.ALL_BENCHMARKS)
