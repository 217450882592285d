"""Training of the dual heads: every (seed, fold[, λ]) model of a run in one jitted program over the model axis
(vmapped; on a single CPU device a ``lax.map`` over the models, which XLA runs faster there: see
``model.groups.map_models``).

Usage::

    cfg = TrainConfig()                                   # docs/method.md §3 protocol values
    res = train_models(tool_emb, query_emb, gold, risk, bench.train_fold_mask, cfg,
                       TrainRun((42, 123, 777), checkpoint_dir="/abs/ckpt/ultratool-minilm", run_meta={...}))
    p = res.model_params(m)                               # model m = s * F + f (× L + l when λ-aware)

What one model does (docs/method.md §3):
  * triplets: for each training query q (``fold_mask[f, q]``) and each gold tool g of q, ``negatives``
    negatives drawn uniformly from the pool minus q's gold set ("uniform"), or from the frozen
    encoder's top-``hard_pool`` tools for q minus the gold set ("hard", beyond the paper), or
    ``hard_per_positive`` hard and the rest uniform ("mixed", beyond the paper);
  * ``heldout_fraction`` of the triplets (a seeded random subset, ``model.heldout.random_first``) is held out;
  * loss L = mean max(0, margin − (f_rel(q,pos) − f_rel(q,neg))) + μ · MSE(f_risk, (r − 1)/4), the MSE over
    both the positive and the negative tool of each triplet. λ-aware variant: f_rel is replaced by
    s = f_rel − λ·f_risk inside the margin term;
  * Adam(lr), batches of ``batch_size`` in a fresh seeded order each epoch; after each epoch the
    held-out loss is computed and the parameters of the epoch with the lowest one are kept.

The seed fixes everything (deviation from the release, which seeded only the sampling). From
``key(seed)``: the initialisation uses fold_in(key, 0) (shared by the folds and λs of one seed);
negatives fold_in(fold_in(key, 1), fold); the held-out split fold_in(fold_in(key, 2), fold); the
order of epoch e fold_in(fold_in(fold_in(key, 3), fold), e). So a model's run depends only on its
(seed, fold, λ), never on which other models share the program.

Vectorisation: models hold different numbers of triplets (folds differ), so each model's triplets
live in one fixed-size array of Q·G·negatives slots with a role per slot (invalid / train / held out).
Each epoch a model sorts its own shuffled train slots to the front; the scan runs
ceil(max_m n_train / batch) steps, the last partial batch is masked, and a step with no valid row
leaves parameters and optimiser state untouched (``jnp.where``), so a model's result is the same as
when it trains alone. The model axis runs in equal groups sized by a byte estimate of each model's
intermediates (``model_bytes``, ``memory_budget``); each group's axis can be sharded over all local devices
(1-D mesh). Groups share the run's static shapes, so a model's result does not depend on its group.

Why one program: the models share every static shape, so one compilation trains them all.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax.errors import CacheError
from riskrank_jax.model import checkpoints as ckpt
from riskrank_jax.model import heads
from riskrank_jax.model.groups import gathered, map_models, plan_groups
from riskrank_jax.model.heldout import n_held, random_first, split_key
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET
from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import l2_normalise, level_to_score, penalise

NEGATIVE_SAMPLING = ("uniform", "hard", "mixed")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a training run (defaults: the protocol values of docs/method.md §3)."""

    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 10
    negatives: int = 5  # per (query, gold tool)
    margin: float = 0.1
    mu: float = 0.5
    heldout_fraction: float = 0.1
    hidden: int = 64
    rel_features: str = "concat"  # "concat" (paper) | "interact" (beyond the paper)
    negative_sampling: str = "uniform"  # "uniform" (paper) | "hard" | "mixed" (beyond the paper)
    hard_per_positive: int = 2  # "mixed": this many of the negatives are hard, the rest uniform
    hard_pool: int = 50
    lambda_aware: bool = False
    lambdas: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2)

    def __post_init__(self):
        object.__setattr__(self, "lambdas", tuple(float(x) for x in self.lambdas))
        if self.rel_features not in heads.REL_FEATURES:
            raise ValueError(f"rel_features must be one of {heads.REL_FEATURES}, got {self.rel_features!r}")
        if self.negative_sampling not in NEGATIVE_SAMPLING:
            raise ValueError(f"negative_sampling must be one of {NEGATIVE_SAMPLING}, got {self.negative_sampling!r}")
        if not 0 <= self.hard_per_positive <= self.negatives:
            raise ValueError(f"hard_per_positive must be in 0..negatives, got {self.hard_per_positive}")
        for name in ("batch_size", "epochs", "negatives", "hidden", "hard_pool"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction}")
        if self.lambda_aware and not self.lambdas:
            raise ValueError("lambda_aware needs at least one lambda")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["lambdas"] = list(self.lambdas)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """The config a run recorded; CacheError naming the unknown keys of a run written with other names."""
        d = dict(d)
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise CacheError(f"a training run recorded the unknown setting(s) {unknown} (written by an earlier "
                             "version with other names): train again, or delete that checkpoint directory")
        d["lambdas"] = tuple(d.get("lambdas", ()))
        return cls(**d)


