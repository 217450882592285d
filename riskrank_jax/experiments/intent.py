"""The intent stage on the benchmarks: their tools' effects, their requests' targets, and the per-fold intent models.

    eff = benchmark_effects(bench, named_emb)            # bool [N, E]: each tool's effects from its dimensions
    y = request_targets(bench.train.gold, eff)           # float32 [Q, E]: the effects of each request's gold tools
    run = fit_intent(bench, eff)                          # IntentRun: one model per fold (bench.train_fold_mask)
    learned = fold_probs(run, texts, test_fold)           # float32 [Q, E]: each request under its fold's model

A benchmark's tools carry the paper's risk labels, not effects; their effects come from the same dimension
assessment user registries get (``registry.dimensions``: keywords on the name and first sentence, the shipped
learned risk model over the tool's named text).

Why per fold: on UltraTool's cross-validation protocol a request is scored by the model that did not see it, as
every trained row of the sweep.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from riskrank_jax.model import intent_model
from riskrank_jax.registry.dimensions import assess_dimensions
from riskrank_jax.registry.mcp_risk import default_model
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.tool import Tool
from riskrank_jax.retrieve.intent import EFFECTS, tool_effects


def benchmark_effects(bench, named_emb, encoder_id: str) -> np.ndarray:
    """bool [N, E]: the effects of a benchmark's tools, from the dimension assessment of their named texts
    (named_emb float32 [N, d]: those texts embedded by ``encoder_id``; the learned risk model reads them when it
    was trained on that encoder's embeddings, else the keywords alone decide)."""
    tools = bench.tools
    reg = Registry(tuple(Tool(n, n, d, "plain", bench.name) for n, d in zip(tools.names, tools.descriptions)))
    model = default_model()
    if model is None or named_emb is None or model.encoder_id != encoder_id:
        dims = assess_dimensions(reg)
    else:
        dims = assess_dimensions(reg, model.probs(np.asarray(named_emb, np.float32), list(tools.named_texts)),
                                 model.dimension_policy())
    return tool_effects([dims.row(i) for i in range(dims.size)])


def request_targets(gold, effects) -> np.ndarray:
    """float32 [Q, E]: 1 where one of a request's gold tools (gold int [Q, G], padded with -1) has effect e."""
    gold = np.asarray(gold)
    eff = np.asarray(effects, bool)[np.maximum(gold, 0)] & (gold >= 0)[..., None]
    return eff.any(axis=1).astype(np.float32)


@dataclass(frozen=True)
class IntentRun:
    """One intent model per fold: w float32 [F, D, E], b [F, E]; effects bool [N, E] of the benchmark's tools."""

    w: np.ndarray
    b: np.ndarray
    effects: np.ndarray


def fit_intent(bench, effects, config: intent_model.IntentConfig = intent_model.IntentConfig()) -> IntentRun:
    """The intent models of a benchmark's folds, trained on its training requests (``bench.train_fold_mask``)."""
    x = intent_model.features(bench.train.texts)
    w, b = intent_model.fit(x, request_targets(bench.train.gold, effects), bench.train_fold_mask, config)
    return IntentRun(w, b, np.asarray(effects, bool))


def fold_probs(run: IntentRun, texts, test_fold) -> np.ndarray:
    """float32 [Q, E]: P(effect | request) of each request under its fold's model (test_fold int [Q])."""
    x = intent_model.features(texts)
    fold = np.asarray(test_fold)
    out = np.zeros((len(texts), len(EFFECTS)), np.float32)
    for f in np.unique(fold):
        rows = fold == f
        out[rows] = intent_model.predict(run.w[f], run.b[f], x[rows])
    return out


def with_intent(x, run: IntentRun):
    """The split inputs ``x`` (``evaluate.SplitInputs``) with each request's learned needs (float32 [Q, E], its
    fold's model) under ``x.first["intent", "learned"]``, so that query chunks slice them."""
    return dataclasses.replace(x, first={**(x.first or {}),
                                         ("intent", "learned"): fold_probs(run, x.query_texts, x.fold)})


__all__ = ["with_intent", "benchmark_effects", "request_targets", "IntentRun", "fit_intent", "fold_probs"]
