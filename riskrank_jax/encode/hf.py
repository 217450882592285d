"""Hugging Face model directories, read once for every model the project loads (bi-encoder, tuner, cross-encoder).

    d = resolve_model_dir("cross-encoder/ms-marco-MiniLM-L-6-v2")   # a local directory, or a hub snapshot
    files = weight_files(d)                                         # the weight file(s), in reading order
    loaded = read_weight_files(files, target, "bert")               # {flat Flax key: float32 array}
    params = complete_params(d, files, target, loaded, new_weight)  # the full tree, or a RiskRankError

Weights are read without transformers' random initialisation: safetensors (PyTorch or Flax layout, sharded or
not) and flax_model.msgpack straight into the Flax parameter names, PyTorch names renamed and reshaped by
transformers' own ``rename_key_and_reshape_tensor`` (by ``rename_pytorch_key``, the same rules, where transformers
has no Flax code: version 5); only a PyTorch ``.bin`` file goes through ``from_pretrained(from_pt=True)``, which
needs torch. A hub id is looked up in the local Hugging Face cache first and downloaded only when the hub answers
(``WeightsAbsent`` otherwise).

Why one module: the file discovery, the readers and the hub rules are the same for every model family, so a
fix to one reaches them all.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from riskrank_jax.errors import RiskRankError

HUB_PATTERNS = ["*.json", "*.txt", "*.model", "*.safetensors", "*.msgpack"]  # what a hub snapshot downloads
WEIGHT_FILES = ("model.safetensors", "flax_model.msgpack", "pytorch_model.bin")  # unsharded, in reading order
WEIGHT_INDEXES = ("model.safetensors.index.json", "flax_model.msgpack.index.json")  # sharded


class WeightsAbsent(RiskRankError):
    """A model's weights are neither on this machine nor downloadable (offline, or no such repository)."""


@contextmanager
def quiet_transformers():
    """transformers warns that its Flax classes are deprecated and lists unused weights (position_ids);
    neither is actionable here."""
    from transformers.utils import logging as hf_logging

    old = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        hf_logging.set_verbosity(old)


def weight_files(model_dir: Path) -> list[Path]:
    """The weight file(s) a directory provides, in the order they are read: a sharded index's shards, else the
    first of model.safetensors, flax_model.msgpack, pytorch_model.bin present; [] when there are none."""
    model_dir = Path(model_dir)
    for index in WEIGHT_INDEXES:
        if (model_dir / index).is_file():
            shards = sorted(set(json.loads((model_dir / index).read_text())["weight_map"].values()))
            return [model_dir / s for s in shards]
    return [model_dir / n for n in WEIGHT_FILES if (model_dir / n).is_file()][:1]


def sha256_files(paths: Sequence[Path], chunk: int = 1 << 22) -> str:
    """Hex sha256 over the bytes of ``paths``, one after another."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                h.update(b)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------
# Where a model is: a local directory or a hub snapshot
# ---------------------------------------------------------------------------------------------------------


def network_available(timeout: float = 3.0) -> bool:
    """Whether the hub can be reached: False when HF_HUB_OFFLINE is set or its host does not answer (a proxy in
    the environment counts as online: the hub client goes through it)."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_snapshot(repo_id: str) -> Path:
    """A local snapshot of a hub repository (``HUB_PATTERNS``): the cache first, then a download when online;
    else WeightsAbsent."""
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True, allow_patterns=HUB_PATTERNS))
        if weight_files(path):
            return path
    except Exception:  # noqa: BLE001, S110 - not cached (or partly): the network below
        pass
    if not network_available():
        raise WeightsAbsent(
            f"{repo_id}: the weights are not in the Hugging Face cache on this machine and the hub cannot be "
            f"reached (offline). Download them where there is network (`huggingface-cli download {repo_id}`) "
            "and copy the cache, or pass a local model directory.")
    try:
        path = Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
    except Exception as e:  # no such repository, gated, network error
        raise WeightsAbsent(f"{repo_id}: cannot download the weights ({type(e).__name__}: {e})") from e
    if not weight_files(path):
        raise WeightsAbsent(f"{repo_id}: the repository has no safetensors or Flax weights")
    return path


