"""Risk-head transfer: does f_risk trained on one registry's audited labels score another registry's tools?

This decides which risk source `rank` should use for tools nobody labelled. For each setting (train registry →
test registry, plus 5-fold cross-validation inside each registry as a reference) and each seed, a risk head
(``model.risk_head``) is trained on the train registry's labels and scored on the test registry's tools,
beside the permission-keyword prior alone (word rule, category floors) and the combination `assess_risk` uses
(the learned level raised to the keyword floors). Scores: AUC of detecting r ≥ 3 and Spearman ρ with the labels
(``registry.risk_agreement``). Tools are embedded by their description (the texts the sweep already caches).

    python -m riskrank_jax.experiments.transfer [--data-dir DIR] [--out DIR] [--cache-dir DIR]

writes <out>/risk_transfer.json and <out>/risk_transfer.md (default out: experiments/results).

Why: `rank` must pick a risk source for unlabelled tools, and this measures which one transfers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.families import load_encoder
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.risk_head import HeadConfig, predict, train_risk_head
from riskrank_jax.paths import REPO_ROOT
from riskrank_jax.registry.risk import DEFAULT_KEYWORD_FLOORS
from riskrank_jax.registry.risk_agreement import compare_sources, cross_val_scores
from riskrank_jax.scoring import is_risky

BENCHMARK_ORDER = ("demo", "ultratool", "sealtools")
TRANSFERS = (("ultratool", "sealtools"), ("sealtools", "ultratool"), ("demo", "ultratool"), ("demo", "sealtools"))
# compare_sources rows shown in the markdown tables, with their column titles
DESCRIBED = {"learned head f_risk": "the learned head's f_risk alone",
             "keywords, word rule (floors)": "the permission keywords alone (word rule, category floors)",
             "combined score max(f_risk, floors)": "the combined score max(1 + 4·f_risk, keyword floors) (the "
                                                   "continuous `scores` of `assess_risk`)",
             "combined level (assess_risk)": "the combined level (`assess_risk`'s levels)"}
SHOWN = {"learned head f_risk": "learned f_risk",
         "keywords, word rule (floors)": "keywords (word rule)",
         "combined score max(f_risk, floors)": "combined score",
         "combined level (assess_risk)": "combined level"}
METRICS = ("auc_r>=3", "spearman")


@dataclass(frozen=True, eq=False)
class LabelledSet:
    """One registry's labelled tools: texts [N], risk int32 [N] in 1..5, emb float32 [N, d] (L2-normalised)."""

    name: str
    texts: tuple[str, ...]
    risk: np.ndarray
    emb: np.ndarray


@dataclass(frozen=True)
class TransferConfig:
    """Seeds (each trains its own head; in CV each also draws its own folds), CV folds (within: also run the
    within-registry CV reference rows), head settings."""

    seeds: tuple[int, ...] = (0, 1, 2)
    folds: int = 5
    within: bool = True
    head: HeadConfig = field(default_factory=HeadConfig)


def setting_name(train: str, test: str) -> str:
    return f"{test} (5-fold CV)" if train == test else f"{train} → {test}"


def head_scores(train: LabelledSet, test: LabelledSet, seed: int, cfg: TransferConfig) -> np.ndarray:
    """f_risk [N_test]: a head trained on `train` (seed `seed`), or out-of-fold scores when train is test."""
    head = dataclasses.replace(cfg.head, seed=seed)
    if train is test:
        return cross_val_scores(test.emb, test.risk, cfg.folds, head)
    params, _ = train_risk_head(train.emb, train.risk, head)
    return predict(params, test.emb)


def _summary(values: Sequence[float]) -> dict:
    """{"mean", "std" (sample std; 0 for one value), "per_seed"}, rounded to 4 places."""
    a = np.asarray(values, np.float64)
    if np.isnan(a).any():  # one class empty: AUC undefined
        return {"mean": None, "std": None, "per_seed": [None if np.isnan(v) else round(float(v), 4) for v in a]}
    std = float(a.std(ddof=1)) if len(a) > 1 else 0.0
    return {"mean": round(float(a.mean()), 4), "std": round(std, 4), "per_seed": [round(float(v), 4) for v in a]}


