"""Packing token sequences into fixed-length rows (several texts per row, no text split).

`pack_rows(lengths, row_length, max_segments)` places every sequence in one row of `row_length` tokens,
at most `max_segments` sequences a row, best-fit decreasing: longest first, each into the fullest open row
that still holds it (ties: the row that joined that fill level last). Deterministic; O(n log row_length).
Rows are returned with their sequences in placement order; a sequence's offset in its row is the sum of
the lengths before it. The packed encoder's numbers do not depend on the placement (see
riskrank_jax/encode/encoder.py), so only the padding, not the result, depends on the other texts.

Why best-fit decreasing: few rows and little padding, deterministic, with no text split across rows.
"""

from __future__ import annotations

import numpy as np


def pack_rows(lengths: np.ndarray, row_length: int, max_segments: int) -> list[np.ndarray]:
    """lengths int [n] (each 1..row_length) -> rows, each an int64 array of indices into `lengths`."""
    lengths = np.asarray(lengths, np.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > row_length):
        raise ValueError(f"lengths must lie in 1..{row_length}, got {lengths.min()}..{lengths.max()}")
    if max_segments < 1:
        raise ValueError(f"max_segments must be >= 1, got {max_segments}")
    order = np.argsort(-lengths, kind="stable")
    rows: list[list[int]] = []
    free: list[int] = []
    by_free: list[list[int]] = [[] for _ in range(row_length + 1)]  # open rows with exactly f tokens free
    has = np.zeros(row_length + 1, bool)  # has[f]: by_free[f] is not empty
    for i in order.tolist():
        need = int(lengths[i])
        fits = np.flatnonzero(has[need:])
        if fits.size:
            f = need + int(fits[0])
            row = by_free[f].pop()
            has[f] = bool(by_free[f])
        else:
            row = len(rows)
            rows.append([])
            free.append(row_length)
        rows[row].append(i)
        free[row] -= need
        if len(rows[row]) < max_segments and free[row] > 0:
            by_free[free[row]].append(row)
            has[free[row]] = True
    return [np.asarray(r, np.int64) for r in rows]


def padded_tokens(rows_per_batch: int, row_length: int, n_rows: int) -> int:
    """Tokens run for `n_rows` packed rows in batches of `rows_per_batch` rows (the last batch filled)."""
    return -(-n_rows // rows_per_batch) * rows_per_batch * row_length
