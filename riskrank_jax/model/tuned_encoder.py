"""A tuned encoder: the trained top layers with how they were trained, their vectors over cached states, and
the Hugging Face BERT directory they are saved as.

    t_emb = embed_states(tuned, encoder, states, tool_rows)          # [N, d], the tuned encoder's vectors
    save_tuned_encoder(encoder, tuned, "my_ranker/encoder")          # loads with encode.encoder.load_encoder

Why saved as a whole BERT directory: a ranker's encoder is then loaded as any other, by this package,
transformers or sentence-transformers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from riskrank_jax.encode.batching import ROW_LENGTH as PACK_WIDTH
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.text_states import TextStates
from riskrank_jax.model.tune_config import TuneConfig
from riskrank_jax.model.tune_step import compiled_encode


@dataclass(frozen=True)
class TunedEncoder:
    """The trained top layers of an encoder: ``top`` (packed layer dicts, numpy), with how they were trained."""

    top: tuple
    base_id: str
    frozen_layers: int
    pooling: str
    normalize: bool
    config: TuneConfig
    seed: int
    losses: np.ndarray
    seconds: float  # wall time of the run that trained it (with every other model of that run)
    epoch_scores: np.ndarray | None = None  # the ``evaluate`` score after each epoch (NaN: not evaluated)

    @staticmethod
    def untrained(encoder, layers: int) -> "TunedEncoder":
        """The encoder's own top ``layers`` layers, as a TunedEncoder (what training starts from)."""
        n = encoder.shape.num_layers
        top = tuple(numpy_tree(lp) for lp in encoder.params["layers"][n - int(layers):])
        return TunedEncoder(top, encoder.model_id, n - int(layers), encoder.pooling, encoder.normalize,
                            TuneConfig(layers=int(layers), epochs=0), 0, np.zeros(0, np.float32), 0.0)

    @property
    def tuned_id(self) -> str:
        """The tuned encoder's id: the base id and a hash of the trained weights (embeddings are cached under it)."""
        h = hashlib.sha256()
        for lp in self.top:
            for name in sorted(lp):
                for a in lp[name]:
                    h.update(np.ascontiguousarray(a, np.float32).tobytes())
        return f"{self.base_id}+tuned{self.frozen_layers}@{h.hexdigest()[:16]}"


EMBED_TOKENS = 4096  # tokens of one ``embed_states`` call: 32 packed rows of PACK_WIDTH


