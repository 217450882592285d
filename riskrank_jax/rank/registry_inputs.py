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

from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.encode.families import risk_encoder
from riskrank_jax.graph.tool_graph import GraphConfig, build_tool_graph
from riskrank_jax.model.risk_head import RiskHead
from riskrank_jax.registry.dimensions import DimensionPolicy, assess_dimensions, assessment_to_risk
from riskrank_jax.registry.mcp_risk import default_model
from riskrank_jax.registry.permissions import permission_mask_words
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
                    policy: RiskPolicy = RiskPolicy(), risk_model=None) -> RankingInputs:
    """Embed every tool text (cached by text) and assess risk.

    By default by what each tool does (`registry.dimensions.assess_dimensions`: the learned risk model —
    ``risk_model``, default the shipped `registry.mcp_risk.default_model()` — keywords and MCP annotations under
    the specification's defaults; annotations trusted as ``policy`` says). With an explicit ``risk_head`` the
    level rule of `registry.risk.assess_risk` over that head's f_risk instead (no dimensions). A head or model
    trained for another encoder is refused; a named encoder that is not the risk model's (``--encoder mpnet``, a
    fusion) names the one the model reads (``encode.families.risk_encoder``), and the texts are embedded by it too."""
    emb = embed_texts(encoder, list(registry.texts), cache)
    if risk_head is not None:
        scores, head_name = None, "none"
        if any(r is None for r in registry.declared_risk):
            risk_head.check_encoder(encoder.model_id, int(encoder.dim))
            scores, head_name = risk_head.scores(emb), f"{risk_head.trained_on} ({risk_head.encoder_id})"
        return RankingInputs(registry, emb, assess_risk(registry, scores, policy), registry.perm_mask(),
                             str(encoder.model_id), head_name)
    reader = risk_encoder(encoder)  # the shipped risk model reads MiniLM's vectors, whatever ranks
    risk_emb = emb if reader is encoder else embed_texts(reader, list(registry.texts), cache)
    return RankingInputs(registry, emb, assess_dimensions_risk(registry, risk_emb, str(reader.model_id),
                                                               int(reader.dim), policy, risk_model)[0],
                         registry.perm_mask(), str(encoder.model_id),
                         _model_name(risk_model or default_model(), registry))


def _model_name(model, registry: Registry) -> str:
    if model is None:
        return "dimensions (no risk model)"
    if all(r is not None for r in registry.declared_risk):
        return "dimensions (every level declared: no risk model used)"
    c = model.corpus
    return f"dimensions: mcp risk model ({c.get('tools')} tools of {c.get('servers')} servers, {model.encoder_id})"


def assess_dimensions_risk(registry: Registry, emb, encoder_id: str, dim: int, policy: RiskPolicy = RiskPolicy(),
                           risk_model=None):
    """(RiskAssessment with ``dimensions``, the probabilities float32 [N, 7] or None): the dimension assessment
    of a registry whose tool texts are embedded as emb [N, d] by ``encoder_id``, with ``risk_model`` (default
    the shipped one; none shipped: keywords and annotations only). A registry whose every tool declares its
    level needs no model (and so no particular encoder)."""
    model = risk_model or default_model()
    probs = None
    if model is not None and any(r is None for r in registry.declared_risk):  # a declared level is final
        model.check_encoder(encoder_id, dim)
        probs = model.probs(emb, registry.texts)
    trust = {"trust_annotations": policy.trust_annotations, "trusted_sources": tuple(policy.trusted_sources)}
    dpol = model.dimension_policy(**trust) if model is not None else DimensionPolicy(**trust)
    dims = assess_dimensions(registry, probs, dpol)
    return assessment_to_risk(registry, dims), probs


# The registry graph's bound: the paper's thresholds and weights, but each tool's semantic and permission edges
# only to mutual top-32 partners (build_tool_graph's max_neighbours; docs/registry.md, "Large registries").
# Unbounded, many similar tools give O(N²) edges (10,000 near-identical tools: 17.9 GB peak RSS). On the demo
# registry (at most 4 semantic and 38 permission neighbours per tool) 32 drops 31 of 677 edges and leaves its
# metrics equal to four decimals; 16 and 8 move them by up to 0.004.
REGISTRY_MAX_NEIGHBOURS = 32


def registry_graph(tool_emb, tool_texts, risk_levels, train_gold=None):
    """The ToolGraph of a built ranker's arrays (tool_emb float [N, d], tool_texts, risk_levels int [N]) as
    ``zero_shot_graph`` builds it — the permission mask from the texts, neighbours bounded — with co-occurrence
    edges from ``train_gold`` int [Q, G] (padded with -1; None: none). For a ranker whose vectors or logged
    queries change (a tuned encoder, a fitted head, server siblings)."""
    gold = np.full((1, 1), -1, np.int32) if train_gold is None else np.asarray(train_gold, np.int32)
    return build_tool_graph(np.asarray(tool_emb, np.float32), permission_mask_words(tool_texts), risk_levels, gold,
                            max_neighbours=REGISTRY_MAX_NEIGHBOURS)


def zero_shot_graph(inputs: RankingInputs, train_gold=None, config=None, *,
                    max_neighbours: int | None = REGISTRY_MAX_NEIGHBOURS, progress: bool | None = None):
    """ToolGraph over the registry: semantic and permission edges (risk levels from the assessment), plus
    co-occurrence edges when `train_gold` int [Q, G] (padded with -1) of logged queries is given.

    ``config``: a ``GraphConfig`` (default the paper's thresholds and weights). ``max_neighbours``: each tool
    keeps at most this many semantic and as many permission neighbours (mutual top-m; default 32), built tile
    by tile in O(N·m) memory (benchmarks/registry_memory.py, 50,000 tools: 0.9 GiB peak for the whole process,
    texts cached; the unbounded graph needs O(N²)); None is the paper's unbounded graph. ``progress``: a bar
    over the tiles (default: from 8,192 tools, drawn on a terminal only)."""
    config = GraphConfig() if config is None else config
    gold = np.full((1, 1), -1, np.int32) if train_gold is None else np.asarray(train_gold, np.int32)
    return build_tool_graph(inputs.emb, inputs.perm_mask, inputs.risk.levels, gold, config,
                            max_neighbours=max_neighbours, progress=progress)


__all__ = ["registry_graph", "RankingInputs", "registry_inputs", "assess_dimensions_risk", "zero_shot_graph", "REGISTRY_MAX_NEIGHBOURS"]
