"""`riskrank-jax fit`: train a Ranker's heads (and, asked, the encoder's top layers) on your own log of
(query, tools used), or keep it zero-shot.

    ranker, report = fit_ranker(["examples/mcp_tools.json"], "log.jsonl")
    ranker.save("my_ranker")                     # then: riskrank-jax rank ... --model my_ranker
    ranker, report = fit_ranker(files, "log.jsonl", config=FitConfig(tune_encoder=FIT_TUNE_CONFIG))

A seeded ``heldout_fraction`` of the logged queries is held out (``model.heldout``), every copy of a repeated
request on the same side. The dual heads
(``model.train.train_models``, one fold, the given seeds) are trained on the rest, with the registry's
assessed risk levels as the risk target, and scored as a Ranker (head f_rel − λ·risk, graph with co-occurrence edges from the training queries) on
the held-out queries by NDCG@k, against the zero-shot ranker (``Ranker.from_registry``'s defaults). When
the heads beat it on average over seeds, the best seed's settings are retrained on every logged query
and that Ranker is returned; otherwise the zero-shot ranker is (a small log rarely beats the hybrid
first stage). The report says which and why, with the measured numbers.

With ``FitConfig.tune_encoder`` (``--tune-encoder``) the encoder's top layers are also fine-tuned
(``model.encoder_tune``) on the training queries' (query, gold tool text) pairs, with hard negatives from the
zero-shot ranker's first stage, for the first ``tune_seeds`` seeds. The tuned ranker is the zero-shot ranker
(same config, same risk levels, scores and sources) with the tuned encoder's tool vectors and a graph rebuilt
on them; it is kept only when its mean held-out NDCG@k beats the better of the zero-shot ranker and the heads,
and is then (``tune_retrain``) tuned again on every logged query with the best seed, unless the step budget
already cut the held-out run's epochs (a long log: the retrain would take as many steps again to add the
held-out requests; the saved layers are then the very ones measured held out). Its encoder is saved
with the ranker (``DIR/encoder``, a Hugging Face BERT directory) and embeds the queries of ``rank --model``.

Risk under a tuned encoder: the registry's risk is assessed once, with the base encoder's vectors and the
shipped (or given) risk head, and stored as levels and scores; a zero-shot-style ranker never runs the head at
rank time, so the tuned ranker's risk levels, scores and sources are the zero-shot ones exactly (no head is
retrained on the tuned vectors): the gateway's allow / confirm decisions do not depend on what fit chose.

Why it may keep the zero-shot ranker: a small log rarely beats it, and a worse trained ranker must not win.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from riskrank_jax import metrics
from riskrank_jax.encode.families import embed_logged_requests
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.errors import DataError, RankerError
from riskrank_jax.model.checkpoints import RUN_FILE, RunStore, read_run
from riskrank_jax.model.encoder_tune import tune_encoder
from riskrank_jax.model.heldout import heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.model.text_states import TextStates
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.model.tune_config import TuneConfig, epochs_run
from riskrank_jax.model.tuned_encoder import embed_states, save_tuned_encoder
from riskrank_jax.rank.query_log import read_query_log
from riskrank_jax.rank.ranker import RankConfig, Ranker
from riskrank_jax.rank.registry_inputs import registry_graph

# --tune-encoder's settings: the sweep's epochs and learning rate, with 3 layers (chosen by benchmarks/fit_tune.py;
# the figures are in docs/registry.md, "Fine-tuning the encoder").
# a long log is passed over fewer times (whole epochs within step_budget steps), so tuning costs about the same
# from a few thousand logged requests on
FIT_TUNE_CONFIG = TuneConfig(layers=3, epochs=4, lr=2e-4, step_budget=512)
HARD_CHUNK = 1024  # queries whose first-stage scores [chunk, N] are held at once while drawing hard negatives


@dataclass(frozen=True)
class FitConfig:
    """seeds: one model per seed; epochs of train_models; heldout_fraction: the share of the logged queries held
    out (``model.heldout.heldout_split`` on the first seed);
    lam / alpha: the trained ranker's λ (on f_rel's scale) and graph α; k: the NDCG cut-off.
    tune_encoder: also fine-tune the encoder (None: do not); tune_seeds: how many of ``seeds`` (the first) tune
    one (each costs a full tuning run: minutes on a CPU); tune_retrain: when the tuned ranker wins, tune once
    more on every logged query (else keep the held-out-trained layers of the best seed), unless the step budget
    cut the held-out run's epochs (``retrains``)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 10
    heldout_fraction: float = 0.2
    lam: float = 0.1
    alpha: float = 0.2
    k: int = 5
    tune_encoder: TuneConfig | None = None
    tune_seeds: int = 1
    tune_retrain: bool = True

    def retrains(self, n_train: int) -> bool:
        """Whether a winning tuned encoder is tuned again on every request, after a held-out run over
        ``n_train`` requests: ``tune_retrain``, and that run took all its epochs (within the step budget)."""
        tune = self.tune_encoder
        return self.tune_retrain and (tune is None or epochs_run(tune, n_train) == tune.epochs)


