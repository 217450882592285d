"""One training loop shared by the risk heads: shuffled minibatches, one ``lax.scan`` per epoch.

    params, epoch_losses = minibatch_epochs(params, optax.adam(1e-3), loss_fn, key, n=N, batch_size=64, epochs=30)

``loss_fn(params, idx)`` is the loss of the rows ``idx`` (int [batch]); each epoch draws a fresh permutation from
its own key and drops the last ``n mod batch_size`` rows. Pure and jit/vmap-able.

Why one loop: every risk head trains the same way, so their results are comparable.
"""

from __future__ import annotations

import jax
import optax


def minibatch_epochs(params, opt, loss_fn, key, *, n: int, batch_size: int, epochs: int):
    """Train ``params`` with ``opt`` over ``epochs`` shuffled passes. Returns (params, mean loss per epoch [E])."""
    steps = n // batch_size

    def step(carry, idx):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p, idx)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), loss

    def epoch(carry, ekey):
        perm = jax.random.permutation(ekey, n)[: steps * batch_size].reshape(steps, batch_size)
        carry, losses = jax.lax.scan(step, carry, perm)
        return carry, losses.mean()

    (params, _), losses = jax.lax.scan(epoch, (params, opt.init(params)), jax.random.split(key, epochs))
    return params, losses


__all__ = ["minibatch_epochs"]
