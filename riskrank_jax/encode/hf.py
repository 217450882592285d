"""Hugging Face model directories, read once for every model the project loads (bi-encoder, tuner, cross-encoder).

    d = resolve_model_dir("cross-encoder/ms-marco-MiniLM-L-6-v2")   # a local directory, or a hub snapshot
    files = weight_files(d)                                         # the weight file(s), in reading order
    loaded = read_weight_files(files, target, "bert")               # {flat Flax key: float32 array}
    params = complete_params(d, files, target, loaded, new_weight)  # the full tree, or a RiskRankError

Weights are read without transformers' random initialisation or its Flax classes (which transformers 5 no longer
has): safetensors (PyTorch or Flax layout, sharded or not), flax_model.msgpack and a PyTorch ``.bin`` file (through
torch, when installed) straight into the Flax parameter names, PyTorch names renamed and reshaped by
``rename_pytorch_key`` (transformers 4's ``rename_key_and_reshape_tensor`` rules, checked against it in the tests).
transformers itself is used for what its 4.x and 5.x both provide: configs and tokenizers. A hub id is looked up in
the local Hugging Face cache first and downloaded only when the hub answers (``WeightsAbsent`` otherwise).

Why one module: the file discovery, the readers and the hub rules are the same for every model family, so a
fix to one reaches them all.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
from safetensors import safe_open

from riskrank_jax.errors import RiskRankError

HUB_PATTERNS = ["*.json", "*.txt", "*.model", "*.safetensors", "*.msgpack"]  # what a hub snapshot downloads
WEIGHT_FILES = ("model.safetensors", "flax_model.msgpack", "pytorch_model.bin")  # unsharded, in reading order
WEIGHT_INDEXES = ("model.safetensors.index.json", "flax_model.msgpack.index.json")  # sharded
NO_ADVICE = "TRANSFORMERS_NO_ADVISORY_WARNINGS"


class WeightsAbsent(RiskRankError):
    """A model's weights are neither on this machine nor downloadable (offline, or no such repository)."""


@contextmanager
def quiet_transformers():
    """transformers 4 warns that its Flax classes are deprecated and lists unused weights (position_ids);
    transformers 5 without torch says on import that it has no models (this project uses its configs and
    tokenizers only); none of it is actionable here."""
    advice = os.environ.get(NO_ADVICE)
    os.environ[NO_ADVICE] = "1"  # read by transformers' import-time notes only
    try:
        # deferred: transformers is heavy to import and a warm start (the direct BERT reader) never needs it
        from transformers.utils import logging as hf_logging
    finally:
        if advice is None:
            del os.environ[NO_ADVICE]
        else:
            os.environ[NO_ADVICE] = advice
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
    # deferred: only a hub id needs the hub client; a local directory loads without it
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
    if not (Path(model_dir) / "config.json").is_file():
        raise RiskRankError(f"{model_dir}: no config.json, not a Hugging Face model directory")
    with quiet_transformers():
        # deferred: transformers is imported only when a load cannot be served from config.json and saved state
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(str(model_dir), local_files_only=True, **overrides)


def load_tokenizer(model_dir: Path):
    """transformers' AutoTokenizer of a model directory; a RiskRankError naming it when it cannot be loaded."""
    try:
        with quiet_transformers():
            # deferred: a warm start tokenises from the saved backend state (encode/tokenizer.py), no transformers
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise RiskRankError(f"{model_dir}: cannot load the tokenizer ({type(e).__name__}: {e})") from e


def flat_params(tree: dict, prefix: tuple = ()) -> dict:
    """{flat key (tuple of names): leaf} of a nested dict of parameters, as flax.traverse_util.flatten_dict gives
    (empty dicts dropped), without importing flax."""
    flat = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            flat.update(flat_params(value, prefix + (name,)))
        else:
            flat[prefix + (name,)] = value
    return flat


def nested_params(flat: dict) -> dict:
    """Nested dicts of a {flat key: leaf} dict, keys sorted at every level (the order of a Flax shape tree)."""
    tree: dict = {}
    for key in sorted(flat):
        node = tree
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = flat[key]
    return tree


