"""BERT forward pass over packed rows: several texts share one row, each attending only to itself.

A batch is int32 arrays of shape [B, R] (B rows of R tokens): `input_ids`, `position_ids` (each text's
positions restart at 0) and `segment_ids` (1..S for the texts of a row, in row order; 0 for padding).
Attention is block-diagonal: a token attends to the keys of its own segment only, so a text's hidden
states are those of the text run alone (up to float rounding; see riskrank_jax/encode/encoder.py for the
bit-level behaviour). The layer maths is transformers' BertModel (post-LayerNorm, token type 0,
the activation named by the config, exact-erf GELU for "gelu"); Q, K and V run as one fused matmul.

`pack_params(flax_params, config)` turns FlaxBertModel's parameter tree into the flat, fused form
`packed_hidden` reads; `pool_segments` gives each segment's pooled vector. `sequence_classifier_logits` runs the
same layers over one (query, text) pair per row with token types, for the cross-encoder
(riskrank_jax/model/cross_encoder.py): one BERT forward pass for the bi-encoder, the tuner and the cross-encoder.
An optional additive attention bias (``bias``, shared by all layers) lets MPNet's relative-position bias run the
same layers (riskrank_jax/encode/mpnet.py); without it the pass is unchanged.

Why packed rows: several short texts share one row, so almost no compute goes to padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import RiskRankError

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass(frozen=True)
class BertShape:
    """The configuration numbers the forward pass needs (hashable, so it can be a static jit argument)."""

    num_layers: int
    num_heads: int
    hidden: int
    layer_norm_eps: float
    activation: str

    @staticmethod
    def from_config(config) -> "BertShape":
        act = str(config.hidden_act)
        if act not in ACTIVATIONS:
            raise RiskRankError(f"hidden_act {act!r} is not supported; supported: {list(ACTIVATIONS)}")
        if config.hidden_size % config.num_attention_heads:
            raise RiskRankError(
                f"hidden_size {config.hidden_size} is not a multiple of num_attention_heads "
                f"{config.num_attention_heads}"
            )
        return BertShape(int(config.num_hidden_layers), int(config.num_attention_heads), int(config.hidden_size),
                         float(config.layer_norm_eps), act)


def pack_params(params, shape: BertShape, *, xp=np, token_types: bool = False) -> dict:
    """FlaxBertModel params -> {"emb": {...}, "layers": [{...}] * num_layers} as float32, with the query, key and
    value kernels concatenated into one [hidden, 3·hidden] kernel ("qkv").

    xp: numpy (packed once, on the host) or jax.numpy (packed inside a traced function, so gradients reach the
    unpacked tree); token_types: keep the whole token-type table ("type", for inputs with token types), not only
    its row 0 ("type0")."""
    f32 = partial(xp.asarray, dtype=np.float32)
    e = params["embeddings"]
    emb = {
        "word": f32(e["word_embeddings"]["embedding"]),
        "pos": f32(e["position_embeddings"]["embedding"]),
        "type0": f32(e["token_type_embeddings"]["embedding"][0]),
        "ln": (f32(e["LayerNorm"]["scale"]), f32(e["LayerNorm"]["bias"])),
    }
    if token_types:
        emb["type"] = f32(e["token_type_embeddings"]["embedding"])
    layers = []
    for i in range(shape.num_layers):
        lp = params["encoder"]["layer"][str(i)]
        att = lp["attention"]["self"]
        layers.append({
            "qkv": (xp.concatenate([f32(att[n]["kernel"]) for n in ("query", "key", "value")], axis=1),
                    xp.concatenate([f32(att[n]["bias"]) for n in ("query", "key", "value")])),
            "att_out": (f32(lp["attention"]["output"]["dense"]["kernel"]),
                        f32(lp["attention"]["output"]["dense"]["bias"])),
            "att_ln": (f32(lp["attention"]["output"]["LayerNorm"]["scale"]),
                       f32(lp["attention"]["output"]["LayerNorm"]["bias"])),
            "ffn_in": (f32(lp["intermediate"]["dense"]["kernel"]), f32(lp["intermediate"]["dense"]["bias"])),
            "ffn_out": (f32(lp["output"]["dense"]["kernel"]), f32(lp["output"]["dense"]["bias"])),
            "ffn_ln": (f32(lp["output"]["LayerNorm"]["scale"]), f32(lp["output"]["LayerNorm"]["bias"])),
        })
    return {"emb": emb, "layers": layers}


def _layer_norm(x, scale_bias, eps: float):
    scale, bias = scale_bias
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * (scale * jax.lax.rsqrt(var + eps)) + bias


def _activation(x, name: str):
    if name == "gelu":
        return jax.nn.gelu(x, approximate=False)
    if name == "relu":
        return jax.nn.relu(x)
    return jax.nn.gelu(x, approximate=True)


def _attention(x, lp, same_segment, shape: BertShape, bias=None):
    """x [B, R, H]; same_segment bool [B, R, R] -> context [B, R, H] (before the output dense layer).

    bias: None, or float32 [B, num_heads, R, R] (or broadcastable to it) added to the scaled scores q·k/sqrt(d)
    before the segment mask and the softmax (MPNet's relative-position bias, riskrank_jax/encode/mpnet.py)."""
    b, r, h = x.shape
    nh = shape.num_heads
    hd = h // nh
    qkv = x @ lp["qkv"][0] + lp["qkv"][1]  # [B, R, 3H]
    q, k, v = (qkv[..., i * h : (i + 1) * h].reshape(b, r, nh, hd) for i in range(3))
    scores = jnp.einsum("bqnd,bknd->bnqk", q / jnp.sqrt(jnp.float32(hd)), k)
    if bias is not None:
        scores = scores + bias
    scores = jnp.where(same_segment[:, None], scores, -jnp.inf)
    top = jnp.max(scores, axis=-1, keepdims=True)
    weights = jnp.exp(scores - jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0)))
    # the softmax denominator as a matmul column (a ones column next to V), not a reduction: a reduction's
    # summation order depends on where the segment sits in the row, the matmul's does not (measured)
    v1 = jnp.concatenate([v, jnp.ones((b, r, nh, 1), v.dtype)], axis=-1)
    ctx = jnp.einsum("bnqk,bknd->bqnd", weights, v1)
    return (ctx[..., :hd] / jnp.maximum(ctx[..., hd:], 1e-30)).reshape(b, r, h)


