"""The train step of encoder tuning: the top layers' forward over cached states, the in-batch softmax loss and
one AdamW update, as pure functions; ``compiled_step`` maps the step over a group of models and jits it.

    step = compiled_step(encoder.shape, encoder.pooling, encoder.normalize, config, backend, n_devices)
    top, opt_state, loss = step(top, opt_state, live, warm, total, states, q_tok, q_seg, t_tok, t_seg, exclude)

Loss: an in-batch softmax over cosine / τ — each query against its sampled gold tool, the other queries' gold
tools and the hard negatives; a query's other gold tools are masked out of its softmax. Optimiser: AdamW with a
linear warm-up and decay, gradients clipped to norm 1. Why a step per group of models: one jitted program
trains every model of a group (``model.groups.map_models``), each on its own learning-rate schedule.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax.encode.bert import pool_texts, run_layers, segment_attention
from riskrank_jax.model import groups
from riskrank_jax.model.tune_config import TuneConfig
from riskrank_jax.scoring import l2_normalise


def encode_top(top, states, tok, slot, n_texts: int, shape, pooling: str, normalize: bool):
    """Sentence vectors [n_texts, d] of texts packed in rows of token indices into the frozen states
    (``TextStates.packed``: tok, slot [R, W])."""
    x = run_layers(top, states[tok], segment_attention(slot), shape)
    v = pool_texts(x, slot, n_texts, pooling)
    return l2_normalise(v) if normalize else v.astype(jnp.float32)


def loss(top, states, q, t, exclude, shape, pooling, normalize, temperature):
    """In-batch softmax cross-entropy: query i's label is tool column i; ``exclude`` [Bq, Bt] masks out a query's
    other gold tools."""
    qv = encode_top(top, states, *q, exclude.shape[0], shape, pooling, normalize)
    tv = encode_top(top, states, *t, exclude.shape[1], shape, pooling, normalize)
    logits = jnp.where(exclude, -1e9, (qv @ tv.T) / temperature)
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.arange(qv.shape[0])).mean()


def learning_rate(config: TuneConfig, warm, total):
    """AdamW's learning rate at a step count: linear warm-up from 0 to ``config.lr`` over ``warm`` steps, then
    linear decay to 0 over the other ``total − warm`` (optax.join_schedules of two optax.linear_schedule, written
    out so that ``warm`` and ``total`` may be traced: each model of a mapped run has its own schedule length)."""
    lr = float(config.lr)
    decay = jnp.maximum(1, total - warm)

    def schedule(count):
        up = (0.0 - lr) * (1 - jnp.clip(count, 0, warm) / warm) + lr
        down = (lr - 0.0) * (1 - jnp.clip(count - warm, 0, decay) / decay) + 0.0
        return jnp.where(count < warm, up, down)

    return schedule


def optimizer(config: TuneConfig, warm, total):
    """AdamW on ``learning_rate(config, warm, total)`` after clipping the gradients to global norm 1."""
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(learning_rate(config, warm, total), weight_decay=config.weight_decay))


def train_step(top, opt_state, live, warm, total, states, q_tok, q_seg, t_tok, t_seg, exclude, *, shape,
               pooling: str, normalize: bool, config: TuneConfig):
    """One model's step: (top, opt_state, loss) after an AdamW update on the batch (q_tok, q_seg [Rq, Wq], t_tok,
    t_seg [Rt, Wt], exclude [Bq, Bt]) with a schedule of ``warm`` / ``total`` steps; a model whose ``live`` is
    False (its schedule is over: a padded step) keeps its top and optimiser state unchanged."""
    batch_loss = functools.partial(loss, shape=shape, pooling=pooling, normalize=normalize,
                                   temperature=config.temperature)
    value, grads = jax.value_and_grad(batch_loss)(top, states, (q_tok, q_seg), (t_tok, t_seg), exclude)
    updates, new_opt = optimizer(config, warm, total).update(grads, opt_state, top)
    keep = lambda new, old: jnp.where(live, new, old)  # noqa: E731
    return jax.tree.map(keep, optax.apply_updates(top, updates), top), jax.tree.map(keep, new_opt, opt_state), value


@functools.lru_cache(maxsize=8)
def compiled_step(shape, pooling: str, normalize: bool, config: TuneConfig, backend: str, n_devices: int):
    """``train_step`` of a group of models, jitted, every argument but ``states`` with a leading model axis:
    (top, opt_state, live bool [M], warm int [M], total int [M], states, q_tok, q_seg, t_tok, t_seg, exclude) ->
    (top, opt_state, loss [M]). Mapped over the models with ``model.groups.map_models`` (vmap; lax.map on one CPU
    device: hence the backend and device count in the cache key); one compilation per model shape,
    configuration and group size."""
    one = functools.partial(train_step, shape=shape, pooling=pooling, normalize=normalize, config=config)
    return jax.jit(groups.map_models(one, (0, 0, 0, 0, 0, None, 0, 0, 0, 0, 0)), donate_argnums=(0, 1))


@functools.lru_cache(maxsize=8)
def compiled_encode(shape, pooling: str, normalize: bool):
    """``encode_top`` jitted for one model shape (``n_texts`` static)."""
    return jax.jit(functools.partial(encode_top, shape=shape, pooling=pooling, normalize=normalize),
                   static_argnames=("n_texts",))


def tune_bytes(top, bq: int, bt: int, wq: int, wt: int, num_heads: int) -> tuple[int, int]:
    """Estimated bytes of one model's training step: (its state held between steps: top layers and Adam moments;
    what its step adds while it runs: gradients, updates and the activations kept for the backward pass of ``bq``
    packed query rows of ``wq`` tokens and ``bt`` packed tool rows of ``wt`` tokens)."""
    params = sum(int(np.size(a)) for lp in top for name in lp for a in lp[name])
    tokens = bq * wq + bt * wt
    d, ffn = (int(np.shape(top[0]["ffn_in"][0])[i]) for i in (0, 1))
    per_layer = tokens * (8 * d + ffn) + 2 * num_heads * (bq * wq * wq + bt * wt * wt)
    return 4 * 3 * params, 4 * (2 * params + len(top) * per_layer + tokens * d)


__all__ = ["encode_top", "loss", "learning_rate", "optimizer", "train_step", "compiled_step", "compiled_encode",
           "tune_bytes"]
