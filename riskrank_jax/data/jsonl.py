"""Strict readers for JSON and JSON Lines files: every error names the file and the line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from riskrank_jax.errors import DataError


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line number, record) for each non-blank line; raise DataError on bad JSON.

    Blank lines carry no record and are skipped; anything else must be a JSON object.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", path)
    with path.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as e:
                raise DataError(f"malformed JSON ({e.msg} at column {e.colno})", path, lineno) from None
            if not isinstance(rec, dict):
                raise DataError(f"expected a JSON object, got {type(rec).__name__}", path, lineno)
            yield lineno, rec


def require(rec: dict, key: str, path: str | Path, line: int | None, kind: type | tuple = str):
    """rec[key], which must exist and be of `kind`; strings must be non-empty after stripping."""
    if key not in rec:
        raise DataError(f"missing field '{key}'", path, line)
    val = rec[key]
    if not isinstance(val, kind):
        raise DataError(f"field '{key}' must be {getattr(kind, '__name__', kind)}, got {type(val).__name__}",
                        path, line)
    if isinstance(val, str) and not val.strip():
        raise DataError(f"field '{key}' is empty", path, line)
    return val


def read_json_object(path: str | Path) -> tuple[dict, str]:
    """Load a whole-file JSON object; return it and the raw text (for line look-ups)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", path)
    text = path.read_text(encoding="utf-8")
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys(path, text))
    except json.JSONDecodeError as e:
        raise DataError(f"malformed JSON ({e.msg} at column {e.colno})", path, e.lineno) from None
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object at top level, got {type(obj).__name__}", path, 1)
    return obj, text


def line_of_key(text: str, key: str) -> int | None:
    """1-based line where `"key":` first appears in a JSON text (for error messages)."""
    m = re.search(re.escape(json.dumps(key)) + r"\s*:", text)
    return None if m is None else text.count("\n", 0, m.start()) + 1


def _no_duplicate_keys(path: Path, text: str):
    def hook(pairs):
        seen = {}
        for k, v in pairs:
            if k in seen:
                lines = [m.start() for m in re.finditer(re.escape(json.dumps(k)) + r"\s*:", text)]
                line = text.count("\n", 0, lines[1]) + 1 if len(lines) > 1 else None
                raise DataError(f"duplicate key '{k}'", path, line)
            seen[k] = v
        return seen

    return hook
