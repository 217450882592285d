"""riskrank-jax: risk-aware reranking for agent tool retrieval, in JAX/Flax.

The pipeline is a chain of small pure functions over arrays::

    rel, risk = model.score(...)            # [Q, N] relevance, [N] predicted risk
    s = model.combine(rel, risk, lam)       # s = f_rel - lam * f_risk
    s = smoothing.smooth_full(s, graph, a)  # ToolGraph message passing
    ranking = jnp.argsort(-s, axis=-1)
    ranking = rule_filter.rule_filter(ranking, ...)   # optional, audited registries
    metrics.compute_all(ranking, gold, risk, k=5)

Modules: ``data`` (registries, query sets, benchmarks), ``encoder`` (frozen sentence encoder and
embedding cache), ``model`` / ``train`` (dual heads, vectorised training), ``graph`` / ``smoothing``
(ToolGraph), ``rule_filter``, ``metrics``, ``retrievers`` (BM25, dense), ``sweep`` (the experiments).
"""

__version__ = "0.1.0"

from riskrank_jax.runtime.logs import quiet_library_loggers as _quiet_library_loggers  # noqa: E402

_quiet_library_loggers()  # no DEBUG/INFO lines from bm25s, orbax/absl, jax, matplotlib (see logs.py)
