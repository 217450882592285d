"""Benchmark containers: plain numpy arrays the JAX code can use directly.

Conventions used across the package:
  * tools are indexed 0..N-1; ``risk`` is int32 [N] in 1..5;
  * ``perm_mask`` is bool [N, 5] over PERMISSION_CATEGORIES; ``perm_level`` = perm_mask.sum(-1);
  * gold sets are int32 [Q, G] padded with -1 (G = the largest gold set of the split);
  * embeddings are float32 [n, d], L2-normalised.

Why plain arrays: JAX and numpy code take them as they are, with no conversion layer in between.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from riskrank_jax.permissions import PERMISSION_CATEGORIES, permission_mask, split_identifier


@dataclass(frozen=True, eq=False)
class ToolRegistry:
    """A tool pool. ``names[i]`` is tool i's unique id, ``descriptions[i]`` its text."""

    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    risk: np.ndarray  # int32 [N], 1..5
    perm_mask: np.ndarray  # bool [N, 5]
    source: str = ""

    @classmethod
    def build(cls, names, descriptions, risk, source: str = "") -> "ToolRegistry":
        names = tuple(names)
        descriptions = tuple(descriptions)
        risk = np.asarray(risk, dtype=np.int32)
        return cls(names, descriptions, risk, permission_mask(descriptions), source)

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def perm_level(self) -> np.ndarray:
        """int32 [N]: number of matching permission categories."""
        return self.perm_mask.sum(-1).astype(np.int32)

    def index_of(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    @property
    def named_texts(self) -> tuple[str, ...]:
        """"<name words>: <description>" per tool ("getWeatherForecast" -> "get weather forecast: ..."), the
        text the beyond-paper hybrid / rerank variants embed (the paper embeds descriptions alone)."""
        return tuple(f"{split_identifier(n).strip()}: {d}" for n, d in zip(self.names, self.descriptions))


@dataclass(frozen=True, eq=False)
class QuerySet:
    """Queries of one split. ``gold`` is int32 [Q, G] padded with -1."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    gold: np.ndarray

    @classmethod
    def build(cls, ids, texts, gold_lists: list[list[int]]) -> "QuerySet":
        return cls(tuple(ids), tuple(texts), pad_gold(gold_lists))

    @property
    def size(self) -> int:
        return len(self.texts)

    @property
    def gold_mask(self) -> np.ndarray:
        return self.gold >= 0

    def gold_lists(self) -> list[list[int]]:
        return [[int(g) for g in row if g >= 0] for row in self.gold]

    def subset(self, idx: np.ndarray) -> "QuerySet":
        idx = np.asarray(idx)
        gold = self.gold[idx]
        width = max(1, int((gold >= 0).sum(-1).max(initial=1)))
        return QuerySet(tuple(self.ids[i] for i in idx), tuple(self.texts[i] for i in idx), gold[:, :width])


def pad_gold(gold_lists: list[list[int]]) -> np.ndarray:
    width = max([len(g) for g in gold_lists] + [1])
    out = np.full((len(gold_lists), width), -1, dtype=np.int32)
    for i, g in enumerate(gold_lists):
        out[i, : len(g)] = g
    return out


@dataclass(frozen=True, eq=False)
class Benchmark:
    """A tool pool, its training queries and its test splits, with the evaluation protocol.

    The protocol is expressed as arrays so every (seed, fold) model can be trained in one vmapped
    program:
      * ``train_fold_mask``: bool [F, Q_train]; model f trains on the train queries where it is True;
      * ``test_fold``: {split: int32 [Q_split]}; test query q is evaluated with the fold-``test_fold[q]``
        model. F = 1 for a fixed train/test split; F = 5 for UltraTool's cross-validation fallback.
    """

    name: str
    protocol: str
    tools: ToolRegistry
    train: QuerySet
    tests: dict[str, QuerySet]
    train_fold_mask: np.ndarray
    test_fold: dict[str, np.ndarray]
    data_notes: dict = field(default_factory=dict)  # counts of documented mappings (e.g. null risk -> 2)

    @property
    def n_folds(self) -> int:
        return int(self.train_fold_mask.shape[0])

    def fingerprint(self) -> str:
        """A hash of everything training and evaluation depend on (texts, gold, labels, folds)."""
        h = hashlib.sha256()
        h.update(self.name.encode())
        h.update(self.protocol.encode())
        for s in (self.tools.names, self.tools.descriptions):
            h.update("\x1f".join(s).encode())
        h.update(self.tools.risk.tobytes())
        for qs in [self.train, *self.tests.values()]:
            h.update("\x1f".join(qs.texts).encode())
            h.update(qs.gold.tobytes())
        h.update(self.train_fold_mask.tobytes())
        for k in sorted(self.test_fold):
            h.update(k.encode())
            h.update(self.test_fold[k].tobytes())
        return h.hexdigest()[:16]


__all__ = ["ToolRegistry", "QuerySet", "Benchmark", "pad_gold", "PERMISSION_CATEGORIES"]
