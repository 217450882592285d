"""Several benchmarks of one sweep, each in a fresh worker process of its own, ``--jobs`` at a time.

    for item, result in run_in_workers(task, items, jobs=1):   # task(item) in fresh processes, as they finish
        ...

Why a fresh process per benchmark: what one benchmark leaves behind (compiled programs, the allocator's pools)
is gone before the next starts, so one after another (``--jobs 1``, the sweep's default) the peak memory is the
largest benchmark's. Why side by side (``--jobs 2``): one benchmark's small programs leave the second core of a
2-core CPU idle for part of each stage; the price is the sum of the concurrent benchmarks' memory.

Each worker slot is pinned to its own share of the CPUs (``cpus.split_cpus``; on a 2-core CPU, one core each), so
its XLA and numpy thread pools have that many threads. Unpinned, two workers with two threads each competed for
both cores: XLA's parallel kernels wait for their slowest thread, and that thread was often descheduled for the
other process. The sweep times of each arrangement are in docs/performance.md ("Whole sweeps").

Results do not change: each worker runs the same programs on the same inputs, and the sweep's arithmetic does not
depend on the thread count (checked: every results.json value of a pinned run equals the one-process run's). Memory:
each worker holds one benchmark, so the peak of the whole run is about the sum of the concurrent benchmarks' peaks
(each recorded in its results.json), not the largest one.

Workers are started with ``spawn`` (a fork of a process whose JAX runtime has threads is unsafe), one fresh
process per item on Python >= 3.11 (so each benchmark's recorded peak memory is its own; 3.10 reuses workers),
and, when several run at once, with progress bars off (``RISKRANK_PROGRESS=0``), so two bars never share one
terminal line.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
from typing import Callable, Iterable, Iterator, TypeVar

from riskrank_jax.runtime.cpus import split_cpus, usable_cpus

T = TypeVar("T")
R = TypeVar("R")

def _worker_init(cpus, quiet: bool) -> None:
    if quiet:
        os.environ["RISKRANK_PROGRESS"] = "0"
    if cpus is not None:  # before JAX starts: XLA sizes its thread pool by the CPUs the process may use
        os.sched_setaffinity(0, cpus)


def worker_cpus(jobs: int) -> list:
    """The CPUs of each of ``jobs`` worker slots: disjoint shares of this process's CPUs, or None for every slot
    (unpinned) where the OS cannot pin a process or there are fewer CPUs than slots."""
    cpus = usable_cpus()
    if not hasattr(os, "sched_setaffinity") or len(cpus) < jobs:
        return [None] * jobs
    return split_cpus(cpus, jobs)


def run_in_workers(task: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[tuple[T, R]]:
    """``task(item)`` for every item, ``jobs`` at a time, each in a fresh worker process pinned to its slot's CPUs
    (``worker_cpus``); yields (item, result) as each finishes. Items start in the order given (give the longest
    first), each on the first slot that is free. ``task`` and the items must pickle (a module-level function;
    plain data). An exception inside ``task`` (or Ctrl-C) is raised here: the items not yet started are dropped,
    the ones already running are waited for first."""
    items = list(items)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if not items:
        return
    ctx = multiprocessing.get_context("spawn")
    fresh = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
    at_once = min(jobs, len(items))
    slots = [cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_worker_init,
                                    initargs=(cpus, at_once > 1), **fresh) for cpus in worker_cpus(at_once)]
    pending = list(range(len(items)))
    running: dict = {}

    def start(slot: int) -> None:
        i = pending.pop(0)
        running[slots[slot].submit(task, items[i])] = (slot, i)

    try:
        for slot in range(len(slots)):
            start(slot)
        while running:
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                slot, i = running.pop(fut)
                if pending and fut.exception() is None:
                    start(slot)
                yield items[i], fut.result()
    finally:  # an exception or an early close: nothing new starts; the running items are waited for
        for pool in slots:
            pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["run_in_workers", "worker_cpus"]
