"""The server a tool comes from as evidence, and the server-first retrievers of the MCP benchmarks.

    s = server_context(tool, server, of_tool, 0.5, 0.5)     # [Q, N]: + the server's match and its best sibling's
    m = server_max(tool, of_tool, n_servers)                # [Q, M]: each server's best tool score
    ids = two_stage_ranking(server, tool, of_tool, 5, 3)    # [Q, 15]: top 5 servers, then their top 3 tools
    h = mcp_zero_scores(server_cos, tool_cos, of_tool)      # [Q, N]: (s_srv · s_tool) · max(s_srv, s_tool)
    t = namesake_max(scores, group)                         # [Q, N]: a tool scores as its best namesake

Server context: a tool of a server that matches the request (its name and description), or whose other tools
match it, is more likely needed — a request for a "PPT" needs the presentation server's create, add-slide and
save tools although only one of them says "PPT". In the request's own scale::

    context(q, t) = tool(q, t) + std_N(tool) · ( w_s · z_M(server)(q, srv(t)) + w_b · z_M(best sibling)(q, srv(t)) )

z_M standardises over the M servers; with one server both terms are 0 and the scores are unchanged.

Baselines: LiveMCPBench's own agent retrieves the top 5 servers by embedding similarity, then each one's top 3
tools (``two_stage_ranking``, listed server by server); MCP-Zero matches server then tool hierarchically and
ranks by (s_server · s_tool) · max(s_server, s_tool) (``mcp_zero_scores``).

Why pure functions over a tool -> server index: a registry of any number of servers is two arrays, and every
function runs under ``jit`` over a whole batch of queries.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from riskrank_jax.retrieve.hybrid import zscore


@functools.partial(jax.jit, static_argnames=("n_servers",))
def server_max(scores, of_tool, n_servers: int):
    """float32 [Q, M]: the best score of each server's tools (−inf for a server without tools).

    Args: scores [Q, N]; of_tool int32 [N] (values in 0..M−1); n_servers M.
    """
    return jax.vmap(lambda row: jax.ops.segment_max(row, of_tool, num_segments=n_servers))(
        jnp.asarray(scores, jnp.float32))


@functools.partial(jax.jit, static_argnames=("n_servers",))
def _context(tool, server, of_tool, server_weight, sibling_weight, n_servers: int):
    tool = jnp.asarray(tool, jnp.float32)
    best = server_max(tool, of_tool, n_servers)
    evidence = server_weight * zscore(server) + sibling_weight * zscore(best)  # [Q, M]
    return tool + tool.std(-1, keepdims=True) * evidence[:, of_tool]


def server_context(tool, server, of_tool, server_weight: float, sibling_weight: float):
    """tool + std_N(tool) · (w_s · z(server) + w_b · z(best sibling))[srv(t)], per query.

    Args:
      tool: float32 [Q, N] the tools' relevance. server: float32 [Q, M] each server's match with the request
        (e.g. cosine with its name and description). of_tool: int32 [N] the server of each tool.
      server_weight, sibling_weight: w_s, w_b.

    Returns:
      float32 [Q, N] on the scale of ``tool``.
    """
    server = jnp.asarray(server, jnp.float32)
    return _context(tool, server, jnp.asarray(of_tool, jnp.int32), float(server_weight), float(sibling_weight),
                    int(server.shape[-1]))


@functools.partial(jax.jit, static_argnames=("top_servers", "top_tools", "length"))
def two_stage_ranking(server, tool, of_tool, top_servers: int = 5, top_tools: int = 3, length: int | None = None):
    """int32 [Q, length] (default top_servers · top_tools, at most N): the best ``top_servers`` servers by
    ``server`` [Q, M], each one's best ``top_tools`` tools by ``tool`` [Q, N], server by server (ties: lower
    index); then, when ``length`` asks for more, the other tools, best server first, then by tool score."""
    server = jnp.asarray(server, jnp.float32)
    tool = jnp.asarray(tool, jnp.float32)
    of_tool = jnp.asarray(of_tool, jnp.int32)
    n = tool.shape[-1]
    srv_rank = jnp.argsort(jnp.argsort(-server, axis=-1, stable=True), axis=-1, stable=True)  # [Q, M]
    idx = jnp.arange(n)
    same = of_tool[:, None] == of_tool[None, :]  # [N, N]
    better = (tool[:, None, :] > tool[:, :, None]) | ((tool[:, None, :] == tool[:, :, None]) & (idx < idx[:, None]))
    within = jnp.sum(better & same, axis=-1)  # [Q, N]: the tool's rank inside its server
    rank = srv_rank[:, of_tool]  # [Q, N]
    chosen = (rank < top_servers) & (within < top_tools)
    # chosen tools first, by server rank then within-server rank; then the rest, by server rank then tool rank
    key = jnp.where(chosen, rank * n + within, n * n + rank * n + within).astype(jnp.float32)
    length = min(top_servers * top_tools, n) if length is None else length
    return jax.lax.top_k(-key, length)[1].astype(jnp.int32)


@jax.jit
def mcp_zero_scores(server_cos, tool_cos, of_tool):
    """(s_srv · s_tool) · max(s_srv, s_tool) per tool, s_srv = ``server_cos`` [Q, M] of its server, s_tool =
    ``tool_cos`` [Q, N] (cosines); float32 [Q, N]."""
    s = jnp.asarray(server_cos, jnp.float32)[:, jnp.asarray(of_tool, jnp.int32)]
    t = jnp.asarray(tool_cos, jnp.float32)
    return (s * t) * jnp.maximum(s, t)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _namesake(scores, group, n_groups: int):
    best = jax.vmap(lambda row: jax.ops.segment_max(row, group, num_segments=n_groups))(scores)
    return best[:, group]


def namesake_max(scores, group):
    """float32 [Q, N]: each tool's score replaced by the best score of the tools in its ``group`` (int32 [N], e.g.
    one group per tool name, so a name that two servers list ranks both copies together)."""
    group = jnp.asarray(group, jnp.int32)
    return _namesake(jnp.asarray(scores, jnp.float32), group, int(group.max()) + 1)


__all__ = ["server_max", "server_context", "two_stage_ranking", "mcp_zero_scores", "namesake_max"]
