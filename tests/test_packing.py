"""Packing sequences into rows: every sequence once, rows never overfull, best-fit decreasing order."""

from __future__ import annotations

import numpy as np
import pytest

from riskrank_jax.encode.token_packing import pack_rows, padded_tokens


def test_best_fit_decreasing_on_a_small_example():
    rows = pack_rows(np.array([5, 9, 3, 7, 2, 6]), row_length=10, max_segments=4)
    # 9 opens row 0 (1 free), 7 row 1 (3 free), 6 row 2 (4 free), 5 row 3 (5 free), 3 fills row 1 exactly,
    # 2 goes to the fullest row that holds it: row 2 (4 free -> 2 free)
    assert [r.tolist() for r in rows] == [[1], [3, 2], [5, 4], [0]]


def test_every_sequence_once_and_no_row_overfull():
    lengths = np.random.default_rng(0).integers(2, 129, 3000)
    rows = pack_rows(lengths, 128, 64)
    assert sorted(np.concatenate(rows).tolist()) == list(range(3000))
    assert max(int(lengths[r].sum()) for r in rows) <= 128
    assert len(rows) * 128 <= 1.03 * lengths.sum()  # 2% of the tokens are padding here (uniform 2..128)
    assert padded_tokens(8, 128, len(rows)) == -(-len(rows) // 8) * 8 * 128


def test_segment_cap_and_bad_lengths():
    rows = pack_rows(np.full(10, 2), row_length=128, max_segments=3)
    assert [len(r) for r in rows] == [3, 3, 3, 1]
    assert pack_rows(np.array([], np.int64), 16, 8) == []
    with pytest.raises(ValueError, match="1..16"):
        pack_rows(np.array([3, 17]), 16, 8)
