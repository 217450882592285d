"""Train the shipped intent model (riskrank_jax/model/intent_model.npz) and record what it was trained on.

    python scripts/train_intent_model.py [--data-dir DIR] [--out riskrank_jax/model/intent_model.npz]

Training requests: the demo's train.jsonl, Seal-Tools' training queries and UltraTool's (all of its
cross-validation pool), each labelled by the effects of its gold tools (``experiments.intent``). The L2 penalty
and the number of steps are chosen on those requests alone: 5-fold cross-validation (a fixed seeded split), the
``GRID`` point with the best mean AUC over the effects (ties: the larger penalty, then fewer steps). Held-out
figures, written into the file's metadata and printed: per effect, the AUC and the share of requests found at
need ≥ 0.5 (keywords and model together) on the demo's and Seal-Tools' test splits, which no step saw.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.errors import DataError
from riskrank_jax.experiments.intent import benchmark_effects, request_targets
from riskrank_jax.model import intent_model
from riskrank_jax.retrieve.intent import ASKED, EFFECTS, request_needs

BENCHMARKS = ("demo", "sealtools", "ultratool")
GRID = tuple((l2, steps) for l2 in (1e-5, 3e-5, 1e-4, 3e-4, 1e-3) for steps in (300, 600, 1000))
CV_FOLDS, CV_SEED = 5, 0
ROOT = Path(__file__).resolve().parents[1]


def auc(y, p) -> float | None:
    """Area under the ROC curve of scores p for binary labels y (None with one class only)."""
    y = np.asarray(y, bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    ranks = np.argsort(np.argsort(p, kind="stable"), kind="stable") + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def held_out(model: intent_model.IntentModel, texts, y) -> dict:
    """{effect: {"auc", "positives", "found", "precision"}} of keywords + model on requests texts, targets y."""
    need = request_needs(texts, model.probs(texts)).need
    out = {}
    for j, e in enumerate(EFFECTS):
        pos, hit = y[:, j] > 0, need[:, j] >= ASKED
        out[e] = {"auc": None if (a := auc(pos, need[:, j])) is None else round(a, 3), "positives": int(pos.sum()),
                  "found": round(float(hit[pos].mean()), 3) if pos.any() else None,
                  "precision": round(float(pos[hit].mean()), 3) if hit.any() else None}
    return out


def cross_validate(x, y) -> list[dict]:
    """[{"l2", "steps", "auc"}] per GRID point: the mean over effects of the out-of-fold AUC, CV_FOLDS folds."""
    fold = np.random.default_rng(CV_SEED).permutation(len(y)) % CV_FOLDS
    masks = np.stack([fold != f for f in range(CV_FOLDS)])
    rows = []
    for l2, steps in GRID:
        w, b = intent_model.fit(x, y, masks, intent_model.IntentConfig(steps=steps, l2=l2))
        p = np.zeros_like(y)
        for f in range(CV_FOLDS):
            p[fold == f] = intent_model.predict(w[f], b[f], x[fold == f])
        aucs = [a for j in range(y.shape[1]) if (a := auc(y[:, j] > 0, p[:, j])) is not None]
        rows.append({"l2": l2, "steps": steps, "auc": round(float(np.mean(aucs)), 4)})
    return rows


@click.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Root holding ultratool/ and seal_tools/ (default: $RISKRANK_DATA, else ../shared/datasets).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=ROOT / "riskrank_jax" / "model" / intent_model.DEFAULT_MODEL_FILE, show_default=True)
def main(data_dir, out):
    """Train the intent model on the benchmarks' training requests and write it with its held-out figures."""
    encoder, cache = load_encoder(), EmbeddingCache()
    texts, targets, trained_on, tests = [], [], {}, {}
    for name in BENCHMARKS:
        try:
            bench = load_benchmark(name, data_dir)
        except DataError as e:
            raise click.ClickException(f"{name}: {e}") from e
        emb = embed_texts(encoder, list(bench.tools.named_texts), cache)
        effects = benchmark_effects(bench, emb, encoder.model_id)
        texts += list(bench.train.texts)
        targets.append(request_targets(bench.train.gold, effects))
        trained_on[name] = {"requests": bench.train.size, "data": bench.fingerprint()[:16]}
        if name != "ultratool":  # its test requests are its training pool (cross-validation protocol)
            tests.update({f"{name}/{s}": (list(qs.texts), request_targets(qs.gold, effects))
                          for s, qs in bench.tests.items()})
    x, y_all = intent_model.features(texts), np.concatenate(targets)
    cv = cross_validate(x, y_all)
    best = max(cv, key=lambda r: (r["auc"], r["l2"], -r["steps"]))
    config = intent_model.IntentConfig(steps=best["steps"], l2=best["l2"])
    if config != intent_model.IntentConfig():
        click.echo(f"note: cross-validation chose l2 {config.l2}, steps {config.steps}; IntentConfig's defaults "
                   "differ (set them to these)", err=True)
    w, b = intent_model.fit(x, y_all, None, config)
    model = intent_model.IntentModel(w[0], b[0])
    figures = {split: held_out(model, t, y) for split, (t, y) in tests.items()}
    meta = {"trained_on": trained_on, "config": config.__dict__, "cross_validation": cv, "held_out": figures}
    intent_model.IntentModel(w[0], b[0], meta).save(out)
    click.echo(json.dumps(figures, indent=1))
    click.echo(f"wrote {out} ({sum(v['requests'] for v in trained_on.values())} training requests)")


if __name__ == "__main__":
    main()