def resolve_model_dir(name_or_path: str | os.PathLike) -> Path:
    """A local model directory for a path or a hub id ("owner/name"); a path that does not exist (or is not a
    directory) is a RiskRankError naming it, a hub id whose weights cannot be had is WeightsAbsent."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise RiskRankError(f"{path}: not a directory (a model is a Hugging Face model directory)")
        return path.resolve()
    if isinstance(name_or_path, os.PathLike) or text.startswith(("/", ".", "~")) or text.count("/") > 1:
        raise RiskRankError(f"{path}: no such model directory (the path does not exist)")
    return hub_snapshot(text)


# ---------------------------------------------------------------------------------------------------------
# Config, tokenizer and weights
# ---------------------------------------------------------------------------------------------------------


def load_config(model_dir: Path, **overrides):
    """transformers' AutoConfig of a model directory (``overrides`` such as num_labels=1); a clear error when
    config.json is missing."""
    from transformers import AutoConfig

    if not (Path(model_dir) / "config.json").is_file():
        raise RiskRankError(f"{model_dir}: no config.json, not a Hugging Face model directory")
    with quiet_transformers():
        return AutoConfig.from_pretrained(str(model_dir), local_files_only=True, **overrides)


def load_tokenizer(model_dir: Path):
    """transformers' AutoTokenizer of a model directory; a RiskRankError naming it when it cannot be loaded."""
    from transformers import AutoTokenizer

    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise RiskRankError(f"{model_dir}: cannot load the tokenizer ({type(e).__name__}: {e})") from e


def read_weight_files(files: Sequence[Path], target: dict, prefix: str) -> dict:
    """{flat key: float32 array} of every tensor in the safetensors / msgpack ``files``, keyed as ``target``
    (flat key -> shape: the Flax model's ``params_shape_tree``) keys them: the base-model ``prefix`` ("bert")
    dropped, PyTorch-format names renamed and reshaped as transformers does, then the prefix put back where
    ``target`` has it. Keys ``target`` lacks are kept (callers take what they need)."""
    import jax
    from flax.serialization import msgpack_restore
    from flax.traverse_util import flatten_dict
    from safetensors import safe_open

    try:
        from transformers.modeling_flax_pytorch_utils import rename_key_and_reshape_tensor
    except ImportError:  # transformers 5 has no Flax code
        rename_key_and_reshape_tensor = rename_pytorch_key

    def strip(key: tuple) -> tuple:
        return key[1:] if key[0] == prefix and len(key) > 1 else key

    def fit(key: tuple) -> tuple:
        return (prefix,) + key if key not in target and (prefix,) + key in target else key

    loaded: dict[tuple, np.ndarray] = {}
    for f in files:
        if Path(f).suffix == ".msgpack":
            for key, arr in flatten_dict(msgpack_restore(Path(f).read_bytes())).items():
                loaded[fit(strip(tuple(key)))] = np.asarray(arr, np.float32)
            continue
        with safe_open(str(f), framework="flax") as st:
            pt = (st.metadata() or {}).get("format", "pt") == "pt"
            for k in st.keys():  # noqa: SIM118 - a safetensors handle, not a dict
                arr = np.asarray(jax.device_get(st.get_tensor(k).astype("float32")))
                key = strip(tuple(k.split(".")))
                if pt:
                    key, arr = rename_key_and_reshape_tensor(key, arr, target, prefix)
                loaded[fit(key)] = arr
    return loaded