def _head_ranker(zero: Ranker, params, gold, cfg: FitConfig, provenance: dict) -> Ranker:
    graph = (registry_graph(zero.tool_emb, zero.tool_texts, zero.risk_levels, gold)
             if cfg.alpha > 0 else None)  # bounded as the zero-shot registry graph is (O(N) edges)
    return Ranker.build(encoder_id=zero.encoder_id, tool_names=zero.tool_names, tool_texts=zero.tool_texts,
                        tool_emb=zero.tool_emb, risk_levels=zero.risk_levels, perm_level=zero.perm_level,
                        params=params, graph=graph, risk_source=zero.risk_source, risk_scores=zero.risk_scores,
                        config=RankConfig(lam=cfg.lam, alpha=cfg.alpha, k=cfg.k, first_stage="dense"),
                        provenance=provenance)


def _tuned_ranker(zero: Ranker, tool_emb, encoder_id: str, provenance: dict) -> Ranker:
    """The zero-shot ranker over tuned tool vectors [N, d]: its config, risk and permission arrays as they are;
    its graph (when it has one) rebuilt as ``zero_shot_graph`` builds it, on the tuned vectors."""
    graph = None
    if zero.graph is not None:
        graph = registry_graph(tool_emb, zero.tool_texts, zero.risk_levels)
    return Ranker.build(**{**_zero_fields(zero), "encoder_id": encoder_id, "tool_emb": tool_emb, "graph": graph},
                        provenance=provenance)


def _ndcg(ranker: Ranker, q_emb, texts, gold, k: int) -> float:
    ids = ranker.rank(q_emb, k=k, q_texts=list(texts))
    return float(np.asarray(metrics.ndcg_at_k(ids, gold, k=k)).mean())


def _train(zero: Ranker, q_emb, gold, mask, seeds, cfg: FitConfig, progress: bool):
    return train_models(zero.tool_emb, q_emb, gold, zero.risk_levels, mask[None], TrainConfig(epochs=cfg.epochs),
                        TrainRun(tuple(seeds), progress=progress))


def _heldout(queries, config: FitConfig, log_path) -> np.ndarray:
    """bool [Q]: the held-out queries (``model.heldout.heldout_split``, drawn from the first seed), every copy of
    a request text on one side: a request the log repeats is never scored held out after training on it;
    DataError when too few are left on either side."""
    if not 0.0 < config.heldout_fraction < 1.0:
        raise DataError(f"heldout_fraction must be in (0, 1), got {config.heldout_fraction}", log_path)
    size, texts = len(queries), np.asarray(queries, dtype=str)
    _, held_ids = heldout_split(np.arange(size), config.heldout_fraction, config.seeds[0], groups=texts)
    distinct = np.unique(texts).size
    if distinct < 3 or size - held_ids.size < 2:
        raise DataError(f"{size} logged queries, {distinct} distinct; need at least 3 distinct "
                        f"requests (a share of {config.heldout_fraction:g} of them is held out to check the trained "
                        "ranker)", log_path)
    held = np.zeros(size, bool)
    held[held_ids] = True
    return held


