"""Metrics against pytrec_eval, plain-Python references, hand-computed cases and properties."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import pytrec_eval

from riskrank_jax import metrics as M
from riskrank_jax.data.types import pad_gold

N_POOL = 60


def _random_cases(seed: int, n_queries: int, length: int, n_pool: int = N_POOL):
    """Random rankings (prefixes of permutations), gold sets of size 1..8 and a risk vector."""
    rng = np.random.default_rng(seed)
    ranking = np.stack([rng.permutation(n_pool)[:length] for _ in range(n_queries)]).astype(np.int32)
    gold_lists = []
    for q in range(n_queries):
        g = int(rng.integers(1, 9))
        # Bias half the gold towards the top of the ranking so the top-k metrics are not mostly 0.
        near = list(rng.choice(ranking[q, : min(length, 12)], size=min(g, 12, length) // 2, replace=False))
        rest = [t for t in rng.permutation(n_pool) if t not in near][: g - len(near)]
        gold_lists.append([int(t) for t in near + rest])
    risk = rng.integers(1, 6, size=n_pool).astype(np.int32)
    return ranking, gold_lists, risk


# ----------------------------------------------------------------------------------------------- references
def _ref_dcg(ranked, gold, k):
    return sum(1.0 / math.log2(i + 2) for i, t in enumerate(ranked[:k]) if t in gold)


def _ref_ndcg(ranked, gold, k):
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return _ref_dcg(ranked, gold, k) / ideal if ideal > 0 else 0.0


def _ref_sndcg(ranked, gold, risk, k):
    return _ref_ndcg(ranked, [g for g in gold if risk[g] < 4], k)


def _ref_rvr(ranked, risk, k, thr=3):
    top = list(ranked[:k])
    return sum(risk[t] >= thr for t in top) / len(top)


def _ref_success(ranked, gold, k):
    return float(any(t in gold for t in ranked[:k]))


def _ref_needrisk(ranked, gold, risk, k):
    return float(any(t in gold and risk[t] >= 3 for t in ranked[:k]))


def _ref_high(gold, risk):
    return float(any(risk[g] >= 3 for g in gold))


def _pytrec(ranking, gold_lists):
    qrel = {f"q{q}": {f"d{g}": 1 for g in gold} for q, gold in enumerate(gold_lists)}
    L = ranking.shape[1]
    run = {f"q{q}": {f"d{int(t)}": float(L - i) for i, t in enumerate(row)} for q, row in enumerate(ranking)}
    ev = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.5,10", "recip_rank", "recall.10"})
    res = ev.evaluate(run)
    keys = {"ndcg@5": "ndcg_cut_5", "ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@10": "recall_10"}
    return {ours: np.array([res[f"q{q}"][theirs] for q in range(len(gold_lists))]) for ours, theirs in keys.items()}


# ----------------------------------------------------------------------------------------------- cross-checks
@pytest.mark.parametrize("length", [N_POOL, 15])  # full pool ordering, and a prefix (gold may be absent)
def test_matches_pytrec_eval(length):
    ranking, gold_lists, risk = _random_cases(seed=length, n_queries=1000, length=length)
    got = M.compute_all(jnp.asarray(ranking), jnp.asarray(pad_gold(gold_lists)), jnp.asarray(risk), k=5)
    want = _pytrec(ranking, gold_lists)
    for name, ref in want.items():
        np.testing.assert_allclose(np.asarray(got[name]), ref, atol=1e-6, rtol=0, err_msg=name)
    # The cases are not degenerate.
    assert 0.1 < float(np.mean(want["ndcg@5"])) < 0.9
    if length == 15:
        assert np.any(want["mrr"] == 0.0) and np.any(want["mrr"] > 0.0)


def test_matches_python_reference():
    ranking, gold_lists, risk = _random_cases(seed=7, n_queries=1000, length=N_POOL)
    got = {k: np.asarray(v) for k, v in M.compute_all(ranking, pad_gold(gold_lists), risk, k=5).items()}
    ref = {
        "sndcg@5": [_ref_sndcg(r, g, risk, 5) for r, g in zip(ranking, gold_lists)],
        "rvr@5": [_ref_rvr(r, risk, 5) for r in ranking],
        "srr@5": [_ref_rvr(r, risk, 5, thr=4) for r in ranking],
        "success@5": [_ref_success(r, g, 5) for r, g in zip(ranking, gold_lists)],
        "needrisk_hit@5": [_ref_needrisk(r, g, risk, 5) for r, g in zip(ranking, gold_lists)],
        "high_risk": [_ref_high(g, risk) for g in gold_lists],
        "ndcg@10": [_ref_ndcg(r, g, 10) for r, g in zip(ranking, gold_lists)],
    }
    for name, values in ref.items():
        np.testing.assert_allclose(got[name], np.asarray(values), atol=1e-6, rtol=0, err_msg=name)
    # sNDCG differs from NDCG somewhere, and some queries have no safe gold (sNDCG = 0 there).
    assert np.any(np.abs(got["sndcg@5"] - got["ndcg@5"]) > 1e-3)
    no_safe = np.array([all(risk[g] >= 4 for g in gl) for gl in gold_lists])
    assert no_safe.any() and np.all(got["sndcg@5"][no_safe] == 0.0)

    # Context metrics: means over the right subsets.
    high = np.array(ref["high_risk"]) == 1.0
    ctx = {k: float(v) for k, v in M.context_metrics(got).items()}
    assert 0 < high.sum() < len(high)
    np.testing.assert_allclose(ctx["safe_rvr@5"], np.mean(np.array(ref["rvr@5"])[~high]), atol=1e-6)
    np.testing.assert_allclose(ctx["needrisk_hit@5"], np.mean(np.array(ref["needrisk_hit@5"])[high]), atol=1e-6)
    np.testing.assert_allclose(ctx["rvr@5_high_risk"], np.mean(np.array(ref["rvr@5"])[high]), atol=1e-6)


# ----------------------------------------------------------------------------------------------- hand cases
def test_hand_computed():
    risk = jnp.array([1, 2, 3, 4, 5, 1, 1, 3], dtype=jnp.int32)
    ranking = jnp.array([[0, 5, 1, 2, 3, 4, 6, 7]], dtype=jnp.int32)
    gold = jnp.array([[0, 1, -1]], dtype=jnp.int32)  # gold at rank 1 and 3
    want = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert float(M.ndcg_at_k(ranking, gold, k=5)[0]) == pytest.approx(want, abs=1e-6)
    assert float(M.mrr(ranking, gold)[0]) == pytest.approx(1.0)
    assert float(M.recall_at_k(ranking, gold, k=2)[0]) == pytest.approx(0.5)
    # Top-5 = tools 0,5,1,2,3 with risks 1,1,2,3,4: RVR 2/5, SRR 1/5.
    assert float(M.rvr_at_k(ranking, risk, k=5)[0]) == pytest.approx(0.4)
    assert float(M.srr_at_k(ranking, risk, k=5)[0]) == pytest.approx(0.2)
    assert not bool(M.is_high_risk_query(gold, risk)[0])
    assert float(M.needrisk_hit_at_k(ranking, gold, risk, k=5)[0]) == 0.0

    # Gold {3 (r=4), 2 (r=3)} at ranks 5 and 4: only tool 2 earns gain in sNDCG.
    gold2 = jnp.array([[3, 2]], dtype=jnp.int32)
    assert float(M.sndcg_at_k(ranking, gold2, risk, k=5)[0]) == pytest.approx(1 / math.log2(5), abs=1e-6)
    want_ndcg = (1 / math.log2(5) + 1 / math.log2(6)) / (1 + 1 / math.log2(3))
    assert float(M.ndcg_at_k(ranking, gold2, k=5)[0]) == pytest.approx(want_ndcg, abs=1e-6)
    assert float(M.mrr(ranking, gold2)[0]) == pytest.approx(1 / 4)
    assert bool(M.is_high_risk_query(gold2, risk)[0])
    assert float(M.needrisk_hit_at_k(ranking, gold2, risk, k=5)[0]) == 1.0
    assert float(M.needrisk_hit_at_k(ranking, gold2, risk, k=3)[0]) == 0.0
    assert float(M.success_at_k(ranking, gold2, k=3)[0]) == 0.0
    assert float(M.success_at_k(ranking, gold2, k=4)[0]) == 1.0

    # Only severe gold -> sNDCG 0; no gold at all -> every gold metric 0.
    assert float(M.sndcg_at_k(ranking, jnp.array([[4, 3]]), risk, k=5)[0]) == 0.0
    empty = jnp.full((1, 2), -1, dtype=jnp.int32)
    for fn in (lambda: M.ndcg_at_k(ranking, empty, k=5), lambda: M.mrr(ranking, empty),
               lambda: M.recall_at_k(ranking, empty, k=10), lambda: M.success_at_k(ranking, empty, k=5)):
        assert float(fn()[0]) == 0.0
    # Gold absent from a prefix ranking: MRR 0.
    assert float(M.mrr(ranking[:, :3], jnp.array([[7]]))[0]) == 0.0
    # Gold beyond the cut-off but inside the ranking: MRR still counts it.
    assert float(M.mrr(ranking, jnp.array([[7]]))[0]) == pytest.approx(1 / 8)


def test_padding_and_gold_order_invariance():
    ranking, gold_lists, risk = _random_cases(seed=3, n_queries=200, length=N_POOL)
    gold = pad_gold(gold_lists)
    base = M.compute_all(ranking, gold, risk)
    padded = np.concatenate([gold, np.full((gold.shape[0], 5), -1, np.int32)], axis=1)
    rng = np.random.default_rng(0)
    shuffled = np.stack([row[rng.permutation(row.size)] for row in padded])  # gold and padding interleaved
    for g in (padded, shuffled):
        other = M.compute_all(ranking, g, risk)
        for name in M.METRIC_KEYS:
            np.testing.assert_array_equal(np.asarray(base[name]), np.asarray(other[name]), err_msg=name)


def test_keys_and_shapes():
    ranking, gold_lists, risk = _random_cases(seed=1, n_queries=6, length=12)
    out = M.compute_all(ranking, pad_gold(gold_lists), risk)
    assert tuple(out) == M.METRIC_KEYS
    assert all(v.shape == (6,) and v.dtype == jnp.float32 for v in out.values())


# ----------------------------------------------------------------------------------------------- batching
def test_leading_axis_broadcast_jit_and_vmap_equal_loop():
    S, Q = 3, 40
    rng = np.random.default_rng(11)
    _, gold_lists, risk = _random_cases(seed=5, n_queries=Q, length=N_POOL)
    gold = jnp.asarray(pad_gold(gold_lists))
    rankings = jnp.asarray(np.stack([[rng.permutation(N_POOL) for _ in range(Q)] for _ in range(S)]), jnp.int32)

    loop = [M.compute_all(rankings[s], gold, risk) for s in range(S)]
    broadcast = M.compute_all(rankings, gold, risk)  # ranking [S, Q, L], gold [Q, G]
    vmapped = jax.jit(jax.vmap(lambda r: M.compute_all(r, gold, risk)))(rankings)
    for name in M.METRIC_KEYS:
        want = np.stack([np.asarray(o[name]) for o in loop])
        assert broadcast[name].shape == (S, Q)
        np.testing.assert_allclose(np.asarray(broadcast[name]), want, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(np.asarray(vmapped[name]), want, atol=1e-7, err_msg=name)

    # Context metrics and means reduce the query axis only.
    ctx = M.context_metrics(broadcast)
    means = M.mean_metrics(broadcast)
    for s in range(S):
        c = M.context_metrics(loop[s])
        for name in ctx:
            np.testing.assert_allclose(float(ctx[name][s]), float(c[name]), atol=1e-6)
        np.testing.assert_allclose(float(means["ndcg@5"][s]), float(np.mean(loop[s]["ndcg@5"])), atol=1e-6)


# ----------------------------------------------------------------------------------------------- reductions
def test_mean_metrics_where_and_empty_subsets():
    per_query = {"a": jnp.array([1.0, 2.0, 3.0, 6.0]), "high_risk": jnp.array([0.0, 1.0, 0.0, 1.0])}
    assert float(M.mean_metrics(per_query)["a"]) == pytest.approx(3.0)
    assert float(M.mean_metrics(per_query, where=jnp.array([True, False, True, False]))["a"]) == pytest.approx(2.0)
    assert math.isnan(float(M.mean_metrics(per_query, where=jnp.zeros(4, bool))["a"]))

    no_high = {"rvr@5": jnp.array([0.2, 0.4]), "needrisk_hit@5": jnp.array([1.0, 0.0]), "high_risk": jnp.zeros(2)}
    ctx = M.context_metrics(no_high)
    assert float(ctx["safe_rvr@5"]) == pytest.approx(0.3)
    assert math.isnan(float(ctx["needrisk_hit@5"])) and math.isnan(float(ctx["rvr@5_high_risk"]))


def test_mean_metrics_without_where_equals_all_true_where_bit_for_bit():
    """No mask and an all-True mask are one computation (the compiled mean always takes the mask as an input;
    compiled with a constant mask, XLA vectorised the sum differently and the means moved by one ulp)."""
    rng = np.random.default_rng(0)
    for shape in [(1, 654), (4, 3, 1000), (3, 30)]:
        v = rng.uniform(size=shape).astype(np.float32)
        plain = np.asarray(M.mean_metrics({"v": v})["v"])
        masked = np.asarray(M.mean_metrics({"v": v}, where=np.ones(shape, bool))["v"])
        np.testing.assert_array_equal(plain, masked)
        np.testing.assert_allclose(plain, v.astype(np.float64).mean(-1), rtol=1e-6)


def test_summarize():
    out = M.summarize({"ndcg@5": np.array([1.0, 2.0, 3.0, 4.0]), "one": np.array([0.5]), "scalar": 0.25})
    assert out["ndcg@5"]["mean"] == pytest.approx(2.5)
    assert out["ndcg@5"]["std"] == pytest.approx(math.sqrt(5.0 / 3.0))  # ddof=1: sum of squares 5, / (4-1)
    assert out["one"] == {"mean": 0.5, "std": 0.0}
    assert out["scalar"] == {"mean": 0.25, "std": 0.0}
    assert isinstance(out["ndcg@5"]["mean"], float) and isinstance(out["ndcg@5"]["std"], float)


def test_prefix_shorter_than_k_and_bad_k():
    risk = jnp.array([3, 1, 1, 1], dtype=jnp.int32)
    ranking = jnp.array([[0, 1]], dtype=jnp.int32)
    # Cut-off clipped to L = 2: RVR = 1/2; NDCG uses the ideal over min(k, |gold|) = 2 positions.
    assert float(M.rvr_at_k(ranking, risk, k=5)[0]) == pytest.approx(0.5)
    want = 1.0 / (1 + 1 / math.log2(3))
    assert float(M.ndcg_at_k(ranking, jnp.array([[0, 3]]), k=5)[0]) == pytest.approx(want, abs=1e-6)
    with pytest.raises(ValueError):
        M.ndcg_at_k(ranking, jnp.array([[0]]), k=0)
