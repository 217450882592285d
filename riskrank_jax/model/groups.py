"""The model axis of a training run split into groups sized by bytes, so a run's peak memory is bounded.

    groups = plan_groups(n_models=60, bytes_per_model=20 << 20, budget=1 << 30)   # 2 groups of 30
    for ix, n in groups:         # int [G]: model ids of the group (the last group padded by repeating its last
        ...                      # id); n real ones: one vmapped program call over ix, keep its first n rows

Every group has the same size (one compilation serves all), a multiple of ``multiple`` (the device count when
the model axis is sharded). Groups are balanced: ceil(M / groups) models each, never more than the budget
allows, at least one model.

Within a group, ``map_models(fn, in_axes)`` maps a one-model function over the model axis: ``jax.vmap`` on an
accelerator (or several devices, where the model axis is sharded), and on a single CPU device ``lax.map`` (the
models one after another inside the same jitted program). A model's result is the same either way up to
float rounding (the reranker's: identical).

Why: XLA's CPU kernels for batched small matmuls, gathers and scatter-adds are slower than a loop over the
unbatched ones (figures in docs/performance.md, "Training").
"""

from __future__ import annotations

import jax
import numpy as np

from riskrank_jax.runtime.memory import balanced_step, units_per_step


def group_size(n_models: int, bytes_per_model: int, budget: int, multiple: int = 1) -> int:
    """Models per group: as many as ``budget`` bytes hold (at least ``multiple``), balanced over the groups."""
    if n_models < 1:
        raise ValueError(f"need at least one model, got {n_models}")
    return balanced_step(n_models, units_per_step(bytes_per_model, budget), multiple)


def plan_groups(n_models: int, bytes_per_model: int, budget: int,
                multiple: int = 1) -> list[tuple[np.ndarray, int]]:
    """(model ids int64 [size], number of real models) per group, in model order; the last group is padded
    by repeating its last model."""
    size = group_size(n_models, bytes_per_model, budget, multiple)
    return [(np.minimum(np.arange(m0, m0 + size), n_models - 1), min(size, n_models - m0))
            for m0 in range(0, n_models, size)]


def gathered(trees: list, counts) -> object:
    """One host tree over a run's models from its groups' stacked trees: each leaf is the groups' leaves' first
    ``counts[g]`` rows (a group's padding rows dropped, see ``plan_groups``), concatenated in group order."""
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x)[:n] for x, n in zip(xs, counts)]), *trees)


def maps_sequentially() -> bool:
    """True when ``map_models`` runs the models one after another (``lax.map``: one CPU device), so a group's
    intermediates are those of one model at a time."""
    return jax.default_backend() == "cpu" and jax.device_count() == 1


def map_models(fn, in_axes):
    """``fn`` mapped over the leading (model) axis of the arguments whose ``in_axes`` entry is 0 (the others,
    None, are shared): ``jax.vmap(fn, in_axes)`` unless the default backend is one CPU device, where it is the
    equivalent ``lax.map`` (see the module docstring). Decided when called (when a program is built)."""
    in_axes = tuple(in_axes)
    if any(a not in (0, None) for a in in_axes):
        raise ValueError(f"in_axes entries must be 0 or None, got {in_axes}")
    if not maps_sequentially():
        return jax.vmap(fn, in_axes=in_axes)
    mapped = [i for i, a in enumerate(in_axes) if a == 0]

    def over_models(*args):
        def one(xs):
            full = list(args)
            for i, x in zip(mapped, xs):
                full[i] = x
            return fn(*full)

        return jax.lax.map(one, [args[i] for i in mapped])

    return over_models


__all__ = ["group_size", "plan_groups", "gathered", "maps_sequentially", "map_models"]
