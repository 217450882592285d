"""Rule filter (SPEC §8): hand cases, equality with the plain-Python reference, and property tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riskrank_jax.rank.rule_filter import rule_filter, rule_filter_reference, rule_filter_with_count


def test_hand_case():
    # tools: 0 r5, 1 r3, 2 r1 perm2, 3 r1 perm3, 4 r1 perm2, 5 r1 (duplicate of 2), 6 r1, 7 r2
    risk = np.array([5, 3, 1, 1, 1, 1, 1, 2])
    perm = np.array([0, 0, 2, 3, 2, 0, 0, 0])
    emb = np.eye(8, dtype=np.float32)
    emb[5] = emb[2] + 0.1 * emb[7]  # cos(5, 2) = 0.995 > 0.9
    ranking = np.array([[0, 1, 2, 3, 4, 5, 6, 7]])
    out, n = rule_filter_with_count(ranking, risk, perm, emb, k=5)
    # 0 accepted (risky), 1 rejected (second risky), 2 and 3 accepted (high perm), 4 rejected (third high perm),
    # 5 rejected (redundant with 2), 6 accepted, 7 accepted -> K = 5 reached
    assert np.asarray(out).tolist() == [[0, 2, 3, 6, 7, 1, 4, 5]]
    assert np.asarray(n).tolist() == [5]
    # k = 7: only 5 can be accepted, the first two deferred (1, 4) fill, then the rest (5) in order
    out, n = rule_filter_with_count(ranking, risk, perm, emb, k=7)
    assert np.asarray(out).tolist() == [[0, 2, 3, 6, 7, 1, 4, 5]] and np.asarray(n).tolist() == [5]
    # k = 2: stop after 0 and 2; everything else keeps its reranked order
    assert np.asarray(rule_filter(ranking, risk, perm, emb, k=2)).tolist() == [[0, 2, 1, 3, 4, 5, 6, 7]]
    # relaxed caps accept everything except the redundant tool
    out = rule_filter(ranking, risk, perm, emb, k=8, risk_cap=9, perm_cap=9)
    assert np.asarray(out).tolist() == [[0, 1, 2, 3, 4, 6, 7, 5]]


def random_case(rng, q, l, n, d):
    risk = rng.integers(1, 6, n)
    perm = rng.integers(0, 4, n)
    centres = rng.normal(size=(4, d))
    emb = centres[rng.integers(0, 4, n)] + 0.35 * rng.normal(size=(n, d))  # clusters: some pairs > 0.9
    ranking = np.stack([rng.permutation(n)[:l] for _ in range(q)]).astype(np.int32)
    return ranking, risk, perm, emb.astype(np.float32)


@pytest.mark.parametrize("method", ["while", "scan"])
@pytest.mark.parametrize("k,risk_cap,perm_cap,thr", [(5, 1, 2, 0.9), (3, 0, 1, 0.8), (10, 2, 2, 0.95)])
def test_matches_python_reference(method, k, risk_cap, perm_cap, thr):
    rng = np.random.default_rng(k)
    ranking, risk, perm, emb = random_case(rng, 200, 40, 120, 8)
    kw = dict(k=k, risk_cap=risk_cap, perm_cap=perm_cap, sim_threshold=thr)
    out = np.asarray(rule_filter(ranking, risk, perm, emb, method=method, **kw))
    ref = rule_filter_reference(ranking, risk, perm, emb, **kw)
    np.testing.assert_array_equal(out, ref)
    assert not np.array_equal(out, ranking)  # the rules did reorder something


def test_full_pool_ranking():
    rng = np.random.default_rng(11)
    ranking, risk, perm, emb = random_case(rng, 30, 300, 300, 16)
    out = np.asarray(rule_filter(ranking, risk, perm, emb))
    np.testing.assert_array_equal(out, rule_filter_reference(ranking, risk, perm, emb))
    # past position K the rows are the rest of the ranking in order
    for row, o in zip(ranking, out):
        top = set(o[:5].tolist())
        assert o[5:].tolist() == [t for t in row.tolist() if t not in top]


# ---------------------------------------------------------------------------------------------------------
# properties: fixed shapes so the jitted filter compiles once per (k, method); integer-valued embeddings in
# {-1, 0, 1}^4 give exact duplicates and cosines far from the thresholds (no float ties).

Q, L, N, D = 4, 10, 16, 4


@st.composite
def cases(draw):
    risk = np.array(draw(st.lists(st.integers(1, 5), min_size=N, max_size=N)))
    perm = np.array(draw(st.lists(st.integers(0, 5), min_size=N, max_size=N)))
    emb = np.array(draw(st.lists(st.lists(st.integers(-1, 1), min_size=D, max_size=D), min_size=N, max_size=N)),
                   np.float32)
    emb[np.all(emb == 0, axis=1), 0] = 1.0  # no zero vectors
    rows = [draw(st.permutations(range(N)))[:L] for _ in range(Q)]
    risk_cap = draw(st.integers(0, 2))
    perm_cap = draw(st.integers(0, 3))
    thr = draw(st.sampled_from([0.6, 0.8, 0.9]))  # no attainable cosine is within 0.016
    return np.array(rows, np.int32), risk, perm, emb, risk_cap, perm_cap, thr


def cosine(emb):
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    return e @ e.T


def violates(t, accepted, risk, perm, cos, risk_cap, perm_cap, thr):
    if risk[t] >= 3 and sum(risk[a] >= 3 for a in accepted) >= risk_cap:
        return True
    if perm[t] >= 2 and sum(perm[a] >= 2 for a in accepted) >= perm_cap:
        return True
    return any(cos[t, a] > thr for a in accepted)


def check_properties(case, k, method):
    ranking, risk, perm, emb, risk_cap, perm_cap, thr = case
    out, n_acc = rule_filter_with_count(ranking, risk, perm, emb, k=k, risk_cap=risk_cap, perm_cap=perm_cap,
                                        sim_threshold=thr, method=method)
    out, n_acc = np.asarray(out), np.asarray(n_acc)
    cos = cosine(emb)
    for row, o, m in zip(ranking, out, n_acc):
        row, o = row.tolist(), o.tolist()
        assert sorted(o) == sorted(row)  # a permutation
        accepted = o[:m]
        # accepted tools keep their relative order and obey every rule
        pos = [row.index(t) for t in accepted]
        assert pos == sorted(pos)
        assert sum(risk[t] >= 3 for t in accepted) <= risk_cap
        assert sum(perm[t] >= 2 for t in accepted) <= perm_cap
        for i, a in enumerate(accepted):
            assert all(cos[a, b] <= thr for b in accepted[:i])
        # greedy: a tool skipped before the last visited position broke a rule against earlier acceptances
        last = pos[-1] if m == k else len(row) - 1
        for p in range(last + 1):
            t = row[p]
            if t not in accepted:
                assert violates(t, [a for a in accepted if row.index(a) < p], risk, perm, cos, risk_cap, perm_cap, thr)
        # fill: with fewer than k accepted the next positions are the deferred tools in reranked order
        rest = [t for t in row if t not in accepted]
        assert o[m:] == rest
        if m == k:  # no fill needed: the first k satisfy the caps
            assert sum(risk[t] >= 3 for t in o[:k]) <= risk_cap
            assert sum(perm[t] >= 2 for t in o[:k]) <= perm_cap


SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=500, **SETTINGS)
@given(cases())
def test_properties_k5_while(case):
    check_properties(case, 5, "while")


@settings(max_examples=300, **SETTINGS)
@given(cases())
def test_properties_k3_scan(case):
    check_properties(case, 3, "scan")


@settings(max_examples=300, **SETTINGS)
@given(cases(), st.sampled_from([1, 4, 8]))
def test_properties_match_reference(case, k):
    ranking, risk, perm, emb, risk_cap, perm_cap, thr = case
    kw = dict(k=k, risk_cap=risk_cap, perm_cap=perm_cap, sim_threshold=thr)
    out = np.asarray(rule_filter(ranking, risk, perm, emb, **kw))
    np.testing.assert_array_equal(out, rule_filter_reference(ranking, risk, perm, emb, **kw))


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="ranking must be"):
        rule_filter(np.arange(5), np.ones(5), np.zeros(5), np.eye(5))
    with pytest.raises(ValueError, match="k must be"):
        rule_filter(np.arange(5)[None], np.ones(5), np.zeros(5), np.eye(5), k=0)
    with pytest.raises(ValueError, match="method"):
        rule_filter(np.arange(5)[None], np.ones(5), np.zeros(5), np.eye(5), method="loop")
