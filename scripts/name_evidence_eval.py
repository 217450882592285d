"""The name stage (``RankConfig.name_evidence``: ``rank.stages.name_stage``, ``retrieve.names.sibling_order``) off
and on, zero-shot: LiveMCPBench, Seal-Tools test_out and UltraTool test, with name_weight chosen on training
queries only.

Rankers (each as the repo's other evaluations build it):

* LiveMCPBench: ``Ranker.from_registry`` over the 70 servers (as ``experiments.livemcp.prepare``),
  ``DEFAULT_REGISTRY_CONFIG`` with the name stage off ("off": the committed row ``ranker_server_intent``) and on
  ("on": ``ranker_server_intent_names``, the rank default), 94 tasks;
* Seal-Tools test_out / UltraTool test: ``Ranker.from_benchmark`` with the same two configs (these benchmarks have
  no servers, so server context is inert).

Metrics: NDCG@5, Recall@10, complete@10 (every needed tool in the top 10), top-1 (the first tool is needed), and
the share of top-1 misses whose first tool is a *sibling* of a needed tool: same server (where servers are known)
and an object word in common (``retrieve.names.siblings``: a name word that is not its verb or a connector).

The weight: over ``GRID``, the name_weight with the best mean NDCG@5 over the two training splits (Seal-Tools
"dev", UltraTool "cv_train"; ties: the smaller weight), the same rankers and config. No test figure takes part.

Usage: python scripts/name_evidence_eval.py [--data-dir DIR] [--json OUT] [--weight W (skip the choice)]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import time

import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data import load_benchmark
from riskrank_jax.data.livemcpbench import load_livemcpbench
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.paths import resolve_data_dir
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker
from riskrank_jax.retrieve import names

GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
K = 10


def sibling_miss_share(ids, gold, tool_names, of_tool=None) -> tuple[float, int]:
    """(share of top-1 misses whose first tool is a sibling of a needed tool, number of misses)."""
    misses = sib = 0
    for row, g in zip(np.asarray(ids), np.asarray(gold)):
        g = [int(x) for x in g if x >= 0]
        top = int(row[0])
        if not g or top in g:
            continue
        misses += 1
        sib += any((of_tool is None or of_tool[top] == of_tool[x]) and names.siblings(tool_names[top], tool_names[x])
                   for x in g)
    return (sib / misses if misses else 0.0), misses


def evaluate(ranker, config, q_emb, texts, gold, of_tool=None) -> dict:
    """Metrics of ``ranker`` with ``config`` on the queries (mean over queries; top-1 sibling misses)."""
    t0 = time.perf_counter()
    ids = np.asarray(ranker.with_config(config).rank(q_emb, k=K, q_texts=list(texts)))
    cost = time.perf_counter() - t0
    ranking, g = jnp.asarray(ids), jnp.asarray(gold)
    top1 = float(np.mean([int(r[0]) in set(int(x) for x in gg if x >= 0) for r, gg in zip(ids, np.asarray(gold))]))
    share, misses = sibling_miss_share(ids, gold, ranker.tool_names, of_tool)
    return {"ndcg@5": float(metrics.ndcg_at_k(ranking, g, k=5).mean()),
            "recall@10": float(metrics.recall_at_k(ranking, g, k=10).mean()),
            "complete@10": float(metrics.complete_at_k(ranking, g, k=10).mean()), "top1": top1,
            "top1_misses": misses, "sibling_miss_share": share, "queries": len(texts), "cost_s": round(cost, 2)}


def bench_ranker(bench, encoder, cache):
    emb = embed_texts(encoder, list(bench.tools.descriptions), cache)
    r = Ranker.from_benchmark(bench, emb, encoder_id=encoder.model_id, config=DEFAULT_REGISTRY_CONFIG)
    return dataclasses.replace(r, encoder=encoder)


def choose_weight(encoder, cache, data_dir) -> dict:
    """The training-split NDCG@5 of every weight of ``GRID`` and the chosen one (best mean, ties: smaller)."""
    table = {}
    for name in ("sealtools", "ultratool"):
        bench = load_benchmark(name, data_dir)
        ranker, qs = bench_ranker(bench, encoder, cache), bench.train
        q_emb = embed_texts(encoder, list(qs.texts), cache)
        for w in GRID:
            config = dataclasses.replace(DEFAULT_REGISTRY_CONFIG, name_evidence=w > 0, name_weight=w)
            table.setdefault(w, {})[f"{name} {bench.data_notes.get('train_split', 'train')}"] = evaluate(
                ranker, config, q_emb, qs.texts, qs.gold)["ndcg@5"]
            print(f"[choose] {name} w={w}: NDCG@5 {table[w][next(reversed(table[w]))]:.4f}", flush=True)
    mean = {w: float(np.mean(list(v.values()))) for w, v in table.items()}
    chosen = max(GRID, key=lambda w: (round(mean[w], 6), -w))
    return {"grid": list(GRID), "train_ndcg@5": {str(w): {**v, "mean": mean[w]} for w, v in table.items()},
            "chosen": chosen, "rule": "best mean NDCG@5 over Seal-Tools dev and UltraTool cv_train (ties: smaller)"}


def test_rows(weight: float, encoder, cache, data_dir) -> dict:
    off = dataclasses.replace(DEFAULT_REGISTRY_CONFIG, name_evidence=False)
    on = dataclasses.replace(off, name_evidence=True, name_weight=weight)
    out = {}
    root = resolve_data_dir(data_dir)
    bench = load_livemcpbench(root / "livemcpbench")
    ranker = Ranker.from_registry(list(bench.documents), encoder=encoder, cache=cache,
                                  server_texts=dict(zip(bench.servers.names, bench.servers.texts)))
    texts = list(bench.queries.texts)
    q_emb = ranker.encode_queries(texts)
    out["livemcpbench"] = {c: evaluate(ranker, cfg, q_emb, texts, bench.queries.gold, np.asarray(ranker.tool_server))
                           for c, cfg in (("off", off), ("on", on))}
    for name, split in (("sealtools", "test_out"), ("ultratool", "test")):
        b = load_benchmark(name, data_dir)
        ranker, qs = bench_ranker(b, encoder, cache), b.tests[split]
        q_emb = embed_texts(encoder, list(qs.texts), cache)
        out[f"{name} {split}"] = {c: evaluate(ranker, cfg, q_emb, qs.texts, qs.gold)
                                  for c, cfg in (("off", off), ("on", on))}
    return out


def machine() -> str:
    """The CPU model and core count (Linux), else the platform's words."""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    return f"{model}, {os.cpu_count()} cores, no GPU used, python {platform.python_version()}"


