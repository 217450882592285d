"""The tuned-encoder families (``ft_*`` rows): the sentence encoder itself fine-tuned per seed x fold.

    tuned = fit_tuned_encoders(bench, emb, first_stages, cfg, encoder, ckpt_root)   # TunedModels
    x = with_tuned(inputs, tuned, split)          # the split's tuned relevance and risk, [Q, S, N] each

For every model m = (seed, fold): the top layers of the encoder are trained (``model.encoder_tune``) on the
fold's training queries less a held-out share, with hard negatives from the fold's hybrid first stage; the
layers of the epoch with the best held-out NDCG@5 of the tuned cosine are kept (``TuneConfig.epochs`` is the
most); the tools (named texts and descriptions) and every query are embedded with them; the zero-shot risk
head is retrained on the tuned description embeddings. The gate: relevance ``(1 − γ)·hybrid_frozen + γ·hybrid_tuned``
(the frozen hybrid with the fold's fusion weight over the named texts, the tuned one with its own weight chosen
on the held-out queries, as the tuned cosine can need less BM25) with γ ∈ ``GATES`` chosen on the held-out
queries by NDCG@5, ties to the smaller γ; γ = 0 is the frozen model, risk head included, so on held-out training queries
no tuned row is below its frozen counterpart. The models still to train are tuned together, one program per
step over the model axis with one orbax checkpoint of their stacked state (``model.encoder_tune.tune_encoders``),
in chunks that bound the state held at once on one CPU device (``chunk_size``); each model's arrays are saved
when its chunk ends, so a second sweep neither trains nor recomputes the lower layers.

Why gated per model: with a few hundred training queries a tuned encoder can lose to the frozen one, and a
worse ranker must not win.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import jax.numpy as jnp

from riskrank_jax import metrics
from riskrank_jax.experiments.stages import risk_only_scores, short_hash
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.encoder_tune import TextStates, TuneConfig, TuneJob, embed_states, tune_encoders
from riskrank_jax.model.groups import maps_sequentially
from riskrank_jax.model.tune_step import tune_bytes
from riskrank_jax.model.tuned_encoder import TunedEncoder
from riskrank_jax.model.heldout import GATES, gate_index, heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.retrieve.hybrid import choose_weight, fuse
from riskrank_jax.scoring import rank_order_host

HARD_POOL = 40  # first-stage rows searched for each training query's hard negatives
STATE_BUDGET = 256 << 20  # bytes of tuned models' stacked state one run holds on one CPU device (``chunk_size``)


@dataclass(frozen=True)
class TunedModels:
    """Every seed x fold model m = s·F + f: gate [M], held-out NDCG@5 per gate [M, G], the fold's fusion weight
    of the frozen hybrid [M] and of the tuned one (chosen on the held-out queries) [M], tool vectors (named
    texts) [M, N, d], risk [M, N] (the frozen risk head's where γ = 0), query vectors {split: [M, Q, d]} (zeros
    for the queries of other folds), and per model how it trained (``summary``)."""

    config: TuneConfig
    model_index: list
    gate: np.ndarray
    heldout_ndcg_by_gate: np.ndarray
    weight: np.ndarray
    tuned_weight: np.ndarray
    tools: np.ndarray
    risk: np.ndarray
    queries: dict
    summary: list


def _ndcg5(scores, gold) -> float:

    top = rank_order_host(np.asarray(scores, np.float32))[:, :5]
    return float(np.asarray(metrics.ndcg_at_k(jnp.asarray(top), jnp.asarray(gold), k=5)).mean())


def choose_gate(frozen, tuned, gold) -> tuple[float, list[float]]:
    """(γ, held-out NDCG@5 per γ of ``GATES``) for relevance (1 − γ)·frozen + γ·tuned, [Q, N] each
    (``model.heldout.gate_index``: ties to the smaller γ)."""
    table = np.asarray([_ndcg5((1 - g) * frozen + g * tuned, gold) for g in GATES])
    return GATES[int(gate_index(table))], [round(float(v), 6) for v in table]


def _texts(bench) -> tuple[list[str], dict]:
    """Every text to embed once (named tools, descriptions, then unique queries) and each part's rows."""
    texts = list(bench.tools.named_texts) + list(bench.tools.descriptions)
    n = bench.tools.size
    rows = {"named": np.arange(n), "description": n + np.arange(n)}
    where: dict[str, int] = {}
    for part, qs in [("train", bench.train), *bench.tests.items()]:
        idx = []
        for t in qs.texts:
            if t not in where:
                where[t] = len(texts)
                texts.append(t)
            idx.append(where[t])
        rows[part] = np.asarray(idx, np.int64)
    return texts, rows


