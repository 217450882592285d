"""What to fine-tune: one train step through all layers of the encoder against one through its top layers only.

The same in-batch softmax loss (``model.tune_step.loss``) over 96 texts of 32 tokens (48 queries, 48 tools),
with the embedded all-MiniLM-L6-v2: (a) every layer and the embeddings trained (the whole forward and backward
pass); (b) the top n layers trained over the cached states of the layers below (``Encoder.lower_states``), for
n = 1, 2, 3. Also the forward pass alone. Each is compiled first, then timed over ``--repeat`` steps; the
ratios are to (a), in this run.

    python benchmarks/encoder_tune.py [--repeat 3]

Why: it decides how many top layers ``model.encoder_tune`` trains over cached lower-layer states; the sweep
trains the top 2 (docs/beyond.md §6 gives what each choice gained on Seal-Tools).
Figures: docs/performance.md, "Tuning the encoder and the cross-encoder".
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np


def _timed(fn, *args, repeat: int) -> float:
    import jax

    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(repeat):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    from riskrank_jax.encode import bert
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.model.tune_step import loss as tune_loss

    enc = load_encoder()
    p, shape = jax.tree.map(jnp.asarray, enc.params), enc.shape
    b, length = 96, 32
    ids = jnp.asarray(np.random.default_rng(0).integers(1000, 20000, (b, length)), jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (b, length))
    seg = jnp.ones((b, length), jnp.int32)
    exclude = jnp.zeros((b // 2, b // 2), bool)
    loss = functools.partial(tune_loss, shape=shape, pooling=enc.pooling, normalize=True, temperature=0.05)
    rows = jnp.arange(b * length, dtype=jnp.int32).reshape(b, length)
    halves = ((rows[:b // 2], seg[:b // 2]), (rows[b // 2:], seg[b // 2:]))

    def whole(params):  # embeddings and every layer trained: the lower states are recomputed inside the loss
        states = bert.embed_tokens(params, ids, pos, shape).reshape(b * length, -1)
        return loss(params["layers"], states, *halves, exclude)

    full = _timed(jax.jit(jax.value_and_grad(whole)), p, repeat=args.repeat)
    fwd = _timed(jax.jit(whole), p, repeat=args.repeat)
    print(f"all layers: {full:.2f} s per step; forward alone {fwd:.2f} s  ({jax.devices()[0].platform}, "
          f"{b} texts x {length} tokens)")
    n_layers = shape.num_layers
    for n in (1, 2, 3):
        low = {"emb": p["emb"], "layers": p["layers"][:n_layers - n]}
        states = jax.jit(lambda q: bert.run_layers(q["layers"], bert.embed_tokens(q, ids, pos, shape),
                                                  bert.segment_attention(seg), shape))(low).reshape(b * length, -1)
        step = jax.jit(jax.value_and_grad(lambda top, s: loss(top, s, *halves, exclude)))
        t = _timed(step, p["layers"][n_layers - n:], states, repeat=args.repeat)
        print(f"top {n} layer(s) over cached states: {t:.2f} s per step ({full / t:.1f}x cheaper than all layers)")


if __name__ == "__main__":
    main()
