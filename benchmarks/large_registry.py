"""Large registries: sharded top-k over a synthetic 100k / 1M-tool registry (random unit vectors, d = 384).

    PYTHONPATH=. python benchmarks/large_registry.py [--devices 4] [--sizes 100000 1000000] [--queries 64]
        [--k 10] [--scorers cosine head] [--tool-chunk 8192]

``--devices D`` forces D host devices (XLA_FLAGS=--xla_force_host_platform_device_count=D, set before jax
is imported) on a CPU; on an accelerator the real devices are used.  Per size and scorer it prints the time
per query batch (min of --repeats after one warm-up call that compiles) and the per-device memory:

  per-device (XLA)  argument + output + temporary bytes of the compiled per-device program, from
                    ``compiled.memory_analysis()`` (riskrank_jax.rank.sharded.per_device_bytes): the device's
                    registry shard, the replicated queries / parameters, and the scan's working set;
  process peak RSS  ru_maxrss of this process so far (all forced host devices share it, and it includes the
                    host copy of the synthetic registry).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--scorers", nargs="+", default=["cosine", "head"], choices=["cosine", "head"])
    ap.add_argument("--tool-chunk", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=3)
    return ap.parse_args()


def unit_rows(rng, n, d, block=1 << 16):
    import numpy as np

    out = np.empty((n, d), np.float32)
    for s in range(0, n, block):  # float32 blocks: no float64 copy of the whole registry
        x = rng.standard_normal((min(block, n - s), d), dtype=np.float32)
        out[s:s + x.shape[0]] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def main():
    args = parse()
    if args.devices > 1 and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={args.devices}").strip()
    import jax
    import numpy as np

    from riskrank_jax.model import heads as model
    from riskrank_jax.rank.sharded import Scorer, per_device_bytes, shard_registry, sharded_topk, tool_mesh

    devices = jax.devices()[: args.devices] if jax.devices()[0].platform == "cpu" else jax.devices()
    mesh = tool_mesh(devices)
    rng = np.random.default_rng(0)
    q = unit_rows(rng, args.queries, args.dim)
    params = model.init_params(jax.random.key(0), args.dim)
    print(f"jax {jax.__version__}, {len(devices)} x {devices[0].platform} device(s) on {os.cpu_count()} CPUs; "
          f"Q={args.queries} queries per batch, d={args.dim}, k={args.k}, tool_chunk={args.tool_chunk}")
    print(f"  {'tools':>9} {'scorer':<7} {'s/batch':>8} {'ms/query':>9} {'Mpairs/s':>9} {'per-device MiB':>15} "
          f"{'(shard MiB)':>11} {'peak RSS GiB':>13}")
    for n in args.sizes:
        t = unit_rows(rng, n, args.dim)
        risk = rng.integers(1, 6, n).astype(np.float32) / 5
        reg = shard_registry(t, mesh, risk=risk, tool_chunk=args.tool_chunk)
        del t
        shard_mib = reg.emb.addressable_shards[0].data.nbytes / 2 ** 20
        for kind in args.scorers:
            sc = Scorer(kind, lam=0.1, params=params if kind == "head" else None)
            jax.block_until_ready(sharded_topk(q, reg, sc, args.k))
            best = float("inf")
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                jax.block_until_ready(sharded_topk(q, reg, sc, args.k))
                best = min(best, time.perf_counter() - t0)
            mem = per_device_bytes(q, reg, sc, args.k)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
            print(f"  {n:>9,} {kind:<7} {best:8.3f} {best / args.queries * 1e3:9.2f} "
                  f"{n * args.queries / best / 1e6:9.1f} {mem['total'] / 2 ** 20:15.1f} "
                  f"{shard_mib:11.1f} {rss:13.2f}")
            sys.stdout.flush()
        del reg


if __name__ == "__main__":
    main()
