"""The first stages the production Ranker runs: a BM25 index and dense cosine scores, the top candidates they
give, and the full ranking a reranked candidate list leaves.

    index = first_stage.Bm25Index(tool_texts)                      # built once per pool
    bm25 = index.scores(query_texts)                               # float32 [Q, N]
    cos = first_stage.dense_scores(query_emb, tool_emb)            # float32 [Q, N] cosine
    cand = first_stage.top_candidates(scores, c=100)               # int32 [Q, 100], best first
    full = first_stage.candidate_full_ranking(reranked, base)      # int32 [Q, N]: reranked ++ the rest in base order

Candidate mode reranks ``cand`` and then calls ``candidate_full_ranking`` to append the rest of the pool in base
order, so metrics over the whole ranking (MRR) stay defined. The experiments' retrieval baselines (these scores
ranked alone) are riskrank_jax/retrieve/baselines.py.

Why shared: the Ranker and the sweep rank with the same scores and the same tie rule (lower tool index first).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.runtime.logs import quiet_library_loggers
from riskrank_jax.scoring import top_order

__all__ = ["Bm25Index", "dense_scores", "top_candidates", "candidate_full_ranking"]


def _default_stemmer():
    """PyStemmer's English stemmer when it is installed, else None (bm25s then does no stemming)."""
    try:
        # deferred: PyStemmer is optional; without it BM25 runs unstemmed
        import Stemmer  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


class Bm25Index:
    """A BM25 index of a fixed tool pool, built once and queried many times (``retrieve.baselines.bm25_scores`` scores a pool once).

    The full score row of a query comes from ``BM25.get_scores_from_ids`` (a sum of a few sparse CSC
    columns, O(postings) per query); this is cheaper than ``retrieve(k=N)``, which also sorts N scores
    per query and needs a scatter back to tool order.
    """

    def __init__(self, tool_texts, *, stemmer="auto"):
        # deferred: bm25s is heavy to import; only a BM25 or hybrid first stage builds an index
        import bm25s

        quiet_library_loggers(names=("bm25s",))  # bm25s sets its logger to DEBUG when imported
        self.stemmer = _default_stemmer() if stemmer == "auto" else stemmer
        self.n_tools = len(tool_texts)
        self._tok = functools.partial(bm25s.tokenize, stopwords="en", stemmer=self.stemmer, return_ids=False,
                                      show_progress=False)
        self._retriever = None
        if self.n_tools:
            self._retriever = bm25s.BM25()
            self._retriever.index(self._tok(list(tool_texts)), show_progress=False)

    def scores(self, query_texts) -> np.ndarray:
        """float32 [Q, N] for Q query texts; a query with no in-vocabulary token scores 0 everywhere."""
        query_texts = list(query_texts)
        out = np.zeros((len(query_texts), self.n_tools), dtype=np.float32)
        if self._retriever is None or not query_texts:
            return out
        for i, tokens in enumerate(self._tok(query_texts)):
            ids = self._retriever.get_tokens_ids(tokens)
            if ids:
                out[i] = self._retriever.get_scores_from_ids(ids)
        return out


@jax.jit
def dense_scores(query_emb: jax.Array, tool_emb: jax.Array) -> jax.Array:
    """Cosine similarity of every query with every tool.

    s[q, t] = <e_q, e_t> / (|e_q| |e_t|); embeddings are normalised again defensively (a zero vector
    scores 0).

    Args:
      query_emb: float [Q, d].
      tool_emb: float [N, d].

    Returns:
      float32 [Q, N].
    """

    def normalise(x):
        x = jnp.asarray(x, dtype=jnp.float32)
        norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
        return x / jnp.where(norm > 0, norm, 1.0)

    return normalise(query_emb) @ normalise(tool_emb).T


@functools.partial(jax.jit, static_argnames=("c",))
def top_candidates(scores: jax.Array, *, c: int = 100) -> jax.Array:
    """The c best tools in the order of ``scoring.rank_order`` (``scoring.top_order``: equal scores, after
    ``scoring.tie_snapped``, keep the lower index first), i.e. ``rank_order(scores)[..., :c]``.

    Args:
      scores: float [..., N], N >= c.
      c: number of candidates (keyword-only, static).

    Returns:
      int32 [..., c].
    """
    scores = jnp.asarray(scores)
    if not 1 <= c <= scores.shape[-1]:
        raise ValueError(f"c must be in 1..{scores.shape[-1]}, got {c}")
    return top_order(scores, c)


def _candidate_full_ranking_row(cand: jax.Array, base: jax.Array) -> jax.Array:
    n, c = base.shape[-1], cand.shape[-1]
    in_cand = jnp.zeros((n,), dtype=jnp.bool_).at[cand].set(True)
    # Stable sort on the "is a candidate" flag puts non-candidates first, in base order.
    tail = base[jnp.argsort(in_cand[base], stable=True)[: n - c]]
    return jnp.concatenate([cand, tail]).astype(jnp.int32)


@jax.jit
def candidate_full_ranking(cand: jax.Array, base_ranking: jax.Array) -> jax.Array:
    """A reranked candidate list followed by the rest of the pool in base order.

    out = cand ++ [t in base_ranking if t not in cand]   (length N).

    Args:
      cand: int32 [..., C], distinct tool indices in 0..N-1 (the reranked candidates).
      base_ranking: int32 [..., N], a permutation of the pool (e.g. ``scoring.rank_order`` of the base
        retriever); leading axes broadcast with ``cand``'s.

    Returns:
      int32 [..., N], a permutation of the pool whose first C entries are ``cand``.
    """
    fn = jnp.vectorize(_candidate_full_ranking_row, signature="(c),(n)->(n)")
    return fn(jnp.asarray(cand, dtype=jnp.int32), jnp.asarray(base_ranking, dtype=jnp.int32))
