"""`python -m riskrank_jax.sweep`: the command line of the sweep (``experiments.run``), one config tree per benchmark.

Every flag that shapes a result is a spelling of one leaf of ``experiments.config.SweepConfig`` (``FLAG_LEAVES``);
``--set PATH=VALUE`` sets any leaf; values derived from others (``risk_head.epochs`` from ``train.epochs``) are
computed by ``default_config`` whichever spelling was used; ``--show-config`` prints the resolved trees. The other
flags (--benchmark, --out, --update-reference, --force, --jobs, --no-compile-cache, --show-config) say how the
command runs, never what a sweep computes. Built as an entry module so that the experiments below it never import
the command-line layer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from riskrank_jax.cli.options import (MULTI_VALUE_OPTIONS, expand_multi_value_options, key_value_pairs,
                                      memory_budget_option, seeds_option)
from riskrank_jax.experiments.config import BENCHMARK_LEAVES, ConfigError, SweepConfig, default_config
from riskrank_jax.experiments.run import ALL_BENCHMARKS, run_tasks
from riskrank_jax.experiments.variants import select_variants
from riskrank_jax.paths import REFERENCE_RESULTS_DIR, resolve_runs_dir

BENCHMARK_CHOICES = (*ALL_BENCHMARKS, "all")
# flag (its click parameter name) -> {leaf path: value} it sets when given (one leaf each; --variants and
# --no-extras both spell eval.variants, ``flag_overrides``); a flag not given sets nothing
FLAG_LEAVES = {
    "encoder": lambda v: {"encoder.path": v},
    "data_dir": lambda v: {"data.data_dir": v},
    "cache_dir": lambda v: {"runtime.cache_dir": v},
    "checkpoint_dir": lambda v: {"runtime.checkpoint_dir": v},
    "seeds": lambda v: {"seeds": tuple(v)},
    "lambdas": lambda v: {"eval.lambdas": tuple(v)},
    "main_lambda": lambda v: {"eval.main_lambda": v},
    "alpha": lambda v: {"eval.alpha": v},
    "k": lambda v: {"eval.k": v},
    "epochs": lambda v: {"train.epochs": v},
    "memory_budget": lambda v: {"runtime.memory_budget": v},
    "no_bench": lambda v: {"eval.smoothing_benchmark": False} if v else {},
}


def _parse_sets(ctx, param, values) -> tuple[tuple[str, str], ...]:
    pairs = key_value_pairs(values, "--set", "train.epochs=5")
    if any(path == "data.benchmark" for path, _ in pairs):
        raise click.BadParameter("choose the benchmark with --benchmark, not --set data.benchmark")
    return pairs


def flag_overrides(ctx: click.Context) -> dict:
    """{leaf path: value} of the flags given on the command line (``FLAG_LEAVES``; --variants / --no-extras too)."""
    out = {}
    for name, leaves in FLAG_LEAVES.items():
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
            out.update(leaves(ctx.params[name]))
    names = tuple(ctx.params["variant_names"]) + (("paper",) if ctx.params["no_extras"] else ())
    if names:
        out["eval.variants"] = names
    return out


def resolved_config(benchmark: str, flags: dict, sets) -> SweepConfig:
    """``default_config(benchmark)`` with the flags' leaves, then the --set leaves (the later wins), then the derived
    leaves; a bad leaf is a usage error naming it."""
    try:
        cfg = default_config(benchmark, flags, dict(sets))
        select_variants(cfg.eval.variants)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--set") from None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--variants / --set eval.variants") from None
    return cfg


# the tree's defaults: the flags below show and use them, never a second copy of the numbers
_DEFAULTS = SweepConfig()

# the command line options, in --help order (``sweep_options`` applies them)
SWEEP_OPTIONS = (
    click.option("--benchmark", "benchmarks", type=click.Choice(BENCHMARK_CHOICES), multiple=True, default=("demo",),
                 show_default=True, help="Benchmark(s) to run (space-separated after one --benchmark: --benchmark "
                 "ultratool sealtools); 'all' = demo ultratool sealtools livemcpbench. Several run side by side "
                 "in worker processes (see --jobs)."),
    click.option("--encoder", default=None, metavar="NAME|PATH", help="The sentence encoder: minilm (the embedded "
                 "all-MiniLM-L6-v2, the default), mpnet, use, e5, a fusion such as minilm+use (docs/encoders.md), or a "
                 "local HF-format BERT directory; the ft_* rows need minilm or a BERT directory. Leaf encoder.path."),
    click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                 help="Root holding ultratool/, seal_tools/ and livemcpbench/ (default: $RISKRANK_DATA; layout: "
                      "docs/data.md). Leaf data.data_dir."),
    click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
                 help="Results root; each benchmark writes <DIR>/<benchmark>/ (default: $RISKRANK_RUNS, else runs/ "
                      "at the repository root)."),
    click.option("--update-reference", is_flag=True, help="Write into experiments/results/ (the committed reference "
                 "results) instead, recomputing them; for maintainers."),
    click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Embedding cache directory. Leaf "
                 "runtime.cache_dir."),
    click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
                 help="Checkpoint root (default: checkpoints/). Leaf runtime.checkpoint_dir."),
    seeds_option,
    click.option("--lambdas", type=float, multiple=True, default=_DEFAULTS.eval.lambdas, show_default=True,
                 help="λ grid of the λ sweep (space-separated after one --lambdas). Leaf eval.lambdas."),
    click.option("--main-lambda", type=float, default=_DEFAULTS.eval.main_lambda, show_default=True,
                 help="λ of the main tables. Leaf eval.main_lambda."),
    click.option("--alpha", type=float, default=None, help="Smoothing α (default per benchmark: " + ", ".join(
                 f"{name} {leaves['eval.alpha']:g}" for name, leaves in BENCHMARK_LEAVES.items()) + "). Leaf "
                 "eval.alpha."),
    click.option("--k", type=int, default=_DEFAULTS.eval.k, show_default=True,
                 help="Cut-off of the @5 metrics and the rule filter. Leaf eval.k."),
    click.option("--epochs", type=int, default=_DEFAULTS.train.epochs, show_default=True,
                 help="Training epochs (the paper uses 10). Leaf train.epochs; the zero-shot risk heads follow with "
                      "3x (risk_head.epochs, unless set)."),
    click.option("--variants", "variant_names", multiple=True, metavar="NAME...",
                 help="Evaluate only these variants (space-separated; 'paper' = the paper's rows, 'all' = every "
                      "row but the opt-in ones, 'ce' = the opt-in cross-encoder rows, which take tens of minutes "
                      "per benchmark on a CPU). Default: all; see riskrank_jax/experiments/variants.py. Leaf "
                      "eval.variants."),
    click.option("--no-extras", is_flag=True, help="Same as --variants paper: skip the beyond-paper variants. "
                 "Leaf eval.variants."),
    memory_budget_option,
    click.option("--no-bench", is_flag=True, help="Skip the smoothing-throughput benchmark. Leaf "
                 "eval.smoothing_benchmark (false)."),
    click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", callback=_parse_sets,
                 help="Set any leaf of the config tree, after the flags (repeatable): --set train.epochs=5 --set "
                      "eval.k=3; tuples as comma lists (--set eval.lambdas=0,0.1), bools true/false, none for an "
                      "optional leaf. --show-config lists every leaf with its value."),
    click.option("--show-config", is_flag=True, help="Print the resolved config tree(s) as JSON and exit."),
    click.option("--force", is_flag=True, help="Recompute even when the output directory holds your earlier run of the "
                 "same configuration (otherwise reused, and said so)."),
    click.option("--no-compile-cache", is_flag=True, help="Do not keep compiled XLA programs in <embedding cache>/xla/ "
                 "(kept by default: a later sweep loads them instead of compiling, same results)."),
    click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                 help="Benchmarks run at once when several are asked for, each in a fresh worker process pinned to "
                      "its share of the CPUs. 1: one after another, so the peak memory is the largest benchmark's; "
                      "2 is faster on a 2+ core CPU but adds the two benchmarks' memory (and, with a GPU/TPU, each "
                      "process claims the device's memory). Same results either way."),
)


def sweep_options(fn):
    """``fn`` with every option of ``SWEEP_OPTIONS``."""
    for option in reversed(SWEEP_OPTIONS):
        fn = option(fn)
    return fn


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@sweep_options
@click.pass_context
def main(ctx, benchmarks, out_dir, update_reference, sets, show_config, force, no_compile_cache, jobs, **_flags):
    """Reproduce the paper's tables (and the beyond-paper variants) in one run.

    Embeds every text once (cached), trains every model of a training run in one vmapped program (checkpoints
    reused), builds the ToolGraph(s) and evaluates the variants over all λ values and seeds; writes results.json
    (with the resolved config tree under "config"), tables.md and figures under runs/<benchmark>/ (or --out DIR),
    prints the main table and where it wrote. Several benchmarks run one after another, each in a fresh
    process (--jobs runs several at once).
    experiments/results/ changes only with --update-reference."""
    flags = flag_overrides(ctx)
    configs = [resolved_config(name, flags, sets) for name in expand_benchmarks(benchmarks)]
    if show_config:
        trees = {cfg.benchmark: cfg.to_dict() for cfg in configs}
        click.echo(json.dumps(trees if len(trees) > 1 else next(iter(trees.values())), indent=2))
        return
    shared = dict(workdir=output_root(out_dir, update_reference), force=force or update_reference)
    tasks = [(cfg, shared) for cfg in configs]
    errors = run_tasks(tasks, jobs, configs[0].runtime.cache_dir,
                       keep_compiled=not no_compile_cache)
    for message in errors:
        click.echo(f"error: {message}", err=True)
    if errors:
        sys.exit(1)


def expand_benchmarks(names) -> list[str]:
    """--benchmark values in order, 'all' expanded to demo, ultratool, sealtools, livemcpbench, each benchmark
    once."""
    out = []
    for name in names:
        for b in ALL_BENCHMARKS if name == "all" else (name,):
            if b not in out:
                out.append(b)
    return out


def output_root(out_dir, update_reference: bool) -> Path:
    """Where a sweep writes: the committed reference results only with --update-reference, never by default."""
    if update_reference:
        if out_dir is not None:
            raise click.UsageError("--update-reference writes into experiments/results/; do not combine it with --out")
        return REFERENCE_RESULTS_DIR
    root = resolve_runs_dir(out_dir)
    if root == REFERENCE_RESULTS_DIR.resolve():
        raise click.UsageError(f"{root} holds the committed reference results; write there only with "
                               "--update-reference (or choose another --out)")
    return root


def run(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    main.main(args=expand_multi_value_options(argv, (*MULTI_VALUE_OPTIONS, "--benchmark")),
              prog_name="python -m riskrank_jax.sweep")


__all__ = ["main", "run", "expand_benchmarks", "output_root", "resolved_config", "flag_overrides", "FLAG_LEAVES",
           "BENCHMARK_CHOICES"]

if __name__ == "__main__":
    run()
