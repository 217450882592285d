"""Dual heads over frozen embeddings: relevance f_rel(q, t) and risk f_risk(t), as pure functions.

Usage::

    params = init_params(jax.random.key(0), dim=384)            # plain dict pytree
    rel = relevance_full(params, q_emb, tool_emb)               # [Q, N], never builds [Q, N, 2d]
    s = scoring.penalise(rel, risk(params, tool_emb), 0.1)      # [Q, N]: f_rel - 0.1 * f_risk

Definitions (docs/method.md)::

    f_rel(q, t) = sigmoid(W2 · relu(W1 · x(q, t) + b1) + b2),  x = [E(q); E(t)]            ("concat")
    f_risk(t)   = sigmoid(V2 · relu(V1 · E(t) + c1) + c2)
    s(q, t)     = f_rel(q, t) − λ · f_risk(t)      (riskrank_jax.scoring.penalise)

Beyond the paper (default off), ``rel_features="interact"`` uses
x = [E(q); E(t); E(q)⊙E(t); |E(q)−E(t)|; cos(E(q), E(t))] (4d + 1 inputs). The choice is carried by
the shape of ``W1`` ([2d, h] or [4d + 1, h]), so every function here takes only ``params``.

Parameters are initialised like PyTorch's ``nn.Linear`` (the authors' release): weights and biases
U(−1/√fan_in, 1/√fan_in). ``W1`` is stored as one [d_in, h] matrix whose row blocks follow the order of x.

All functions are pure and ``jax.vmap``-able over a leading model axis of ``params``.

Why pure functions of a params dict: the same code trains, vmaps over models and runs in a Ranker.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

Params = dict

REL_FEATURES = ("concat", "interact")
_COS_EPS = 1e-8
# Elements of the largest per-chunk intermediate of the interact head's relevance_full (2**25 f32 = 128 MiB).
_CHUNK_BUDGET = 1 << 25


def rel_input_dim(dim: int, rel_features: str = "concat") -> int:
    """Width of the relevance head's input x(q, t)."""
    if rel_features == "concat":
        return 2 * dim
    if rel_features == "interact":
        return 4 * dim + 1
    raise ValueError(f"rel_features must be one of {REL_FEATURES}, got {rel_features!r}")


def count_params(dim: int, hidden: int = 64, rel_features: str = "concat") -> int:
    """Number of scalars in both heads: (d_in·h + h + h + 1) + (d·h + h + h + 1).

    196,866 for d = 1024 and 73,986 for d = 384 with the paper's concat head (h = 64).
    """
    d_in = rel_input_dim(dim, rel_features)
    return (d_in * hidden + hidden + hidden + 1) + (dim * hidden + hidden + hidden + 1)


def init_params(key: jax.Array, dim: int, hidden: int = 64, rel_features: str = "concat") -> Params:
    """Fresh parameters of both heads.

    All entries come from one uniform draw (one PRNG call keeps vmapped compilation cheap), each
    block scaled to ±1/√fan_in of its layer.

    Args:
      key: a PRNG key.
      dim: embedding width d.
      hidden: hidden width h of both heads.
      rel_features: "concat" (paper) or "interact" (beyond the paper).

    Returns:
      {"rel": {"W1" [d_in, h], "b1" [h], "W2" [h, 1], "b2" [1]},
       "risk": {"V1" [d, h], "c1" [h], "V2" [h, 1], "c2" [1]}}
    """
    d_in = rel_input_dim(dim, rel_features)
    layout = [  # (head, name, shape, fan_in)
        ("rel", "W1", (d_in, hidden), d_in),
        ("rel", "b1", (hidden,), d_in),
        ("rel", "W2", (hidden, 1), hidden),
        ("rel", "b2", (1,), hidden),
        ("risk", "V1", (dim, hidden), dim),
        ("risk", "c1", (hidden,), dim),
        ("risk", "V2", (hidden, 1), hidden),
        ("risk", "c2", (1,), hidden),
    ]
    sizes = [math.prod(shape) for _, _, shape, _ in layout]
    u = jax.random.uniform(key, (sum(sizes),), jnp.float32, -1.0, 1.0)
    params: Params = {"rel": {}, "risk": {}}
    offset = 0
    for (head, name, shape, fan_in), size in zip(layout, sizes):
        params[head][name] = u[offset : offset + size].reshape(shape) * (1.0 / math.sqrt(fan_in))
        offset += size
    return params


def rel_features_of(params: Params, dim: int) -> str:
    """"concat" or "interact", read from the shape of W1 (static under jit)."""
    d_in = params["rel"]["W1"].shape[0]
    if d_in == 2 * dim:
        return "concat"
    if d_in == 4 * dim + 1:
        return "interact"
    raise ValueError(f"W1 has {d_in} input rows, which fits neither 2d nor 4d+1 for d = {dim}")


