"""Latency of `Ranker.rank_queries`, one request at a time, over a synthetic 5,000-tool registry.

The registry is the demo benchmark's tools and the shipped MCP example, repeated with variations (a
namespace suffix in the name, a short context phrase in the description) up to --tools entries, written
as a plain JSON tool list to a temporary file and loaded with `Ranker.from_registry` (default zero-shot
config: hybrid BM25 + cosine, −λ·risk, graph smoothing). After a warm-up pass, each of --queries demo test
requests is ranked alone; the time includes encoding the request. Printed side by side in the same run:
the default, the default without the graph (α = 0), the dense first stage alone, encoding alone (the compact
batch `Ranker.encode_queries` runs, and the full default batch it ran before) and the default given an
already embedded request (`Ranker.rank`), as p50 / p95 in ms and as ratios to encoding; peak RSS
(ru_maxrss) after building and after ranking; and the wall time of `riskrank-jax rank` on the README's
example (examples/mcp_tools.json, one request) in fresh processes with warm caches (--cli-runs, 0: skip).

    python benchmarks/rank_latency.py [--tools 5000] [--queries 60] [--cache-dir DIR] [--cli-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONTEXTS = ("for the team workspace", "in the staging environment", "for customer accounts", "on the backup server",
            "for the mobile app", "in the analytics project", "for the billing service", "on the build machine",
            "for personal use", "in the shared drive", "for the support desk", "in the research cluster")


def base_tools() -> list[dict]:
    from riskrank_jax.data import demo_dir
    from riskrank_jax.data.jsonl import read_jsonl
    from riskrank_jax.registry import load_registry

    out = [{"name": r["api_name"], "description": r["api_description"]} for _, r in read_jsonl(demo_dir() / "tool.jsonl")]
    mcp = load_registry([Path(__file__).resolve().parent.parent / "examples" / "mcp_tools.json"])
    out += [{"name": t.raw_name, "description": t.description} for t in mcp.tools]
    return out


def synthetic_registry(n: int) -> list[dict]:
    """n tools: the base tools, then variants named `<name>_<i>` with a context phrase appended."""
    base, out, i = base_tools(), [], 0
    while len(out) < n:
        for t in base:
            if len(out) == n:
                break
            if i == 0:
                out.append(dict(t))
            else:
                ctx = CONTEXTS[(i + len(out)) % len(CONTEXTS)]
                out.append({"name": f"{t['name']}_{i}", "description": f"{t['description'].rstrip('.')} {ctx}."})
        i += 1
    return out


def timed(fns: dict, queries) -> dict[str, list[float]]:
    """ms per call of each fn(q), each query once per fn, after a warm-up pass over all of them (every
    encoder length bucket and jitted program compiled). The fns take turns query by query, so a change in
    the machine's load hits them alike."""
    for fn in fns.values():
        for q in queries:
            fn(q)
    out = {name: [] for name in fns}
    for q in queries:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(q)
            out[name].append((time.perf_counter() - t0) * 1e3)
    return out


def cli_wall(runs: int, cache_dir: str) -> list[float]:
    """Seconds of wall time of each of ``runs`` warm `riskrank-jax rank examples/mcp_tools.json --query ...`
    calls, each a fresh process, after one call that fills the embedding and compilation caches."""
    cmd = [sys.executable, "-m", "riskrank_jax", "rank", str(REPO / "examples" / "mcp_tools.json"),
           "--query", "show me the recent commits"]
    env = dict(os.environ, RISKRANK_CACHE=cache_dir,
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        if i:
            out.append(time.perf_counter() - t0)
    return out


def pct(xs, p):
    import numpy as np

    return float(np.percentile(np.asarray(xs), p))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=60, help="distinct demo test requests timed (<= 149)")
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default: a temporary directory)")
    ap.add_argument("--cli-runs", type=int, default=3, help="warm `riskrank-jax rank` calls timed (0: none)")
    a = ap.parse_args()

    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig, Ranker

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tools.json"
        path.write_text(json.dumps(synthetic_registry(a.tools)))
        t0 = time.perf_counter()
        ranker = Ranker.from_registry([path], cache=EmbeddingCache(a.cache_dir or tmp))
        build_s = time.perf_counter() - t0
    rss_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    texts = list(load_benchmark("demo").tests["test"].texts)
    queries = texts[: a.queries]
    variants = {
        "default (hybrid, λ·risk, graph)": ranker,
        "no graph (α = 0)": ranker.with_config(RankConfig(**{**DEFAULT_REGISTRY_CONFIG.__dict__, "alpha": 0.0})),
        "dense first stage, no graph": ranker.with_config(RankConfig(lam=0.1, first_stage="dense")),
    }
    emb = {q: ranker.encode_queries([q]) for q in queries}
    enc = ranker.query_encoder()
    fns = {"encode request only": lambda q: ranker.encode_queries([q]),
           "encode request, full batch": lambda q: enc.encode([q], batch_size=1, progress=False)}
    fns.update({name: (lambda q, r=r: r.rank_queries([q], k=5)) for name, r in variants.items()})
    fns["default, request already embedded"] = lambda q: ranker.rank(emb[q], k=5, q_texts=[q])
    rows = timed(fns, queries)
    rss_end = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_edges = 0 if ranker.graph is None else ranker.graph.n_edges
    print(f"registry: {ranker.size} tools, graph {n_edges} directed edges; built in {build_s:.1f}s "
          f"(tool texts embedded, or read from --cache-dir); {os.cpu_count()} CPUs, shared with other work")
    enc_p50 = pct(rows["encode request only"], 50)
    print(f"{'path':<34} {'p50 ms':>8} {'p95 ms':>8} {'p50 / encode':>13}")
    for name, xs in rows.items():
        print(f"{name:<34} {pct(xs, 50):>8.1f} {pct(xs, 95):>8.1f} {pct(xs, 50) / enc_p50:>13.2f}")
    print(f"peak RSS: {rss0:.0f} MiB at start, {rss_build:.0f} MiB after building, {rss_end:.0f} MiB after ranking")
    print(f"target p50 ≤ 8 ms for the default: {'met' if pct(rows[next(iter(variants))], 50) <= 8 else 'NOT met'}")
    if a.cli_runs > 0:
        with tempfile.TemporaryDirectory() as tmp:
            walls = cli_wall(a.cli_runs, a.cache_dir or tmp)
        print(f"riskrank-jax rank examples/mcp_tools.json (1 request), warm caches, fresh process: median "
              f"{pct(walls, 50):.2f} s over {len(walls)} runs ({', '.join(f'{w:.2f}' for w in walls)}); target ≤ 2 s")


if __name__ == "__main__":
    main()
