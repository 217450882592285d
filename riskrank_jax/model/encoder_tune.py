"""Fine-tuning the sentence encoder itself: the top transformer layers, trained on (query, gold tool text) pairs.

    states = TextStates.build(encoder, texts, frozen_layers)           # lower layers run once, cached
    tuned = tune_encoder(encoder, states, query_rows, tool_rows, gold, train_idx, hard, seed, TuneConfig())
    many = tune_encoders(encoder, states, query_rows, tool_rows, gold, [TuneJob(train_idx, hard, seed), ...])
    t_emb = embed_states(tuned, states, tool_rows)                        # [N, d], the tuned encoder's vectors
    save_tuned_encoder(encoder, tuned, "my_ranker/encoder")               # a Hugging Face BERT directory

Loss: an in-batch softmax over cosine / τ — each query against its sampled gold tool, the other queries' gold
tools and ``negatives`` hard negatives per query from the first stage's best non-gold tools; a query's other
gold tools are masked out of its softmax. Optimiser: AdamW with a linear warm-up and decay, gradients clipped
to norm 1. Deterministic for a seed: the whole batch schedule is drawn up front from the seed, so a run resumed
from its orbax checkpoint (every ``checkpoint_every`` steps) takes the same steps as one that never stopped.

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

import functools
import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from riskrank_jax.encode.bert import pool_texts, run_layers, segment_attention
from riskrank_jax.encode.batching import ROW_LENGTH as PACK_WIDTH
from riskrank_jax.encode.token_packing import pack_rows
from riskrank_jax.errors import RiskRankError
from riskrank_jax.runtime.progress import progress_bar


@dataclass(frozen=True)
class TuneConfig:
    """layers: top transformer layers trained (the rest frozen); epochs over the training queries (the most: with
    an ``evaluate`` hook, ``tune_encoder`` keeps the best epoch's layers); batch_size: queries
    per step; negatives: hard negatives per query, drawn from the first stage's ``hard_pool`` best non-gold tools; lr: AdamW's
    peak learning rate (warm-up over ``warmup`` of the steps, then linear decay to 0); temperature τ of the
    softmax over cosines; max_query_tokens / max_tool_tokens: training view of a text (its first tokens; the
    final embeddings always use every token); heldout_fraction: training queries kept out to choose the gate;
    step_budget: the most steps of a run (None: no limit), in whole epochs, at least one: a long log makes as many
    updates in fewer passes over it (``epochs_run``)."""

    layers: int = 2
    epochs: int = 4
    batch_size: int = 32
    negatives: int = 1
    hard_pool: int = 10
    lr: float = 2e-4
    weight_decay: float = 0.01
    warmup: float = 0.1
    temperature: float = 0.05
    max_query_tokens: int = 64
    max_tool_tokens: int = 64
    heldout_fraction: float = 0.2
    checkpoint_every: int = 50
    step_budget: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TextStates:
    """Token states of texts after the frozen layers: states float32 [T + 1, d] (last row zeros, for padding),
    offsets int64 [n + 1]; ``frozen_layers`` of ``encoder_id`` produced them."""

    states: np.ndarray
    offsets: np.ndarray
    frozen_layers: int
    encoder_id: str

    @staticmethod
    def build(encoder, texts, frozen_layers: int, *, progress: bool | None = None) -> "TextStates":
        states, offsets = encoder.lower_states(list(texts), frozen_layers, progress=progress)
        return TextStates(states, offsets, int(frozen_layers), encoder.model_id)

    @property
    def size(self) -> int:
        return int(self.offsets.size - 1)

    @functools.cached_property
    def device_states(self):
        """``states`` on the default device, copied there once: the training loop and every ``embed_states`` call
        share it (each used to copy its own)."""
        import jax.numpy as jnp

        return jnp.asarray(self.states)

    def lengths(self, idx=None) -> np.ndarray:
        """Tokens of each text (of ``idx``, default all) int64 [n]."""
        idx = np.arange(self.size) if idx is None else np.asarray(idx, np.int64)
        return self.offsets[idx + 1] - self.offsets[idx]

    def pack(self, idx, cap: int, width: int) -> list[np.ndarray]:
        """The rows of ``width`` tokens that the texts ``idx`` (each cut to its first ``cap`` <= width tokens)
        pack into: per row, positions into ``idx`` (``encode.token_packing.pack_rows``, best-fit decreasing)."""
        lens = np.minimum(self.lengths(idx), int(cap))
        return pack_rows(np.maximum(lens, 1), int(width), max(1, int(width) // 2))

    def packed(self, idx, cap: int, width: int, n_rows: int | None = None, rows=None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(token index int32 [R, width] into ``states``, slot int32 [R, width]: k + 1 on the tokens of the k-th
        text of ``idx``, 0 on padding) of the texts ``idx``, each cut to its first ``cap`` tokens, several to a
        row (``rows``: positions into ``idx`` per row, default ``pack``); R = ``n_rows`` (at least as many as
        there are rows; the rest empty) or that many."""
        idx = np.asarray(idx, np.int64)
        lens = np.minimum(self.lengths(idx), int(cap))
        rows = self.pack(idx, cap, width) if rows is None else rows
        n_rows = len(rows) if n_rows is None else int(n_rows)
        if n_rows < len(rows):
            raise RiskRankError(f"{idx.size} texts need {len(rows)} rows of {width} tokens, {n_rows} given")
        pad = self.states.shape[0] - 1
        tok = np.full((n_rows, int(width)), pad, np.int32)
        slot = np.zeros((n_rows, int(width)), np.int32)
        for r, members in enumerate(rows):
            at = 0
            for k in np.asarray(members).tolist():
                n = int(lens[k])
                tok[r, at:at + n] = self.offsets[idx[k]] + np.arange(n)
                slot[r, at:at + n] = k + 1
                at += n
        return tok, slot


@dataclass(frozen=True)
class TunedEncoder:
    """The trained top layers of an encoder: ``top`` (packed layer dicts, numpy), with how they were trained."""

    top: tuple
    base_id: str
    frozen_layers: int
    pooling: str
    normalize: bool
    config: TuneConfig
    seed: int
    losses: np.ndarray
    seconds: float  # wall time of the run that trained it (with every other model of that run)
    epoch_scores: np.ndarray | None = None  # the ``evaluate`` score after each epoch (NaN: not evaluated)

    @staticmethod
    def untrained(encoder, layers: int) -> "TunedEncoder":
        """The encoder's own top ``layers`` layers, as a TunedEncoder (what training starts from)."""
        n = encoder.shape.num_layers
        top = tuple(_numpy_tree(lp) for lp in encoder.params["layers"][n - int(layers):])
        return TunedEncoder(top, encoder.model_id, n - int(layers), encoder.pooling, encoder.normalize,
                            TuneConfig(layers=int(layers), epochs=0), 0, np.zeros(0, np.float32), 0.0)

    @property
    def tuned_id(self) -> str:
        """The tuned encoder's id: the base id and a hash of the trained weights (embeddings are cached under it)."""
        h = hashlib.sha256()
        for lp in self.top:
            for name in sorted(lp):
                for a in lp[name]:
                    h.update(np.ascontiguousarray(a, np.float32).tobytes())
        return f"{self.base_id}+tuned{self.frozen_layers}@{h.hexdigest()[:16]}"


def _encode_top(top, states, tok, slot, n_texts: int, shape, pooling: str, normalize: bool):
    """Sentence vectors [n_texts, d] of texts packed in rows of token indices into the frozen states
    (``TextStates.packed``: tok, slot [R, W])."""
    import jax.numpy as jnp

    from riskrank_jax.scoring import l2_normalise

    x = run_layers(top, states[tok], segment_attention(slot), shape)
    v = pool_texts(x, slot, n_texts, pooling)
    return l2_normalise(v) if normalize else v.astype(jnp.float32)


def _loss(top, states, q, t, exclude, shape, pooling, normalize, temperature):
    """In-batch softmax cross-entropy: query i's label is tool column i; ``exclude`` [Bq, Bt] masks out a query's
    other gold tools."""
    import jax.numpy as jnp
    import optax

    qv = _encode_top(top, states, *q, exclude.shape[0], shape, pooling, normalize)
    tv = _encode_top(top, states, *t, exclude.shape[1], shape, pooling, normalize)
    logits = jnp.where(exclude, -1e9, (qv @ tv.T) / temperature)
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.arange(qv.shape[0])).mean()


