"""The `riskrank-jax` command line: a thin shell over the library's functions."""

from __future__ import annotations

import json
import sys
import time

import click

from riskrank_jax.errors import RiskRankError

BENCH_CHOICE = click.Choice(["demo", "ultratool", "sealtools"])
data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=None,
    help="Root holding ultratool/ and seal_tools/ (default: $RISKRANK_DATA; layout: docs/data.md).")
cache_dir_option = click.option(
    "--cache-dir", type=click.Path(file_okay=False), default=None,
    help="Embedding cache (default: $RISKRANK_CACHE, then ~/.cache/riskrank-jax).")
encoder_option = click.option(
    "--encoder", default=None, metavar="PATH",
    help="Local HF-format BERT sentence encoder directory (or hub id when online). Default: the embedded "
         "all-MiniLM-L6-v2.")


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
    from riskrank_jax.data import benchmark_stats, load_benchmark

    stats = benchmark_stats(load_benchmark(benchmark, data_dir))
    if as_json:
        click.echo(json.dumps(stats))
        return
    click.echo(f"{stats['benchmark']}: {stats['tools']} tools; protocol: {stats['protocol']}")
    for split, n in stats["splits"].items():
        click.echo(f"  {split:>10}: {n:5d} queries, mean gold {stats['mean_gold'][split]:.3f}, "
                   f"{stats['high_risk_queries'][split]} with a gold tool of risk >= 3")
    hist = stats["risk_histogram"]
    click.echo("  risk levels 1..5: " + " / ".join(str(hist[str(r)]) for r in range(1, 6)))
    click.echo(f"  tools with perm_level >= 2: {stats['perm_level_ge2']}")
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
    import numpy as np

    from riskrank_jax import metrics, retrievers
    from riskrank_jax.data import load_benchmark

    bench = load_benchmark(benchmark, data_dir)
    out = {}
    for split, qs in bench.tests.items():
        if retriever == "bm25":
            scores = retrievers.bm25_scores(list(bench.tools.descriptions), list(qs.texts))
        else:
            from riskrank_jax.embed_cache import EmbeddingCache, embed_texts
            from riskrank_jax.encoder import load_encoder

            enc = load_encoder(encoder)
            cache = EmbeddingCache(cache_dir)
            scores = retrievers.dense_scores(embed_texts(enc, list(qs.texts), cache),
                                             embed_texts(enc, list(bench.tools.descriptions), cache))
        pq = metrics.compute_all(retrievers.rank_full(scores), qs.gold, bench.tools.risk, k=k)
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
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.embed_cache import EmbeddingCache, embed_texts_with_stats
    from riskrank_jax.encoder import load_encoder

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


@cli.command("train")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@click.option("--seeds", type=int, multiple=True, default=(42, 123, 777), show_default=True,
              help="Repeat for several seeds: --seeds 42 --seeds 123.")
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Checkpoint root (default: checkpoints/); the run lands in <root>/<benchmark>/<run>/.")
@click.option("--lambda-aware", is_flag=True, help="Train L_rel on f_rel - λ f_risk, one model per λ (docs/method.md §3).")
@click.option("--lambdas", type=float, multiple=True, default=(0.0, 0.05, 0.1, 0.2), show_default=True,
              help="λ grid of --lambda-aware.")
@click.option("--rel-features", type=click.Choice(["concat", "interact"]), default="concat", show_default=True,
              help="'interact' (beyond the paper) adds E(q)*E(t), |E(q)-E(t)| and the cosine to the input.")
@click.option("--negatives", type=click.Choice(["uniform", "hard", "mixed"]), default="uniform", show_default=True,
              help="Beyond the paper: 'hard' draws every negative from the frozen encoder's top-50; 'mixed' draws "
                   "2 of the 5 there and 3 uniformly.")
