"""The learned source of a request's needed effects: P(effect | request text), one logistic regression per effect.

    x = features(texts)                                # float32 [Q, F]: hashed words and word pairs, keywords
    W, b = fit(x, y, mask)                             # one model per row of mask [M, Q] (folds), vmapped
    model = IntentModel(W[0], b[0], meta); model.probs(texts)   # float32 [Q, E] in retrieve.intent.EFFECTS order

Features: each word and each pair of adjacent words of ``retrieve.intent.normalise_request`` hashed (crc32) into
``HASH_DIM`` buckets, the row scaled to unit length, beside the request's keyword hits (``keyword_needs``, E).
No encoder: the model serves any ranker, whatever encoder embeds its tools.

Targets: effect e of a training request is 1 when one of its gold tools has e (``retrieve.intent.tool_effects``
of the tools' dimensions). Trained by weighted binary cross-entropy (positives weigh ``pos_weight``) plus an L2
penalty, full batch, Adam, from zeros: deterministic. The shipped model (``default_model()``, ``riskrank_jax/model/intent_model.npz``)
is trained on the demo, Seal-Tools and UltraTool training requests by ``scripts/train_intent_model.py``, which
records what it was trained on and its held-out figures in the file.

Why a linear model over words: a few thousand labelled requests, and the verbs and objects that say "send" or
"delete" carry the signal; it runs in microseconds per request.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import RiskHeadError
from riskrank_jax.retrieve.intent import EFFECTS, keyword_needs, normalise_request

HASH_DIM = 4096
MODEL_FORMAT = "riskrank-intent-v1"
DEFAULT_MODEL_FILE = "intent_model.npz"


@dataclass(frozen=True)
class IntentConfig:
    """Full-batch Adam steps, learning rate, the L2 penalty on the weights (l2 · ||W||², beside the mean loss),
    and the weight of positive examples. steps and l2: chosen by 5-fold cross-validation over the shipped model's
    training requests (``scripts/train_intent_model.py``, docs/intent.md)."""

    steps: int = 600
    lr: float = 0.05
    l2: float = 3e-5
    pos_weight: float = 2.0


def _buckets(norm: str) -> list[int]:
    words = norm.split()
    grams = words + [f"{a} {b}" for a, b in zip(words, words[1:])] + [f"^{w}" for w in words[:1]]
    return [zlib.crc32(g.encode()) % HASH_DIM for g in grams]


def features(texts) -> np.ndarray:
    """float32 [Q, HASH_DIM + E]: the hashed words and word pairs of each request (unit length), then its
    keyword hits (0/1 per effect)."""
    texts = list(texts)
    x = np.zeros((len(texts), HASH_DIM + len(EFFECTS)), np.float32)
    for i, t in enumerate(texts):
        for b in _buckets(normalise_request(t)):
            x[i, b] = 1.0
        norm = np.linalg.norm(x[i, :HASH_DIM])
        if norm > 0:
            x[i, :HASH_DIM] /= norm
    x[:, HASH_DIM:] = keyword_needs(texts)[0]
    return x


def _fit_one(mask, x, y, *, config: IntentConfig):
    """(W [F, E], b [E]) fitted on the rows of x [Q, F], y [Q, E] where mask [Q] is 1. Pure, vmap-able."""
    # deferred: optax is needed to fit only; ranking with the shipped model never loads it
    import optax

    params = {"W": jnp.zeros((x.shape[1], y.shape[1]), jnp.float32), "b": jnp.zeros(y.shape[1], jnp.float32)}
    opt = optax.adam(config.lr)
    w = jnp.where(y > 0.5, config.pos_weight, 1.0) * mask[:, None]

    def loss_fn(p):
        z = x @ p["W"] + p["b"]
        loss = jnp.sum(w * optax.sigmoid_binary_cross_entropy(z, y)) / jnp.maximum(mask.sum(), 1.0)
        return loss + config.l2 * jnp.sum(p["W"] ** 2)

    def step(carry, _):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), loss

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=config.steps)
    return params["W"], params["b"]


@lru_cache(maxsize=4)
def _program(config: IntentConfig):
    return jax.jit(jax.vmap(partial(_fit_one, config=config), in_axes=(0, None, None)))


def fit(x, y, mask=None, config: IntentConfig = IntentConfig()) -> tuple[np.ndarray, np.ndarray]:
    """(W float32 [M, F, E], b [M, E]): one model per row of mask bool [M, Q] (default: one on every row),
    fitted to features x [Q, F] and targets y [Q, E] in one vmapped program."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0], len(EFFECTS)):
        raise RiskHeadError(f"need features [Q, F] and targets [Q, {len(EFFECTS)}]; got {x.shape} and {y.shape}")
    mask = np.ones((1, x.shape[0]), np.float32) if mask is None else np.asarray(mask, np.float32)
    w, b = _program(config)(jnp.asarray(mask), jnp.asarray(x), jnp.asarray(y))
    return np.asarray(w), np.asarray(b)


def predict(w, b, x) -> np.ndarray:
    """float32 [Q, E]: sigmoid(x [Q, F] @ w [F, E] + b [E])."""
    z = np.asarray(x, np.float32) @ np.asarray(w, np.float32) + np.asarray(b, np.float32)
    return (1.0 / (1.0 + np.exp(-z))).astype(np.float32)


@dataclass(frozen=True, eq=False)
class IntentModel:
    """A fitted intent model: w float32 [F, E], b [E], meta (what it was trained on, its held-out figures)."""

    w: np.ndarray
    b: np.ndarray
    meta: dict = field(default_factory=dict)

    def probs(self, texts) -> np.ndarray:
        """float32 [Q, E]: P(request asks for effect e)."""
        return predict(self.w, self.b, features(texts))

    def save(self, path) -> None:
        path = Path(path)
        meta = {"format": MODEL_FORMAT, "effects": list(EFFECTS), "hash_dim": HASH_DIM, **self.meta}
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, w=self.w.astype(np.float16), b=self.b.astype(np.float32),
                            meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8))
        tmp.replace(path)

    @classmethod
    def load(cls, path) -> "IntentModel":
        path = Path(path)
        try:
            with np.load(path) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                w, b = z["w"].astype(np.float32), z["b"].astype(np.float32)
        except (OSError, KeyError, ValueError) as e:
            raise RiskHeadError(f"{path}: not an intent model file ({e})") from e
        if meta.get("format") != MODEL_FORMAT or meta.get("effects") != list(EFFECTS) or \
                meta.get("hash_dim") != HASH_DIM or w.shape != (HASH_DIM + len(EFFECTS), len(EFFECTS)):
            raise RiskHeadError(f"{path}: intent model of another format ({meta.get('format')}, effects "
                                f"{meta.get('effects')}, hash_dim {meta.get('hash_dim')}); this version reads "
                                f"{MODEL_FORMAT} over {list(EFFECTS)}")
        return cls(w, b, meta)


def default_model_path() -> Path:
    return Path(str(resources.files("riskrank_jax.model") / DEFAULT_MODEL_FILE))


@lru_cache(maxsize=1)
def default_model() -> IntentModel | None:
    """The shipped model, or None when the package has none (then the keywords alone say what a request needs)."""
    path = default_model_path()
    return IntentModel.load(path) if path.is_file() else None


__all__ = ["IntentConfig", "IntentModel", "features", "fit", "predict", "default_model", "default_model_path",
           "HASH_DIM", "MODEL_FORMAT"]
