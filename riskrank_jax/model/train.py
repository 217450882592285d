"""Training of the dual heads: every (seed, fold[, λ]) model of a run in one jitted program over the model axis
(vmapped; on a single CPU device a ``lax.map`` over the models, which XLA runs faster there: see
``model.groups.map_models``).

Usage::

    cfg = TrainConfig()                                   # model.train_config: docs/method.md §3 protocol values
    res = train_models(tool_emb, query_emb, gold, risk, bench.train_fold_mask, cfg,
                       TrainRun((42, 123, 777), checkpoint_dir="/abs/ckpt/ultratool-minilm", run_meta={...}))
    p = res.model_params(m)                               # model m = s * F + f (× L + l when λ-aware)

What one model does (docs/method.md §3): it trains on its triplets (``model.triplets``: negatives per
(query, gold tool), a held-out share of the triplets) with the loss
L = mean max(0, margin − (f_rel(q,pos) − f_rel(q,neg))) + μ · MSE(f_risk, (r − 1)/4), the MSE over both the
positive and the negative tool of each triplet (λ-aware variant: f_rel is replaced by s = f_rel − λ·f_risk inside
the margin term); Adam(lr), batches of ``batch_size`` in a fresh seeded order each epoch (``model_keys``); after
each epoch the held-out loss is computed and the parameters of the epoch with the lowest one are kept. Every
epoch is checkpointed (``model.train_store``), so a killed run resumes where it stopped.

Each epoch a model sorts its own shuffled train slots to the front; the scan runs ceil(max_m n_train / batch)
steps, the last partial batch is masked, and a step with no valid row leaves parameters and optimiser state
untouched (``jnp.where``), so a model's result is the same as when it trains alone. The model axis runs in equal
groups sized by a byte estimate of each model's intermediates (``model_bytes``, ``memory_budget``); each group's
axis can be sharded over all local devices (1-D mesh). Groups share the run's static shapes, so a model's result
does not depend on its group.

Why one program: the models share every static shape, so one compilation trains them all.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax.model import checkpoints as ckpt
from riskrank_jax.model import heads
from riskrank_jax.model.groups import gathered, map_models, plan_groups
from riskrank_jax.model.heldout import random_first
from riskrank_jax.model.train_config import TrainConfig, TrainResult, model_index, model_keys
from riskrank_jax.model.train_store import host_state, init_state, open_checkpoint, unflat_tree
from riskrank_jax.model.triplets import model_counts, shared_inputs_for_run, triplet_program
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET
from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import level_to_score, penalise


def _loss(params, batch, mask, lam, *, config: TrainConfig):
    """L_rel + μ·L_risk over the rows where ``mask`` is True (0 when none is)."""
    tools = jnp.stack([batch["pos"], batch["neg"]])  # [2, B, d]: one pass over positives and negatives
    f = heads.relevance(params, batch["q"][None], tools)  # [2, B]
    r = heads.risk(params, tools)  # [2, B]
    if config.lambda_aware:
        f = penalise(f, r, lam)
    target = jnp.stack([batch["t_pos"], batch["t_neg"]])
    w = mask.astype(jnp.float32)
    n = jnp.maximum(w.sum(), 1.0)
    l_rel = jnp.sum(jax.nn.relu(config.margin - (f[0] - f[1])) * w) / n
    l_risk = jnp.sum(jnp.sum((r - target) ** 2, axis=0) * w) / (2.0 * n)
    return l_rel + config.mu * l_risk

def _gather(data, idx, shared):
    return {
        "q": shared["query_emb"][data["q"][idx]],
        "pos": shared["tool_emb"][data["pos"][idx]],
        "neg": shared["tool_emb"][data["neg"][idx]],
        "t_pos": shared["target"][data["pos"][idx]],
        "t_neg": shared["target"][data["neg"][idx]],
    }

def _one_epoch(state, data, seed, fold, lam, epoch, shared, *, config: TrainConfig, steps: int):
    """One epoch of one model: shuffled masked minibatches, then the held-out loss and best-so-far."""
    opt = optax.adam(config.lr)
    loss_fn = functools.partial(_loss, config=config)
    n_slots = data["train_flag"].shape[0]
    b = config.batch_size
    order = random_first(jax.random.fold_in(model_keys(seed, fold)["order"], epoch), data["train_flag"])
    need = steps * b
    order = order[:need] if need <= n_slots else jnp.pad(order, (0, need - n_slots))
    batches = order.reshape(steps, b)
    masks = (jnp.arange(need) < data["n_train"]).reshape(steps, b)

    def step(carry, xs):
        params, opt_state = carry
        idx, mask = xs
        loss, grads = jax.value_and_grad(loss_fn)(params, _gather(data, idx, shared), mask, lam)
        updates, new_opt_state = opt.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        live = mask.any()  # an all-padding step leaves params and Adam state untouched
        keep = lambda new, old: jax.tree.map(lambda a, c: jnp.where(live, a, c), new, old)  # noqa: E731
        return (keep(new_params, params), keep(new_opt_state, opt_state)), (loss, live)

    (params, opt_state), (losses, live) = jax.lax.scan(step, (state["params"], state["opt_state"]), (batches, masks))
    train_loss = jnp.sum(jnp.where(live, losses, 0.0)) / jnp.maximum(live.sum(), 1)
    has_hold = data["n_hold"] > 0
    held = loss_fn(params, _gather(data, data["hold_idx"], shared), data["hold_mask"], lam)
    improve = jnp.where(has_hold, held < state["best_loss"], True)  # no held-out set: keep the last epoch
    pick = lambda new, old: jax.tree.map(lambda a, c: jnp.where(improve, a, c), new, old)  # noqa: E731
    new_state = {
        "params": params,
        "opt_state": opt_state,
        "best_params": pick(params, state["best_params"]),
        "best_loss": jnp.where(improve, jnp.where(has_hold, held, -jnp.inf), state["best_loss"]),
        "best_epoch": jnp.where(improve, epoch, state["best_epoch"]).astype(jnp.int32),
    }
    return new_state, train_loss, jnp.where(has_hold, held, jnp.nan)

@functools.lru_cache(maxsize=32)
def _init_program(hidden: int, rel_features: str, dim: int):
    cfg = TrainConfig(hidden=hidden, rel_features=rel_features)
    return jax.jit(jax.vmap(functools.partial(init_state, config=cfg, dim=dim)))

@functools.lru_cache(maxsize=32)
def _epoch_program(config: TrainConfig, steps: int, backend: str, n_devices: int):
    """One epoch of a group of models (``map_models``: vmapped, or lax.map on one CPU device); the cache key
    holds the backend and device count that choice depends on."""
    fn = functools.partial(_one_epoch, config=config, steps=steps)
    return jax.jit(map_models(fn, in_axes=(0, 0, 0, 0, 0, None, None)))

def _programs(config: TrainConfig, steps: int, n_hold_max: int, dim: int):
    """Jitted, model-vmapped programs, cached on exactly what each depends on, so runs that differ
    only in ``epochs``, ``lambdas`` or unrelated fields compile once."""
    epoch_cfg = dataclasses.replace(config, epochs=1, lambdas=(0.0,), hard_pool=1)
    return (
        triplet_program(config.negative_sampling, config.negatives, n_hold_max, config.hard_per_positive),
        _init_program(config.hidden, config.rel_features, dim),
        _epoch_program(epoch_cfg, steps, jax.default_backend(), jax.device_count()),
    )

def _checked_inputs(tool_emb, query_emb, gold, risk, fold_mask):
    """The training arrays as numpy (float32 embeddings, int32 gold and risk, bool fold mask), their
    shapes and risk levels checked. Returns (tool_emb, query_emb, gold, risk, fold_mask)."""
    tool_emb = np.asarray(tool_emb, np.float32)
    query_emb = np.asarray(query_emb, np.float32)
    risk = np.asarray(risk, np.int32)
    fold_mask = np.asarray(fold_mask, bool)
    gold_in = np.asarray(gold, np.int32)
    n_tools, dim = tool_emb.shape
    n_q = query_emb.shape[0]
    if query_emb.shape[1] != dim:
        raise ValueError(f"query_emb has width {query_emb.shape[1]}, tool_emb {dim}")
    if gold_in.shape[0] != n_q or fold_mask.ndim != 2 or fold_mask.shape[1] != n_q or risk.shape != (n_tools,):
        raise ValueError(
            f"shapes disagree: query_emb {query_emb.shape}, gold {gold_in.shape}, fold_mask {fold_mask.shape}, "
            f"risk {risk.shape}, tool_emb {tool_emb.shape}"
        )
    if np.any((risk < 1) | (risk > 5)):
        raise ValueError("risk levels must lie in 1..5")
    return tool_emb, query_emb, gold_in, risk, fold_mask

def _checked_seeds_folds(seeds, folds, n_folds: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Seeds and folds as int tuples (folds default: all ``n_folds``); at least one of each, folds in range."""
    seeds = tuple(int(s) for s in seeds)
    folds = tuple(range(n_folds)) if folds is None else tuple(int(f) for f in folds)
    if not seeds or not folds or any(not 0 <= f < n_folds for f in folds):
        raise ValueError(f"need at least one seed and valid folds, got seeds={seeds}, folds={folds}")
    return seeds, folds

