"""A cross-encoder: a (query, tool text) pair model that re-scores the first stage's top candidates; its config,
loading and forward pass (training and the gate: riskrank_jax/model/cross_encoder_train.py).

    ce = init_from_encoder()                                   # all-MiniLM-L6-v2 + a new 1-logit head
    ce = load_cross_encoder("cross-encoder/ms-marco-MiniLM-L-6-v2")   # or a local directory
    s = ce.score_pairs(queries, texts)                         # float32 [P], one logit per pair

A BERT classifier (the cross-encoder trained here from the bi-encoder, the ms-marco MiniLM baselines) runs the
project's one BERT forward pass (``encode.bert.sequence_classifier_logits``, the bi-encoder's and the tuner's
layers) over the parameter tree ``encode.bert_weights.param_shapes`` lays out from the config: no transformers
model class is built or imported, so it runs under transformers 4.x and 5.x. Other families run transformers' Flax
classes (``FlaxAutoModelForSequenceClassification``'s mapping, ``FlaxT5ForConditionalGeneration`` for monoT5),
imported only for them; those exist in transformers 4.x only, and under 5.x loading one is a RiskRankError that
names the installed version and what to install (``require_flax_transformers``). Both agree with transformers' own
forward within 1e-5. Two kinds of model:

- "classifier": a *ForSequenceClassification with one logit (two logits: logit 1 − logit 0); inputs
  ``[CLS] query [SEP] tool text [SEP]`` with token types 0/1, truncated longest-first to ``max_tokens``.
- "monot5": T5 on ``Query: q Document: d Relevant:``, scored as logit("true") − logit("false") at the first
  decoder step (the document is truncated, the ``Relevant:`` suffix kept).

Weights are read by riskrank_jax/encode/hf.py, the one Hugging Face loader, into the parameter shape tree (BERT's
from ``param_shapes``, another family's from its transformers class built with ``_do_init=False``), without
transformers' random initialisation; a head or pooler the files lack is initialised from a fixed seed. Pairs are
scored under ``jax.jit`` sorted by length, in batches padded to a multiple of 16 tokens (and a power of two of
rows when a batch is short), so few shapes compile. A BERT training step whose pairs' activations would exceed
the memory budget runs its backward pass in chunks of pairs (``_chunked_grads``), the same gradient summed.

Why a model object: the trained model, the general-purpose baselines and their compiled programs (scoring and
the training step, shared by ``with_params``) travel together.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax.encode import hf
from riskrank_jax.encode.bert import ACTIVATIONS, BertShape, sequence_classifier_logits
from riskrank_jax.encode.bert_weights import param_shapes
from riskrank_jax.encode.hf import WeightsAbsent
from riskrank_jax.encode.sentence_config import default_model_dir
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.heldout import GATES
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET, balanced_step, units_per_step
from riskrank_jax.runtime.progress import progress_bar

KINDS = ("classifier", "monot5")
BASELINE_RERANKERS = {
    "ce_minilm_l6": "cross-encoder/ms-marco-MiniLM-L-6-v2",
    "ce_minilm_l12": "cross-encoder/ms-marco-MiniLM-L-12-v2",
    "bge_reranker_v2_m3": "BAAI/bge-reranker-v2-m3",
    "monot5": "castorini/monot5-base-msmarco",
}
BASELINE_KINDS = {"ce_minilm_l6": "classifier", "ce_minilm_l12": "classifier", "bge_reranker_v2_m3": "classifier",
                  "monot5": "monot5"}
LENGTH_MULTIPLE = 16  # pair lengths are padded to a multiple of this
NOT_RUN_ABSENT = "not run: weights absent"
_NEG = -1e9  # logit of a padded list slot


@dataclass(frozen=True)
class CrossEncoderConfig:
    """Hyper-parameters of the cross-encoder second stage.

    Seeds: the ``seed`` of ``train_cross_encoder`` draws the held-out split (unless ``heldout_seed`` fixes it,
    so several training seeds share one split), the epochs' query order, the sampled gold and (with
    ``hard_pool``) the negatives. The new head of ``init_from_encoder`` has its own fixed seed."""

    top: int = 20  # candidates reranked (the first stage's best)
    max_tokens: int = 128  # pair length cap, truncation longest-first
    epochs: int = 1
    batch_size: int = 8  # queries per step
    negatives: int = 4  # hard negatives per query and step
    hard_pool: int | None = None  # sample negatives from this many best non-gold (None: the best `negatives`)
    lr: float = 2e-5  # Adam
    heldout_fraction: float = 0.2
    heldout_seed: int | None = None  # None: the training seed
    gates: tuple[float, ...] = GATES
    checkpoint_every: int = 50  # steps between orbax checkpoints (and one at the end)
    score_batch_size: int = 64  # pairs per scoring batch

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------------------


def _round_up(n: int, multiple: int) -> int:
    return -(-int(n) // multiple) * multiple


def _rows_for(n: int, batch_size: int) -> int:
    """Rows of a batch of n pairs: batch_size when full, else the next power of two (at most batch_size)."""
    return batch_size if n >= batch_size else min(batch_size, 1 << max(0, int(n) - 1).bit_length())


def _position_limit(config) -> int | None:
    """Longest input the model's position table allows (None: relative positions, T5)."""
    n = getattr(config, "max_position_embeddings", None)
    if n is None or config.model_type == "t5":
        return None
    return int(n) - 2 if config.model_type in ("roberta", "xlm-roberta", "camembert") else int(n)


