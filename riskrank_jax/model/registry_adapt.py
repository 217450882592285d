"""Relevance adapted to one registry without any log: the encoder's top layers tuned on pairs that the registry's
own texts make, kept only when they beat the frozen encoder on held-out pairs of that registry.

    result = adapt_encoder(encoder, tool_names, tool_texts, AdaptConfig(), cache_dir=None)
    result.encoder       # the tuned encoder when it won on the held-out pairs, else ``encoder`` itself
    result.report        # what was measured: pairs, held-out NDCG@5 frozen vs tuned, seconds, used or not

Pairs (``pseudo_pairs``), one per tool and kind, each a (request-like text, the tool's text without it):

    sentence   the first sentence of the description   ->  name words, the rest of the description, parameters
    name       the name's words (and title)            ->  the description and parameters

A description sentence reads most like a request; the name's words are what separates siblings (list_X_bases,
list_X_sources). Each tool has one text per kind (its *view*); the pairs of a held-out 20 % of the tools
(``model.heldout.heldout_split`` on tools, so no held-out tool's query is trained on) score the frozen and the
tuned encoder: NDCG@5 of each held-out query against every tool's view. Training is ``model.encoder_tune``'s (the
top ``TuneConfig.layers`` layers over cached lower-layer states, each query's hard negatives the frozen encoder's
best other tools, not the same tool's other view; the epoch with the best held-out score kept). The tuned encoder is
used when it beats the frozen one on the held-out pairs by ``AdaptConfig.margin``.

Cached by the registry's fingerprint, the base encoder and the config (``<cache root>/adapted/<key>/``:
``report.json`` and, when used, the tuned encoder as a Hugging Face directory ``encoder/``), so a registry is
adapted once. The tuned encoder names the base encoder as its ``risk_encoder``: the shipped risk model keeps
reading the vectors it was trained on, so adapting relevance never changes a tool's risk.

Why no log: a new registry has none, and the information that separates its siblings is in its own texts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.errors import RiskRankError
from riskrank_jax.metrics import ndcg_at_k
from riskrank_jax.model.heldout import heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.model.text_states import TextStates
from riskrank_jax.model.tune_config import TuneConfig
from riskrank_jax.model.tuned_encoder import TunedEncoder, embed_states, save_tuned_encoder
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.permissions import split_identifier

PAIR_KINDS = ("sentence", "name")
REPORT_VERSION = 1
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@dataclass(frozen=True)
class AdaptConfig:
    """kinds: the pair kinds (``PAIR_KINDS``); min_tools: a registry with fewer tools is not adapted (too few pairs
    to train and hold out); heldout_fraction: the tools whose pairs only score; margin: the held-out NDCG@5 the
    tuned encoder must gain over the frozen one to be used; seed: the split and the batch schedule; tune: the
    training (``model.tune_config.TuneConfig``; the ``ft_*`` rows' settings)."""

    kinds: tuple[str, ...] = PAIR_KINDS
    min_tools: int = 40
    heldout_fraction: float = 0.2
    margin: float = 0.005
    seed: int = 0
    tune: TuneConfig = field(default_factory=TuneConfig)

    def __post_init__(self):
        if not self.kinds or set(self.kinds) - set(PAIR_KINDS):
            raise RiskRankError(f"AdaptConfig.kinds must be a non-empty subset of {PAIR_KINDS}, got {self.kinds}")
        if not 0 < self.heldout_fraction < 1 or self.min_tools < 10:
            raise RiskRankError("AdaptConfig: heldout_fraction must lie in (0, 1) and min_tools be >= 10")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "kinds": list(self.kinds), "tune": self.tune.to_dict()}


class PseudoPairs(NamedTuple):
    """queries: the request-like texts [Q]; views: the tools' texts the queries are matched against [V]; gold int
    [Q]: each query's view; tool_of_view int [V] / tool_of_query int [Q]: the tool each belongs to; kind [Q]."""

    queries: list
    views: list
    gold: np.ndarray
    tool_of_view: np.ndarray
    tool_of_query: np.ndarray
    kind: list


class Adaptation(NamedTuple):
    """encoder: the encoder to rank this registry with (tuned, or the one given); report: what was measured."""

    encoder: object
    report: dict