def _run_config(config: TrainConfig, seeds, folds, index, tool_emb, query_emb, fold_mask, run_meta) -> dict:
    """What run.json records (and a resume compares): configuration, models, shapes, caller's facts."""
    n_tools, dim = tool_emb.shape
    return {
        "train_config": config.to_dict(),
        "seeds": list(seeds),
        "folds": list(folds),
        "model_index": index,
        "shapes": {"n_tools": n_tools, "dim": dim, "n_train_queries": query_emb.shape[0],
                   "n_folds": int(fold_mask.shape[0])},
        "meta": dict(run_meta or {}),
    }

def model_bytes(config: TrainConfig, dim: int, n_slots: int, n_hold_max: int) -> int:
    """Estimated bytes of one model's training intermediates (what grows with the models of a group).

    The held-out loss's ``n_hold_max`` rows and one minibatch step's rows (forward and backward): gathered
    query / positive / negative embeddings, the relevance inputs and hidden activations of both heads; the
    ``n_slots`` triplet slots with their random bits, sort keys and permutations; the parameters with their
    best copy, Adam moments, gradients and updates. XLA's own count (``memory_analysis``) is about 2/3 of it
    on UltraTool.
    """
    in_w = heads.rel_input_dim(dim, config.rel_features)
    h = config.hidden
    rows = n_hold_max + 3 * config.batch_size
    per_row = 4 * (3 * dim + 2 * (dim + in_w + 3 * h))
    n_params = (in_w + dim) * h + 4 * h + 2
    return rows * per_row + 48 * n_slots + 8 * 4 * n_params

