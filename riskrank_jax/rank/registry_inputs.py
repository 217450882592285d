"""What a Ranker needs from a user registry: the tools' embeddings, their assessed risk and the zero-shot graph.

    inputs = registry_inputs(load_registry(paths), encoder, cache)           # RankingInputs
    inputs.emb [N, d], inputs.risk.levels [N], inputs.risk.scores [N], inputs.perm_level [N]
    graph = zero_shot_graph(inputs)                                          # semantic + permission edges (top 32)

`Ranker.from_registry` turns these into a Ranker; this module does not import the Ranker (no cycle).

Why separate from the Ranker: it is the only part that reads files and encodes texts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from riskrank_jax.model.risk_head import RiskHead, default_head
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.risk import RiskAssessment, RiskPolicy, assess_risk


@dataclass(frozen=True, eq=False)
class RankingInputs:
    """registry: the tools; emb: float32 [N, d] embeddings of `registry.texts`; risk: the assessment;
    perm_mask: bool [N, 5] word-rule permission categories; encoder_id: who embedded them; risk_head: a
    description of the head used ("none" when every tool declares its risk)."""

    registry: Registry
    emb: np.ndarray
    risk: RiskAssessment
    perm_mask: np.ndarray
    encoder_id: str
    risk_head: str

    @property
    def perm_level(self) -> np.ndarray:
        """int32 [N]: number of permission categories matched."""
        return self.perm_mask.sum(-1).astype(np.int32)

    @property
    def risk_source(self) -> tuple[str, ...]:
        return tuple(self.risk.source_text(i) for i in range(self.registry.size))


def registry_inputs(registry: Registry, encoder, cache, risk_head: RiskHead | None = None,
                    policy: RiskPolicy = RiskPolicy()) -> RankingInputs:
    """Embed every tool text (cached by text), score it with the risk head (the shipped one by default;
    refused for another encoder) unless every tool declares its risk, and assess risk with `policy`."""
    from riskrank_jax.encode.embedding_cache import embed_texts

    emb = embed_texts(encoder, list(registry.texts), cache)
    scores, head_name = None, "none"
    if any(r is None for r in registry.declared_risk):
        head = risk_head or default_head()
        head.check_encoder(encoder.model_id, int(encoder.dim))
        scores, head_name = head.scores(emb), f"{head.trained_on} ({head.encoder_id})"
    return RankingInputs(registry, emb, assess_risk(registry, scores, policy), registry.perm_mask(),
                         str(encoder.model_id), head_name)


# The registry graph's bound: the paper's thresholds and weights, but each tool's semantic and permission edges
# only to mutual top-32 partners (build_tool_graph's max_neighbours; docs/registry.md, "Large registries").
# Unbounded, many similar tools give O(N²) edges (10,000 near-identical tools: 17.9 GB peak RSS). On the demo
# registry (at most 4 semantic and 38 permission neighbours per tool) 32 drops 31 of 677 edges and leaves its
# metrics equal to four decimals; 16 and 8 move them by up to 0.004.
REGISTRY_MAX_NEIGHBOURS = 32


def zero_shot_graph(inputs: RankingInputs, train_gold=None, config=None, *,
                    max_neighbours: int | None = REGISTRY_MAX_NEIGHBOURS, progress: bool | None = None):
    """ToolGraph over the registry: semantic and permission edges (risk levels from the assessment), plus
    co-occurrence edges when `train_gold` int [Q, G] (padded with -1) of logged queries is given.

    ``config``: a ``GraphConfig`` (default the paper's thresholds and weights). ``max_neighbours``: each tool
    keeps at most this many semantic and as many permission neighbours (mutual top-m; default 32), built tile
    by tile in O(N·m) memory (benchmarks/registry_memory.py, 50,000 tools: 0.9 GiB peak for the whole process,
    texts cached; the unbounded graph needs O(N²)); None is the paper's unbounded graph. ``progress``: a bar
    over the tiles (default: from 8,192 tools, drawn on a terminal only)."""
    from riskrank_jax.graph.tool_graph import GraphConfig, build_tool_graph

    config = GraphConfig() if config is None else config
    gold = np.full((1, 1), -1, np.int32) if train_gold is None else np.asarray(train_gold, np.int32)
    return build_tool_graph(inputs.emb, inputs.perm_mask, inputs.risk.levels, gold, config,
                            max_neighbours=max_neighbours, progress=progress)


__all__ = ["RankingInputs", "registry_inputs", "zero_shot_graph", "REGISTRY_MAX_NEIGHBOURS"]
