"""The `riskrank-jax` command line: a thin shell over the library's functions.

Why thin: every command is a library call, so what the CLI prints a program can compute too.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

import click

from riskrank_jax.cli.options import (cache_dir_option, encoder_option, expand_multi_value_options, key_value_pairs,
                                      memory_budget_option, risk_head_option, seeds_option)
from riskrank_jax.cli.audit_query import audit_command
from riskrank_jax.cli.pins import pins_group
from riskrank_jax.cli.rank import fit_command, rank_command
from riskrank_jax.cli.serve import serve_command
from riskrank_jax.errors import ConfigError, RiskRankError

BENCH_CHOICE = click.Choice(["demo", "ultratool", "sealtools"])
data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=None,
    help="Root holding ultratool/ and seal_tools/ (default: $RISKRANK_DATA; layout: docs/data.md).")


class _Group(click.Group):
    """Reports RiskRankError (bad data, stale cache, ...) as one line on stderr, exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RiskRankError as e:
            click.echo(f"error: {e}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="riskrank-jax")
def cli():
    """Risk-aware reranking for agent tool retrieval (JAX/Flax).

    The main job is `python -m riskrank_jax.sweep`; these commands run its stages one at a time.
    """


@cli.group()
def data():
    """Inspect benchmark data."""


@data.command("stats")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def data_stats(benchmark, data_dir, as_json):
    """Tools, queries per split, gold per query, risk histogram, permission levels."""
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    from riskrank_jax.data import benchmark_stats, load_benchmark

    stats = benchmark_stats(load_benchmark(benchmark, data_dir))
    if as_json:
        click.echo(json.dumps(stats))
        return
    click.echo(f"{stats['benchmark']}: {stats['tools']} tools; protocol: {stats['protocol']}")
    for split, n in stats["splits"].items():
        click.echo(f"  {split:>10}: {n:5d} queries, mean gold {stats['mean_gold'][split]:.3f}, "
                   f"{stats['high_risk_queries'][split]} with a gold tool of risk ≥ 3")
    hist = stats["risk_histogram"]
    click.echo("  risk levels 1..5: " + " / ".join(str(hist[str(r)]) for r in range(1, 6)))
    click.echo(f"  tools with perm_level ≥ 2: {stats['perm_level_ge2']}")
    for k, v in stats["mapped"].items():
        click.echo(f"  {k.replace('_', ' ')}: {v}")


@cli.command("evaluate-baseline")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@click.option("--retriever", type=click.Choice(["bm25", "dense"]), default="bm25", show_default=True)
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--k", type=int, default=5, show_default=True, help="Cut-off of the @5 metrics.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {split: {metric: value}}.")
def evaluate_baseline(benchmark, retriever, data_dir, cache_dir, encoder, k, as_json):
    """The metrics of docs/metrics.md for a retrieval baseline (BM25 or frozen-encoder cosine) on the test split(s)."""
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    import numpy as np
    from riskrank_jax import metrics
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.retrieve import baselines, first_stage

    bench = load_benchmark(benchmark, data_dir)
    out = {}
    for split, qs in bench.tests.items():
        if retriever == "bm25":
            scores = baselines.bm25_scores(list(bench.tools.descriptions), list(qs.texts))
        else:
            # deferred: the encoder (transformers) loads only for the dense retriever
            from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
            from riskrank_jax.encode.families import load_encoder

            enc = load_encoder(encoder)
            cache = EmbeddingCache(cache_dir)
            scores = first_stage.dense_scores(embed_texts(enc, list(qs.texts), cache),
                                             embed_texts(enc, list(bench.tools.descriptions), cache))
        pq = metrics.compute_all(baselines.rank_full(scores), qs.gold, bench.tools.risk, k=k)
        vals = {m: float(v) for m, v in metrics.mean_metrics({m: pq[m] for m in metrics.METRIC_KEYS[:8]}).items()}
        vals.update({m: float(v) for m, v in metrics.context_metrics(pq).items()})
        out[split] = {m: (None if np.isnan(v) else round(v, 6)) for m, v in vals.items()}
    if as_json:
        click.echo(json.dumps({"benchmark": benchmark, "retriever": retriever, "protocol": bench.protocol,
                               "metrics": out}))
        return
    for split, vals in out.items():
        click.echo(f"{benchmark} {split} ({bench.tests[split].size} queries), {retriever}:")
        for m, v in vals.items():
            click.echo(f"  {m:>16s}: {'n/a' if v is None else f'{v:.4f}'}")


@cli.command("embed")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--batch-size", type=int, default=64, show_default=True)
def embed(benchmark, data_dir, cache_dir, encoder, batch_size):
    """Precompute and cache the embedding of every tool and query text of a benchmark."""
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts_with_stats
    from riskrank_jax.encode.families import load_encoder

    bench = load_benchmark(benchmark, data_dir)
    enc = load_encoder(encoder)
    cache = EmbeddingCache(cache_dir)
    groups = {"tools": list(bench.tools.descriptions), "train": list(bench.train.texts)}
    groups.update({split: list(qs.texts) for split, qs in bench.tests.items()})
    texts = [t for g in groups.values() for t in g]
    t0 = time.perf_counter()
    vecs, stats = embed_texts_with_stats(enc, texts, cache, batch_size=batch_size)
    click.echo(f"{benchmark}: encoder {enc.model_id} (dim {enc.dim}, {enc.pooling} pooling)")
    click.echo("  texts: " + ", ".join(f"{k} {len(v)}" for k, v in groups.items())
               + f"; {stats.n_unique} unique")
    click.echo(f"  {stats.summary()}")
    click.echo(f"  total {time.perf_counter() - t0:.1f}s; embeddings {vecs.shape} in {cache.model_dir(enc.model_id)}")


def _train_sets(ctx, param, values) -> tuple[tuple[str, str], ...]:
    pairs = key_value_pairs(values, "--set", "train.epochs=5")
    bad = [path for path, _ in pairs if not path.startswith("train.")]
    if bad:
        raise click.BadParameter(f"train sets leaves of train.* only, got {', '.join(bad)}", param_hint="--set")
    return pairs


def _train_config(benchmark: str, flags: dict, sets):
    """The tree's TrainConfig for ``benchmark`` with the flags given (None: not given), then the --set leaves."""
    # deferred: the config tree imports the training code (JAX), which `--help` does not need
    from riskrank_jax.experiments.config import default_config

    try:
        tree = default_config(benchmark, {k: v for k, v in flags.items() if v is not None}, dict(sets))
    except (ConfigError, ValueError) as e:
        raise click.BadParameter(str(e), param_hint="--set") from None
    return tree.train


@cli.command("train")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@seeds_option
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Checkpoint root (default: checkpoints/); the run lands in <root>/<benchmark>/<run>/.")
@click.option("--lambda-aware", is_flag=True, default=None,
              help="Train L_rel on f_rel - λ f_risk, one model per λ (docs/method.md §3). Leaf train.lambda_aware.")
@click.option("--lambdas", type=float, multiple=True, default=None,
              help="λ grid of --lambda-aware. Leaf train.lambdas (default: the tree's, see --show-config).")
@click.option("--rel-features", type=click.Choice(["concat", "interact"]), default=None,
              help="'interact' (beyond the paper) adds E(q)*E(t), |E(q)-E(t)| and the cosine to the input. "
                   "Leaf train.rel_features (default: concat, the paper's).")
@click.option("--negatives", type=click.Choice(["uniform", "hard", "mixed"]), default=None,
              help="Beyond the paper: 'hard' draws every negative from the frozen encoder's top-50; 'mixed' draws "
                   "2 of the 5 there and 3 uniformly. Leaf train.negative_sampling (default: uniform, the paper's).")
@click.option("--epochs", type=int, default=None, help="Leaf train.epochs (default: the tree's, see --show-config).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", callback=_train_sets,
              help="Set any leaf of train.* of the config tree, after the flags: --set train.negatives=10.")
@click.option("--show-config", is_flag=True, help="Print the resolved train.* leaves as JSON and exit.")
@memory_budget_option
def train(benchmark, seeds, data_dir, cache_dir, encoder, checkpoint_dir, lambda_aware, lambdas, rel_features,
          negatives, epochs, sets, show_config, memory_budget):
    """Train every seed x fold (x λ) model of a benchmark in one jitted, vmapped program.

    The run's TrainConfig is the sweep's config tree's ``train`` (its defaults, then these flags, then --set):
    one place for the defaults, as `python -m riskrank_jax.sweep` reads them."""
    cfg = _train_config(benchmark, {"train.lambda_aware": lambda_aware, "train.lambdas": tuple(lambdas) or None,
                                    "train.rel_features": rel_features, "train.negative_sampling": negatives,
                                    "train.epochs": epochs}, sets)
    if show_config:
        click.echo(json.dumps(dataclasses.asdict(cfg), indent=1))
        return
    lambda_aware, rel_features, negatives = cfg.lambda_aware, cfg.rel_features, cfg.negative_sampling

    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `riskrank-jax --help`
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.experiments.stages import embed_all, train_run
    from riskrank_jax.paths import default_checkpoint_dir

    bench = load_benchmark(benchmark, data_dir)
    enc = load_encoder(encoder)
    emb = embed_all(bench, enc, EmbeddingCache(cache_dir))
    name = "lambda_aware" if lambda_aware else ("core" if (rel_features, negatives) == ("concat", "uniform")
                                                 else f"{rel_features}-{negatives}")
    root = Path(checkpoint_dir).resolve() if checkpoint_dir else default_checkpoint_dir()
    t0 = time.perf_counter()
    res = train_run(bench, emb, seeds, cfg, name, enc.model_id, root, memory_budget=memory_budget)
    _echo_training(bench, seeds, cfg, res, time.perf_counter() - t0, root)


def _echo_training(bench, seeds, cfg, res, seconds: float, root) -> None:
    """train's report: the models, each one's best epoch and held-out loss, the checkpoint."""
    # deferred: numpy loads when a command runs, not for `riskrank-jax --help`
    import numpy as np

    click.echo(f"{bench.name}: {res.n_models} models ({len(seeds)} seeds x {bench.n_folds} folds"
               + (f" x {len(cfg.lambdas)} λ" if cfg.lambda_aware else "")
               + f") in {seconds:.1f}s; protocol {bench.protocol}")
    held = np.asarray(res.heldout_loss)
    for m, ix in enumerate(res.model_index):
        b = int(res.best_epoch[m])
        click.echo(f"  model {m:2d} {ix}: best epoch {b + 1}/{held.shape[1]}, held-out loss {held[m, b]:.5f}")
    click.echo(f"  checkpoint: {res.run_config.get('checkpoint_dir', root / bench.name)}")


@cli.group()
def graph():
    """Inspect the ToolGraph."""


@graph.command("stats")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--json", "as_json", is_flag=True,
              help='Print one JSON object: {"benchmark", "protocol", "graphs": [one entry per graph, with its "fold"]}.')
