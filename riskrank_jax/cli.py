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
    help="Root holding ultratool/ and seal_tools/ (default: $RISKRANK_DATA, then ../shared/datasets).")
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
    """SPEC §9 metrics of a retrieval baseline (BM25 or frozen-encoder cosine) on the test split(s)."""
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


def main(argv=None):
    cli.main(args=argv, prog_name="riskrank-jax")


if __name__ == "__main__":
    sys.exit(main())
