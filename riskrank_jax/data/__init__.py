"""Benchmarks as plain arrays: ToolRegistry, QuerySet, Benchmark, and their loaders.

    from riskrank_jax.data import load_benchmark
    bench = load_benchmark("ultratool")          # or "sealtools", "demo"
    bench.tools.risk, bench.tests["test"].gold   # int32 [N], int32 [Q, G] (-1 padded)

    types.py        ToolRegistry, QuerySet, Benchmark (the array conventions of the whole package)
    ultratool.py    UltraTool's files and protocols; sealtools.py  Seal-Tools and the embedded demo
    livemcpbench.py LiveMCPBench: real MCP servers' tools and tasks (zero-shot; tools keyed by server and name)
    labels.py       the paper's released risk labels
    jsonl.py        strict JSON / JSON Lines readers;  demo/  the embedded demo benchmark's files

Why plain numpy arrays: every later stage (JAX or numpy) takes them as they are, with no conversion layer.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from riskrank_jax.data.sealtools import load_demo, load_sealtools
from riskrank_jax.data.types import Benchmark, QuerySet, ToolRegistry, pad_gold
from riskrank_jax.data.ultratool import load_ultratool
from riskrank_jax.errors import DataError
from riskrank_jax.paths import resolve_data_dir
from riskrank_jax.scoring import is_high_permission, is_risky

BENCHMARKS = ("demo", "ultratool", "sealtools")


def demo_dir() -> Path:
    return Path(str(resources.files("riskrank_jax.data") / "demo"))


def load_benchmark(name: str, data_dir=None) -> Benchmark:
    """Load a benchmark by name. `data_dir` (or $RISKRANK_DATA) holds the real ones (docs/data.md)."""
    if name == "demo":
        return load_demo(demo_dir())
    if name not in BENCHMARKS:
        raise DataError(f"unknown benchmark '{name}'; choose one of {', '.join(BENCHMARKS)}")
    root = resolve_data_dir(data_dir)
    sub = root / ("ultratool" if name == "ultratool" else "seal_tools")
    if not sub.is_dir():
        raise DataError(f"{sub} does not exist: the {name} benchmark is missing from the data directory {root}")
    return load_ultratool(sub) if name == "ultratool" else load_sealtools(sub)


def benchmark_stats(bench: Benchmark) -> dict:
    """Counts for `riskrank-jax data stats` (see issue 2 for the keys)."""
    splits = {bench.data_notes.get("train_split", "train"): bench.train, **bench.tests}
    risk = bench.tools.risk
    out = {
        "benchmark": bench.name,
        "protocol": bench.protocol,
        "tools": bench.tools.size,
        "splits": {k: v.size for k, v in splits.items()},
        "mean_gold": {k: round(float(v.gold_mask.sum(-1).mean()), 3) for k, v in splits.items()},
        "high_risk_queries": {k: int(_high_risk(v, risk).sum()) for k, v in splits.items()},
        "risk_histogram": {str(r): int((risk == r).sum()) for r in range(1, 6)},
        "perm_level_ge2": int(is_high_permission(bench.tools.perm_level).sum()),
        "folds": bench.n_folds,
        "mapped": {k: v for k, v in bench.data_notes.items() if k != "train_split"},
    }
    return out


def _high_risk(qs: QuerySet, risk: np.ndarray) -> np.ndarray:
    r = np.where(qs.gold >= 0, risk[np.maximum(qs.gold, 0)], 0)
    return is_risky(r).any(-1)


__all__ = ["Benchmark", "QuerySet", "ToolRegistry", "pad_gold", "load_benchmark", "benchmark_stats", "BENCHMARKS"]
