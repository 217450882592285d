"""The learned risk model of user registries: P(writes), P(destructive) and the five flags of a tool.

    probs = model.probs(emb, texts)     # float32 [N, 7] in MODEL_OUTPUTS order (registry.dimensions)

An MLP over [the encoder's embedding of tool_text (d), the dimension keyword features (15)]: one hidden ReLU
layer, seven sigmoid outputs, trained by binary cross-entropy on a labelled corpus of real MCP tools
(experiments/mcp_risk/corpus, docs/risk_rubric.md), full batch, Adam, an ensemble of ``seeds`` members whose
probabilities are averaged. Deterministic: the same corpus, encoder and config give the same file.

The shipped model (`default_model()`, ``riskrank_jax/model/mcp_risk_model.npz``, package data) is trained on the whole
corpus; its file records the corpus fingerprint, the encoder and the held-out figures of
experiments/mcp_risk (folds over servers). `riskrank_jax.registry.dimensions.assess_dimensions` reads its
probabilities.

Why the keyword features: a few hundred labelled servers are too few for the embedding alone to learn that
"push" sends and "list" reads; the features carry that, and the model learns when they do not hold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import RiskHeadError
from riskrank_jax.model.risk_head import TEXT_VERSION, load_params_npz, save_params_npz
from riskrank_jax.registry.dimensions import (FLAGS, MODEL_OUTPUTS, MUTATIONS, N_KEYWORD_FEATURES, DimensionPolicy,
                                              keyword_features)

MODEL_FORMAT = "riskrank-mcp-risk-v1"
DEFAULT_MODEL_FILE = "mcp_risk_model.npz"
PARAM_KEYS = ("W1", "b1", "W2", "b2")


@dataclass(frozen=True)
class RiskModelConfig:
    """hidden units, full-batch Adam steps, learning rate, weight decay, ensemble seeds, and the weight of
    the positive examples of each output (rare flags such as money weigh more)."""

    hidden: int = 64
    steps: int = 800
    lr: float = 3e-3
    weight_decay: float = 1e-2
    seeds: tuple[int, ...] = (0, 1, 2)
    pos_weight: float = 2.0


def labels_to_targets(mutation, flags) -> np.ndarray:
    """float32 [N, 7] targets (MODEL_OUTPUTS) from mutation int [N] (index into MUTATIONS) and flags bool [N, 5]."""
    mutation = np.asarray(mutation)
    return np.concatenate([(mutation > 0)[:, None], (mutation == 2)[:, None], np.asarray(flags, bool)],
                          axis=1).astype(np.float32)


def features(emb, texts) -> np.ndarray:
    """float32 [N, d + 15]: embeddings [N, d] beside the keyword features of the texts."""
    emb = np.asarray(emb, np.float32)
    if emb.ndim != 2 or emb.shape[0] != len(texts):
        raise RiskHeadError(f"need embeddings [N, d] for N texts; got {emb.shape} for {len(texts)} texts")
    return np.concatenate([emb, keyword_features(list(texts))], axis=1)


def _init(key, dim: int, hidden: int, outputs: int) -> dict:
    k1, k2 = jax.random.split(key)
    return {"W1": jax.random.normal(k1, (dim, hidden)) * np.sqrt(2.0 / dim), "b1": np.zeros(hidden, np.float32),
            "W2": jax.random.normal(k2, (hidden, outputs)) * np.sqrt(1.0 / hidden),
            "b2": np.zeros(outputs, np.float32)}


def logits(params: dict, x):
    """[N, 7] logits of features x [N, D] (params of one member: W1 [D, h], b1 [h], W2 [h, 7], b2 [7])."""
    return jnp.maximum(x @ params["W1"] + params["b1"], 0.0) @ params["W2"] + params["b2"]


def _fit_one(seed, x, y, *, config: RiskModelConfig):
    """One member: weighted BCE of sigmoid(logits(x [N, D])) to y [N, 7], full-batch AdamW. Pure, vmap-able."""
    # deferred: optax is needed to fit the model only; ranking with the shipped one never loads it
    import optax

    params = _init(jax.random.key(seed), x.shape[1], config.hidden, y.shape[1])
    opt = optax.adamw(config.lr, weight_decay=config.weight_decay)
    w = jnp.where(y > 0.5, config.pos_weight, 1.0)

    def loss_fn(p):
        z = logits(p, x)
        return jnp.mean(w * optax.sigmoid_binary_cross_entropy(z, y))

    def step(carry, _):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), loss

    (params, _), losses = jax.lax.scan(step, (params, opt.init(params)), None, length=config.steps)
    return params, losses


@lru_cache(maxsize=4)
def _program(config: RiskModelConfig):
    return jax.jit(jax.vmap(partial(_fit_one, config=config), in_axes=(0, None, None)))


def train(x, y, config: RiskModelConfig = RiskModelConfig()) -> tuple[dict, np.ndarray]:
    """Fit the ensemble.

    Args:
      x: float32 [N, D] features (`features`); y: float32 [N, 7] targets (`labels_to_targets`).
    Returns:
      (params {"W1" [S, D, h], "b1" [S, h], "W2" [S, h, 7], "b2" [S, 7]} as numpy, loss per step [S, steps]).
    """
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0], len(MODEL_OUTPUTS)) or x.shape[0] < 2:
        raise RiskHeadError(f"need features [N, D] and targets [N, {len(MODEL_OUTPUTS)}] with N >= 2; "
                            f"got {x.shape} and {y.shape}")
    params, losses = _program(config)(jnp.asarray(config.seeds, jnp.uint32), jnp.asarray(x), jnp.asarray(y))
    return {k: np.asarray(v) for k, v in params.items()}, np.asarray(losses)


def predict(params: dict, x) -> np.ndarray:
    """float32 [N, 7]: the ensemble's mean probabilities for features x [N, D]."""
    z = jax.vmap(logits, in_axes=(0, None))({k: jnp.asarray(v) for k, v in params.items()},
                                           jnp.asarray(x, jnp.float32))
    return np.asarray(jax.nn.sigmoid(z).mean(axis=0), np.float32)


