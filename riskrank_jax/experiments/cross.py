"""The cross-encoder rows (``ce_*``, opt-in: ``--variants ce``): a second stage over the hybrid's top candidates.

    models = fit_cross_encoders(bench, first_stages, cfg, encoder_dir, ckpt_root)   # CrossModels (seeds x folds)
    x = with_cross(inputs, models, split, n_seeds)    # first[("ce_rerank", "named")]: [Q, S, N]
    x = with_baselines(inputs, split_name)            # the general-purpose rerankers' rows, or why they did not run

Trained rows: for every model m = (seed, fold), the sweep's encoder is initialised as a cross-encoder
(``[CLS] query [SEP] tool text [SEP]``, ``model.cross_encoder.init_from_encoder``) and trained on the fold's
training queries against the fold's hybrid (named texts) top-``top`` candidates; its gate γ is chosen on held-out
training queries (γ = 0 is the hybrid itself); test queries are reranked by their fold's model before the
risk penalty, graph and rule filter. Baseline rows: the paper's general-purpose rerankers
(``BASELINE_RERANKERS``) over the dense top-100, relevance only, when their weights are on this machine or
downloadable; otherwise the row says "not run: weights absent".

Why opt-in: on a 2-core CPU a cross-encoder scores about 20 pairs a second, so one benchmark's rows take tens
of minutes (docs/performance.md); on an accelerator they are cheap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from riskrank_jax.experiments.stages import short_hash
from riskrank_jax.model import cross_encoder as ce_lib
from riskrank_jax.model import cross_encoder_train as ce_train
from riskrank_jax.retrieve.hybrid import fuse

BASELINE_TOP = 100  # the paper's rerankers rerank the dense top-100


@dataclass(frozen=True)
class CrossModels:
    """Every seed x fold cross-encoder (m = s·F + f), its gate [M] and training report per model."""

    models: list
    gate: np.ndarray
    weight: np.ndarray
    reports: list


def fit_cross_encoders(bench, fs, cfg, encoder_dir, ckpt_root) -> CrossModels:
    """Train (or reuse from checkpoints) the cross-encoder of every seed x fold (``cfg.cross_encoder``)."""
    config = cfg.cross_encoder
    gold = np.asarray(bench.train.gold)
    texts, tools = list(bench.train.texts), list(bench.tools.named_texts)
    root = Path(ckpt_root).resolve() / bench.name / f"cross-{short_hash([bench.fingerprint(), str(encoder_dir), config.to_dict()])}"
    models, gates, weights, reports = [], [], [], []
    for seed in cfg.seeds:
        for fold in range(bench.n_folds):
            rows = np.flatnonzero(np.asarray(bench.train_fold_mask)[fold])
            w = float(fs.weights["named"][fold])
            first = np.asarray(fuse(fs.train_dense_named[rows], fs.train_bm25_named[rows], w))
            ce = ce_lib.init_from_encoder(encoder_dir, seed=int(seed), max_tokens=config.max_tokens)
            tuned, rep = ce_train.train_cross_encoder(ce, [texts[i] for i in rows], gold[rows], tools, first, int(seed),
                                                    config, checkpoint_dir=root / f"seed{seed}-fold{fold}")
            models.append(tuned)
            gates.append(rep["gate"])
            weights.append(w)
            reports.append({"seed": int(seed), "fold": int(fold), "gate": rep["gate"], "steps": rep["steps"],
                            "seconds": round(rep["seconds"], 1), "train_pairs": rep["train_pairs"],
                            "heldout_ndcg@5_by_gate": {str(g): round(v, 4)
                                                       for g, v in rep["heldout_ndcg@5_by_gate"].items()}})
    return CrossModels(models, np.asarray(gates, np.float32), np.asarray(weights, np.float32), reports)


def with_cross(x, models: CrossModels, n_seeds: int, top: int):
    """``x`` with first[("ce_rerank", "named")] [Q, S, N]: each query's hybrid (named) reranked by its fold's
    cross-encoder of every seed (models with γ = 0 are not run: their relevance is the z-scored hybrid)."""
    fold = np.asarray(x.fold)
    dense, bm25 = x.first["dense", "named"], x.first["bm25", "named"]
    n_f = len(models.models) // n_seeds
    out = np.zeros((fold.size, n_seeds, dense.shape[1]), np.float32)
    for m, model in enumerate(models.models):
        s, f = divmod(m, n_f)
        idx = np.flatnonzero(fold == f)
        first = np.asarray(fuse(dense[idx], bm25[idx], models.weight[m]))
        cand = ce_train.candidates(first, top)
        gate = float(models.gate[m])
        scores = (ce_train.ce_scores_for(model, [x.query_texts[i] for i in idx], list(x.named_tool_texts), cand)
                  if gate > 0 else np.zeros(cand.shape, np.float32))
        out[idx, s] = np.asarray(ce_train.rerank_relevance(first, cand, scores, gate))
    return dataclasses.replace(x, first={**x.first, ("ce_rerank", "named"): out})


def baseline_relevance(name: str, x) -> np.ndarray | str:
    """[Q, 1, N]: the baseline reranker ``name`` over the dense top-100 (description texts), γ = 1; or the
    string saying why it did not run."""
    model = ce_lib.try_load_baseline(name)
    if isinstance(model, str):
        return model
    dense = x.first["dense", "description"]
    cand = ce_train.candidates(dense, BASELINE_TOP)
    scores = ce_train.ce_scores_for(model, list(x.query_texts), list(x.tool_texts), cand)
    return np.asarray(ce_train.rerank_relevance(dense, cand, scores, 1.0))[:, None]


def cross_summary(models: CrossModels) -> dict:
    """results.json "cross_encoder": the trained models' gates and training reports."""
    return {"models": models.reports, "kept_cross_encoder": int((models.gate > 0).sum()), "of": len(models.models)}
