"""A stand-alone risk head f_risk(t) = sigmoid(V2 · relu(V1 · E(t) + c1) + c2) for user registries.

It is the dual-head model's risk head (riskrank_jax.model.heads.risk) trained on tool texts alone: mean squared
error to (r − 1)/4 over a labelled tool set. The package ships one trained on the embedded demo
benchmark's labels over all-MiniLM-L6-v2 embeddings of `tool_text` (`default_head()`);
`riskrank-jax fit-risk` trains one on any labelled registry.

One trainer serves every caller: `train_risk_head` (one seed: fit-risk, registry audits, the transfer
experiment) and `train_risk_heads` (one model per seed, vmapped: the sweep's risk-only rows) run the same
per-seed function (shuffled minibatches, ``minibatch_epochs``); optimiser, weight decay and initialisation are
`HeadConfig` fields, so each caller keeps its own numbers (`RiskHeadConfig` holds the sweep's).

Why stand-alone: a user registry has no training queries, only tool texts and perhaps labels.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import RiskHeadError
from riskrank_jax.model import heads
from riskrank_jax.scoring import level_to_score

HEAD_FORMAT = "riskrank-risk-head-v1"
TEXT_VERSION = "tool_text-v1"  # bump when tool_text changes: heads trained on other texts are then refused
DEFAULT_HEAD_FILE = "demo_minilm_head.npz"
PARAM_KEYS = ("V1", "c1", "V2", "c2")


OPTIMIZERS = ("adamw", "adam")
INITS = ("head", "dual")


@dataclass(frozen=True)
class HeadConfig:
    """Training settings. Defaults (the shipped head's) chosen by 5-fold CV on the demo labels (docs/registry.md).

    ``optimizer``: "adamw" (with ``weight_decay``) or "adam" (no decay). ``init``: "head" (``init_head``) or
    "dual" (the risk block of ``heads.init_params``, the dual-head model's initialisation). ``seed``: the seed
    of ``train_risk_head`` (``train_risk_heads`` takes its seeds as an argument).
    """

    hidden: int = 64
    epochs: int = 60
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0
    optimizer: str = "adamw"
    init: str = "head"

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")


@dataclass(frozen=True)
class RiskHeadConfig(HeadConfig):
    """The sweep's zero-shot risk heads (beyond the paper): Adam without decay and the dual-head initialisation,
    so seed s starts from the risk block of the dual-head model of seed s."""

    epochs: int = 30
    batch_size: int = 64
    weight_decay: float = 0.0
    optimizer: str = "adam"
    init: str = "dual"


def init_head(key, dim: int, hidden: int) -> dict:
    """{"V1" [d, h], "c1" [h], "V2" [h, 1], "c2" [1]}, uniform in ±1/√fan_in (as model.heads.init_params)."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    u = partial(jax.random.uniform, minval=-1.0, maxval=1.0)
    return {"V1": u(k1, (dim, hidden)) / np.sqrt(dim), "c1": u(k2, (hidden,)) / np.sqrt(dim),
            "V2": u(k3, (hidden, 1)) / np.sqrt(hidden), "c2": u(k4, (1,)) / np.sqrt(hidden)}


def predict(params: dict, emb) -> np.ndarray:
    """float32 [N] in (0, 1) for embeddings [N, d]; (r − 1)/4 is the training target."""
    return np.asarray(heads.risk({"risk": params}, jnp.asarray(emb, jnp.float32)))


def minibatch_epochs(params, opt, loss_fn, key, *, n: int, batch_size: int, epochs: int):
    """Train ``params`` with the optax ``opt`` over ``epochs`` shuffled passes, one ``lax.scan`` per epoch.

    ``loss_fn(params, idx)`` is the loss of the rows ``idx`` (int [batch_size]); each epoch draws a permutation
    from its own key and drops the last ``n mod batch_size`` rows. Returns (params, mean loss per epoch [epochs]).
    Pure and jit/vmap-able.
    """
    # deferred: optax (training only) stays off the import path of the ranker that only applies a head
    import optax

    steps = n // batch_size

    def step(carry, idx):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p, idx)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), loss

    def epoch(carry, ekey):
        perm = jax.random.permutation(ekey, n)[: steps * batch_size].reshape(steps, batch_size)
        carry, losses = jax.lax.scan(step, carry, perm)
        return carry, losses.mean()

    (params, _), losses = jax.lax.scan(epoch, (params, opt.init(params)), jax.random.split(key, epochs))
    return params, losses