def graph_stats(benchmark, data_dir, cache_dir, encoder, as_json):
    """Nodes, edges per type and in total, tools with a neighbour, perm_level ≥ 2 tools."""
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.graph import tool_graph

    bench = load_benchmark(benchmark, data_dir)
    t_emb = embed_texts(load_encoder(encoder), list(bench.tools.descriptions), EmbeddingCache(cache_dir))
    graphs = tool_graph.build_fold_graphs(t_emb, bench.tools.perm_mask, bench.tools.risk, bench.train.gold,
                                         bench.train_fold_mask)
    stats = [tool_graph.stats(g, bench.tools.perm_level) for g in graphs]
    if as_json:
        click.echo(json.dumps({"benchmark": benchmark, "protocol": bench.protocol,
                               "graphs": [{"fold": f, **st} for f, st in enumerate(stats)]}))
        return
    click.echo(f"{benchmark}: protocol {bench.protocol}")
    for f, st in enumerate(stats):
        label = f"fold {f}" if len(stats) > 1 else "graph"
        click.echo(f"  {label}: {json.dumps(st)}")


@cli.group()
def registry():
    """Your own tool registries: MCP tools/list, OpenAI or Anthropic tool lists, plain JSON/JSONL, BEIR corpora."""


@registry.command("audit")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: tools, warnings, summary.")
@click.option("--csv", "as_csv", is_flag=True, help="Print one CSV row per tool.")
@click.option("--trust-annotations", is_flag=True,
              help="Let an MCP readOnlyHint: true lower a tool's risk (by default annotations only raise it).")
