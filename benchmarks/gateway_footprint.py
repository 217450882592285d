"""Footprint of one `riskrank-jax serve` replica: its memory (RSS) over a 1,000-tool registry and its start-up to
the first answered `search_tools` with warm caches, through the official MCP SDK's client over stdio.

The registry is `benchmarks/rank_latency.py`'s synthetic one (the demo benchmark's tools and the MCP example,
repeated with variations) written to a file the gateway lists from its config's ``registries`` (searchable, not
callable). One run:

  warm-up             one gateway started and asked one search, so the embedding cache and the XLA compile
                      cache under --cache-dir hold everything the next starts need (skipped with --no-warm-up
                      when --cache-dir is already filled);
  replicas            --starts gateways, one after the other: each timed from spawning the process to the first
                      answered search_tools, then asked --searches requests (demo test requests, one at a time),
                      then its /proc/PID/status read: VmRSS (resident now), VmHWM (peak resident), RssAnon,
                      RssFile, threads;
  breakdown           a fresh process walks the gateway's path stage by stage (imports, the JAX backend, the
                      encoder, the catalog, the warm-up requests, --searches searches) and reports VmRSS after
                      each, and (a second process) the Python heap tracemalloc sees after each; plus the modules
                      `python -X importtime` finds slowest on `import riskrank_jax.serve.gateway`.

    python benchmarks/gateway_footprint.py [--tools 1000] [--searches 100] [--starts 3] [--cache-dir DIR]
        [--json OUT.json] [--env NAME=VALUE ...]

--env sets a variable for the gateways and the breakdown (e.g. XLA_FLAGS) to compare settings.
Figures: docs/performance.md, "Gateway replica footprint".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rank_latency import pct, synthetic_registry  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from local_ports import child_pid  # noqa: E402

STATUS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads")


def proc_status(pid: int | str = "self") -> dict:
    """MiB of VmRSS, VmHWM, RssAnon, RssFile (and the thread count) of a process, from /proc/PID/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in STATUS_KEYS:
            n = int(value.split()[0])
            out[key] = n if key == "Threads" else round(n / 1024, 1)
    return out


