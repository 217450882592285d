"""The encoders `--encoder` takes, zero-shot, side by side: what each pays on real servers and what it costs.

For each encoder name (``encode.families``: minilm, mpnet, use, e5 and fusions such as minilm+use):

* LiveMCPBench (70 real MCP servers' tools, 94 tasks): the rank default (``Ranker.from_registry``,
  ``DEFAULT_REGISTRY_CONFIG``, as ``experiments.livemcp`` and `riskrank-jax rank` build it), the same without the
  name stage, and dense cosine alone (the view the encoders were first compared on);
* the held-out sibling set (experiments/siblings: 200 requests over 169 tools of 8 servers, never used for a
  choice): the rank default, top-1 and NDCG@5 (``scripts/evaluate_siblings.py``'s evaluation);
* with ``--benchmarks``, Seal-Tools test_out and UltraTool test (``Ranker.from_benchmark``, the same config);
* the cost: texts per second encoding LiveMCPBench's tool texts from a cold cache (after one warm-up call), and
  the encoder's width.

No figure here chooses anything: the encoders' settings are their published ones, and a fusion is the mean of
its parts' cosines (``encode.families.FusedEncoder``).

Usage: python scripts/evaluate_encoders.py [--encoders minilm,use,minilm+use] [--benchmarks] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import evaluate_siblings  # noqa: E402
import name_evidence_eval  # noqa: E402

from riskrank_jax.data import load_benchmark  # noqa: E402
from riskrank_jax.data.livemcpbench import load_livemcpbench  # noqa: E402
from riskrank_jax.encode.embedding_cache import EmbeddingCache  # noqa: E402
from riskrank_jax.encode.families import load_encoder  # noqa: E402
from riskrank_jax.paths import resolve_data_dir  # noqa: E402
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker  # noqa: E402

DENSE = dataclasses.replace(DEFAULT_REGISTRY_CONFIG, first_stage="dense", lam=0.0, alpha=0.0, server_context=False,
                            intent=False, name_evidence=False)
NAMES_OFF = dataclasses.replace(DEFAULT_REGISTRY_CONFIG, name_evidence=False)


def speed(encoder, texts) -> float:
    """Texts per second of ``encoder.encode`` on ``texts`` (a warm-up call on a few first)."""
    encoder.encode(texts[:8], progress=False)
    t0 = time.perf_counter()
    encoder.encode(texts, progress=False)
    return len(texts) / (time.perf_counter() - t0)


def livemcp_rows(encoder, cache, data_dir) -> tuple[dict, list[str]]:
    bench = load_livemcpbench(resolve_data_dir(data_dir) / "livemcpbench")
    ranker = Ranker.from_registry(list(bench.documents), encoder=encoder, cache=cache,
                                  server_texts=dict(zip(bench.servers.names, bench.servers.texts)))
    texts = list(bench.queries.texts)
    q_emb = ranker.encode_queries(texts)
    servers = np.asarray(ranker.tool_server)
    rows = {label: name_evidence_eval.evaluate(ranker, cfg, q_emb, texts, bench.queries.gold, servers)
            for label, cfg in (("default", DEFAULT_REGISTRY_CONFIG), ("names off", NAMES_OFF), ("dense", DENSE))}
    return rows, list(ranker.tool_texts)


def sibling_row(encoder_name, cache_dir) -> dict:
    servers, requests = evaluate_siblings.load_set(evaluate_siblings.SET_DIR)
    ranker, ids = evaluate_siblings.build_ranker(servers, DEFAULT_REGISTRY_CONFIG, cache_dir, encoder_name)
    s = evaluate_siblings.evaluate(ranker, ids, requests)["all"]
    return {k: s[k] for k in ("top1", "ndcg@5", "recall@5", "top1_misses", "sibling_share_of_misses")}


def benchmark_rows(encoder, cache, data_dir) -> dict:
    out = {}
    for name, split in (("sealtools", "test_out"), ("ultratool", "test")):
        b = load_benchmark(name, data_dir)
        ranker, qs = name_evidence_eval.bench_ranker(b, encoder, cache), b.tests[split]
        q_emb = ranker.encode_queries(list(qs.texts))
        out[f"{name} {split}"] = name_evidence_eval.evaluate(ranker, DEFAULT_REGISTRY_CONFIG, q_emb, qs.texts,
                                                             qs.gold)
    return out


def table(results: dict) -> str:
    lines = ["| encoder | dim | texts/s | LiveMCPBench NDCG@5 (default / names off / dense) | complete@10 (default) "
             "| siblings top-1 | siblings NDCG@5 |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        lm = r["livemcpbench"]
        lines.append(f"| {name} | {r['dim']} | {r['texts_per_s']:.0f} | {lm['default']['ndcg@5']:.3f} / "
                     f"{lm['names off']['ndcg@5']:.3f} / {lm['dense']['ndcg@5']:.3f} | "
                     f"{lm['default']['complete@10']:.3f} | {r['siblings']['top1']:.3f} | "
                     f"{r['siblings']['ndcg@5']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoders", default="minilm,use,mpnet,e5,minilm+use,mpnet+use",
                    help="comma-separated encoder names (default: %(default)s)")
    ap.add_argument("--benchmarks", action="store_true", help="also Seal-Tools test_out and UltraTool test")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default: the user's)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    cache = EmbeddingCache(args.cache_dir)
    results = {}
    for name in args.encoders.split(","):
        t0 = time.perf_counter()
        encoder = load_encoder(name, cache_dir=args.cache_dir)
        load_s = time.perf_counter() - t0
        rows, tool_texts = livemcp_rows(encoder, cache, args.data_dir)
        tps = speed(encoder, tool_texts)
        results[name] = {"model_id": encoder.model_id, "dim": int(encoder.dim), "load_s": round(load_s, 1),
                         "texts_per_s": round(tps, 1), "livemcpbench": rows,
                         "siblings": sibling_row(name, args.cache_dir)}
        if args.benchmarks:
            results[name]["benchmarks"] = benchmark_rows(encoder, cache, args.data_dir)
        print(f"[{name}] " + json.dumps({k: v for k, v in results[name].items() if k != "model_id"}), flush=True)
    print(table(results))
    if args.json:
        out = {"date": datetime.date.today().isoformat(), "machine": name_evidence_eval.machine(),
               "results": results}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