def embed_tokens(p: dict, input_ids, position_ids, shape: BertShape, token_type_ids=None):
    """The embedding layer's output float32 [B, R, hidden] (word + position + token type, LayerNorm); token type 0
    throughout unless ``token_type_ids`` int [B, R] is given (then ``p`` is packed with ``token_types=True``)."""
    emb = p["emb"]
    types = emb["type0"] if token_type_ids is None else emb["type"][token_type_ids]
    x = emb["word"][input_ids] + types + emb["pos"][position_ids]
    return _layer_norm(x, emb["ln"], shape.layer_norm_eps)


def segment_attention(segment_ids):
    """bool [B, R, R]: query token i may attend to key token j (same segment, not padding)."""
    return (segment_ids[:, :, None] == segment_ids[:, None, :]) & (segment_ids[:, None, :] > 0)


def run_layers(layers, x, same_segment, shape: BertShape, bias=None):
    """x [B, R, hidden] through the transformer layers ``layers`` (a list of packed layer dicts) -> [B, R, hidden].
    bias: an additive attention bias every layer shares (see ``_attention``); None for BERT.

    The lower and upper layers of one model run apart when the lower layers' states are cached
    (riskrank_jax/model/encoder_tune.py trains the upper ones)."""
    for lp in layers:
        ctx = _attention(x, lp, same_segment, shape, bias)
        x = _layer_norm(ctx @ lp["att_out"][0] + lp["att_out"][1] + x, lp["att_ln"], shape.layer_norm_eps)
        inner = _activation(x @ lp["ffn_in"][0] + lp["ffn_in"][1], shape.activation)
        x = _layer_norm(inner @ lp["ffn_out"][0] + lp["ffn_out"][1] + x, lp["ffn_ln"], shape.layer_norm_eps)
    return x