@dataclass
class TrainResult:
    """Stacked best-epoch parameters of all models of a run, with their training curves.

    ``params`` leaves have a leading model axis M; ``model_index[m]`` = {"seed", "fold"[, "lam"]}.
    ``heldout_loss`` / ``train_loss`` are float32 [M, epochs]; ``best_epoch`` int32 [M] (0-based).
    """

    params: dict
    model_index: list[dict]
    heldout_loss: np.ndarray
    train_loss: np.ndarray
    best_epoch: np.ndarray
    config: TrainConfig
    data_hash: str = ""
    run_config: dict = field(default_factory=dict)

    @property
    def n_models(self) -> int:
        return len(self.model_index)

    def model_params(self, m: int) -> dict:
        return jax.tree.map(lambda x: x[m], self.params)

    def find(self, seed: int, fold: int, lam: float | None = None) -> int:
        """Index m of the model with this seed and fold (and λ for λ-aware runs)."""
        for m, ix in enumerate(self.model_index):
            if ix["seed"] == seed and ix["fold"] == fold and (lam is None or ix.get("lam") == lam):
                return m
        raise KeyError(f"no model with seed={seed}, fold={fold}, lam={lam}")


# ----------------------------------------------------------------------------------------------
# Host-side preparation


def _clean_gold(gold: np.ndarray, n_tools: int) -> np.ndarray:
    """Gold rows with duplicates removed (order kept), still padded with -1."""
    gold = np.asarray(gold)
    if gold.ndim != 2:
        raise ValueError(f"gold must be [Q, G], got shape {gold.shape}")
    if np.any((gold >= n_tools) | (gold < -1)):
        raise ValueError(f"gold holds tool ids outside [0, {n_tools}) (padding must be -1)")
    out = np.full_like(gold, -1, dtype=np.int32)
    for i, row in enumerate(gold):
        seen = list(dict.fromkeys(int(g) for g in row if g >= 0))
        out[i, : len(seen)] = seen
    return out


def _shared_inputs(gold: np.ndarray, fold_mask: np.ndarray, n_tools: int) -> tuple[dict, np.ndarray]:
    """Arrays every model of a run reads (gold sets, sorted gold for uniform sampling, fold mask), and
    the number of gold tools per query."""
    gold_c = _clean_gold(gold, n_tools)
    n_gold = (gold_c >= 0).sum(-1)
    shared = {
        "gold": gold_c,
        "gold_sorted": np.sort(np.where(gold_c >= 0, gold_c, n_tools), axis=1).astype(np.int32),
        "n_allowed": (n_tools - n_gold).astype(np.int32),
        "fold_mask": fold_mask,
    }
    return shared, n_gold


def model_index(seeds, folds, config: TrainConfig) -> list[dict]:
    """Model order: seed-major, then fold, then λ (λ-aware runs only)."""
    out = []
    for s in seeds:
        for f in folds:
            if config.lambda_aware:
                out.extend({"seed": int(s), "fold": int(f), "lam": float(lam)} for lam in config.lambdas)
            else:
                out.append({"seed": int(s), "fold": int(f)})
    return out


def hard_candidates(query_emb, tool_emb, gold, hard_pool: int):
    """Each query's ``hard_pool`` best non-gold tools by the frozen cosine (``model.negatives.best_non_gold``; at
    most N − G). Returns (order int32 [Q, H], n_hard int32 [Q], H for every query)."""
    scores = l2_normalise(query_emb) @ l2_normalise(tool_emb).T
    order = best_non_gold(scores, gold, min(hard_pool, tool_emb.shape[0] - gold.shape[1]))
    return order, jnp.full(order.shape[0], order.shape[1], jnp.int32)