def _cosine(q: jax.Array, t: jax.Array) -> jax.Array:
    num = jnp.sum(q * t, axis=-1)
    den = jnp.linalg.norm(q, axis=-1) * jnp.linalg.norm(t, axis=-1)
    return num / jnp.maximum(den, _COS_EPS)


def rel_inputs(q: jax.Array, t: jax.Array, rel_features: str = "concat") -> jax.Array:
    """x(q, t) for broadcastable q [..., d], t [..., d]: [..., 2d] or [..., 4d + 1]."""
    q, t = jnp.broadcast_arrays(q, t)
    if rel_features == "concat":
        return jnp.concatenate([q, t], axis=-1)
    if rel_features == "interact":
        cos = _cosine(q, t)[..., None]
        return jnp.concatenate([q, t, q * t, jnp.abs(q - t), cos], axis=-1)
    raise ValueError(f"rel_features must be one of {REL_FEATURES}, got {rel_features!r}")


def relevance(params: Params, q: jax.Array, t: jax.Array) -> jax.Array:
    """f_rel(q, t) = sigmoid(W2 · relu(W1 · x(q, t) + b1) + b2) for paired inputs.

    Args:
      params: see ``init_params``.
      q: query embeddings [..., d].
      t: tool embeddings [..., d], broadcastable against q.

    Returns:
      [...] relevance in (0, 1).
    """
    p = params["rel"]
    features = rel_features_of(params, q.shape[-1])
    x = rel_inputs(q, t, features)
    h = jax.nn.relu((first_layer(x, p["W1"]) if features == "concat" else x @ p["W1"]) + p["b1"])
    return jax.nn.sigmoid((h @ p["W2"] + p["b2"])[..., 0])


def risk(params: Params, t: jax.Array) -> jax.Array:
    """f_risk(t) = sigmoid(V2 · relu(V1 · E(t) + c1) + c2).

    Args:
      t: tool embeddings [..., d].

    Returns:
      [...] predicted risk in (0, 1); (r − 1)/4 is its training target.
    """
    p = params["risk"]
    h = jax.nn.relu(first_layer(t, p["V1"]) + p["c1"])
    return jax.nn.sigmoid((h @ p["V2"] + p["c2"])[..., 0])


@jax.custom_vjp
def first_layer(x, w):
    """x @ w for x [..., A], w [A, H], whose weight gradient is formed from a materialised xᵀ [A, B].

    Autodiff writes that gradient as a product over x's leading axis (xᵀ·g), for which XLA's CPU backend picks a
    slower kernel than for the forward product; behind an ``optimization_barrier`` xᵀ is an ordinary row-major
    operand (a faster training epoch on a CPU, parameters bit-identical: docs/performance.md, "Training"). Used
    for the risk head's first layer and the concat relevance head's; the interact relevance head keeps the plain
    product (no gain there, and its gradient's rounding changed)."""
    return x @ w


def _first_layer_fwd(x, w):
    return x @ w, (x, w)


def _first_layer_bwd(res, g):
    x, w = res
    xf, gf = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    return g @ w.T, jax.lax.optimization_barrier(xf.T) @ gf


first_layer.defvjp(_first_layer_fwd, _first_layer_bwd)


def relevance_full(params: Params, q: jax.Array, t: jax.Array, *, query_chunk: int | None = None) -> jax.Array:
    """f_rel for every (query, tool) pair, without building x(q, t) per pair.

    The first layer is split by the row blocks of W1: W1 · [q; t] = W1q·q + W1t·t, so the query and
    tool halves are projected once ([Q, h] and [N, h]) and only the hidden pre-activation is formed
    per pair. For "interact": W1m · (q⊙t) = ((q ⊙ W1mᵀ) · t) is a per-query [h, d] matrix times tᵀ,
    and the cosine term is a rank-one outer product; |q − t| cannot be decomposed, so that block is
    built per query chunk ([C, N, d]). Queries are processed in chunks of ``query_chunk`` with
    ``lax.map`` so peak memory is O(C·N) (concat: the hidden units are accumulated one at a time into the
    output block, see ``_relevance_full_concat``) or O(C·N·d) (interact), never O(Q·N·d).

    Args:
      params: see ``init_params``.
      q: query embeddings [Q, d].
      t: tool embeddings [N, d].
      query_chunk: queries per chunk; default: all queries (concat). The interact head caps it at the largest
        power of two whose [C, N, d] block holds <= 2**25 elements (``interact_chunk``).

    Returns:
      [Q, N] relevance.
    """
    p = params["rel"]
    d = q.shape[1]
    if rel_features_of(params, d) == "concat":
        return _relevance_full_concat(p, q, t, query_chunk)
    return _relevance_full_interact(p, q, t, query_chunk)