def tool_fields(name: str, text: str) -> tuple[str, str, str]:
    """(name words, description, parameters) of a tool text in ``registry.tool.tool_text``'s layout ("<name
    words>: <title>. <description> Parameters: ..."), or of a plain description (a benchmark's tool text)."""
    words = split_identifier(name).strip() or name
    body = text.strip()
    head, sep, rest = body.partition(": ")
    if sep and split_identifier(head).strip() == words:
        body = rest
    elif split_identifier(body.rstrip(":")).strip() == words:  # "<name words>:" alone: no description
        body = ""
    desc, _, params = body.partition("Parameters: ")
    return words, desc.strip(), params.strip()


def pseudo_pairs(tool_names: Sequence[str], tool_texts: Sequence[str], kinds=PAIR_KINDS) -> PseudoPairs:
    """The registry's pairs (module doc): per tool and kind one query and one view; a pair whose query or view
    would be empty (a tool without a description) is left out."""
    queries, views, gold, tov, toq, kind = [], [], [], [], [], []
    for t, (name, text) in enumerate(zip(tool_names, tool_texts)):
        words, desc, params = tool_fields(name, text)
        params_part = f" Parameters: {params}" if params else ""
        sentences = [s.strip() for s in _SENTENCE_END.split(desc) if s.strip()]
        for k in kinds:
            if k == "sentence":
                if not sentences:
                    continue
                query, view = sentences[0], f"{words}: {' '.join(sentences[1:])}{params_part}".strip()
            else:
                query, view = words, f"{desc}{params_part}".strip()
            if not query or not view or query == view:
                continue
            queries.append(query)
            gold.append(len(views))
            views.append(view)
            tov.append(t)
            toq.append(t)
            kind.append(k)
    return PseudoPairs(queries, views, np.asarray(gold, np.int64), np.asarray(tov, np.int64),
                       np.asarray(toq, np.int64), kind)


def cache_key(fingerprint: str, encoder_id: str, config: AdaptConfig) -> str:
    """The cache folder's name: the registry fingerprint's head and a hash of the base encoder and the config."""
    h = hashlib.sha256(json.dumps([fingerprint, encoder_id, config.to_dict(), REPORT_VERSION],
                                  sort_keys=True).encode()).hexdigest()
    return f"{fingerprint[:16]}-{h[:16]}"


def _ndcg5(q_vec, v_vec, gold, same_tool) -> float:
    """NDCG@5 of queries [q, d] against views [V, d], each query's one gold view; a view of the query's own tool
    that is not its gold (its other kind) is left out of the ranking (same_tool bool [q, V])."""
    scores = np.where(same_tool, -np.inf, q_vec @ v_vec.T)
    scores[np.arange(len(gold)), gold] = (q_vec * v_vec[gold]).sum(1)
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    return float(np.asarray(ndcg_at_k(ids, gold[:, None], k=5)).mean())


