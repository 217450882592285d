"""The CPUs this process may run on, and their split between worker processes that run side by side.

    usable_cpus()                 # [0, 1]: this process's affinity mask (all CPUs where the OS has none)
    split_cpus([0, 1, 2], 2)      # [[0, 1], [2]]: disjoint, contiguous, as equal as possible

XLA's CPU runtime and numpy's threaded sorts size their thread pools by the CPUs a process may use, so a worker
pinned to its share of the CPUs (``os.sched_setaffinity``) runs with that many threads and never competes with
the other workers for a core (see ``experiments.jobs``).
"""

from __future__ import annotations

import os


def usable_cpus() -> list[int]:
    """Ids of the CPUs this process may run on: its affinity mask, or every CPU where the OS has no such call."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def split_cpus(cpus, parts: int) -> list[list[int]]:
    """``cpus`` in ``parts`` disjoint groups of consecutive ids, sizes as equal as possible (the first groups get one
    more). Needs at least one CPU per part."""
    cpus = sorted(cpus)
    if parts < 1 or len(cpus) < parts:
        raise ValueError(f"cannot split {len(cpus)} CPUs into {parts} non-empty groups")
    size, extra = divmod(len(cpus), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(cpus[start:end])
        start = end
    return out


__all__ = ["usable_cpus", "split_cpus"]
