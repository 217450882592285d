"""Latency of `riskrank-jax serve` as an agent sees it: `search_tools` through the official MCP SDK's client
over stdio, on a 5,000-tool registry, side by side with the `Ranker` called in-process on the same tools.

The registry is `benchmarks/rank_latency.py`'s synthetic one (the demo benchmark's tools and the MCP example,
repeated with variations), written to a temporary file and served with `riskrank-jax serve FILE`. Printed:

  start-up to the first answer   spawning the gateway process until the first search_tools result arrives,
                                 once with a cold embedding cache and once warm (the same --cache-dir);
  search_tools over stdio        p50 / p95 ms of --queries demo test requests, one at a time, after a warm-up
                                 pass (SDK client → JSON-RPC over stdio → gateway → Ranker → back);
  Ranker.rank_queries            p50 / p95 ms of the same requests in this process (no transport);
  search_tools, 50 concurrent    wall time for 50 requests sent at once.

    python benchmarks/serve_latency.py [--tools 5000] [--queries 60] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rank_latency import pct, synthetic_registry  # noqa: E402


async def session(path: Path, cache: str, queries: list[str], timed: bool) -> dict:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ, RISKRANK_CACHE=cache)
    params = StdioServerParameters(command=sys.executable, args=["-m", "riskrank_jax", "serve", str(path)], env=env)
    t0 = time.perf_counter()
    out = {}
    with open(os.devnull, "w") as devnull:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=devnull), read_timeout_seconds=600) as client:
            r = await client.call_tool("search_tools", {"query": queries[0], "k": 5})
            assert not r.is_error, r.content[0].text
            out["startup_s"] = time.perf_counter() - t0
            if not timed:
                return out
            for q in queries:  # warm-up pass
                await client.call_tool("search_tools", {"query": q, "k": 5})
            ms = []
            for q in queries:
                t1 = time.perf_counter()
                r = await client.call_tool("search_tools", {"query": q, "k": 5})
                ms.append((time.perf_counter() - t1) * 1e3)
                assert not r.is_error
            out["search_ms"] = ms
            t1 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for q in (queries * 2)[:50]:
                    tg.start_soon(client.call_tool, "search_tools", {"query": q, "k": 5})
            out["concurrent_50_s"] = time.perf_counter() - t1
    return out


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--cache-dir", default=None, help="embedding and compile cache (default: a temporary directory)")
    a = ap.parse_args()

    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.rank.ranker import Ranker

    queries = list(load_benchmark("demo").tests["test"].texts)[: a.queries]
    with tempfile.TemporaryDirectory() as tmp:
        cache = a.cache_dir or str(Path(tmp) / "cache")
        path = Path(tmp) / "tools.json"
        path.write_text(json.dumps(synthetic_registry(a.tools)))
        cold = anyio.run(session, path, cache, queries, False)
        warm = anyio.run(session, path, cache, queries, True)
        ranker = Ranker.from_registry([path], cache=EmbeddingCache(cache))
        for q in queries:
            ranker.rank_queries([q], k=5)
        direct = []
        for q in queries:
            t0 = time.perf_counter()
            ranker.rank_queries([q], k=5)
            direct.append((time.perf_counter() - t0) * 1e3)
    s = warm["search_ms"]
    print(f"registry: {a.tools} tools; {len(queries)} demo test requests; {os.cpu_count()} CPUs")
    print(f"start-up to the first answer: {cold['startup_s']:.1f} s with a cold embedding cache, "
          f"{warm['startup_s']:.1f} s warm (target ≤ 10 s warm: {'met' if warm['startup_s'] <= 10 else 'NOT met'})")
    print(f"{'path':<34} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'search_tools over stdio (SDK)':<34} {pct(s, 50):>8.1f} {pct(s, 95):>8.1f}")
    print(f"{'Ranker.rank_queries in-process':<34} {pct(direct, 50):>8.1f} {pct(direct, 95):>8.1f}")
    print(f"transport + gateway overhead at p50: {pct(s, 50) - pct(direct, 50):.1f} ms")
    print(f"50 concurrent search_tools: all answered in {warm['concurrent_50_s']:.2f} s")
    met = pct(s, 50) <= 15 and pct(s, 95) <= 30
    print(f"target search_tools p50 ≤ 15 ms, p95 ≤ 30 ms: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
