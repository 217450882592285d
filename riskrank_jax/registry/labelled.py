"""Labelled tool sets for training and measuring risk heads: a benchmark's tools with its audited labels,
or registry files whose every tool declares `risk`.

Why: risk heads train and are measured only on tools whose risk someone audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from riskrank_jax.data import demo_dir, load_benchmark
from riskrank_jax.data.jsonl import read_jsonl
from riskrank_jax.errors import DataError
from riskrank_jax.paths import resolve_data_dir
from riskrank_jax.registry.loader import load_registry
from riskrank_jax.registry.tool import Tool, tool_text


@dataclass(frozen=True, eq=False)
class LabelledTools:
    """texts: tool_text of each tool; risk: int32 [N] in 1..5; name: where they came from."""

    name: str
    names: tuple[str, ...]
    texts: tuple[str, ...]
    risk: np.ndarray


def _tool_params(tool_file: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """api_name -> ((parameter, description), ...) from a Seal-Tools style tool.jsonl."""
    out = {}
    for _, rec in read_jsonl(tool_file):
        params = rec.get("parameters")
        if isinstance(rec.get("api_name"), str) and isinstance(params, dict):
            out[rec["api_name"].strip()] = tuple(
                (str(k), v.get("description", "") if isinstance(v, dict) and isinstance(v.get("description"), str)
                 else "") for k, v in params.items())
    return out


def benchmark_tools(benchmark: str, data_dir=None, with_params: bool = True) -> LabelledTools:
    """A benchmark's tool pool with its risk labels, each tool as `tool_text` would embed it (name,
    description and, where the benchmark has them and `with_params`, parameters)."""
    bench = load_benchmark(benchmark, data_dir)
    params: dict = {}
    if not with_params:
        pass
    elif benchmark == "demo":
        params = _tool_params(demo_dir() / "tool.jsonl")
    elif benchmark == "sealtools":
        params = _tool_params(resolve_data_dir(data_dir) / "seal_tools" / "Seal-Tools_Dataset" / "tool.jsonl")
    reg = bench.tools
    tools = [Tool(name=n, raw_name=n, description=d, format="benchmark", source=benchmark, params=params.get(n, ()))
             for n, d in zip(reg.names, reg.descriptions)]
    return LabelledTools(benchmark, reg.names, tuple(tool_text(t) for t in tools), np.asarray(reg.risk, np.int32))


def registry_tools(paths) -> LabelledTools:
    """Tools of registry files whose every tool declares `risk` (1..5)."""
    reg = load_registry(list(paths))
    missing = [t for t in reg.tools if t.declared_risk is None]
    if missing:
        raise DataError(f"{len(missing)} of {reg.size} tools declare no 'risk' (first: '{missing[0].name}' at "
                        f"{missing[0].where}); a risk head trains on labelled tools only")
    return LabelledTools(",".join(reg.sources), reg.names, reg.texts, np.asarray(reg.declared_risk, np.int32))
