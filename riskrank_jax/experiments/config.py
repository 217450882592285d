"""The sweep's configuration: one nested tree of frozen dataclasses for a sweep of one benchmark.

    cfg = default_config("sealtools")                       # per-benchmark leaves (α, main split), derived leaves
    cfg = default_config("demo", {"train.epochs": "5"})     # leaves by dotted path (values as text or values);
                                                            # risk_head.epochs follows: 15
    cfg.to_dict(), cfg.result_key()                         # results.json "config"; what the run key hashes

Sub-configs reuse the stages' own leaf dataclasses (``TrainConfig``, ``RiskHeadConfig``, ``RerankConfig``,
``GraphConfig``); the sweep-only ones are declared here. Built this way so that one value names everything a
sweep's results depend on, every leaf is reachable (and settable) by one path, no defaults live in globals, and
every value computed from others is computed in one place (``default_config``), whichever spelling set its inputs.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from riskrank_jax.errors import ConfigError
from riskrank_jax.graph.tool_graph import GraphConfig
from riskrank_jax.model.cross_encoder import CrossEncoderConfig
from riskrank_jax.model.encoder_tune import TuneConfig
from riskrank_jax.model.intent_model import IntentConfig
from riskrank_jax.model.rerank import RerankConfig
from riskrank_jax.model.risk_head import RiskHeadConfig
from riskrank_jax.model.train_config import TrainConfig
from riskrank_jax.paths import default_checkpoint_dir
from riskrank_jax.rank.ranker import RankConfig
from riskrank_jax.rank.rule_filter import RuleFilterCaps
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET

# per-benchmark leaves, set before any override: smoothing α, the split of the main tables (None: none) and, for
# UltraTool, one tuning epoch (it tunes 15 encoders, 3 seeds x 5 folds: one epoch each keeps its sweep within the
# time budget); a benchmark not named here (a test's injected one) gets UNNAMED_BENCHMARK_LEAVES
BENCHMARK_LEAVES = {"ultratool": {"eval.alpha": 0.2, "data.main_split": "test", "tune.epochs": 1},
                    "sealtools": {"eval.alpha": 0.02, "data.main_split": "test_in"},
                    "demo": {"eval.alpha": 0.2, "data.main_split": "test"},
                    "livemcpbench": {"eval.alpha": 0.2, "data.main_split": "test"}}
UNNAMED_BENCHMARK_LEAVES = {"eval.alpha": 0.2, "data.main_split": None}
# leaves computed from other leaves unless set themselves: {path: rule}; the zero-shot risk heads train 3x as many
# epochs as the dual heads (a smaller model on one loss, so 3x the passes)
DERIVED_LEAVES = {"risk_head.epochs": lambda cfg: 3 * cfg.train.epochs}
# leaves that never change results (where files live, how much memory a step may use)
NON_RESULT_LEAVES = ("data.data_dir", "runtime.memory_budget", "runtime.cache_dir", "runtime.checkpoint_dir")
# leaves of a reused dataclass that the sweep does not read, so setting them would change nothing: {path: why}
UNUSED_LEAVES = {"risk_head.seed": "the sweep trains one risk head per seed of `seeds`; set seeds instead"}


@dataclass(frozen=True)
class DataConfig:
    """benchmark: its name; data_dir: root of the real benchmarks (None: $RISKRANK_DATA); main_split: the split
    of the main tables (None: none)."""

    benchmark: str = "demo"
    data_dir: str | None = None
    main_split: str | None = "test"


@dataclass(frozen=True)
class EncoderConfig:
    """path: a named encoder of ``encode.families`` ("mpnet", "use", "e5", "minilm+use", ...) or a local HF-format
    BERT sentence encoder directory (None: the embedded all-MiniLM-L6-v2)."""

    path: str | None = None


@dataclass(frozen=True)
class EvalConfig:
    """What is evaluated: the λ grid and the main tables' λ, smoothing α, the metrics' cut-off k, the candidates
    of candidate mode, the stress queries' number, the variants (names or "paper"; () = all declared) and
    whether the smoothing-throughput benchmark runs; the ``*_intent`` rows' intent weights."""

    k: int = 5
    lambdas: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2)
    main_lambda: float = 0.1
    alpha: float = 0.2
    n_candidates: int = 100
    stress_n: int = 30
    variants: tuple[str, ...] = ()
    smoothing_benchmark: bool = True
    # the ``*_intent`` rows' exposure weight (``retrieve.intent``): by default the Ranker's, so stated once
    intent_strength: float = RankConfig.intent_strength
    intent_relief: float = RankConfig.intent_relief
    intent_agreement: float = RankConfig.intent_agreement
    intent_specific: float = RankConfig.intent_specific