def _fit_one(seed, emb, target, *, config: HeadConfig, batch_size: int):
    """One seed: MSE of f_risk(emb [N, d]) to target [N] over shuffled minibatches. Returns (params
    {"V1" [d, h], "c1" [h], "V2" [h, 1], "c2" [1]}, mean loss per epoch [epochs]). Pure; jit/vmap-able."""
    # deferred: optax (training only) stays off the import path of the ranker that only applies a head
    import optax

    n, dim = emb.shape
    opt = (optax.adam(config.lr) if config.optimizer == "adam"
           else optax.adamw(config.lr, weight_decay=config.weight_decay))
    key, init_key = jax.random.split(jax.random.key(seed))
    params = (heads.init_params(init_key, dim, config.hidden)["risk"] if config.init == "dual"
              else init_head(init_key, dim, config.hidden))

    def loss_fn(p, idx):
        return jnp.mean((heads.risk({"risk": p}, emb[idx]) - target[idx]) ** 2)

    return minibatch_epochs(params, opt, loss_fn, key, n=n, batch_size=batch_size, epochs=config.epochs)


@lru_cache(maxsize=8)
def _train_program(n: int, config: HeadConfig, per_seed: bool):
    """jit of ``_fit_one`` for N tools: (emb, target) with ``config.seed``, or (seeds [S], emb, target) vmapped."""
    fit = partial(_fit_one, config=config, batch_size=min(config.batch_size, n))
    if per_seed:
        return jax.jit(jax.vmap(fit, in_axes=(0, None, None)))
    return jax.jit(partial(fit, config.seed))


def _checked_inputs(emb, risk):
    """(emb float32 [N, d], target float32 [N] = (r − 1)/4) as device arrays, or RiskHeadError."""
    emb = np.asarray(emb, np.float32)
    risk = np.asarray(risk)
    if emb.ndim != 2 or risk.shape != (emb.shape[0],) or emb.shape[0] < 2:
        raise RiskHeadError(f"need embeddings [N, d] and N labels with N >= 2; got {emb.shape} and {risk.shape}")
    if not ((risk >= 1) & (risk <= 5)).all():
        raise RiskHeadError("risk labels must be integers in 1..5")
    return jnp.asarray(emb), jnp.asarray(level_to_score(risk))


def train_risk_head(emb, risk, config: HeadConfig = HeadConfig()) -> tuple[dict, np.ndarray]:
    """Fit the risk head by MSE to (r − 1)/4, seed ``config.seed``.

    Args:
      emb: float32 [N, d] tool embeddings (L2-normalised).
      risk: int [N] labels in 1..5.
    Returns:
      (params as numpy arrays {"V1" [d, h], "c1" [h], "V2" [h, 1], "c2" [1]}, mean loss per epoch [epochs]).
    """
    emb, target = _checked_inputs(emb, risk)
    params, losses = _train_program(emb.shape[0], config, False)(emb, target)
    return {k: np.asarray(v) for k, v in params.items()}, np.asarray(losses)


def train_risk_heads(tool_emb, risk, seeds, config: HeadConfig = RiskHeadConfig()) -> dict:
    """The risk head fitted to (r − 1)/4 over a registry's tools, one model per seed (vmapped over the seeds).

    Zero-shot deployment (beyond the paper): no training queries are needed.

    Args:
      tool_emb: float32 [N, d]; risk: int [N] levels 1..5; seeds: S seeds (``config.seed`` is not used).

    Returns:
      {"risk": {"V1" [S, d, h], "c1" [S, h], "V2" [S, h, 1], "c2" [S, 1]}} (use with ``heads.risk`` vmapped).
    """
    emb, target = _checked_inputs(tool_emb, risk)
    params, _ = _train_program(emb.shape[0], config, True)(jnp.asarray(seeds, dtype=jnp.uint32), emb, target)
    return {"risk": params}


