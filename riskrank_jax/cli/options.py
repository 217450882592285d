"""Command-line options shared by `riskrank-jax` and `python -m riskrank_jax.sweep`, spelled the same in both.

Why shared: one definition per option, so the two commands can never spell or parse it differently.
"""

from __future__ import annotations

import re

import click

DEFAULT_SEEDS = (42, 123, 777)
MULTI_VALUE_OPTIONS = ("--seeds", "--lambdas", "--variants")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


cache_dir_option = click.option(
    "--cache-dir", type=click.Path(file_okay=False), default=None,
    help="Embedding cache (default: $RISKRANK_CACHE, then ~/.cache/riskrank-jax).")
encoder_option = click.option(
    "--encoder", default=None, metavar="NAME|PATH",
    help="The sentence encoder: minilm (the embedded all-MiniLM-L6-v2, the default), mpnet (all-mpnet-base-v2), "
         "use (Universal Sentence Encoder multilingual, best on non-English tools), e5 (multilingual-e5-small, "
         "4-bit), a fusion of them such as minilm+use, or a local HF-format BERT directory (a hub id when online). "
         "The named ones need their package installed (docs/encoders.md).")
adapt_option = click.option(
    "--adapt", is_flag=True,
    help="Adapt relevance to FILE... first: tune the encoder's top layers on pairs of the tools' own texts "
         "(description sentence -> the rest), used only when they beat the frozen encoder on held-out pairs; "
         "cached by registry, so only the first run pays (about a minute per 100 tools on 2 cores). Risk is "
         "assessed as without it. Default: off (docs/siblings.md says why).")
risk_head_option = click.option(
    "--risk-head", type=click.Path(dir_okay=False), default=None, metavar="PATH",
    help="Risk head trained with `riskrank-jax fit-risk`: assess risk with the level rule over its scores instead "
         "of the default risk dimensions (the shipped MCP risk model, keywords and annotations; docs/registry.md).")
trust_annotations_option = click.option(
    "--trust-annotations", is_flag=True,
    help="Let an MCP readOnlyHint: true lower a tool's risk (by default annotations only raise it).")


def intent_options(hold_back_default: str):
    """--intent/--no-intent and --intent-hold-back SHARE (both None when not given), as `rank` and `serve` spell
    them; ``hold_back_default``: what --help says the hold-back's default is."""
    intent = click.option(
        "--intent/--no-intent", default=None,
        help="Weigh each tool's risk penalty by what the request asks for: a tool that sends, deletes, runs code "
             "or moves money ranks lower for a request that did not ask for it, and the results say what the "
             "request was read as asking. Default: on.")
    hold_back = click.option(
        "--intent-hold-back", type=click.FloatRange(0, 1), default=None, metavar="SHARE",
        help="Hold back (rank last) a tool with a must-confirm effect (sending, deleting, secrets, code, money) "
             "for a request that asks for no change: one whose highest need of any effect is at most 1 − SHARE "
             f"(0.5: the requests read as only reading); 0 turns it off. Default: {hold_back_default}.")
    return lambda command: intent(hold_back(command))


def key_value_pairs(items, option: str, example: str) -> tuple[tuple[str, str], ...]:
    """(key, value) of each "KEY=VALUE" of a repeated option (keys stripped, values as given); click.BadParameter
    naming ``option`` and showing ``example`` for an item without "=" or without a key. The one parser of such
    options (the sweep's --set, fit's --tune-set)."""
    out = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE (e.g. {example}), got {item!r}", param_hint=option)
        out.append((key.strip(), value))
    return tuple(out)


def _check_seeds(ctx, param, value):
    seeds = tuple(int(s) for s in value)
    if not seeds or len(set(seeds)) != len(seeds):
        raise click.BadParameter(f"seeds must be distinct and non-empty, got {list(seeds)}")
    return seeds


seeds_option = click.option(
    "--seeds", type=int, multiple=True, default=DEFAULT_SEEDS, show_default=True, callback=_check_seeds,
    help="Seeds of the run, space-separated after one --seeds (--seeds 42 123 777) or one per --seeds. Leaf seeds.")


def optional_seeds_option(help: str):
    """``--seeds`` with no default of its own (an empty tuple when not given): the command's config supplies it."""
    return click.option("--seeds", type=int, multiple=True, default=None, metavar="SEED...", help=help,
                        callback=lambda ctx, param, value: _check_seeds(ctx, param, value) if value else ())


def parse_bytes(text: str) -> int:
    """'1GiB', '512M', '2e9' -> bytes (binary units; a bare number is bytes)."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 1GiB, 512MiB, 2000000000)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value < 1:
        raise ValueError(f"size must be positive, got {text!r}")
    return int(value)


def _bytes_callback(ctx, param, value):
    try:
        return parse_bytes(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


memory_budget_option = click.option(
    "--memory-budget", default="1GiB", show_default=True, callback=_bytes_callback, metavar="SIZE",
    help="Bytes the intermediates of one step may hold at once (e.g. 512MiB, 4GiB): training runs its models "
         "in groups, scoring and evaluation run queries in chunks, each sized to fit; results do not depend on it "
         "beyond float rounding. Leaf runtime.memory_budget.")


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


__all__ = ["seeds_option", "optional_seeds_option", "cache_dir_option", "encoder_option", "adapt_option", "risk_head_option", "trust_annotations_option",
           "intent_options",
           "memory_budget_option", "parse_bytes", "expand_multi_value_options", "DEFAULT_SEEDS",
           "MULTI_VALUE_OPTIONS"]
