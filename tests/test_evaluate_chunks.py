"""Evaluation in query chunks (sized by bytes) and per [Q, N] slice gives the same per-query metrics."""

from __future__ import annotations

import numpy as np

from riskrank_jax.experiments.evaluate import (CHUNK_STEP, EvalSettings, SplitEvaluation, SplitInputs, map_query_chunks,
                                               per_slice, queries_per_chunk, rank_slices, rows_per_query, take_queries,
                                               variant_metrics, with_first_stages)
from riskrank_jax.experiments.variants import BY_NAME
from riskrank_jax.retrieve import baselines as retrievers

WORDS = "read write delete send email file calendar bank transfer search weather note".split()


def _inputs(n_queries=11, n_tools=40, dim=8, seed=0) -> SplitInputs:
    rng = np.random.default_rng(seed)
    tool_texts = tuple(" ".join(rng.choice(WORDS, 4)) for _ in range(n_tools))
    query_texts = tuple(" ".join(rng.choice(WORDS, 3)) for _ in range(n_queries))
    gold = np.full((n_queries, 2), -1, np.int32)
    gold[:, 0] = rng.integers(0, n_tools, n_queries)
    gold[::2, 1] = (gold[::2, 0] + 1) % n_tools
    t_emb = rng.normal(size=(n_tools, dim)).astype(np.float32)
    return SplitInputs(q_emb=rng.normal(size=(n_queries, dim)).astype(np.float32),
                       fold=np.zeros(n_queries, np.int32), gold=gold, query_texts=query_texts, t_emb=t_emb,
                       risk_levels=rng.integers(1, 6, n_tools).astype(np.int32),
                       perm_level=rng.integers(0, 3, n_tools).astype(np.int32), tool_texts=tool_texts,
                       named_t_emb=t_emb[::-1].copy(), named_tool_texts=tool_texts[::-1])


def test_chunk_size_stays_within_the_budget_and_is_a_multiple_of_the_step():
    rows, tools = 145, 4076
    for budget in (1 << 30, 256 << 20):
        c = queries_per_chunk(700, tools, rows, budget)
        assert c * rows * tools * 4 <= budget and c % CHUNK_STEP == 0
    assert queries_per_chunk(700, 4076, 145, 1 << 30) == queries_per_chunk(654, 4076, 145, 1 << 30) == 384
    assert queries_per_chunk(149, 50, 145, 1 << 30) == 192  # one chunk, rounded up to the step
    assert queries_per_chunk(700, 4076, 145, 1 << 20) == 1  # below one query's rows: one query per chunk


def test_rows_per_query_grows_with_the_lambda_grid():
    s = EvalSettings((0.0, 0.1), 0.1, 0.2, 5, 100, 3, 1 << 30)
    one = rows_per_query([BY_NAME["dense"]], s)
    grid = rows_per_query([BY_NAME["dense"], BY_NAME["core"]], s)
    assert grid - one == 3 * 3 + 4 * (3 * 3 - 3) + 2 * 3  # core's grid (2 λ + main) x 3 seeds, its run's heads


def test_map_query_chunks_equals_one_call():
    x = with_first_stages(_inputs())

    def fn(xc):
        return {"rank": np.asarray(retrievers.rank_full(xc.first["bm25", "description"])).T,
                "fold": np.asarray(xc.fold)}

    whole = fn(x)
    for chunk in (1, 4, 11, 16):
        got = map_query_chunks(fn, x, chunk)
        assert all(np.array_equal(got[k], whole[k]) for k in whole), chunk
    assert take_queries(x, [3, 1]).query_texts == (x.query_texts[3], x.query_texts[1])


def test_per_slice_equals_the_vectorised_call():
    scores = np.random.default_rng(1).normal(size=(2, 3, 5, 17)).astype(np.float32)
    scores[..., 4] = scores[..., 3]  # a tie: the lower index first either way
    assert np.array_equal(np.asarray(rank_slices(scores)), np.asarray(retrievers.rank_full(scores)))
    out = per_slice(lambda a, b: {"s": a + b}, scores, scores[0, 0])  # leading axes broadcast
    np.testing.assert_array_equal(np.asarray(out["s"]), scores + scores[0, 0])


def test_chunked_metrics_equal_whole_split_metrics():
    x = with_first_stages(_inputs())
    variants = [BY_NAME[n] for n in ("bm25", "dense", "rule_only", "hybrid", "hybrid_named")]
    runs = {"hybrid_weights": {"description": np.asarray([0.3], np.float32),
                               "named": np.asarray([0.7], np.float32)}}
    s = EvalSettings((0.0, 0.1), 0.1, 0.2, 5, 10, 1, 1 << 30)
    whole = variant_metrics(SplitEvaluation(x, runs, {}, s), variants)
    chunked = map_query_chunks(lambda xc: variant_metrics(SplitEvaluation(xc, runs, {}, s), variants), x, 4)
    for v in variants:
        for m, a in whole[v.name][0].items():
            np.testing.assert_allclose(chunked[v.name][0][m], a, rtol=0, atol=1e-7, err_msg=f"{v.name} {m}")
    assert whole["dense"][0]["ndcg@5"].shape == (1, 11)
    assert not np.array_equal(whole["bm25"][0]["mrr"], whole["dense"][0]["mrr"])  # the variants do differ


def test_fold_model_scores_equal_pipeline_model_scores():
    import jax

    from riskrank_jax.model import heads as model
    from riskrank_jax.rank import stacked as pipeline
    from riskrank_jax.experiments.evaluate import fold_model_scores

    rng = np.random.default_rng(2)
    q, t = rng.normal(size=(70, 8)).astype(np.float32), rng.normal(size=(25, 8)).astype(np.float32)
    params = jax.vmap(lambda k: model.init_params(k, 8, 16))(jax.random.split(jax.random.key(0), 6))  # 2 seeds x 3 folds
    fold = rng.integers(0, 3, 70)
    rel, risk = fold_model_scores(params, q, t, n_seeds=2, test_fold=fold, memory_budget=1 << 30)
    ref_rel, ref_risk = pipeline.model_scores(params, q, t, n_seeds=2, test_fold=fold)
    np.testing.assert_allclose(np.asarray(rel), np.asarray(ref_rel), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(risk), np.asarray(ref_risk))
    assert rel.shape == (2, 70, 25) and float(np.abs(np.asarray(rel[0]) - np.asarray(rel[1])).max()) > 0