def _classifier_score(logits):
    """float32 [B] of classifier logits [B, 1] (the logit) or [B, 2] (logit 1 − logit 0)."""
    score = logits[:, 0] if logits.shape[-1] == 1 else logits[:, 1] - logits[:, 0]
    return score.astype(jnp.float32)


def _forward(model, kind: str, label_ids: tuple[int, int] | None, params, ids, mask, types):
    """float32 [B]: one score per row of ids/mask/types int32 [B, L] through transformers' Flax class (not
    jitted; see ``CrossEncoder``)."""
    if kind == "monot5":
        start = jnp.full((ids.shape[0], 1), model.config.decoder_start_token_id, jnp.int32)
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=start, params=params,
                       train=False).logits[:, 0, :]
        return (logits[:, label_ids[0]] - logits[:, label_ids[1]]).astype(jnp.float32)
    return _classifier_score(model(ids, attention_mask=mask, token_type_ids=types, params=params, train=False).logits)


def _bert_forward(shape: BertShape, params, ids, mask, types):
    """float32 [B]: ``_forward`` of a BERT classifier through the project's one BERT forward pass
    (``encode.bert.sequence_classifier_logits``)."""
    return _classifier_score(sequence_classifier_logits(params, ids, mask, types, shape))


def _runs_on_bert_py(config, kind: str) -> bool:
    """Whether a model is a BERT sequence classifier the project's own BERT forward pass runs (the tree of
    transformers' FlaxBertForSequenceClassification: a BERT body, its pooler and a classifier head; an activation
    encode/bert.py has); other families (RoBERTa, XLM-R, T5) run through transformers."""
    return (kind == "classifier" and config.model_type == "bert"
            and str(getattr(config, "hidden_act", "")) in ACTIVATIONS)


