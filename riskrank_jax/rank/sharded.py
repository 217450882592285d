"""Score and rank a large tool registry with the TOOL axis sharded over devices.

Usage::

    mesh = tool_mesh()                                            # 1-D mesh over every device, axis "tools"
    reg = shard_registry(tool_emb, mesh, risk=risk)               # [N, d] split into equal per-device shards
    vals, ids = sharded_topk(q_emb, reg, Scorer("cosine", lam=0.1), k=10)          # [Q, k] each
    vals, ids = sharded_topk(q_emb, reg, Scorer("head", params=params, lam=0.1), k=10)

Scores (both descending, ties broken by the lower tool id)::

    cosine   s(q, t) = q · t − λ · risk(t)               (zero-shot: unit embeddings, given risk [N])
    head     s(q, t) = f_rel(q, t) − λ · f_risk(t)       (``heads.heads.relevance_full`` / ``.risk``)

Each device holds N/D tools (``NamedSharding`` over the mesh) and walks its shard in chunks of
``tool_chunk`` tools with ``lax.scan``, keeping a running top-k: per-device memory is its shard plus one
[Q, tool_chunk] block of scores (plus the head's fused intermediates), never [Q, N].  The per-device top-k
lists are then merged (all-gather of D·k candidates, one more top-k).  Chunk shapes do not depend on the
number of devices, so one device and D devices compute the same scores and return the same ids.

Why chunked scans: per-device memory stays one shard plus one block, however large the registry.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from riskrank_jax.model import heads

AXIS = "tools"
SCORERS = ("cosine", "head")


@dataclass(frozen=True)
class Scorer:
    """How a (query, tool) pair is scored: "cosine" (needs the registry's risk) or "head" (needs params)."""

    kind: str = "cosine"
    lam: float = 0.0
    params: dict | None = field(default=None, hash=False, compare=False)

    def __post_init__(self):
        if self.kind not in SCORERS:
            raise ValueError(f"Scorer.kind must be one of {SCORERS}, got {self.kind!r}")
        if self.kind == "head" and self.params is None:
            raise ValueError('Scorer("head") needs params (riskrank_jax.model.heads.init_params / train)')


@dataclass(frozen=True, eq=False)
class ShardedRegistry:
    """Tool embeddings [N_pad, d] and risk [N_pad] sharded along tools; rows >= n_tools are padding."""

    emb: jax.Array
    risk: jax.Array
    n_tools: int
    mesh: Mesh
    tool_chunk: int


def tool_mesh(devices=None) -> Mesh:
    """1-D mesh with axis "tools" over ``devices`` (default: all)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (AXIS,))


def shard_registry(tool_emb, mesh: Mesh, *, risk=None, tool_chunk: int = 8192) -> ShardedRegistry:
    """Pad the registry to D · ceil(N / (D · tool_chunk)) · tool_chunk rows and place it on the mesh.

    Args:
      tool_emb: float [N, d] (numpy or jax; copied to the devices shard by shard).
      risk: float [N] risk used by the cosine scorer (default zeros).
      tool_chunk: tools per scan step on each device (fixes the compiled block shape).
    """
    tool_emb = np.asarray(tool_emb, np.float32) if not isinstance(tool_emb, jax.Array) else tool_emb
    n, d = tool_emb.shape
    n_dev = mesh.devices.size
    chunk = int(max(1, min(tool_chunk, -(-n // n_dev))))
    per_dev = -(-n // (n_dev * chunk)) * chunk
    pad = n_dev * per_dev - n
    r = np.zeros(n, np.float32) if risk is None else np.asarray(risk, np.float32)
    if r.shape != (n,):
        raise ValueError(f"risk must be [N={n}], got {r.shape}")
    sharding = NamedSharding(mesh, P(AXIS))
    emb = jax.device_put(jnp.pad(jnp.asarray(tool_emb), ((0, pad), (0, 0))), sharding)
    return ShardedRegistry(emb, jax.device_put(jnp.pad(jnp.asarray(r), (0, pad)), sharding), n, mesh, chunk)


def _chunk_scores(scorer: Scorer, params, q, t, risk):
    """[Q, C] scores of one tool chunk t [C, d] (risk [C] for the cosine scorer)."""
    if scorer.kind == "cosine":
        return q @ t.T - scorer.lam * risk[None, :]
    rel = heads.relevance_full(params, q, t)
    return rel - scorer.lam * heads.risk(params, t)[None, :]


def _merge(vals, ids, new_vals, new_ids, k: int):
    """Top-k of the union; earlier entries first, so equal scores keep the lower (earlier) id."""
    v = jnp.concatenate([vals, new_vals], axis=1)
    i = jnp.concatenate([ids, new_ids], axis=1)
    top_v, pos = jax.lax.top_k(v, k)
    return top_v, jnp.take_along_axis(i, pos, axis=1)


def _local_topk(q, emb, risk, params, *, scorer: Scorer, k: int, chunk: int, n_tools: int):
    """Running top-k over this device's shard, walked in chunks. Returns [1, Q, k] values and global ids."""
    per_dev = emb.shape[0]
    offset = jax.lax.axis_index(AXIS) * per_dev
    n_q = q.shape[0]

    def step(carry, xs):
        vals, ids = carry
        t, r, start = xs
        s = _chunk_scores(scorer, params, q, t, r)
        gid = offset + start + jnp.arange(chunk, dtype=jnp.int32)
        s = jnp.where(gid[None, :] < n_tools, s, -jnp.inf)
        return _merge(vals, ids, s, jnp.broadcast_to(gid, s.shape), k), None

    init = (jnp.full((n_q, k), -jnp.inf, q.dtype), jnp.full((n_q, k), -1, jnp.int32))
    init = jax.lax.pcast(init, (AXIS,), to="varying")  # the carry differs per device
    n_chunks = per_dev // chunk
    xs = (emb.reshape(n_chunks, chunk, -1), risk.reshape(n_chunks, chunk),
          jnp.arange(n_chunks, dtype=jnp.int32) * chunk)
    (vals, ids), _ = jax.lax.scan(step, init, xs)
    return vals[None], ids[None]


@functools.partial(jax.jit, static_argnames=("scorer", "k", "chunk", "n_tools", "mesh"))
def _topk_jit(q, emb, risk, params, *, scorer, k, chunk, n_tools, mesh):
    local = jax.shard_map(
        functools.partial(_local_topk, scorer=scorer, k=k, chunk=chunk, n_tools=n_tools), mesh=mesh,
        in_specs=(P(), P(AXIS), P(AXIS), P()), out_specs=(P(AXIS), P(AXIS)))
    vals, ids = local(q, emb, risk, params)  # [D, Q, k]: device order = ascending tool ids
    n_q = q.shape[0]
    vals = vals.transpose(1, 0, 2).reshape(n_q, -1)
    ids = ids.transpose(1, 0, 2).reshape(n_q, -1)
    top_v, pos = jax.lax.top_k(vals, k)
    return top_v, jnp.take_along_axis(ids, pos, axis=1)


def sharded_topk(q_emb, registry: ShardedRegistry, scorer: Scorer, k: int):
    """Top-k tools per query over the sharded registry.

    Args:
      q_emb: float [Q, d] query embeddings (replicated on every device).
      registry: ``shard_registry(...)``.
      scorer: ``Scorer("cosine", lam)`` or ``Scorer("head", lam, params)``.
      k: list length (<= N).
    Returns:
      (scores float [Q, k] descending, ids int32 [Q, k]); equal scores are ordered by tool id.
    """
    if not 1 <= k <= registry.n_tools:
        raise ValueError(f"k must be in 1..{registry.n_tools}, got {k}")
    q = jnp.asarray(q_emb, jnp.float32)
    if q.ndim != 2 or q.shape[1] != registry.emb.shape[1]:
        raise ValueError(f"q_emb must be [Q, {registry.emb.shape[1]}], got {q.shape}")
    params = scorer.params if scorer.kind == "head" else {}
    q = jax.device_put(q, NamedSharding(registry.mesh, P()))
    return _topk_jit(q, registry.emb, registry.risk, params, scorer=scorer, k=int(k), chunk=registry.tool_chunk,
                     n_tools=registry.n_tools, mesh=registry.mesh)


def per_device_bytes(q_emb, registry: ShardedRegistry, scorer: Scorer, k: int) -> dict:
    """XLA's memory analysis of the compiled per-device program: argument, output and temporary bytes."""
    q = jnp.asarray(q_emb, jnp.float32)
    params = scorer.params if scorer.kind == "head" else {}
    compiled = _topk_jit.lower(q, registry.emb, registry.risk, params, scorer=scorer, k=int(k),
                               chunk=registry.tool_chunk, n_tools=registry.n_tools, mesh=registry.mesh).compile()
    m = compiled.memory_analysis()
    out = {"arguments": int(m.argument_size_in_bytes), "outputs": int(m.output_size_in_bytes),
           "temporaries": int(m.temp_size_in_bytes)}
    out["total"] = sum(out.values())
    return out


__all__ = ["Scorer", "ShardedRegistry", "tool_mesh", "shard_registry", "sharded_topk", "per_device_bytes", "AXIS",
           "SCORERS"]