@click.option("--epochs", type=int, default=10, show_default=True)
def train(benchmark, seeds, data_dir, cache_dir, encoder, checkpoint_dir, lambda_aware, lambdas, rel_features,
          negatives, epochs):
    """Train every seed x fold (x λ) model of a benchmark in one jitted, vmapped program."""
    from pathlib import Path

    import numpy as np

    from riskrank_jax.data import load_benchmark
    from riskrank_jax.embed_cache import EmbeddingCache
    from riskrank_jax.encoder import load_encoder
    from riskrank_jax.paths import default_checkpoint_dir
    from riskrank_jax.sweep import SweepConfig, embed_all, train_variant
    from riskrank_jax.train import TrainConfig

    bench = load_benchmark(benchmark, data_dir)
    enc = load_encoder(encoder)
    emb = embed_all(bench, enc, EmbeddingCache(cache_dir))
    cfg = TrainConfig(epochs=epochs, lambda_aware=lambda_aware, lambdas=tuple(lambdas), rel_features=rel_features,
                      negatives=negatives)
    name = "lambda_aware" if lambda_aware else ("core" if (rel_features, negatives) == ("concat", "uniform")
                                                 else f"{rel_features}-{negatives}")
    root = Path(checkpoint_dir).resolve() if checkpoint_dir else default_checkpoint_dir()
    t0 = time.perf_counter()
    res = train_variant(bench, emb, SweepConfig(benchmark=benchmark, seeds=tuple(seeds)), cfg, name,
                        enc.model_id, root)
    dt = time.perf_counter() - t0
    click.echo(f"{benchmark}: {res.n_models} models ({len(seeds)} seeds x {bench.n_folds} folds"
               + (f" x {len(lambdas)} λ" if lambda_aware else "") + f") in {dt:.1f}s; protocol {bench.protocol}")
    held = np.asarray(res.heldout_loss)
    for m, ix in enumerate(res.model_index):
        b = int(res.best_epoch[m])
        click.echo(f"  model {m:2d} {ix}: best epoch {b + 1}/{held.shape[1]}, held-out loss {held[m, b]:.5f}")
    click.echo(f"  checkpoint: {res.run_config.get('checkpoint_dir', root / benchmark)}")


@cli.group()
def graph():
    """Inspect the ToolGraph."""


@graph.command("stats")
@click.option("--benchmark", type=BENCH_CHOICE, default="demo", show_default=True)
@data_dir_option
@cache_dir_option
@encoder_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (per fold when the protocol has folds).")
def graph_stats(benchmark, data_dir, cache_dir, encoder, as_json):
    """Nodes, edges per type and in total, tools with a neighbour, perm_level >= 2 tools."""
    from riskrank_jax import graph as graph_lib
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.embed_cache import EmbeddingCache, embed_texts
    from riskrank_jax.encoder import load_encoder

    bench = load_benchmark(benchmark, data_dir)
    t_emb = embed_texts(load_encoder(encoder), list(bench.tools.descriptions), EmbeddingCache(cache_dir))
    graphs = graph_lib.build_fold_graphs(t_emb, bench.tools.perm_mask, bench.tools.risk, bench.train.gold,
                                         bench.train_fold_mask)
    stats = [graph_lib.stats(g, bench.tools.perm_level) for g in graphs]
    if as_json:
        click.echo(json.dumps({"benchmark": benchmark, "protocol": bench.protocol,
                               "graphs": stats if len(stats) > 1 else stats[0]}))
        return
    click.echo(f"{benchmark}: protocol {bench.protocol}")
    for f, st in enumerate(stats):
        label = f"fold {f}" if len(stats) > 1 else "graph"
        click.echo(f"  {label}: {json.dumps(st)}")


MULTI_VALUE_OPTIONS = ("--seeds", "--lambdas")


def expand_multi_value_options(argv: list[str], names=MULTI_VALUE_OPTIONS) -> list[str]:
    """Let `--seeds 42 123 777` mean `--seeds 42 --seeds 123 --seeds 777` (click options take one value)."""
    out: list[str] = []
    current = None
    for arg in argv:
        if arg in names:
            current = arg
            out.append(arg)
            continue
        if current is not None and not arg.startswith("--") and out[-1] != current:
            out.append(current)
        elif arg.startswith("-") and not _is_number(arg):
            current = None
        out.append(arg)
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.main(args=expand_multi_value_options(argv), prog_name="riskrank-jax")


if __name__ == "__main__":
    sys.exit(main())
