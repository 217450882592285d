"""Full-pool scoring: model.relevance_full (concat head) vs its two former formulations, side by side, with a roofline.

    PYTHONPATH=. python benchmarks/scoring.py [--queries 1000] [--tools 2032] [--hidden 64] [--repeats 5] [--real]
    PYTHONPATH=. python benchmarks/scoring.py --interact [--queries 128] [--tools 4076]

--interact times the interaction head (core_plus) instead: its query step capped by ``model.interact_chunk``
(current) against 128 queries per step (what the sweep's scoring used before), same inputs, one interleaved loop,
and checks the two outputs are identical. Figures: docs/performance.md, "Scoring".

"former" (the release-style kernel): per chunk of queries (2**24 / (N h) of them) the hidden block relu(hq + ht)
[C, N, h] is written to memory and multiplied by W2 as a dot.  "block" (the kernel before this one): the block is
laid out [C, h, N] and reduced over h inside one fusion, C chosen so the block is ~2 MiB.  "current"
(model.relevance_full): a scan over the h hidden units adds w2_j relu(hq_j + ht_j) to a [Q, N] accumulator.
Inputs: random unit vectors of the real sizes (UltraTool: 1,000 queries x 2,032 tools, d = 384), or the
UltraTool embeddings from the default encoder's cache with --real.  Both paths are timed in one interleaved
loop (minimum wall time); "ratio" = former / current.

Roofline: per call the head costs 2(Q+N)·d·h flops for the two projections plus 4·Q·N·h for the pairs
(add, relu, multiply, add) and writes 4·Q·N bytes.  The compute roof is this machine's measured float32
matmul rate (XLA dot of 2048 x 2048 matrices) and the memory roof a numpy copy of 1 GiB, both measured here.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.model import heads as model


def former_relevance_full(params, q, t):
    """The previous concat-head kernel: hidden block [C, N, h] materialised, then a dot with W2."""
    p = params["rel"]
    n_q, d = q.shape
    n_t = t.shape[0]
    chunk = max(1, min((1 << 24) // (n_t * p["W1"].shape[1]), n_q))
    n_chunks = -(-n_q // chunk)
    qp = jnp.pad(q, ((0, n_chunks * chunk - n_q), (0, 0))).reshape(n_chunks, chunk, d)
    hq_all = qp @ p["W1"][:d] + p["b1"]
    ht = t @ p["W1"][d:]

    def one_chunk(hq):
        h = jax.nn.relu(hq[:, None, :] + ht[None])
        return jax.nn.sigmoid((h @ p["W2"] + p["b2"])[..., 0])

    return jax.lax.map(one_chunk, hq_all).reshape(-1, n_t)[:n_q]


def block_relevance_full(params, q, t):
    """The kernel before the current one: [C, h, N] pre-activations reduced over h in one fusion."""
    p = params["rel"]
    n_q, d = q.shape
    n_t = t.shape[0]
    h = p["W1"].shape[1]
    chunk = 1 << max(0, (max(1, (1 << 19) // (h * n_t))).bit_length() - 1)
    chunk = min(chunk, n_q)
    n_chunks = -(-n_q // chunk)
    hq = jnp.pad(q @ p["W1"][:d] + p["b1"], ((0, n_chunks * chunk - n_q), (0, 0))).reshape(n_chunks, chunk, h)
    ht_t = (t @ p["W1"][d:]).T
    w2 = p["W2"][:, 0]

    def one_chunk(hc):
        pre = jax.nn.relu(hc[:, :, None] + ht_t[None])
        return jax.nn.sigmoid(jnp.sum(pre * w2[None, :, None], axis=1) + p["b2"][0])

    return jax.lax.map(one_chunk, hq).reshape(-1, n_t)[:n_q]


def _unit(rng, n, d):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def load_inputs(args):
    if args.real:
        from riskrank_jax.data import load_benchmark
        from riskrank_jax.encode.embedding_cache import embed_texts
        from riskrank_jax.encode.encoder import load_encoder

        b = load_benchmark("ultratool")
        enc = load_encoder(None)
        return embed_texts(enc, list(b.tests["test"].texts)), embed_texts(enc, list(b.tools.descriptions))
    rng = np.random.default_rng(0)
    return _unit(rng, args.queries, args.dim), _unit(rng, args.tools, args.dim)


def best_time(fns: dict, repeats: int) -> dict:
    for f in fns.values():
        jax.block_until_ready(f())
    runs = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f())
            runs[k].append(time.perf_counter() - t)
    return {k: min(v) for k, v in runs.items()}


def roofs():
    """(float32 matmul flop/s, memory bytes/s) measured on this machine."""
    a = jnp.ones((2048, 2048), jnp.float32)
    dot = jax.jit(lambda a: a @ a)
    t = best_time({"dot": lambda: dot(a)}, 3)["dot"]
    x = np.ones(1 << 28, np.float32)
    y = np.empty_like(x)
    tc = min(_copy_time(x, y) for _ in range(3))
    return 2 * 2048 ** 3 / t, 2 * x.nbytes / tc


def _copy_time(x, y):
    t = time.perf_counter()
    np.copyto(y, x)
    return time.perf_counter() - t


def _fixed_step_interact(step: int):
    """relevance_full of the interaction head with ``step`` queries per lax.map step, whatever the cap: the cap is
    lifted while the function is traced (on its first call), so the compiled program keeps ``step``."""
    def run(p, q, t):
        saved, model._CHUNK_BUDGET = model._CHUNK_BUDGET, 1 << 62
        try:
            return model.relevance_full(p, q, t, query_chunk=step)
        finally:
            model._CHUNK_BUDGET = saved

    return jax.jit(run)


def interact_main(args, q, t):
    """The interaction head's full-pool scoring: capped query step (current) vs 128 queries per step."""
    params = model.init_params(jax.random.key(0), q.shape[1], args.hidden, "interact")
    step = model.interact_chunk(t.shape[0], max(args.hidden, q.shape[1]), 128)
    cur = jax.jit(lambda p, q, t: model.relevance_full(p, q, t, query_chunk=128))
    old = _fixed_step_interact(128)
    diff = float(jnp.abs(cur(params, q, t) - old(params, q, t)).max())
    sec = best_time({"step 128": lambda: old(params, q, t), f"step {step}": lambda: cur(params, q, t)}, args.repeats)
    flops = 4.0 * q.shape[0] * t.shape[0] * q.shape[1] * args.hidden
    print(f"interact head, Q={q.shape[0]}, N={t.shape[0]}, d={q.shape[1]}, h={args.hidden}: "
          f"{flops / 1e9:.1f} GFLOP per call (the two per-pair [d, h] products); max |diff| = {diff:.1e}")
    for k, s in sec.items():
        print(f"  {k:<10} {s * 1e3:9.1f} ms {flops / s / 1e9:8.1f} GFLOP/s {sec['step 128'] / s:6.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--tools", type=int, default=2032)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--real", action="store_true", help="UltraTool embeddings (default encoder, cached)")
    ap.add_argument("--interact", action="store_true", help="time the interaction head's query step instead")
    args = ap.parse_args()
    q_np, t_np = load_inputs(args)
    q, t = jnp.asarray(q_np), jnp.asarray(t_np)
    if args.interact:
        return interact_main(args, q, t)
    (n_q, d), n_t, h = q.shape, t.shape[0], args.hidden
    params = model.init_params(jax.random.key(0), d, h)
    cur = jax.jit(model.relevance_full)
    old = jax.jit(former_relevance_full)
    blk = jax.jit(block_relevance_full)
    diff = max(float(jnp.abs(cur(params, q, t) - f(params, q, t)).max()) for f in (old, blk))
    sec = best_time({"former": lambda: old(params, q, t), "block": lambda: blk(params, q, t),
                     "current": lambda: cur(params, q, t)}, args.repeats)
    flops = 2.0 * (n_q + n_t) * d * h + 4.0 * n_q * n_t * h
    nbytes = 4.0 * (n_q * n_t + (n_q + n_t) * d)
    peak, bw = roofs()
    floor = max(flops / peak, nbytes / bw)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} CPUs); Q={n_q}, N={n_t}, d={d}, "
          f"h={h}; {flops / 1e9:.2f} GFLOP, {nbytes / 1e6:.1f} MB per call; max |current - former or block| = {diff:.1e}")
    print(f"roofs: float32 matmul {peak / 1e9:.1f} GFLOP/s, memory {bw / 1e9:.2f} GB/s -> floor {floor * 1e3:.2f} ms "
          f"({'compute' if flops / peak > nbytes / bw else 'memory'} bound)")
    print(f"  {'path':<10} {'ms':>9} {'GFLOP/s':>9} {'of roof':>8} {'ratio':>7}")
    for k, s in sec.items():
        print(f"  {k:<10} {s * 1e3:9.2f} {flops / s / 1e9:9.2f} {floor / s:8.1%} {sec['former'] / s:6.2f}x")


if __name__ == "__main__":
    main()
