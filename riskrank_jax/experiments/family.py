"""A benchmark family: what one kind of benchmark supplies to the sweep skeleton (``experiments.run``).

    PAPER = Family(load=..., plan=..., key_parts=..., evaluate=..., main_table=..., tables=..., results_version=2,
                   figures=...)
    run_benchmark(cfg, workdir)      # the skeleton: FAMILIES[cfg.benchmark] gives the steps above

A family gives its data and its evaluation step (big_vision's ``config.evals``); the skeleton owns the run key,
the reuse of an earlier run, the results' common fields (``RUN_FIELDS``), the files and the closing lines.
Built as a record of functions so that every benchmark walks down one ``run_benchmark``, and a new benchmark is a
new record, not a second pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# the fields of results.json the skeleton writes for every family, after the family's own sections
RUN_FIELDS = ("device", "side_by_side", "timings", "peak_rss_mb", "memory_budget", "run_key", "config",
              "reproducibility", "finished_at")


def no_figures(results: dict, out_dir: Path) -> list:
    """The figures of a family that draws none: none."""
    return []


@dataclass(frozen=True)
class Family:
    """The steps one kind of benchmark supplies (each a pure function of its arguments but for files it reads or
    writes; ``cfg`` is an ``experiments.config.SweepConfig``, ``log`` an ``experiments.stages.StageLog``):

    load(cfg, log) -> bench: the benchmark from the data directory (``cfg.data``);
    plan(cfg, bench_given, **options) -> plan: what the evaluation will run (the variants, the rows), from the
        config and whether the caller gave the benchmark itself (a test's fixture) rather than the data directory;
    key_parts(cfg, plan) -> list: what the run key hashes besides the config, the data, the encoder and
        ``results_version`` (JSON-able);
    evaluate(cfg, bench, encoder, plan, log) -> dict: results.json's sections of this family, "protocol" first;
    main_table(results) -> str: the table printed at the end of a run (and when a run is reused);
    tables(results) -> str: tables.md (the skeleton adds the stage timings and memory, ``report.run_tables``);
    figures(results, out_dir) -> paths: the figures written beside them (``no_figures``: none);
    reproducibility: what a rerun may differ by (results.json "reproducibility"; None: not stated)."""

    load: Callable[..., Any]
    plan: Callable[..., Any]
    key_parts: Callable[[Any, Any], list]
    evaluate: Callable[..., dict]
    main_table: Callable[[dict], str]
    tables: Callable[[dict], str]
    results_version: int
    figures: Callable[[dict, Path], list] = no_figures
    reproducibility: dict | None = None


__all__ = ["Family", "RUN_FIELDS", "no_figures"]