def levels_from_scores(scores) -> np.ndarray:
    """int32 [N] in 1..5: the level nearest to 1 + 4·f_risk."""
    return np.clip(np.rint(1.0 + 4.0 * np.asarray(scores, np.float64)), 1, 5).astype(np.int32)


@dataclass(frozen=True, eq=False)
class RiskHead:
    """Trained parameters with what they were trained on; `encoder_id` must match the embedding encoder."""

    params: dict
    encoder_id: str
    trained_on: str
    n_tools: int
    config: HeadConfig = HeadConfig()
    text_version: str = TEXT_VERSION
    metrics: dict = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.params["V1"].shape[0])

    def scores(self, emb) -> np.ndarray:
        """f_risk [N] in (0, 1) of embeddings [N, d]."""
        return predict(self.params, emb)

    def check_encoder(self, encoder_id: str, dim: int, where: str = "risk head") -> None:
        if encoder_id != self.encoder_id or dim != self.dim or self.text_version != TEXT_VERSION:
            raise RiskHeadError(
                f"the {where} was trained on {self.encoder_id} embeddings (dim {self.dim}, {self.text_version}); "
                f"this run embeds with {encoder_id} (dim {dim}, {TEXT_VERSION}). Train one for this encoder with "
                "`riskrank-jax fit-risk --benchmark demo --encoder ... --out HEAD.npz` and pass --risk-head HEAD.npz")

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        meta = {"format": HEAD_FORMAT, "encoder_id": self.encoder_id, "trained_on": self.trained_on,
                "n_tools": self.n_tools, "config": asdict(self.config), "text_version": self.text_version,
                "metrics": self.metrics}
        return save_params_npz(path, meta, self.params, PARAM_KEYS)

    @classmethod
    def load(cls, path: str | Path) -> "RiskHead":
        path = Path(path)
        meta, params = load_params_npz(path, PARAM_KEYS, "risk head")
        if meta.get("format") != HEAD_FORMAT:
            raise RiskHeadError(f"not a risk head file (format {meta.get('format')!r})", path)
        return cls(params, meta["encoder_id"], meta["trained_on"], int(meta["n_tools"]),
                   HeadConfig(**meta.get("config", {})), meta.get("text_version", ""), meta.get("metrics", {}))


def save_params_npz(path: Path, meta: dict, params: dict, keys, *, sort_keys: bool = False) -> Path:
    """Write ``params[k]`` (float32) for ``keys`` and the JSON ``meta`` to one .npz at ``path`` (its folder
    made); the file format of the risk head and the MCP risk model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.savez(fh, meta=np.array(json.dumps(meta, sort_keys=sort_keys)),
                 **{k: np.asarray(params[k], np.float32) for k in keys})
    return path


def load_params_npz(path: Path, keys, kind: str) -> tuple[dict, dict]:
    """(meta, {k: float32 array}) of a file written by ``save_params_npz``; RiskHeadError naming ``kind`` and
    the file when it is missing or unreadable."""
    if not path.is_file():
        raise RiskHeadError(f"{kind} file not found", path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["meta"])), {k: np.asarray(z[k], np.float32) for k in keys}
    except (OSError, ValueError, KeyError) as e:
        raise RiskHeadError(f"not a {kind} file ({type(e).__name__}: {e})", path) from None


def default_head_path() -> Path:
    return Path(str(resources.files("riskrank_jax.model") / DEFAULT_HEAD_FILE))


def default_head() -> RiskHead:
    """The shipped head: demo labels, all-MiniLM-L6-v2 embeddings of tool_text."""
    return RiskHead.load(default_head_path())