def table(rows: dict) -> str:
    lines = ["| benchmark | stage | NDCG@5 | Recall@10 | complete@10 | top-1 | top-1 misses | of them siblings |",
             "|---|---|---|---|---|---|---|---|"]
    for bench, by in rows.items():
        for c, m in by.items():
            lines.append(f"| {bench} | {c} | {m['ndcg@5']:.3f} | {m['recall@10']:.3f} | {m['complete@10']:.3f} | "
                         f"{m['top1']:.3f} | {m['top1_misses']} | {m['sibling_miss_share']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--weight", type=float, default=None, help="use this name_weight instead of choosing it")
    args = ap.parse_args()
    encoder, cache = load_encoder(), EmbeddingCache()
    t0 = time.perf_counter()
    choice = None if args.weight is not None else choose_weight(encoder, cache, args.data_dir)
    weight = args.weight if choice is None else choice["chosen"]
    rows = test_rows(weight, encoder, cache, args.data_dir)
    out = {"date": datetime.date.today().isoformat(), "machine": machine(), "encoder": encoder.model_id,
           "name_weight": weight,
           "name_window": DEFAULT_REGISTRY_CONFIG.name_window, "choice": choice, "rows": rows,
           "seconds": round(time.perf_counter() - t0, 1)}
    if choice is not None:
        print("name_weight chosen on training queries:", weight)
        for w, v in choice["train_ndcg@5"].items():
            print(f"  w={w}: " + ", ".join(f"{k} {x:.4f}" for k, x in v.items()))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