def fit_ranker(files, log_path, *, encoder=None, cache=None, config: FitConfig = FitConfig(),
               zero_shot_config: RankConfig | None = None, risk_head=None, trust_annotations: bool = False,
               progress: bool = True, work_dir=None, checkpoint_dir=None):
    """(Ranker, report dict) — see the module docstring. Raises DataError for a bad or too short log.

    progress: bars (on a terminal, with an ETA) over the heads' epochs and the encoder's tuning steps. work_dir:
    where a tuned encoder is written before ``Ranker.save`` copies it into the ranker directory (default: a
    temporary directory removed when the process exits). checkpoint_dir: where each encoder-tuning run keeps its
    orbax checkpoints, under a key of the registry, the log, the encoder and the config (None: none kept); a
    killed fit run again with the same inputs resumes each tuning run where it stopped, and a finished one is
    reused without training (with progress, a line on stderr says so: "fit: resuming tuning run KEY/heldout-seed0
    at step 10 of 20"; tests/test_fit_kill_resume.py)."""
    t_start = time.perf_counter()
    zero = Ranker.from_registry(files, encoder=encoder, cache=cache, config=zero_shot_config,
                                risk_head=risk_head, trust_annotations=trust_annotations)
    log = read_query_log(log_path, zero.tool_names)
    held = _heldout(log.queries, config, log_path)
    _check_tune(config, zero, log.gold)
    k = min(config.k, zero.size)
    q_emb = embed_logged_requests(zero.query_encoder(), list(log.queries), cache)
    texts = np.array(log.queries, dtype=object)
    seconds = {"zero_shot": round(time.perf_counter() - t_start, 1)}
    t0 = time.perf_counter()
    res = _train(zero, q_emb, log.gold, ~held, config.seeds, config, progress)
    ev = (q_emb[held], texts[held], log.gold[held], k)
    zero_ndcg = _ndcg(zero, *ev)
    head_ndcg = [_ndcg(_head_ranker(zero, res.model_params(m), log.gold[~held], config, {}), *ev)
                 for m in range(res.n_models)]
    seconds["heads"] = round(time.perf_counter() - t0, 1)
    report = {"log": str(log_path), "queries": log.size, "heldout": int(held.sum()), "k": k,
              f"ndcg@{k}_zero_shot": round(zero_ndcg, 4), f"ndcg@{k}_head_per_seed": [round(x, 4) for x in head_ndcg],
              "fit": asdict(config), "seconds": seconds}
    tuning = (None if config.tune_encoder is None else
              _tune_heldout(zero, log, held, q_emb, config, progress, checkpoint_dir, report))
    today = max(zero_ndcg, float(np.mean(head_ndcg)))
    if tuning is not None and float(np.mean(tuning.ndcg)) > today:
        ranker = _tuned_final(zero, log, held, tuning, config, report, today, work_dir, progress)
    elif float(np.mean(head_ndcg)) > zero_ndcg:
        best = config.seeds[int(np.argmax(head_ndcg))]
        final = _train(zero, q_emb, log.gold, np.ones(log.size, bool), (best,), config, progress)
        report.update(chosen="head", seed=best,
                      why=f"the heads beat the zero-shot ranker on held-out queries (NDCG@{k} mean "
                          f"{np.mean(head_ndcg):.3f} vs {zero_ndcg:.3f}); retrained on all {log.size} queries"
                          + _tuned_lost(tuning, today, k))
        ranker = _head_ranker(zero, final.model_params(0), log.gold, config, {**zero.provenance, "fit": report})
    else:
        report.update(chosen="zero-shot",
                      why=f"the heads did not beat the zero-shot ranker on held-out queries (NDCG@{k} mean "
                          f"{np.mean(head_ndcg):.3f} vs {zero_ndcg:.3f}); saved the zero-shot ranker"
                          + _tuned_lost(tuning, today, k))
        ranker = Ranker.build(**_zero_fields(zero), provenance={**zero.provenance, "fit": report})
    seconds["total"] = round(time.perf_counter() - t_start, 1)
    return (ranker if ranker.encoder is not None else dataclasses.replace(ranker, encoder=zero.encoder)), report