@dataclass(frozen=True)
class McpConfig:
    """The LiveMCPBench sweep (``experiments.livemcp``): the benchmark agent's top_servers / top_tools (its README's
    TOP_SERVERS = 5, TOP_TOOLS = 3); the weights of the Ranker's request stages in its rows (server_weight,
    sibling_weight, step_weight: by default ``rank.ranker.RankConfig``'s, so they are stated once); risk_labels:
    the labelled tool corpus, relative to the repository root ("" = none: RVR@5 is then "not labelled");
    lambdas × alphas: the grid of the sensitivity table of the rank default's row; cv_folds: the folds over tasks
    of the one row that chooses its weights on the tasks (``ranker_server_steps_cv``); encoders / adapt: the opt-in
    rows ``enc_<name>`` (``experiments.livemcp.ENCODER_ROWS``) and ``ranker_server_intent_adapted``."""

    top_servers: int = 5
    top_tools: int = 3
    server_weight: float = RankConfig.server_weight
    sibling_weight: float = RankConfig.sibling_weight
    step_weight: float = RankConfig.step_weight
    risk_labels: str = "experiments/mcp_risk/corpus/labels.jsonl"
    lambdas: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0)
    alphas: tuple[float, ...] = (0.0, 0.2)
    cv_folds: int = 5
    # opt-in rows (each needs its package, docs/encoders.md): the rank default's row with each named encoder
    # (``encode.families``: "mpnet", "use", "e5", fusions such as "minilm+use"), and with the registry adapted
    encoders: tuple[str, ...] = ()
    adapt: bool = False


