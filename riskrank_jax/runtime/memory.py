"""The memory budget: how many bytes one step of training, scoring or evaluation may hold at once.

Every stage that could outgrow memory (models x queries x tools x hidden) sizes its groups or chunks from a
byte estimate against this budget; results never depend on it. The planning is here, once; each stage keeps
its own byte estimate (``model.train.model_bytes``, ``rank.stacked.pair_bytes``, ``model.rerank.plan_memory``,
``experiments.evaluate.queries_per_chunk``):

    fit = units_per_step(bytes_per_unit, budget)            # how many units one step holds (at least 1)
    size = balanced_step(n_units, fit, multiple)            # equal steps of at most `fit`, rounded up to `multiple`
    chunk = halved_to_fit(start, bytes_per_unit, budget, fixed)   # start halved until fixed + chunk x unit fits

Why one place: the three rules (fill, balance, halve) are shared by training, scoring and evaluation, and a
change to one of them should reach every stage.
"""

from __future__ import annotations

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes (1 GiB)


def units_per_step(bytes_per_unit: int, budget: int) -> int:
    """How many units of ``bytes_per_unit`` bytes ``budget`` bytes hold, at least 1."""
    return max(1, int(budget) // max(1, int(bytes_per_unit)))


def balanced_step(n_units: int, max_per_step: int, multiple: int = 1) -> int:
    """Units per step when ``n_units`` are split into the fewest steps of at most ``max_per_step``, balanced
    (ceil(n_units / steps)), then rounded up to a multiple of ``multiple`` (at least one unit)."""
    n_steps = max(1, -(-int(n_units) // max(1, int(max_per_step))))
    size = max(1, -(-int(n_units) // n_steps))
    return -(-size // multiple) * multiple


def halved_to_fit(start: int, bytes_per_unit: int, budget: int, fixed: int = 0) -> int:
    """``start`` units (at least 1) halved, rounding up, until ``fixed + units x bytes_per_unit <= budget`` or 1."""
    units = max(1, int(start))
    while units > 1 and fixed + units * bytes_per_unit > budget:
        units = (units + 1) // 2
    return units


__all__ = ["DEFAULT_MEMORY_BUDGET", "units_per_step", "balanced_step", "halved_to_fit"]