def _tuned_lost(tuning, today: float, k: int) -> str:
    if tuning is None:
        return ""
    return (f"; the tuned encoder did not beat it (NDCG@{k} mean {np.mean(tuning.ndcg):.3f} vs {today:.3f}), "
            "so no encoder is saved")


def _check_tune(config: FitConfig, zero: Ranker, gold) -> None:
    """RankerError for a tuning request this registry or encoder cannot serve (before any training runs)."""
    tune = config.tune_encoder
    if tune is None:
        return
    enc = zero.query_encoder()
    enc = enc.load() if hasattr(enc, "load") else enc  # a LazyEncoder: tuning needs the weights
    if not hasattr(enc, "lower_states"):
        raise RankerError(f"--tune-encoder tunes a BERT-family encoder's top layers; {getattr(enc, 'name', enc)} is "
                          "not one: leave --encoder at minilm (the default) or a BERT directory to tune, or drop "
                          "--tune-encoder")
    n_layers = enc.shape.num_layers
    if not 1 <= tune.layers <= n_layers:
        raise RankerError(f"the encoder {enc.model_id} has {n_layers} transformer layers; the tuned layers "
                          f"(--tune-layers) must be 1..{n_layers}, got {tune.layers}")
    if not 1 <= config.tune_seeds <= len(config.seeds):
        raise RankerError(f"tune_seeds must be 1..{len(config.seeds)} (the number of seeds), got {config.tune_seeds}")
    if tune.epochs < 1 or tune.batch_size < 1 or not 0 <= tune.negatives <= tune.hard_pool or tune.lr < 0:
        raise RankerError(f"tuning needs epochs >= 1, batch_size >= 1, lr >= 0 and 0 <= negatives <= hard_pool; got "
                          f"epochs={tune.epochs}, batch_size={tune.batch_size}, lr={tune.lr}, negatives="
                          f"{tune.negatives}, hard_pool={tune.hard_pool}")
    spare = zero.size - gold.shape[1]
    if spare < tune.negatives:
        raise RankerError(f"the registry has {zero.size} tools and a logged request uses up to {gold.shape[1]}; "
                          f"tuning the encoder needs {tune.negatives} other tool(s) per request as negatives")


def _zero_fields(zero: Ranker) -> dict:
    return dict(encoder_id=zero.encoder_id, tool_names=zero.tool_names, tool_texts=zero.tool_texts,
                tool_emb=zero.tool_emb, risk_levels=zero.risk_levels, perm_level=zero.perm_level, graph=zero.graph,
                risk_source=zero.risk_source, risk_scores=zero.risk_scores, config=zero.config)


class FitTuning(NamedTuple):
    """What every encoder-tuning run of one ``fit --tune-encoder`` shares, computed once: encoder, the loaded base
    encoder; states, its frozen layers' token states of every tool text, then of every distinct logged query;
    tool_rows int [N] / query_rows int [Q], each tool's / query's row of ``states``; hard int [Q, P], each query's
    first-stage hard negatives; data_id, the runs' key; run_root, where their checkpoints live (None: none kept)."""

    encoder: Any
    states: TextStates
    tool_rows: np.ndarray
    query_rows: np.ndarray
    hard: np.ndarray
    data_id: str
    run_root: Path | None


class TunedSeeds(NamedTuple):
    """The held-out tuning runs of a fit: their shared inputs, and per tuned seed the tuned encoder and its held-out
    NDCG@k."""

    inputs: FitTuning
    models: list
    ndcg: list


def _fit_tuning(zero: Ranker, log, held, q_emb, config: FitConfig, progress: bool, checkpoint_dir) -> FitTuning:
    """The ``FitTuning`` of a fit: each distinct query text embedded once, after the tool texts."""
    enc = zero.query_encoder()
    enc = enc.load() if hasattr(enc, "load") else enc
    texts, where, rows = list(zero.tool_texts), {}, []
    for q in log.queries:  # each unique query text once
        if q not in where:
            where[q] = len(texts)
            texts.append(q)
        rows.append(where[q])
    states = TextStates.build(enc, texts, enc.shape.num_layers - config.tune_encoder.layers, progress=progress)
    data_id = _run_key(zero, log, held, enc.model_id, config)
    run_root = None if checkpoint_dir is None else Path(checkpoint_dir).expanduser().resolve() / data_id
    return FitTuning(enc, states, np.arange(zero.size), np.asarray(rows, np.int64),
                     _hard_negatives(zero, log, q_emb, config.tune_encoder.hard_pool), data_id, run_root)


