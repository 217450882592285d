"""What one load of a model directory leaves for the next, so that a start neither hashes the weights nor imports
transformers: <cache root>/encoders/<hash of the model directory>.json (``LoadState``).

Why: hashing the weights and building transformers' tokenizer cost more than the rest of a warm start.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Sequence

from riskrank_jax.encode import hf
from riskrank_jax.paths import resolve_cache_dir

LOAD_STATE_DIR = "encoders"  # under the cache root: <root>/encoders/<hash of the model directory>.json


def file_stamps(files: Sequence[Path]) -> list[list]:
    out = []
    for f in files:
        st = os.stat(f)
        out.append([str(Path(f).resolve()), int(st.st_size), int(st.st_mtime_ns)])
    return out


def package_stamp(name: str) -> str:
    """Where a package's ``__init__.py`` is, with its size and mtime (a reinstall changes it), without importing
    the package or parsing its metadata; "none" when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "none"
    return ":".join(map(str, file_stamps([Path(spec.origin)])[0]))


class LoadState:
    """A small JSON file per model directory in the cache: the weights' sha256 keyed by each file's (path, size,
    mtime), and transformers' fast-tokenizer backend state as it left ``AutoTokenizer.from_pretrained`` (keyed by
    the tokenizer files' sha256 and the installed transformers and tokenizers), so a later load neither hashes
    the weights again nor imports transformers. Reading or writing it never fails a load (no cache: recompute)."""

    def __init__(self, cache_root, model_dir: Path):
        self.path = None
        self.data: dict = {}
        try:
            root = resolve_cache_dir(cache_root) / LOAD_STATE_DIR
            digest = hashlib.sha256(str(Path(model_dir).resolve()).encode()).hexdigest()[:16]
            self.path = root / f"{digest}.json"
            if self.path.is_file():
                data = json.loads(self.path.read_text())
                self.data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.data = {}

    def weights_sha256(self, files: Sequence[Path]) -> str:
        stamps = file_stamps(files)
        got = self.data.get("weights")
        if isinstance(got, dict) and got.get("files") == stamps and isinstance(got.get("sha256"), str):
            return got["sha256"]
        sha = hf.sha256_files(files)
        self._save("weights", {"files": stamps, "sha256": sha})
        return sha

    def tokenizer(self, key: str) -> dict | None:
        got = self.data.get("tokenizer")
        return got if isinstance(got, dict) and got.get("key") == key else None

    def save_tokenizer(self, key: str, hf_tokenizer) -> None:
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if not getattr(hf_tokenizer, "is_fast", False) or backend is None:
            return
        self._save("tokenizer", {
            "key": key, "backend": backend.to_str(), "pad_id": hf_tokenizer.pad_token_id,
            "cls_id": hf_tokenizer.cls_token_id, "sep_id": hf_tokenizer.sep_token_id,
            "model_max_length": hf_tokenizer.model_max_length, "truncation_side": hf_tokenizer.truncation_side})

    def _save(self, field_name: str, value) -> None:
        if self.path is None:
            return
        self.data[field_name] = value
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        except OSError:
            pass


__all__ = ["LOAD_STATE_DIR", "LoadState", "file_stamps", "package_stamp"]
