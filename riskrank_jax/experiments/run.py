"""The sweep skeleton: one benchmark (``run_benchmark``) and several (``run_tasks``), whatever its family; the
command line is ``riskrank_jax.sweep``.

    run_benchmark(default_config("sealtools"), Path("runs"))   # <runs>/sealtools/{results.json, tables.md, ...}

What a sweep computes is one ``experiments.config.SweepConfig`` tree. Its benchmark's family
(``FAMILIES``: ``experiments.paper`` for demo, UltraTool and Seal-Tools, ``experiments.livemcp`` for LiveMCPBench)
supplies the data and the evaluation step; the skeleton owns the rest, the same for every benchmark: the run key
(the config's result leaves, the data, the encoder, the family's results version and key parts), the reuse of an
earlier run of the same key, the results' common fields (``family.RUN_FIELDS``), results.json written last and
atomically, and the closing lines. Built so that a newcomer follows any benchmark from the command to its
numbers down one function, and a run is reproduced from its results.json "config" alone.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from datetime import datetime
from pathlib import Path

import click
import jax

from riskrank_jax.encode.families import load_encoder_lazily
from riskrank_jax.errors import RiskRankError
from riskrank_jax.experiments import report
from riskrank_jax.experiments.config import SweepConfig
from riskrank_jax.experiments.family import Family
from riskrank_jax.experiments.jobs import run_in_workers
from riskrank_jax.experiments.livemcp import LIVEMCP
from riskrank_jax.experiments.paper import PAPER
from riskrank_jax.experiments.stages import StageLog, short_hash
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.runtime import compile_cache

# every benchmark's family; a benchmark not named here (a test's injected one) is evaluated as the paper's are
FAMILIES: dict[str, Family] = {"demo": PAPER, "ultratool": PAPER, "sealtools": PAPER, "livemcpbench": LIVEMCP}
ALL_BENCHMARKS = tuple(FAMILIES)


# ---------------------------------------------------------------------------------------------- one benchmark


def run_key(cfg: SweepConfig, family: Family, bench, encoder_id: str, plan) -> str:
    """What a run's results depend on, hashed: the config's result leaves, the data, the encoder, the family's
    results version and its key parts (e.g. the variants' specs)."""
    return short_hash([cfg.result_key(), bench.fingerprint(), encoder_id, family.results_version,
                       *family.key_parts(cfg, plan)])


def previous_results(path: Path, key: str) -> dict | None:
    """The results.json at ``path`` when it holds a finished run of the run key ``key``, else None."""
    try:
        prev = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return prev if isinstance(prev, dict) and prev.get("run_key") == key else None


def run_fields(cfg: SweepConfig, family: Family, log: StageLog, key: str, side_by_side: bool) -> dict:
    """results.json's common fields (``RUN_FIELDS``): how, where and of what configuration the run was made."""
    return {"device": f"{jax.devices()[0].platform} x{jax.device_count()}", "side_by_side": side_by_side,
            "timings": log.timings, "peak_rss_mb": log.peak_rss_mb, "memory_budget": cfg.runtime.memory_budget,
            "run_key": key, "config": cfg.to_dict(), "reproducibility": family.reproducibility,
            "finished_at": datetime.now().astimezone().isoformat(timespec="seconds")}


def _finish(res: dict, family: Family, out_dir: Path, written, seconds: float, report_to) -> dict:
    """The last lines of a benchmark's run, each given to ``report_to``: its main table, then where its files are
    (``written``: the names written; None: an earlier run reused)."""
    report_to(family.main_table(res))
    if written is None:
        when = res.get("finished_at") or datetime.fromtimestamp((out_dir / "results.json").stat().st_mtime) \
            .astimezone().isoformat(timespec="seconds")
        report_to(f"[{res['benchmark']}] reusing your run of {when} in {out_dir} (same configuration, data and "
                  "encoder); --force recomputes")
    else:
        report_to(f"[{res['benchmark']}] wrote {out_dir}/{', '.join(written)} (computed in {seconds:.0f} s)")
    return res


def run_benchmark(cfg: SweepConfig, workdir: Path, *, force: bool = False, bench=None, encoder=None,
                  encoder_loader=load_encoder_lazily, report_to=click.echo, side_by_side: bool = False,
                  **options) -> dict:
    """The sweep ``cfg`` (which determines every result) of its benchmark: its family's data and evaluation, its
    outputs under <workdir>/<benchmark>/, its main table printed (the closing lines go to ``report_to``; stage
    lines always to stderr). Without ``force``, a results.json there with the same run key is reused and said
    so. ``side_by_side``: other benchmarks ran at the same time (``--jobs``), recorded because the CPU was
    shared while the timings were measured. ``bench`` / ``encoder`` may be given directly (tests inject a tiny
    benchmark and a fake encoder); otherwise loaded, the encoder by ``encoder_loader`` (by default
    ``load_encoder_lazily``: weights and tokenizer load only when a text is missing from the embedding cache; a
    run in turn over several benchmarks shares one). ``options`` go to the family's ``plan``."""
    t0 = time.perf_counter()
    family = FAMILIES.get(cfg.benchmark, PAPER)
    log = StageLog(cfg.benchmark)
    out_dir = Path(workdir) / cfg.benchmark
    plan = family.plan(cfg, bench is not None, **options)
    bench = bench if bench is not None else family.load(cfg, log)
    encoder = encoder if encoder is not None else log.run("load encoder", encoder_loader, cfg.encoder.path)
    key = run_key(cfg, family, bench, encoder.model_id, plan)
    if not force and (prev := previous_results(out_dir / "results.json", key)) is not None:
        return _finish(prev, family, out_dir, None, time.perf_counter() - t0, report_to)
    sections = family.evaluate(cfg, bench, encoder, plan, log)
    results = {"benchmark": cfg.benchmark, "encoder": encoder.model_id, **sections,
               **run_fields(cfg, family, log, key, side_by_side)}
    click.echo(f"[{cfg.benchmark}] write results to {out_dir} ...", err=True)
    written = report.write_outputs(results, out_dir, family.tables, family.figures)
    return _finish(results, family, out_dir, written, time.perf_counter() - t0, report_to)


# ---------------------------------------------------------------------------------------------- several


def run_tasks(tasks, jobs: int, cache_dir=None, *, keep_compiled: bool = True) -> list[str]:
    """The (SweepConfig, run_benchmark keyword arguments: workdir, force, ...) tasks: one task in this process;
    several in worker processes, a fresh one per benchmark, ``jobs`` at a time (1: one after another, the last in
    this process, so the peak memory is the largest benchmark's, not their sum). ``keep_compiled``: compiled programs
    are kept under the embedding cache ``cache_dir`` (None: the default one), in ``xla/``. Returns the error messages (none:
    every benchmark finished)."""
    try:
        xla_root = resolve_cache_dir(cache_dir) if keep_compiled else None
        if len(tasks) > 1:
            return run_side_by_side(tasks, xla_root, jobs)
        return run_in_turn(tasks, xla_root)
    except RiskRankError as e:
        return [str(e)]


def run_in_turn(tasks, compile_cache_root) -> list[str]:
    """Each (SweepConfig, run_benchmark keyword arguments) in turn in this process, sharing one encoder and the
    compiled programs; stops at the first error (raised). Returns [] (the errors of ``run_side_by_side``).
    Memory a benchmark leaves behind (compiled programs, the allocator's pools) stays for the next one."""
    if compile_cache_root is not None:
        compile_cache.enable(compile_cache_root)
    load_once = functools.lru_cache(maxsize=None)(load_encoder_lazily)  # one encoder (compiled shapes) for all
    for cfg, kwargs in tasks:
        run_benchmark(cfg, **kwargs, encoder_loader=load_once)
    return []


# the longest first, so the last to finish is a short one (their stage times: docs/performance.md, "Whole
# sweeps"); other names keep their order, after these
EXPECTED_LONGEST_FIRST = ("ultratool", "sealtools", "demo", "livemcpbench")


def run_side_by_side(tasks, compile_cache_root, jobs: int) -> list[str]:
    """The (SweepConfig, run_benchmark keyword arguments) tasks in worker processes, a fresh one per benchmark,
    ``jobs`` at a time (``experiments.jobs``), the longest first (with ``jobs`` 1 the last one in this process,
    after the others); each benchmark's closing lines are printed when it finishes. A failing benchmark does not
    stop the others; returns the error messages, "[benchmark] message"."""
    rank = {name: i for i, name in enumerate(EXPECTED_LONGEST_FIRST)}
    order = sorted(tasks, key=lambda t: rank.get(t[0].benchmark, len(rank)))
    at_once = min(jobs, len(tasks))
    if at_once > 1:
        click.echo(f"running {len(tasks)} benchmarks, {at_once} at a time, each in a worker process (--jobs); their "
                   "stage lines interleave, each table follows when its benchmark finishes", err=True)
    else:
        click.echo(f"running {len(tasks)} benchmarks one after another, each in a fresh worker process but the last, "
                   "which runs in this one (so the peak memory is the largest one's; --jobs 2 runs two at once)",
                   err=True)
    items = [(*t, compile_cache_root, at_once > 1) for t in order]
    # one at a time, the last runs here: this process would only wait for its worker, whose memory would add
    # to this one's (JAX is loaded here already)
    in_workers, here = (items, []) if at_once > 1 else (items[:-1], items[-1:])
    errors = []
    for (cfg, _, _, _), (lines, error) in itertools.chain(run_in_workers(benchmark_task, in_workers, jobs),
                                                          ((item, benchmark_task(item)) for item in here)):
        for line in lines:
            click.echo(line)
        if error is not None:
            errors.append(f"[{cfg.benchmark}] {error}")
    return errors


def benchmark_task(task) -> tuple[list[str], str | None]:
    """One benchmark in a worker process: task = (SweepConfig, run_benchmark keyword arguments, compilation-cache
    root or None, whether other benchmarks run at the same time). Returns (its closing lines, None), or (lines
    so far, the message of a RiskRankError)."""
    cfg, kwargs, compile_cache_root, side_by_side = task
    if compile_cache_root is not None:
        compile_cache.enable(compile_cache_root)
    lines: list[str] = []
    try:
        run_benchmark(cfg, **kwargs, report_to=lines.append, side_by_side=side_by_side)
    except RiskRankError as e:
        return lines, str(e)
    return lines, None


__all__ = ["run_benchmark", "run_key", "previous_results", "run_fields", "run_tasks", "run_in_turn",
           "run_side_by_side", "benchmark_task", "FAMILIES", "ALL_BENCHMARKS"]