def _placement():
    """(put_m, put_r): place a tree split along the model axis over a 1-D mesh of all local devices, or
    replicated on every device (plain ``device_put`` with one device)."""
    devices = jax.devices()
    if len(devices) == 1:
        return jax.device_put, jax.device_put
    mesh = jax.sharding.Mesh(np.array(devices), ("m",))
    per_model = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("m"))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    return (lambda tree: jax.device_put(tree, per_model)), (lambda tree: jax.device_put(tree, replicated))

@dataclass
class _Group:
    """Models ``ix`` (int [G], padded by repeating the last) of a run, the first ``n`` real, on device."""

    ix: np.ndarray
    n: int
    seed: jax.Array  # int32 [G]
    fold: jax.Array  # int32 [G]
    lam: jax.Array  # float32 [G]
    data: dict  # triplet slots per model (see _build_triplets), without "n_valid"

@dataclass
class _Run:
    """One run's device-side inputs and programs; the model axis split into equal groups sized by bytes."""

    n_models: int
    groups: list
    put_m: Callable
    emb: dict  # tool_emb, query_emb, risk target (replicated)
    init_fn: Callable
    epoch_fn: Callable

def _prepare_run(tool_emb, query_emb, gold_in, risk, fold_mask, index, config: TrainConfig,
                 memory_budget: int) -> _Run:
    """Everything the epochs read: shared inputs and, per group of models, triplets built on device.

    Static shapes (steps per epoch, held-out width) come from all models of the run, so each model's
    arithmetic is the same whatever group it lands in, and one compilation serves every group."""
    n_models, dim = len(index), tool_emb.shape[1]
    shared, n_gold = shared_inputs_for_run(gold_in, fold_mask, query_emb, tool_emb, config)
    n_valid, n_hold, steps, n_hold_max = model_counts(index, n_gold, fold_mask, config)
    put_m, put_r = _placement()
    shared = put_r(shared)
    emb = put_r({"tool_emb": tool_emb, "query_emb": query_emb, "target": level_to_score(risk)})
    build, init, epoch_fn = _programs(config, steps, n_hold_max, dim)
    per_model = model_bytes(config, dim, config.negatives * gold_in.shape[0] * gold_in.shape[1], n_hold_max)
    groups = []
    for ix, n in plan_groups(n_models, per_model, memory_budget, jax.device_count()):
        seed = put_m(np.array([index[i]["seed"] for i in ix], np.int32))
        fold = put_m(np.array([index[i]["fold"] for i in ix], np.int32))
        lam = put_m(np.array([index[i].get("lam", 0.0) for i in ix], np.float32))
        data = build(seed, fold, put_m(n_hold[ix]), shared)
        got_valid = np.asarray(data["n_valid"])[:n]
        assert np.array_equal(got_valid, n_valid[ix[:n]]), (got_valid, n_valid[ix[:n]])
        groups.append(_Group(ix, n, seed, fold, lam, {k: v for k, v in data.items() if k != "n_valid"}))
    return _Run(n_models, groups, put_m, emb, init, epoch_fn)

