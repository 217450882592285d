"""A BERT model directory's config and weights as FlaxBertModel's parameter tree (what encode/bert.py packs).

    fields = bert_fields(model_dir)            # BertFields from config.json alone (None: not plain BERT)
    params = direct_params(files, fields)      # safetensors read straight, without transformers or flax
    params = flax_params(model_dir, read_bert_config(model_dir), files)   # any layout, through encode/hf.py
    shapes = param_shapes(config, num_labels=1)  # the tree's shapes (with a classifier head), from the config

A plain BERT `config.json` and float32/float16 safetensors weights are read directly (the same arrays as
transformers' FlaxBertModel loading; ``direct_params``), so a warm start imports neither transformers nor flax;
other layouts (msgpack, bf16 tensors, a PyTorch .bin file through torch) are read by encode/hf.py into the tree
``param_shapes`` lays out (the key names and shapes of transformers' FlaxBertModel /
FlaxBertForSequenceClassification, built from the config without transformers' Flax classes, which transformers 5
does not have). The arrays are the same.

Why two readers: the direct one keeps transformers out of a start; the other reads everything transformers reads.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
from safetensors import safe_open

from riskrank_jax.encode import hf
from riskrank_jax.errors import RiskRankError


def read_bert_config(model_dir: Path):
    """The model's transformers BertConfig; a clear error when config.json is missing or not BERT."""
    config = hf.load_config(model_dir)
    if config.model_type != "bert":
        raise RiskRankError(
            f"{model_dir / 'config.json'}: model_type {config.model_type!r} is not supported; this encoder runs "
            "BERT models (model_type 'bert', e.g. all-MiniLM, BGE)"
        )
    return config


@dataclasses.dataclass(frozen=True)
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


def bert_fields(model_dir: Path) -> BertFields | None:
    """BertFields from config.json alone (no transformers import); None unless it is a plain BERT config, in
    which case transformers' BertConfig reads it (and reports what is wrong)."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
        if not isinstance(cfg, dict) or cfg.get("model_type") != "bert":
            return None
        return BertFields(**{f.name: type(f.default)(cfg[f.name]) for f in dataclasses.fields(BertFields)
                             if f.name in cfg})
    except (OSError, ValueError, TypeError):
        return None


def _body_shapes(config) -> dict[tuple[str, ...], tuple[int, ...]]:
    """{flat key: shape} of FlaxBertModel's parameters (embeddings, encoder layers, pooler) for a BERT config (a
    transformers BertConfig or BertFields: its sizes alone)."""
    h, i = int(config.hidden_size), int(config.intermediate_size)
    shapes: dict[tuple[str, ...], tuple[int, ...]] = {}

    def dense(key: tuple, n_in: int, n_out: int) -> None:
        shapes[key + ("kernel",)], shapes[key + ("bias",)] = (n_in, n_out), (n_out,)

    def layer_norm(key: tuple) -> None:
        shapes[key + ("scale",)] = shapes[key + ("bias",)] = (h,)

    tables = (("word_embeddings", config.vocab_size), ("position_embeddings", config.max_position_embeddings),
              ("token_type_embeddings", config.type_vocab_size))
    for table, rows in tables:
        shapes[("embeddings", table, "embedding")] = (int(rows), h)
    layer_norm(("embeddings", "LayerNorm"))
    attentions = ("attention", "crossattention") if getattr(config, "add_cross_attention", False) else ("attention",)
    for n in range(int(config.num_hidden_layers)):
        base = ("encoder", "layer", str(n))
        for att in attentions:
            for name in ("query", "key", "value"):
                dense(base + (att, "self", name), h, h)
            dense(base + (att, "output", "dense"), h, h)
            layer_norm(base + (att, "output", "LayerNorm"))
        dense(base + ("intermediate", "dense"), h, i)
        dense(base + ("output", "dense"), i, h)
        layer_norm(base + ("output", "LayerNorm"))
    dense(("pooler", "dense"), h, h)
    return shapes


def param_shapes(config, num_labels: int | None = None) -> dict:
    """The parameter shape tree (nested dicts of float32 ``jax.ShapeDtypeStruct``) of transformers'
    FlaxBertModel for a BERT config, from the config's sizes alone (no transformers model is built): embeddings,
    encoder layers (with cross-attention when ``add_cross_attention``), pooler. With ``num_labels``, that of
    FlaxBertForSequenceClassification: {"bert": <the model's tree>, "classifier": {"bias", "kernel"}} (base-model
    prefix "bert"). Key names, shapes and order are transformers' ``params_shape_tree``'s (keys sorted at every
    level), so the weights read against it and the heads drawn for it are those transformers' tree gives."""
    flat = _body_shapes(config)
    if num_labels is not None:
        h = int(config.hidden_size)
        flat = {("bert",) + k: v for k, v in flat.items()}
        flat[("classifier", "kernel")], flat[("classifier", "bias")] = (h, int(num_labels)), (int(num_labels),)
    return hf.nested_params({k: jax.ShapeDtypeStruct(v, np.float32) for k, v in flat.items()})


def direct_params(files: list[Path], fields: BertFields) -> dict | None:
    """FlaxBertModel's parameter tree read straight from safetensors files (PyTorch or Flax layout) with numpy,
    without transformers or flax, PyTorch names renamed by ``hf.rename_pytorch_key``. None when a file is not
    safetensors, a tensor is not numpy-readable, or a weight the forward pass needs is missing or mis-shaped (then
    ``flax_params`` reads them and names the problem)."""
    if not files or any(f.suffix != ".safetensors" for f in files):
        return None
    want = {k: shape for k, shape in _body_shapes(fields).items() if k[0] != "pooler"}
    flat: dict[tuple[str, ...], np.ndarray] = {}
    try:
        for f in files:
            with safe_open(str(f), framework="numpy") as st:
                pt = (st.metadata() or {}).get("format", "pt") == "pt"
                for k in st.keys():  # noqa: SIM118 - a safetensors handle, not a dict
                    key = tuple(k.split("."))
                    key = key[1:] if key[0] == "bert" and len(key) > 1 else key
                    if key[0] not in ("embeddings", "encoder") or key[-1] == "position_ids":
                        continue
                    arr = np.asarray(st.get_tensor(k), dtype=np.float32)
                    key, arr = hf.rename_pytorch_key(key, arr, want, "bert") if pt else (key, arr)
                    flat[key] = arr
    except Exception:  # noqa: BLE001 - bf16 tensors (no numpy dtype), damaged files: the other reader reads them
        return None
    if any(k not in flat or flat[k].shape != shape for k, shape in want.items()):
        return None
    return hf.nested_params({k: flat[k] for k in want})


def flax_params(model_dir: Path, config, files: list[Path]) -> dict:
    """FlaxBertModel's parameter tree (numpy) read through riskrank_jax/encode/hf.py against ``param_shapes``:
    safetensors (PyTorch- or Flax-format, sharded or not), flax_model.msgpack and a PyTorch .bin file (with torch),
    without building a transformers model. The unused pooler head is zero-filled when absent."""
    target = hf.flat_params(param_shapes(config))
    loaded = hf.read_weight_files(files, target, "bert")
    # the pooler head is never used for sentence embeddings
    pooler = lambda key, shape: np.zeros(shape, np.float32) if key[0] == "pooler" else None  # noqa: E731
    return hf.nested_params(hf.complete_params(model_dir, files, target, loaded, pooler))


__all__ = ["BertFields", "bert_fields", "read_bert_config", "param_shapes", "direct_params", "flax_params"]
