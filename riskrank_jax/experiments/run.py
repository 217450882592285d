"""The sweep of one benchmark (``run_benchmark``) and of several (``run_tasks``): the paper's experiments and the
beyond-paper variants in one run; the command line is ``riskrank_jax.sweep``.

What a sweep computes is one ``experiments.config.SweepConfig`` tree. For each benchmark: embed every text
once (cached), train each training run the selected variants need in one vmapped program (checkpoints reused),
build the ToolGraph(s), then evaluate the declared variants (``experiments.variants``) with the evaluation
vectorised over queries, seeds and λ values. Built as one config tree in, one results tree out, so that a run is
reproduced from its results.json "config" alone. Writes
<out>/<benchmark>/{results.json, tables.md, lambda_sweep.png, tradeoff.png, pareto.png}.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import time
from datetime import datetime
from pathlib import Path

import click
import jax
import numpy as np

from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.encoder import load_encoder_lazily
from riskrank_jax.errors import RiskRankError
from riskrank_jax.experiments import beyond, cross, report, tuned
from riskrank_jax.experiments.config import SweepConfig
from riskrank_jax.experiments.evaluate import (CONTEXT_METRICS, RESULT_METRICS, EvalSettings, SplitEvaluation,
                                               SplitInputs, dense_top, full_pool_graphs, map_query_chunks, pick,
                                               queries_per_chunk, reduce_queries, rows_per_query, select_stress_queries,
                                               variant_metrics, with_first_stages)
from riskrank_jax.experiments.jobs import run_in_workers
from riskrank_jax.experiments.reproducibility import REPRODUCIBILITY
from riskrank_jax.experiments.stages import (StageLog, embed_all, risk_only_scores, short_hash, train_lambda_run,
                                             train_run, training_summary)
from riskrank_jax.experiments.throughput import smoothing_throughput
from riskrank_jax.experiments.variants import TRAINING_RUNS, select_variants
from riskrank_jax.graph import tool_graph
from riskrank_jax.model.rerank import RerankConfig
from riskrank_jax.model.cross_encoder import CrossEncoderConfig
from riskrank_jax.model.encoder_tune import TuneConfig
from riskrank_jax.model.risk_head import RiskHeadConfig
from riskrank_jax.model.train_config import TrainConfig, plain_config
from riskrank_jax.paths import default_checkpoint_dir, resolve_cache_dir
from riskrank_jax.runtime import compile_cache

ALL_BENCHMARKS = ("demo", "ultratool", "sealtools", "livemcpbench")
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
        if isinstance(run_cfg, CrossEncoderConfig):
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
                            ev_cfg.n_candidates, len(cfg.seeds), memory_budget, rule=cfg.rule_filter)
    inputs = with_first_stages(split_inputs(bench, emb, split),
                          ("description", "named") if uses_first_stages(variants) else ("description",))
    if "tuned" in runs:
        inputs = tuned.with_tuned(inputs, runs["tuned"], split, len(cfg.seeds))
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


def results_header(cfg: SweepConfig, bench, encoder_id: str, graphs, runs) -> dict:
    graph_stats = [tool_graph.stats(g, bench.tools.perm_level) for g in graphs["train"]]
    return {
        "benchmark": bench.name, "protocol": bench.protocol, "encoder": encoder_id,
        "seeds": list(cfg.seeds), "lambdas": list(cfg.eval.lambdas), "main_lambda": cfg.eval.main_lambda,
        "alpha": float(cfg.eval.alpha), "k": cfg.eval.k, "n_candidates": cfg.eval.n_candidates,
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


# ---------------------------------------------------------------------------------------------- one benchmark


def _previous_results(path: Path, run_key: str):
    try:
        prev = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return prev if isinstance(prev, dict) and prev.get("run_key") == run_key else None


def _finish(res: dict, out_dir: Path, reused: bool, seconds: float, report_to) -> dict:
    """The last lines of a benchmark's run, each given to ``report_to``: its main table, then where its files are."""
    report_to(report.main_table_text(res))
    if reused:
        when = res.get("finished_at") or datetime.fromtimestamp((out_dir / "results.json").stat().st_mtime) \
            .astimezone().isoformat(timespec="seconds")
        report_to(f"[{res['benchmark']}] reusing your run of {when} in {out_dir} (same configuration, data and "
                  "encoder); --force recomputes")
    else:
        report_to(f"[{res['benchmark']}] wrote {out_dir}/results.json, tables.md, lambda_sweep.png, tradeoff.png, "
                  f"pareto.png (computed in {seconds:.0f} s)")
    return res