@dataclass(frozen=True)
class RuntimeConfig:
    """How a sweep runs, never what it computes: memory budget (bytes), embedding cache and checkpoint roots."""

    memory_budget: int = DEFAULT_MEMORY_BUDGET
    cache_dir: str | None = None
    checkpoint_dir: str | None = None

    def checkpoint_root(self) -> Path:
        """The checkpoint root as an absolute path: ``checkpoint_dir``, else the repository's checkpoints/."""
        return Path(self.checkpoint_dir).resolve() if self.checkpoint_dir else default_checkpoint_dir()


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep of one benchmark depends on. ``train``: the dual heads' run (the λ-aware and core_plus
    runs derive from it, ``experiments.variants``); ``risk_head``: the zero-shot risk heads; ``rerank``: the
    correction reranker; ``tune``: the encoder fine-tuning of the ``ft_*`` rows; ``cross_encoder``: the opt-in ``ce_*`` rows;
    ``graph``: the ToolGraph's thresholds and weights; ``intent``: the intent models of the ``*_intent`` rows."""

    data: DataConfig = field(default_factory=DataConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    seeds: tuple[int, ...] = (42, 123, 777)
    train: TrainConfig = field(default_factory=TrainConfig)
    risk_head: RiskHeadConfig = field(default_factory=RiskHeadConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)
    cross_encoder: CrossEncoderConfig = field(default_factory=CrossEncoderConfig)
    intent: IntentConfig = field(default_factory=IntentConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    rule_filter: RuleFilterCaps = field(default_factory=RuleFilterCaps)  # the rule filter's caps (``rank.rule_filter``)
    eval: EvalConfig = field(default_factory=EvalConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    mcp: McpConfig = field(default_factory=McpConfig)  # the LiveMCPBench sweep only

    def __post_init__(self):
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and non-empty, got {list(self.seeds)}")

    @property
    def benchmark(self) -> str:
        return self.data.benchmark

    def to_dict(self) -> dict:
        """The whole tree as JSON-able nested dicts (results.json "config")."""
        return dataclasses.asdict(self)

    def result_key(self) -> dict:
        """``to_dict`` minus the leaves that never change results (``NON_RESULT_LEAVES``): what the run key hashes."""
        d = self.to_dict()
        if self.benchmark != "livemcpbench":  # read by that sweep alone: other benchmarks' run keys stay as they were
            d.pop("mcp")
        for path in NON_RESULT_LEAVES:
            section, name = path.split(".")
            d[section].pop(name)
        return d


def default_config(benchmark: str = "demo", *overrides: dict[str, object]) -> SweepConfig:
    """The sweep's config of ``benchmark``: its ``BENCHMARK_LEAVES``, then each {leaf path: value} of
    ``overrides`` in turn (a command's flags, then its --set leaves: the later wins), then every
    ``DERIVED_LEAVES`` leaf that no override set, computed from the result. The one place a value is derived, so
    that ``--epochs 5`` and ``--set train.epochs=5`` give one tree. Raises ConfigError naming a bad path."""
    cfg = with_overrides(SweepConfig(data=DataConfig(benchmark=benchmark)),
                         BENCHMARK_LEAVES.get(benchmark, UNNAMED_BENCHMARK_LEAVES))
    given = set()
    for leaves in overrides:
        cfg = with_overrides(cfg, leaves)
        given |= set(leaves)
    derived = {path: rule(cfg) for path, rule in DERIVED_LEAVES.items() if path not in given}
    return with_overrides(cfg, derived)


def leaf_paths(tree=None, prefix: str = "") -> dict[str, object]:
    """{dotted path: value} of every leaf of a config tree (default: ``SweepConfig()``), in declaration order."""
    tree = SweepConfig() if tree is None else tree
    out = {}
    for f in dataclasses.fields(tree):
        value = getattr(tree, f.name)
        if dataclasses.is_dataclass(value):
            out.update(leaf_paths(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return {path: value for path, value in out.items() if path not in UNUSED_LEAVES}


def with_overrides(cfg: SweepConfig, overrides: dict[str, object]) -> SweepConfig:
    """``cfg`` with leaves replaced: {"train.epochs": "5" or 5, ...}, nothing derived (``default_config`` derives).
    Text is parsed by the leaf's type (tuples as comma lists, bools true/false, "none" for an optional leaf).
    Raises ConfigError naming the path."""
    for path, value in overrides.items():
        if path in UNUSED_LEAVES:
            raise ConfigError(f"{path} cannot be set: {UNUSED_LEAVES[path]}")
        cfg = _replace_leaf(cfg, path.split("."), value, path)
    return cfg


def _replace_leaf(node, parts: list[str], value, path: str):
    names = {f.name: f for f in dataclasses.fields(node)}
    field_ = names.get(parts[0])
    child = getattr(node, parts[0]) if field_ is not None else None
    if field_ is None or dataclasses.is_dataclass(child) != (len(parts) > 1):
        raise ConfigError(_unknown_path_message(path))
    if len(parts) > 1:
        new = _replace_leaf(child, parts[1:], value, path)
    else:
        new = parse_leaf(typing.get_type_hints(type(node))[parts[0]], value, path)
    try:
        return dataclasses.replace(node, **{parts[0]: new})
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}={value!r}: {e}") from None


def _unknown_path_message(path: str) -> str:
    leaves = leaf_paths()
    last = path.split(".")[-1]
    near = [p for p in leaves if p.split(".")[-1] == last or p.startswith(path + ".")]
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return f"unknown config path {path!r}{hint} (settable leaves: {', '.join(leaves)})"


def parse_leaf(hint, value, path: str):
    """``value`` (text, or already a value) as the type ``hint`` of the leaf at ``path``; ConfigError if not."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null")):
            return None
        (hint,) = [a for a in args if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        items = value if not isinstance(value, str) else [s for s in value.split(",") if s.strip()]
        return tuple(parse_leaf(typing.get_args(hint)[0], item, path) for item in items)
    if not isinstance(value, str):
        return _checked_value(hint, value, path)
    text = value.strip()
    try:
        if hint is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        return hint(text) if hint in (int, float, str) else _checked_value(hint, text, path)
    except ValueError as e:
        raise ConfigError(f"bad value for {path}: {value!r} is not a valid {getattr(hint, '__name__', hint)} ({e})") \
            from None


def _checked_value(hint, value, path: str):
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"bad value for {path}: {value!r} is not a valid {hint.__name__}")
    return value


__all__ = ["SweepConfig", "DataConfig", "EncoderConfig", "EvalConfig", "RuntimeConfig", "McpConfig",
           "ConfigError", "BENCHMARK_LEAVES", "DERIVED_LEAVES", "NON_RESULT_LEAVES", "default_config",
           "leaf_paths", "with_overrides", "parse_leaf"]