class CrossEncoder:
    """A pair model: its transformers config, params and tokenizer, and, for a family other than BERT,
    transformers' Flax model (``model``; None for BERT). Build it with ``load_cross_encoder`` or
    ``init_from_encoder``; ``with_params`` gives the same model with other weights (sharing compiled code)."""

    def __init__(self, config, params, tokenizer, kind: str, name: str, *, model=None, max_tokens: int = 128,
                 _shared: dict | None = None):
        if kind not in KINDS:
            raise RiskRankError(f"cross-encoder kind must be one of {list(KINDS)}, got {kind!r}")
        self.config, self.model, self.params, self.tokenizer = config, model, params, tokenizer
        self.kind, self.name = kind, name
        limit = _position_limit(config)
        self.max_tokens = int(max_tokens if limit is None else min(max_tokens, limit))
        self._shared = _shared if _shared is not None else self._build_shared()

    def _build_shared(self) -> dict:
        tok = self.tokenizer
        labels = None
        if self.kind == "monot5":
            vocab = tok.get_vocab()
            labels = tuple(vocab.get(f"▁{w}", tok.convert_tokens_to_ids(w)) for w in ("true", "false"))
        if _runs_on_bert_py(self.config, self.kind):
            backend, fn = "bert", functools.partial(_bert_forward, BertShape.from_config(self.config))
        elif self.model is None:
            raise RiskRankError(f"{self.name}: a {self.config.model_type!r} {self.kind} runs through transformers' "
                                "Flax class; none was given")
        else:
            backend, fn = "transformers", functools.partial(_forward, self.model, self.kind, labels)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        return {"forward": fn, "jitted": jax.jit(fn), "pad_id": int(pad), "label_ids": labels, "backend": backend}

    @property
    def backend(self) -> str:
        """Which forward pass scores the pairs: "bert" (riskrank_jax/encode/bert.py) or "transformers"."""
        return self._shared["backend"]

    @property
    def forward(self):
        """The un-jitted ``(params, ids, mask, types) -> float32 [B]`` (for training inside another jit)."""
        return self._shared["forward"]

    def train_step(self, lr: float):
        """(optimizer, jitted step) of ``train_cross_encoder`` at learning rate lr: Adam, and its step (compiled
        once per model and lr); the caller initialises its state with that same optimizer."""
        steps = self._shared.setdefault("train_steps", {})
        if float(lr) not in steps:
            opt = optax.adam(lr)
            steps[float(lr)] = opt, _make_step(self.forward, opt, self._rows_per_chunk())
        return steps[float(lr)]

    def _rows_per_chunk(self):
        """``(M, L) -> pairs per backward chunk`` of a training step within the memory budget, less what the step
        holds whatever the chunk (parameters, gradients, Adam's two moments); BERT only (None for other families:
        their steps run whole). Chunks are balanced (equal sizes, the fewest that fit)."""
        if self.backend != "bert":
            return None
        shape = BertShape.from_config(self.config)
        fixed = 4 * sum(int(np.size(x)) * 4 for x in jax.tree.leaves(self.params))

        def rows(m: int, length: int) -> int:
            per_pair = train_bytes_per_pair(length, shape)
            return balanced_step(m, units_per_step(per_pair, max(DEFAULT_MEMORY_BUDGET - fixed, per_pair)))

        return rows

    def with_params(self, params, *, max_tokens: int | None = None) -> CrossEncoder:
        """The same model with other weights (and pair length cap), sharing the compiled programs."""
        return CrossEncoder(self.config, params, self.tokenizer, self.kind, self.name, model=self.model,
                            max_tokens=self.max_tokens if max_tokens is None else max_tokens, _shared=self._shared)

    def __repr__(self) -> str:
        return f"CrossEncoder(name={self.name!r}, kind={self.kind!r}, max_tokens={self.max_tokens})"

    def encode_pairs(self, queries: Sequence[str], texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """(input ids, token types) of each pair, at most ``max_tokens`` ids each, unpadded."""
        tok = self.tokenizer
        if self.kind == "monot5":
            suffix = tok("Relevant:", add_special_tokens=True)["input_ids"]
            main = tok([f"Query: {q} Document: {d}" for q, d in zip(queries, texts)], add_special_tokens=False,
                       truncation=True, max_length=max(1, self.max_tokens - len(suffix)))["input_ids"]
            ids = [m + suffix for m in main]
            return ids, [[0] * len(x) for x in ids]
        enc = tok(list(queries), list(texts), truncation="longest_first", max_length=self.max_tokens)
        ids = enc["input_ids"]
        types = enc.get("token_type_ids") or [[0] * len(x) for x in ids]
        return ids, types

    def pad_batch(self, ids: list[list[int]], types: list[list[int]], rows: int):
        """int32 (ids, mask, types) [rows, L], L = the longest pair rounded up to a multiple of 16 (within the
        position table); rows beyond len(ids) are one-token dummies."""
        longest = max([len(x) for x in ids] + [1])
        limit = _position_limit(self.config)
        length = _round_up(longest, LENGTH_MULTIPLE)
        length = length if limit is None else max(longest, min(length, limit))
        out_ids = np.full((rows, length), self._shared["pad_id"], np.int32)
        mask = np.zeros((rows, length), np.int32)
        out_types = np.zeros((rows, length), np.int32)
        for r, (x, t) in enumerate(zip(ids, types)):
            out_ids[r, :len(x)], mask[r, :len(x)], out_types[r, :len(t)] = x, 1, t
        mask[len(ids):, 0] = 1
        return out_ids, mask, out_types

    def score_pairs(self, queries: Sequence[str], texts: Sequence[str], batch_size: int = 64, *,
                    progress: bool = False) -> np.ndarray:
        """float32 [P]: the score of each (queries[i], texts[i]); pairs run sorted by length, ``batch_size`` at
        a time under ``jax.jit`` (results are in the input order)."""
        if len(queries) != len(texts):
            raise RiskRankError(f"score_pairs: {len(queries)} queries but {len(texts)} texts")
        out = np.zeros(len(queries), np.float32)
        if not len(queries):
            return out
        ids, types = self.encode_pairs(queries, texts)
        order = np.argsort([len(x) for x in ids], kind="stable")
        bar = progress_bar(total=len(ids), enabled=progress, desc="cross-encoder", unit="pair")
        for start in range(0, len(ids), batch_size):
            idx = order[start:start + batch_size]
            batch = self.pad_batch([ids[i] for i in idx], [types[i] for i in idx], _rows_for(len(idx), batch_size))
            out[idx] = np.asarray(self._shared["jitted"](self.params, *batch))[:len(idx)]
            bar.update(len(idx))
        bar.close()
        return out


# ---------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------


class _ClipCompatNumpy:
    """``jax.numpy`` with a ``clip`` that also takes the ``a_min`` / ``a_max`` keywords newer jax removed."""

    def __getattr__(self, name):
        return getattr(jnp, name)

    @staticmethod
    def clip(x, a_min=None, a_max=None, *, min=None, max=None):  # jnp.clip's own keyword names
        return jnp.clip(x, a_min if min is None else min, a_max if max is None else max)


def _installed_transformers() -> str:
    """The installed transformers' version ("not installed" when it is absent), read without importing it."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def require_flax_transformers(what: str) -> None:
    """Raise a RiskRankError naming the installed transformers when it has no Flax classes (5.x and later), which
    ``what`` (a model family other than BERT, the monoT5 baseline) runs on; a no-op under transformers 4.x."""
    version = _installed_transformers()
    if not version[:1].isdigit() or int(version.split(".")[0]) >= 5:
        raise RiskRankError(
            f"{what} runs on transformers' Flax classes, which transformers {version} (installed) does not have: "
            "they exist in transformers 4.x only. Install it in this environment (pip install "
            "'transformers>=4.57,<5') to run it; BERT cross-encoders run under either version.")


def flax_t5_compat() -> None:
    """transformers' FlaxT5 calls ``jnp.clip(x, a_max=...)``, which this jax no longer accepts; the T5 module
    (only it) gets a ``jnp`` whose clip does. A no-op when jax still takes ``a_max``."""
    require_flax_transformers("the monoT5 baseline (transformers' FlaxT5ForConditionalGeneration)")
    # deferred: transformers 4.x only (5.x has no Flax models), and only the monoT5 baseline needs it
    from transformers.models.t5 import modeling_flax_t5

    if "a_max" not in inspect.signature(jnp.clip).parameters:
        modeling_flax_t5.jnp = _ClipCompatNumpy()


def _flax_class(config, kind: str, model_dir: Path):
    """transformers' Flax class for the kind: a sequence-classification class, or FlaxT5ForConditionalGeneration
    (transformers 4.x only; BERT runs without it)."""
    if kind == "monot5":
        if config.model_type != "t5":
            raise RiskRankError(f"{model_dir}: kind 'monot5' needs a T5 model, got model_type {config.model_type!r}")
        flax_t5_compat()
        # deferred: transformers 4.x only (5.x has no Flax models), and only the monoT5 baseline needs it
        from transformers import FlaxT5ForConditionalGeneration

        return FlaxT5ForConditionalGeneration
    require_flax_transformers(f"{model_dir}: a {config.model_type!r} sequence classifier (not BERT)")
    # deferred: transformers 4.x only (5.x has no Flax models), and only families other than BERT need it
    from transformers.models.auto.modeling_flax_auto import FLAX_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING

    try:
        return FLAX_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING[type(config)]
    except KeyError:
        raise RiskRankError(f"{model_dir}: no Flax sequence-classification class in transformers for model_type "
                            f"{config.model_type!r}") from None


def _new_weight(key: tuple, shape: tuple, rng: np.random.Generator, init_range: float) -> np.ndarray:
    """A weight the files lack (a new head or pooler): kernels N(0, init_range²), LayerNorm scales 1, else 0."""
    if key[-1] == "kernel":
        return (init_range * rng.standard_normal(shape)).astype(np.float32)
    return np.ones(shape, np.float32) if key[-1] == "scale" else np.zeros(shape, np.float32)


def _complete_params(model_dir: Path, files: list[Path], config, target: dict, loaded: dict, seed: int) -> dict:
    """The full parameter tree of ``target`` (flat key -> shape): ``loaded`` plus new heads / poolers from ``seed``
    (drawn in ``target``'s sorted key order); a missing or mis-shaped body weight is a RiskRankError."""
    rng = np.random.default_rng([int(seed), 29])
    init_range = float(getattr(config, "initializer_range", 0.02))

    def new(key: tuple, shape: tuple) -> np.ndarray | None:
        is_head = "classifier" in key or "pooler" in key or "score" in key
        return _new_weight(key, shape, rng, init_range) if is_head else None

    return hf.nested_params(hf.complete_params(model_dir, files, target, loaded, new))


def _flax_model(config, kind: str, model_dir: Path):
    """transformers' Flax model of a family other than BERT, built without parameters (``_do_init=False``)."""
    cls = _flax_class(config, kind, model_dir)
    with hf.quiet_transformers():
        return cls(config, _do_init=False)


def _load_dir(model_dir: Path, name: str, kind: str | None, max_tokens: int, seed: int,
              num_labels: int | None = None) -> CrossEncoder:
    config = hf.load_config(model_dir, **({} if num_labels is None else {"num_labels": num_labels}))
    kind = kind or ("monot5" if config.model_type == "t5" else "classifier")
    bert = _runs_on_bert_py(config, kind)
    model = None if bert else _flax_model(config, kind, model_dir)
    files = hf.weight_files(model_dir)
    if not files:
        raise WeightsAbsent(f"{model_dir}: no weights (model.safetensors, flax_model.msgpack or pytorch_model.bin)")
    target = hf.flat_params(param_shapes(config, config.num_labels) if bert else model.params_shape_tree)
    loaded = hf.read_weight_files(files, target, "bert" if bert else model.base_model_prefix)
    params = _complete_params(model_dir, files, config, target, loaded, seed)
    params = jax.tree.map(jnp.asarray, params)  # on the device once, whichever file the weights came from
    return CrossEncoder(config, params, hf.load_tokenizer(model_dir), kind, name, model=model, max_tokens=max_tokens)


def load_cross_encoder(name_or_path: str | os.PathLike, *, kind: str | None = None, max_tokens: int = 128,
                       seed: int = 0) -> CrossEncoder:
    """A cross-encoder from a local Hugging Face directory or a hub id (the local cache first, then a download
    when online). kind: "classifier" or "monot5" (None: "monot5" for T5, else "classifier"); seed: of a head
    the weights lack. Raises WeightsAbsent when the weights cannot be had, RiskRankError for a bad path."""
    model_dir = hf.resolve_model_dir(name_or_path)
    return _load_dir(model_dir, str(name_or_path), kind, max_tokens, seed)


def init_from_encoder(model_dir: str | os.PathLike | None = None, *, seed: int = 0,
                      max_tokens: int = 128) -> CrossEncoder:
    """A "classifier" cross-encoder from a bi-encoder BERT directory (default: the embedded all-MiniLM-L6-v2):
    FlaxBertForSequenceClassification's parameter tree with num_labels=1, the encoder's weights, and the new
    pooler / head (those the files lack) drawn from ``seed``."""
    path = Path(model_dir).expanduser() if model_dir is not None else default_model_dir()
    if not path.is_dir():
        raise RiskRankError(f"{path}: no such model directory")
    return _load_dir(path.resolve(), f"init:{path.resolve()}", "classifier", max_tokens, seed, num_labels=1)


def try_load_baseline(name: str, *, max_tokens: int = 128) -> CrossEncoder | str:
    """The baseline reranker ``name`` (a key of BASELINE_RERANKERS), or "not run: weights absent" /
    "not run: <reason>" when it cannot be loaded here (never raises for a known name)."""
    if name not in BASELINE_RERANKERS:
        raise RiskRankError(f"unknown baseline reranker {name!r}; known: {sorted(BASELINE_RERANKERS)}")
    try:
        return load_cross_encoder(BASELINE_RERANKERS[name], kind=BASELINE_KINDS[name], max_tokens=max_tokens)
    except WeightsAbsent:
        return NOT_RUN_ABSENT
    except Exception as e:  # noqa: BLE001 - any other reason is reported, not raised
        return f"not run: {' '.join(str(e).split())}"


def _list_loss(scores, index, positive):
    """Listwise softmax loss: scores [M] of the step's pairs, index int [B, W] into them (-1 pad), positive
    bool [B, W] -> the mean negative log-probability of each query's gold pairs."""
    logits = jnp.where(index >= 0, scores[jnp.maximum(index, 0)], _NEG)  # [B, W]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.where(positive, logp, 0.0).sum() / jnp.maximum(positive.sum(), 1)


def train_bytes_per_pair(length: int, shape: BertShape) -> int:
    """Bytes one pair of ``length`` tokens holds in a training step: every layer's activations kept for the
    backward pass (attention weights, hidden and feed-forward states of a 4 x hidden feed-forward layer), twice
    for their gradients (an estimate)."""
    per_token = shape.num_layers * (shape.num_heads * length + 16 * shape.hidden)
    return 2 * 4 * int(length) * per_token


def _chunked_grads(forward, params, ids, mask, types, index, positive, rows: int):
    """(loss, gradients) of ``_list_loss`` with the backward pass run ``rows`` pairs at a time: the scores of
    every pair first (forward only), the loss's gradient per score, then each chunk's vector-Jacobian product
    summed, so a step holds one chunk's activations."""
    scores = forward(params, ids, mask, types)
    loss, per_score = jax.value_and_grad(_list_loss)(scores, index, positive)
    pad = -ids.shape[0] % rows
    chunked = [jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1)).reshape(-1, rows, *a.shape[1:])
               for a in (ids, mask.at[:, 0].set(1), types, per_score)]  # padding rows: one token, zero gradient

    def add_chunk(acc, xs):
        c_ids, c_mask, c_types, c_grad = xs
        _, vjp = jax.vjp(lambda p: forward(p, c_ids, c_mask, c_types), params)
        return jax.tree.map(jnp.add, acc, vjp(c_grad)[0]), None

    grads, _ = jax.lax.scan(add_chunk, jax.tree.map(jnp.zeros_like, params), chunked)
    return loss, grads


def _make_step(forward, opt, rows_per_chunk=None):
    """The jitted Adam step (params, opt_state, ids, mask, types, index, positive) -> (params, opt_state, loss).
    ``rows_per_chunk(M, L)``: pairs per backward chunk for a step of M pairs of L tokens (None, or M or more:
    the whole step at once)."""

    def loss_fn(params, ids, mask, types, index, positive):
        return _list_loss(forward(params, ids, mask, types), index, positive)

    @jax.jit
    def step(params, opt_state, ids, mask, types, index, positive):
        rows = ids.shape[0] if rows_per_chunk is None else rows_per_chunk(*ids.shape)
        if rows >= ids.shape[0]:
            loss, grads = jax.value_and_grad(loss_fn)(params, ids, mask, types, index, positive)
        else:
            loss, grads = _chunked_grads(forward, params, ids, mask, types, index, positive, rows)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


__all__ = ["CrossEncoderConfig", "CrossEncoder", "WeightsAbsent", "BASELINE_RERANKERS", "BASELINE_KINDS", "KINDS",
           "NOT_RUN_ABSENT", "flax_t5_compat", "require_flax_transformers", "load_cross_encoder", "init_from_encoder", "try_load_baseline"]