# ----------------------------------------------------------------------------------------------
# Per-model pieces (vmapped over the model axis)


def _keys(seed, fold):
    base = jax.random.key(seed)
    return {
        "init": jax.random.fold_in(base, 0),
        "neg": jax.random.fold_in(jax.random.fold_in(base, 1), fold),
        "split": split_key(seed, fold),
        "order": jax.random.fold_in(jax.random.fold_in(base, 3), fold),
    }


def _build_triplets(seed, fold, n_hold, shared, *, config: TrainConfig, n_hold_max: int):
    """One model's triplet slots. Slot t = (q·G + g)·negatives + j holds (q, gold[q, g], negative j)."""
    gold = shared["gold"]
    n_q, g_width = gold.shape
    k = config.negatives
    n_slots = n_q * g_width * k
    keys = _keys(seed, fold)
    q_idx = jnp.repeat(jnp.arange(n_q, dtype=jnp.int32), g_width * k)
    pos = jnp.repeat(gold.reshape(-1), k)
    valid = (pos >= 0) & shared["fold_mask"][fold][q_idx]
    # 32 random bits per slot, reduced modulo the number of allowed tools (bias <= N / 2**32).
    # Drawn 1-D and reshaped: a 2-D draw under vmap compiles several times slower on CPU.
    bits = jax.random.bits(keys["neg"], (n_slots,), jnp.uint32).reshape(n_q, g_width * k)
    if config.negative_sampling in ("uniform", "mixed"):
        # x ~ U{0 .. N − |gold_q| − 1}, then skip over the sorted gold ids: the x-th non-gold tool.
        x = (bits % shared["n_allowed"][:, None].astype(jnp.uint32)).astype(jnp.int32)
        for i in range(g_width):
            x = x + (x >= shared["gold_sorted"][:, i : i + 1]).astype(x.dtype)
        neg = x.reshape(-1)
    if config.negative_sampling in ("hard", "mixed"):
        x = (bits % shared["n_hard"][:, None].astype(jnp.uint32)).astype(jnp.int32)
        hard = jnp.take_along_axis(shared["hard_order"], x, axis=1).reshape(-1)
        if config.negative_sampling == "hard":
            neg = hard
        else:  # negative j of each positive is hard for j < hard_per_positive, uniform otherwise
            neg = jnp.where(jnp.arange(n_slots) % k < config.hard_per_positive, hard, neg)
    n_valid = valid.sum()
    perm = random_first(keys["split"], valid)  # valid slots first, in random order
    rank = jnp.arange(n_slots)
    train_flag = jnp.zeros(n_slots, bool).at[perm].set((rank >= n_hold) & (rank < n_valid))
    hold_idx = perm[:n_hold_max] if n_hold_max <= n_slots else jnp.pad(perm, (0, n_hold_max - n_slots))
    return {
        "q": q_idx,
        "pos": jnp.where(valid, pos, 0).astype(jnp.int32),
        "neg": jnp.where(valid, neg, 0).astype(jnp.int32),
        "train_flag": train_flag,
        "hold_idx": hold_idx.astype(jnp.int32),
        "hold_mask": jnp.arange(n_hold_max) < n_hold,
        "n_train": (n_valid - n_hold).astype(jnp.int32),
        "n_hold": jnp.asarray(n_hold, jnp.int32),
        "n_valid": n_valid.astype(jnp.int32),
    }


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


def _init_state(seed, fold, *, config: TrainConfig, dim: int):
    params = heads.init_params(_keys(seed, fold)["init"], dim, config.hidden, config.rel_features)
    return {
        "params": params,
        "opt_state": optax.adam(config.lr).init(params),
        "best_params": params,
        "best_loss": jnp.asarray(jnp.inf, jnp.float32),
        "best_epoch": jnp.asarray(-1, jnp.int32),
    }


def _one_epoch(state, data, seed, fold, lam, epoch, shared, *, config: TrainConfig, steps: int):
    """One epoch of one model: shuffled masked minibatches, then the held-out loss and best-so-far."""
    opt = optax.adam(config.lr)
    loss_fn = functools.partial(_loss, config=config)
    n_slots = data["train_flag"].shape[0]
    b = config.batch_size
    order = random_first(jax.random.fold_in(_keys(seed, fold)["order"], epoch), data["train_flag"])
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
def _build_program(negative_sampling: str, negatives: int, n_hold_max: int, hard_per_positive: int):
    cfg = TrainConfig(negative_sampling=negative_sampling, negatives=negatives, hard_per_positive=hard_per_positive)
    fn = functools.partial(_build_triplets, config=cfg, n_hold_max=n_hold_max)
    return jax.jit(jax.vmap(fn, in_axes=(0, 0, 0, None)))


