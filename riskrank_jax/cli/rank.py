"""`riskrank-jax rank` and `riskrank-jax fit`: rank your own tool registry for queries, or fit a ranker to a
log of (query, tools used). Thin shells over `Ranker.from_registry`, `explain` and `fit`.

Why thin: the Ranker does the work, so `rank`, `fit` and a program rank the same way.
"""

from __future__ import annotations

import dataclasses
import json
import warnings

import click

from riskrank_jax.cli.options import (adapt_option, cache_dir_option, encoder_option, intent_options, key_value_pairs,
                                      optional_seeds_option, risk_head_option, trust_annotations_option)
from riskrank_jax.errors import RankerError

files_argument = click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))


def _gather_queries(query_texts, queries_file) -> list[str]:
    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `--help`
    from riskrank_jax.rank.query_log import read_queries
    from riskrank_jax.rank.ranker import check_queries

    if bool(query_texts) == bool(queries_file):
        raise RankerError("give --query TEXT (one or more) or --queries FILE, not both and not neither")
    queries = list(query_texts) if query_texts else read_queries(queries_file)
    check_queries(queries)
    return queries


def _load_ranker(files, model, encoder, cache_dir, risk_head, trust_annotations, adapt=False):
    """The saved ranker of --model (checked against FILE...), else the zero-shot default over FILE... (with
    ``adapt``, relevance adapted to them: ``model.registry_adapt``); skipped built-in tools are reported as
    `warning:` lines on stderr."""
    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `--help`
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.encoder import load_encoder_lazily
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.paths import resolve_cache_dir
    from riskrank_jax.rank.ranker import Ranker
    from riskrank_jax.rank.ranker_store import saved_encoder_dir
    from riskrank_jax.registry import load_registry
    from riskrank_jax.runtime import compile_cache

    compile_cache.enable(resolve_cache_dir(cache_dir))  # a later call over the same registry loads its programs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = load_registry(list(files))
    for w in reg.warnings:
        click.echo(f"warning: {w}", err=True)
    if model is not None and saved_encoder_dir(model) is not None:
        enc = load_encoder_lazily(encoder)  # only its id is checked: the ranker embeds with its own tuned encoder
    else:
        enc = load_encoder(encoder, cache_dir=cache_dir)  # the weights' hash and tokenizer state kept beside the cache
    if model is None:
        adapt_config = None
        if adapt:
            # deferred: the tuner's modules only when adapting
            from riskrank_jax.model.registry_adapt import AdaptConfig
            adapt_config = AdaptConfig()
        ranker = Ranker.from_registry(reg, encoder=enc, cache=EmbeddingCache(cache_dir), risk_head=risk_head,
                                      trust_annotations=trust_annotations, adapt=adapt_config)
        if adapt:
            report = ranker.provenance["adapted"]
            click.echo(f"adapt: {'used' if report['used'] else 'not used'}: {report.get('reason', '')}" + (
                f" (held-out NDCG@5 {report['heldout_ndcg5_frozen']:.3f} frozen, "
                f"{report['heldout_ndcg5_tuned']:.3f} tuned)" if "heldout_ndcg5_tuned" in report else ""), err=True)
        return ranker
    ranker = Ranker.load(model, expect_encoder_id=enc.model_id)
    if (reg.names, reg.texts) != (ranker.tool_names, ranker.tool_texts):
        raise RankerError(f"{model}: this ranker was fitted on another registry (tool names or texts differ from "
                          f"{', '.join(files)}); fit it again with `riskrank-jax fit`")
    return ranker if ranker.encoder is not None else dataclasses.replace(ranker, encoder=enc)


def _hits_text(query: str, hits) -> str:
    width = max([len(h.name) for h in hits] + [4])
    lines = [f"query: {query}", f"  {'#':>2}  {'tool':<{width}}  {'score':>7}  {'relevance':>9}  risk  risk source"]
    lines += [f"  {h.rank:>2}  {h.name:<{width}}  {h.score:>7.3f}  {h.relevance:>9.3f}  {h.risk_level:>4}  "
              f"{h.risk_source}" for h in hits]
    if not hits:
        lines.append("  (no tool scored above --min-score)")
    return "\n".join(lines)


@click.command("rank")
@files_argument
@click.option("--query", "query_texts", multiple=True, metavar="TEXT", help="A request to rank tools for (repeatable).")
@click.option("--queries", "queries_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Requests, one per line (or JSON Lines with a \"query\" field when FILE ends .jsonl).")
@click.option("--k", type=click.IntRange(min=1), default=None, metavar="N",
              help="Tools per request. Default 5 for the zero-shot ranker (its config's k); a --model's own k "
                   "otherwise.")
@click.option("--lambda", "lam", type=click.FloatRange(min=0), default=None, metavar="L",
              help="Risk penalty λ. Default 0.5 for the zero-shot ranker, where λ is in per-query standard "
                   "deviations of the hybrid score; a --model's own λ otherwise. 0 turns the penalty off.")
