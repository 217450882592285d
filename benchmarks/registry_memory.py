"""Peak memory and build time of `Ranker.from_registry` over registries of 5,000 to 50,000 near-identical tools.

The registry: the demo benchmark's tools and the shipped MCP example (benchmarks/rank_latency.py's base tools,
about 300), then generated tools up to N ("Update a customer record in the shared database <one of 12
contexts> (replica i): overwrites ..."): every pair of those has cosine > 0.65 and shares the write permission
category, the worst case for the ToolGraph's semantic and permission edges (the paper's unbounded graph has
about N² / 2 pairs). Per size and graph, a fresh process builds `Ranker.from_registry` (default zero-shot
config: hybrid first stage, λ·risk, graph smoothing) and ranks two requests one at a time (`rank_queries`,
encoding included; the first also builds the BM25 index and compiles). Printed: build wall time, the embedding
time within it and the texts encoded (0 when --cache-dir already holds them), graph pairs and the largest
degree, the process's peak RSS (ru_maxrss) after building and after the requests, and each request's latency.

    python benchmarks/registry_memory.py [--sizes 5000 10000 20000 50000] [--unbounded-max 5000]
        [--cache-dir /tmp/riskrank-registry-memory] [--rss-limit-gib 8] [--json]

"bounded" is the registry graph (mutual top-32 per tool and edge type, `rank.registry_inputs`); "unbounded" is
the paper's graph over the same registry, built only up to --unbounded-max tools (its memory grows as N²);
a process whose RSS passes --rss-limit-gib is killed and reported. Embedding tens of thousands of texts on a
CPU is the slowest part of a first run: the embedding cache under --cache-dir keeps them for the next run (the
sizes share their first tools, so a larger size reuses a smaller one's).
Figures: docs/performance.md, "Large registries: memory".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUERY = "delete the branch feature-x in the staging environment"
SECOND_QUERY = "list my unread e-mails for the support desk"


def near_identical_registry(n: int) -> list[dict]:
    """n tools: rank_latency's base tools (demo + MCP example), then near-identical ones (the first k of
    near_identical_registry(n) are near_identical_registry(k), so sizes share their embeddings)."""
    from rank_latency import CONTEXTS, base_tools

    out = base_tools()[:n]
    for i in range(n - len(out)):
        out.append({"name": f"update_customer_record_{i}",
                    "description": f"Update a customer record in the shared database {CONTEXTS[i % len(CONTEXTS)]} "
                                   f"(replica {i}): overwrites the given fields, deletes cleared ones and returns "
                                   "the saved record."})
    return out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(n: int, graph: str, cache_dir: str) -> dict:
    """Build and query one ranker in this process; the measurements as a dict."""
    import numpy as np

    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.rank import registry_inputs
    from riskrank_jax.rank.ranker import Ranker

    if graph == "unbounded":  # the paper's graph: from_registry looks zero_shot_graph up when it runs
        registry_inputs.zero_shot_graph = functools.partial(registry_inputs.zero_shot_graph, max_neighbours=None)
    rss_start = peak_rss_mib()
    cache = EmbeddingCache(cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tools.json"
        path.write_text(json.dumps(near_identical_registry(n)))
        t0 = time.perf_counter()
        ranker = Ranker.from_registry([path], cache=cache)
        build_s = time.perf_counter() - t0
    stats = cache.last_stats
    rss_build = peak_rss_mib()
    lat, top = [], []
    for q in (QUERY, SECOND_QUERY):
        t0 = time.perf_counter()
        hits = ranker.rank_queries([q], k=5)[0]
        lat.append(time.perf_counter() - t0)
        top.append(hits[0].name)
    deg = 0
    if ranker.graph is not None and ranker.graph.n_edges:
        deg = int(np.bincount(ranker.graph.receivers, minlength=ranker.size).max())
    return {"tools": ranker.size, "graph": graph, "build_s": round(build_s, 1),
            "embed_s": round(stats.encode_seconds, 1) if stats else None, "encoded": stats.misses if stats else None,
            "edges": 0 if ranker.graph is None else ranker.graph.n_edges // 2, "max_degree": deg,
            "rss_start_mib": round(rss_start), "rss_build_mib": round(rss_build), "rss_end_mib": round(peak_rss_mib()),
            "first_query_ms": round(lat[0] * 1e3), "second_query_ms": round(lat[1] * 1e3), "top1": top}


def _rss_mib(pid: int) -> float:
    """Current resident set of a process (VmRSS), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_one(n: int, graph: str, cache_dir: str, rss_limit_mib: float) -> dict:
    """`child` in a fresh process (its peak RSS is its own), killed when its RSS passes rss_limit_mib (so an
    unbounded graph cannot take the machine's memory); a failed or killed process is reported, not raised."""
    cmd = [sys.executable, __file__, "--child", str(n), "--graph", graph, "--cache-dir", cache_dir]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        peak = 0.0
        while p.poll() is None:
            peak = max(peak, _rss_mib(p.pid))
            if peak > rss_limit_mib:
                p.kill()
                p.wait()
                return {"tools": n, "graph": graph, "error": f"killed: RSS above {rss_limit_mib:.0f} MiB after "
                        f"{time.perf_counter() - t0:.0f} s"}
            time.sleep(0.2)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if p.returncode != 0 or not stdout.strip():
        tail = (stderr or stdout).strip().splitlines()[-3:]
        return {"tools": n, "graph": graph, "error": f"exit {p.returncode}: {' | '.join(tail)}",
                "wall_s": round(time.perf_counter() - t0, 1)}
    return json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 50000])
    ap.add_argument("--unbounded-max", type=int, default=5000,
                    help="also build the paper's unbounded graph for sizes up to this (default 5000)")
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "riskrank-registry-memory"),
                    help="embedding cache, kept between runs (default: under the temporary directory)")
    ap.add_argument("--rss-limit-gib", type=float, default=8.0,
                    help="kill a measurement whose process holds more than this (default 8 GiB)")
    ap.add_argument("--json", action="store_true", help="print one JSON object per measurement")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--graph", default="bounded", choices=["bounded", "unbounded"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, a.graph, a.cache_dir)))
        return
    print(f"{os.cpu_count()} CPUs (shared with other work); embedding cache {a.cache_dir}", flush=True)
    cols = ("tools", "graph", "build_s", "embed_s", "encoded", "edges", "max_degree", "rss_build_mib",
            "rss_end_mib", "first_query_ms", "second_query_ms")
    if not a.json:
        print(" | ".join(cols), flush=True)
    for n in a.sizes:
        for graph in ("bounded", "unbounded") if n <= a.unbounded_max else ("bounded",):
            row = run_one(n, graph, a.cache_dir, a.rss_limit_gib * 1024)
            if a.json or "error" in row:
                print(json.dumps(row), flush=True)
            else:
                print(" | ".join(str(row.get(c)) for c in cols), flush=True)


if __name__ == "__main__":
    main()