def adapt_encoder(encoder, tool_names: Sequence[str], tool_texts: Sequence[str], fingerprint: str,
                  config: AdaptConfig = AdaptConfig(), *, cache_dir=None, progress: bool = True) -> Adaptation:
    """The registry's adapted encoder (module doc), from the cache when this registry, encoder and config were
    adapted before. ``encoder``: a BERT-family ``encode.encoder.Encoder`` (its top layers are tuned); any other
    encoder (a named family, a fusion) is returned as it is, with a report saying why."""
    base_id = str(encoder.model_id)
    report = {"version": REPORT_VERSION, "tools": len(tool_names), "base_encoder": base_id,
              "config": config.to_dict(), "used": False}
    if not hasattr(encoder, "lower_states"):
        return Adaptation(encoder, {**report, "reason": "only a BERT-family encoder's top layers can be tuned"})
    if len(tool_names) < config.min_tools:
        return Adaptation(encoder, {**report, "reason": f"fewer than {config.min_tools} tools"})
    folder = resolve_cache_dir(cache_dir) / "adapted" / cache_key(fingerprint, base_id, config)
    cached = _cached(folder, encoder, cache_dir)
    if cached is not None:
        return cached
    t0 = time.perf_counter()
    pairs = pseudo_pairs(tool_names, tool_texts, config.kinds)
    train_tools, held_tools = heldout_split(np.arange(len(tool_names)), config.heldout_fraction, config.seed)
    held = np.flatnonzero(np.isin(pairs.tool_of_query, held_tools))
    train = np.flatnonzero(~np.isin(pairs.tool_of_query, held_tools))
    report.update(pairs=len(pairs.queries), train_pairs=int(train.size), heldout_pairs=int(held.size),
                  kinds={k: pairs.kind.count(k) for k in config.kinds})
    if train.size < config.tune.batch_size or held.size < 5:
        return _store(folder, encoder, None, {**report, "reason": "too few pairs"}, cache_dir)
    tune = config.tune
    texts = pairs.views + pairs.queries
    n_views = len(pairs.views)
    view_rows, query_rows = np.arange(n_views), n_views + np.arange(len(pairs.queries))
    states = TextStates.build(encoder, texts, encoder.shape.num_layers - tune.layers, progress=progress)
    same_tool = pairs.tool_of_query[:, None] == pairs.tool_of_view[None, :]
    frozen = embed_states(TunedEncoder.untrained(encoder, tune.layers), encoder, states, np.arange(len(texts)))
    f_views, f_queries = frozen[:n_views], frozen[n_views:]
    # hard negatives: the frozen encoder's best views of other tools (never the same tool's other view)
    scores = np.where(same_tool, -np.inf, f_queries @ f_views.T)
    hard = np.asarray(best_non_gold(np.where(np.isfinite(scores), scores, -1e9), pairs.gold[:, None],
                                    tune.hard_pool))
    gold_held, same_held = pairs.gold[held], same_tool[held]
    frozen_score = _ndcg5(f_queries[held], f_views, gold_held, same_held)

    def heldout_ndcg(tuned) -> float:
        v = embed_states(tuned, encoder, states, np.concatenate([view_rows, query_rows[held]]))
        return _ndcg5(v[n_views:], v[:n_views], gold_held, same_held)

    # deferred: the training run's modules (orbax among them) only when a registry is tuned, not on a cache hit
    from riskrank_jax.model.encoder_tune import tune_encoder

    tuned = tune_encoder(encoder, states, query_rows, view_rows, pairs.gold[:, None], train, hard, config.seed,
                         tune, progress=progress, desc=f"adapting the encoder to {len(tool_names)} tools",
                         evaluate=heldout_ndcg)
    tuned_score = float(np.nanmax(tuned.epoch_scores))
    used = tuned_score >= frozen_score + config.margin
    report.update(heldout_ndcg5_frozen=round(frozen_score, 4), heldout_ndcg5_tuned=round(tuned_score, 4),
                  epoch_scores=[round(float(s), 4) for s in tuned.epoch_scores], used=bool(used),
                  seconds=round(time.perf_counter() - t0, 1),
                  seconds_per_100_tools=round(100 * (time.perf_counter() - t0) / len(tool_names), 1),
                  reason="beats the frozen encoder on the held-out pairs" if used else
                  f"does not beat the frozen encoder by {config.margin} on the held-out pairs")
    return _store(folder, encoder, tuned if used else None, report, cache_dir)


def _store(folder: Path, encoder, tuned, report: dict, cache_dir) -> Adaptation:
    """Write the report (and the tuned encoder) to ``folder`` atomically; the Adaptation they give."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if tuned is not None:
        save_tuned_encoder(encoder, tuned, tmp / "encoder")
    (tmp / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return _cached(folder, encoder, cache_dir)


def _cached(folder: Path, encoder, cache_dir) -> Adaptation | None:
    """The Adaptation stored in ``folder`` (None when there is none, or it is unreadable: adapted again)."""
    try:
        report = json.loads((folder / "report.json").read_text())
    except (OSError, ValueError):
        return None
    if report.get("version") != REPORT_VERSION:
        return None
    report = {**report, "cache": str(folder)}
    if not report.get("used"):
        return Adaptation(encoder, report)
    try:
        tuned = load_encoder(folder / "encoder", precision=encoder.precision, cache_dir=cache_dir)
    except RiskRankError:
        return None
    tuned.risk_encoder = encoder  # the risk model reads the base encoder's vectors (module doc)
    return Adaptation(tuned, report)