def _hard_negatives(zero: Ranker, log, q_emb, hard_pool: int) -> np.ndarray:
    """int [Q, P]: each query's P = min(hard_pool, N − G) best non-gold tools by the zero-shot first stage
    (``model.negatives.best_non_gold``), HARD_CHUNK queries at a time."""
    out = []
    for s in range(0, log.size, HARD_CHUNK):
        first = zero.first_stage_scores(q_emb[s:s + HARD_CHUNK], list(log.queries[s:s + HARD_CHUNK]))
        out.append(np.asarray(best_non_gold(first, log.gold[s:s + HARD_CHUNK], hard_pool)))
    return np.concatenate(out)


def _tune(fit: FitTuning, gold, train_idx, seed: int, tune: TuneConfig, progress: bool, phase: str, desc: str):
    """One tuning run of a fit (checkpointed under ``run_root/PHASE-seedSEED``), with a line on stderr when it
    resumes or reuses a run on disk."""
    ckpt = None if fit.run_root is None else fit.run_root / f"{phase}-seed{seed}"
    note = None if ckpt is None or not progress else _checkpoint_note(ckpt)
    if note is not None:
        print(f"fit: {note}", file=sys.stderr, flush=True)
    return tune_encoder(fit.encoder, fit.states, fit.query_rows, fit.tool_rows, gold, train_idx, fit.hard, seed,
                        tune, progress=progress, desc=desc, checkpoint_dir=ckpt, data_id=fit.data_id)


def _tune_heldout(zero: Ranker, log, held, q_emb, config: FitConfig, progress: bool, checkpoint_dir,
                  report: dict) -> TunedSeeds:
    """Tune per seed on the training queries; add held-out NDCG@k per seed, losses and seconds to ``report``."""
    t0 = time.perf_counter()
    fit = _fit_tuning(zero, log, held, q_emb, config, progress, checkpoint_dir)
    seconds = {"tune_states": round(time.perf_counter() - t0, 1)}
    k, held_ids = report["k"], np.flatnonzero(held)
    texts, gold = np.array(log.queries, dtype=object)[held_ids], log.gold[held_ids]
    seeds, models, ndcg = config.seeds[:config.tune_seeds], [], []
    for seed in seeds:
        tuned = _tune(fit, log.gold, np.flatnonzero(~held), seed, config.tune_encoder, progress, "heldout",
                      f"tuning encoder (seed {seed})")
        t_emb = embed_states(tuned, fit.encoder, fit.states, fit.tool_rows)
        h_emb = embed_states(tuned, fit.encoder, fit.states, fit.query_rows[held_ids])
        ndcg.append(_ndcg(_tuned_ranker(zero, t_emb, "tuning", {}), h_emb, texts, gold, k))
        models.append(tuned)
    report[f"ndcg@{k}_tuned_per_seed"] = [round(x, 4) for x in ndcg]
    report["tuned_seeds"] = list(seeds)
    report["tuned_final_loss_per_seed"] = [round(float(m.losses[-5:].mean()), 4) for m in models]
    report["tuned_steps"] = int(models[0].losses.size)
    report["seconds"].update(seconds, tune_per_seed=[round(m.seconds, 1) for m in models])
    return TunedSeeds(fit, models, ndcg)


def _why_not_retrained(config: FitConfig, n_train: int, n_queries: int) -> str:
    tune = config.tune_encoder
    if not config.tune_retrain:
        return ""
    return (f" (a long log: the step budget, {tune.step_budget} steps, cut their tuning to "
            f"{epochs_run(tune, n_train)} of {tune.epochs} epochs, so tuning again on every "
            f"query would take as long again to add the {n_queries - n_train} held-out ones)")


