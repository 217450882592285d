"""Baseline retrievers and ranking helpers."""

from __future__ import annotations

import bm25s
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from riskrank_jax.retrieve import baselines as R, first_stage

TOOLS = [
    "Send an email message to a recipient with a subject and body.",
    "Delete a file from the local disk permanently.",
    "Get the current weather forecast for a city.",
    "Transfer money between two bank accounts.",
    "Translate text from one language to another.",
    "Search the web for pages matching a query.",
]
QUERIES = [
    "What is the weather forecast for Paris?",
    "please transfer money to my savings bank account",
    "delete the old file on disk",
    "the of and",  # stopwords only: no in-vocabulary token
    "xylophone quantum",  # out-of-vocabulary only
]


def test_bm25_exact_match_first_and_shapes():
    scores = R.bm25_scores(TOOLS, QUERIES)
    assert scores.shape == (len(QUERIES), len(TOOLS)) and scores.dtype == np.float32
    top = np.argmax(scores, axis=1)
    assert list(top[:3]) == [2, 3, 1]
    # The best document strictly beats the others (not a tie at 0).
    assert np.all(np.sort(scores[:3], axis=1)[:, -1] > np.sort(scores[:3], axis=1)[:, -2])
    np.testing.assert_array_equal(scores[3:], 0.0)
    # An exact copy of a document ranks that document first.
    exact = R.bm25_scores(TOOLS, [TOOLS[4]])
    assert int(np.argmax(exact[0])) == 4 and exact[0, 4] > 0


def test_bm25_deterministic_and_matches_bm25s_retrieve():
    a = R.bm25_scores(TOOLS, QUERIES[:3])
    b = R.bm25_scores(TOOLS, QUERIES[:3])
    np.testing.assert_array_equal(a, b)
    # Same scores as bm25s' own top-k retrieval with k = N.
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(TOOLS, stopwords="en", show_progress=False), show_progress=False)
    q = bm25s.tokenize(QUERIES[:3], stopwords="en", return_ids=False, show_progress=False)
    docs, sc = retriever.retrieve(q, k=len(TOOLS), show_progress=False)
    want = np.zeros_like(a)
    np.put_along_axis(want, docs, sc, axis=1)
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_bm25_empty_inputs():
    assert R.bm25_scores(TOOLS, []).shape == (0, len(TOOLS))
    assert R.bm25_scores([], ["anything"]).shape == (1, 0)


def test_dense_scores_cosine_and_ranking_matches_numpy():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(7, 16)).astype(np.float32)
    t = rng.normal(size=(50, 16)).astype(np.float32)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    tn = t / np.linalg.norm(t, axis=1, keepdims=True)
    s = first_stage.dense_scores(q * 3.0, t)  # unnormalised input is normalised defensively
    assert s.shape == (7, 50)
    np.testing.assert_allclose(np.asarray(s), qn @ tn.T, atol=1e-5)
    ranking = np.asarray(R.rank_full(s))
    assert ranking.dtype == np.int32
    np.testing.assert_array_equal(ranking, np.argsort(-np.asarray(s), axis=1, kind="stable"))
    np.testing.assert_array_equal(np.asarray(first_stage.top_candidates(s, c=10)), ranking[:, :10])
    # A zero vector scores 0 instead of NaN.
    z = first_stage.dense_scores(np.zeros((1, 16), np.float32), t)
    np.testing.assert_array_equal(np.asarray(z), 0.0)


def test_ties_break_by_lower_index():
    scores = jnp.array([[0.5, 1.0, 0.5, 1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    want = np.array([[1, 3, 0, 2, 5, 4], [0, 1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(np.asarray(R.rank_full(scores)), want)
    for c in (1, 3, 4, 6):
        np.testing.assert_array_equal(np.asarray(first_stage.top_candidates(scores, c=c)), want[:, :c])
    # Many ties on a bigger pool (quantised scores), batched with a leading axis.
    rng = np.random.default_rng(1)
    s = np.round(rng.random((2, 5, 300)) * 4) / 4
    ranking = np.asarray(R.rank_full(s))
    np.testing.assert_array_equal(ranking, np.argsort(-s, axis=-1, kind="stable"))
    np.testing.assert_array_equal(np.asarray(first_stage.top_candidates(s, c=100)), ranking[..., :100])
    with pytest.raises(ValueError):
        first_stage.top_candidates(s, c=301)


def test_candidate_full_ranking():
    rng = np.random.default_rng(2)
    Q, N, C = 20, 80, 10
    base = np.stack([rng.permutation(N) for _ in range(Q)]).astype(np.int32)
    # Candidates: a reranked top-C of the base plus, in some rows, tools from deep in the base order.
    cand = np.stack([rng.permutation(np.concatenate([b[: C - 2], b[-2:]])) for b in base]).astype(np.int32)
    out = np.asarray(first_stage.candidate_full_ranking(cand, base))
    assert out.shape == (Q, N) and out.dtype == np.int32
    for q in range(Q):
        assert sorted(out[q]) == list(range(N))  # a permutation of the pool
        np.testing.assert_array_equal(out[q, :C], cand[q])
        tail = [t for t in base[q] if t not in set(cand[q])]
        np.testing.assert_array_equal(out[q, C:], tail)
    # vmap over a leading axis (e.g. λ values) equals the batched call; base broadcasts.
    cands = np.stack([cand, cand[:, ::-1]])
    vm = jax.vmap(first_stage.candidate_full_ranking, in_axes=(0, None))(cands, base)
    np.testing.assert_array_equal(np.asarray(vm), np.asarray(first_stage.candidate_full_ranking(cands, base)))
    np.testing.assert_array_equal(np.asarray(vm[0]), out)
    # Candidates = the base top-C in base order -> the base ranking itself.
    np.testing.assert_array_equal(np.asarray(first_stage.candidate_full_ranking(base[:, :C], base)), base)
    # the numpy version is the same permutation, leading axes included
    np.testing.assert_array_equal(R.candidate_full_ranking_host(cand, base), out)
    np.testing.assert_array_equal(R.candidate_full_ranking_host(cands, base), np.asarray(vm))


def test_candidate_full_ranking_host_whole_pool():
    """Candidates covering the whole pool (a registry smaller than the candidate count): the candidates alone."""
    rng = np.random.default_rng(4)
    base = np.stack([rng.permutation(9) for _ in range(3)]).astype(np.int32)
    cand = np.stack([rng.permutation(9) for _ in range(3)]).astype(np.int32)
    np.testing.assert_array_equal(R.candidate_full_ranking_host(cand, base), cand)
    np.testing.assert_array_equal(R.candidate_full_ranking_host(cand, base),
                                  np.asarray(first_stage.candidate_full_ranking(cand, base)))
