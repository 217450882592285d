"""What a fresh process pays to rank: the first and the later `Ranker.rank_queries` calls over registry files.

A CLI call or a newly started server is always a first call, so compilation counts as much as the kernels. In one
fresh process: build the zero-shot `Ranker.from_registry` (embeddings from the cache when present), rank one
request (its programs compile), a second request (warm), 16 requests (the 16-query bucket compiles), 16 more
(warm). Prints one JSON line per registry; run it once per code version to compare (e.g. from a `git worktree` of
the older commit, with PYTHONPATH pointing at it), each in its own process.

    python benchmarks/rank_first_call.py examples/mcp_tools.json [MORE.json ...] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: another tree can be measured


def measure(files: list[str]) -> dict:
    """Seconds of each step for one registry, in this process (which must not have ranked before)."""
    t0 = time.perf_counter()
    from riskrank_jax.rank.ranker import Ranker

    ranker = Ranker.from_registry(files)
    t1 = time.perf_counter()
    top = ranker.rank_queries(["delete the branch feature-x"], k=5)[0]
    t2 = time.perf_counter()
    ranker.rank_queries(["show me the recent commits"], k=5)
    t3 = time.perf_counter()
    ranker.rank_queries([f"read file number {i}" for i in range(16)], k=5)
    t4 = time.perf_counter()
    ranker.rank_queries([f"send an e-mail {i}" for i in range(16)], k=5)
    t5 = time.perf_counter()
    edges = 0 if ranker.graph is None else int(ranker.graph.senders.shape[0])
    return {"registry": files, "tools": ranker.size, "directed_edges": edges, "build_s": round(t1 - t0, 2),
            "first_request_s": round(t2 - t1, 2), "second_request_ms": round(1e3 * (t3 - t2), 1),
            "first_16_s": round(t4 - t3, 2), "next_16_ms": round(1e3 * (t5 - t4), 1),
            "top5": [h.name for h in top]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="registry files (one registry per file, each in a fresh process)")
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default: $RISKRANK_CACHE, ~/.cache)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # internal: measure in this process
    args = ap.parse_args(argv)
    if args.cache_dir:
        os.environ["RISKRANK_CACHE"] = args.cache_dir  # read when the Ranker opens its embedding cache
    if args.one:
        print(json.dumps(measure(args.files)))
        return 0
    for f in args.files:  # a fresh process per registry: nothing compiled before its first call
        r = subprocess.run([sys.executable, __file__, "--one", f], capture_output=True, text=True)
        print(r.stdout.strip() if r.returncode == 0 else f"{f}: failed\n{r.stderr[-2000:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