def _model_dir(cfg, bench, encoder_id: str, ckpt_root: Path) -> Path:
    meta = [bench.name, bench.fingerprint(), encoder_id, cfg.tune.to_dict(), dataclasses.asdict(cfg.risk_head),
            list(GATES)]
    return Path(ckpt_root).resolve() / bench.name / f"tuned-{short_hash(meta)}"


def _saved(ctx: dict, seed: int, fold: int) -> dict | None:
    """Model (seed, fold)'s arrays from an earlier sweep, or None."""
    saved = ctx["dir"] / f"seed{seed}-fold{fold}" / "arrays.npz"
    if not saved.is_file():
        return None
    with np.load(saved) as z:
        return {k: z[k] for k in z.files}


def _job(ctx: dict, seed: int, fold: int) -> tuple[TuneJob, dict]:
    """Model (seed, fold)'s tuning job (its training queries less the held-out share, the fold's hard negatives,
    the held-out NDCG@5 of the tuned cosine as its epoch chooser) and what ``_finish`` needs of it."""
    bench, fs, cfg, encoder, rows = ctx["bench"], ctx["fs"], ctx["cfg"], ctx["encoder"], ctx["rows"]
    gold, w = np.asarray(bench.train.gold), float(fs.weights["named"][fold])
    train_ids, held = heldout_split(np.asarray(bench.train_fold_mask)[fold], cfg.tune.heldout_fraction, seed, fold)
    if fold not in ctx["hard"]:  # the fold's frozen hybrid and its hard negatives: shared by the fold's seeds
        frozen_train = np.asarray(fuse(fs.train_dense_named, fs.train_bm25_named, w))
        ctx["hard"][fold] = frozen_train, np.asarray(best_non_gold(frozen_train, gold, HARD_POOL))
    frozen_train, hard = ctx["hard"][fold]

    def heldout_ndcg(t) -> float:  # the tuned cosine on the held-out queries: which epoch to keep
        v = embed_states(t, encoder, ctx["states"](), np.concatenate([rows["named"], rows["train"][held]]))
        return _ndcg5(v[bench.tools.size:] @ v[:bench.tools.size].T, gold[held])

    return TuneJob(train_ids, hard, int(seed), heldout_ndcg), {"seed": seed, "fold": fold, "weight": w,
                                                               "train_ids": train_ids, "held": held,
                                                               "frozen_train": frozen_train}


def _finish(ctx: dict, job: dict, tuned) -> dict:
    """Model ``job``'s arrays (see ``TunedModels``) from its tuned encoder, saved next to its checkpoint."""
    bench, fs, cfg, encoder, rows = ctx["bench"], ctx["fs"], ctx["cfg"], ctx["encoder"], ctx["rows"]
    states, gold = ctx["states"](), np.asarray(bench.train.gold)
    seed, fold, held, frozen_train = job["seed"], job["fold"], job["held"], job["frozen_train"]
    test_rows = {split: rows[split][np.asarray(bench.test_fold[split]) == fold] for split in bench.tests}
    need = np.unique(np.concatenate([rows["named"], rows["description"], rows["train"][held], *test_rows.values()]))
    vec = np.zeros((states.size, states.states.shape[1]), np.float32)  # only the texts this model scores
    vec[need] = embed_states(tuned, encoder, states, need)
    t_named = vec[rows["named"]]
    held_cos = vec[rows["train"]][held] @ t_named.T  # [held queries, N]: the tuned cosine, for both choices
    tuned_w, _ = choose_weight(held_cos, fs.train_bm25_named[held], gold[held])
    tuned_train = np.asarray(fuse(held_cos, fs.train_bm25_named[held], tuned_w))
    gate, table = choose_gate(frozen_train[held], tuned_train, gold[held])
    risk = risk_only_scores(vec[rows["description"]], bench.tools.risk, (seed,), cfg.risk_head)[0]
    out = {"gate": np.float32(gate), "table": np.asarray(table, np.float32), "weight": np.float32(job["weight"]),
           "tuned_weight": np.float32(tuned_w), "tools": t_named, "risk": risk.astype(np.float32),
           "steps": np.int64(len(tuned.losses)), "seconds": np.float32(tuned.seconds),
           "final_loss": np.float32(tuned.losses[-5:].mean()), "train_queries": np.int64(job["train_ids"].size),
           "epoch_scores": np.asarray(tuned.epoch_scores, np.float32),
           "heldout_queries": np.int64(held.size), **{f"q_{split}": vec[rows[split]] for split in bench.tests}}
    path = ctx["dir"] / f"seed{seed}-fold{fold}"
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / "arrays.tmp.npz"
    np.savez(tmp, **out)
    tmp.replace(path / "arrays.npz")  # written whole or not at all: a crash never leaves arrays that look complete
    return out


