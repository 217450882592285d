"""Token states of texts after an encoder's frozen lower layers, computed once, and their packing into rows.

    states = TextStates.build(encoder, texts, frozen_layers)      # lower layers run once over every text
    tok, slot = states.packed(idx, cap=64, width=128)             # texts idx packed into rows of 128 tokens

Why: tuning trains only the top layers, so every step reads these cached states instead of running the
frozen layers again; packing several short texts into a row keeps the padding small.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from riskrank_jax.encode.token_packing import pack_rows
from riskrank_jax.errors import RiskRankError


@dataclass(frozen=True)
class TextStates:
    """Token states of texts after the frozen layers: states float32 [T + 1, d] (last row zeros, for padding),
    offsets int64 [n + 1]; ``frozen_layers`` of ``encoder_id`` produced them."""

    states: np.ndarray
    offsets: np.ndarray
    frozen_layers: int
    encoder_id: str

    @staticmethod
    def build(encoder, texts, frozen_layers: int, *, progress: bool | None = None) -> "TextStates":
        states, offsets = encoder.lower_states(list(texts), frozen_layers, progress=progress)
        return TextStates(states, offsets, int(frozen_layers), encoder.model_id)

    @property
    def size(self) -> int:
        return int(self.offsets.size - 1)

    @functools.cached_property
    def device_states(self):
        """``states`` on the default device, copied there once: the training loop and every ``embed_states`` call
        share it (each used to copy its own)."""
        return jnp.asarray(self.states)

    def lengths(self, idx=None) -> np.ndarray:
        """Tokens of each text (of ``idx``, default all) int64 [n]."""
        idx = np.arange(self.size) if idx is None else np.asarray(idx, np.int64)
        return self.offsets[idx + 1] - self.offsets[idx]

    def pack(self, idx, cap: int, width: int) -> list[np.ndarray]:
        """The rows of ``width`` tokens that the texts ``idx`` (each cut to its first ``cap`` <= width tokens)
        pack into: per row, positions into ``idx`` (``encode.token_packing.pack_rows``, best-fit decreasing)."""
        lens = np.minimum(self.lengths(idx), int(cap))
        return pack_rows(np.maximum(lens, 1), int(width), max(1, int(width) // 2))

    def packed(self, idx, cap: int, width: int, n_rows: int | None = None, rows=None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(token index int32 [R, width] into ``states``, slot int32 [R, width]: k + 1 on the tokens of the k-th
        text of ``idx``, 0 on padding) of the texts ``idx``, each cut to its first ``cap`` tokens, several to a
        row (``rows``: positions into ``idx`` per row, default ``pack``); R = ``n_rows`` (at least as many as
        there are rows; the rest empty) or that many."""
        idx = np.asarray(idx, np.int64)
        lens = np.minimum(self.lengths(idx), int(cap))
        rows = self.pack(idx, cap, width) if rows is None else rows
        n_rows = len(rows) if n_rows is None else int(n_rows)
        if n_rows < len(rows):
            raise RiskRankError(f"{idx.size} texts need {len(rows)} rows of {width} tokens, {n_rows} given")
        pad = self.states.shape[0] - 1
        tok = np.full((n_rows, int(width)), pad, np.int32)
        slot = np.zeros((n_rows, int(width)), np.int32)
        for r, members in enumerate(rows):
            at = 0
            for k in np.asarray(members).tolist():
                n = int(lens[k])
                tok[r, at:at + n] = self.offsets[idx[k]] + np.arange(n)
                slot[r, at:at + n] = k + 1
                at += n
        return tok, slot


__all__ = ["TextStates"]