def packed_hidden(p: dict, input_ids, position_ids, segment_ids, shape: BertShape, bias=None):
    """Last hidden states float32 [B, R, hidden] of packed rows (see the module doc for the inputs); bias: None, or
    an additive attention bias float32 [B, num_heads, R, R] shared by all layers (see ``_attention``)."""
    x = embed_tokens(p, input_ids, position_ids, shape)
    return run_layers(p["layers"], x, segment_attention(segment_ids), shape, bias)


def pool_segments(hidden, segment_ids, num_segments: int, pooling: str):
    """Per-segment pooled vectors float32 [B, S, hidden] (S = num_segments; segment s is row slot s - 1).

    mean: average over the segment's tokens; cls: its first token; max: elementwise max over its tokens.
    Slots with no segment give zeros (mean, cls) or -1e9 (max); callers drop them.
    """
    slots = jnp.arange(1, num_segments + 1, dtype=segment_ids.dtype)
    member = segment_ids[:, None, :] == slots[None, :, None]  # [B, S, R]
    if pooling == "max":
        return jnp.max(jnp.where(member[..., None], hidden[:, None], -1e9), axis=2)
    if pooling == "cls":
        first = member & (jnp.cumsum(member, axis=-1) == 1)
        return jnp.einsum("bsr,brh->bsh", first.astype(hidden.dtype), hidden)
    w = member.astype(hidden.dtype)
    sums = jnp.einsum("bsr,brh->bsh", w, hidden)
    return sums / jnp.maximum(jnp.sum(w, axis=-1, keepdims=True), 1e-9)


def pool_texts(hidden, slot, n_texts: int, pooling: str):
    """float32 [n_texts, hidden]: the pooled vector of each text of packed rows, text k being the tokens whose
    ``slot`` (int32 [B, R]) is k + 1, in any row (0: padding); mean, cls (its first token) or max, as
    ``pool_segments``. A text with no token gives zeros (mean, cls) or -1e9 (max).

    Why slots over the whole batch, not per row: texts of any length share rows (no padding to the longest),
    and the pooled vectors come out in the texts' own order."""
    h = hidden.reshape(-1, hidden.shape[-1])
    s = slot.reshape(-1)
    n = int(n_texts) + 1
    if pooling == "max":
        return jnp.maximum(jax.ops.segment_max(h, s, num_segments=n)[1:], -1e9)
    if pooling == "cls":
        first = jax.ops.segment_min(jnp.arange(s.size), s, num_segments=n)[1:]
        return jnp.where((first < s.size)[:, None], h[jnp.minimum(first, s.size - 1)], 0.0)
    sums = jax.ops.segment_sum(h, s, num_segments=n)[1:]
    counts = jax.ops.segment_sum(jnp.ones_like(s, h.dtype), s, num_segments=n)[1:]
    return sums / jnp.maximum(counts, 1e-9)[:, None]


def sequence_classifier_logits(params, input_ids, attention_mask, token_type_ids, shape: BertShape):
    """float32 [B, num_labels] of a BERT sequence classifier (transformers' BertForSequenceClassification, no
    dropout): the pooler's tanh dense layer over the first token's last hidden state, then the classifier.

    params: FlaxBertForSequenceClassification's tree ({"bert": {embeddings, encoder, pooler}, "classifier"}),
    packed inside the trace so that gradients reach it; input_ids, attention_mask (1 for tokens, 0 for padding)
    and token_type_ids int [B, L], one sequence (or pair) per row, positions 0 .. L - 1."""
    bert = params["bert"]
    p = pack_params(bert, shape, xp=jnp, token_types=True)
    positions = jnp.broadcast_to(jnp.arange(input_ids.shape[1], dtype=jnp.int32), input_ids.shape)
    x = embed_tokens(p, input_ids, positions, shape, token_type_ids)
    hidden = run_layers(p["layers"], x, segment_attention(attention_mask), shape)
    pooler, head = bert["pooler"]["dense"], params["classifier"]
    pooled = jnp.tanh(hidden[:, 0] @ pooler["kernel"] + pooler["bias"])
    return (pooled @ head["kernel"] + head["bias"]).astype(jnp.float32)
