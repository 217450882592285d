"""A cross-encoder second stage: the first stage's top candidates re-scored by a (query, tool text) pair model.

    ce = init_from_encoder()                                   # all-MiniLM-L6-v2 + a new 1-logit head
    ce = load_cross_encoder("cross-encoder/ms-marco-MiniLM-L-6-v2")   # or a local directory
    s = ce.score_pairs(queries, texts)                         # float32 [P], one logit per pair
    cand = candidates(first_stage, top)                        # int32 [Q, C], the first stage's best C
    ce_s = ce_scores_for(ce, query_texts, tool_texts, cand)    # float32 [Q, C]
    rel = rerank_relevance(first_stage, cand, ce_s, gamma)     # float32 [Q, N]
    ce_tuned, report = train_cross_encoder(ce, query_texts, gold, tool_texts, first_stage, seed, config)

A BERT classifier (the cross-encoder trained here from the bi-encoder, the ms-marco MiniLM baselines) runs the
project's one BERT forward pass (``encode.bert.sequence_classifier_logits``, the bi-encoder's and the tuner's
layers); other families run transformers' Flax classes (``FlaxAutoModelForSequenceClassification``'s mapping,
``FlaxT5ForConditionalGeneration`` for monoT5). Both agree with transformers' own forward within 1e-5. Two kinds
of model:

- "classifier": a *ForSequenceClassification with one logit (two logits: logit 1 − logit 0); inputs
  ``[CLS] query [SEP] tool text [SEP]`` with token types 0/1, truncated longest-first to ``max_tokens``.
- "monot5": T5 on ``Query: q Document: d Relevant:``, scored as logit("true") − logit("false") at the first
  decoder step (the document is truncated, the ``Relevant:`` suffix kept).

Weights are read by riskrank_jax/encode/hf.py, the one Hugging Face loader (the model is built with
``_do_init=False`` and its parameters filled from safetensors / msgpack files, without transformers' random
initialisation); a head or pooler the files lack is initialised from a fixed seed. Pairs are scored
under ``jax.jit`` sorted by length, in batches padded to a multiple of 16 tokens (and a power of two of rows
when a batch is short), so few shapes compile.

Gate: ``rerank_relevance`` keeps the first stage (z-scored over the pool) and replaces only the candidates'
scores by ``(1 − γ)·z(first) + γ·z(ce)`` re-standardised onto the candidates' own first-stage mean and std;
γ is chosen on held-out training queries by NDCG@5 (ties: the smaller γ), as in ``model.rerank``, so γ = 0,
exactly the first stage, is kept unless the cross-encoder helps on queries it was not trained on.

Training (``train_cross_encoder``): listwise softmax cross-entropy per query over its positives (its gold
tools among the candidates ∪ one gold sampled per epoch) and ``negatives`` hard negatives (by default the
first stage's best non-gold tools; ``negative_pool`` > ``negatives`` samples them from that many), Adam, no
dropout; the whole schedule is drawn from the seed up front, so a run is deterministic and a killed run
resumes bit-identically from its last orbax checkpoint (``model.checkpoints.RunStore``, which counts steps
here); a finished run is reused without training.

Why a gated correction of the candidates' order only: the first stage's scale, which the risk penalty is
measured in, is kept, and γ = 0 is the first stage itself.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax import metrics
from riskrank_jax.encode import hf
from riskrank_jax.encode.bert import ACTIVATIONS, BertShape, sequence_classifier_logits
from riskrank_jax.encode.sentence_config import default_model_dir
from riskrank_jax.encode.hf import WeightsAbsent
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model.checkpoints import RunStore, hash_arrays
from riskrank_jax.retrieve.hybrid import zscore
from riskrank_jax.runtime.progress import progress_bar
from riskrank_jax.scoring import top_order

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
PROGRESS_MIN_PAIRS = 2000  # ce_scores_for shows a bar from this many pairs
NOT_RUN_ABSENT = "not run: weights absent"
_NEG = -1e9  # logit of a padded list slot


@dataclass(frozen=True)
class CrossEncoderConfig:
    """Hyper-parameters of the cross-encoder second stage.

    Seeds: the ``seed`` of ``train_cross_encoder`` draws the held-out split (unless ``heldout_seed`` fixes it,
    so several training seeds share one split), the epochs' query order, the sampled gold and (with
    ``negative_pool``) the negatives. The new head of ``init_from_encoder`` has its own fixed seed."""

    top: int = 20  # candidates reranked (the first stage's best)
    max_tokens: int = 128  # pair length cap, truncation longest-first
    epochs: int = 1
    batch: int = 8  # queries per step
    negatives: int = 4  # hard negatives per query and step
    negative_pool: int | None = None  # sample negatives from this many best non-gold (None: the best `negatives`)
    lr: float = 2e-5  # Adam
    heldout_fraction: float = 0.2
    heldout_seed: int | None = None  # None: the training seed
    gates: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    checkpoint_every: int = 50  # steps between orbax checkpoints (and one at the end)
    score_batch: int = 64  # pairs per scoring batch

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


def _runs_on_bert_py(model, kind: str) -> bool:
    """Whether a model is a BERT sequence classifier the project's own BERT forward pass runs (a BERT body, its
    pooler and a classifier head); other families (RoBERTa, XLM-R, T5) run through transformers."""
    tree = getattr(model, "params_shape_tree", None) or {}
    return (kind == "classifier" and model.config.model_type == "bert" and set(tree) == {"bert", "classifier"}
            and "pooler" in tree["bert"] and str(getattr(model.config, "hidden_act", "")) in ACTIVATIONS)


class CrossEncoder:
    """A transformers Flax pair model, its params and tokenizer. Build it with ``load_cross_encoder`` or
    ``init_from_encoder``; ``with_params`` gives the same model with other weights (sharing compiled code)."""

    def __init__(self, model, params, tokenizer, kind: str, name: str, *, max_tokens: int = 128,
                 _shared: dict | None = None):
        if kind not in KINDS:
            raise RiskRankError(f"cross-encoder kind must be one of {list(KINDS)}, got {kind!r}")
        self.model, self.params, self.tokenizer, self.kind, self.name = model, params, tokenizer, kind, name
        limit = _position_limit(model.config)
        self.max_tokens = int(max_tokens if limit is None else min(max_tokens, limit))
        self._shared = _shared if _shared is not None else self._build_shared()

    def _build_shared(self) -> dict:
        tok = self.tokenizer
        labels = None
        if self.kind == "monot5":
            vocab = tok.get_vocab()
            labels = tuple(vocab.get(f"▁{w}", tok.convert_tokens_to_ids(w)) for w in ("true", "false"))
        if _runs_on_bert_py(self.model, self.kind):
            backend, fn = "bert", functools.partial(_bert_forward, BertShape.from_config(self.model.config))
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
        """The jitted Adam step of ``train_cross_encoder`` at learning rate lr (compiled once per model and lr)."""
        steps = self._shared.setdefault("train_steps", {})
        if float(lr) not in steps:
            steps[float(lr)] = _make_step(self.forward, optax.adam(lr))
        return steps[float(lr)]

    def with_params(self, params, *, max_tokens: int | None = None) -> CrossEncoder:
        """The same model with other weights (and pair length cap), sharing the compiled programs."""
        return CrossEncoder(self.model, params, self.tokenizer, self.kind, self.name,
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
        limit = _position_limit(self.model.config)
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


def flax_t5_compat() -> None:
    """transformers' FlaxT5 calls ``jnp.clip(x, a_max=...)``, which this jax no longer accepts; the T5 module
    (only it) gets a ``jnp`` whose clip does. A no-op when jax still takes ``a_max``."""
    import inspect

    from transformers.models.t5 import modeling_flax_t5

    if "a_max" not in inspect.signature(jnp.clip).parameters:
        modeling_flax_t5.jnp = _ClipCompatNumpy()


def _flax_class(config, kind: str, model_dir: Path):
    """transformers' Flax class for the kind: a sequence-classification class, or FlaxT5ForConditionalGeneration."""
    from transformers import FlaxT5ForConditionalGeneration
    from transformers.models.auto.modeling_flax_auto import FLAX_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING

    if kind == "monot5":
        if config.model_type != "t5":
            raise RiskRankError(f"{model_dir}: kind 'monot5' needs a T5 model, got model_type {config.model_type!r}")
        flax_t5_compat()
        return FlaxT5ForConditionalGeneration
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


