"""One walk against two: a search seam's answer (the top k and the risky tools held back) computed by
``rank.explain.search_with_held_back`` (the first stage and request stages once, then the risk, graph and top-k
stages at λ and at λ = 0) side by side with the two walks it replaced (``rank_queries``, then the same request
ranked again by a λ = 0 copy of the ranker), on the same ranker, request embeddings given to both.

The registry is ``benchmarks/rank_latency.py``'s synthetic one; the default zero-shot config with the multi-step
stage on (the request stages are then the largest shared part). Printed: p50 / p95 ms per request of each, their
ratio, and whether the two give the same hits and held-back tools for every request.

    python benchmarks/search_walk.py [--tools 5000] [--queries 60]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from rank_latency import pct, synthetic_registry, timed  # noqa: E402
from riskrank_jax.data import load_benchmark  # noqa: E402
from riskrank_jax.encode.embedding_cache import EmbeddingCache  # noqa: E402
from riskrank_jax.rank import stages  # noqa: E402
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker  # noqa: E402
from riskrank_jax.rank.tool_hits import make_hits  # noqa: E402


def two_walks(ranker, zero, query: str, k: int, q_emb) -> tuple[list, list]:
    """The replaced composition: the hits, then the λ = 0 ranker's top k walked again from the first stage."""
    hits = ranker.rank_queries([query], k=k, q_emb=q_emb)[0]
    at_zero = zero.rank(q_emb, k=k, q_texts=[query])[0]
    kept = {ranker.tool_index[h.name] for h in hits}
    return hits, [int(t) for t in at_zero if int(t) not in kept and ranker.risk_levels[t] >= 3]


def one_walk(ranker, query: str, k: int, q_emb) -> tuple[list, list]:
    """``search_with_held_back``'s walk with the request embedding given (as two_walks gets it)."""
    ids, total, rel, at_zero = stages.ranked_with_scores(ranker.prepared, ranker.config, q_emb, [query], k,
                                                         ranker.encoder, also_at_lambdas=(0.0,))
    hits = make_hits(ids, total, rel, ranker.tool_names, ranker.risk_levels, ranker.risk_source, None)[0]
    kept = set(ids[0].tolist())
    return hits, [int(t) for t in at_zero[0] if int(t) not in kept and ranker.risk_levels[t] >= 3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=60, help="distinct demo test requests timed (<= 149)")
    ap.add_argument("--k", type=int, default=5)
    a = ap.parse_args()
    config = dataclasses.replace(DEFAULT_REGISTRY_CONFIG, multi_step=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tools.json"
        path.write_text(json.dumps(synthetic_registry(a.tools)))
        ranker = Ranker.from_registry([path], cache=EmbeddingCache(tmp), config=config)
    zero = ranker.with_config(dataclasses.replace(config, lam=0.0))
    queries = list(load_benchmark("demo").tests["test"].texts)[: a.queries]
    emb = {q: ranker.encode_queries([q]) for q in queries}
    same = all(
        [h.name for h in x[0]] == [h.name for h in y[0]] and x[1] == y[1]
        and np.allclose([h.score for h in x[0]], [h.score for h in y[0]], atol=1e-6)
        for q in queries
        for x, y in [(two_walks(ranker, zero, q, a.k, emb[q]), one_walk(ranker, q, a.k, emb[q]))])
    ms = timed({"two walks": lambda q: two_walks(ranker, zero, q, a.k, emb[q]),
                "one walk": lambda q: one_walk(ranker, q, a.k, emb[q])}, queries)
    print(f"{ranker.size} tools, {len(queries)} requests, k = {a.k}, multi-step on; same answers: {same}")
    for name, xs in ms.items():
        print(f"  {name:<10} p50 {pct(xs, 50):7.2f} ms   p95 {pct(xs, 95):7.2f} ms")
    print(f"  ratio two / one (p50): {pct(ms['two walks'], 50) / pct(ms['one walk'], 50):.2f}")


if __name__ == "__main__":
    main()
