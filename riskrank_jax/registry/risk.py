"""Risk level (1..5) of every tool of a user registry, with where it came from.

The rule (chosen on the demo labels and the UltraTool / Seal-Tools audited labels; docs/registry.md):

1. a tool's own `risk` (1..5) is final: source "declared";
2. otherwise the learned risk head gives the base level, nearest to 1 + 4·f_risk: source "learned"
   (without a head, the base is 1 and only the next two steps count);
3. permission keywords (word boundaries) may raise it to the floor of each matched category
   (`RiskPolicy.keyword_floors`): source "keywords:shell+write";
4. MCP annotations are hints from a possibly untrusted server: an explicit `destructiveHint: true` on a tool
   that is not `readOnlyHint: true` raises it to `destructive_floor`: source "mcp:destructiveHint". They
   never lower it, unless `trust_annotations` is set: then an explicit `readOnlyHint: true` caps the level at
   `read_only_cap` (at `read_only_secret_cap` when the text matches the secret keywords — reading credentials
   stays risky): source "mcp:readOnlyHint".

The sources of a tool are every step whose level equals the final one (a tuple when several agree).

Why this order: a declaration beats a guess, and an untrusted server may raise a risk level, never lower it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from riskrank_jax.data.permissions import CATEGORY_NAMES, permission_mask_words
from riskrank_jax.model.risk_head import levels_from_scores
from riskrank_jax.registry.registry import Registry

DEFAULT_KEYWORD_FLOORS = {"shell": 3, "write": 3, "secret": 3, "code": 2, "network": 1}


@dataclass(frozen=True)
class RiskPolicy:
    """How keywords and annotations move the level. Defaults: see the module docstring."""

    keyword_floors: dict = field(default_factory=lambda: dict(DEFAULT_KEYWORD_FLOORS))
    destructive_floor: int = 3
    trust_annotations: bool = False
    read_only_cap: int = 2
    read_only_secret_cap: int = 3


@dataclass(frozen=True, eq=False)
class RiskAssessment:
    """levels: int32 [N] in 1..5; sources: per tool, the steps that set the level; categories: per tool,
    the matched permission categories; learned: f_risk [N] (NaN without a head); scores: float32 [N] in
    [0, 1], the same rule on the continuous scale (r − 1)/4 (f_risk raised to the floors, capped by the
    cap; a declared r gives (r − 1)/4) — finer than the levels, for ranking."""

    levels: np.ndarray
    sources: tuple[tuple[str, ...], ...]
    categories: tuple[tuple[str, ...], ...]
    learned: np.ndarray
    scores: np.ndarray

    def source_text(self, i: int) -> str:
        return ",".join(self.sources[i])


def keyword_floor(mask: np.ndarray, floors: dict) -> np.ndarray:
    """int32 [N]: the highest floor among the matched categories of bool mask [N, 5] (1 when none match)."""
    per_cat = np.array([floors.get(c, 1) for c in CATEGORY_NAMES], np.int32)
    return np.where(mask, per_cat[None, :], 1).max(axis=1, initial=1).astype(np.int32)


def _annotation_bounds(registry: Registry, mask: np.ndarray, policy: RiskPolicy) -> tuple[np.ndarray, np.ndarray]:
    """(floor [N], cap [N]) from MCP annotations; cap 5 means no cap."""
    n = registry.size
    floor, cap = np.ones(n, np.int32), np.full(n, 5, np.int32)
    secret = mask[:, CATEGORY_NAMES.index("secret")]
    for i, a in enumerate(registry.annotations):
        if a is None:
            continue
        read_only = a.declared_true("readOnlyHint")
        if a.declared_true("destructiveHint") and not read_only:
            floor[i] = policy.destructive_floor
        if read_only and policy.trust_annotations:
            cap[i] = policy.read_only_secret_cap if secret[i] else policy.read_only_cap
    return floor, cap


def assess_risk(registry: Registry, scores=None, policy: RiskPolicy = RiskPolicy()) -> RiskAssessment:
    """Risk of every tool.

    Args:
      registry: the tools.
      scores: f_risk [N] in (0, 1) from a risk head over the registry's text embeddings, or None.
      policy: keyword floors and the treatment of annotations.
    """
    n = registry.size
    mask = permission_mask_words(registry.texts)
    learned = np.full(n, np.nan, np.float32) if scores is None else np.asarray(scores, np.float32)
    base = np.ones(n, np.int32) if scores is None else levels_from_scores(learned)
    kw = keyword_floor(mask, policy.keyword_floors)
    ann_floor, ann_cap = _annotation_bounds(registry, mask, policy)
    floor = np.maximum(kw, ann_floor)
    levels = np.minimum(np.maximum(base, floor), ann_cap)
    cont = np.nan_to_num(learned, nan=0.0)
    cont = np.minimum(np.maximum(cont, (floor - 1) / 4.0), (ann_cap - 1) / 4.0)
    declared = np.array([0 if r is None else r for r in registry.declared_risk], np.int32)
    levels = np.where(declared > 0, declared, levels).astype(np.int32)
    cont = np.where(declared > 0, (declared - 1) / 4.0, cont).astype(np.float32)
    cats = tuple(tuple(c for c, hit in zip(CATEGORY_NAMES, row) if hit) for row in mask)
    sources = tuple(("declared",) if declared[i] else
                    _sources_of(int(levels[i]), int(base[i]), int(max(base[i], floor[i])), int(ann_floor[i]),
                                tuple(c for c in cats[i] if policy.keyword_floors.get(c, 1) == levels[i] > 1),
                                scores is not None)
                    for i in range(n))
    return RiskAssessment(levels, sources, cats, learned, cont)


def _sources_of(level: int, base: int, raised: int, ann: int, raising_cats, has_head: bool) -> tuple[str, ...]:
    """The steps whose level equals the final one (see the module docstring)."""
    if level < raised:
        return ("mcp:readOnlyHint",)
    out = []
    if has_head and base == level:
        out.append("learned")
    if raising_cats:
        out.append("keywords:" + "+".join(raising_cats))
    if ann == level > 1:
        out.append("mcp:destructiveHint")
    return tuple(out) or (("learned",) if has_head else ("default",))
