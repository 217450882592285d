"""Texts to token ids: the input check every encoder shares, the tokenizer files' hash (part of a model id), and
transformers' fast tokenizer rebuilt from its saved backend state (``BackendTokenizer``, no transformers import).

Why apart from the encoder: the embedding cache checks its texts the same way without loading a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from riskrank_jax.encode import hf
from riskrank_jax.errors import RiskRankError

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


class EncoderInputError(RiskRankError, TypeError):
    """`encode` was given something other than a list of str."""


def check_texts(texts: Any) -> list[str]:
    """`texts` as a list of str (a numpy array or any iterable of str is accepted).

    Raises EncoderInputError for a single string, a non-iterable, or an item that is not a str.
    """
    if isinstance(texts, (str, bytes)):
        raise EncoderInputError("encode() takes a list of str, not a single string; wrap it: [text]")
    if isinstance(texts, np.ndarray):
        texts = texts.tolist()
    try:
        texts = list(texts)
    except TypeError as e:
        raise EncoderInputError(f"encode() takes a list of str, got {type(texts).__name__}") from e
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise EncoderInputError(f"encode() takes a list of str; item {i} is {type(t).__name__}: {t!r:.60}")
    return texts


def tokenizer_sha256(model_dir: Path) -> str:
    """sha256 over the tokenizer files the model directory has (part of the model id)."""
    return hf.sha256_files([model_dir / f for f in TOKENIZER_FILES if (model_dir / f).is_file()])


class BackendTokenizer:
    """Tokenises as transformers' fast tokenizer does (``tokenizer(texts, truncation=True, max_length=L,
    padding=False)``: longest-first truncation at L, special tokens added, no padding) from the backend state
    that tokenizer had, so the ids are the same; loaded without importing transformers."""

    def __init__(self, saved: dict):
        self.backend = Tokenizer.from_str(saved["backend"])
        self.pad_token_id, self.cls_token_id, self.sep_token_id = saved["pad_id"], saved["cls_id"], saved["sep_id"]
        self.model_max_length = saved["model_max_length"]
        self.truncation_side = saved["truncation_side"]
        self.backend.no_padding()

    def input_ids(self, texts: list[str], max_length: int) -> list[list[int]]:
        self.backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=True)]


__all__ = ["TOKENIZER_FILES", "EncoderInputError", "check_texts", "tokenizer_sha256", "BackendTokenizer"]