def _initial_state(run: _Run, saved: dict | None, epochs: int):
    """(states, one per group, train_hist, held_hist): fresh (NaN curves [M, epochs]) or the checkpoint's."""
    train_hist = np.full((run.n_models, epochs), np.nan, np.float32)
    held_hist = np.full((run.n_models, epochs), np.nan, np.float32)
    if saved is None:
        return [run.init_fn(g.seed, g.fold) for g in run.groups], train_hist, held_hist
    like = jax.eval_shape(run.init_fn, run.groups[0].seed, run.groups[0].fold)["opt_state"]
    state = {
        "params": saved["params"],
        "opt_state": unflat_tree(saved["opt_state"], like),
        "best_params": saved["best_params"],
        "best_loss": saved["best_loss"],
        "best_epoch": saved["best_epoch"],
    }
    states = [run.put_m(jax.tree.map(lambda x: np.asarray(x)[g.ix], state)) for g in run.groups]  # noqa: B023
    return states, np.array(saved["train_loss"]), np.array(saved["heldout_loss"])

def _run_epochs(run: _Run, states: list, train_hist, held_hist, start_epoch: int, epochs: int, store,
                progress: bool, on_epoch_end):
    """Epochs start_epoch..epochs-1, each over every group in turn: fill the curves in place, checkpoint each
    epoch; returns the final states."""
    bar = progress_bar(range(start_epoch, epochs), enabled=progress, desc=f"train {run.n_models} models",
                       initial=start_epoch, total=epochs, unit="epoch")
    for e in bar:
        for i, g in enumerate(run.groups):
            states[i], tl, hl = run.epoch_fn(states[i], g.data, g.seed, g.fold, g.lam, jnp.asarray(e, jnp.int32),
                                             run.emb)
            train_hist[g.ix[:g.n], e] = np.asarray(tl)[:g.n]
            held_hist[g.ix[:g.n], e] = np.asarray(hl)[:g.n]
        if progress:
            bar.set_postfix(train=f"{np.mean(train_hist[:, e]):.4f}", heldout=f"{np.nanmean(held_hist[:, e]):.4f}")
        if store is not None:
            store.save_epoch(e + 1, host_state(gathered(states, [g.n for g in run.groups]), train_hist, held_hist, e + 1))
        if on_epoch_end is not None:
            on_epoch_end(e + 1, train_hist[:, e].copy(), held_hist[:, e].copy())
    return states