def _tuned_final(zero: Ranker, log, held, tuning: TunedSeeds, config: FitConfig, report: dict, today: float,
                 work_dir, progress: bool) -> Ranker:
    """The tuned ranker (best seed; tuned again on every query when ``FitConfig.retrains``), with its encoder saved
    under ``work_dir`` and loaded from there (it embeds rank's queries). The tool vectors come from the cached
    lower-layer states through the tuned top layers (``embed_states``: only the tuned layers run; equal to
    the saved encoder's own vectors up to float rounding, tests/test_fit_tune.py)."""
    fit, n_train = tuning.inputs, int((~held).sum())
    k, best = report["k"], int(np.argmax(tuning.ndcg))
    seed = config.seeds[best]
    t0 = time.perf_counter()
    retrain = config.retrains(n_train)
    tuned = (_tune(fit, log.gold, np.arange(log.size), seed, config.tune_encoder, progress, "all",
                   f"tuning encoder on all requests (seed {seed})") if retrain else tuning.models[best])
    enc_dir = save_tuned_encoder(fit.encoder, tuned, _work_dir(work_dir) / "encoder")
    tuned_enc = load_encoder(enc_dir)
    t_emb = embed_states(tuned, fit.encoder, fit.states, fit.tool_rows)
    report["seconds"]["tune_final"] = round(time.perf_counter() - t0, 1)
    how = (f"tuned again on all {log.size} queries" if retrain
           else "kept the layers tuned on the training queries" + _why_not_retrained(config, n_train, log.size))
    report.update(chosen="tuned-encoder", seed=seed,
                  why=f"the tuned encoder beat the better of the zero-shot ranker and the heads on held-out "
                      f"queries (NDCG@{k} mean {np.mean(tuning.ndcg):.3f} vs {today:.3f}); {how} with seed {seed}; "
                      "saved with the ranker as encoder/")
    ranker = _tuned_ranker(zero, t_emb, tuned_enc.model_id, {**zero.provenance, "fit": report})
    return dataclasses.replace(ranker, encoder=tuned_enc)


def _checkpoint_note(ckpt: Path) -> str | None:
    """One line on what a tuning run's checkpoint directory holds before the run: "resuming tuning run KEY/RUN at
    step N of M" (its last saved step, where the tuner goes on) or "reusing the finished tuning run KEY/RUN (M
    steps)"; None for a new run, or a directory the tuner will set aside (``model.checkpoints.RunStore.open``
    warns then)."""
    if not (ckpt / RUN_FILE).is_file():
        return None
    name = f"{ckpt.parent.name}/{ckpt.name}"
    store = RunStore(ckpt, {}, "")
    try:
        saved = read_run(ckpt)
        total, step = int(saved["config"]["train_config"]["epochs"]), int(store.latest_step() or 0)
    except Exception:  # noqa: BLE001 - a damaged directory: the tuner sets it aside and says why
        return None
    finally:
        store.close()
    if saved.get("status") == "completed" and step == total:
        return f"reusing the finished tuning run {name} ({total} steps)"
    return f"resuming tuning run {name} at step {step} of {total}" if step > 0 else None


def _run_key(zero: Ranker, log, held, encoder_id: str, config: FitConfig) -> str:
    """16 hex digits of what decides a tuning run: the registry, the log (queries, gold, held-out mask), the
    encoder and the tuning config; a checkpoint under another key is never resumed."""
    h = hashlib.sha256(json.dumps([zero.registry_fingerprint, list(log.queries), np.asarray(log.gold).tolist(),
                                   np.flatnonzero(held).tolist(), encoder_id, config.tune_encoder.to_dict(),
                                   list(config.seeds)]).encode())
    return h.hexdigest()[:16]


def _work_dir(work_dir) -> Path:
    """``work_dir``, or a fresh temporary directory removed when the process exits."""
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        return Path(work_dir)
    tmp = tempfile.mkdtemp(prefix="riskrank-fit-")
    atexit.register(shutil.rmtree, tmp, True)
    return Path(tmp)


__all__ = ["FitConfig", "FIT_TUNE_CONFIG", "fit_ranker"]
