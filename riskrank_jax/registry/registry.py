"""`Registry`: the merged tools of one or more sources, as parallel tuples plus per-tool records.

Why parallel tuples: the ranker indexes tools by position, the same as the benchmark arrays.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from riskrank_jax.data.types import ToolRegistry
from riskrank_jax.errors import DataError
from riskrank_jax.registry.permissions import permission_mask_words
from riskrank_jax.registry.tool import Annotations, Tool, tool_text


def registry_fingerprint(names, texts, risk_levels) -> str:
    """sha256 (16 hex digits) of the tool names, texts and risk levels (int), in order: a registry's identity, for
    a saved ranker (assessed levels) and an audit (declared ones)."""
    h = hashlib.sha256()
    h.update("\x1f".join(names).encode())
    h.update(b"\x1e")
    h.update("\x1f".join(texts).encode())
    h.update(np.asarray(risk_levels, np.int32).tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Registry:
    """Tools in input order (file by file, entry by entry).

    tools: the Tool records (unique `name`s); warnings: registry-level messages (skipped built-in tools);
    sources: the source names, one per input, in order.
    """

    tools: tuple[Tool, ...]
    warnings: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.tools)

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    @cached_property
    def texts(self) -> tuple[str, ...]:
        """What each tool is embedded with: `tool_text(tool)`."""
        return tuple(tool_text(t) for t in self.tools)

    @property
    def descriptions(self) -> tuple[str, ...]:
        return tuple(t.description for t in self.tools)

    @property
    def declared_risk(self) -> tuple[int | None, ...]:
        return tuple(t.declared_risk for t in self.tools)

    @property
    def annotations(self) -> tuple[Annotations | None, ...]:
        return tuple(t.annotations for t in self.tools)

    @property
    def paths(self) -> tuple[str | None, ...]:
        """The file each tool came from (None for inline objects)."""
        return tuple(t.path for t in self.tools)

    def index_of(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def perm_mask(self) -> np.ndarray:
        """bool [N, 5]: permission categories of each tool's text, word-boundary rule."""
        return permission_mask_words(self.texts)

    def fingerprint(self) -> str:
        """``registry_fingerprint`` of the names, texts and declared risk (0: none declared): what ranking and
        risk assessment read."""
        return registry_fingerprint(self.names, self.texts,
                                    [0 if t.declared_risk is None else t.declared_risk for t in self.tools])

    def to_tool_registry(self, risk=None) -> ToolRegistry:
        """The package's `ToolRegistry` (descriptions = tool texts, word-boundary permission mask).

        risk: int [N] in 1..5 (e.g. `assess_risk(...).levels`); by default the declared risk, which every
        tool must then have.
        """
        if risk is None:
            missing = [t.name for t in self.tools if t.declared_risk is None]
            if missing:
                raise DataError(f"{len(missing)} tools declare no risk (e.g. '{missing[0]}'); pass risk= levels "
                                "from riskrank_jax.registry.assess_risk")
            risk = self.declared_risk
        risk = np.asarray(risk, dtype=np.int32)
        if risk.shape != (self.size,) or not ((risk >= 1) & (risk <= 5)).all():
            raise DataError(f"risk must be {self.size} integers in 1..5, got shape {risk.shape}")
        texts = self.texts
        return ToolRegistry(self.names, texts, risk, permission_mask_words(texts), ",".join(self.sources))
