"""The name stage's cost per request: `Ranker.rank_queries` with the default config (the stage on) and without the
stage, side by side in one run, on `benchmarks/rank_latency.py`'s synthetic registry (5,000 tools by default).

Requests alternate between the two rankers (same prepared arrays, same encoder), one at a time after a warm-up
pass, so machine drift falls on both. Prints p50 / p95 ms of each and the difference (docs/performance.md).

    python benchmarks/name_stage.py [--tools 5000] [--rounds 8]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rank_latency import pct, synthetic_registry  # noqa: E402

from riskrank_jax.encode.embedding_cache import EmbeddingCache  # noqa: E402
from riskrank_jax.encode.encoder import load_encoder  # noqa: E402
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker  # noqa: E402

REQUESTS = ("read the config file", "delete the branch feature-x", "list my unread e-mails",
            "send the report to alice", "convert speech to text", "show me the recent commits",
            "refund the last payment", "create a new table")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=8, help="passes over the 8 requests")
    args = ap.parse_args()
    ranker = Ranker.from_registry(synthetic_registry(args.tools), encoder=load_encoder(), cache=EmbeddingCache())
    rankers = {"with the name stage": ranker.with_config(DEFAULT_REGISTRY_CONFIG),
               "without": ranker.with_config(dataclasses.replace(DEFAULT_REGISTRY_CONFIG, name_evidence=False))}
    for r in rankers.values():  # warm-up: every program compiled, every cache filled
        for q in REQUESTS:
            r.rank_queries([q], k=5)
    ms = {name: [] for name in rankers}
    for _ in range(args.rounds):
        for q in REQUESTS:
            for name, r in rankers.items():
                t0 = time.perf_counter()
                r.rank_queries([q], k=5)
                ms[name].append(1000 * (time.perf_counter() - t0))
    for name, xs in ms.items():
        print(f"{name:>20}: p50 {pct(xs, 50):.1f} ms, p95 {pct(xs, 95):.1f} ms ({len(xs)} requests)")
    on, off = (pct(xs, 50) for xs in ms.values())
    print(f"difference at p50: {on - off:+.1f} ms ({args.tools} tools)")


if __name__ == "__main__":
    main()