@risk_head_option
@cache_dir_option
@encoder_option
def registry_audit(files, as_json, as_csv, trust_annotations, risk_head, cache_dir, encoder):
    """Every tool of FILE... with its risk level, its risk dimensions and their sources, what the gateway's
    default policy would do with a call to it, permission categories and warnings.

    Formats are detected per file; several files merge into one registry (names used by more than one
    file become source/name). Risk: a declared `risk` first, else the dimensions of what the tool does
    (the learned risk model, keywords, MCP annotations under the specification's defaults); with --risk-head
    the level rule of that head instead (see docs/registry.md).
    """
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    from riskrank_jax.cli import audit as audit_lib
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.model.risk_head import RiskHead
    from riskrank_jax.registry import load_registry
    from riskrank_jax.registry.risk import RiskPolicy

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    reg = _load_registry_quietly(load_registry, files)
    head = RiskHead.load(risk_head) if risk_head else None
    policy = RiskPolicy(trust_annotations=trust_annotations)
    enc = load_encoder(encoder) if any(r is None for r in reg.declared_risk) else None
    report = audit_lib.audit(reg, policy=policy, risk=audit_lib.assess(reg, enc, EmbeddingCache(cache_dir), head, policy))
    if as_json:
        click.echo(json.dumps(report))
        return
    for w in reg.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(audit_lib.to_csv(report["tools"]) if as_csv else audit_lib.to_text(report), nl=not as_csv)