async def replica(config: Path, env: dict, queries: list[str], searches: int) -> dict:
    """Start one gateway over stdio; seconds to its first answered search_tools; its /proc status after
    ``searches`` more searches, with their latencies."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "riskrank_jax", "serve", "--config",
                                                                 str(config)], env=env, cwd=str(config.parent))
    out = {}
    with open(os.devnull, "w") as devnull:
        t0 = time.perf_counter()
        async with Client(stdio_client(params, errlog=devnull), read_timeout_seconds=600) as client:
            r = await client.call_tool("search_tools", {"query": queries[0], "k": 5})
            out["startup_s"] = round(time.perf_counter() - t0, 3)
            assert not r.is_error, r.content[0].text
            pid = child_pid(os.getpid(), str(config))
            out["after_first_search"] = proc_status(pid)
            ms = []
            for i in range(searches):
                t1 = time.perf_counter()
                r = await client.call_tool("search_tools", {"query": queries[i % len(queries)], "k": 5})
                ms.append((time.perf_counter() - t1) * 1e3)
                assert not r.is_error
            out["after_searches"] = proc_status(pid)
            if ms:
                out["search_ms_p50"], out["search_ms_p95"] = round(pct(ms, 50), 2), round(pct(ms, 95), 2)
    return out


# The breakdown: the gateway's path stage by stage in a fresh process (argv: config path, searches, tracemalloc).
STAGES = r'''
import json, sys, time
from pathlib import Path
cfg, searches, traced = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if traced:
    import tracemalloc
    tracemalloc.start()
rows = []
def mark(stage):
    d = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            d[k] = round(int(v.split()[0]) / 1024, 1)
    if traced:
        d["py_heap"] = round(tracemalloc.get_traced_memory()[0] / 2 ** 20, 1)
    d["modules"] = len(sys.modules)
    d["big"] = sorted(m for m in ("jax", "transformers", "flax", "optax", "orbax", "torch", "matplotlib", "bm25s",
                                  "scipy", "sqlglot", "uvicorn", "mcp", "tokenizers") if m in sys.modules)
    rows.append([stage, d])
mark("interpreter")
import numpy
mark("import numpy")
import jax
mark("import jax")
jax.devices()
mark("jax backend (CPU client)")
import tokenizers, safetensors
mark("import tokenizers, safetensors")
import mcp.server.mcpserver, mcp.client, uvicorn, starlette.applications
mark("import mcp SDK, uvicorn, starlette")
import riskrank_jax.serve.gateway as G
mark("import riskrank_jax.serve.gateway (the rest)")
from riskrank_jax.serve.config import read_config
from riskrank_jax.serve.catalog import build_catalog, search
from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.runtime import compile_cache
s = read_config(cfg)
compile_cache.enable(resolve_cache_dir(s.runtime.cache_dir))
enc = load_encoder(s.rank.encoder)
mark("encoder loaded (weights)")
cat = build_catalog([], s.registries, s.rank, enc, EmbeddingCache(s.runtime.cache_dir), s.policy.trusted_servers)
mark("catalog built (%d tools, embeddings from the cache)" % cat.ranker.size)
for words in G.WARM_UP_WORDS:
    cat.ranker.encode_queries([" ".join(["tool"] * words)])
search(cat, "warm up", 5, s.policy)
mark("warm-up requests (programs from the XLA cache)")
for i in range(searches):
    search(cat, "delete the branch feature-x in the staging environment %d" % i, 5, s.policy)
mark("after %d searches" % searches)
print(json.dumps(rows))
'''


def breakdown(config: Path, env: dict, searches: int) -> dict:
    """RSS (and, in a second process, the tracemalloc heap) after each stage of the gateway's path."""
    out = {}
    for traced in ("0", "1"):
        r = subprocess.run([sys.executable, "-c", STAGES, str(config), str(searches), traced], env=env,
                           cwd=config.parent, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        out["tracemalloc" if traced == "1" else "rss"] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def import_times(env: dict, cwd: Path, top: int = 15) -> list:
    """The ``top`` top-level packages with the most cumulative import time (ms) on the gateway's import path
    (`python -X importtime -c "import riskrank_jax.serve.gateway"`)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import riskrank_jax.serve.gateway"], env=env,
                       cwd=cwd, capture_output=True, text=True, timeout=300)
    by_root = {}
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        root = parts[2].strip().split(".")[0]
        if root != "riskrank_jax":
            by_root[root] = max(by_root.get(root, 0), int(parts[1]))  # the largest cumulative entry per package
    return sorted(((k, round(v / 1e3)) for k, v in by_root.items()), key=lambda x: -x[1])[:top]


def package_dir(env: dict, cwd: Path) -> str:
    """The riskrank_jax package the gateways import (--env PYTHONPATH=DIR: another checkout's)."""
    r = subprocess.run([sys.executable, "-c", "import riskrank_jax; print(riskrank_jax.__file__)"], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    return str(Path(r.stdout.strip()).parent)


def write_inputs(tmp: Path, tools: int, cache: str) -> Path:
    reg = tmp / "tools.json"
    reg.write_text(json.dumps(synthetic_registry(tools)))
    cfg = tmp / "gateway.json"
    cfg.write_text(json.dumps({"mcpServers": {}, "registries": [str(reg)],
                               "runtime": {"cache_dir": cache, "state_dir": str(tmp / "state")}}))
    return cfg


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--starts", type=int, default=3, help="replicas started one after the other (median start-up)")
    ap.add_argument("--cache-dir", default=None, help="embedding and compile cache (default: a temporary directory)")
    ap.add_argument("--no-warm-up", action="store_true", help="--cache-dir is already filled: no warm-up start")
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE")
    ap.add_argument("--json", default=None, metavar="OUT", help="also write the figures as JSON")
    return ap.parse_args()


def main() -> None:
    import anyio

    from riskrank_jax.data import load_benchmark

    a = parse()
    queries = list(load_benchmark("demo").tests["test"].texts)
    with tempfile.TemporaryDirectory() as tmp:
        cache = a.cache_dir or str(Path(tmp) / "cache")
        cfg = write_inputs(Path(tmp), a.tools, cache)
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **dict(kv.split("=", 1) for kv in a.env)}  # --env PYTHONPATH=DIR: another checkout's package
        if not a.no_warm_up:
            anyio.run(replica, cfg, env, queries, 0)
        runs = [anyio.run(replica, cfg, env, queries, a.searches) for _ in range(a.starts)]
        out = {"conditions": {"tools": a.tools, "searches": a.searches, "starts": a.starts,
                              "caches": "warm (filled by a previous gateway)" if not a.no_warm_up else "given",
                              "cpus": os.cpu_count(), "python": sys.version.split()[0], "env": a.env,
                              "transport": "stdio, mcp SDK client", "package": package_dir(env, cfg.parent)},
               "replicas": runs,
               "startup_s_median": statistics.median(r["startup_s"] for r in runs)}
        if not a.no_breakdown:
            out["breakdown"] = breakdown(cfg, env, a.searches)
            out["import_ms"] = import_times(env, cfg.parent)
    report(out)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


def report(out: dict) -> None:
    c = out["conditions"]
    print(f"riskrank_jax from {c['package']}")
    print(f"gateway replica: {c['tools']} tools from a registry file; caches {c['caches']}; {c['cpus']} CPUs; "
          f"{c['transport']}; env {c['env'] or 'default'}")
    print(f"{'start':>5} {'first answer s':>15} {'VmRSS MiB':>10} {'VmHWM MiB':>10} {'RssAnon':>8} {'RssFile':>8} "
          f"{'threads':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for i, r in enumerate(out["replicas"], 1):
        s = r["after_searches"]
        print(f"{i:>5} {r['startup_s']:>15.2f} {s['VmRSS']:>10.1f} {s['VmHWM']:>10.1f} {s['RssAnon']:>8.1f} "
              f"{s['RssFile']:>8.1f} {s['Threads']:>7} {r['search_ms_p50']:>7.1f} {r['search_ms_p95']:>7.1f}")
    worst = max(r["after_searches"]["VmHWM"] for r in out["replicas"])
    print(f"median start-up {out['startup_s_median']:.2f} s (target ≤ 5 s: "
          f"{'met' if out['startup_s_median'] <= 5 else 'NOT met'}); peak RSS {worst:.0f} MiB (target ≤ 300 MiB: "
          f"{'met' if worst <= 300 else 'NOT met'})")
    if "breakdown" in out:
        heap = dict((s, d) for s, d in out["breakdown"]["tracemalloc"])
        print(f"{'stage (one process, in order)':<52} {'VmRSS':>7} {'+':>6} {'py heap':>8} {'modules':>8}")
        prev = 0.0
        for stage, d in out["breakdown"]["rss"]:
            print(f"{stage:<52} {d['VmRSS']:>7.1f} {d['VmRSS'] - prev:>+6.0f} "
                  f"{heap.get(stage, {}).get('py_heap', float('nan')):>8.1f} {d['modules']:>8}")
            prev = d["VmRSS"]
        print("loaded at the end:", ", ".join(out["breakdown"]["rss"][-1][1]["big"]))
        print("slowest imports (cumulative ms):", ", ".join(f"{k} {v}" for k, v in out["import_ms"]))


if __name__ == "__main__":
    main()