@dataclass(frozen=True, eq=False)
class RiskModel:
    """Trained ensemble with what it was trained on; ``encoder_id`` must match the embedding encoder."""

    params: dict
    encoder_id: str
    corpus: dict  # {"fingerprint", "servers", "tools"}
    config: RiskModelConfig = RiskModelConfig()
    text_version: str = TEXT_VERSION
    metrics: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)  # DimensionPolicy fields chosen on the corpus

    def dimension_policy(self, **overrides):
        """The DimensionPolicy with this model's thresholds (``overrides``: trust settings)."""
        return DimensionPolicy(**{**self.thresholds, **overrides})

    @property
    def dim(self) -> int:
        return int(self.params["W1"].shape[1]) - N_KEYWORD_FEATURES

    def check_encoder(self, encoder_id: str, dim: int) -> None:
        if encoder_id != self.encoder_id or dim != self.dim or self.text_version != TEXT_VERSION:
            raise RiskHeadError(
                f"the risk model was trained on {self.encoder_id} embeddings (dim {self.dim}, {self.text_version}); "
                f"this run embeds with {encoder_id} (dim {dim}, {TEXT_VERSION}). Use the default encoder, or pass "
                "--risk-head HEAD.npz (a risk head trained for this encoder: the level rule without dimensions)")

    def probs(self, emb, texts) -> np.ndarray:
        """float32 [N, 7] (MODEL_OUTPUTS) for embeddings [N, d] of `texts` (tool_text)."""
        return predict(self.params, features(emb, texts))

    def save(self, path) -> Path:
        path = Path(path)
        meta = {"format": MODEL_FORMAT, "encoder_id": self.encoder_id, "corpus": self.corpus,
                "config": asdict(self.config), "text_version": self.text_version, "metrics": self.metrics,
                "thresholds": self.thresholds,
                "outputs": list(MODEL_OUTPUTS), "mutations": list(MUTATIONS), "flags": list(FLAGS)}
        return save_params_npz(path, meta, self.params, PARAM_KEYS, sort_keys=True)

    @classmethod
    def load(cls, path) -> "RiskModel":
        path = Path(path)
        meta, params = load_params_npz(path, PARAM_KEYS, "risk model")
        if meta.get("format") != MODEL_FORMAT or meta.get("outputs") != list(MODEL_OUTPUTS):
            raise RiskHeadError(f"not a risk model file of this version (format {meta.get('format')!r})", path)
        cfg = dict(meta.get("config", {}))
        cfg["seeds"] = tuple(cfg.get("seeds", (0,)))
        return cls(params, meta["encoder_id"], meta["corpus"], RiskModelConfig(**cfg), meta.get("text_version", ""),
                   meta.get("metrics", {}), meta.get("thresholds", {}))


def default_model_path() -> Path:
    return Path(str(resources.files("riskrank_jax.model") / DEFAULT_MODEL_FILE))


@lru_cache(maxsize=1)
def default_model() -> RiskModel | None:
    """The shipped model (trained on the whole corpus with all-MiniLM-L6-v2), or None when the package has none."""
    path = default_model_path()
    return RiskModel.load(path) if path.is_file() else None


__all__ = ["RiskModel", "RiskModelConfig", "train", "predict", "features", "labels_to_targets", "default_model",
           "default_model_path", "MODEL_FORMAT"]