def run_benchmark(cfg: SweepConfig, workdir: Path, *, force: bool = False, bench=None, encoder=None,
                  encoder_loader=load_encoder_lazily, report_to=click.echo, side_by_side: bool = False) -> dict:
    """Run every stage of the sweep ``cfg`` (which determines every result) for its benchmark, write its outputs
    under <workdir>/<benchmark>/ and print its main table (its closing lines go to ``report_to``; stage lines
    always go to stderr). ``side_by_side``: other benchmarks run at the same time (``--jobs``), recorded in
    results.json because the CPU was shared while its timings and smoothing throughput were measured. Without
    ``force``, a results.json there with the same run key (the config minus its non-result leaves, data, encoder,
    variants) is reused and said so. `bench` / `encoder` may be given directly (tests inject a tiny benchmark and
    a fake encoder); otherwise they are loaded by name (the encoder by ``encoder_loader``, by default
    ``load_encoder_lazily``: its weights and tokenizer are loaded only when a text is missing from the embedding
    cache; a run in turn over several benchmarks shares one)."""
    if cfg.benchmark == "livemcpbench":  # zero-shot rows over real MCP servers (experiments.livemcp)
        from riskrank_jax.experiments.livemcp import run_livemcpbench

        return run_livemcpbench(cfg, workdir, force=force, encoder_loader=encoder_loader, report_to=report_to,
                                side_by_side=side_by_side, bench=bench, encoder=encoder)
    t0 = time.perf_counter()
    log = StageLog(cfg.benchmark)
    out_dir = Path(workdir) / cfg.benchmark
    rt = cfg.runtime
    ckpt_root = Path(rt.checkpoint_dir).resolve() if rt.checkpoint_dir else default_checkpoint_dir()
    bench = bench if bench is not None else log.run("load data", load_benchmark, cfg.benchmark, cfg.data.data_dir)
    encoder = encoder if encoder is not None else log.run("load encoder", encoder_loader, cfg.encoder.path)
    variants = select_variants(cfg.eval.variants)
    emb = log.run("embed (cached)", embed_all, bench, encoder, EmbeddingCache(rt.cache_dir),
                  named=uses_first_stages(variants))
    run_key = short_hash([cfg.result_key(), bench.fingerprint(), encoder.model_id, RESULTS_VERSION,
                          [v.spec() for v in variants]])
    if not force and (prev := _previous_results(out_dir / "results.json", run_key)) is not None:
        return _finish(prev, out_dir, True, time.perf_counter() - t0, report_to)

    variants, skipped = tunable_rows(variants, encoder)
    runs = train_all(cfg, log, bench, emb, variants, encoder, ckpt_root)
    graphs = log.run("build ToolGraph(s)", build_graphs, bench, emb, cfg.graph)
    results = results_header(cfg, bench, encoder.model_id, graphs, runs)
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
    results.update(device=f"{jax.devices()[0].platform} x{jax.device_count()}", side_by_side=side_by_side,
                   timings=log.timings, peak_rss_mb=log.peak_rss_mb, memory_budget=rt.memory_budget, run_key=run_key,
                   config=cfg.to_dict(), reproducibility=REPRODUCIBILITY,
                   finished_at=datetime.now().astimezone().isoformat(timespec="seconds"))
    click.echo(f"[{cfg.benchmark}] write results to {out_dir} ...", err=True)
    report.write_outputs(results, out_dir)
    return _finish(results, out_dir, False, time.perf_counter() - t0, report_to)


# ---------------------------------------------------------------------------------------------- several


