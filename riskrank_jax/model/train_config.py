"""What a training run of the dual heads is: its hyper-parameters (``TrainConfig``, the protocol values of
docs/method.md §3), the order of its models (``model_index``), the random keys each model draws from
(``model_keys``), and what it returns (``TrainResult``; ``lambda_run_from_plain`` assembles a λ-aware run from
the plain one).

The seed fixes everything (deviation from the release, which seeded only the sampling). From
``key(seed)``: the initialisation uses fold_in(key, 0) (shared by the folds and λs of one seed);
negatives fold_in(fold_in(key, 1), fold); the held-out split fold_in(fold_in(key, 2), fold)
(``model.heldout.split_key``); the order of epoch e fold_in(fold_in(fold_in(key, 3), fold), e). So a model's run
depends only on its (seed, fold, λ), never on which other models share the program.

Why its own module: the triplets (``model.triplets``), the saved state (``model.train_store``) and the training
loop (``model.train``) all read these, and none of them owns the others.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.errors import CacheError
from riskrank_jax.model import heads
from riskrank_jax.model.heldout import split_key

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

def model_keys(seed, fold):
    base = jax.random.key(seed)
    return {
        "init": jax.random.fold_in(base, 0),
        "neg": jax.random.fold_in(jax.random.fold_in(base, 1), fold),
        "split": split_key(seed, fold),
        "order": jax.random.fold_in(jax.random.fold_in(base, 3), fold),
    }

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


__all__ = ["NEGATIVE_SAMPLING", "TrainConfig", "TrainResult", "model_index", "model_keys", "plain_config",
           "lambda_run_from_plain"]