def _query_chunks(x, chunk: int):
    """x [Q, ...] -> ([n_chunks, chunk, ...] zero-padded, Q)."""
    n_q = x.shape[0]
    n_chunks = -(-n_q // chunk)
    pad = n_chunks * chunk - n_q
    return jnp.pad(x, ((0, pad),) + ((0, 0),) * (x.ndim - 1)).reshape((n_chunks, chunk) + x.shape[1:]), n_q


def _relevance_full_concat(p, q, t, query_chunk):
    """Concat head: sigmoid(sum_h w2_h relu(hq_h + ht_h) + b2), accumulated one hidden unit at a time.

    A ``lax.scan`` over the h hidden units adds w2_j · relu(hq[:, j] + ht[:, j]) to a [C, N] accumulator, so the
    per-pair work is one add, one max and one multiply-add over a contiguous tools axis, and nothing larger than
    the output is ever stored.  Measured on a 2-core CPU (benchmarks/scoring.py) this beats forming the [C, h, N]
    block and reducing it (3x) because the accumulator stays in cache across units.  Queries are processed in
    chunks of ``query_chunk`` (default: all of them; the accumulator is the output block itself).
    """
    d = q.shape[1]
    n_t = t.shape[0]
    w1 = p["W1"]
    chunk = q.shape[0] if query_chunk is None else max(1, min(int(query_chunk), q.shape[0]))
    hq, n_q = _query_chunks(q @ w1[:d] + p["b1"], chunk)  # [n_chunks, C, h]
    ht_t = (t @ w1[d : 2 * d]).T  # [h, N]
    w2 = p["W2"][:, 0]

    def one_chunk(hc):
        def add_unit(acc, unit):
            a, b, w = unit  # [C], [N], scalar
            return acc + w * jax.nn.relu(a[:, None] + b[None, :]), None

        # the first unit starts the accumulator (not zeros): under shard_map it then carries the inputs' axis type
        first = w2[0] * jax.nn.relu(hc[:, 0, None] + ht_t[0][None, :])
        acc, _ = jax.lax.scan(add_unit, first, (hc.T[1:], ht_t[1:], w2[1:]))
        return jax.nn.sigmoid(acc + p["b2"][0])  # [C, N]

    return jax.lax.map(one_chunk, hq).reshape(-1, n_t)[:n_q]


def interact_chunk(n_tools: int, width: int, requested: int | None = None) -> int:
    """Queries per step of the interact head's full-pool scoring: ``requested`` (default: no limit), at most the
    largest power of two C whose [C, N, d] block holds <= ``_CHUNK_BUDGET`` elements. Larger blocks are slower on
    a CPU, with identical outputs (``benchmarks/scoring.py --interact``; docs/performance.md, "Scoring")."""
    cap = 1 << max(0, (_CHUNK_BUDGET // max(1, n_tools * width)).bit_length() - 1)
    return cap if requested is None else max(1, min(cap, int(requested)))


def _relevance_full_interact(p, q, t, query_chunk):
    """Interact head: the |q - t| block is built per query chunk ([C, N, d])."""
    d = q.shape[1]
    n_t = t.shape[0]
    w1 = p["W1"]
    chunk = max(1, min(interact_chunk(n_t, max(w1.shape[1], d), query_chunk), q.shape[0]))
    qp, n_q = _query_chunks(q, chunk)
    hq_all = qp @ w1[:d] + p["b1"]  # [n_chunks, C, h]
    ht = t @ w1[d : 2 * d]  # [N, h]
    w_mul, w_abs, w_cos = w1[2 * d : 3 * d], w1[3 * d : 4 * d], w1[4 * d]
    t_norm = jnp.linalg.norm(t, axis=-1)

    def one_chunk(args):
        qc, hq = args  # [C, d], [C, h]
        pre = hq[:, None, :] + ht[None, :, :]  # [C, N, h]
        scaled = qc[:, :, None] * w_mul[None, :, :]  # [C, d, h]
        pre = pre + jnp.einsum("nd,cdh->cnh", t, scaled)
        pre = pre + jnp.abs(qc[:, None, :] - t[None, :, :]) @ w_abs
        cos = (qc @ t.T) / jnp.maximum(jnp.linalg.norm(qc, axis=-1)[:, None] * t_norm[None, :], _COS_EPS)
        pre = pre + cos[:, :, None] * w_cos
        h = jax.nn.relu(pre)
        return jax.nn.sigmoid((h @ p["W2"] + p["b2"])[..., 0])  # [C, N]

    out = jax.lax.map(one_chunk, (qp, hq_all))  # [n_chunks, C, N]
    return out.reshape(-1, n_t)[:n_q]


def score(params: Params, q: jax.Array, t: jax.Array, *, query_chunk: int | None = None):
    """(relevance_full(params, q, t) [Q, N], risk(params, t) [N])."""
    return relevance_full(params, q, t, query_chunk=query_chunk), risk(params, t)


__all__ = [
    "REL_FEATURES",
    "count_params",
    "first_layer",
    "init_params",
    "rel_input_dim",
    "rel_features_of",
    "rel_inputs",
    "relevance",
    "relevance_full",
    "risk",
    "score",
]