def _complete_params(model_dir: Path, files: list[Path], model, loaded: dict, seed: int) -> dict:
    """The full parameter tree: ``loaded`` plus new heads / poolers from ``seed``; a missing or mis-shaped body
    weight is a RiskRankError."""
    from flax.traverse_util import flatten_dict, unflatten_dict

    rng = np.random.default_rng([int(seed), 29])
    init_range = float(getattr(model.config, "initializer_range", 0.02))

    def new(key: tuple, shape: tuple) -> np.ndarray | None:
        is_head = "classifier" in key or "pooler" in key or "score" in key
        return _new_weight(key, shape, rng, init_range) if is_head else None

    params = hf.complete_params(model_dir, files, flatten_dict(model.params_shape_tree), loaded, new)
    return jax.tree.map(jnp.asarray, unflatten_dict(params))


def _load_dir(model_dir: Path, name: str, kind: str | None, max_tokens: int, seed: int,
              num_labels: int | None = None) -> CrossEncoder:
    config = hf.load_config(model_dir, **({} if num_labels is None else {"num_labels": num_labels}))
    kind = kind or ("monot5" if config.model_type == "t5" else "classifier")
    cls = _flax_class(config, kind, model_dir)
    files = hf.weight_files(model_dir)
    if not files:
        raise WeightsAbsent(f"{model_dir}: no weights (model.safetensors, flax_model.msgpack or pytorch_model.bin)")
    with hf.quiet_transformers():
        model = cls(config, _do_init=False)
    if files[0].suffix == ".bin":
        params = hf.params_from_pytorch_bin(model_dir, cls, config)
    else:
        from flax.traverse_util import flatten_dict

        try:
            loaded = hf.read_weight_files(files, flatten_dict(model.params_shape_tree), model.base_model_prefix)
        except Exception as e:  # damaged files: reported with the directory named
            raise RiskRankError(f"{model_dir}: cannot read the weights ({type(e).__name__}: {e})") from e
        params = _complete_params(model_dir, files, model, loaded, seed)
    return CrossEncoder(model, params, hf.load_tokenizer(model_dir), kind, name, max_tokens=max_tokens)


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
    FlaxBertForSequenceClassification with num_labels=1, the encoder's weights, and the new pooler / head
    (those the files lack) drawn from ``seed``."""
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


# ---------------------------------------------------------------------------------------------------------
# Candidates and the gate
# ---------------------------------------------------------------------------------------------------------


def candidates(first_stage, top: int) -> np.ndarray:
    """int32 [Q, C], C = min(top, N): each query's best C tools of first_stage [Q, N], best first (equal
    scores: the lower index first)."""
    first = jnp.asarray(first_stage, jnp.float32)
    return np.asarray(top_order(first, min(int(top), first.shape[-1])), np.int32)


def rerank_relevance(first_stage, cand, ce_scores, gamma):
    """float32 [Q, N]: z(first_stage) over the pool, the candidates' entries replaced by
    ``mean_c + std_c · z_C((1 − γ)·z_C(first at cand) + γ·z_C(ce_scores))``, where z_C is a z-score over the C
    candidates and mean_c / std_c are the mean and std of the candidates' own z(first). Non-candidates are
    unchanged; γ = 0 returns z(first_stage) itself (the first stage's order). first_stage [Q, N], cand int
    [Q, C], ce_scores [Q, C]; one compiled program per shape (γ is an argument)."""
    return _rerank_relevance(jnp.asarray(first_stage, jnp.float32), jnp.asarray(cand, jnp.int32),
                             jnp.asarray(ce_scores, jnp.float32), jnp.asarray(gamma, jnp.float32))


@jax.jit
def _rerank_relevance(first_stage, cand, ce_scores, gamma):
    z = zscore(first_stage)
    zc = jnp.take_along_axis(z, cand, axis=1)
    mean, std = zc.mean(-1, keepdims=True), zc.std(-1, keepdims=True)
    mix = (1.0 - gamma) * zscore(zc) + gamma * zscore(ce_scores)
    new = mean + std * zscore(mix)
    out = z.at[jnp.arange(z.shape[0])[:, None], cand].set(new)
    return jnp.where(gamma == 0, z, out)


def heldout_split(n_queries: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows), sorted int arrays: a seeded ``fraction`` of the queries held out (at
    least one, and at least one left to train on when there are two or more)."""
    rng = np.random.default_rng([int(seed), 11])
    n_held = min(max(1, round(fraction * n_queries)), max(1, n_queries - 1))
    perm = rng.permutation(n_queries)
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def gate_table(first_stage, cand, ce_scores, gold, gates: Sequence[float]) -> dict[float, float]:
    """{γ: mean NDCG@5 of ``rerank_relevance``} over the queries given: first_stage [Q, N], cand [Q, C],
    ce_scores [Q, C], gold int [Q, G] (-1 pad)."""
    out = {}
    for g in gates:
        rel = rerank_relevance(first_stage, cand, ce_scores, g)
        out[float(g)] = float(metrics.ndcg_at_k(top_order(rel, min(5, rel.shape[-1])), jnp.asarray(gold), k=5).mean())
    return out


def choose_gate(table: dict[float, float]) -> float:
    """The γ with the highest NDCG (within 1e-7); ties go to the smaller γ."""
    best = max(table.values())
    return min(g for g, v in table.items() if v >= best - 1e-7)


def ce_scores_for(ce: CrossEncoder, query_texts: Sequence[str], tool_texts: Sequence[str], cand, *,
                  batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """float32 [Q, C]: ``ce``'s score of every query with each of its candidates cand int [Q, C] (a progress
    bar from PROGRESS_MIN_PAIRS pairs)."""
    cand = np.asarray(cand)
    if cand.shape[0] != len(query_texts):
        raise RiskRankError(f"ce_scores_for: {len(query_texts)} queries but cand has {cand.shape[0]} rows")
    qs = [query_texts[q] for q in range(cand.shape[0]) for _ in range(cand.shape[1])]
    ts = [tool_texts[int(t)] for t in cand.reshape(-1)]
    s = ce.score_pairs(qs, ts, batch_size, progress=progress and len(qs) >= PROGRESS_MIN_PAIRS)
    return s.reshape(cand.shape)


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------


def training_plan(gold, cand, train_rows, seed: int, config: CrossEncoderConfig) -> dict[str, np.ndarray]:
    """Every step's lists, drawn from the seed up front: {"queries": int32 [S, B] (-1 pad), "tools": int32
    [S, B, W] (-1 pad), "positive": bool [S, B, W]} with W = G + negatives, B = config.batch.

    Per epoch the training queries that have gold are shuffled and split into steps of B; a query's list is its
    positives (its gold among cand [Q, C] ∪ one gold sampled per epoch), then its negatives: the best
    ``negatives`` non-gold candidates, or ``negatives`` drawn from the best ``negative_pool`` when larger."""
    gold, cand = np.asarray(gold), np.asarray(cand)
    rows = [int(q) for q in train_rows if (gold[q] >= 0).any()]
    if not rows:
        raise RiskRankError("train_cross_encoder: no training query has a gold tool")
    b, n_neg = config.batch, config.negatives
    pool = max(n_neg, config.negative_pool or n_neg)
    width, per_epoch = gold.shape[1] + n_neg, -(-len(rows) // b)
    tools = np.full((config.epochs * per_epoch, b, width), -1, np.int32)
    positive = np.zeros(tools.shape, bool)
    queries = np.full(tools.shape[:2], -1, np.int32)
    for e in range(config.epochs):
        rng = np.random.default_rng([int(seed), e, 23])
        for j, q in enumerate(rng.permutation(rows)):
            g = gold[q][gold[q] >= 0]
            pos = sorted({int(t) for t in cand[q] if t in g} | {int(rng.choice(g))})
            non_gold = [int(t) for t in cand[q] if t not in g][:pool]
            neg = list(rng.permutation(non_gold)[:n_neg]) if pool > n_neg else non_gold[:n_neg]
            items = pos + neg
            s, r = e * per_epoch + j // b, j % b
            tools[s, r, :len(items)], positive[s, r, :len(pos)], queries[s, r] = items, True, q
    return {"queries": queries, "tools": tools, "positive": positive}


def step_batch(ce: CrossEncoder, tools, positive, q_ids, query_texts, tool_texts, rows_multiple: int):
    """One step's arrays: the valid pairs of tools int [B, W] flattened and padded to a multiple of
    ``rows_multiple`` rows -> (ids, mask, types int32 [M, L], index int32 [B, W] into the M pairs (-1 pad),
    positive bool [B, W]). q_ids int [B]: each row's query."""
    index = np.full(tools.shape, -1, np.int32)
    qs, ts = [], []
    for r, w in zip(*np.nonzero(tools >= 0)):
        index[r, w] = len(qs)
        qs.append(query_texts[int(q_ids[r])])
        ts.append(tool_texts[int(tools[r, w])])
    ids, types = ce.encode_pairs(qs, ts)
    arrays = ce.pad_batch(ids, types, max(rows_multiple, _round_up(len(ids), rows_multiple)))
    return (*arrays, index, np.asarray(positive & (tools >= 0)))


def _make_step(forward, opt):
    """The jitted Adam step (params, opt_state, ids, mask, types, index, positive) -> (params, opt_state, loss)."""

    def loss_fn(params, ids, mask, types, index, positive):
        scores = forward(params, ids, mask, types)  # [M]
        logits = jnp.where(index >= 0, scores[jnp.maximum(index, 0)], _NEG)  # [B, W]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.where(positive, logp, 0.0).sum() / jnp.maximum(positive.sum(), 1)

    @jax.jit
    def step(params, opt_state, ids, mask, types, index, positive):
        loss, grads = jax.value_and_grad(loss_fn)(params, ids, mask, types, index, positive)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def _texts_hash(texts: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\x00".join(texts).encode("utf-8"), np.uint8)


def _run_store(checkpoint_dir, ce: CrossEncoder, config, seed: int, n_steps: int, arrays) -> RunStore:
    """The orbax run store, keyed by the configuration, the seed, the model and the data (RunStore counts
    steps: its train_config.epochs is the number of steps)."""
    run_config = {"format": "riskrank-jax/cross-encoder/1", "model": ce.name, "kind": ce.kind,
                  "train_config": {"epochs": int(n_steps), "config": config.to_dict(), "seed": int(seed)}}
    data_hash = hash_arrays(*arrays, *jax.tree.leaves(ce.params))
    return RunStore(checkpoint_dir, run_config, data_hash)


def _state(params, opt_state, step: int, losses) -> dict:
    leaves = jax.tree.leaves(opt_state)
    return jax.device_get({"params": params, "opt": {f"{i:04d}": x for i, x in enumerate(leaves)},
                           "step": np.asarray(step, np.int64), "losses": np.asarray(losses, np.float32)})


def _fit(ce: CrossEncoder, plan, texts, config, store: RunStore | None, progress: bool):
    """(params, losses [S], steps run now, step resumed from): the plan's steps from the last checkpoint on."""
    opt = optax.adam(config.lr)
    params = ce.params
    opt_state = opt.init(params)
    n_steps = plan["tools"].shape[0]
    losses, start = np.full(n_steps, np.nan, np.float32), 0
    if store is not None:
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype),
                                _state(params, opt_state, 0, losses))
        status, start, saved = store.open(abstract)
        if saved is not None:
            params = jax.tree.map(jnp.asarray, saved["params"])
            treedef = jax.tree.structure(opt_state)
            opt_state = jax.tree.unflatten(treedef, [jnp.asarray(saved["opt"][k]) for k in sorted(saved["opt"])])
            losses = np.asarray(saved["losses"], np.float32).copy()
        if status == "completed":
            store.close()
            return params, losses, 0, start
        store.begin()
    step = ce.train_step(config.lr)
    bar = progress_bar(range(start, n_steps), enabled=progress, total=n_steps, initial=start,
                       desc="cross-encoder training", unit="step")
    for s in bar:
        batch = step_batch(ce, plan["tools"][s], plan["positive"][s], plan["queries"][s], *texts, config.batch)
        params, opt_state, loss = step(params, opt_state, *batch)
        losses[s] = float(loss)
        bar.set_postfix(loss=f"{losses[s]:.4f}")
        if store is not None and (s + 1 == n_steps or (s + 1) % config.checkpoint_every == 0):
            store.save_epoch(s + 1, _state(params, opt_state, s + 1, losses))
    if store is not None:
        store.complete()
    return params, losses, n_steps - start, start


def train_cross_encoder(ce: CrossEncoder, query_texts: Sequence[str], gold, tool_texts: Sequence[str], first_stage,
                        seed: int, config: CrossEncoderConfig = CrossEncoderConfig(), *, checkpoint_dir=None,
                        progress: bool = True) -> tuple[CrossEncoder, dict]:
    """Fine-tune ``ce`` on the training share of the queries and choose its gate on the held-out share.

    Args:
      query_texts: Q strings; gold int [Q, G] padded with -1; tool_texts: N strings; first_stage [Q, N];
      seed: the schedule's seed (see CrossEncoderConfig); checkpoint_dir: orbax checkpoints (resumed, or reused
      when finished); progress: a bar with the loss on a terminal.

    Returns:
      (the tuned CrossEncoder, report {"gate", "heldout_ndcg@5_by_gate", "steps", "steps_run", "resumed_from",
      "seconds", "train_pairs", "losses", "heldout_queries", "train_queries"}).
    """
    gold, first = np.asarray(gold, np.int32), np.asarray(first_stage, np.float32)
    if not (len(query_texts) == gold.shape[0] == first.shape[0]) or first.shape[1] != len(tool_texts):
        raise RiskRankError(f"train_cross_encoder: {len(query_texts)} queries, gold {gold.shape}, first_stage "
                            f"{first.shape}, {len(tool_texts)} tools do not match")
    t0 = time.perf_counter()
    ce = ce.with_params(ce.params, max_tokens=config.max_tokens)
    cand = candidates(first, config.top)
    split_seed = seed if config.heldout_seed is None else config.heldout_seed
    train_rows, held_rows = heldout_split(len(query_texts), config.heldout_fraction, split_seed)
    plan = training_plan(gold, cand, train_rows, seed, config)
    store = None
    if checkpoint_dir is not None:
        store = _run_store(checkpoint_dir, ce, config, seed, plan["tools"].shape[0],
                           (gold, first, _texts_hash(query_texts), _texts_hash(tool_texts)))
    params, losses, ran, start = _fit(ce, plan, (query_texts, tool_texts), config, store, progress)
    seconds = time.perf_counter() - t0
    tuned = ce.with_params(params)
    held_cand = cand[held_rows]
    held_ce = ce_scores_for(tuned, [query_texts[q] for q in held_rows], tool_texts, held_cand,
                            batch_size=config.score_batch, progress=progress)
    table = gate_table(first[held_rows], held_cand, held_ce, gold[held_rows], sorted(config.gates))
    report = {"gate": choose_gate(table), "heldout_ndcg@5_by_gate": table, "steps": int(plan["tools"].shape[0]),
              "steps_run": int(ran), "resumed_from": int(start), "seconds": seconds,
              "train_pairs": int((plan["tools"] >= 0).sum()), "losses": [float(x) for x in losses],
              "heldout_queries": [int(q) for q in held_rows], "train_queries": [int(q) for q in train_rows]}
    return tuned, report


__all__ = ["CrossEncoderConfig", "CrossEncoder", "WeightsAbsent", "BASELINE_RERANKERS", "BASELINE_KINDS", "KINDS",
           "NOT_RUN_ABSENT", "flax_t5_compat", "load_cross_encoder", "init_from_encoder", "try_load_baseline", "candidates",
           "rerank_relevance", "heldout_split", "gate_table", "choose_gate", "ce_scores_for", "training_plan",
           "step_batch", "train_cross_encoder"]
