"""Training 15 models (3 seeds x 5 folds) in one vmapped program vs one after another, same code.

Both paths call ``train_models``: once with all seeds and folds, then once per (seed, fold). Timings
include compilation (the vmapped run compiles one program; the sequential runs compile one per distinct
steps-per-epoch, i.e. per fold) and are also repeated warm (programs cached), so the speed-up from
batching the arithmetic is shown apart from the saved compilations.

Data: UltraTool-shaped. With the real benchmark and the embedded encoder available, the real tool and
training-query embeddings (embedding cache; texts not cached yet are encoded first, not timed); else
random unit vectors of the same shapes (N=2032, 1000 queries, d=384, 5 folds, ~2 gold per query).

    python benchmarks/train_vmap.py [--epochs 10] [--random] [--no-warm]

On one CPU device the run's program maps the model axis with ``lax.map`` (``model.groups.map_models``;
``jax.vmap`` on accelerators): XLA:CPU's batched small matmuls and gathers are slower than a loop over
unbatched ones, and one model's step already runs near the CPU's FP32 throughput, so the speed-up target is for
accelerators. Figures: docs/performance.md, "Training".
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SEEDS = (42, 123, 777)


def real_data():
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
    from riskrank_jax.encode.encoder import load_encoder

    bench = load_benchmark("ultratool")
    enc = load_encoder()
    texts = list(bench.tools.descriptions) + list(bench.train.texts)
    vecs = embed_texts(enc, texts, EmbeddingCache())
    n = bench.tools.size
    src = f"real UltraTool ({bench.protocol}), encoder {enc.model_id}"
    return vecs[:n], vecs[n:], bench.train.gold, bench.tools.risk, bench.train_fold_mask, src


def random_data(seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    n_tools, n_q, dim, n_folds = 2032, 1000, 384, 5

    def unit(shape):
        x = rng.normal(size=shape).astype(np.float32)
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    gold = np.full((n_q, 6), -1, np.int32)
    for i in range(n_q):
        k = min(6, 1 + rng.poisson(1.0))
        gold[i, :k] = rng.choice(n_tools, k, replace=False)
    fold_of = rng.permutation(n_q) % n_folds
    fold_mask = np.stack([fold_of != f for f in range(n_folds)])
    risk = rng.integers(1, 6, n_tools).astype(np.int32)
    return unit((n_tools, dim)), unit((n_q, dim)), gold, risk, fold_mask, "random unit vectors (UltraTool shapes)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--random", action="store_true", help="skip the real data, use random unit vectors")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm (cached-program) repetition")
    args = ap.parse_args()

    import jax
    import numpy as np

    from riskrank_jax.model.train import TrainRun, train_models
    from riskrank_jax.model.train_config import TrainConfig

    data = None
    if not args.random:
        try:
            data = real_data()
        except Exception as exc:  # noqa: BLE001 - any missing piece means the fallback
            print(f"real data unavailable ({type(exc).__name__}: {exc}); falling back to random vectors")
    if data is None:
        data = random_data()
    tool_emb, query_emb, gold, risk, fold_mask, source = data
    folds = tuple(range(fold_mask.shape[0]))
    cfg = TrainConfig(epochs=args.epochs)
    n_models = len(SEEDS) * len(folds)
    n_gold = (gold >= 0).sum(-1)
    print(f"data: {source}")
    print(f"  tools {tool_emb.shape}, train queries {query_emb.shape}, mean gold {n_gold.mean():.2f}, "
          f"folds {len(folds)}; triplets per model ~{cfg.negatives * int(n_gold[fold_mask[0]].sum())}")
    print(f"  {n_models} models, {cfg.epochs} epochs, batch {cfg.batch_size}; jax {jax.__version__} on "
          f"{jax.devices()[0].platform} x{len(jax.devices())}, {platform.processor() or platform.machine()}")

    def vmapped():
        t0 = time.perf_counter()
        res = train_models(tool_emb, query_emb, gold, risk, fold_mask, cfg, TrainRun(SEEDS, progress=False))
        return time.perf_counter() - t0, res

    def sequential():
        t0 = time.perf_counter()
        out = [train_models(tool_emb, query_emb, gold, risk, fold_mask, cfg, TrainRun((s,), folds=(f,),
                                                                                   progress=False))
               for s in SEEDS for f in folds]
        return time.perf_counter() - t0, out

    t_vm, res = vmapped()
    t_seq, singles = sequential()
    diff = max(float(np.abs(np.asarray(res.params["rel"]["W1"][m]) - np.asarray(r.params["rel"]["W1"][0])).max())
               for m, r in enumerate(singles))
    print(f"cold (compilation included): vmapped {t_vm:.2f}s, sequential {t_seq:.2f}s, "
          f"speed-up {t_seq / t_vm:.2f}x")
    if not args.no_warm:
        w_vm, _ = vmapped()
        w_seq, _ = sequential()
        print(f"warm (programs cached):      vmapped {w_vm:.2f}s, sequential {w_seq:.2f}s, "
              f"speed-up {w_seq / w_vm:.2f}x")
    print(f"max |W1 vmapped - W1 single| over the 15 models: {diff:.2e}")
    print(f"mean best held-out loss {np.mean(res.heldout_loss[np.arange(n_models), res.best_epoch]):.4f}, "
          f"models whose best epoch is 1..{cfg.epochs}: {np.bincount(res.best_epoch, minlength=cfg.epochs).tolist()}")


if __name__ == "__main__":
    main()
