"""The model axis of a training run split into groups sized by bytes, so a run's peak memory is bounded.

    groups = plan_groups(n_models=60, bytes_per_model=20 << 20, budget=1 << 30)   # 2 groups of 30
    for ix, n in groups:         # int [G]: model ids of the group (the last group padded by repeating its last
        ...                      # id); n real ones: one vmapped program call over ix, keep its first n rows

Every group has the same size (one compilation serves all), a multiple of ``multiple`` (the device count when
the model axis is sharded). Groups are balanced: ceil(M / groups) models each, never more than the budget
allows, at least one model.
"""

from __future__ import annotations

import numpy as np


def group_size(n_models: int, bytes_per_model: int, budget: int, multiple: int = 1) -> int:
    """Models per group: as many as ``budget`` bytes hold (at least ``multiple``), balanced over the groups."""
    if n_models < 1:
        raise ValueError(f"need at least one model, got {n_models}")
    fit = max(1, int(budget) // max(1, int(bytes_per_model)))
    n_groups = -(-n_models // fit)
    size = -(-n_models // n_groups)
    return max(multiple, -(-size // multiple) * multiple)


def plan_groups(n_models: int, bytes_per_model: int, budget: int,
                multiple: int = 1) -> list[tuple[np.ndarray, int]]:
    """(model ids int64 [size], number of real models) per group, in model order; the last group is padded
    by repeating its last model."""
    size = group_size(n_models, bytes_per_model, budget, multiple)
    return [(np.minimum(np.arange(m0, m0 + size), n_models - 1), min(size, n_models - m0))
            for m0 in range(0, n_models, size)]


__all__ = ["group_size", "plan_groups"]