def evaluate_setting(train: LabelledSet, test: LabelledSet, cfg: TransferConfig) -> dict:
    """AUC (r ≥ 3) and Spearman ρ of every risk source (``compare_sources`` rows), mean ± std over seeds."""
    per_seed = [compare_sources(head_scores(train, test, s, cfg), test.texts, test.risk) for s in cfg.seeds]
    sources = {row: {m: _summary([p[row][m] for p in per_seed]) for m in METRICS} for row in per_seed[0]}
    return {"train": train.name, "test": test.name, "kind": "cv" if train is test else "transfer",
            "n_train": int(len(train.risk)), "n_test": int(len(test.risk)),
            "n_test_high": int(is_risky(test.risk).sum()), "sources": sources}


def run_transfer(sets: dict[str, LabelledSet], cfg: TransferConfig = TransferConfig()) -> dict:
    """Every transfer whose two registries are in `sets`, then CV inside each registry.

    Returns {"settings": {setting_name: evaluate_setting(...)}, "seeds", "folds", "head_config",
    "keyword_floors", "recommendation"}."""
    pairs = [(a, b) for a, b in TRANSFERS if a in sets and b in sets]
    if cfg.within:
        pairs += [(n, n) for n in BENCHMARK_ORDER if n in sets] + [(n, n) for n in sets if n not in BENCHMARK_ORDER]
    settings = {setting_name(a, b): evaluate_setting(sets[a], sets[b], cfg) for a, b in pairs}
    out = {"seeds": list(cfg.seeds), "folds": cfg.folds, "head_config": dataclasses.asdict(cfg.head),
           "keyword_floors": dict(DEFAULT_KEYWORD_FLOORS), "settings": settings}
    out["recommendation"] = recommendation(out)
    return out


def recommendation(result: dict) -> str:
    """One sentence naming the risk source with the best mean AUC over the cross-registry settings (over the
    CV settings when there is no transfer), with the numbers behind it."""
    chosen = [s for s in result["settings"].values() if s["kind"] == "transfer"]
    where = f"the {len(chosen)} cross-registry settings"
    if not chosen:
        chosen, where = list(result["settings"].values()), "within-registry cross-validation only"
    if not chosen:
        return "No labelled registry was available, so no risk source could be measured."
    table = {r: [[np.nan if s["sources"][r][m]["mean"] is None else s["sources"][r][m]["mean"] for s in chosen]
                 for m in METRICS] for r in SHOWN}  # row -> [auc [S], rho [S]]
    mean = {r: [float(np.nanmean(v)) for v in table[r]] for r in SHOWN}
    best = max(SHOWN, key=lambda r: tuple(mean[r]))
    wins = sum(table[best][0][i] >= max(table[r][0][i] for r in SHOWN) for i in range(len(chosen)))
    rho = "and the highest" if mean[best][1] >= max(m[1] for m in mean.values()) else "with"
    others = "; ".join(f"{SHOWN[r]} {mean[r][0]:.3f} / {mean[r][1]:.3f}" for r in SHOWN if r != best)
    return (f"For unlabelled tools `rank` should use {DESCRIBED[best]}{_best_train(chosen, best)}: over {where} "
            f"it has the highest mean AUC of detecting r ≥ 3 {rho} mean Spearman ρ ({mean[best][0]:.3f} / "
            f"{mean[best][1]:.3f}; best AUC in {wins} of {len(chosen)}), against {others} (AUC / ρ).")


def _best_train(chosen: list[dict], row: str) -> str:
    """", with the head trained on X" when X's labels give the best AUC of `row` on every test registry that
    more than one train registry was tried on; "" otherwise."""
    by_test: dict[str, list[tuple[float, str]]] = {}
    for s in chosen:
        by_test.setdefault(s["test"], []).append((s["sources"][row]["auc_r>=3"]["mean"] or 0.0, s["train"]))
    winners = {max(v)[1] for v in by_test.values() if len(v) > 1}
    return f", with the head trained on the {winners.pop()} labels" if len(winners) == 1 else ""


def _cell(c: dict) -> str:
    return "n/a" if c["mean"] is None else f"{c['mean']:.3f} ± {c['std']:.3f}"


def _metric_table(result: dict, metric: str, title: str) -> list[str]:
    head = ["train → test", "test tools (r ≥ 3)", *(f"{t} {title}" for t in SHOWN.values())]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in result["settings"].items():
        cells = [_cell(s["sources"][row][metric]) for row in SHOWN]
        lines.append(f"| {name} | {s['n_test']} ({s['n_test_high']}) | " + " | ".join(cells) + " |")
    return lines


