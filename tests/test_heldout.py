"""The one held-out split, gate rule and hard-negative picker (``model.heldout``, ``model.negatives``), and that
every learned stage draws from them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.model import heldout, rerank
from riskrank_jax.model.negatives import best_non_gold


def test_split_is_seeded_disjoint_and_rounds_half_up_with_one_left_on_each_side():
    a, b = heldout.heldout_split(np.arange(40), 0.2, 3)
    assert len(b) == 8 and sorted([*a, *b]) == list(range(40)) and list(a) == sorted(a) and list(b) == sorted(b)
    assert np.array_equal(b, heldout.heldout_split(np.arange(40), 0.2, 3)[1])
    assert not np.array_equal(b, heldout.heldout_split(np.arange(40), 0.2, 4)[1])
    assert not np.array_equal(b, heldout.heldout_split(np.arange(40), 0.2, 3, fold=1)[1])
    assert [heldout.n_held(n, 0.1) for n in (1, 2, 5, 15, 25, 185)] == [1, 1, 1, 2, 3, 19]
    assert [heldout.n_held(n, 0.1, at_least=0) for n in (1, 4, 5, 185)] == [0, 0, 1, 19]
    assert heldout.n_held(3, 0.9) == 2  # one left to train on
    mask = np.zeros(50, bool)
    mask[10:30] = True  # a fold's training queries as a mask: only they are split
    t, h = heldout.heldout_split(mask, 0.25, 7, fold=2)
    assert len(h) == 5 and set(t) | set(h) == set(range(10, 30)) and not set(t) & set(h)
    # the seeding a transfer source (no folds) and the sweep's tuned encoder ((seed, fold)) relied on
    perm = np.random.default_rng(0).permutation(700)[:140]
    assert np.array_equal(heldout.heldout_split(np.arange(700), 0.2, 0)[1], np.sort(perm))
    ids = np.flatnonzero(mask)
    perm = np.random.default_rng([7, 2]).permutation(ids.size)[:5]
    assert np.array_equal(h, np.sort(ids[perm]))


def test_a_grouped_split_keeps_each_group_on_one_side_and_groups_of_one_split_as_before():
    texts = np.array(["a", "b", "a", "c", "d", "b", "e", "a", "f", "g", "h", "i"])  # 9 requests, "a" 3x, "b" 2x
    for seed in range(20):
        t, h = heldout.heldout_split(np.arange(12), 0.25, seed, groups=texts)
        assert sorted([*t, *h]) == list(range(12)) and not set(texts[t]) & set(texts[h])
        assert len(set(texts[h])) == heldout.n_held(9, 0.25) == 2  # 2 of the 9 distinct requests, every copy
    held_a = [seed for seed in range(20) if "a" in texts[heldout.heldout_split(np.arange(12), 0.25, seed,
                                                                                 groups=texts)[1]]]
    assert 0 < len(held_a) < 20  # the repeated request is held out for some seeds, with its 3 copies
    distinct = np.array([f"q{i}" for i in range(40)])[::-1]  # labels in any order: numbered by first appearance
    for seed, fold in ((3, None), (3, 1), (8, 2)):
        assert np.array_equal(heldout.heldout_split(np.arange(40), 0.2, seed, fold, groups=distinct)[1],
                              heldout.heldout_split(np.arange(40), 0.2, seed, fold)[1])


def test_random_first_puts_flagged_items_first_and_depends_only_on_its_key():
    flag = jnp.asarray(np.arange(30) % 3 == 0)
    perm = np.asarray(heldout.random_first(heldout.split_key(5, 1), flag))
    assert sorted(perm) == list(range(30)) and np.asarray(flag)[perm[:10]].all() and not np.asarray(flag)[perm[10:]].any()
    again = jax.vmap(lambda s, f: heldout.random_first(heldout.split_key(s, f), flag))(jnp.asarray([4, 5]), jnp.asarray([1, 1]))
    assert np.array_equal(np.asarray(again)[1], perm) and not np.array_equal(np.asarray(again)[0], perm)


def test_gate_index_keeps_the_smallest_gamma_within_the_tie_tolerance():
    table = np.asarray([[0.5, 0.5, 0.4, 0.3, 0.2], [0.4, 0.6, 0.6 + 5e-7, 0.59, 0.6], [0.1, 0.2, 0.3, 0.4, 0.41]])
    assert heldout.gate_index(table).tolist() == [0, 1, 4]
    assert np.asarray(jax.jit(heldout.gate_index)(jnp.asarray(table, jnp.float32))).tolist() == [0, 1, 4]
    assert heldout.gate_index(np.asarray([0.7, 0.7 + 2e-6, 0.1, 0.1, 0.1])) == 1


def test_best_non_gold_matches_a_stable_sort_without_gold_and_caps_at_n_minus_g():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, (40, 25)).astype(np.float32)  # many ties
    gold = np.full((40, 3), -1)
    for q in range(40):
        g = rng.integers(0, 4)
        gold[q, :g] = rng.choice(25, g, replace=False)
    gold[0] = [3, 3, -1]  # a repeated gold id
    got = np.asarray(best_non_gold(scores, gold, 10))
    for q in range(40):
        order = np.argsort(-scores[q], kind="stable")
        want = [int(t) for t in order if t not in set(gold[q][gold[q] >= 0])][:10]
        assert got[q].tolist() == want
    assert np.asarray(best_non_gold(scores, gold, 99)).shape == (40, 22)  # N − G


def test_every_query_level_stage_draws_its_split_from_heldout_split():
    fold_mask = np.zeros((3, 60), bool)
    for f in range(3):
        fold_mask[f, np.arange(60) % 3 != f] = True
    train, held = rerank.heldout_masks(fold_mask, (42, 7), 0.1)
    for m, (seed, f) in enumerate([(s, f) for s in (42, 7) for f in range(3)]):
        t, h = heldout.heldout_split(fold_mask[f], 0.1, seed, f)
        assert np.array_equal(np.flatnonzero(held[m]), h) and np.array_equal(np.flatnonzero(train[m]), t)
