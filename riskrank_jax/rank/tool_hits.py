"""The records a program gets back from `Ranker.rank_queries`: one `ToolHit` per returned tool.

    hits = ranker.rank_queries(["delete the branch feature-x"], k=5)[0]
    [h.name for h in hits]; hits[0].score, hits[0].relevance, hits[0].risk_level, hits[0].risk_source

Why records: a program gets names, scores and risk sources, not indices into arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from riskrank_jax.scoring import is_risky


class ToolHit(NamedTuple):
    """rank: 1-based position; score: the final score the list is sorted by; relevance: the first stage's
    score (zero-shot) or the head's f_rel; risk_level 1..5 with risk_source (where that level came from);
    risky: risk_level ≥ 3."""

    rank: int
    name: str
    score: float
    relevance: float
    risk_level: int
    risk_source: str
    risky: bool

    def as_dict(self) -> dict:
        return self._asdict()


def make_hits(ids, total, relevance, names, risk_levels, risk_source, min_score: float | None = None
              ) -> list[list[ToolHit]]:
    """ToolHits of Q queries.

    Args:
      ids: int [Q, k] tool ids, best first. total, relevance: float [Q, k] at those ids.
      names, risk_levels [N], risk_source: per tool.
      min_score: drop hits whose total score is below it (None: keep all).
    """
    ids, total, relevance = np.asarray(ids), np.asarray(total, np.float64), np.asarray(relevance, np.float64)
    levels = np.asarray(risk_levels)
    out = []
    for q in range(ids.shape[0]):
        row = []
        for j, t in enumerate(ids[q]):
            if min_score is not None and total[q, j] < min_score:
                continue
            row.append(ToolHit(j + 1, names[t], float(total[q, j]), float(relevance[q, j]), int(levels[t]),
                               risk_source[t], bool(is_risky(int(levels[t])))))
        out.append(row)
    return out


__all__ = ["ToolHit", "make_hits"]