def rename_pytorch_key(key: tuple, arr: np.ndarray, target: dict, prefix: str) -> tuple[tuple, np.ndarray]:
    """A PyTorch-format weight's Flax key and array, by the rules of transformers 4's
    ``rename_key_and_reshape_tensor`` (transformers 5 has no Flax code): a LayerNorm weight / gamma becomes
    ``scale`` and an embedding weight ``embedding`` where ``target`` (flat key -> shape, with or without the
    base-model ``prefix``) has that name; another ``weight`` becomes a ``kernel``, transposed (a 4-D convolution
    weight to HWIO); batch-norm running statistics become ``mean`` / ``var``, old-style gamma / beta ``weight`` /
    ``bias``, weight-norm parametrisations ``<name>_g`` / ``<name>_v``."""

    def known(k: tuple) -> bool:
        return k in target or (prefix,) + k in target

    stem, last = key[:-1], key[-1]
    if last in ("weight", "gamma") and known(stem + ("scale",)):
        return stem + ("scale",), arr
    if last in ("running_mean", "running_var") and not known(key):
        return stem + ("mean" if last == "running_mean" else "var",), arr
    if last == "weight" and known(stem + ("embedding",)):
        return stem + ("embedding",), arr
    if last == "weight" and not known(key):
        return stem + ("kernel",), (arr.transpose(2, 3, 1, 0) if arr.ndim == 4 else arr.T)
    if last in ("gamma", "beta"):
        return stem + ("weight" if last == "gamma" else "bias",), arr
    if key[-3::2] in (("parametrizations", "original0"), ("parametrizations", "original1")):
        return key[:-3] + (key[-2] + ("_g" if key[-1] == "original0" else "_v"),), arr
    return key, arr


def complete_params(model_dir: Path, files: Sequence[Path], target: dict, loaded: dict,
                    new_weight: Callable[[tuple, tuple], np.ndarray | None]) -> dict:
    """The flat params ``target`` (flat key -> shape) asks for, taken from ``loaded``; a weight the files lack
    is ``new_weight(key, shape)`` (a new head or an unused pooler), or, where that gives None, missing. A
    mis-shaped or missing weight is a RiskRankError naming the directory and the files."""
    params, missing = {}, []
    for key in sorted(target):
        shape = tuple(target[key].shape)
        if key in loaded:
            if tuple(loaded[key].shape) != shape:
                raise RiskRankError(f"{model_dir}: weight {'.'.join(key)} has shape {loaded[key].shape}, the "
                                    f"config expects {shape}")
            params[key] = loaded[key]
            continue
        new = new_weight(key, shape)
        if new is None:
            missing.append(".".join(key))
        else:
            params[key] = new
    if missing:
        raise RiskRankError(f"{model_dir}: {len(missing)} weight(s) missing from {[Path(p).name for p in files]}, "
                            f"e.g. {missing[:3]}")
    return params


def params_from_pytorch_bin(model_dir: Path, cls, config=None):
    """Params of a PyTorch .bin checkpoint through ``cls.from_pretrained(from_pt=True)`` (needs torch)."""
    import jax

    try:
        import torch  # noqa: F401
    except ImportError:
        raise RiskRankError(f"{model_dir}: PyTorch .bin weights need torch to read; convert them to "
                            "model.safetensors (or install torch)") from None
    kw = {} if config is None else {"config": config}
    try:
        with quiet_transformers():
            full = cls.from_pretrained(str(model_dir), from_pt=True, local_files_only=True, **kw)
    except Exception as e:  # noqa: BLE001 - reported with the directory named
        raise RiskRankError(f"{model_dir}: cannot load the weights ({type(e).__name__}: {e})") from e
    return jax.device_get(full.params)


__all__ = ["HUB_PATTERNS", "WeightsAbsent", "quiet_transformers", "weight_files", "sha256_files",
           "network_available", "hub_snapshot", "resolve_model_dir", "load_config", "load_tokenizer",
           "read_weight_files", "rename_pytorch_key", "complete_params", "params_from_pytorch_bin"]
