"""Several benchmarks of one sweep side by side, each in a worker process of its own (``--jobs``).

    for item, result in run_in_workers(task, items, jobs=2):   # task(item) in fresh processes, as they finish
        ...

Why: one benchmark does not keep a 2-core CPU busy. XLA compiles on one thread, and the evaluation's small
programs leave the second core idle for a good part of each stage.

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
and run with progress bars off (``RISKRANK_PROGRESS=0``), so two bars never share one terminal line.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.metadata
import multiprocessing
import os
import sys
from typing import Callable, Iterable, Iterator, TypeVar

from riskrank_jax.runtime.cpus import split_cpus, usable_cpus

T = TypeVar("T")
R = TypeVar("R")

# distributions that give JAX an accelerator backend: several processes would each claim its memory
ACCELERATOR_PLUGINS = ("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu", "jax-tpu", "jax_tpu")


def accelerator_plugin_installed() -> bool:
    """Whether a JAX GPU or TPU plugin is installed (checked without starting JAX's runtime)."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(ACCELERATOR_PLUGINS):
            return True
    return False


def default_jobs(n_tasks: int, *, cpus: int | None = None, accelerator: bool | None = None) -> int:
    """Workers for ``n_tasks`` benchmarks when ``--jobs`` is not given: 1 for a single benchmark or where a JAX
    accelerator plugin is installed (each process would claim the device's memory); otherwise up to 2 on a
    CPU with at least 2 cores (each worker then gets its own share of the cores)."""
    cpus = len(usable_cpus()) if cpus is None else cpus
    accelerator = accelerator_plugin_installed() if accelerator is None else accelerator
    if n_tasks <= 1 or accelerator or cpus < 2:
        return 1
    return min(2, n_tasks)


def _worker_init(cpus) -> None:
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
    slots = [cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_worker_init, initargs=(cpus,),
                                    **fresh) for cpus in worker_cpus(min(jobs, len(items)))]
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


__all__ = ["run_in_workers", "worker_cpus", "default_jobs", "accelerator_plugin_installed", "ACCELERATOR_PLUGINS"]