@functools.lru_cache(maxsize=32)
def _init_program(hidden: int, rel_features: str, dim: int):
    cfg = TrainConfig(hidden=hidden, rel_features=rel_features)
    return jax.jit(jax.vmap(functools.partial(_init_state, config=cfg, dim=dim)))


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
        _build_program(config.negative_sampling, config.negatives, n_hold_max, config.hard_per_positive),
        _init_program(config.hidden, config.rel_features, dim),
        _epoch_program(epoch_cfg, steps, jax.default_backend(), jax.device_count()),
    )


def abstract_state(n_models: int, dim: int, config: TrainConfig) -> dict:
    """Shapes/dtypes of a run's saved state (what checkpoints.py restores against)."""
    one = jax.eval_shape(functools.partial(_init_state, config=config, dim=dim), 0, 0)

    def stack(x):
        return jax.ShapeDtypeStruct((n_models, *x.shape), x.dtype)

    e = config.epochs
    return {
        "params": jax.tree.map(stack, one["params"]),
        "opt_state": _flat(jax.tree.map(stack, one["opt_state"])),
        "best_params": jax.tree.map(stack, one["params"]),
        "best_loss": stack(one["best_loss"]),
        "best_epoch": stack(one["best_epoch"]),
        "train_loss": jax.ShapeDtypeStruct((n_models, e), np.float32),
        "heldout_loss": jax.ShapeDtypeStruct((n_models, e), np.float32),
        "epochs_done": jax.ShapeDtypeStruct((), np.int32),
    }


def _flat(tree) -> dict:
    """Optimiser state as {"0000": leaf, ...} (checkpoint-friendly, no namedtuples)."""
    return {f"{i:04d}": x for i, x in enumerate(jax.tree.leaves(tree))}


def _unflat(flat: dict, like):
    return jax.tree.unflatten(jax.tree.structure(like), [flat[k] for k in sorted(flat)])


# ----------------------------------------------------------------------------------------------
# Host-side steps of a run (train_models calls them in this order)


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


def _open_checkpoint(checkpoint_dir, run_config: dict, data_hash: str, config: TrainConfig):
    """(store, saved state or None, epochs already done, TrainResult when the run is already complete).

    No directory: (None, None, 0, None)."""
    if checkpoint_dir is None:
        return None, None, 0, None
    store = ckpt.RunStore(checkpoint_dir, run_config, data_hash)
    n_models, dim = len(run_config["model_index"]), run_config["shapes"]["dim"]
    status, start_epoch, saved = store.open(abstract_state(n_models, dim, config))
    if status == "completed":
        store.close()
        return store, saved, start_epoch, result_from_state(saved, run_config, data_hash, store.directory)
    return store, saved, start_epoch, None


def _shared_for_run(gold_in, fold_mask, query_emb, tool_emb, config: TrainConfig) -> tuple[dict, np.ndarray]:
    """``_shared_inputs`` plus, for hard/mixed negatives, each query's hard candidates ("hard_order" int32
    [Q, H], "n_hard" int32 [Q]); clear errors when no negative can be drawn."""
    n_tools = tool_emb.shape[0]
    shared, n_gold = _shared_inputs(gold_in, fold_mask, n_tools)
    if np.any(shared["n_allowed"] < 1):
        raise ValueError("a query's gold set covers the whole pool: no negative can be drawn")
    if config.negative_sampling in ("hard", "mixed"):
        if config.hard_pool > n_tools:
            raise ValueError(f"hard_pool={config.hard_pool} exceeds the pool size {n_tools}")
        order, n_hard = hard_candidates(jnp.asarray(query_emb), jnp.asarray(tool_emb), jnp.asarray(shared["gold"]),
                                        config.hard_pool)
        shared["hard_order"], shared["n_hard"] = np.asarray(order), np.asarray(n_hard)
    return shared, n_gold


