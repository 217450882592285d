"""The paper's released risk labels: `{tool_name: {"risk_level": 1..5 | null, "description": str}}`.

Why a module of its own: the paper's label files are the one source of every benchmark's risk levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from riskrank_jax.data.jsonl import line_of_key, read_json_object
from riskrank_jax.errors import DataError

NULL_RISK_LEVEL = 2  # a `null` level counts as 2 (docs/data.md)
UNLABELLED_RISK_LEVEL = 1  # a tool without a label counts as 1 (docs/data.md)


@dataclass(frozen=True)
class RiskLabel:
    risk: int
    description: str
    line: int | None
    was_null: bool


def read_risk_labels(path: str | Path) -> dict[str, RiskLabel]:
    """Parse a label file. Levels must be integers 1..5 or null (mapped to 2, counted by the caller)."""
    obj, text = read_json_object(path)
    out: dict[str, RiskLabel] = {}
    for name, entry in obj.items():
        line = line_of_key(text, name)
        if not name.strip():
            raise DataError("empty tool name", path, line)
        if not isinstance(entry, dict):
            raise DataError(f"label of '{name}' must be an object", path, line)
        if "risk_level" not in entry:
            raise DataError(f"label of '{name}' has no 'risk_level'", path, line)
        level = entry["risk_level"]
        was_null = level is None
        if was_null:
            level = NULL_RISK_LEVEL
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5:
            raise DataError(f"risk_level of '{name}' is {entry['risk_level']!r}; expected an integer 1..5 or null",
                            path, line)
        desc = entry.get("description", "")
        if not isinstance(desc, str):
            raise DataError(f"description of '{name}' must be a string", path, line)
        out[name] = RiskLabel(int(level), desc, line, was_null)
    return out
