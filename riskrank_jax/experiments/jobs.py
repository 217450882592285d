"""Several benchmarks of one sweep side by side, each in a worker process of its own (``--jobs``).

    for item, result in run_in_workers(task, items, jobs=2):   # task(item) in fresh processes, as they finish
        ...

Why: one benchmark does not keep a 2-core CPU busy. XLA compiles on one thread, and the evaluation's small
programs leave the second core idle for a good part of each stage. `--benchmark all` one after another in one
process took 543 s wall for 834 CPU-seconds (153 % of one core); two at a time (UltraTool in one worker,
Seal-Tools then the demo in the other) took 457 s for 865 CPU-seconds (189 %): 1.19x. Measured in one
invocation of benchmarks/sweep_time.py on the 2-core CPU box, cached embeddings, empty compilation caches,
2026-11-30.

Results do not change: each worker runs the same programs on the same inputs, and XLA's CPU results do not
depend on thread count or timing (results.json "reproducibility"). Memory: each worker holds one benchmark, so
the peak of the whole run is about the sum of the concurrent benchmarks' peaks (each recorded in its
results.json), not the largest one.

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
    CPU with at least 2 cores. Two, not more: each worker's XLA already uses every core while it computes; the
    second fills the first's single-threaded gaps (compilation, host work)."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    accelerator = accelerator_plugin_installed() if accelerator is None else accelerator
    if n_tasks <= 1 or accelerator or cpus < 2:
        return 1
    return min(2, n_tasks)


def _worker_init() -> None:
    os.environ["RISKRANK_PROGRESS"] = "0"


def run_in_workers(task: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[tuple[T, R]]:
    """``task(item)`` for every item, ``jobs`` at a time, each in a fresh worker process; yields (item, result)
    as each finishes. Items start in the order given (give the longest first). ``task`` and the items must
    pickle (a module-level function; plain data). An exception inside ``task`` (or Ctrl-C) is raised here: the
    items not yet started are dropped, the ones already running are waited for first."""
    items = list(items)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if not items:
        return
    ctx = multiprocessing.get_context("spawn")
    fresh = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
    with cf.ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=ctx, initializer=_worker_init,
                                **fresh) as pool:
        futures = {pool.submit(task, item): i for i, item in enumerate(items)}
        try:
            for fut in cf.as_completed(futures):
                yield items[futures[fut]], fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


__all__ = ["run_in_workers", "default_jobs", "accelerator_plugin_installed", "ACCELERATOR_PLUGINS"]