def _model_counts(index, n_gold, fold_mask, config: TrainConfig):
    """Per-model triplet counts on the host, which fix the static shapes.

    Returns (n_valid int [M], n_hold int32 [M], steps per epoch, held-out width)."""
    n_valid = np.array([config.negatives * int(n_gold[fold_mask[ix["fold"]]].sum()) for ix in index])
    n_hold = np.array([n_held(int(v), config.heldout_fraction, at_least=0) for v in n_valid], np.int32)
    n_train = n_valid - n_hold
    if np.any(n_train < 1):
        raise ValueError("some model has no training triplets (empty fold or no gold tools)")
    steps = int(math.ceil(n_train.max() / config.batch_size))
    n_hold_max = max(1, int(n_hold.max()))
    return n_valid, n_hold, steps, n_hold_max


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
    shared, n_gold = _shared_for_run(gold_in, fold_mask, query_emb, tool_emb, config)
    n_valid, n_hold, steps, n_hold_max = _model_counts(index, n_gold, fold_mask, config)
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
        "opt_state": _unflat(saved["opt_state"], like),
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
            store.save_epoch(e + 1, _host_state(gathered(states, [g.n for g in run.groups]), train_hist, held_hist, e + 1))
        if on_epoch_end is not None:
            on_epoch_end(e + 1, train_hist[:, e].copy(), held_hist[:, e].copy())
    return states


# ----------------------------------------------------------------------------------------------
# Entry point


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
    store, saved, start_epoch, finished = _open_checkpoint(checkpoint_dir, run_config, data_hash, config)
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


def result_from_state(state: dict, run_config: dict, data_hash: str, checkpoint_dir) -> TrainResult:
    """The TrainResult of a completed run from its saved state (see ``abstract_state``)."""
    return TrainResult(
        params=jax.tree.map(jnp.asarray, state["best_params"]),
        model_index=run_config["model_index"],
        heldout_loss=np.asarray(state["heldout_loss"]),
        train_loss=np.asarray(state["train_loss"]),
        best_epoch=np.asarray(state["best_epoch"]).astype(np.int32),
        config=TrainConfig.from_dict(run_config["train_config"]),
        data_hash=data_hash,
        run_config={**run_config, "checkpoint_dir": str(checkpoint_dir)},
    )


def _host_state(host, train_hist, held_hist, epochs_done) -> dict:
    """What a checkpoint saves: the run's state (host numpy over its models, see ``groups.gathered``) and curves."""
    return {
        "params": host["params"],
        "opt_state": _flat(host["opt_state"]),
        "best_params": host["best_params"],
        "best_loss": host["best_loss"],
        "best_epoch": host["best_epoch"],
        "train_loss": train_hist.copy(),
        "heldout_loss": held_hist.copy(),
        "epochs_done": np.asarray(epochs_done, np.int32),
    }


def build_triplets(gold, fold_mask, seed: int, fold: int, n_tools: int, config: TrainConfig = TrainConfig(), *,
                   query_emb=None, tool_emb=None) -> dict:
    """One model's triplets as numpy (for inspection and tests): the same code the training runs.

    Returns {"q", "pos", "neg"} for the training triplets and {"hold_q", "hold_pos", "hold_neg"} for
    the held-out ones (int32 arrays in slot order / held-out order). ``query_emb``/``tool_emb`` are
    needed for ``negative_sampling="hard"``.
    """
    fold_mask = np.asarray(fold_mask, bool)
    shared, n_gold = _shared_inputs(np.asarray(gold, np.int32), fold_mask, n_tools)
    if config.negative_sampling in ("hard", "mixed"):
        order, n_hard = hard_candidates(jnp.asarray(query_emb), jnp.asarray(tool_emb), jnp.asarray(shared["gold"]),
                                        config.hard_pool)
        shared["hard_order"], shared["n_hard"] = order, n_hard
    n_valid = config.negatives * int(n_gold[fold_mask[fold]].sum())
    n_hold = n_held(n_valid, config.heldout_fraction, at_least=0)
    program = _build_program(config.negative_sampling, config.negatives, max(1, n_hold), config.hard_per_positive)
    one = lambda v: np.asarray([v], np.int32)  # noqa: E731  (a model axis of 1: the training program)
    d = program(one(seed), one(fold), one(n_hold), shared)
    d = jax.tree.map(lambda x: np.asarray(x)[0], d)
    tr = d["train_flag"]
    hi = d["hold_idx"][d["hold_mask"]]
    return {
        "q": d["q"][tr], "pos": d["pos"][tr], "neg": d["neg"][tr],
        "hold_q": d["q"][hi], "hold_pos": d["pos"][hi], "hold_neg": d["neg"][hi],
    }