def chunk_size(encoder, config: TuneConfig, n_models: int) -> int:
    """Models tuned together in one run: all of them where the model axis runs in parallel (vmap); on one CPU
    device, where the models of a run take their steps one after another anyway, as many as ``STATE_BUDGET``
    bytes of stacked state (layers, AdamW moments, best layers) hold, so that the sweep's peak memory does not
    grow with its number of models."""

    if not maps_sequentially():
        return n_models
    per_model = tune_bytes(TunedEncoder.untrained(encoder, config.layers).top, 1, 1, 8, 8, 1)[0] * 4 // 3
    return max(1, min(n_models, STATE_BUDGET // per_model))


def _train(ctx: dict, todo: list[dict]) -> list[dict]:
    """The arrays of the models ``todo`` ({"seed", "fold"} each), tuned ``chunk_size`` at a time, each chunk in one
    run (one orbax checkpoint of its stacked state, ``model.encoder_tune.tune_encoders``) and saved when it ends:
    a killed sweep resumes in the chunk it stopped in."""
    bench, cfg, encoder = ctx["bench"], ctx["cfg"], ctx["encoder"]
    size = chunk_size(encoder, cfg.tune, len(todo))
    out = []
    for c0 in range(0, len(todo), size):
        chunk = todo[c0:c0 + size]
        jobs = [_job(ctx, m["seed"], m["fold"]) for m in chunk]
        names = [f"seed{m['seed']}-fold{m['fold']}" for m in chunk]
        rows = ctx["rows"]
        tuned = tune_encoders(encoder, ctx["states"](), rows["train"], rows["named"], np.asarray(bench.train.gold),
                              [j for j, _ in jobs], cfg.tune, checkpoint_dir=ctx["dir"] / f"run-{names[0]}",
                              data_id=short_hash([bench.fingerprint(), encoder.model_id, names]),
                              desc=f"[{bench.name}] tuning encoder (seeds x folds: {c0 + len(chunk)} of {len(todo)})",
                              memory_budget=cfg.runtime.memory_budget)
        out.extend(_finish(ctx, info, t) for (_, info), t in zip(jobs, tuned))
    return out


def fit_tuned_encoders(bench, emb, fs, cfg, encoder, ckpt_root) -> TunedModels:
    """Every seed x fold tuned model of ``cfg.tune`` (see the module doc); ``fs``: the sweep's first stages.
    The models without saved arrays train together, in one program per step."""
    if hasattr(encoder, "load"):
        encoder = encoder.load()  # a LazyEncoder: the weights are needed now
    if not hasattr(encoder, "lower_states"):
        raise RiskRankError(f"the ft_* rows tune a BERT-family encoder's top layers; {getattr(encoder, 'name', encoder)} "
                            "is not one "
                            "(leave --encoder at minilm or a BERT directory for them)")
    texts, rows = _texts(bench)
    frozen_layers = encoder.shape.num_layers - cfg.tune.layers
    cache: dict = {}

    def states():
        if "s" not in cache:
            t0 = time.perf_counter()
            cache["s"] = TextStates.build(encoder, texts, frozen_layers)
            cache["seconds"] = time.perf_counter() - t0
        return cache["s"]

    ctx = {"bench": bench, "fs": fs, "cfg": cfg, "encoder": encoder, "states": states, "rows": rows,
           "dir": _model_dir(cfg, bench, encoder.model_id, ckpt_root), "hard": {}}
    index = [{"seed": int(s), "fold": int(f)} for s in cfg.seeds for f in range(bench.n_folds)]
    per = [_saved(ctx, m["seed"], m["fold"]) for m in index]
    todo = [i for i, p in enumerate(per) if p is None]
    if todo:
        for i, arrays in zip(todo, _train(ctx, [index[i] for i in todo])):
            per[i] = arrays
    frozen_risk = np.asarray(risk_only_scores(emb["tools"], bench.tools.risk, cfg.seeds, cfg.risk_head))
    n_f = bench.n_folds
    risk = np.stack([p["risk"] if float(p["gate"]) > 0 else frozen_risk[i // n_f] for i, p in enumerate(per)])
    summary = [{**m, "gate": float(p["gate"]), "tuned_weight": float(p["tuned_weight"]),
                "heldout_ndcg@5_by_epoch": np.round(p["epoch_scores"], 4).tolist(),
                "epoch": int(np.nanargmax(p["epoch_scores"])) + 1, "steps": int(p["steps"]),
                "seconds": round(float(p["seconds"]), 1),
                "final_loss": round(float(p["final_loss"]), 4), "train_queries": int(p["train_queries"]),
                "heldout_queries": int(p["heldout_queries"])} for m, p in zip(index, per)]
    if "seconds" in cache:
        summary.append({"lower_layer_states_seconds": round(cache["seconds"], 1)})
    return TunedModels(cfg.tune, index, np.array([p["gate"] for p in per]), np.stack([p["table"] for p in per]),
                       np.array([p["weight"] for p in per]), np.array([p["tuned_weight"] for p in per]),
                       np.stack([p["tools"] for p in per]), risk,
                       {split: np.stack([p[f"q_{split}"] for p in per]) for split in bench.tests}, summary)


def with_tuned(x, tuned: TunedModels, split: str, n_seeds: int):
    """``x`` (SplitInputs with its first stages) with the tuned relevance and risk of ``split`` as
    first[("ft_hybrid", "named")] and first[("ft_risk", "named")], [Q, S, N] each (query axis first, so query
    chunks slice them): each query under its fold's model of every seed."""
    fold = np.asarray(x.fold)
    n_q, n_t = fold.size, tuned.tools.shape[1]
    n_f = tuned.gate.size // n_seeds
    dense, bm25 = x.first["dense", "named"], x.first["bm25", "named"]
    rel = np.zeros((n_q, n_seeds, n_t), np.float32)
    risk = np.zeros_like(rel)
    for m in range(tuned.gate.size):
        s, f = divmod(m, n_f)
        idx = np.flatnonzero(fold == f)
        w, g = tuned.weight[m], float(tuned.gate[m])
        frozen = np.asarray(fuse(dense[idx], bm25[idx], w))
        if g > 0:
            q = tuned.queries[split][m][idx]
            frozen = (1 - g) * frozen + g * np.asarray(fuse(q @ tuned.tools[m].T, bm25[idx], tuned.tuned_weight[m]))
        rel[idx, s] = frozen
        risk[idx, s] = tuned.risk[m]
    return dataclasses.replace(x, first={**x.first, ("ft_hybrid", "named"): rel, ("ft_risk", "named"): risk})


def tuned_summary(tuned: TunedModels) -> dict:
    """results.json "tuned_encoder": the configuration, and per model its gate, held-out NDCG@5 of every gate and
    how it trained."""
    return {"config": tuned.config.to_dict(), "gates": list(GATES), "models": tuned.summary,
            "heldout_ndcg@5_by_gate": np.round(tuned.heldout_ndcg_by_gate, 4).tolist(),
            "kept_tuned": int((tuned.gate > 0).sum()), "of": int(tuned.gate.size)}