@dataclass(frozen=True)
class TrainRun:
    """Which models a ``train_models`` call trains, where it keeps them, how it runs (only seeds and folds change
    what it returns).

    seeds: seeds of the run (model order seed-major, then fold, then λ).
    folds: which rows of ``fold_mask`` to train (default: all). A fold keeps its index, so
      ``folds=(2,)`` trains exactly the fold-2 model of a full run.
    checkpoint_dir: absolute or relative directory; the state is saved there after every epoch, a
      matching unfinished run resumes, a matching finished run is returned without training, and a
      stale (other configuration or data) or corrupt one is renamed to ``<dir>.stale-<timestamp>`` with
      one warning line and the run trains from scratch (see ``checkpoints``).
    run_meta: JSON-able facts recorded in run.json and compared on resume (encoder id, benchmark,
      protocol, ...).
    progress: show a tqdm bar over epochs (mean losses over models) when stderr is a terminal.
    on_epoch_end: optional callback(epochs_done, train_loss [M], heldout_loss [M]) called after the
      epoch's checkpoint is written.
    data_id: identity of the training data recorded in run.json and compared on resume (e.g. a hash of
      the texts, labels, splits and the encoder id). Default: a hash of the arrays' bytes, which changes
      when re-encoding moves an embedding by one ulp; pass a data_id to make a checkpoint survive that.
    memory_budget: bytes allowed for the training intermediates: the models train in equal groups of as
      many as ``model_bytes`` says fit (one vmapped call per group and epoch). Does not change results.
    """

    seeds: tuple[int, ...]
    folds: tuple[int, ...] | None = None
    checkpoint_dir: str | Path | None = None
    run_meta: dict | None = None
    progress: bool = True
    on_epoch_end: Callable | None = None
    data_id: str | None = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET

def train_models(tool_emb, query_emb, gold, risk, fold_mask, config: TrainConfig, run: TrainRun) -> TrainResult:
    """Train every (seed, fold[, λ]) model of a run together and keep each one's best epoch.

    Args:
      tool_emb: float32 [N, d] frozen tool embeddings.
      query_emb: float32 [Q, d] frozen training-query embeddings.
      gold: int32 [Q, G] gold tool ids, padded with -1.
      risk: int32 [N] risk levels 1..5 (target (r − 1)/4).
      fold_mask: bool [F, Q]; fold f's models train on the queries where it is True.
      config: hyper-parameters.
      run: seeds, folds, checkpoint directory, progress and memory budget (``TrainRun``).

    Returns:
      TrainResult with the best-epoch parameters stacked over models.
    """
    tool_emb, query_emb, gold_in, risk, fold_mask = _checked_inputs(tool_emb, query_emb, gold, risk, fold_mask)
    seeds, folds = _checked_seeds_folds(run.seeds, run.folds, fold_mask.shape[0])
    checkpoint_dir, data_id = run.checkpoint_dir, run.data_id
    index = model_index(seeds, folds, config)
    data_hash = str(data_id) if data_id is not None else ckpt.hash_arrays(tool_emb, query_emb, gold_in, risk, fold_mask)
    run_config = _run_config(config, seeds, folds, index, tool_emb, query_emb, fold_mask, run.run_meta)
    store, saved, start_epoch, finished = open_checkpoint(checkpoint_dir, run_config, data_hash, config)
    if finished is not None:
        return finished
    prepared = _prepare_run(tool_emb, query_emb, gold_in, risk, fold_mask, index, config, run.memory_budget)
    states, train_hist, held_hist = _initial_state(prepared, saved, config.epochs)
    if store is not None:
        store.begin()
    states = _run_epochs(prepared, states, train_hist, held_hist, start_epoch, config.epochs, store, run.progress,
                         run.on_epoch_end)
    final = gathered(states, [g.n for g in prepared.groups])
    result = TrainResult(params=jax.tree.map(jnp.asarray, final["best_params"]), model_index=index,
                         heldout_loss=held_hist, train_loss=train_hist,
                         best_epoch=np.asarray(final["best_epoch"]).astype(np.int32), config=config,
                         data_hash=data_hash, run_config=run_config)
    if store is not None:
        store.complete()
        result.run_config = {**run_config, "checkpoint_dir": str(store.directory)}
    return result


__all__ = ["TrainRun", "train_models", "model_bytes"]
