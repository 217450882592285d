"""The experiments' retrieval baselines: BM25 and dense cosine ranked alone, and helpers for ranking a sweep.

    scores = baselines.bm25_scores(tool_texts, query_texts)         # [Q, N] BM25, index cached per pool
    ranking = baselines.rank_full(scores)                           # [Q, N], ties -> lower tool index
    full = baselines.candidate_full_ranking_host(cand, ranking)     # numpy twin of first_stage.candidate_full_ranking

The scores themselves are the production first stages (riskrank_jax/retrieve/first_stage.py).

Why apart: these serve evaluation (many splits against one pool, on the host), not the Ranker.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from riskrank_jax.retrieve.first_stage import Bm25Index
from riskrank_jax.scoring import rank_order

__all__ = ["bm25_scores", "rank_full", "candidate_full_ranking_host"]


def bm25_scores(tool_texts: list[str], query_texts: list[str], *, stemmer="auto") -> np.ndarray:
    """BM25 score of every tool for every query (bm25s, Lucene variant, default k1 = 1.5, b = 0.75).

    Texts are tokenized with ``bm25s.tokenize`` (lower-case, scikit-learn token pattern, English
    stopwords removed). Stemming is applied only when PyStemmer is installed (``stemmer="auto"``);
    pass ``stemmer=None`` to force none, or any bm25s-compatible stemmer. Same as
    ``Bm25Index(tool_texts, stemmer=stemmer).scores(query_texts)``; keep the index to score more queries.

    Args:
      tool_texts: N tool texts (the index).
      query_texts: Q query texts.
      stemmer: "auto", None, or a stemmer accepted by ``bm25s.tokenize``.

    Returns:
      float32 [Q, N]; a query with no in-vocabulary token scores 0 everywhere.
    """
    index = _shared_index(tuple(tool_texts)) if stemmer == "auto" else Bm25Index(tool_texts, stemmer=stemmer)
    return index.scores(query_texts)


@functools.lru_cache(maxsize=4)
def _shared_index(tool_texts: tuple[str, ...]) -> "Bm25Index":
    """The default-stemmer index of a tool pool, built once per process (an experiment scores the training
    queries and every test split against the same pools)."""
    return Bm25Index(tool_texts)


@jax.jit
def rank_full(scores: jax.Array) -> jax.Array:
    """``scoring.rank_order`` under jit: the full descending ordering, ties broken by the lower tool index.

    Args:
      scores: float [..., N].

    Returns:
      int32 [..., N].
    """
    return rank_order(scores)


def candidate_full_ranking_host(cand, base_ranking) -> np.ndarray:
    """``candidate_full_ranking`` computed by numpy on the host (the identical permutation; for evaluation on
    the CPU backend, where XLA's sort behind the jitted version is slow): cand int [..., C], base_ranking
    int [..., N] (leading axes broadcast) -> int32 [..., N]."""
    cand, base = np.asarray(cand, np.int32), np.asarray(base_ranking, np.int32)
    lead = np.broadcast_shapes(cand.shape[:-1], base.shape[:-1])
    c, n = cand.shape[-1], base.shape[-1]
    cand = np.broadcast_to(cand, lead + (c,)).reshape(-1, c)
    base = np.broadcast_to(base, lead + (n,)).reshape(-1, n)
    rows = np.arange(cand.shape[0])[:, None]
    in_cand = np.zeros(base.shape, bool)
    in_cand[rows, cand] = True
    tail = base[~in_cand[rows, base]].reshape(base.shape[0], n - c)  # row-major: each row keeps its base order
    return np.concatenate([cand, tail], axis=-1).reshape(lead + (n,))
