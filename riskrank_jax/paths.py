"""Where data, caches and checkpoints live. Explicit argument, then environment, then default.

Why this order: an explicit argument always wins, and a default never needs configuring.
"""

from __future__ import annotations

import os
from pathlib import Path

from riskrank_jax.errors import DataError

DATA_ENV = "RISKRANK_DATA"
CACHE_ENV = "RISKRANK_CACHE"
RUNS_ENV = "RISKRANK_RUNS"

REPO_ROOT = Path(__file__).resolve().parent.parent
# the committed reference results; written only on request (`python -m riskrank_jax.sweep --update-reference`)
REFERENCE_RESULTS_DIR = REPO_ROOT / "experiments" / "results"

_HOW_TO_GET_DATA = (
    "The real benchmarks are not bundled. Pass --data-dir DIR (or set RISKRANK_DATA=DIR) where DIR holds "
    "ultratool/ and seal_tools/ laid out as described in docs/data.md: UltraTool from "
    "github.com/JoeYing1019/UltraTool (data/English-dataset/...), Seal-Tools from "
    "github.com/fairyshine/Seal-Tools (Seal-Tools_Dataset/...), and the risk labels "
    "(from_paper_release/*_risk_labels_resolved.json) from github.com/qli447/risk-aware-tool-retrieval-release. "
    "The embedded demo benchmark (--benchmark demo) needs none of this."
)


def default_data_candidates() -> list[Path]:
    """Places tried when neither --data-dir nor RISKRANK_DATA is given."""
    return [REPO_ROOT.parent / "shared" / "datasets", Path.cwd().parent / "shared" / "datasets"]


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Return the benchmark root: `data_dir`, then $RISKRANK_DATA, then the first of `default_data_candidates()`
    that exists (see docs/data.md for the layout)."""
    if data_dir is not None:
        p = Path(data_dir).expanduser().resolve()
        if not p.is_dir():
            raise DataError(f"--data-dir {p} is not a directory. {_HOW_TO_GET_DATA}")
        return p
    env = os.environ.get(DATA_ENV)
    if env:
        p = Path(env).expanduser().resolve()
        if not p.is_dir():
            raise DataError(f"{DATA_ENV}={env} is not a directory. {_HOW_TO_GET_DATA}")
        return p
    for cand in default_data_candidates():
        if cand.is_dir():
            return cand.resolve()
    raise DataError(f"No benchmark data found. {_HOW_TO_GET_DATA}")


def real_data_available() -> bool:
    try:
        root = resolve_data_dir()
    except DataError:
        return False
    return (root / "ultratool").is_dir() and (root / "seal_tools").is_dir()


def resolve_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Embedding cache: `cache_dir`, then $RISKRANK_CACHE, then $XDG_CACHE_HOME/riskrank-jax (~/.cache)."""
    if cache_dir is not None:
        p = Path(cache_dir)
    elif os.environ.get(CACHE_ENV):
        p = Path(os.environ[CACHE_ENV])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
        p = Path(base) / "riskrank-jax"
    p = p.expanduser().resolve()
    p.mkdir(parents=True, exist_ok=True)
    return p


def default_checkpoint_dir() -> Path:
    return (REPO_ROOT / "checkpoints").resolve()


def resolve_runs_dir(out_dir: str | os.PathLike | None = None) -> Path:
    """Root of a sweep's outputs (<root>/<benchmark>/): `out_dir`, then $RISKRANK_RUNS, then runs/ at the
    repository root (ignored by git, so a normal run never rewrites tracked files)."""
    if out_dir is not None:
        p = Path(out_dir)
    elif os.environ.get(RUNS_ENV):
        p = Path(os.environ[RUNS_ENV])
    else:
        p = REPO_ROOT / "runs"
    return p.expanduser().resolve()