@click.option("--min-score", type=float, default=None, help="Leave out tools whose final score is below this.")
@click.option("--model", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="A ranker saved by `riskrank-jax fit` for these FILEs (its risk levels are used as saved; when it "
                   "holds a tuned encoder, DIR/encoder, requests are embedded with that).")
@click.option("--explain", is_flag=True,
              help="Show how each stage moved each returned tool, and the tools held back and why: with intent, "
                   "what the request was read as asking and which effects of each held-back tool it did not ask "
                   "for (\"held back: sends to others; the request only reads\").")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--multi-step/--no-multi-step", default=None,
              help="Split each request into its steps (clauses, enumerations, file paths) and rank for the steps "
                   "too, so a request that needs several tools gets all of them. Default: off.")
@click.option("--server-context/--no-server-context", default=None,
              help="Use each tool's server (its source) as evidence: a tool of a server that matches the request, "
                   "or whose other tools do, ranks higher. Default: on (one source: no effect).")
@intent_options("0, off (the gateway's: 0.5)")  # serve.config.GATEWAY_HOLD_BACK
@trust_annotations_option
@risk_head_option
@cache_dir_option
@encoder_option
@adapt_option
def rank_command(files, query_texts, queries_file, k, lam, min_score, model, explain, as_json, multi_step,
                 server_context, intent, intent_hold_back, trust_annotations, risk_head, cache_dir, encoder, adapt):
    """Rank the tools of FILE... (MCP tools/list, OpenAI, Anthropic, plain JSON/JSONL, BEIR) for requests:
    the top k with relevance, risk level and final score.

    Zero-shot by default: hybrid BM25 + embedding relevance − λ·risk, smoothed over a graph of related
    tools. Risk per tool: declared, else the learned head raised by permission keywords and MCP
    annotations (see `riskrank-jax registry audit` and docs/registry.md). Embeddings are cached by text,
    so a second run over the same files is fast.
    """
    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `--help`
    from riskrank_jax.rank.explain import explain_query, to_text

    queries = _gather_queries(query_texts, queries_file)
    if adapt and model is not None:
        raise click.UsageError("--adapt adapts the zero-shot ranker; a --model was fitted already")
    ranker = _load_ranker(files, model, encoder, cache_dir, risk_head, trust_annotations, adapt)
    given = {n: v for n, v in {"lam": lam, "multi_step": multi_step, "server_context": server_context,
                                "intent": intent, "intent_hold_back": intent_hold_back}.items() if v is not None}
    ranker = ranker.with_config(dataclasses.replace(ranker.config, **given)) if given else ranker
    k = min(ranker.config.k if k is None else k, ranker.size)
    hits = ranker.rank_queries(queries, k=k, min_score=min_score)
    reports = [explain_query(ranker, q, k) for q in queries] if explain else [None] * len(queries)
    if as_json:
        click.echo(json.dumps(_json_output(ranker, k, queries, hits, reports)))
        return
    blocks = [to_text(r) if r else _hits_text(q, hs) for q, hs, r in zip(queries, hits, reports)]
    click.echo("\n\n".join(blocks))


def _json_output(ranker, k: int, queries, hits, reports) -> dict:
    """`rank --json`'s object: the config ranked with, and per request its hits (and --explain's report)."""
    c = ranker.config
    return {"config": {"lambda": c.lam, "alpha": c.alpha, "first_stage": c.first_stage, "k": k,
                       "head": ranker.params is not None, "rule_filter": c.rule_filter, "multi_step": c.multi_step,
                       "server_context": c.server_context, "intent": c.intent, "intent_hold_back": c.intent_hold_back},
            "results": [{"query": q, "hits": [h.as_dict() for h in hs], **({"explain": r} if r else {})}
                        for q, hs, r in zip(queries, hits, reports)]}


