"""riskrank-jax: risk-aware reranking for agent tool retrieval, in JAX/Flax.

The pipeline is a chain of small pure functions over arrays::

    rel = heads.relevance_full(params, q_emb, t_emb)           # [Q, N] f_rel            (model.heads)
    s = scoring.penalise(rel, heads.risk(params, t_emb), lam)   # [Q, N] f_rel - lam * f_risk
    s = smoothing.smooth_full(s, graph, alpha)                  # ToolGraph message passing (graph.smoothing)
    ranking = scoring.rank_order(s)                             # int32 [Q, N], best first
    ranking = rule_filter.rule_filter(ranking, risk, perm_level, t_emb, k=5)   # optional (rank.rule_filter)
    per_query = metrics.compute_all(ranking, gold, risk, k=5)

Folders, in layer order (an import goes only to the same folder or to one below it):

    sweep.py, __main__.py   entry points: ``python -m riskrank_jax.sweep``, ``riskrank-jax``
    cli/          the ``riskrank-jax`` command line and the options it shares with the sweep
    serve/        ``riskrank-jax serve``: the risk-aware MCP gateway (downstream servers, policy, audit log)
    integrations/ adapters for Anthropic tool search, the OpenAI Agents SDK and LangGraph bigtool
    experiments/  the sweep: declared variants, their evaluation, results.json / tables.md / figures
    rank/         ``Ranker`` and the stacked pipeline: score, penalise, smooth, rank, rule filter, explain, fit
    registry/     user tool lists (MCP, OpenAI, Anthropic, plain, BEIR) and each tool's assessed risk
    model/        dual heads, vectorised training, checkpoints, correction reranker, stand-alone risk head
    retrieve/     first stages: BM25, dense cosine, their hybrid fusion; what a request asks for (intent)
    graph/        ToolGraph construction and score smoothing over it
    encode/       frozen BERT-family sentence encoder and the on-disk embedding cache
    data/         benchmarks (demo, UltraTool, Seal-Tools) as plain arrays
    metrics.py, scoring.py, paths.py, errors.py   metrics, shared score definitions, locations, errors
    permissions.py  the permission categories and the paper's keyword rule (data/, registry/ and rank/ use them)
    runtime/      logs, progress bars, CPU pinning, XLA compile cache, memory budget, heap release

From a command to a number:

    riskrank-jax rank FILE --query Q   cli/rank.py -> Ranker.from_registry (rank/ranker.py): registry.loader,
                                       encode.embedding_cache, registry.risk, graph.tool_graph; then
                                       rank_queries -> rank.stages, once down: first stage (retrieve.hybrid)
                                       -> request stages -> intent (retrieve.intent, model.intent_model) ->
                                       risk (scoring.penalise) -> graph.smoothing -> hold-back -> rule filter
                                       and top k -> ToolHit records (rank.tool_hits)
    riskrank-jax serve --config C      cli/serve.py -> serve.config.GatewaySettings -> serve.gateway.Gateway:
                                       serve.downstream (MCP clients) -> serve.catalog (Ranker.from_registry
                                       over their tools); search_tools -> rank.explain.search_explained
                                       -> rank.stages; call_tool -> serve.policy.decide_call -> serve.audit ->
                                       the owning server
    python -m riskrank_jax.sweep       sweep.py: flags -> one experiments.config tree per benchmark ->
                                       experiments/run.py run_benchmark: data.load_benchmark ->
                                       experiments.stages (embed, train: model.train) -> graph.tool_graph ->
                                       experiments.evaluate (rank.stacked, metrics.compute_all) ->
                                       experiments.report (results.json, tables.md, figures)

``from riskrank_jax import Ranker, RankConfig`` works; it imports ``riskrank_jax.rank.ranker`` only when asked.
"""

import importlib

from riskrank_jax.runtime.logs import quiet_library_loggers as _quiet_library_loggers

__version__ = "0.1.0"

_LAZY = {"Ranker": "riskrank_jax.rank.ranker", "RankConfig": "riskrank_jax.rank.ranker"}


def __getattr__(name):
    """PEP 562: ``Ranker`` and ``RankConfig`` load their module on first access (JAX is not imported before)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'riskrank_jax' has no attribute {name!r}")


_quiet_library_loggers()  # no DEBUG/INFO lines from bm25s, orbax/absl, jax, matplotlib (see logs.py)