def embed_states(tuned: TunedEncoder, encoder, states: TextStates, rows) -> np.ndarray:
    """float32 [n, d]: the tuned encoder's vectors of the texts ``rows`` of ``states`` (all their tokens).

    The texts are packed into rows of ``PACK_WIDTH`` tokens (longer texts: rows of the longest one's length rounded
    up to a power of two), run ``EMBED_TOKENS`` tokens at a time: little padding, one or two shapes to compile."""
    rows = np.asarray(rows, np.int64)
    out = np.empty((rows.size, states.states.shape[1]), np.float32)
    run = compiled_encode(encoder.shape, tuned.pooling, tuned.normalize)
    top, dev = jax.tree.map(jnp.asarray, list(tuned.top)), states.device_states
    lens = states.lengths(rows)
    for sel in (np.flatnonzero(lens <= PACK_WIDTH), np.flatnonzero(lens > PACK_WIDTH)):
        if not sel.size:
            continue
        width = max(PACK_WIDTH, 1 << (int(lens[sel].max()) - 1).bit_length())
        per = max(1, EMBED_TOKENS // width)  # rows a call
        packing = states.pack(rows[sel], width, width)
        for r0 in range(0, len(packing), per):
            chunk = packing[r0:r0 + per]
            texts = np.concatenate(chunk)  # positions into sel, in row order
            local, at = [], 0
            for members in chunk:
                local.append(np.arange(at, at + members.size))
                at += members.size
            tok, slot = states.packed(rows[sel[texts]], width, width, per, local)
            with jax.default_matmul_precision(encoder.precision):
                vec = run(top, dev, tok, slot, n_texts=per * width // 2)
            out[sel[texts]] = np.asarray(vec)[:texts.size]
    return out


def _torch_layout(layers, emb) -> dict[str, np.ndarray]:
    """Packed BERT params (``encode.bert.pack_params``) -> transformers' PyTorch state-dict names and layouts
    (Linear weights [out, in]), the format every BERT loader reads."""
    out = {"embeddings.word_embeddings.weight": emb["word"], "embeddings.position_embeddings.weight": emb["pos"],
           "embeddings.LayerNorm.weight": emb["ln"][0], "embeddings.LayerNorm.bias": emb["ln"][1]}
    for i, lp in enumerate(layers):
        base, h = f"encoder.layer.{i}.", lp["qkv"][0].shape[0]
        for j, name in enumerate(("query", "key", "value")):
            out[f"{base}attention.self.{name}.weight"] = lp["qkv"][0][:, j * h:(j + 1) * h].T
            out[f"{base}attention.self.{name}.bias"] = lp["qkv"][1][j * h:(j + 1) * h]
        for key, name in (("att_out", "attention.output.dense"), ("ffn_in", "intermediate.dense"),
                          ("ffn_out", "output.dense")):
            out[f"{base}{name}.weight"], out[f"{base}{name}.bias"] = lp[key][0].T, lp[key][1]
        for key, name in (("att_ln", "attention.output.LayerNorm"), ("ffn_ln", "output.LayerNorm")):
            out[f"{base}{name}.weight"], out[f"{base}{name}.bias"] = lp[key]
    return {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}


def save_tuned_encoder(encoder, tuned: TunedEncoder, out_dir) -> Path:
    """Write the tuned encoder as a Hugging Face BERT directory (config, tokenizer and sentence-transformers files
    copied from the base model; ``model.safetensors`` in PyTorch layout; ``riskrank_tune.json`` says how it was
    trained), which ``encode.encoder.load_encoder`` (and transformers or sentence-transformers) loads as it is."""
    if tuned.base_id != encoder.model_id:
        raise RiskRankError(f"the tuned layers belong to {tuned.base_id}, not to {encoder.model_id}")
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(encoder.model_dir, tmp, ignore=shutil.ignore_patterns(
        "*.safetensors", "*.bin", "*.msgpack", "*.h5", "*.onnx", "onnx", "openvino", "*.safetensors.index.json",
        "README.md"))
    p = encoder.params
    layers = [*numpy_tree(p["layers"][:tuned.frozen_layers]), *tuned.top]
    emb = numpy_tree(p["emb"])
    tensors = _torch_layout(layers, emb)
    tensors["embeddings.token_type_embeddings.weight"] = _token_types(encoder)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "riskrank_tune.json").write_text(json.dumps({
        "base_encoder": tuned.base_id, "tuned_id": tuned.tuned_id, "frozen_layers": tuned.frozen_layers,
        "seed": tuned.seed, "config": tuned.config.to_dict(), "final_loss": float(tuned.losses[-1]),
        "seconds": round(tuned.seconds, 1)}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def numpy_tree(tree):
    """The tree with numpy float32 leaves."""
    return jax.tree.map(lambda a: np.asarray(a, np.float32), tree)


def _token_types(encoder) -> np.ndarray:
    """The base model's token-type embeddings [types, d] (the packed params keep only row 0)."""
    for f in sorted(Path(encoder.model_dir).glob("*.safetensors")):
        with safe_open(str(f), framework="numpy") as st:
            for k in st.keys():
                if k.endswith("token_type_embeddings.weight") or k.endswith("token_type_embeddings.embedding"):
                    return np.asarray(st.get_tensor(k), np.float32)
    return encoder.params["emb"]["type0"][None].astype(np.float32)


__all__ = ["TunedEncoder", "EMBED_TOKENS", "embed_states", "save_tuned_encoder", "numpy_tree"]