def _tune_config(tune_encoder: bool, tune_layers, tune_epochs, tune_set):
    """The TuneConfig of --tune-encoder: FIT_TUNE_CONFIG with --tune-set KEY=VALUE, --tune-layers and
    --tune-epochs applied; None without --tune-encoder (then none of them may be given)."""
    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `--help`
    from riskrank_jax.model.tune_config import TuneConfig
    from riskrank_jax.rank.fit import FIT_TUNE_CONFIG

    if not tune_encoder:
        if tune_layers is not None or tune_epochs is not None or tune_set:
            raise RankerError("--tune-layers, --tune-epochs and --tune-set say how the encoder is tuned; "
                              "add --tune-encoder")
        return None
    fields = {f.name: type(getattr(FIT_TUNE_CONFIG, f.name)) for f in dataclasses.fields(TuneConfig)}
    changes: dict = {}
    try:
        pairs = key_value_pairs(tune_set, "--tune-set", "lr=5e-4")
    except click.BadParameter as e:
        raise RankerError(f"--tune-set: {e.message}") from None
    for key, value in pairs:
        key = key.replace("-", "_")
        if key not in fields:
            raise RankerError(f"--tune-set {key}={value}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        try:
            changes[key] = fields[key](value.strip())
        except ValueError:
            raise RankerError(f"--tune-set {key}={value}: {key} takes a {fields[key].__name__}") from None
    for key, value in (("layers", tune_layers), ("epochs", tune_epochs)):
        if value is not None:
            if key in changes and changes[key] != value:
                raise RankerError(f"--tune-{key} {value} and --tune-set {key}={changes[key]} disagree")
            changes[key] = value
    return dataclasses.replace(FIT_TUNE_CONFIG, **changes)


@click.command("fit")
@files_argument
@click.option("--queries", "log_path", required=True, type=click.Path(dir_okay=False), metavar="LOG.jsonl",
              help='Your log: one JSON object per line, {"query": "...", "tools": ["tool_name", ...]}.')
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Where to save the ranker (then: riskrank-jax rank FILE... --model DIR).")
@optional_seeds_option("One model per seed, space-separated after one --seeds (default: 0 1 2, FitConfig.seeds).")
@click.option("--epochs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Epochs of the heads' training (default: 10, FitConfig.epochs).")
@click.option("--tune-encoder", is_flag=True,
              help="Also fine-tune the encoder's top layers on the log's (request, used tool) pairs, with the first "
                   "seed; kept only when it beats both the zero-shot ranker and the heads on the held-out "
                   "requests, and then saved as DIR/encoder, which `rank --model DIR` and `serve --model DIR` "
                   "embed requests with. Minutes on a CPU (a progress bar shows the steps).")
@click.option("--tune-layers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Top transformer layers to tune (default: 3, FIT_TUNE_CONFIG.layers; with --tune-encoder).")
@click.option("--tune-epochs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Epochs over the training requests when tuning (default: 4, FIT_TUNE_CONFIG.epochs; fewer on a "
                   "long log, whole epochs within FIT_TUNE_CONFIG.step_budget = 512 steps, e.g. one over 17,000 "
                   "requests; with --tune-encoder).")
@click.option("--tune-set", multiple=True, metavar="KEY=VALUE",
              help="Any other tuning setting (repeatable), e.g. --tune-set lr=1e-4 --tune-set batch_size=64: the fields "
                   "of riskrank_jax.model.tune_config.TuneConfig (defaults: riskrank_jax.rank.fit.FIT_TUNE_CONFIG).")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where --tune-encoder keeps its checkpoints: a killed fit run again with the same inputs resumes "
                   "where it stopped (default: fit-runs/ in the embedding cache).")
@trust_annotations_option
@risk_head_option
@cache_dir_option
@encoder_option
def fit_command(files, log_path, out_dir, seeds, epochs, tune_encoder, tune_layers, tune_epochs, tune_set,
                checkpoint_dir, trust_annotations, risk_head, cache_dir, encoder):
    """Fit a ranker for FILE... to your own log of requests and the tools used for them.

    A seeded 20 % of the distinct logged requests is held out, every copy of each. The relevance and risk heads
    are trained on the rest (one model per seed) and compared with the zero-shot ranker on the held-out requests
    (NDCG@5); the better one is saved (the heads retrained on every request). With --tune-encoder the encoder is
    fine-tuned as well and that ranker is saved when it beats both, tuned again on every request unless the log
    is long enough that the step budget cut its epochs.
    """
    # deferred: the command's library (numpy, JAX, the encoder) loads when it runs, not for `--help`
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.families import load_encoder
    from riskrank_jax.paths import resolve_cache_dir
    from riskrank_jax.rank.fit import FitConfig, fit_ranker

    given = {"seeds": tuple(seeds) or None, "epochs": epochs}
    config = dataclasses.replace(FitConfig(), **{k: v for k, v in given.items() if v is not None},
                                 tune_encoder=_tune_config(tune_encoder, tune_layers, tune_epochs, tune_set))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranker, report = fit_ranker(list(files), log_path, encoder=load_encoder(encoder),
                                    cache=EmbeddingCache(cache_dir), config=config,
                                    risk_head=risk_head, trust_annotations=trust_annotations,
                                    checkpoint_dir=checkpoint_dir or resolve_cache_dir(cache_dir) / "fit-runs")
    _echo_fit_report(report, config)
    click.echo(f"saved {ranker.save(out_dir)}")


def _echo_fit_report(report: dict, config) -> None:
    """What fit measured on the held-out requests, and which ranker it chose and why."""
    k = report["k"]
    click.echo(f"{report['queries']} logged requests, {report['heldout']} held out; NDCG@{k} on them: zero-shot "
               f"{report[f'ndcg@{k}_zero_shot']:.3f}, trained heads per seed "
               + ", ".join(f"{x:.3f}" for x in report[f"ndcg@{k}_head_per_seed"]))
    if f"ndcg@{k}_tuned_per_seed" in report:
        click.echo(f"tuned encoder ({config.tune_encoder.layers} layers, {config.tune_encoder.epochs} epochs) per "
                   "seed " + ", ".join(f"{x:.3f}" for x in report[f"ndcg@{k}_tuned_per_seed"])
                   + f" ({report['seconds']['tune_per_seed'][0]:.0f} s per seed)")
    click.echo(f"chosen: {report['chosen']} — {report['why']}")


__all__ = ["rank_command", "fit_command"]
