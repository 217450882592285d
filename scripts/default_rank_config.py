"""One-off generator: measured the λ × α grid that chose ``DEFAULT_REGISTRY_CONFIG`` (rank/ranker.py).

Scores the zero-shot registry ranker over a λ × α grid on the demo benchmark's test queries.

This is how `ranker.DEFAULT_REGISTRY_CONFIG` (the defaults of `Ranker.from_registry` and `riskrank-jax rank`)
was chosen. The demo tools are read as a user registry would be — `tool_text` (name words, description,
parameters) — and their risk is assessed as for a user registry (learned head + keywords), with the head's
f_risk cross-validated (5 folds) so no tool is scored by a head that saw its own label. Metrics use the
audited labels. Usage: python scripts/default_rank_config.py [--lambdas 0 0.25 0.5 ...] [--json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data import demo_dir, load_benchmark
from riskrank_jax.data.jsonl import read_jsonl
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.rank.ranker import RankConfig, Ranker
from riskrank_jax.registry import Registry, Tool
from riskrank_jax.registry.risk import assess_risk
from riskrank_jax.registry.risk_agreement import cross_val_scores

LAMBDAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5)
ALPHAS = (0.0, 0.2)


def demo_registry() -> Registry:
    """The demo tools as `Tool` records (name, description, parameters), in benchmark order."""
    tools = []
    for line, rec in read_jsonl(demo_dir() / "tool.jsonl"):
        params = rec.get("parameters") or {}
        tools.append(Tool(name=rec["api_name"], raw_name=rec["api_name"], description=rec["api_description"],
                          format="plain", source="demo", line=line,
                          params=tuple((k, (v or {}).get("description", "")) for k, v in params.items())))
    return Registry(tuple(tools), (), ("demo",))


def measure(lambdas=LAMBDAS, alphas=ALPHAS, split: str = "test") -> list[dict]:
    bench = load_benchmark("demo")
    reg = demo_registry()
    assert reg.names == tuple(bench.tools.names), "demo tool order differs from the benchmark's"
    enc, cache = load_encoder(), EmbeddingCache()
    emb = embed_texts(enc, list(reg.texts), cache)
    risk = assess_risk(reg, cross_val_scores(emb, bench.tools.risk, 5))
    qs = bench.tests[split]
    q_emb = embed_texts(enc, list(qs.texts), cache)
    from riskrank_jax.rank.registry_inputs import RankingInputs, zero_shot_graph

    graph = zero_shot_graph(RankingInputs(reg, emb, risk, reg.perm_mask(), enc.model_id, "cv"))
    base = Ranker.build(encoder_id=enc.model_id, tool_names=reg.names, tool_texts=reg.texts, tool_emb=emb,
                        risk_levels=risk.levels, perm_level=reg.perm_mask().sum(-1), graph=graph,
                        risk_scores=risk.scores)
    rows = []
    for alpha in alphas:
        for lam in lambdas:
            r = base.with_config(RankConfig(lam=lam, alpha=alpha, first_stage="hybrid"))
            ids = r.rank(q_emb, k=10, q_texts=list(qs.texts))
            pq = metrics.compute_all(ids, qs.gold, bench.tools.risk, k=5)
            vals = {m: float(v) for m, v in metrics.mean_metrics(pq).items() if m != "high_risk"}
            vals.update({m: float(v) for m, v in metrics.context_metrics(pq).items()})
            rows.append({"lambda": lam, "alpha": alpha, **{m: round(v, 4) for m, v in vals.items()}})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lambdas", type=float, nargs="+", default=LAMBDAS)
    ap.add_argument("--alphas", type=float, nargs="+", default=ALPHAS)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = measure(tuple(a.lambdas), tuple(a.alphas))
    if a.json:
        print(json.dumps(rows))
        return
    cols = ("ndcg@5", "success@5", "rvr@5", "srr@5", "safe_rvr@5", "needrisk_hit@5")
    print("| α | λ | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for row in rows:
        print(f"| {row['alpha']} | {row['lambda']} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