def epochs_run(config: TuneConfig, n_queries: int) -> int:
    """Epochs a run over ``n_queries`` training queries takes: ``config.epochs``, fewer when they would exceed
    ``config.step_budget`` steps (whole epochs, at least one)."""
    per_epoch = max(1, int(n_queries) // max(1, min(int(config.batch_size), int(n_queries))))
    if config.step_budget is None:
        return int(config.epochs)
    return max(1, min(int(config.epochs), int(config.step_budget) // per_epoch))


def batch_schedule(gold, train_idx, hard, seed: int, config: TuneConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """The whole training schedule, drawn from ``seed``: per step (query ids [Bq], tool ids [Bq · (1 + h)]: the
    queries' sampled gold tools, then their hard negatives). gold int [Q, G] (−1 pad); hard int [Q, P]: each
    query's first-stage best non-gold tools. The last partial batch of an epoch is dropped when one is full."""
    rng = np.random.default_rng(seed)
    train_idx = np.asarray(train_idx, np.int64)
    bq = min(int(config.batch_size), train_idx.size)
    steps = []
    for _ in range(epochs_run(config, train_idx.size)):
        order = rng.permutation(train_idx)
        for s in range(0, order.size - bq + 1, bq):
            qs = order[s:s + bq]
            pos = np.array([rng.choice(gold[q][gold[q] >= 0]) for q in qs], np.int64)
            pool = hard[qs, :max(1, min(config.hard_pool, hard.shape[1]))]
            neg = np.stack([rng.choice(row, size=config.negatives, replace=False) for row in pool])
            steps.append((qs, np.concatenate([pos, neg.reshape(-1)])))
    return steps


def _exclude_mask(gold, qs, tools) -> np.ndarray:
    """bool [Bq, Bt]: tool column j is a gold tool of query i other than its label column i."""
    gold_sets = [set(gold[q][gold[q] >= 0].tolist()) for q in qs]
    mask = np.array([[int(t) in g for t in tools] for g in gold_sets], bool)
    mask[np.arange(len(qs)), np.arange(len(qs))] = False
    return mask


def _learning_rate(config: TuneConfig, warm, total):
    """AdamW's learning rate at a step count: linear warm-up from 0 to ``config.lr`` over ``warm`` steps, then
    linear decay to 0 over the other ``total − warm`` (optax.join_schedules of two optax.linear_schedule, written
    out so that ``warm`` and ``total`` may be traced: each model of a mapped run has its own schedule length)."""
    import jax.numpy as jnp

    lr = float(config.lr)
    decay = jnp.maximum(1, total - warm)

    def schedule(count):
        up = (0.0 - lr) * (1 - jnp.clip(count, 0, warm) / warm) + lr
        down = (lr - 0.0) * (1 - jnp.clip(count - warm, 0, decay) / decay) + 0.0
        return jnp.where(count < warm, up, down)

    return schedule


def warmup_steps(config: TuneConfig, total_steps: int) -> int:
    """Steps of the learning-rate warm-up of a run of ``total_steps`` (at least 1)."""
    return max(1, int(round(config.warmup * total_steps)))


def _optimizer(config: TuneConfig, warm, total):
    import optax

    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(_learning_rate(config, warm, total), weight_decay=config.weight_decay))


@functools.lru_cache(maxsize=8)
def _compiled_step(shape, pooling: str, normalize: bool, config: TuneConfig, backend: str, n_devices: int):
    """The jitted train step of a group of models, every argument but ``states`` with a leading model axis:
    (top, opt_state, live bool [M], warm int [M], total int [M], states, q_tok, q_seg, t_tok, t_seg, exclude) ->
    (top, opt_state, loss [M]). A model whose ``live`` is False (its schedule is over: a padded step) keeps its
    top and optimiser state unchanged. Mapped over the models with ``model.groups.map_models`` (vmap; lax.map on
    one CPU device: hence the backend and device count in the cache key); one compilation per model shape,
    configuration and group size."""
    import jax
    import jax.numpy as jnp
    import optax

    from riskrank_jax.model.groups import map_models

    loss = functools.partial(_loss, shape=shape, pooling=pooling, normalize=normalize, temperature=config.temperature)

    def one(top, opt_state, live, warm, total, states, q_tok, q_seg, t_tok, t_seg, exclude):
        value, grads = jax.value_and_grad(loss)(top, states, (q_tok, q_seg), (t_tok, t_seg), exclude)
        updates, new_opt = _optimizer(config, warm, total).update(grads, opt_state, top)
        keep = lambda new, old: jnp.where(live, new, old)  # noqa: E731
        return (jax.tree.map(keep, optax.apply_updates(top, updates), top), jax.tree.map(keep, new_opt, opt_state),
                value)

    return jax.jit(map_models(one, (0, 0, 0, 0, 0, None, 0, 0, 0, 0, 0)), donate_argnums=(0, 1))


@functools.lru_cache(maxsize=8)
def _compiled_encode(shape, pooling: str, normalize: bool):
    import jax

    return jax.jit(functools.partial(_encode_top, shape=shape, pooling=pooling, normalize=normalize),
                   static_argnames=("n_texts",))


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


def tune_bytes(top, bq: int, bt: int, wq: int, wt: int, num_heads: int) -> tuple[int, int]:
    """Estimated bytes of one model's training step: (its state held between steps: top layers and Adam moments;
    what its step adds while it runs: gradients, updates and the activations kept for the backward pass of ``bq``
    packed query rows of ``wq`` tokens and ``bt`` packed tool rows of ``wt`` tokens)."""
    params = sum(int(np.size(a)) for lp in top for name in lp for a in lp[name])
    tokens = bq * wq + bt * wt
    d, ffn = (int(np.shape(top[0]["ffn_in"][0])[i]) for i in (0, 1))
    per_layer = tokens * (8 * d + ffn) + 2 * num_heads * (bq * wq * wq + bt * wt * wt)
    return 4 * 3 * params, 4 * (2 * params + len(top) * per_layer + tokens * d)


def _groups(n_models: int, state_bytes: int, activation_bytes: int, budget: int) -> list:
    """``model.groups.plan_groups`` of a tuning run: models mapped one after another (``lax.map``) hold one
    model's step intermediates at a time, vmapped ones each their own."""
    from riskrank_jax.model.groups import maps_sequentially, plan_groups

    if maps_sequentially():
        return plan_groups(n_models, state_bytes, max(state_bytes, budget - activation_bytes))
    return plan_groups(n_models, state_bytes + activation_bytes, budget)


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
    import jax

    from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET

    n_layers, jobs = _check_states(encoder, states, config), list(jobs)
    gold, query_rows, tool_rows = np.asarray(gold), np.asarray(query_rows), np.asarray(tool_rows)
    schedules, (bq, bt) = _schedules(gold, jobs, config)
    top = [jax.tree.map(np.asarray, lp) for lp in encoder.params["layers"][n_layers - config.layers:]]
    lengths = np.array([len(s) for s in schedules], np.int64)
    n_models, n_steps = len(jobs), int(lengths.max())
    warm = np.array([warmup_steps(config, n) for n in lengths], np.int32)
    state = _initial_state(top, config, n_models, n_steps)
    store, done = None, 0
    if checkpoint_dir is not None:
        data_id = data_id or hashlib.sha256(json.dumps(
            [gold.tolist(), [list(map(int, j.train_idx)) for j in jobs]]).encode()).hexdigest()
        store, done, state = _open_store(_run_store(checkpoint_dir, encoder, config, jobs, n_steps, data_id[:16]),
                                         state)
    layout = _layout(states, query_rows, tool_rows, schedules, config)
    (_, wq, rq), (_, wt, rt) = layout
    groups = _groups(n_models, *tune_bytes(top, rq, rt, wq, wt, encoder.shape.num_heads),
                     DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    loop = _Loop(encoder, states, config, jobs, schedules, warm, groups, store, layout)
    stop = n_steps if max_steps is None else min(n_steps, int(max_steps))
    t0 = time.perf_counter()
    bar = progress_bar(enabled=progress and done < n_steps, total=n_steps, initial=done, unit="step",
                       desc=desc + (f" ({n_models} models)" if n_models > 1 else ""), leave=False)
    try:
        state = loop.run(state, done, stop, query_rows, tool_rows, gold, bar)
    finally:
        bar.close()
    if store is not None and stop == n_steps:
        store.complete()
    elif store is not None:
        store.close()  # a time-boxed run: resumable, not complete
    seconds = time.perf_counter() - t0
    return [loop.result(m, state["best" if j.evaluate is not None and stop == n_steps else "top"], state, seconds)
            for m, j in enumerate(jobs)]


def _check_states(encoder, states: TextStates, config: TuneConfig) -> int:
    """The encoder's number of layers, when ``states`` are its states below the top ``config.layers``."""
    n_layers = encoder.shape.num_layers
    if states.frozen_layers != n_layers - config.layers or states.encoder_id != encoder.model_id:
        raise RiskRankError(f"the cached states are of layer {states.frozen_layers} of {states.encoder_id}; "
                            f"training the top {config.layers} layers of {encoder.model_id} needs layer "
                            f"{n_layers - config.layers}")
    return n_layers


def _layout(states: TextStates, query_rows, tool_rows, schedules, config: TuneConfig) -> tuple:
    """((cap, row width, rows) of the queries, the same of the tools) of every step of a run: each text cut to its
    first ``cap`` tokens (``max_query_tokens`` / ``max_tool_tokens``), packed into rows of ``PACK_WIDTH`` tokens (a
    longer cap: rounded up to a multiple of 8), as many rows as the fullest step of any of the run's models needs:
    fixed for the run, so that its step compiles once. The row count is the one thing a model's computation
    takes from the other models of its run: it changes float rounding only (empty rows add zeros)."""
    out = []
    for cap, pick in ((config.max_query_tokens, lambda qs, ts: query_rows[qs]),
                      (config.max_tool_tokens, lambda qs, ts: tool_rows[ts])):
        width = max(PACK_WIDTH, -(-int(cap) // 8) * 8)
        rows = max(len(states.pack(pick(qs, ts), cap, width)) for s in schedules for qs, ts in s)
        out.append((int(cap), width, rows))
    return tuple(out)


def _schedules(gold, jobs, config: TuneConfig) -> tuple[list, tuple[int, int]]:
    """(each job's ``batch_schedule``, (queries, tools) per step, the same for every job)."""
    if not jobs:
        raise RiskRankError("no model to tune")
    schedules = [batch_schedule(gold, j.train_idx, np.asarray(j.hard), j.seed, config) for j in jobs]
    if not all(schedules):
        raise RiskRankError("no training step: fewer training queries than one batch")
    sizes = {(q.size, t.size) for s in schedules for q, t in s[:1]}
    if len(sizes) > 1:
        raise RiskRankError(f"the models of one tuning run need one batch size; their training queries give "
                            f"{sorted(sizes)} (queries, tools) per step")
    return schedules, next(iter(sizes))


def _initial_state(top, config: TuneConfig, n_models: int, n_steps: int) -> dict:
    """A new run's host state, stacked over the models: layers, optimiser state, best layers, losses [M, steps],
    per-epoch scores [M, epochs] (NaN: not evaluated)."""
    import jax

    stack = lambda tree: jax.tree.map(lambda a: np.stack([np.asarray(a)] * n_models), tree)  # noqa: E731
    return {"top": stack(top), "opt": stack(_optimizer(config, 1, n_steps).init(top)), "best": stack(top),
            "losses": np.zeros((n_models, n_steps), np.float32),
            "scores": np.full((n_models, config.epochs), np.nan, np.float32)}


def _run_store(checkpoint_dir, encoder, config: TuneConfig, jobs, n_steps: int, data_id: str):
    from riskrank_jax.model.checkpoints import RunStore

    run_config = {"kind": "encoder-tune", "encoder": encoder.model_id,
                  "models": [{"seed": int(j.seed), "evaluated": j.evaluate is not None,
                              "train_queries": int(np.size(j.train_idx))} for j in jobs],
                  "train_config": {**config.to_dict(), "epochs": n_steps}}  # RunStore counts save points as epochs
    return RunStore(checkpoint_dir, run_config, data_id)


def _open_store(store, state: dict):
    """(store, steps done, state): the saved state of a resumed run, or ``state`` for a new one."""
    import jax

    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype), state)
    _, done, saved = store.open(abstract)
    store.begin()
    return store, done, saved if saved is not None else state


class _Loop:
    """The training loop of ``tune_encoders``: per step, every group of models through the compiled step; per
    model, evaluation after each of its epochs; checkpoints of the stacked state."""

    def __init__(self, encoder, states, config, jobs, schedules, warm, groups, store, layout):
        import jax

        self.encoder, self.states, self.config, self.jobs = encoder, states, config, jobs
        self.schedules, self.warm, self.groups, self.store, self.layout = schedules, warm, groups, store, layout
        self.lengths = np.array([len(s) for s in schedules], np.int64)
        epochs = np.array([epochs_run(config, np.size(j.train_idx)) for j in jobs], np.int64)
        self.per_epoch = np.maximum(1, self.lengths // epochs)
        self.step = _compiled_step(encoder.shape, encoder.pooling, encoder.normalize, config, jax.default_backend(),
                                   jax.device_count())

    def result(self, m: int, top, state, seconds: float) -> TunedEncoder:
        """Model ``m``'s TunedEncoder with the layers ``top`` (stacked over the models, host or device)."""
        enc = self.encoder
        n = enc.shape.num_layers
        layers = tuple(_numpy_tree(_row(lp, m)) for lp in top)
        return TunedEncoder(layers, enc.model_id, n - self.config.layers, enc.pooling, enc.normalize, self.config,
                            int(self.jobs[m].seed), np.asarray(state["losses"][m][:self.lengths[m]]), seconds,
                            np.asarray(state["scores"][m]))

    def _inputs(self, ix, i: int, query_rows, tool_rows, gold) -> tuple:
        """The step-``i`` batch of the models ``ix`` (a model past its schedule repeats its last batch, not live)."""
        live = np.array([i < self.lengths[m] for m in ix])
        batches = [self.schedules[m][min(i, self.lengths[m] - 1)] for m in ix]
        q = [self.states.packed(query_rows[qs], *self.layout[0]) for qs, _ in batches]
        t = [self.states.packed(tool_rows[tools], *self.layout[1]) for _, tools in batches]
        return ((live, self.warm[ix], self.lengths[ix].astype(np.int32)),
                (np.stack([a for a, _ in q]), np.stack([b for _, b in q]), np.stack([a for a, _ in t]),
                 np.stack([b for _, b in t]), np.stack([_exclude_mask(gold, qs, tools) for qs, tools in batches])))

    def run(self, state, done: int, stop: int, query_rows, tool_rows, gold, bar) -> dict:
        import jax
        import jax.numpy as jnp

        from riskrank_jax.model.groups import gathered
        from riskrank_jax.runtime.heap import release_freed_heap

        dev = self.states.device_states
        counts, tops = [n for _, n in self.groups], None
        losses, scores = np.array(state["losses"]), np.array(state["scores"])
        best = jax.tree.map(np.array, state.pop("best"))  # host copies, written in place per model
        # the layers and optimiser states move to the device, group by group; the host copies are let go (popped
        # from the caller's dict too), so a run holds one copy of them
        top_host, opt_host = state.pop("top"), state.pop("opt")
        groups = [(ix, n, jax.tree.map(lambda a: jnp.asarray(np.asarray(a)[ix]), top_host),  # noqa: B023
                   jax.tree.map(lambda a: jnp.asarray(np.asarray(a)[ix]), opt_host)) for ix, n in self.groups]  # noqa: B023
        del top_host, opt_host
        for i in range(done, stop):
            stepped = []
            for ix, n, top, opt_state in groups:
                which, batch = self._inputs(ix, i, query_rows, tool_rows, gold)
                with jax.default_matmul_precision(self.encoder.precision):
                    top, opt_state, loss = self.step(top, opt_state, *which, dev, *batch)
                models = ix[:n]
                live_here = self.lengths[models] > i
                losses[models[live_here], i] = np.asarray(loss)[:n][live_here]
                stepped.append((ix, n, top, opt_state))
            groups = stepped
            live = self.lengths > i
            bar.update(1)
            bar.set_postfix(loss=f"{losses[live, i].mean():.3f}")
            ends = [m for m in range(len(self.jobs)) if live[m] and (i + 1) % self.per_epoch[m] == 0]
            evaluated = [m for m in ends if self.jobs[m].evaluate is not None]
            save = self.store is not None and ((i + 1) % self.config.checkpoint_every == 0
                                               or i + 1 == losses.shape[1] or evaluated)
            tops = gathered([g[2] for g in groups], counts) if evaluated or save else None  # one copy a step
            if evaluated:
                for m in evaluated:
                    e = (i + 1) // self.per_epoch[m] - 1
                    scores[m, e] = float(self.jobs[m].evaluate(self.result(m, tops, {"losses": losses,
                                                                                   "scores": scores}, 0.0)))
                    if e == 0 or scores[m, e] > np.nanmax(scores[m, :e]):
                        for b, t in zip(jax.tree.leaves(best), jax.tree.leaves(tops)):
                            b[m] = t[m]
            if save:
                self.store.save_epoch(i + 1, {"top": tops, "best": best, "losses": losses,
                                              "opt": gathered([g[3] for g in groups], counts), "scores": scores})
            release_freed_heap()  # what the compilation, the evaluation and the save freed, so steps reuse it
        if tops is None:  # the last step neither evaluated nor saved
            tops = gathered([g[2] for g in groups], counts)
        return {"top": tops, "best": best, "losses": losses, "scores": scores}


def _row(tree, m: int):
    """Row ``m`` of every leaf of a tree stacked over the models."""
    import jax

    return jax.tree.map(lambda a: a[m], tree)


EMBED_TOKENS = 4096  # tokens of one ``embed_states`` call: 32 packed rows of PACK_WIDTH


def embed_states(tuned: TunedEncoder, encoder, states: TextStates, rows) -> np.ndarray:
    """float32 [n, d]: the tuned encoder's vectors of the texts ``rows`` of ``states`` (all their tokens).

    The texts are packed into rows of ``PACK_WIDTH`` tokens (longer texts: rows of the longest one's length rounded
    up to a power of two), run ``EMBED_TOKENS`` tokens at a time: little padding, one or two shapes to compile."""
    import jax
    import jax.numpy as jnp

    rows = np.asarray(rows, np.int64)
    out = np.empty((rows.size, states.states.shape[1]), np.float32)
    run = _compiled_encode(encoder.shape, tuned.pooling, tuned.normalize)
    top, dev = jax.tree.map(jnp.asarray, list(tuned.top)), states.device_states
    lens = states.lengths(rows)
    for sel in (np.flatnonzero(lens <= PACK_WIDTH), np.flatnonzero(lens > PACK_WIDTH)):
        if not sel.size:
            continue
        width = max(PACK_WIDTH, 1 << (int(lens[sel].max()) - 1).bit_length())
        per = max(1, EMBED_TOKENS // width)  # rows a call
        packing = states.pack(rows[sel], width, width)
        for r0 in range(0, len(packing), per):
            chunk = packing[r0:r0 + per]
            texts = np.concatenate(chunk)  # positions into sel, in row order
            local, at = [], 0
            for members in chunk:
                local.append(np.arange(at, at + members.size))
                at += members.size
            tok, slot = states.packed(rows[sel[texts]], width, width, per, local)
            with jax.default_matmul_precision(encoder.precision):
                vec = run(top, dev, tok, slot, n_texts=per * width // 2)
            out[sel[texts]] = np.asarray(vec)[:texts.size]
    return out


def _torch_layout(layers, emb) -> dict[str, np.ndarray]:
    """Packed BERT params (``encode.bert.pack_params``) -> transformers' PyTorch state-dict names and layouts
    (Linear weights [out, in]), the format every BERT loader reads."""
    out = {"embeddings.word_embeddings.weight": emb["word"], "embeddings.position_embeddings.weight": emb["pos"],
           "embeddings.LayerNorm.weight": emb["ln"][0], "embeddings.LayerNorm.bias": emb["ln"][1]}
    for i, lp in enumerate(layers):
        base, h = f"encoder.layer.{i}.", lp["qkv"][0].shape[0]
        for j, name in enumerate(("query", "key", "value")):
            out[f"{base}attention.self.{name}.weight"] = lp["qkv"][0][:, j * h:(j + 1) * h].T
            out[f"{base}attention.self.{name}.bias"] = lp["qkv"][1][j * h:(j + 1) * h]
        for key, name in (("att_out", "attention.output.dense"), ("ffn_in", "intermediate.dense"),
                          ("ffn_out", "output.dense")):
            out[f"{base}{name}.weight"], out[f"{base}{name}.bias"] = lp[key][0].T, lp[key][1]
        for key, name in (("att_ln", "attention.output.LayerNorm"), ("ffn_ln", "output.LayerNorm")):
            out[f"{base}{name}.weight"], out[f"{base}{name}.bias"] = lp[key]
    return {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}


def save_tuned_encoder(encoder, tuned: TunedEncoder, out_dir) -> Path:
    """Write the tuned encoder as a Hugging Face BERT directory (config, tokenizer and sentence-transformers files
    copied from the base model; ``model.safetensors`` in PyTorch layout; ``riskrank_tune.json`` says how it was
    trained), which ``encode.encoder.load_encoder`` (and transformers or sentence-transformers) loads as it is."""
    from safetensors.numpy import save_file

    if tuned.base_id != encoder.model_id:
        raise RiskRankError(f"the tuned layers belong to {tuned.base_id}, not to {encoder.model_id}")
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(encoder.model_dir, tmp, ignore=shutil.ignore_patterns(
        "*.safetensors", "*.bin", "*.msgpack", "*.h5", "*.onnx", "onnx", "openvino", "*.safetensors.index.json",
        "README.md"))
    p = encoder.params
    layers = [*_numpy_tree(p["layers"][:tuned.frozen_layers]), *tuned.top]
    emb = _numpy_tree(p["emb"])
    tensors = _torch_layout(layers, emb)
    tensors["embeddings.token_type_embeddings.weight"] = _token_types(encoder)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "riskrank_tune.json").write_text(json.dumps({
        "base_encoder": tuned.base_id, "tuned_id": tuned.tuned_id, "frozen_layers": tuned.frozen_layers,
        "seed": tuned.seed, "config": tuned.config.to_dict(), "final_loss": float(tuned.losses[-1]),
        "seconds": round(tuned.seconds, 1)}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _numpy_tree(tree):
    """The tree with numpy float32 leaves."""
    import jax

    return jax.tree.map(lambda a: np.asarray(a, np.float32), tree)


def _token_types(encoder) -> np.ndarray:
    """The base model's token-type embeddings [types, d] (the packed params keep only row 0)."""
    from safetensors import safe_open

    for f in sorted(Path(encoder.model_dir).glob("*.safetensors")):
        with safe_open(str(f), framework="numpy") as st:
            for k in st.keys():
                if k.endswith("token_type_embeddings.weight") or k.endswith("token_type_embeddings.embedding"):
                    return np.asarray(st.get_tensor(k), np.float32)
    return encoder.params["emb"]["type0"][None].astype(np.float32)