def _load_registry_quietly(load, files):
    """load(files) with its RegistryWarnings kept in Registry.warnings instead of printed by Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(list(files))


@cli.command("fit-risk")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--benchmark", type=BENCH_CHOICE, default=None,
              help="Train on a benchmark's audited labels instead of FILE... (whose tools must all declare risk).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="Where to save the head (.npz).")
@click.option("--no-params", is_flag=True,
              help="Embed benchmark tools without their parameters (much faster for Seal-Tools' long schemas).")
@click.option("--epochs", type=int, default=None, help="Training epochs (default: HeadConfig's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cv", "folds", type=int, default=5, show_default=True,
              help="Report k-fold cross-validated AUC (r >= 3) and Spearman rho first; 0 skips it.")
@data_dir_option
@cache_dir_option
@encoder_option
def fit_risk(files, benchmark, out_path, no_params, epochs, seed, folds, data_dir, cache_dir, encoder):
    """Train a risk head on a labelled registry (FILE... with `risk` on every tool) or a benchmark's labels."""
    # deferred: the command's library (numpy, JAX) loads when it runs, not for `riskrank-jax --help`
    import numpy as np
    from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.model.risk_head import HeadConfig, RiskHead, train_risk_head
    from riskrank_jax.registry.labelled import benchmark_tools, registry_tools
    from riskrank_jax.registry.risk_agreement import cross_val_scores, score_report

    if bool(files) == bool(benchmark):
        raise click.UsageError("give either FILE... or --benchmark NAME")
    data = (benchmark_tools(benchmark, data_dir, with_params=not no_params) if benchmark
            else _load_registry_quietly(registry_tools, files))
    cfg = HeadConfig(seed=seed) if epochs is None else HeadConfig(seed=seed, epochs=epochs)
    enc = load_encoder(encoder)
    emb = embed_texts(enc, list(data.texts), EmbeddingCache(cache_dir))
    hist = np.bincount(data.risk, minlength=6)[1:]
    click.echo(f"{data.name}: {len(data.risk)} tools, risk levels 1..5: {' / '.join(map(str, hist))}")
    metrics = {}
    if folds > 1:
        metrics[f"{folds}fold_cv"] = score_report(cross_val_scores(emb, data.risk, folds, cfg), data.risk)
        click.echo(f"  {folds}-fold CV: AUC(r>=3) {metrics[f'{folds}fold_cv']['auc_r>=3']:.3f}, "
                   f"Spearman rho {metrics[f'{folds}fold_cv']['spearman']:.3f}")
    params, losses = train_risk_head(emb, data.risk, cfg)
    head = RiskHead(params, enc.model_id, data.name, len(data.risk), cfg, metrics=metrics)
    click.echo(f"  trained {cfg.epochs} epochs (final MSE {losses[-1]:.5f}); saved {head.save(out_path)}")


cli.add_command(rank_command)  # commands defined in their own modules
cli.add_command(fit_command)
cli.add_command(serve_command)
cli.add_command(pins_group)
cli.add_command(audit_command)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.main(args=expand_multi_value_options(argv), prog_name="riskrank-jax")


if __name__ == "__main__":
    sys.exit(main())