def _msgpack_tensors(path: Path) -> dict:
    """{flat key: float32 array} of a flax_model.msgpack file (Flax names already)."""
    # deferred: flax is needed for this one layout only; the safetensors readers run without it
    from flax.serialization import msgpack_restore

    return {k: np.asarray(v, np.float32) for k, v in flat_params(msgpack_restore(Path(path).read_bytes())).items()}


def _torch_bin_tensors(path: Path) -> dict:
    """{name: float32 array} of a PyTorch .bin checkpoint (PyTorch names), read with torch."""
    try:
        # deferred: torch is optional, needed only for a .bin checkpoint
        import torch
    except ImportError:
        raise RiskRankError(f"{path}: PyTorch .bin weights need torch to read; convert them to model.safetensors "
                            "(or install torch)") from None
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    return {k: v.float().numpy() for k, v in state.items()}


def _safetensors_tensors(path: Path) -> tuple[dict, bool]:
    """({name: float32 array}, whether the names are PyTorch's) of a safetensors file, any float dtype (bf16
    included: read through jax, then copied to the host)."""
    with safe_open(str(path), framework="flax") as st:
        pt = (st.metadata() or {}).get("format", "pt") == "pt"
        return {k: np.asarray(st.get_tensor(k).astype("float32")) for k in st.keys()}, pt  # noqa: SIM118


def read_weight_files(files: Sequence[Path], target: dict, prefix: str) -> dict:
    """{flat key: float32 array} of every tensor in the safetensors / msgpack / .bin ``files``, keyed as ``target``
    (flat key -> shape: the model's parameter shape tree, flattened) keys them: the base-model ``prefix`` ("bert")
    dropped, PyTorch-format names renamed and reshaped (``rename_pytorch_key``), then the prefix put back where
    ``target`` has it. Keys ``target`` lacks are kept (callers take what they need). A file that cannot be read is
    a RiskRankError naming its directory."""
    loaded: dict[tuple, np.ndarray] = {}
    for f in files:
        try:
            if Path(f).suffix == ".msgpack":
                tensors, pt = _msgpack_tensors(f), False
            else:
                tensors, pt = (_torch_bin_tensors(f), True) if Path(f).suffix == ".bin" else _safetensors_tensors(f)
        except RiskRankError:
            raise
        except Exception as e:  # noqa: BLE001 - damaged files: reported with the directory named
            raise RiskRankError(f"{Path(f).parent}: cannot read the weights ({type(e).__name__}: {e})") from e
        for name, arr in tensors.items():
            key = tuple(name) if isinstance(name, tuple) else tuple(name.split("."))
            key = key[1:] if key[0] == prefix and len(key) > 1 else key
            if pt:
                key, arr = rename_pytorch_key(key, arr, target, prefix)
            loaded[(prefix,) + key if key not in target and (prefix,) + key in target else key] = arr
    return loaded


def rename_pytorch_key(key: tuple, arr: np.ndarray, target: dict, prefix: str) -> tuple[tuple, np.ndarray]:
    """A PyTorch-format weight's Flax key and array, by the rules of transformers 4's
    ``rename_key_and_reshape_tensor`` (here because transformers 5 has no Flax code): a LayerNorm weight / gamma
    becomes ``scale`` and an embedding weight ``embedding`` where ``target`` (flat key -> shape, with or without
    the base-model ``prefix``) has that name; another ``weight`` becomes a ``kernel``, transposed (a 4-D
    convolution weight to HWIO); batch-norm running statistics become ``mean`` / ``var``, old-style gamma / beta
    ``weight`` / ``bias``, weight-norm parametrisations ``<name>_g`` / ``<name>_v``."""

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


__all__ = ["HUB_PATTERNS", "WeightsAbsent", "quiet_transformers", "weight_files", "sha256_files",
           "network_available", "hub_snapshot", "resolve_model_dir", "load_config", "load_tokenizer",
           "flat_params", "nested_params", "read_weight_files", "rename_pytorch_key", "complete_params"]
