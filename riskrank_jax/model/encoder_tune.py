"""Fine-tuning the sentence encoder itself: the top transformer layers, trained on (query, gold tool text) pairs.

    states = TextStates.build(encoder, texts, frozen_layers)           # lower layers run once, cached
    tuned = tune_encoder(encoder, states, query_rows, tool_rows, gold, train_idx, hard, seed, TuneConfig())
    many = tune_encoders(encoder, states, query_rows, tool_rows, gold, [TuneJob(train_idx, hard, seed), ...])
    t_emb = embed_states(tuned, encoder, states, tool_rows)               # [N, d], the tuned encoder's vectors
    save_tuned_encoder(encoder, tuned, "my_ranker/encoder")               # a Hugging Face BERT directory

One idea a module: ``model.tune_config`` (the settings), ``model.text_states`` (the frozen layers' token states),
``model.tune_batches`` (each model's batch schedule, drawn from its seed), ``model.tune_step`` (the loss and the
jitted train step), ``model.tuned_encoder`` (the result: its vectors and its saved directory). This module is
the run: ``train_and_evaluate`` restores the state from the run's orbax checkpoint (every ``checkpoint_every``
steps), takes the steps, evaluates each model after each of its epochs and saves. Deterministic for a seed: the
whole batch schedule is drawn up front from the seed, so a resumed run takes the steps of one that never stopped.

Many models at once (``tune_encoders``, the sweep's seeds x folds): their top layers and optimiser states are
stacked on a leading model axis and one jitted program per step trains them all (``model.groups.map_models``:
vmap, or lax.map on one CPU device), each on its own seed's schedule and learning-rate schedule; a model whose
schedule is shorter (fewer training queries) sits out the last steps with its state unchanged (``jnp.where``),
so every model ends as it would alone, up to float rounding. ``tune_encoder`` is that with one model.

What is trained: the top ``TuneConfig.layers`` transformer layers; the embeddings and the layers below stay
frozen and their token states are computed once (``Encoder.lower_states``). Why: on a CPU a step through the
top layers over cached states is several times cheaper than one through all six layers of all-MiniLM-L6-v2
(``benchmarks/encoder_tune.py``), and the training sets are a few thousand pairs.
Figures: docs/performance.md, "Tuning the encoder and the cross-encoder".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.checkpoints import RunStore
from riskrank_jax.model.groups import gathered, maps_sequentially, plan_groups
from riskrank_jax.model.text_states import TextStates
from riskrank_jax.model.tune_batches import TuneData, batch_schedule, run_layout, run_schedules, step_batch
from riskrank_jax.model.tune_config import TuneConfig, epochs_run, warmup_steps
from riskrank_jax.model.tune_step import compiled_step, optimizer, tune_bytes
from riskrank_jax.model.tuned_encoder import TunedEncoder, embed_states, numpy_tree, save_tuned_encoder
from riskrank_jax.runtime.heap import release_freed_heap
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET
from riskrank_jax.runtime.progress import progress_bar


@dataclass(frozen=True, eq=False)
class TuneJob:
    """One model of a tuning run: train_idx int [n], its training queries; hard int [Q, P], each query's
    first-stage best non-gold tools; seed, which draws its batch schedule (``batch_schedule``); evaluate,
    ``TunedEncoder -> float`` (higher is better) after each of its epochs, its best epoch's layers kept (None: its
    last layers)."""

    train_idx: np.ndarray
    hard: np.ndarray
    seed: int
    evaluate: Callable | None = None


class TunePlan(NamedTuple):
    """What a tuning run does, fixed before its first step: schedules, each model's batches (``batch_schedule``);
    lengths int64 [M], its steps; per_epoch int64 [M], its steps an epoch; warm int32 [M], its warm-up steps;
    layout, the packed rows of every step (``run_layout``); groups, (model ids, real models) of each call of the
    step (``model.groups.plan_groups``)."""

    schedules: list
    lengths: np.ndarray
    per_epoch: np.ndarray
    warm: np.ndarray
    layout: tuple
    groups: list


class TuneState(NamedTuple):
    """A tuning run's state between steps, every leaf stacked over its M models: top, the trained layers; opt,
    AdamW's state; best, each model's layers of its best epoch so far; losses float32 [M, steps] (0 where a model
    sat out); scores float32 [M, epochs], the ``evaluate`` scores (NaN: not evaluated). A checkpoint holds
    ``_asdict()``."""

    top: Any
    opt: Any
    best: Any
    losses: np.ndarray
    scores: np.ndarray


def tune_encoder(encoder, states: TextStates, query_rows, tool_rows, gold, train_idx, hard, seed: int,
                 config: TuneConfig = TuneConfig(), *, checkpoint_dir=None, data_id: str | None = None,
                 progress: bool = True, desc: str = "tuning encoder", max_steps: int | None = None,
                 evaluate=None) -> TunedEncoder:
    """Train the top ``config.layers`` layers of ``encoder`` on the queries ``train_idx``: ``tune_encoders``
    with the one model ``TuneJob(train_idx, hard, seed, evaluate)`` (see there for the arguments)."""
    job = TuneJob(np.asarray(train_idx), np.asarray(hard), int(seed), evaluate)
    return tune_encoders(encoder, states, query_rows, tool_rows, gold, [job], config, checkpoint_dir=checkpoint_dir,
                         data_id=data_id, progress=progress, desc=desc, max_steps=max_steps)[0]


def tune_encoders(encoder, states: TextStates, query_rows, tool_rows, gold, jobs, config: TuneConfig = TuneConfig(),
                  *, checkpoint_dir=None, data_id: str | None = None, progress: bool = True,
                  desc: str = "tuning encoder", max_steps: int | None = None,
                  memory_budget: int | None = None) -> list[TunedEncoder]:
    """Train the top ``config.layers`` layers of ``encoder`` once per ``TuneJob`` of ``jobs``, every model in one
    jitted program per step (the models on a leading axis, ``model.groups.map_models``); one TunedEncoder per job.

    states: ``TextStates`` of the query and tool texts after the frozen layers (frozen_layers = num_layers −
    config.layers); query_rows int [Q] / tool_rows int [N]: each query's / tool's text in ``states``; gold int
    [Q, G] (−1 pad). Each model takes the steps of its own schedule, as when it trains alone; models with
    shorter schedules (fewer training queries) sit out the last steps unchanged. checkpoint_dir: an orbax run
    directory (``model.checkpoints.RunStore``) of the stacked state: a killed run resumes there, a finished one is
    returned untrained. max_steps: stop after this many steps (a time-boxed run: with a checkpoint_dir, a later
    call continues where it stopped and ends where an uninterrupted run would); the result holds the layers so
    far. A job's ``evaluate`` is called after each of its epochs; the layers of its best epoch are returned (ties:
    the earlier), ``TunedEncoder.epoch_scores`` says why. memory_budget: bytes of the step's intermediates (the
    models run in equal groups of as many as ``tune_bytes`` says fit; results do not depend on it).
    """
    _check_states(encoder, states, config)
    jobs, data = list(jobs), TuneData(states, np.asarray(query_rows), np.asarray(tool_rows), np.asarray(gold))
    plan = _plan(encoder, data, jobs, config, memory_budget)
    if checkpoint_dir is not None and not data_id:
        data_id = hashlib.sha256(json.dumps(
            [data.gold.tolist(), [list(map(int, j.train_idx)) for j in jobs]]).encode()).hexdigest()
    t0 = time.perf_counter()
    state = train_and_evaluate(encoder, data, jobs, config, plan, checkpoint_dir=checkpoint_dir,
                               data_id=(data_id or "")[:16], max_steps=max_steps, progress=progress, desc=desc)
    seconds = time.perf_counter() - t0
    finished = max_steps is None or int(max_steps) >= int(plan.lengths.max())
    return [_tuned(encoder, config, j.seed, state.best if j.evaluate is not None and finished else state.top, m,
                   state.losses[m][:plan.lengths[m]], state.scores[m], seconds) for m, j in enumerate(jobs)]


def train_and_evaluate(encoder, data: TuneData, jobs: list[TuneJob], config: TuneConfig, plan: TunePlan, *,
                       checkpoint_dir=None, data_id: str = "", max_steps: int | None = None, progress: bool = True,
                       desc: str = "tuning encoder") -> TuneState:
    """A tuning run: the state restored from ``checkpoint_dir`` (new without one), steps up to ``max_steps``
    (None: all) of every group of models through ``compiled_step``, each model scored by its job's ``evaluate``
    after each of its epochs (its best layers kept), the state saved every ``config.checkpoint_every`` steps,
    after an evaluation and at the last step (the run then marked complete). Returns the host state after the
    last step, without the optimiser state (``opt`` None: nothing reads it once the run returns)."""
    n_models, n_steps = len(jobs), int(plan.lengths.max())
    store = (None if checkpoint_dir is None else
             _run_store(checkpoint_dir, encoder, config, jobs, n_steps, data_id))
    done, state = _restore(store, _initial_state(_top_layers(encoder, config), config, n_models, n_steps))
    stop = n_steps if max_steps is None else min(n_steps, int(max_steps))
    step = compiled_step(encoder.shape, encoder.pooling, encoder.normalize, config, jax.default_backend(),
                         jax.device_count())
    losses, scores, best = np.array(state.losses), np.array(state.scores), jax.tree.map(np.array, state.best)
    device = _on_device(state, plan.groups)
    del state  # the host layers and optimiser state, now on the device: a run holds one copy of them
    counts, tops = [n for _, n in plan.groups], None
    bar = progress_bar(enabled=progress and done < n_steps, total=n_steps, initial=done, unit="step",
                       desc=desc + (f" ({n_models} models)" if n_models > 1 else ""), leave=False)
    try:
        for i in range(done, stop):
            device, loss = _step_groups(step, device, data, plan, i, encoder.precision)
            live = plan.lengths > i
            losses[live, i] = loss[live]
            bar.update(1)
            bar.set_postfix(loss=f"{losses[live, i].mean():.3f}")
            evaluated = [m for m, j in enumerate(jobs)
                         if live[m] and (i + 1) % plan.per_epoch[m] == 0 and j.evaluate is not None]
            save = store is not None and ((i + 1) % config.checkpoint_every == 0 or i + 1 == n_steps or evaluated)
            tops = gathered([t for t, _ in device], counts) if evaluated or save else None  # one copy a step
            for m in evaluated:
                e = (i + 1) // plan.per_epoch[m] - 1
                tuned = _tuned(encoder, config, jobs[m].seed, tops, m, losses[m][:plan.lengths[m]], scores[m], 0.0)
                scores[m, e] = float(jobs[m].evaluate(tuned))
                if e == 0 or scores[m, e] > np.nanmax(scores[m, :e]):
                    for b, t in zip(jax.tree.leaves(best), jax.tree.leaves(tops)):
                        b[m] = t[m]
            if save:
                opt = gathered([o for _, o in device], counts)
                store.save_epoch(i + 1, TuneState(tops, opt, best, losses, scores)._asdict())
            release_freed_heap()  # what the compilation, the evaluation and the save freed, so steps reuse it
    finally:
        bar.close()
    if store is not None and stop == n_steps:
        store.complete()
    elif store is not None:
        store.close()  # a time-boxed run: resumable, not complete
    tops = gathered([t for t, _ in device], counts) if tops is None else tops
    return TuneState(tops, None, best, losses, scores)


def _step_groups(step, device: list, data: TuneData, plan: TunePlan, i: int, precision) -> tuple[list, np.ndarray]:
    """Step ``i`` of every group of models: (each group's (top, opt_state) after it, on the device; loss float32
    [M] of the models' batches)."""
    stepped, loss = [], np.zeros(len(plan.lengths), np.float32)
    for (ix, n), (top, opt_state) in zip(plan.groups, device):
        live, batch = step_batch(data, plan.layout, plan.schedules, plan.lengths, ix, i)
        with jax.default_matmul_precision(precision):
            top, opt_state, value = step(top, opt_state, live, plan.warm[ix], plan.lengths[ix].astype(np.int32),
                                         data.states.device_states, *batch)
        loss[ix[:n]] = np.asarray(value)[:n]
        stepped.append((top, opt_state))
    return stepped, loss


def _plan(encoder, data: TuneData, jobs, config: TuneConfig, memory_budget: int | None) -> TunePlan:
    """The ``TunePlan`` of a run: its jobs' schedules and the groups that fit ``memory_budget`` bytes."""
    schedules = run_schedules(data.gold, jobs, config)
    lengths = np.array([len(s) for s in schedules], np.int64)
    epochs = np.array([epochs_run(config, np.size(j.train_idx)) for j in jobs], np.int64)
    warm = np.array([warmup_steps(config, n) for n in lengths], np.int32)
    layout = run_layout(data, schedules, config)
    (_, wq, rq), (_, wt, rt) = layout
    model_groups = _groups(len(jobs), *tune_bytes(_top_layers(encoder, config), rq, rt, wq, wt,
                                                  encoder.shape.num_heads),
                           DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    return TunePlan(schedules, lengths, np.maximum(1, lengths // epochs), warm, layout, model_groups)


def _groups(n_models: int, state_bytes: int, activation_bytes: int, budget: int) -> list:
    """``model.groups.plan_groups`` of a tuning run: models mapped one after another (``lax.map``) hold one
    model's step intermediates at a time, vmapped ones each their own."""
    if maps_sequentially():
        return plan_groups(n_models, state_bytes, max(state_bytes, budget - activation_bytes))
    return plan_groups(n_models, state_bytes + activation_bytes, budget)


def _top_layers(encoder, config: TuneConfig) -> list:
    """The encoder's top ``config.layers`` layers (numpy), where training starts."""
    n_layers = encoder.shape.num_layers
    return [jax.tree.map(np.asarray, lp) for lp in encoder.params["layers"][n_layers - config.layers:]]


def _initial_state(top, config: TuneConfig, n_models: int, n_steps: int) -> TuneState:
    """A new run's host state: ``top`` and its new optimiser state stacked ``n_models`` times."""
    stack = lambda tree: jax.tree.map(lambda a: np.stack([np.asarray(a)] * n_models), tree)  # noqa: E731
    return TuneState(stack(top), stack(optimizer(config, 1, n_steps).init(top)), stack(top),
                     np.zeros((n_models, n_steps), np.float32), np.full((n_models, config.epochs), np.nan, np.float32))


def _run_store(checkpoint_dir, encoder, config: TuneConfig, jobs, n_steps: int, data_id: str) -> RunStore:
    run_config = {"kind": "encoder-tune", "encoder": encoder.model_id,
                  "models": [{"seed": int(j.seed), "evaluated": j.evaluate is not None,
                              "train_queries": int(np.size(j.train_idx))} for j in jobs],
                  "train_config": {**config.to_dict(), "epochs": n_steps}}  # RunStore counts save points as epochs
    return RunStore(checkpoint_dir, run_config, data_id)


def _restore(store: RunStore | None, state: TuneState) -> tuple[int, TuneState]:
    """(steps done, state): a resumed run's saved state, or ``state`` (a new run, or one without a store)."""
    if store is None:
        return 0, state
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype), state._asdict())
    _, done, saved = store.open(abstract)
    store.begin()
    return done, state if saved is None else TuneState(**saved)


def _on_device(state: TuneState, model_groups: list) -> list:
    """Each group's (top, opt_state): the rows ``ix`` of the stacked host state, on the device."""
    rows = lambda tree, ix: jax.tree.map(lambda a: jnp.asarray(np.asarray(a)[ix]), tree)  # noqa: E731
    return [(rows(state.top, ix), rows(state.opt, ix)) for ix, _ in model_groups]


def _tuned(encoder, config: TuneConfig, seed: int, top, m: int, losses, scores, seconds: float) -> TunedEncoder:
    """Model ``m``'s TunedEncoder: row ``m`` of the layers ``top`` (stacked over the models, host or device)."""
    layers = tuple(numpy_tree(jax.tree.map(lambda a: a[m], lp)) for lp in top)
    return TunedEncoder(layers, encoder.model_id, encoder.shape.num_layers - config.layers, encoder.pooling,
                        encoder.normalize, config, int(seed), np.asarray(losses), seconds, np.asarray(scores))


def _check_states(encoder, states: TextStates, config: TuneConfig) -> None:
    """RiskRankError unless ``states`` are the encoder's states below its top ``config.layers``."""
    n_layers = encoder.shape.num_layers
    if states.frozen_layers != n_layers - config.layers or states.encoder_id != encoder.model_id:
        raise RiskRankError(f"the cached states are of layer {states.frozen_layers} of {states.encoder_id}; "
                            f"training the top {config.layers} layers of {encoder.model_id} needs layer "
                            f"{n_layers - config.layers}")


__all__ = ["TuneConfig", "TuneJob", "TunePlan", "TuneState", "TextStates", "TunedEncoder", "tune_encoder",
           "tune_encoders", "train_and_evaluate", "embed_states", "save_tuned_encoder", "batch_schedule",
           "epochs_run", "warmup_steps", "tune_bytes"]
