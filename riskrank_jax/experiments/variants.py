"""Every variant the experiments evaluate, declared once as data.

A ``Variant`` says how its scores are built — which relevance (a trained head, cosine or BM25), which risk
score the penalty uses, which λ, which ToolGraph, candidate mode, rule filter — which training run it
needs, which tables it appears in and which row of the paper it reproduces (with the paper's numbers).
The sweep, the report and the tests read ``VARIANTS``; adding a variant (or a training run it needs)
touches only this file.

The scoring stages are the ``Ranker``'s (``riskrank_jax.rank.ranker``): ``Variant.rank_config`` gives the
``RankConfig`` a deployed ``Ranker`` of the variant would use.

Why data, not code: the sweep, the report and the tests read one list, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from riskrank_jax.experiments.config import SweepConfig
from riskrank_jax.graph.tool_graph import EDGE_TYPES
from riskrank_jax.model.cross_encoder import BASELINE_RERANKERS, CrossEncoderConfig
from riskrank_jax.model.encoder_tune import TuneConfig
from riskrank_jax.model.intent_model import IntentConfig
from riskrank_jax.model.rerank import RerankConfig
from riskrank_jax.model.risk_head import RiskHeadConfig
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.rank.ranker import RankConfig

# ---------------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class TrainingRun:
    """A training run variants share. ``make(sweep config, n_tools)`` gives its configuration from the sweep's
    ``experiments.config.SweepConfig``: a ``TrainConfig`` (dual heads, every seed x fold), a ``RiskHeadConfig``
    (risk head alone, per seed), a ``RerankConfig`` (the correction reranker over the hybrid first stage, every
    seed x fold), a ``TuneConfig`` (the encoder's top layers fine-tuned, every seed x fold:
    ``experiments.tuned``) or a ``CrossEncoderConfig`` (the cross-encoder second stage, every seed x fold:
    ``experiments.cross``) or an ``IntentConfig`` (the intent models of the ``*_intent`` rows, one per fold:
    ``experiments.intent``)."""

    name: str
    label: str
    make: Callable[[SweepConfig, int],
                   TrainConfig | RiskHeadConfig | RerankConfig | TuneConfig | CrossEncoderConfig | IntentConfig]


TRAINING_RUNS: dict[str, TrainingRun] = {r.name: r for r in (
    TrainingRun("core", "core (seeds x folds)", lambda cfg, n: cfg.train),
    TrainingRun("lambda_aware", "lambda-aware (seeds x folds x lambdas)",
                lambda cfg, n: replace(cfg.train, lambda_aware=True, lambdas=tuple(cfg.eval.lambdas))),
    TrainingRun("core_plus", "core_plus (interact head + 2 hard / 3 uniform negatives)",
                lambda cfg, n: replace(cfg.train, rel_features="interact", negative_sampling="mixed",
                                       hard_pool=min(cfg.train.hard_pool, n // 2))),
    TrainingRun("risk_only", "zero-shot risk heads", lambda cfg, n: cfg.risk_head),
    TrainingRun("rerank", "correction reranker (seeds x folds)", lambda cfg, n: cfg.rerank),
    TrainingRun("tuned", "tuned encoder (seeds x folds)", lambda cfg, n: cfg.tune),
    TrainingRun("cross_encoder", "cross-encoder (seeds x folds)", lambda cfg, n: cfg.cross_encoder),
    TrainingRun("intent", "intent models (folds)", lambda cfg, n: cfg.intent),
)}

RELEVANCES = ("head", "dense", "bm25", "hybrid", "rerank", "ft_hybrid", "ce_rerank", "reranker")
TRAINED_RELEVANCES = ("head", "rerank", "ft_hybrid", "ce_rerank")  # relevance from the variant's training run

# λ of the hybrid / rerank families is in per-query standard deviations of their (z-scored) relevance
Z_LAMBDAS = (0.0, 0.25, 0.5, 1.0, 2.0)
Z_MAIN_LAMBDA = 1.0

# ---------------------------------------------------------------------------------------------- variants


@dataclass(frozen=True)
class Variant:
    """One row of the experiments.

    relevance: "head" (the ``train`` run's f_rel), "dense" (frozen-encoder cosine), "bm25", "hybrid" (BM25 and
      cosine fused per query: ``riskrank_jax.retrieve.hybrid``, weight chosen on each fold's training queries) or
      "rerank" (the correction reranker of ``riskrank_jax.model.rerank`` on top of the hybrid first stage) or
      "ft_hybrid" (the hybrid over the ``tuned`` run's fine-tuned encoder, gated against the frozen one per model:
      ``riskrank_jax.experiments.tuned``), "ce_rerank" (the ``cross_encoder`` run's cross-encoders reranking the
      hybrid's top candidates, gated: ``riskrank_jax.experiments.cross``) or "reranker" (the general-purpose
      reranker ``reranker``, a key of ``model.cross_encoder.BASELINE_RERANKERS``, over the dense top-100).
    tool_text: what a tool's text is: "description" (the paper's) or "named" (its name split into words, then
      the description — what ``riskrank-jax rank`` embeds for your own tools).
    first_stage: where candidate mode takes its candidates and the order of the rest of the pool: "dense" (the
      paper's) or "hybrid".
    lambdas: the variant's own λ grid (None: the sweep's). The hybrid and rerank families score on a z-scale
      (per-query standard deviations), so their λ has other units than the head's.
    risk: score the penalty uses: "head" (the run's f_risk), "risk_only" (the risk head trained alone on the
      registry), "ft_risk" (that head retrained on the tuned encoder's tool vectors) or None (no penalty).
    lam: None = the sweep's main λ; a number fixes λ. lambda_sweep: also evaluated at every λ of the grid.
    trained_at_lambda: the run holds one model per λ and model λ_l is scored at λ_l (λ-aware training).
    graph: None, "train" (ToolGraph with co-occurrence from the training queries, one per fold) or
      "registry" (no co-occurrence edges: nothing but the registry is known). edge_types: a subset of the
      edge types (None: all, as built).
    candidates: rerank the dense top-``n_candidates`` only; the rest of the pool follows in dense order.
    intent: the penalty follows what each request asks for (``retrieve.intent``: λ·f_risk times the exposure
      weight of the tool's effects against the request's needs; the ``intent`` run's model per fold).
    tables: where the row appears: "main" (Tables 2/3/5), "stress" (Table 7), "exposure" (Table 6),
      "edges" (Table 4).
    opt_in: left out of a sweep unless named (or the keyword "ce" is given): the cross-encoder rows, which cost
      tens of minutes per benchmark on a CPU.
    paper_row: the paper's row this reproduces (None: beyond the paper). paper: the paper's numbers, keyed
      "<benchmark>" or "<benchmark>/<split>" (main table), "<benchmark>/context", "<benchmark>/stress",
      "<benchmark>/lambda=<λ>".
    """

    name: str
    family: str
    description: str
    relevance: str = "head"
    tool_text: str = "description"
    first_stage: str = "dense"
    lambdas: tuple[float, ...] | None = None
    train: str | None = "core"
    risk: str | None = "head"
    lam: float | None = None
    lambda_sweep: bool = False
    trained_at_lambda: bool = False
    graph: str | None = None
    edge_types: tuple[str, ...] | None = None
    candidates: bool = False
    rule_filter: bool = False
    reranker: str | None = None
    intent: bool = False
    opt_in: bool = False
    tables: tuple[str, ...] = ("main",)
    paper_row: str | None = None
    paper: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self):
        if self.relevance not in RELEVANCES:
            raise ValueError(f"{self.name}: relevance must be one of {', '.join(RELEVANCES)}")
        if (self.relevance == "reranker") != (self.reranker in BASELINE_RERANKERS):
            raise ValueError(f"{self.name}: relevance 'reranker' takes a reranker of {sorted(BASELINE_RERANKERS)}")
        if self.tool_text not in ("description", "named") or self.first_stage not in ("dense", "hybrid"):
            raise ValueError(f"{self.name}: tool_text must be description|named, first_stage dense|hybrid")
        if self.relevance in TRAINED_RELEVANCES and self.train not in TRAINING_RUNS:
            raise ValueError(f"{self.name}: needs a training run, one of {sorted(TRAINING_RUNS)}")
        if self.graph not in (None, "train", "registry"):
            raise ValueError(f"{self.name}: graph must be None, 'train' or 'registry'")

    @property
    def faithful(self) -> bool:
        """A row of the paper (as opposed to beyond it)."""
        return self.paper_row is not None

    def runs(self) -> set[str]:
        """Training runs this variant needs."""
        out = {self.train} if (self.relevance in TRAINED_RELEVANCES or self.risk in ("head", "ft_risk")) else set()
        return out | ({"risk_only"} if self.risk == "risk_only" else set()) | ({"intent"} if self.intent else set())

    def spec(self) -> tuple:
        """What determines the variant's rankings (two variants with equal specs rank identically)."""
        return (self.relevance, self.tool_text, self.first_stage, self.lambdas, self.train if self.runs() else None,
                self.risk, self.lam, self.lambda_sweep, self.trained_at_lambda, self.graph, self.edge_types,
                self.candidates, self.rule_filter, self.reranker, self.intent)

    def paper_numbers(self, key: str) -> Mapping[str, float]:
        return self.paper.get(key, {})

    def rank_config(self, *, lam: float, alpha: float, k: int, n_candidates: int):
        """The RankConfig a deployed Ranker of this variant uses (its head: one model of the run)."""
        first = "dense" if self.candidates else ("bm25" if self.relevance == "bm25" else "none")
        return RankConfig(lam=(self.lam if self.lam is not None else lam) if self.risk else 0.0,
                          alpha=alpha if self.graph else 0.0, k=k, first_stage=first,
                          n_candidates=n_candidates if self.candidates else None, rule_filter=self.rule_filter,
                          intent=self.intent)


def _core(name, desc, **kw) -> Variant:
    return Variant(name, "core", desc, **kw)


_BEYOND = "beyond the paper"
VARIANTS: tuple[Variant, ...] = (
    Variant("bm25", "baseline", "BM25 over tool descriptions", relevance="bm25", train=None, risk=None,
            tables=("main", "stress", "exposure"), paper_row="BM25 (Table 6)"),
    Variant("dense", "baseline", "frozen-encoder cosine", relevance="dense", train=None, risk=None,
            tables=("main", "stress", "exposure"), paper_row="ToolRet-BGE (frozen encoder, cosine)",
            paper={"ultratool": {"ndcg@5": .429, "rvr@5": .1758, "srr@5": .0784},
                   "ultratool/stress": {"rvr@5": .393, "srr@5": .233}}),
    Variant("rule_only", "baseline", "rule filter on the dense ranking", relevance="dense", train=None, risk=None,
            rule_filter=True, tables=("main", "stress", "exposure"), paper_row="rule-only on dense (Table 6)"),
    _core("rel_only", "relevance head only (λ = 0)", lam=0.0, tables=("main", "stress"),
          paper_row="relevance head only (λ = 0)",
          paper={"ultratool": {"ndcg@5": .558, "rvr@5": .188}, "ultratool/context": {"rvr@5_high_risk": .472}}),
    _core("core", "relevance + risk heads", lambda_sweep=True, tables=("main", "stress"),
          paper_row="Core (rel + risk head)",
          paper={"ultratool": {"ndcg@5": .5508, "sndcg@5": .5517, "mrr": .6153, "rvr@5": .1384, "srr@5": .0631},
                 "sealtools": {"ndcg@5": .8326, "rvr@5": .0098},
                 "sealtools/test_out": {"ndcg@5": .7931, "rvr@5": .0152},
                 "ultratool/context": {"rvr@5_high_risk": .377},
                 "ultratool/lambda=0.0": {"rvr@5": .188, "ndcg@5": .558},
                 "ultratool/lambda=0.2": {"rvr@5": .100, "ndcg@5": .526}}),
    _core("core_graph", "core + ToolGraph smoothing", lambda_sweep=True, graph="train",
          tables=("main", "stress", "exposure"), paper_row="Core + Graph",
          paper={"ultratool": {"ndcg@5": .5624, "sndcg@5": .5651, "mrr": .6253, "rvr@5": .1449, "srr@5": .0619},
                 "ultratool/lambda=0.0": {"rvr@5": .190, "ndcg@5": .569},
                 "ultratool/lambda=0.2": {"rvr@5": .111, "ndcg@5": .544}}),
    _core("core_graph_rule", "core + graph + rule filter", lambda_sweep=True, graph="train", rule_filter=True,
          tables=("main", "stress", "exposure"), paper_row="Core + Graph + Rule",
          paper={"ultratool": {"ndcg@5": .5215, "sndcg@5": .5351, "mrr": .6120, "rvr@5": .0727, "srr@5": .0191},
                 "sealtools": {"ndcg@5": .8270, "rvr@5": .0062},
                 "sealtools/test_out": {"ndcg@5": .7847, "rvr@5": .0109},
                 "ultratool/context": {"rvr@5_high_risk": .175},
                 "ultratool/stress": {"rvr@5": .111, "srr@5": .042}}),
    Variant("cand100_core", "candidates", "core on the dense top-100", candidates=True,
            paper_row="Core, top-100 candidates", paper={"ultratool": {"ndcg@5": .609}}),
    Variant("cand100_core_graph", "candidates", "core + graph on the dense top-100", candidates=True, graph="train",
            paper_row="Core + Graph, top-100 candidates", paper={"ultratool": {"ndcg@5": .621}}),
    Variant("cand100_core_graph_rule", "candidates", "core + graph + rule on the dense top-100", candidates=True,
            graph="train", rule_filter=True, paper_row="Core + Graph + Rule, top-100 candidates",
            paper={"ultratool": {"ndcg@5": .573}}),
    *(Variant(name, "edges", f"core + graph with {name.replace('_', ' ')} edges", graph=None if not types else "train",
              edge_types=types or None, tables=("edges",), paper_row=f"edge types: {name}")
      for name, types in (("no_graph", ()), ("cooccur", ("cooccur",)), ("semantic", ("semantic",)),
                          ("permission", ("permission",)), ("risk_cooccur", ("risk_cooccur",)),
                          ("all_four", EDGE_TYPES))),
    Variant("core_lambda_aware", "lambda_aware", "λ-aware training (new experiment): model λ scored at λ",
            train="lambda_aware", lambda_sweep=True, trained_at_lambda=True),
    Variant("core_plus", "core_plus", f"{_BEYOND}: interaction head + 2 hard / 3 uniform negatives",
            train="core_plus"),
    Variant("core_plus_graph", "core_plus", _BEYOND, train="core_plus", graph="train"),
    Variant("core_plus_graph_rule", "core_plus", _BEYOND, train="core_plus", graph="train", rule_filter=True,
            tables=("main", "stress")),
    Variant("zeroshot_core", "zeroshot", f"{_BEYOND}: no training queries, cos − λ·f_risk", relevance="dense",
            train=None, risk="risk_only"),
    Variant("zeroshot_core_graph", "zeroshot", f"{_BEYOND} (graph without co-occurrence edges)", relevance="dense",
            train=None, risk="risk_only", graph="registry"),
    Variant("zeroshot_core_graph_rule", "zeroshot", _BEYOND, relevance="dense", train=None, risk="risk_only",
            graph="registry", rule_filter=True, tables=("main", "stress")),
    # ---- beyond the paper: a first stage that transfers to unseen tools, and a correction on top of it
    Variant("hybrid", "baseline", "BM25 + cosine fused per query (z-score sum), tool descriptions",
            relevance="hybrid", train=None, risk=None, tables=("main", "exposure")),
    Variant("hybrid_named", "baseline", "hybrid over name words + description", relevance="hybrid",
            tool_text="named", train=None, risk=None, tables=("main", "exposure")),
    *(Variant(f"hybrid_risk{suffix}", "hybrid_risk", f"{_BEYOND}: hybrid (named) − λ·f_risk{what}, no training "
              "queries needed", relevance="hybrid", tool_text="named", first_stage="hybrid", train=None,
              risk="risk_only", lam=Z_MAIN_LAMBDA, lambdas=Z_LAMBDAS, lambda_sweep=True, **kw)
      for suffix, what, kw in (("", "", {}), ("_graph", " + registry graph", {"graph": "registry"}),
                               ("_graph_rule", " + registry graph + rule filter",
                                {"graph": "registry", "rule_filter": True, "tables": ("main", "stress")}),
                               ("_intent", ", exposure by intent", {"intent": True}),
                               ("_graph_intent", " + registry graph, exposure by intent",
                                {"graph": "registry", "intent": True}))),
    *(Variant(f"{prefix}rerank_risk{suffix}", "rerank", f"{_BEYOND}: correction reranker over the hybrid − "
              f"λ·f_risk{what}", relevance="rerank", tool_text="named", first_stage="hybrid", train="rerank",
              risk="risk_only", lam=Z_MAIN_LAMBDA, lambdas=Z_LAMBDAS, lambda_sweep=True, **kw)
      for prefix, suffix, what, kw in (
          ("", "", "", {}),
          ("", "_graph", " + ToolGraph", {"graph": "train"}),
          ("", "_graph_rule", " + ToolGraph + rule filter", {"graph": "train", "rule_filter": True,
                                                             "tables": ("main", "stress", "exposure")}),
          ("", "_graph_intent", " + ToolGraph, exposure by intent", {"graph": "train", "intent": True}),
          ("cand100_", "", ", hybrid top-100 candidates", {"candidates": True}),
          ("cand100_", "_graph_rule", ", hybrid top-100 + ToolGraph + rule filter",
           {"candidates": True, "graph": "train", "rule_filter": True}))),
    # ---- beyond the paper: the encoder itself fine-tuned per seed x fold, gated against the frozen one
    *(Variant(f"ft_hybrid_risk{suffix}", "ft_hybrid", f"{_BEYOND}: hybrid over the tuned encoder (gated) − "
              f"λ·f_risk (retrained on it){what}", relevance="ft_hybrid", tool_text="named", first_stage="hybrid",
              train="tuned", risk="ft_risk", lam=Z_MAIN_LAMBDA, lambdas=Z_LAMBDAS, lambda_sweep=True, **kw)
      for suffix, what, kw in (("", "", {}), ("_graph", " + ToolGraph", {"graph": "train"}),
                               ("_graph_rule", " + ToolGraph + rule filter",
                                {"graph": "train", "rule_filter": True, "tables": ("main", "stress", "exposure")}),
                               ("_rule", " + rule filter", {"rule_filter": True}),
                               ("_graph_intent", " + ToolGraph, exposure by intent",
                                {"graph": "train", "intent": True}))),
    # ---- beyond the paper, opt-in: a cross-encoder second stage, and the paper's general-purpose rerankers
    *(Variant(f"ce_rerank_risk{suffix}", "ce", f"{_BEYOND}: cross-encoder (trained, gated) over the hybrid top 20 − "
              f"λ·f_risk{what}", relevance="ce_rerank", tool_text="named", first_stage="hybrid", train="cross_encoder",
              risk="risk_only", lam=Z_MAIN_LAMBDA, lambdas=Z_LAMBDAS, lambda_sweep=True, opt_in=True, **kw)
      for suffix, what, kw in (("", "", {}), ("_graph_rule", " + ToolGraph + rule filter",
                                               {"graph": "train", "rule_filter": True}))),
    *(Variant(name, "reranker_baseline", f"general-purpose reranker {hub_id} over the dense top-100", relevance="reranker",
              reranker=name, train=None, risk=None, opt_in=True, paper_row=f"{name} (general-purpose reranker)")
      for name, hub_id in BASELINE_RERANKERS.items()),
)
BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}
assert len(BY_NAME) == len(VARIANTS), "variant names must be unique"


def select_variants(names=None) -> tuple[Variant, ...]:
    """The variants named (in declaration order); None or () = all but the opt-in ones. Keywords: "paper", the
    paper's rows (``faithful``, opt-in ones only when named); "all", every row but the opt-in ones; "ce", the
    opt-in cross-encoder rows. Unknown names raise ValueError listing the known ones."""
    if not names:
        names = ("all",)
    wanted = set()
    for n in names:
        if n == "paper":
            wanted |= {v.name for v in VARIANTS if v.faithful and not v.opt_in}
        elif n == "all":
            wanted |= {v.name for v in VARIANTS if not v.opt_in}
        elif n == "ce":
            wanted |= {v.name for v in VARIANTS if v.opt_in}
        elif n in BY_NAME:
            wanted.add(n)
        else:
            raise ValueError(f"unknown variant {n!r}; choose from 'paper', 'all', 'ce', {', '.join(BY_NAME)}")
    return tuple(v for v in VARIANTS if v.name in wanted)


def main_rows() -> list[str]:
    """Names of the main-table rows, in table order."""
    return [v.name for v in VARIANTS if "main" in v.tables]


__all__ = ["Variant", "TrainingRun", "TRAINING_RUNS", "VARIANTS", "BY_NAME", "select_variants", "main_rows"]
