"""A dual-heads training run's state, and its orbax checkpoints: what a model starts from (``init_state``), what
an epoch's checkpoint saves (``host_state``) and restores against (``abstract_state``), and a finished run read
back (``result_from_state``, ``load_trained``).

Why beside the state: the layout the training loop carries and the layout a checkpoint restores are one
definition, so a resumed run continues bit for bit.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax.errors import CacheError
from riskrank_jax.model import checkpoints as ckpt
from riskrank_jax.model import heads
from riskrank_jax.model.train_config import TrainConfig, TrainResult, model_keys


def init_state(seed, fold, *, config: TrainConfig, dim: int):
    params = heads.init_params(model_keys(seed, fold)["init"], dim, config.hidden, config.rel_features)
    return {
        "params": params,
        "opt_state": optax.adam(config.lr).init(params),
        "best_params": params,
        "best_loss": jnp.asarray(jnp.inf, jnp.float32),
        "best_epoch": jnp.asarray(-1, jnp.int32),
    }

def abstract_state(n_models: int, dim: int, config: TrainConfig) -> dict:
    """Shapes/dtypes of a run's saved state (what checkpoints.py restores against)."""
    one = jax.eval_shape(functools.partial(init_state, config=config, dim=dim), 0, 0)

    def stack(x):
        return jax.ShapeDtypeStruct((n_models, *x.shape), x.dtype)

    e = config.epochs
    return {
        "params": jax.tree.map(stack, one["params"]),
        "opt_state": flat_tree(jax.tree.map(stack, one["opt_state"])),
        "best_params": jax.tree.map(stack, one["params"]),
        "best_loss": stack(one["best_loss"]),
        "best_epoch": stack(one["best_epoch"]),
        "train_loss": jax.ShapeDtypeStruct((n_models, e), np.float32),
        "heldout_loss": jax.ShapeDtypeStruct((n_models, e), np.float32),
        "epochs_done": jax.ShapeDtypeStruct((), np.int32),
    }

def flat_tree(tree) -> dict:
    """Optimiser state as {"0000": leaf, ...} (checkpoint-friendly, no namedtuples)."""
    return {f"{i:04d}": x for i, x in enumerate(jax.tree.leaves(tree))}

def unflat_tree(flat: dict, like):
    return jax.tree.unflatten(jax.tree.structure(like), [flat[k] for k in sorted(flat)])

def host_state(host, train_hist, held_hist, epochs_done) -> dict:
    """What a checkpoint saves: the run's state (host numpy over its models, see ``groups.gathered``) and curves."""
    return {
        "params": host["params"],
        "opt_state": flat_tree(host["opt_state"]),
        "best_params": host["best_params"],
        "best_loss": host["best_loss"],
        "best_epoch": host["best_epoch"],
        "train_loss": train_hist.copy(),
        "heldout_loss": held_hist.copy(),
        "epochs_done": np.asarray(epochs_done, np.int32),
    }

def open_checkpoint(checkpoint_dir, run_config: dict, data_hash: str, config: TrainConfig):
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


__all__ = ["init_state", "abstract_state", "flat_tree", "unflat_tree", "host_state", "open_checkpoint",
           "result_from_state", "load_trained"]
