"""What the Ranker's multi-step stage does on the sweep's other benchmarks (demo, UltraTool, Seal-Tools), zero-shot.

For each test split: the zero-shot hybrid Ranker (``Ranker.from_benchmark``, first stage "hybrid", the audited risk
labels) at λ = 0 and at the registry default (λ 0.5, α 0.2 over the zero-shot graph), each without and with
``RankConfig.multi_step``; NDCG@5, Recall@5, Recall@10, complete@10 and RVR@5 (risk ≥ 3). The server-context
stage needs each tool's server, which these benchmarks do not have: there it changes nothing. The committed rows
of those benchmarks are not touched; this writes experiments/results/livemcpbench/other_benchmarks.{json,md}.

Usage: python scripts/request_stages_elsewhere.py [--data-dir DIR] [--benchmarks demo ultratool sealtools]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from riskrank_jax import metrics
from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.experiments.livemcp import list_metrics
from riskrank_jax.paths import REFERENCE_RESULTS_DIR
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker

CONFIGS = {"hybrid_lam0": dict(lam=0.0, alpha=0.0), "hybrid_lam0_steps": dict(lam=0.0, alpha=0.0, multi_step=True),
           "default": {}, "default_steps": dict(multi_step=True)}


def split_rows(bench, split, encoder, cache) -> dict:
    qs = bench.tests[split]
    t_emb = embed_texts(encoder, list(bench.tools.descriptions), cache)
    q_emb = embed_texts(encoder, list(qs.texts), cache)
    base = Ranker.from_benchmark(bench, t_emb, encoder_id=encoder.model_id, config=DEFAULT_REGISTRY_CONFIG)
    base = dataclasses.replace(base, encoder=encoder)
    rows = {}
    for name, change in CONFIGS.items():
        t0 = time.perf_counter()
        r = base.with_config(dataclasses.replace(DEFAULT_REGISTRY_CONFIG, **change))
        ids = r.rank(q_emb, k=10, q_texts=list(qs.texts))
        row = metrics.summarize_over_queries(list_metrics(ids, qs.gold, bench.tools.risk))
        row["cost_s"] = round(time.perf_counter() - t0, 1)
        rows[name] = row
    return {"queries": qs.size, "tools": bench.tools.size,
            "mean_gold": round(float(qs.gold_mask.sum(-1).mean()), 3), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--benchmarks", nargs="+", default=["demo", "ultratool", "sealtools"])
    args = ap.parse_args()
    encoder, cache = load_encoder(), EmbeddingCache()
    out = {"what": "zero-shot hybrid Ranker without and with RankConfig.multi_step (metrics: mean over queries, "
                   "_se = standard error; RVR@5 = share of the top 5 with audited risk >= 3)",
           "encoder": encoder.model_id, "benchmarks": {}}
    for name in args.benchmarks:
        bench = load_benchmark(name, args.data_dir)
        out["benchmarks"][name] = {split: split_rows(bench, split, encoder, cache) for split in bench.tests}
    dest = REFERENCE_RESULTS_DIR / "livemcpbench"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "other_benchmarks.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# The multi-step stage on the other benchmarks (zero-shot hybrid Ranker)", "",
             "| benchmark / split | row | NDCG@5 | Recall@5 | Recall@10 | complete@10 | RVR@5 | cost (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, splits in out["benchmarks"].items():
        for split, d in splits.items():
            for row, m in d["rows"].items():
                lines.append(f"| {name} {split} | `{row}` | {m['ndcg@5']:.3f} | {m['recall@5']:.3f} | "
                             f"{m['recall@10']:.3f} | {m['complete@10']:.3f} | {m['rvr@5']:.3f} | {m['cost_s']:.1f} |")
    (dest / "other_benchmarks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
