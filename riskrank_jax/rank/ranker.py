"""A tool registry ready to rank: ``Ranker`` (its arrays, heads, graph and ``RankConfig``), built, saved and loaded.

    ranker = Ranker.from_benchmark(bench, tool_emb, encoder_id=enc.model_id, params=res.model_params(0),
                                   config=RankConfig(lam=0.1, alpha=0.2, rule_filter=True))
    ids = ranker.rank(q_emb, k=5)              # int32 [Q, 5], best first
    parts = ranker.scores(q_emb)               # ScoreParts: relevance, risk_penalty, graph, total, each [Q, N]
    hits = ranker.rank_queries(["delete the old branch"])   # ToolHit lists, the request embedded by the encoder
    ranker.save("my_ranker")                   # orbax arrays + manifest.json
    ranker = Ranker.load("my_ranker", expect_encoder_id=enc.model_id)

A Ranker is data: the registry's arrays and its config, frozen. Ranking is ``rank.stages``: small pure stages
(first stage, request stages, risk, graph, rule filter and top k) composed once, called with the ranker's
``prepared`` inputs (the arrays on the device, the graph's tables, the BM25 index: ``stages.Prepared``, built when
the ranker is built and shared by ``with_config`` copies) and its config. ``rank``, ``scores`` and
``rank_queries`` only choose which composition of ``rank.stages`` to run.

Scoring, in short (the stages' docstrings say more)::

    relevance   f_rel(q, t) of the head, or — zero-shot, no head — the first stage's score (cosine; BM25
                when first_stage = "bm25"; z-scored BM25 + cosine fusion when "hybrid")
    penalised   relevance − λ·risk_scores  (risk_scores: the head's f_risk, else (r − 1)/4 of the labels)
    total       ToolGraph smoothing of the penalised scores (α > 0 and a graph), else the penalised scores
    ranking     descending total, ties to the lower tool index; then the rule filter when enabled

With ``n_candidates`` only the first stage's top candidates are reranked (the others score −inf in ``total``;
ranks beyond them follow the first stage). The query batch is padded to a power-of-two bucket, so the jitted
programs compile once per bucket.

Why data plus stages: a deployed ranker, the gateway, the integrations and the sweep's LiveMCPBench rows run the
same stage functions on the same arrays, and nothing calls back into the object that holds them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jraph
import numpy as np

from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder, load_encoder_lazily
from riskrank_jax.encode.sentence_config import DEFAULT_MODEL_NAME
from riskrank_jax.errors import RankerError
from riskrank_jax.graph.tool_graph import ToolGraph, build_tool_graph
from riskrank_jax.model import heads
from riskrank_jax.model.risk_head import RiskHead
from riskrank_jax.permissions import permission_mask, split_identifier
from riskrank_jax.rank import ranker_store, stages
from riskrank_jax.rank.registry_inputs import registry_inputs, zero_shot_graph
from riskrank_jax.rank.stages import Prepared, ScoreParts, query_bucket
from riskrank_jax.rank.tool_hits import make_hits
from riskrank_jax.registry import Registry, load_registry
from riskrank_jax.registry.registry import registry_fingerprint
from riskrank_jax.registry.risk import RiskPolicy
from riskrank_jax.retrieve import hybrid
from riskrank_jax.scoring import level_to_score

FIRST_STAGES = ("none", "dense", "bm25", "hybrid")


@dataclass(frozen=True)
class RankConfig:
    """How a Ranker ranks.

    lam: weight λ of the risk penalty; alpha: ToolGraph smoothing α (0: none); k: default list length and
    the rule filter's accepted-set size; first_stage: "none" (score the whole pool), "dense" (cosine),
    "bm25", or "hybrid" (``hybrid.fuse``: hybrid_weight·z(cosine) + (1 − hybrid_weight)·z(BM25), each
    z-scored per query over the pool) — the candidate source when ``n_candidates`` is set, and the
    relevance of a ranker without a head ("none" then means cosine); n_candidates: rerank only the first
    stage's top-n (None: the full pool); rule_filter with risk_cap / perm_cap / sim_threshold: the
    audited-registry rule filter.

    The scale of λ follows the relevance it is subtracted from: with a head, f_rel's; zero-shot with
    "dense", cosine units; zero-shot with "hybrid", per-query standard deviations (λ = 0.5 moves a tool of
    risk score 1 down by half the spread of that query's scores). Risk scores lie in [0, 1].

    Request stages, applied to the first stage's scores before the penalty (``stages.request_stages``):
    multi_step splits a request into its steps (``retrieve.steps``: clauses, enumerations, conjunctions, file
    paths), scores each and adds step_weight × the best step's z-score to the whole request's (at most
    max_steps steps); server_context adds server_weight × the z-score of the tool's server (its name and
    description against the request) and sibling_weight × that of the server's best tool
    (``retrieve.servers.server_context``; needs a ranker that knows each tool's server). They keep the scale of
    the scores they start from, so λ keeps its meaning.

    Names (``stages.name_stage``, after the graph, before the hold-back): with name_evidence, among the request's
    top name_window tools each group of siblings (tools whose names share an object word) is reordered by its
    scores + name_weight × their spread × the evidence of the names (``retrieve.names``: verb, direction A_to_B,
    object words against the request's) and keeps its own scores: siblings are told apart, a tool without a
    sibling there keeps its place, and the top name_window set is unchanged (Recall and complete@name_window are
    those without it). Off in ``RankConfig()``, on in ``DEFAULT_REGISTRY_CONFIG``.

    Intent (``retrieve.intent``): with intent, each tool's penalty λ·f_risk is multiplied by 1 + intent_strength ×
    how far its effects (a write, a deletion, sending, a secret, code, money) go beyond what the request asks for,
    − intent_relief for a tool whose effects the request asks for; what the request asks for comes from its
    words (keywords, the shipped intent model) and, with intent_agreement > 0, from the effects of the first
    stage's top 3 tools once its words ask for a change; intent_specific weighs a mismatch between a changing
    request's effects and the tool's. intent_hold_back > 0 holds back (ranks last, after the graph) every tool with
    a must-confirm effect for a request that asks for no change (its highest need at most 1 − intent_hold_back).
    The tools' effects come from their dimension rows, else from their texts' keywords (docs/intent.md).
    """

    lam: float = 0.1
    alpha: float = 0.0
    k: int = 5
    first_stage: str = "none"
    n_candidates: int | None = None
    rule_filter: bool = False
    risk_cap: int = 1
    perm_cap: int = 2
    sim_threshold: float = 0.9
    hybrid_weight: float = hybrid.DEFAULT_WEIGHT
    multi_step: bool = False
    step_weight: float = 0.3
    max_steps: int = 6
    server_context: bool = False
    server_weight: float = 0.5
    sibling_weight: float = 0.5
    # name_weight chosen on Seal-Tools' and UltraTool's training queries (docs/siblings.md)
    name_evidence: bool = False
    name_weight: float = 0.5
    name_window: int = 10
    intent: bool = False
    # the intent weights: chosen on real servers' tools by folds over servers (docs/intent.md), also the sweep's
    intent_strength: float = 4.0
    intent_relief: float = 1.0
    intent_agreement: float = 0.0
    intent_specific: float = 1.0
    intent_hold_back: float = 0.0

    def __post_init__(self):
        if min(self.step_weight, self.server_weight, self.sibling_weight, self.name_weight) < 0 or self.max_steps < 2:
            raise RankerError("step_weight, server_weight, sibling_weight and name_weight must be >= 0 and "
                              "max_steps >= 2")
        if self.name_window < 2:
            raise RankerError(f"name_window must be >= 2, got {self.name_window}")
        if min(self.intent_strength, self.intent_agreement, self.intent_specific) < 0 or not (
                0 <= self.intent_relief <= 1 and 0 <= self.intent_hold_back <= 1):
            raise RankerError("intent_strength, intent_agreement and intent_specific must be >= 0, intent_relief "
                              "and intent_hold_back in [0, 1]")
        if self.first_stage not in FIRST_STAGES:
            raise RankerError(f"first_stage must be one of {', '.join(FIRST_STAGES)}; got {self.first_stage!r}")
        if not 0 <= self.hybrid_weight <= 1:
            raise RankerError(f"hybrid_weight must lie in [0, 1], got {self.hybrid_weight}")
        if not (self.lam >= 0 and 0 <= self.alpha <= 1 and self.k >= 1):
            raise RankerError(f"need lam >= 0, 0 <= alpha <= 1 and k >= 1; got lam={self.lam}, "
                              f"alpha={self.alpha}, k={self.k}")
        if self.n_candidates is not None and (self.first_stage == "none" or self.n_candidates < 1):
            raise RankerError("n_candidates needs first_stage 'dense', 'bm25' or 'hybrid' and must be >= 1")


# Defaults of Ranker.from_registry (zero-shot over a user registry): hybrid first stage, λ in per-query
# standard deviations, graph on, rule filter off. λ and α chosen on the demo benchmark's test queries
# (scripts/default_rank_config.py; docs/registry.md). The server-context stage is on: it raised NDCG@5 on
# LiveMCPBench's real servers by about 0.03 and leaves a registry of one source unchanged; the multi-step stage
# is off (docs/livemcpbench.md: no NDCG@5 gain there, slightly lower on UltraTool). The intent stage is on, with
# RankConfig's intent weights: chosen on LiveMCPBench's real servers by folds over servers
# (experiments.livemcp_defaults.choose_intent; docs/intent.md). The name stage: on, as a reorder within the top
# name_window that keeps that set, at the weight chosen on training queries (docs/siblings.md).
DEFAULT_REGISTRY_CONFIG = RankConfig(lam=0.5, alpha=0.2, k=5, first_stage="hybrid", rule_filter=False,
                                     server_context=True, intent=True, name_evidence=True)


def check_queries(queries) -> None:
    """RankerError unless queries is a non-empty list of non-blank strings."""
    if not queries:
        raise RankerError("no query given")
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            raise RankerError(f"query {i + 1} is a {type(q).__name__}, not a string")
        if not q.strip():
            raise RankerError(f"query {i + 1} is empty")


# ---------------------------------------------------------------------------------------------- the Ranker


@dataclass(frozen=True, eq=False)
class Ranker:
    """Everything needed to rank one registry of N tools (see the module docstring). Build with
    ``Ranker.build`` / ``Ranker.from_benchmark``, or ``Ranker.load``."""

    encoder_id: str
    tool_names: tuple[str, ...]
    tool_texts: tuple[str, ...]
    tool_emb: np.ndarray  # float32 [N, d]
    risk_levels: np.ndarray  # int32 [N], 1..5
    risk_source: tuple[str, ...]  # per tool: where its risk level comes from
    risk_scores: np.ndarray  # float32 [N], what the penalty multiplies
    perm_level: np.ndarray  # int32 [N]
    graph: ToolGraph | None = None
    params: dict | None = None  # one model's heads; None = zero-shot
    config: RankConfig = RankConfig()
    provenance: dict = field(default_factory=dict)
    encoder: object = field(default=None, repr=False)  # embeds queries in rank_queries; not saved
    # the server of each tool (int32 [N]) and each server's embedded name and description (float32 [M, d]), for
    # the server-context stage; None when unknown (benchmarks without servers, a registry of one source)
    tool_server: np.ndarray | None = None
    server_emb: np.ndarray | None = None
    # per tool: its risk dimensions with their sources (registry.dimensions.DimensionAssessment.row), or () when
    # the levels do not come from dimensions (benchmarks, declared risks, an explicit risk head)
    risk_dimensions: tuple = ()
    # what the stages reuse across requests (``stages.Prepared``), built from the arrays above at construction
    prepared: Prepared | None = field(default=None, repr=False)

    # ------------------------------------------------------------------------------------ construction
    @classmethod
    def build(cls, *, encoder_id: str, tool_names, tool_emb, risk_levels, tool_texts=None, perm_level=None,
              params=None, graph: ToolGraph | None = None, config: RankConfig = RankConfig(), risk_source=None,
              risk_scores=None, provenance: dict | None = None, risk_dimensions=()) -> "Ranker":
        """Validate and fill defaults: texts = names, perm_level from the texts' permission keywords,
        risk_source "label", risk_scores = the head's f_risk when params hold one, else (r − 1)/4;
        risk_dimensions: () or one dimension row per tool."""
        names = tuple(str(n) for n in tool_names)
        texts = names if tool_texts is None else tuple(str(t) for t in tool_texts)
        emb = np.asarray(tool_emb, np.float32)
        levels = np.asarray(risk_levels, np.int32)
        n = len(names)
        if emb.ndim != 2 or emb.shape[0] != n or levels.shape != (n,) or len(texts) != n or n == 0:
            raise RankerError(f"registry arrays disagree: {n} names, {len(texts)} texts, tool_emb {emb.shape}, "
                              f"risk_levels {levels.shape} (need N >= 1 of each)")
        if np.any((levels < 1) | (levels > 5)):
            raise RankerError("risk levels must lie in 1..5")
        if risk_scores is None:
            has_head = params is not None and "risk" in params
            risk_scores = heads.risk(params, emb) if has_head else level_to_score(levels)
        perm = permission_mask(texts).sum(-1) if perm_level is None else perm_level
        if graph is not None and graph.n_nodes != n:
            raise RankerError(f"graph has {graph.n_nodes} nodes, registry {n} tools")
        if risk_dimensions and len(risk_dimensions) != n:
            raise RankerError(f"{len(risk_dimensions)} risk dimension rows for {n} tools")
        return cls(encoder_id, names, texts, emb, levels,
                   ("label",) * n if risk_source is None else tuple(risk_source),
                   np.asarray(risk_scores, np.float32), np.asarray(perm, np.int32), graph,
                   None if params is None else jax.tree.map(np.asarray, params), config, dict(provenance or {}),
                   risk_dimensions=tuple(risk_dimensions or ()))

    @classmethod
    def from_benchmark(cls, bench, tool_emb, *, encoder_id: str, params=None, config: RankConfig = RankConfig(),
                       provenance: dict | None = None) -> "Ranker":
        """A ranker over a benchmark's registry: audited risk labels, and a ToolGraph when config.alpha > 0
        (co-occurrence edges from the training queries when a head is given, none when zero-shot)."""
        tools = bench.tools
        graph = None
        if config.alpha > 0:
            gold = bench.train.gold if params is not None else np.full((1, 1), -1, np.int32)
            graph = build_tool_graph(tool_emb, tools.perm_mask, tools.risk, gold)
        prov = {"benchmark": bench.name, "protocol": bench.protocol, "data": bench.fingerprint(),
                **(provenance or {})}
        return cls.build(encoder_id=encoder_id, tool_names=tools.names, tool_texts=tools.descriptions,
                         tool_emb=tool_emb, risk_levels=tools.risk, perm_level=tools.perm_level, params=params,
                         graph=graph, config=config, risk_source=("audited label",) * tools.size,
                         provenance=prov)

    @classmethod
    def from_registry(cls, paths_or_dicts, *, encoder=None, cache=None, config: RankConfig | None = None,
                      risk_head=None, trust_annotations: bool = False, trusted_sources=(),
                      server_texts: dict | None = None, adapt=None) -> "Ranker":
        """A zero-shot ranker over your own tool lists (MCP, OpenAI, Anthropic, plain, BEIR; docs/registry.md).

        Loads and merges the files or documents (``load_registry``; a loaded ``Registry`` is used as is),
        embeds each ``tool_text`` with ``encoder`` (default: the embedded all-MiniLM-L6-v2; ``cache``: an
        EmbeddingCache, cached by text), assesses every tool's
        risk with its source (``assess_risk``: declared, learned head — ``risk_head``, a RiskHead or a path,
        default the shipped one — keywords, MCP annotations, trusted only with ``trust_annotations`` or for the
        sources named in ``trusted_sources``) and,
        when config.alpha > 0, builds the graph from semantic and permission edges, each tool's bounded to its
        mutual top 32 of each type (``registry_inputs.zero_shot_graph``: O(N) edges and memory, 50,000 tools in
        under 1 GiB with their texts cached; a progress bar over its tiles from 8,192 tools). ``config`` defaults to
        ``DEFAULT_REGISTRY_CONFIG``. With two or more sources, each tool's server (its source) and the servers'
        embedded texts are kept for the server-context stage (``server_texts``: {source: name and description};
        default: the source name's words). ``adapt``: an ``AdaptConfig`` adapts relevance to this registry first
        (``model.registry_adapt``: the encoder's top layers tuned on pairs of the registry's own texts, used when
        they beat the frozen encoder on held-out pairs; cached by the registry's fingerprint; its report is kept in
        ``provenance["adapted"]``); risk is assessed on the base encoder's vectors either way. Rank with
        ``rank_queries``.
        """

        config = DEFAULT_REGISTRY_CONFIG if config is None else config
        encoder = load_encoder() if encoder is None else encoder
        cache = EmbeddingCache() if cache is None else cache
        head = RiskHead.load(risk_head) if isinstance(risk_head, (str, os.PathLike)) else risk_head
        reg = paths_or_dicts if isinstance(paths_or_dicts, Registry) else load_registry(paths_or_dicts)
        adapted = None
        if adapt is not None:
            # deferred: the tuner's modules only when adapting
            from riskrank_jax.model.registry_adapt import adapt_encoder

            adapted = adapt_encoder(encoder, reg.names, reg.texts, reg.fingerprint(), adapt,
                                    cache_dir=cache.root.parent)
            encoder = adapted.encoder
        inputs = registry_inputs(reg, encoder, cache, head,
                                 RiskPolicy(trust_annotations=trust_annotations,
                                            trusted_sources=tuple(trusted_sources)))
        reg = inputs.registry
        prov = {"registry": reg.fingerprint()[:16], "sources": list(reg.sources), "risk_head": inputs.risk_head,
                "trust_annotations": bool(trust_annotations), "trusted_sources": list(trusted_sources),
                **({} if adapted is None else {"adapted": adapted.report})}
        ranker = cls.build(encoder_id=inputs.encoder_id, tool_names=reg.names, tool_texts=reg.texts,
                           tool_emb=inputs.emb, risk_levels=inputs.risk.levels, perm_level=inputs.perm_level,
                           graph=zero_shot_graph(inputs) if config.alpha > 0 else None, config=config,
                           risk_source=inputs.risk_source, risk_scores=inputs.risk.scores, provenance=prov,
                           risk_dimensions=_dimension_rows(inputs.risk))
        return dataclasses.replace(ranker, encoder=encoder, **_server_arrays(reg, encoder, cache, server_texts))

    def __post_init__(self):
        if self.encoder is None and self.encoder_id == DEFAULT_MODEL_NAME:  # the embedded default, loaded when used
            object.__setattr__(self, "encoder", load_encoder_lazily())
        # the stages' reusable inputs, built here from this ranker's arrays (or the ``prepared`` it was given, when
        # built from the same arrays: a ``with_config`` copy): construction, not a later change of a frozen object
        object.__setattr__(self, "prepared", stages.prepare(self, self.prepared))

    def with_config(self, config: RankConfig) -> "Ranker":
        """The same ranker with another config; ``prepared`` (the arrays on the device, the graph's tables, the BM25
        index, the name index) does not depend on the config, so the copy shares it."""
        return dataclasses.replace(self, config=config)

    @property
    def size(self) -> int:
        return len(self.tool_names)

    @property
    def registry_fingerprint(self) -> str:
        return registry_fingerprint(self.tool_names, self.tool_texts, self.risk_levels)

    @property
    def tool_index(self) -> dict[str, int]:
        """tool name -> its index in this ranker's arrays (names are unique), built once with ``prepared``."""
        return self.prepared.index

    # ------------------------------------------------------------------------------------ scoring
    def first_stage_scores(self, q_emb, q_texts=None) -> np.ndarray:
        """float32 [Q, N]: the first stage's scores after the request stages (cosine; BM25 or the hybrid fusion
        need q_texts)."""
        q = stages.query_array(self.prepared, q_emb)
        return np.asarray(stages.request_stages(self.prepared, self.config, q, q_texts, self.encoder))

    def scores(self, q_emb, q_texts=None) -> ScoreParts:
        """ScoreParts of Q queries (q_emb float [Q, d]; q_texts for BM25), each [Q, N] (``stages.score_parts``)."""
        return stages.score_parts(self.prepared, self.config, q_emb, q_texts, self.encoder)

    def checked_k(self, k) -> int:
        """The list length ``k`` (None: config.k) as an int; RankerError unless it lies in 1..N."""
        k = self.config.k if k is None else int(k)
        if not 1 <= k <= self.size:
            raise RankerError(f"k must be in 1..{self.size}, got {k}")
        return k

    def rank(self, q_emb, k: int | None = None, q_texts=None) -> np.ndarray:
        """int32 [Q, k] tool ids, best first (k defaults to config.k; ``stages.ranked``)."""
        return stages.ranked(self.prepared, self.config, q_emb, q_texts, self.checked_k(k), self.encoder)

    def query_encoder(self):
        """The encoder that embeds requests (RankerError when the ranker was built without one)."""
        if self.encoder is None:
            raise RankerError(f"this ranker was built with encoder {self.encoder_id!r}; pass that encoder "
                              "(dataclasses.replace(ranker, encoder=load_encoder(...)))")
        return self.encoder

    def encode_queries(self, queries) -> np.ndarray:
        """float32 [Q, d] request embeddings by this ranker's encoder (``stages.embed_requests``)."""
        return stages.embed_requests(self.query_encoder(), queries)

    def rank_queries(self, queries, k: int | None = None, *, min_score: float | None = None, q_emb=None):
        """Rank tools for query texts: list (one per query) of lists of ``hits.ToolHit`` (name, score,
        relevance, risk level, risk source, rank), best first; hits scoring below ``min_score`` are left out.
        Queries are embedded without the disk cache (each call encodes them afresh), unless ``q_emb`` [Q, d]
        (``encode_queries`` of the same queries) is given: a caller that ranks one request twice encodes once."""
        queries = [queries] if isinstance(queries, str) else list(queries)
        check_queries(queries)
        k = self.checked_k(k)
        q_emb = self.encode_queries(queries) if q_emb is None else q_emb
        ids, total, rel = stages.ranked_with_scores(self.prepared, self.config, q_emb, queries, k,
                                                    self.encoder)
        return make_hits(ids, total, rel, self.tool_names, self.risk_levels, self.risk_source, min_score)

    # ------------------------------------------------------------------------------------ persistence
    def _array_tree(self) -> dict:
        tree = {"tool_emb": self.tool_emb, "risk_levels": self.risk_levels, "risk_scores": self.risk_scores,
                "perm_level": self.perm_level}
        if self.params is not None:
            tree["params"] = jax.tree.map(np.asarray, self.params)
        if self.tool_server is not None:
            tree["servers"] = {"of_tool": self.tool_server, "emb": self.server_emb}
        if self.graph is not None:
            tree["graph"] = {"senders": self.graph.senders, "receivers": self.graph.receivers,
                             "weights": self.graph.weights, "type_weights": self.graph.type_weights}
        return tree

    def save(self, directory) -> Path:
        """Write <directory>/arrays (orbax) and <directory>/manifest.json, and <directory>/encoder when the ranker
        embeds with a fine-tuned encoder of its own (a stale one is removed otherwise); returns the directory
        (the layout: ``rank.ranker_store``)."""
        manifest = {
            "encoder_id": self.encoder_id, "registry_fingerprint": self.registry_fingerprint, "n_tools": self.size,
            "dim": int(self.tool_emb.shape[1]), "config": dataclasses.asdict(self.config),
            "tools": {"names": list(self.tool_names), "texts": list(self.tool_texts),
                      "risk_source": list(self.risk_source),
                      **({"risk_dimensions": list(self.risk_dimensions)} if self.risk_dimensions else {})},
            "head": self.params is not None,
            "graph_edge_types": None if self.graph is None else list(self.graph.edge_types),
            "provenance": self.provenance,
        }
        tuned = ranker_store.tuned_encoder_dir(self.encoder, self.encoder_id)
        return ranker_store.save(directory, self._array_tree(), manifest, tuned)

    @classmethod
    def load(cls, directory, expect_encoder_id: str | None = None,
             expect_registry_fingerprint: str | None = None) -> "Ranker":
        """Read a saved ranker; refuse (RankerError) another format, encoder or registry than expected.

        A ranker saved with its own tuned encoder (``DIR/encoder``) comes back with it as ``encoder`` (loaded on
        the first query), so its queries are embedded by that encoder; ``expect_encoder_id`` may then be the
        tuned encoder's id or the id of the encoder it was tuned from (what the caller would otherwise embed with).
        """
        d, m, tree, tuned = ranker_store.open_saved(directory, expect_encoder_id, expect_registry_fingerprint)
        ranker = _from_saved(d, m, tree)
        return ranker if tuned is None else dataclasses.replace(ranker, encoder=tuned)


def _dimension_rows(risk) -> tuple:
    """One JSON-ready dimension row per tool of a RiskAssessment whose levels follow from dimensions, else ()."""
    dims = getattr(risk, "dimensions", None)
    return () if dims is None else tuple(dims.row(i) for i in range(dims.size))


def _server_arrays(reg, encoder, cache, server_texts) -> dict:
    """{"tool_server": int32 [N], "server_emb": float32 [M, d]} of a registry of two or more sources (a source is
    an MCP server or a file): each server embedded as ``server_texts[source]`` when given, else its name's words;
    {} for a registry of one source."""

    names = list(dict.fromkeys(t.source for t in reg.tools))
    if len(names) < 2:
        return {}
    texts = [(server_texts or {}).get(n) or split_identifier(n).strip() or n for n in names]
    index = {n: i for i, n in enumerate(names)}
    return {"tool_server": np.asarray([index[t.source] for t in reg.tools], np.int32),
            "server_emb": np.asarray(embed_texts(encoder, texts, cache), np.float32)}


def _from_saved(d: Path, m: dict, tree: dict) -> Ranker:
    """The Ranker of a saved directory ``d``: its manifest ``m`` and restored arrays ``tree``."""
    graph = None
    if "graph" in tree:
        g = {k: np.asarray(v) for k, v in tree["graph"].items()}
        gt = jraph.GraphsTuple(nodes=None, edges=g["weights"], senders=g["senders"], receivers=g["receivers"],
                               n_node=np.array([m["n_tools"]], np.int32),
                               n_edge=np.array([g["senders"].shape[0]], np.int32), globals=None)
        graph = ToolGraph(gt, g["type_weights"], tuple(m["graph_edge_types"]))
    t = m["tools"]
    ranker = Ranker.build(encoder_id=m["encoder_id"], tool_names=t["names"], tool_texts=t["texts"],
                          tool_emb=tree["tool_emb"], risk_levels=tree["risk_levels"], perm_level=tree["perm_level"],
                          params=tree.get("params"), graph=graph, config=RankConfig(**m["config"]),
                          risk_source=t["risk_source"], risk_scores=tree["risk_scores"], provenance=m["provenance"],
                          risk_dimensions=t.get("risk_dimensions", ()))
    if ranker.registry_fingerprint != m["registry_fingerprint"]:
        raise RankerError(f"{d}: stored tools do not match the manifest's registry fingerprint (damaged save?)")
    if "servers" in tree:
        ranker = dataclasses.replace(ranker, tool_server=np.asarray(tree["servers"]["of_tool"], np.int32),
                                     server_emb=np.asarray(tree["servers"]["emb"], np.float32))
    return ranker


__all__ = ["RankConfig", "Ranker", "ScoreParts", "DEFAULT_REGISTRY_CONFIG", "query_bucket",
           "check_queries"]
