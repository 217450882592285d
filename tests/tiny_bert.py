"""Tiny random BERT model directories for the encoder and cross-encoder tests, and a float64 numpy reference to
check their embeddings against, all without transformers' Flax classes (transformers 5 has none).

    params = random_params(bert_weights.param_shapes(config), seed)   # the draws transformers' shape tree gave
    save_bert(root, config, params, msgpack=False)                    # what FlaxBertModel.save_pretrained wrote
    params = make_tiny_bert(root, "mean")                             # a sentence-transformers encoder directory
    vecs = reference_embeddings(root, params, ids, "mean")            # float64, L2-normalised
    cls = flax_class_or_skip("FlaxBertModel")                         # a check against transformers 4's Flax code

The parameter tree is ``encode.bert_weights.param_shapes``' (keys, shapes and order of transformers' FlaxBert
trees, checked in test_encoder.py), so the random draws and the files equal those the tests made with transformers'
Flax classes. The reference forward pass is scripts/make_encoder_reference.py's (plain numpy, written from the
BERT definition), the one the embedded model's committed reference came from.

Why one module: conftest.py, test_encoder.py and test_cross_encoder.py build the same kind of model.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import transformers
from flax.serialization import to_bytes
from safetensors.numpy import save_file
from transformers import BertConfig

from riskrank_jax.encode import hf
from riskrank_jax.encode.bert_weights import param_shapes
from riskrank_jax.encode.sentence_config import default_model_dir
from riskrank_jax.encode.tokenizer import TOKENIZER_FILES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from make_encoder_reference import bert_forward  # noqa: E402

TINY_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
               "intermediate_size": 37, "max_position_embeddings": 64}


def random_params(shape_tree: dict, seed: int) -> dict:
    """Random params over a shape tree, in its flat key order: 1 + 0.2 N(0, 1) for layer-norm scales (``scale``,
    T5's ``layer_norm`` ``weight``), 0.2 N(0, 1) for the rest (no transformers init, which compiles for seconds)."""
    rng = np.random.default_rng(seed)
    out = {}
    for key, s in hf.flat_params(shape_tree).items():
        norm = key[-1] == "scale" or (key[-1] == "weight" and "layer_norm" in "/".join(key))
        out[key] = ((1.0 if norm else 0.0) + 0.2 * rng.standard_normal(s.shape)).astype(np.float32)
    return hf.nested_params(out)


def save_bert(root: Path, config: BertConfig, params: dict, *, msgpack: bool = False) -> None:
    """config.json and the weights in the Flax layout, as transformers 4's FlaxBertModel.save_pretrained wrote
    them: model.safetensors (names joined by ".", metadata format "flax") or flax_model.msgpack."""
    root.mkdir(parents=True, exist_ok=True)
    config.architectures = ["BertForSequenceClassification" if "classifier" in params else "BertModel"]
    config.save_pretrained(str(root))
    if msgpack:
        (root / "flax_model.msgpack").write_bytes(to_bytes(params))
    else:
        flat = {".".join(k): np.ascontiguousarray(v) for k, v in hf.flat_params(params).items()}
        save_file(flat, str(root / "model.safetensors"), metadata={"format": "flax"})


def make_tiny_bert(root: Path, pooling: str, *, max_seq_length: int = 40, msgpack: bool = False) -> dict:
    """A tiny random BERT (hidden 32, 2 layers, seed 0) with the default model's tokenizer, saved at ``root`` in
    the sentence-transformers layout ``riskrank_jax.encode.encoder.load_encoder`` reads. Returns its params."""
    config = BertConfig(**TINY_CONFIG)
    params = random_params(param_shapes(config), 0)
    save_bert(root, config, params, msgpack=msgpack)
    for f in TOKENIZER_FILES:
        shutil.copy(default_model_dir() / f, root / f)
    (root / "1_Pooling").mkdir()
    flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": TINY_CONFIG["hidden_size"], **{v: k == pooling for k, v in flags.items()}}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length}))
    return params


def _pytorch_names(params: dict) -> dict[str, np.ndarray]:
    """FlaxBertModel's params as float64 arrays under PyTorch's names (kernels transposed back to weights)."""
    out = {}
    for key, arr in hf.flat_params(params).items():
        stem, last = ".".join(key[:-1]), key[-1]
        arr = np.asarray(arr, np.float64)
        out[f"{stem}.{'bias' if last == 'bias' else 'weight'}"] = arr.T if last == "kernel" else arr
    return out


def reference_embeddings(root: Path, params: dict, ids: list[list[int]], pooling: str) -> np.ndarray:
    """float64 [n, hidden] L2-normalised embeddings of the token id lists ``ids`` (unpadded), pooled by ``pooling``
    ("cls", "mean", "max"), from the numpy BERT of scripts/make_encoder_reference.py."""
    weights = _pytorch_names(params)
    config = json.loads((root / "config.json").read_text())
    pool = {"cls": lambda h: h[0], "mean": lambda h: h.mean(0), "max": lambda h: h.max(0)}[pooling]
    vecs = np.stack([pool(bert_forward(weights, config, np.asarray(x, np.int64))) for x in ids])
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def flax_class_or_skip(name: str):
    """transformers' Flax class ``name`` (transformers 4.x), or a skip saying that the installed transformers has
    none, for a check that compares with transformers' own Flax code."""
    cls = getattr(transformers, name, None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no Flax classes ({name}): this check compares "
                    "with transformers 4's Flax code")
    return cls
