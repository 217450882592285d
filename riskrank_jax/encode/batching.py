"""Texts' token ids into batches of packed rows, and the 1-D device mesh the batches are sharded over.

Texts are packed, several to a row, into rows of ROW_LENGTH tokens (texts longer than that into rows of
max_seq_length rounded up to a multiple of ROW_MULTIPLE), best-fit decreasing (riskrank_jax/encode/token_packing.py).
Every batch holds the same number of tokens, T = ``RowPlan.tokens_per_batch(batch_size)`` (16 · batch_size, at
least two rows of the longest row length per device, a multiple of every row length and of the device count):
T / R rows of length R, the last batch filled with empty rows. A compact batch (``RowPlan.compact_shape``) holds
a few short texts in a small shape instead: rows rounded up to a power of two, of the row length its texts need.

Why one fixed token count per batch: almost no compute goes to padding, and at most two programs compile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from riskrank_jax.encode.token_packing import pack_rows
from riskrank_jax.runtime.progress import progress_bar

ROW_LENGTH = 128  # tokens of a packed row (texts longer than this run in rows of the longest length)
ROW_MULTIPLE = 16  # row lengths are multiples of this
COMPACT_MULTIPLE = 8  # compact batches (encode(..., compact=True)): row lengths 8, 16, 24, 32 tokens, then
COMPACT_LADDER_TOP = 32  # powers of two (few shapes to compile; a short request runs in 1 x 8 or 1 x 16 tokens)
BATCHING_SCHEME = "pack128"  # recorded in model_id (and so in cache keys and checkpoints' encoder id)
PROGRESS_MIN_TEXTS = 500  # an encode call of this many texts or more draws a progress bar unless told not to


def row_lengths_for(max_seq_length: int, max_positions: int) -> tuple[int, ...]:
    """Row lengths: ROW_LENGTH when max_seq_length exceeds it, then max_seq_length rounded up to a multiple
    of ROW_MULTIPLE (or max_seq_length itself when that would exceed the model's position table)."""
    top = -(-max_seq_length // ROW_MULTIPLE) * ROW_MULTIPLE
    if top > max_positions:
        top = max_seq_length
    return tuple([ROW_LENGTH] if ROW_LENGTH < top else []) + (top,)


@dataclass(frozen=True)
class RowPlan:
    """How texts of given token counts become batches: the row lengths (shortest first) and the device count
    the batch axis is divided over."""

    row_lengths: tuple[int, ...]
    n_devices: int = 1

    def tokens_per_batch(self, batch_size: int) -> int:
        """T, the tokens (rows x row length) of every batch: 16 · batch_size rounded up to a multiple of every
        row length times the device count, and at least two rows of the longest row length per device."""
        step = math.lcm(*self.row_lengths) * self.n_devices
        want = max(ROW_MULTIPLE * int(batch_size), 2 * self.row_lengths[-1] * self.n_devices)
        return -(-want // step) * step

    def effective_batch_size(self, batch_size: int) -> int:
        """Rows per batch of the shortest row length (longer rows run proportionally fewer)."""
        return self.tokens_per_batch(batch_size) // self.row_lengths[0]

    @staticmethod
    def segments_per_row(row_length: int) -> int:
        """Most texts one row holds: every tokenised text has at least 2 tokens ([CLS] [SEP])."""
        return max(1, row_length // 2)

    def row_length_for(self, length: int) -> int:
        """The row length a text of `length` tokens is packed into (a function of that length only)."""
        for r in self.row_lengths:
            if length <= r:
                return r
        return self.row_lengths[-1]

    def batches(self, lengths: np.ndarray, batch_size: int, *, compact: bool = False
                ) -> list[tuple[list[np.ndarray], int, int]]:
        """(rows, row length R, rows run = T / R) of each batch; rows[j] holds the indices of the texts packed
        into row j, in order (see riskrank_jax/encode/token_packing.py). Longest row length first.

        compact: when all the rows fit in one batch of at most T tokens as ``compact_shape`` gives it, that one
        small batch instead (see ``Encoder.encode``)."""
        tokens = self.tokens_per_batch(batch_size)
        lengths = np.maximum(np.asarray(lengths, np.int64), 1)
        row_len = np.array([self.row_length_for(int(n)) for n in lengths], np.int64)
        groups = []
        for r in sorted(set(row_len.tolist()), reverse=True):
            members = np.flatnonzero(row_len == r)
            groups.append(([members[x] for x in pack_rows(lengths[members], r, self.segments_per_row(r))], r))
        if compact and groups:
            rows = [row for g, _ in groups for row in g]
            shape = self.compact_shape(len(rows), max(int(lengths[row].sum()) for row in rows))
            if shape[0] * shape[1] <= tokens:
                return [(rows, shape[1], shape[0])]
        out = []
        for rows, r in groups:
            n_rows = tokens // r
            out.extend((rows[i : i + n_rows], r, n_rows) for i in range(0, len(rows), n_rows))
        return out

    def compact_shape(self, n_rows: int, fill: int) -> tuple[int, int]:
        """(rows B, row length R) of a compact batch holding ``n_rows`` packed rows of at most ``fill`` tokens:
        R is fill rounded up to a multiple of COMPACT_MULTIPLE up to COMPACT_LADDER_TOP tokens, to a power of
        two above (at most the longest row length); B is the device count times the next power of two >=
        n_rows / devices (so the batch axis still divides over the mesh)."""
        pow2 = lambda n: 1 << max(0, int(n) - 1).bit_length()  # noqa: E731
        length = -(-int(fill) // COMPACT_MULTIPLE) * COMPACT_MULTIPLE if fill <= COMPACT_LADDER_TOP else pow2(fill)
        n_dev = self.n_devices
        return n_dev * pow2(-(-int(n_rows) // n_dev)), min(length, self.row_lengths[-1])


def batch_arrays(ids: list[list[int]], rows: list[np.ndarray], n_rows: int, length: int, pad_id: int):
    """int32 [n_rows, length] input ids, position ids and segment ids (1, 2, ... for the texts of a row
    in order, 0 for padding); rows past len(rows) are empty."""
    input_ids = np.full((n_rows, length), pad_id, np.int32)
    positions = np.zeros((n_rows, length), np.int32)
    segments = np.zeros((n_rows, length), np.int32)
    for r, row in enumerate(rows):
        offset = 0
        for s, i in enumerate(row.tolist()):
            seq = ids[i]
            end = offset + len(seq)
            input_ids[r, offset:end] = seq
            positions[r, offset:end] = np.arange(len(seq))
            segments[r, offset:end] = s + 1
            offset = end
    return input_ids, positions, segments


def data_mesh():
    """(devices, batch sharding, replicated sharding) over a 1-D mesh ("data") of all ``jax.devices()``: batches
    are split along their first axis, weights are copied to every device."""
    devices = list(jax.devices())
    mesh = Mesh(np.array(devices), ("data",))
    return devices, NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())


__all__ = ["ROW_LENGTH", "ROW_MULTIPLE", "COMPACT_MULTIPLE", "COMPACT_LADDER_TOP", "BATCHING_SCHEME", "RowPlan",
           "row_lengths_for", "batch_arrays", "data_mesh"]


def progress_shown(n_texts: int, progress: bool | None) -> bool:
    """Whether an encode call of ``n_texts`` draws a progress bar: from PROGRESS_MIN_TEXTS texts on unless
    ``progress`` (True / False) says otherwise."""
    return n_texts >= PROGRESS_MIN_TEXTS if progress is None else bool(progress)


def run_batches(n_texts: int, dim: int, batches, run, *, show: bool) -> np.ndarray:
    """float32 [n_texts, dim]: every text's vector from its batch's result, one batch in flight on the device while
    the host prepares the next. batches: (rows, row length, rows run) as ``RowPlan.batches`` gives them (rows: per
    row, the texts it holds, in slot order); run(rows, length, n_rows): the device result [n_rows, slots, dim] of
    that batch (its slot s of row r: the vector of rows[r][s]). show: draw a progress bar over the texts.

    Why one runner: every encoder family (BERT, MPNet, USE) packs texts into rows the same way and drains its
    results the same way."""
    out = np.empty((n_texts, dim), np.float32)
    if n_texts == 0:
        return out
    bar = progress_bar(enabled=show, total=n_texts, unit="text", desc="encoding", leave=False)
    pending: list = []

    def drain(keep: int) -> None:
        while len(pending) > keep:
            rows, res = pending.pop(0)
            res = np.asarray(res)
            for r, row in enumerate(rows):
                out[row] = res[r, : len(row)]
            bar.update(sum(len(row) for row in rows))

    try:
        for rows, length, n_rows in batches:
            pending.append((rows, run(rows, length, n_rows)))
            drain(keep=1)
        drain(keep=0)
    finally:
        bar.close()
    return out


def encode_packed(ids: list[list[int]], batches, executable, params, sharding, pad_id: int, dim: int, *,
                  show: bool) -> np.ndarray:
    """float32 [n, dim]: token ids ``ids`` (one list a text) run in ``batches`` (``RowPlan.batches`` of their
    lengths) by ``executable(n_rows, length)(params, input_ids, position_ids, segment_ids)``, each batch's arrays
    (``batch_arrays``, padded with ``pad_id``) placed with ``sharding``: ``run_batches`` for the encoders whose
    programs read all three arrays (BERT, MPNet)."""
    def run(rows, length, n_rows):
        arrays = batch_arrays(ids, rows, n_rows, length, pad_id)
        return executable(n_rows, length)(params, *(jax.device_put(a, sharding) for a in arrays))

    return run_batches(len(ids), dim, batches, run, show=show)
