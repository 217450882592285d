"""Stages the sweep and the `riskrank-jax` commands share: timed steps, embedding a benchmark, training a run.

    log = StageLog("demo")
    emb = log.run("embed (cached)", embed_all, bench, encoder, cache)   # {"tools", "train", <split>...}
    res = train_run(bench, emb, seeds, TrainConfig(), "core", encoder.model_id, ckpt_root)
    log.timings, log.peak_rss_mb                                        # seconds and peak memory per stage

Why shared: the sweep and the `riskrank-jax` commands embed and train the same way, with the same caches.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import jax
import numpy as np

from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.model import heads
from riskrank_jax.model.risk_head import train_risk_heads
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import lambda_run_from_plain
from riskrank_jax.runtime.heap import release_freed_heap


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MiB (``resource.getrusage``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1 << 20) if sys.platform == "darwin" else peak / 1024, 1)  # bytes on macOS, KiB else


@dataclass
class StageLog:
    """Progress line per stage with its time; times and peak memory end up in results.json. After each stage
    the heap's freed pages go back to the OS (``runtime.heap``)."""

    benchmark: str
    timings: dict = field(default_factory=dict)
    peak_rss_mb: dict = field(default_factory=dict)

    def run(self, name, fn, *args, **kwargs):
        click.echo(f"[{self.benchmark}] {name} ...", err=True)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        self.timings[name] = round(self.timings.get(name, 0.0) + dt, 3)
        self.peak_rss_mb[name] = peak_rss_mb()
        release_freed_heap()  # what the stage freed goes back to the OS, not on to the next stage's peak
        click.echo(f"[{self.benchmark}] {name} done in {dt:.1f}s (peak RSS {self.peak_rss_mb[name]:.0f} MiB)",
                   err=True)
        return out


def short_hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def embed_all(bench, encoder, cache, *, named: bool = False) -> dict[str, np.ndarray]:
    """Embeddings of tools, training queries and each test split (and, with ``named``, of the tools' named
    texts as "tools_named"); every unique text encoded once."""
    parts = {"tools": bench.tools.descriptions, "train": bench.train.texts,
             **{split: qs.texts for split, qs in bench.tests.items()}}
    if named:
        parts["tools_named"] = bench.tools.named_texts
    vecs = embed_texts(encoder, [t for texts in parts.values() for t in texts], cache)
    out, pos = {}, 0
    for name, texts in parts.items():
        out[name] = vecs[pos:pos + len(texts)]
        pos += len(texts)
    return out


def train_run(bench, emb, seeds, train_cfg, name: str, encoder_id: str, ckpt_root: Path, *, progress=True,
              memory_budget: int | None = None):
    """Train (or reuse the checkpoint of) every seed x fold model of one run under <ckpt_root>/<bench>/
    (``memory_budget``: bytes of training intermediates, see ``train_models``; None: its default)."""
    meta = {"benchmark": bench.name, "protocol": bench.protocol, "encoder": encoder_id, "variant": name,
            "seeds": list(seeds), "folds": bench.n_folds, "data": bench.fingerprint()}
    run_dir = Path(ckpt_root) / bench.name / f"{name}-{short_hash([meta, dataclasses.asdict(train_cfg)])}"
    # the checkpoint's data identity: texts, labels, splits and the encoder id, never the float bits of embeddings
    data_id = short_hash([bench.fingerprint(), encoder_id])
    run = TrainRun(tuple(seeds), checkpoint_dir=run_dir, run_meta=meta, progress=progress, data_id=data_id,
                   **({} if memory_budget is None else {"memory_budget": memory_budget}))
    return train_models(emb["tools"], emb["train"], bench.train.gold, bench.tools.risk, bench.train_fold_mask,
                        train_cfg, run)


def train_lambda_run(bench, emb, seeds, train_cfg, plain, name: str, encoder_id: str, ckpt_root: Path, *,
                     progress=True, memory_budget: int | None = None):
    """``train_run`` of the λ-aware run ``train_cfg`` that trains only its λ ≠ 0 models and takes the λ = 0 ones
    from ``plain``, the plain run with the same other hyper-parameters, seeds and folds (the same models up to
    float rounding: ``model.train_config.plain_config``)."""
    others = tuple(lam for lam in train_cfg.lambdas if lam != 0.0)
    rest = train_run(bench, emb, seeds, dataclasses.replace(train_cfg, lambdas=others), name, encoder_id, ckpt_root,
                     progress=progress, memory_budget=memory_budget) if others else None
    return lambda_run_from_plain(plain, rest, train_cfg)


def risk_only_scores(t_emb, risk, seeds, config) -> np.ndarray:
    """Predicted risk [S, N] of the risk heads (``RiskHeadConfig`` ``config``) trained alone on the registry, one per
    seed."""
    params = train_risk_heads(t_emb, risk, seeds, config)
    return np.asarray(jax.jit(jax.vmap(heads.risk, in_axes=(0, None)))(params, np.asarray(t_emb)))


def training_summary(res) -> dict:
    """Models, their index and each one's best epoch and held-out loss (results.json "training")."""
    best = np.asarray(res.best_epoch)
    held = np.asarray(res.heldout_loss)
    return {
        "models": len(res.model_index),
        "model_index": res.model_index,
        "best_epoch": best.tolist(),
        "best_heldout_loss": [round(float(held[m, best[m]]), 6) for m in range(best.shape[0])],
    }


__all__ = ["StageLog", "peak_rss_mb", "short_hash", "embed_all", "train_run", "train_lambda_run", "risk_only_scores",
           "training_summary"]