def transfer_markdown(result: dict) -> str:
    """The tables (AUC, then Spearman ρ) and the recommendation, as markdown."""
    h = result["head_config"]
    floors = ", ".join(f"{k} {v}" for k, v in result["keyword_floors"].items())
    out = ["# Risk-head transfer: which risk source scores tools nobody labelled\n",
           "Metrics: AUC = ROC AUC of separating tools labelled r ≥ 3 from the rest (0.5 = chance, 1 = perfect); "
           "ρ = Spearman rank correlation of the score with the labels 1..5. Mean ± sample std over seeds "
           f"{result['seeds']} (keywords have no seed). Definitions: docs/metrics.md; risk sources: "
           "docs/registry.md.\n",
           f"Learned f_risk: the risk head (MLP, hidden {h['hidden']}, {h['epochs']} epochs, MSE to (r − 1)/4) over "
           f"`{result.get('encoder', 'the encoder')}` embeddings of each tool's description, trained on the first "
           f"registry's audited labels and scored on the second's tools (\"5-fold CV\": out-of-fold scores inside one "
           f"registry, a reference). Keywords: permission categories matched on word boundaries, as the category "
           f"floors ({floors}). Combined score: max(1 + 4·f_risk, floors); combined level: the level nearest "
           "1 + 4·f_risk raised to the floors (what `assess_risk` returns).\n",
           "## AUC of detecting r ≥ 3\n", *_metric_table(result, "auc_r>=3", "AUC"), "",
           "## Spearman ρ with the labels\n", *_metric_table(result, "spearman", "ρ"), "",
           f"**Recommendation.** {result['recommendation']}\n"]
    if result.get("skipped"):
        out.append("Skipped: " + "; ".join(result["skipped"]) + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- data and CLI


def load_sets(data_dir=None, embed: Callable[[list[str]], np.ndarray] | None = None,
              names: Sequence[str] = BENCHMARK_ORDER) -> tuple[dict[str, LabelledSet], list[str]]:
    """The benchmarks' labelled tools that can be loaded, and a message per benchmark that cannot.

    embed: texts -> float32 [N, d]; default: the default encoder through the embedding cache."""

    sets, skipped = {}, []
    embed = embed or default_embed()
    for name in names:
        try:
            bench = load_benchmark(name, data_dir)
        except RiskRankError as e:
            skipped.append(f"{name} ({str(e).split('. ')[0]})")
            continue
        texts = tuple(bench.tools.descriptions)
        emb = embed(list(texts))
        sets[name] = LabelledSet(name, texts, np.asarray(bench.tools.risk, np.int32), np.asarray(emb, np.float32))
    return sets, skipped


def default_embed(cache_dir=None, encoder=None) -> Callable[[list[str]], np.ndarray]:
    """texts -> embeddings with the (default) encoder through the embedding cache; `.model_id` names it."""

    enc, cache = load_encoder(encoder), EmbeddingCache(cache_dir)

    def embed(texts: list[str]) -> np.ndarray:
        return embed_texts(enc, texts, cache)

    embed.model_id = enc.model_id
    return embed


def write_results(result: dict, out_dir: Path) -> tuple[Path, Path]:
    """risk_transfer.json and risk_transfer.md under out_dir, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / "risk_transfer.json", out_dir / "risk_transfer.md"
    for path, text in zip(paths, (json.dumps(result, indent=1, ensure_ascii=False) + "\n", transfer_markdown(result))):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return paths


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Root of the real benchmarks (default: $RISKRANK_DATA, then ../shared/datasets); absent "
                   "benchmarks are skipped.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (default: experiments/results).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Embedding cache directory.")
@click.option("--seeds", type=int, multiple=True, default=(0, 1, 2), show_default=True, help="Seeds (repeat).")
def main(data_dir, out_dir, cache_dir, seeds):
    """Train the risk head on one registry's labels and score another's (and 5-fold CV inside each): AUC of
    detecting r ≥ 3 and Spearman ρ, against the keyword prior and the combined rule. See docs/registry.md."""

    try:
        embed = default_embed(cache_dir)
        sets, skipped = load_sets(data_dir, embed)
        for msg in skipped:
            click.echo(f"skipping {msg}", err=True)
        result = {"encoder": embed.model_id, "texts": "tool descriptions",
                  **run_transfer(sets, TransferConfig(seeds=tuple(seeds))), "skipped": skipped}
        paths = write_results(result, Path(out_dir) if out_dir else REPO_ROOT / "experiments" / "results")
    except RiskRankError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(transfer_markdown(result))
    click.echo(f"wrote {paths[0]} and {paths[1]}", err=True)


if __name__ == "__main__":
    main(prog_name="python -m riskrank_jax.experiments.transfer")