def load_trained(checkpoint_dir) -> TrainResult:
    """The TrainResult of a completed run directory (best-epoch params, curves, model index)."""
    directory = Path(checkpoint_dir).expanduser().resolve()
    saved = ckpt.read_run(directory)
    if saved.get("status") != "completed":
        raise CacheError(
            f"{directory / ckpt.RUN_FILE}: run not completed ({saved.get('epochs_done', 0)} epochs done); "
            "call train_models with the same arguments to resume it"
        )
    cfg_json = saved["config"]
    config = TrainConfig.from_dict(cfg_json["train_config"])
    store = ckpt.RunStore(directory, cfg_json, saved["data_hash"])
    try:
        state = store.restore(abstract_state(len(cfg_json["model_index"]), cfg_json["shapes"]["dim"], config),
                              step=config.epochs)
    finally:
        store.close()
    return result_from_state(state, cfg_json, saved["data_hash"], directory)


def plain_config(config: TrainConfig) -> TrainConfig:
    """The plain (not λ-aware) configuration with ``config``'s other hyper-parameters: its models are the
    λ = 0 models of the λ-aware run ``config`` (at λ = 0 the penalty term is exactly zero, in the loss and in the
    gradients, and every random draw depends only on (seed, fold)). Equal up to float rounding: XLA may sum the
    risk head's gradient in another order (≤ 1.5e-8 in tests/test_train.py; bit for bit on UltraTool)."""
    return dataclasses.replace(config, lambda_aware=False, lambdas=())


def lambda_run_from_plain(plain: TrainResult, rest: TrainResult | None, config: TrainConfig) -> TrainResult:
    """The λ-aware run ``config`` assembled from the plain run ``plain`` (its λ = 0 models, see ``plain_config``)
    and ``rest`` (the same run at every other λ: ``config`` with λ = 0 removed; None when λ = 0 is the only one),
    so a sweep that trains both never trains the λ = 0 models twice. Models follow ``model_index`` order."""
    if not config.lambda_aware or plain_config(plain.config) != plain_config(config):
        raise ValueError("lambda_run_from_plain needs a λ-aware config and a plain run with its other "
                         f"hyper-parameters; got {config} and {plain.config}")
    seeds = tuple(dict.fromkeys(ix["seed"] for ix in plain.model_index))
    folds = tuple(dict.fromkeys(ix["fold"] for ix in plain.model_index))
    index = model_index(seeds, folds, config)
    if rest is None and any(lam != 0.0 for lam in config.lambdas):
        raise ValueError(f"λ ≠ 0 models need their run (rest); config has λ = {config.lambdas}")
    if rest is not None and rest.data_hash != plain.data_hash:
        raise ValueError(f"the plain run and the λ ≠ 0 run saw different data ({plain.data_hash} vs {rest.data_hash})")
    sources = [(plain, plain.find(ix["seed"], ix["fold"])) if ix["lam"] == 0.0
               else (rest, rest.find(ix["seed"], ix["fold"], ix["lam"])) for ix in index]
    host = {id(r): [np.asarray(x) for x in jax.tree.leaves(r.params)] for r in (plain, rest) if r is not None}
    columns = zip(*([leaf[m] for leaf in host[id(res)]] for res, m in sources))
    params = jax.tree.unflatten(jax.tree.structure(plain.params), [jnp.asarray(np.stack(c)) for c in columns])

    def stacked(get):
        return np.stack([np.asarray(get(res))[m] for res, m in sources])

    run_config = {**(rest.run_config if rest is not None else plain.run_config), "model_index": index,
                  "train_config": config.to_dict(),
                  "lambda_zero_from": plain.run_config.get("checkpoint_dir", "the plain run")}
    return TrainResult(params=params, model_index=index, heldout_loss=stacked(lambda r: r.heldout_loss),
                       train_loss=stacked(lambda r: r.train_loss), best_epoch=stacked(lambda r: r.best_epoch),
                       config=config, data_hash=plain.data_hash, run_config=run_config)


__all__ = ["TrainConfig", "TrainResult", "TrainRun", "train_models", "build_triplets", "model_index", "hard_candidates",
           "abstract_state", "result_from_state", "load_trained", "plain_config", "lambda_run_from_plain",
           "model_bytes"]
