"""The paper's benchmarks (demo, UltraTool, Seal-Tools) as a family of the sweep skeleton (``experiments.run``):
train what the declared variants need, build the ToolGraph(s), evaluate every variant on every split.

    PAPER.plan(cfg, False)  -> the selected variants (``experiments.variants``)
    PAPER.evaluate(cfg, bench, encoder, variants, log) -> results.json's sections (main, lambda_sweep, stress, ...)

For each benchmark: embed every text once (cached), train each training run the selected variants need in one
vmapped program (checkpoints reused), build the ToolGraph(s), then evaluate the variants with the evaluation
vectorised over queries, seeds and λ values. Built as one family record so that these benchmarks and LiveMCPBench
walk down the same skeleton, which owns run keys, reuse, results.json and the closing lines.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import numpy as np

from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.experiments import beyond, cross, intent, report, tuned
from riskrank_jax.experiments.config import SweepConfig
from riskrank_jax.experiments.evaluate import (CONTEXT_METRICS, RESULT_METRICS, EvalSettings, SplitEvaluation,
                                               SplitInputs, dense_top, full_pool_graphs, map_query_chunks, pick,
                                               queries_per_chunk, reduce_queries, rows_per_query, select_stress_queries,
                                               variant_metrics, with_first_stages)
from riskrank_jax.experiments.family import Family
from riskrank_jax.experiments.reproducibility import REPRODUCIBILITY
from riskrank_jax.experiments.stages import (StageLog, embed_all, risk_only_scores, train_lambda_run, train_run,
                                             training_summary)
from riskrank_jax.experiments.throughput import smoothing_throughput
from riskrank_jax.experiments.variants import TRAINING_RUNS, select_variants
from riskrank_jax.graph import tool_graph
from riskrank_jax.model.cross_encoder import CrossEncoderConfig
from riskrank_jax.model.encoder_tune import TuneConfig
from riskrank_jax.model.intent_model import IntentConfig
from riskrank_jax.model.rerank import RerankConfig
from riskrank_jax.model.risk_head import RiskHeadConfig
from riskrank_jax.model.train_config import TrainConfig, plain_config

# bumped when results.json's sections of this family change meaning: part of the run key
RESULTS_VERSION = 2


# ---------------------------------------------------------------------------------------------- stages


def train_all(cfg: SweepConfig, log: StageLog, bench, emb, variants, encoder, ckpt_root: Path) -> dict:
    """{run name: TrainResult, the risk-only heads' predicted risk [S, N], RerankModels or TunedModels} for the
    runs variants need."""
    encoder_id = encoder.model_id
    needed = set().union(*(v.runs() for v in variants))
    runs = {}
    if uses_first_stages(variants):
        runs["first_stages"] = log.run("fit hybrid first stages", beyond.fit_first_stages, bench, emb)
        runs["hybrid_weights"] = runs["first_stages"].weights
    for name, run in TRAINING_RUNS.items():
        if name not in needed:
            continue
        run_cfg = run.make(cfg, bench.tools.size)
        if isinstance(run_cfg, IntentConfig):
            effects = intent.benchmark_effects(bench, emb.get("tools_named"), encoder_id)
            runs[name] = log.run(f"train {run.label}", intent.fit_intent, bench, effects, run_cfg)
        elif isinstance(run_cfg, CrossEncoderConfig):
            runs[name] = log.run(f"train {run.label}", cross.fit_cross_encoders, bench, runs["first_stages"], cfg,
                                 cfg.encoder.path, ckpt_root)
        elif isinstance(run_cfg, TuneConfig):
            runs[name] = log.run(f"train {run.label}", tuned.fit_tuned_encoders, bench, emb, runs["first_stages"], cfg,
                                 encoder, ckpt_root)
        elif isinstance(run_cfg, RerankConfig):
            runs[name] = log.run(f"train {run.label}", beyond.fit_rerankers, bench, emb, runs["first_stages"],
                                 cfg.seeds, run_cfg, memory_budget=cfg.runtime.memory_budget)
        elif isinstance(run_cfg, RiskHeadConfig):
            runs[name] = log.run(f"train {run.label}", risk_only_scores, emb["tools"], bench.tools.risk, cfg.seeds,
                                 run_cfg)
        elif reuses_plain_run(run_cfg, runs.get("core")):  # its λ = 0 models are the core run's
            runs[name] = log.run(f"train {run.label}", train_lambda_run, bench, emb, cfg.seeds, run_cfg,
                                 runs["core"], name, encoder_id, ckpt_root, memory_budget=cfg.runtime.memory_budget)
        else:
            runs[name] = log.run(f"train {run.label}", train_run, bench, emb, cfg.seeds, run_cfg, name, encoder_id,
                                 ckpt_root, memory_budget=cfg.runtime.memory_budget)
    return runs


def tunable_rows(variants, encoder) -> tuple[list, dict]:
    """(the variants this encoder can run, {row: why not} for the tuned-encoder rows when the encoder is not a
    BERT model whose layers can be trained, e.g. a test's stand-in encoder)."""
    if hasattr(encoder, "lower_states") or hasattr(encoder, "load"):
        return list(variants), {}
    why = f"not run: the encoder {encoder.model_id} has no BERT layers to fine-tune"
    skipped = {v.name: why for v in variants if "tuned" in v.runs()}
    if skipped:
        click.echo(f"[tuned encoder] {len(skipped)} ft_* rows not run: {why[9:]}", err=True)
    return [v for v in variants if v.name not in skipped], skipped


def reuses_plain_run(run_cfg, plain) -> bool:
    """Whether the λ-aware run ``run_cfg`` can take its λ = 0 models from the trained plain run ``plain``."""
    return (isinstance(run_cfg, TrainConfig) and run_cfg.lambda_aware and 0.0 in run_cfg.lambdas
            and plain is not None and plain_config(plain.config) == plain_config(run_cfg))


def uses_first_stages(variants) -> bool:
    """Whether any variant needs the hybrid first stage (and so the named tool texts)."""
    return any(v.relevance in ("hybrid", "rerank", "ft_hybrid") or v.first_stage == "hybrid" or v.tool_text == "named"
               for v in variants)


def build_graphs(bench, emb, config: tool_graph.GraphConfig = tool_graph.GraphConfig()) -> dict[str, list]:
    """{"train": one ToolGraph per fold (co-occurrence from its training queries), "registry": [graph without
    co-occurrence edges]}, both built with ``config``."""
    tools = bench.tools
    fold_graphs = tool_graph.build_fold_graphs(emb["tools"], tools.perm_mask, tools.risk, bench.train.gold,
                                              bench.train_fold_mask, config)
    empty_gold = np.full((1, 1), -1, np.int32)
    return {"train": fold_graphs,
            "registry": [tool_graph.build_tool_graph(emb["tools"], tools.perm_mask, tools.risk, empty_gold, config)]}


def budget_lambdas(cfg: SweepConfig, bench, emb, runs, variants) -> dict:
    """{budget row: {B: (λ per model, held-out RVR@5 per model)}} for the families the variants include."""
    names = {v.name for v in variants}
    return {row: beyond.choose_budget_lambdas(family, bench, emb, runs["first_stages"], runs, cfg.seeds)
            for row, family in beyond.BUDGET_FAMILIES.items()
            if row in names and "risk_only" in runs and (family != "rerank" or "rerank" in runs)}


def split_inputs(bench, emb, split) -> SplitInputs:
    qs = bench.tests[split]
    return SplitInputs(q_emb=np.asarray(emb[split]), fold=np.asarray(bench.test_fold[split]), gold=qs.gold,
                       query_texts=tuple(qs.texts), t_emb=np.asarray(emb["tools"]), risk_levels=bench.tools.risk,
                       perm_level=bench.tools.perm_level, tool_texts=tuple(bench.tools.descriptions),
                       named_t_emb=emb.get("tools_named"), named_tool_texts=bench.tools.named_texts)


def evaluate_split(cfg: SweepConfig, bench, emb, split, runs, graphs, variants, budgets=None) -> dict:
    """Every section of results.json for one split: main, context, lambda_sweep, edge_ablation, stress and
    (with ``budgets``, {family: chosen λs}) risk_budget. Queries are evaluated in chunks sized so the
    evaluation's intermediates stay within ``cfg.runtime.memory_budget`` bytes (results do not depend on it)."""
    ev_cfg, memory_budget = cfg.eval, cfg.runtime.memory_budget
    settings = EvalSettings(tuple(ev_cfg.lambdas), ev_cfg.main_lambda, float(ev_cfg.alpha), ev_cfg.k,
                            ev_cfg.n_candidates, len(cfg.seeds), memory_budget, rule=cfg.rule_filter,
                            intent=(ev_cfg.intent_strength, ev_cfg.intent_relief, ev_cfg.intent_agreement,
                                    ev_cfg.intent_specific))
    inputs = with_first_stages(split_inputs(bench, emb, split),
                          ("description", "named") if uses_first_stages(variants) else ("description",))
    if "tuned" in runs:
        inputs = tuned.with_tuned(inputs, runs["tuned"], split, len(cfg.seeds))
    if "intent" in runs:
        inputs = intent.with_intent(inputs, runs["intent"])
    if "cross_encoder" in runs:
        inputs = cross.with_cross(inputs, runs["cross_encoder"], len(cfg.seeds), cfg.cross_encoder.top)
    inputs, not_run = with_baseline_rerankers(inputs, variants)
    variants = [v for v in variants if v.name not in not_run]
    budgets = budgets or {}
    full_graphs = full_pool_graphs(graphs, variants)

    def one_chunk(xc):
        ev = SplitEvaluation(xc, runs, graphs, settings, full_graphs)
        return variant_metrics(ev, variants), {
            row: beyond.budget_per_query(ev, chosen, beyond.BUDGET_FAMILIES[row], runs["risk_only"], len(cfg.seeds),
                                         bench.n_folds) for row, chosen in budgets.items()}

    chunk = queries_per_chunk(inputs.q_emb.shape[0], inputs.t_emb.shape[0], rows_per_query(variants, settings),
                              memory_budget)
    per_variant, budget_pq = map_query_chunks(one_chunk, inputs, chunk)
    pq, sweeps, edges = {}, {}, {}
    for v in variants:
        main_pq, grid_pq = per_variant[v.name]
        if main_pq is not None and "main" in v.tables:
            pq[v.name] = main_pq
        if main_pq is not None and "edges" in v.tables:
            edges[v.name] = main_pq
        if grid_pq is not None:
            sweeps[v.name] = grid_pq
    reduced = {v: reduce_queries(x) for v, x in pq.items()}
    main = {v: pick(r, RESULT_METRICS) for v, r in reduced.items()}
    qs = bench.tests[split]
    idx, rule_text = select_stress_queries(dense_top(inputs.first["dense", "description"]), qs.gold, bench.tools.risk,
                                           ev_cfg.stress_n)
    stress_rows = [v.name for v in variants if "stress" in v.tables and v.name in pq]
    return {
        "main": main,
        "context": {v: pick(r, CONTEXT_METRICS) for v, r in reduced.items()},
        "lambda_sweep": {v: {str(lv): pick(reduce_queries(x), RESULT_METRICS) for lv, x in d.items()}
                         for v, d in sweeps.items()},
        "edge_ablation": {n: pick(reduce_queries(x), RESULT_METRICS) for n, x in edges.items()},
        "stress": {"n": int(idx.size), "selection_rule": rule_text, "query_ids": [qs.ids[i] for i in idx],
                   "rows": {v: pick(reduce_queries(pq[v], where=idx), ("ndcg@5", "rvr@5", "srr@5"))
                            for v in (stress_rows if idx.size else [])}},
        "exposure": {v.name: {m: main[v.name][m] for m in ("rvr@5", "srr@5")}
                     for v in variants if "exposure" in v.tables and v.name in main},
        "risk_budget": {row: beyond.risk_budget_section(chosen, budget_pq[row]) for row, chosen in budgets.items()},
        "not_run": not_run,
    }


def with_baseline_rerankers(inputs: SplitInputs, variants) -> tuple[SplitInputs, dict]:
    """``inputs`` with the relevance of every baseline-reranker variant the sweep includes, and {variant: why it
    did not run} for those whose weights are absent (those rows are then reported, not evaluated)."""
    not_run, first = {}, dict(inputs.first)
    for v in variants:
        if v.relevance == "reranker":
            rel = cross.baseline_relevance(v.reranker, inputs)
            if isinstance(rel, str):
                not_run[v.name] = rel
            else:
                first[f"reranker:{v.reranker}", "description"] = rel
    return dataclasses.replace(inputs, first=first), not_run


def results_header(cfg: SweepConfig, bench, graphs, runs) -> dict:
    """results.json's sections before the evaluation fills them: the protocol, the settings, the graphs' and the
    training runs' summaries, an empty section per table."""
    graph_stats = [tool_graph.stats(g, bench.tools.perm_level) for g in graphs["train"]]
    return {
        "protocol": bench.protocol, "seeds": list(cfg.seeds), "lambdas": list(cfg.eval.lambdas),
        "main_lambda": cfg.eval.main_lambda, "alpha": float(cfg.eval.alpha), "k": cfg.eval.k, "n_candidates": cfg.eval.n_candidates,
        "main_split": cfg.data.main_split, "splits": {s: q.size for s, q in bench.tests.items()},
        "graph": graph_stats[0] if len(graph_stats) == 1 else {"per_fold": graph_stats},
        "training": {name: training_summary(r) for name, r in runs.items() if hasattr(r, "best_epoch")},
        "hybrid_weights": {k: np.asarray(w).tolist() for k, w in runs.get("hybrid_weights", {}).items()},
        "rerank": beyond.rerank_summary(runs["rerank"]) if "rerank" in runs else None,
        "tuned_encoder": tuned.tuned_summary(runs["tuned"]) if "tuned" in runs else None,
        "cross_encoder": cross.cross_summary(runs["cross_encoder"]) if "cross_encoder" in runs else None,
        "main": {}, "lambda_sweep": {}, "edge_ablation": {}, "context": {}, "stress": {}, "exposure": {},
        "risk_budget": {}, "not_run": {},
        "std": "sample standard deviation over seeds (ddof=1); baselines without seeds have std 0",
    }


# ---------------------------------------------------------------------------------------------- the family's steps


def load(cfg: SweepConfig, log: StageLog):
    """The benchmark ``cfg.benchmark`` from the data directory (the demo is embedded)."""
    return log.run("load data", load_benchmark, cfg.benchmark, cfg.data.data_dir)


def plan(cfg: SweepConfig, bench_given: bool) -> tuple:
    """The variants ``cfg.eval.variants`` selects (``experiments.variants``)."""
    return select_variants(cfg.eval.variants)


def key_parts(cfg: SweepConfig, variants) -> list:
    """Besides the config, data and encoder, the run key hashes each variant's spec."""
    return [[v.spec() for v in variants]]


def evaluate(cfg: SweepConfig, bench, encoder, variants, log: StageLog) -> dict:
    """results.json's sections for the benchmark: embed, train the runs ``variants`` need, build the graphs, then
    per split main, context, lambda_sweep, edge_ablation, stress, exposure, risk_budget, not_run and
    recommendation; the smoothing throughput unless ``cfg.eval.smoothing_benchmark`` is off."""
    emb = log.run("embed (cached)", embed_all, bench, encoder, EmbeddingCache(cfg.runtime.cache_dir),
                  named=uses_first_stages(variants))
    variants, skipped = tunable_rows(variants, encoder)
    runs = train_all(cfg, log, bench, emb, variants, encoder, cfg.runtime.checkpoint_root())
    graphs = log.run("build ToolGraph(s)", build_graphs, bench, emb, cfg.graph)
    results = results_header(cfg, bench, graphs, runs)
    results["variant_families"] = {v.name: v.family for v in variants}
    budgets = log.run("choose λ per risk budget", budget_lambdas, cfg, bench, emb, runs, variants)
    for split in bench.tests:
        sections = log.run(f"evaluate {split}", evaluate_split, cfg, bench, emb, split, runs, graphs, variants,
                           budgets)
        sections["not_run"] = {**skipped, **sections["not_run"]}
        for name, value in sections.items():
            results[name][split] = value
        results.setdefault("recommendation", {})[split] = beyond.recommendation(results["main"][split],
                                                                                 results["variant_families"])
    if cfg.eval.smoothing_benchmark:
        results["smoothing_throughput"] = log.run(
            "smoothing throughput benchmark", smoothing_throughput, graphs["train"][0],
            n_queries=next(iter(bench.tests.values())).size,
            n_candidates=min(cfg.eval.n_candidates, bench.tools.size))
    return results


PAPER = Family(load=load, plan=plan, key_parts=key_parts, evaluate=evaluate, main_table=report.main_table_text,
               tables=report.tables_markdown, results_version=RESULTS_VERSION, figures=report.plot_figures,
               reproducibility=REPRODUCIBILITY)


__all__ = ["PAPER", "RESULTS_VERSION", "load", "plan", "key_parts", "evaluate", "train_all", "build_graphs",
           "budget_lambdas", "evaluate_split", "split_inputs", "uses_first_stages", "tunable_rows"]