def run_tasks(tasks, jobs: int, cache_dir=None, *, keep_compiled: bool = True) -> list[str]:
    """The (SweepConfig, run_benchmark keyword arguments: workdir, force, ...) tasks: one task in this process;
    several in worker processes, a fresh one per benchmark, ``jobs`` at a time (1: one after another, the last in
    this process, so the peak memory is the largest benchmark's, not their sum). ``keep_compiled``: compiled programs are kept under
    the embedding cache ``cache_dir`` (None: the default one), in ``xla/``. Returns the error messages (none:
    every benchmark finished)."""
    try:
        xla_root = resolve_cache_dir(cache_dir) if keep_compiled else None
        if len(tasks) > 1:
            return run_side_by_side(tasks, xla_root, jobs)
        return run_in_turn(tasks, xla_root)
    except RiskRankError as e:
        return [str(e)]


def run_in_turn(tasks, compile_cache_root) -> list[str]:
    """Each (SweepConfig, run_benchmark keyword arguments) in turn in this process, sharing one encoder and the
    compiled programs; stops at the first error (raised). Returns [] (the errors of ``run_side_by_side``).
    Memory a benchmark leaves behind (compiled programs, the allocator's pools) stays for the next one."""
    if compile_cache_root is not None:
        compile_cache.enable(compile_cache_root)
    load_once = functools.lru_cache(maxsize=None)(load_encoder_lazily)  # one encoder (compiled shapes) for all
    for cfg, kwargs in tasks:
        run_benchmark(cfg, **kwargs, encoder_loader=load_once)
    return []


# the longest first, so the last to finish is a short one (their stage times: docs/performance.md, "Whole
# sweeps"); other names keep their order, after these
EXPECTED_LONGEST_FIRST = ("ultratool", "sealtools", "demo", "livemcpbench")


def run_side_by_side(tasks, compile_cache_root, jobs: int) -> list[str]:
    """The (SweepConfig, run_benchmark keyword arguments) tasks in worker processes, a fresh one per benchmark,
    ``jobs`` at a time (``experiments.jobs``), the longest first (with ``jobs`` 1 the last one in this process,
    after the others); each benchmark's closing lines are printed when it finishes. A failing benchmark does not
    stop the others; returns the error messages, "[benchmark] message"."""
    rank = {name: i for i, name in enumerate(EXPECTED_LONGEST_FIRST)}
    order = sorted(tasks, key=lambda t: rank.get(t[0].benchmark, len(rank)))
    at_once = min(jobs, len(tasks))
    if at_once > 1:
        click.echo(f"running {len(tasks)} benchmarks, {at_once} at a time, each in a worker process (--jobs); their "
                   "stage lines interleave, each table follows when its benchmark finishes", err=True)
    else:
        click.echo(f"running {len(tasks)} benchmarks one after another, each in a fresh worker process but the last, "
                   "which runs in this one (so the peak memory is the largest one's; --jobs 2 runs two at once)",
                   err=True)
    items = [(*t, compile_cache_root, at_once > 1) for t in order]
    # one at a time, the last runs here: this process would only wait for its worker, whose memory would add
    # to this one's (JAX is loaded here already)
    in_workers, here = (items, []) if at_once > 1 else (items[:-1], items[-1:])
    errors = []
    for (cfg, _, _, _), (lines, error) in itertools.chain(run_in_workers(benchmark_task, in_workers, jobs),
                                                          ((item, benchmark_task(item)) for item in here)):
        for line in lines:
            click.echo(line)
        if error is not None:
            errors.append(f"[{cfg.benchmark}] {error}")
    return errors


def benchmark_task(task) -> tuple[list[str], str | None]:
    """One benchmark in a worker process: task = (SweepConfig, run_benchmark keyword arguments, compilation-cache
    root or None, whether other benchmarks run at the same time). Returns (its closing lines, None), or (lines
    so far, the message of a RiskRankError)."""
    cfg, kwargs, compile_cache_root, side_by_side = task
    if compile_cache_root is not None:
        compile_cache.enable(compile_cache_root)
    lines: list[str] = []
    try:
        run_benchmark(cfg, **kwargs, report_to=lines.append, side_by_side=side_by_side)
    except RiskRankError as e:
        return lines, str(e)
    return lines, None


__all__ = ["run_benchmark", "run_tasks", "run_in_turn", "run_side_by_side", "benchmark_task", "train_all",
           "build_graphs", "evaluate_split", "risk_only_scores", "ALL_BENCHMARKS", "RESULTS_VERSION",
           "REPRODUCIBILITY"]
