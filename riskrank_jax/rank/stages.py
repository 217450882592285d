"""The ranking pipeline of one registry: small pure stages, composed once, that every caller walks down in order.

    prepared = prepare(ranker)                                  # built once per registry, reused by every config
    q_emb = embed_requests(encoder, texts)                      # float32 [Q, d]
    ids = ranked(prepared, config, q_emb, texts, k, encoder)    # int32 [Q, k]; encoder: for the request's steps
    parts = score_parts(prepared, config, q_emb, texts, encoder)  # ScoreParts, each [Q, N]

The stages, in the order a request meets them (each a function of this module):

    first stage      cosine | BM25 | hybrid fusion of the request          ``first_stage_scores``   [Q, N]
    request stages   server context, multi-step (the request's steps)      ``request_stages``       [Q, N]
    intent           what the request asks for, the exposure weight        ``intent_stage``         [Q, N] x 2
                     and the tools held back
    risk             relevance (the head's f_rel, else the first stage)    ``risk_stage``           [Q, N] x 3
                     and relevance − λ·risk (· the intent weight)
    candidates       the first stage's top n_candidates (when set)          ``candidate_stage``      [Q, C]
    graph            ToolGraph smoothing, full pool or candidates           ``graph_stage``          [Q, N] | [Q, C]
    names            the top name_window reordered by the tool names'       ``name_stage``           [Q, N] | [Q, C]
                     evidence (siblings told apart; the set kept)
    hold             held-back tools below every other (intent policy)      ``hold_stage``           [Q, N] | [Q, C]
    filter, top k    descending order, the rule filter, the first k         ``top_k`` / ``candidate_top_k``

``Prepared`` holds what the stages reuse across requests, derived from the registry's arrays alone (never from the
config): the arrays on the device, the graph's neighbour tables, the BM25 index. It lives beside the ``Ranker``
(``Ranker.prepared``), built when the ranker is built and shared by ``Ranker.with_config``'s copies.

Why stages as functions of (prepared, config, inputs): ``rank``, ``serve``, the integrations and the sweep's
LiveMCPBench rows call the same functions; nothing calls back into the object that holds the arrays. The sweep's
paper benchmarks run the same stage functions (``scoring.penalise``, ``stacked`` smoothing and rule filter,
``scoring.rank_order``) with seeds and λ as leading axes (``experiments.evaluate``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.encode import families
from riskrank_jax.errors import RankerError
from riskrank_jax.graph import smoothing
from riskrank_jax.graph.tool_graph import ToolGraph
from riskrank_jax.model import heads, intent_model
from riskrank_jax.rank import stacked
from riskrank_jax.registry import dimensions
from riskrank_jax.retrieve import first_stage, hybrid, intent, names, servers, steps
from riskrank_jax.scoring import penalise, rank_order, top_order

MIN_BUCKET = 1  # single requests (rank_queries, the CLI) must not pay for 8 padded rows



class ScoreParts(NamedTuple):
    """Components of the scores, each float32 [Q, N] (or [Q, k] gathered at the returned tools): relevance,
    risk_penalty = λ·risk, graph = smoothed − penalised, names = the name stage's move (0 when off), total
    (= relevance − risk_penalty + graph + names up to rounding)."""

    relevance: jax.Array
    risk_penalty: jax.Array
    graph: jax.Array
    names: jax.Array
    total: jax.Array


@dataclass(frozen=True, eq=False)
class Prepared:
    """What the stages reuse across requests, derived once from a registry's arrays (not from its config).

    device: {"tool_emb" [N, d], "risk_scores" [N], "risk_levels" [N], "perm_level" [N], "params" (when a head)}
    on the device; graph / graph_tables: the ToolGraph and its neighbour tables and Â (None without a graph);
    bm25: the BM25 index of the tool texts (built for the first config that needs it, None before); names: what
    the tool names say (``retrieve.names.name_table``; built for the first config with name_evidence, None before);
    tool_server int32 [N] / server_emb float32 [M, d]: each tool's server and the servers' embeddings (None when
    unknown); index: tool name -> its index (names are unique); effects: bool [N, E] what each tool does
    (``retrieve.intent.tool_effects`` of its dimension rows, else ``text_effects`` of its texts); must_confirm:
    bool [N] the tools the hold-back keeps from read requests (``retrieve.intent.tool_must_confirm``); source: {ranker field: the
    object each part was built from} (``PART_FIELDS``; a part whose fields now hold other objects is built anew)."""

    device: dict
    graph: ToolGraph | None
    graph_tables: smoothing.PreparedGraph | None
    bm25: first_stage.Bm25Index | None
    names: names.NameTable | None
    tool_server: np.ndarray | None
    server_emb: np.ndarray | None
    index: dict
    effects: np.ndarray
    must_confirm: np.ndarray
    source: dict

    @property
    def dim(self) -> int:
        return int(self.device["tool_emb"].shape[1])


# each part of a Prepared and the ranker fields it is built from
PART_FIELDS = {"device": ("tool_emb", "risk_scores", "risk_levels", "perm_level", "params"), "graph": ("graph",),
               "bm25": ("tool_texts",), "names": ("tool_names",), "index": ("tool_names",),
               "servers": ("tool_server", "server_emb"),
               "effects": ("risk_dimensions", "tool_texts")}


def _source(r) -> dict:
    return {name: getattr(r, name) for fields in PART_FIELDS.values() for name in fields}


def _reusable(previous: Prepared | None, source: dict, part: str) -> bool:
    """Whether ``previous`` built ``part`` from the very objects ``source`` holds now."""
    return previous is not None and all(previous.source[n] is source[n] for n in PART_FIELDS[part])


def text_effects(texts) -> tuple[dict, ...]:
    """One dimension row per tool from its text alone (a ranker without dimension rows: a fitted ranker, a
    benchmark's): the dimension keywords on the name and first sentence (``registry.dimensions.keyword_hits``),
    and a local write when the name's first word is a writing verb."""
    hits = dimensions.keyword_hits([dimensions.floor_text(t) for t in texts])
    writes = dimensions.keyword_features(list(texts))[:, 2 * len(dimensions.DIMENSION_KEYWORDS) + 1]
    rows = []
    for h, w in zip(hits, writes):
        mutation = "destructive" if "destructive" in h else ("local_write" if w else "read")
        rows.append({"mutation": {"value": mutation, "source": "keywords"},
                     **{f: {"value": f in h, "source": "keywords"} for f in dimensions.FLAGS}})
    return tuple(rows)


def needs_bm25(config) -> bool:
    return config.first_stage in ("bm25", "hybrid")


def prepare(r, previous: Prepared | None = None) -> Prepared:
    """The Prepared of a ranker's arrays ``r`` (tool_names, tool_texts, tool_emb, risk_scores, risk_levels,
    perm_level, params, graph, tool_server, server_emb) for ``r.config``. Each part of ``previous`` built from the
    same arrays (the same objects) is reused: all of it for a ``with_config`` copy, the device arrays and graph
    tables when only the names changed; the BM25 index and the name table are built when the config needs them
    and no reusable one exists."""
    source = _source(r)
    if all(_reusable(previous, source, part) for part in PART_FIELDS) and (
            previous.bm25 is not None or not needs_bm25(r.config)) and (
            previous.names is not None or not r.config.name_evidence):
        return previous
    if _reusable(previous, source, "device"):
        device = previous.device
    else:
        device = jax.device_put({"tool_emb": r.tool_emb, "risk_scores": r.risk_scores, "risk_levels": r.risk_levels,
                                 "perm_level": r.perm_level, **({} if r.params is None else {"params": r.params})})
    if _reusable(previous, source, "graph"):
        tables = previous.graph_tables
    else:  # the compile-light bucket sums: a ranker smooths a few requests at a time, compiling once per batch size
        tables = None if r.graph is None else smoothing.prepare_graph(r.graph, unrolled=False)
    bm25 = previous.bm25 if _reusable(previous, source, "bm25") else None
    if bm25 is None and needs_bm25(r.config):
        bm25 = first_stage.Bm25Index(list(r.tool_texts))
    table = previous.names if _reusable(previous, source, "names") else None
    if table is None and r.config.name_evidence:
        table = names.name_table(r.tool_names)
    index = previous.index if _reusable(previous, source, "index") else {n: i for i, n in enumerate(r.tool_names)}
    if _reusable(previous, source, "effects"):
        effects, must = previous.effects, previous.must_confirm
    else:
        rows = r.risk_dimensions if r.risk_dimensions else text_effects(r.tool_texts)
        effects, must = intent.tool_effects(rows), intent.tool_must_confirm(rows)
    return Prepared(device, r.graph, tables, bm25, table, r.tool_server, r.server_emb, index, effects, must, source)


def query_bucket(n: int) -> int:
    """Padded batch size for n queries: the next power of two, at least MIN_BUCKET (so one program per
    power of two is compiled)."""
    return max(MIN_BUCKET, 1 << math.ceil(math.log2(max(n, 1))))


# ---------------------------------------------------------------------------------------------- first stage


def embed_requests(encoder, texts) -> np.ndarray:
    """float32 [Q, d] embeddings of request texts by ``encoder`` (no disk cache: requests rarely repeat). A few
    requests run as one compact encoder batch (``Encoder.encode(..., compact=True)``: a request of 9 to 16 tokens
    runs as 1 x 16 tokens, not 4 x 128); more, or an encoder without the compact path, in batches of at most 64
    padded to a power of two; an encoder with ``encode_queries`` (E5's "query: " prefix) embeds requests with it."""
    if encoder is None:
        raise RankerError("this ranker has no encoder to embed requests with; pass one "
                          "(dataclasses.replace(ranker, encoder=load_encoder(...)))")
    texts = list(texts)
    if getattr(encoder, "supports_compact", False):
        return np.asarray(families.encode_requests(encoder, texts, batch_size=64, progress=False, compact=True),
                          np.float32)
    batch = min(64, 1 << math.ceil(math.log2(max(len(texts), 1))))
    return np.asarray(families.encode_requests(encoder, texts, batch_size=batch, progress=False), np.float32)


@jax.jit
def _hybrid_scores(q_emb, tool_emb, bm25, weight):
    """hybrid.fuse(cosine, bm25, weight): [Q, d], [N, d], [Q, N] -> [Q, N]."""
    return hybrid.fuse(first_stage.dense_scores(q_emb, tool_emb), bm25, weight)


def first_stage_scores(p: Prepared, config, q, q_texts):
    """The first stage's scores [Q, N] of q [Q, d] (texts q_texts), left where they are computed: BM25 on the
    host, cosine and the hybrid fusion on the device."""
    stage = config.first_stage
    if needs_bm25(config) and (q_texts is None or len(q_texts) != q.shape[0]):
        raise RankerError(f"first_stage {stage!r} needs q_texts, one per query embedding")
    if needs_bm25(config) and p.bm25 is None:
        raise RankerError(f"first_stage {stage!r} needs the BM25 index: change a ranker's config with with_config")
    if stage == "bm25":
        return p.bm25.scores(q_texts)
    t_emb = p.device["tool_emb"]  # on the device already: not copied per call
    if stage == "hybrid":
        return _hybrid_scores(q, t_emb, p.bm25.scores(q_texts), config.hybrid_weight)
    return first_stage.dense_scores(q, t_emb)


# ---------------------------------------------------------------------------------------------- request stages


def server_context_stage(p: Prepared, config, q, scores):
    """``scores`` [Q, N] with the server evidence of q [Q, d] (``retrieve.servers.server_context``) when the config
    asks for it and the tools' servers are known; else ``scores`` unchanged."""
    if not config.server_context or p.tool_server is None:
        return scores
    return servers.server_context(scores, first_stage.dense_scores(q, p.server_emb), p.tool_server,
                                  config.server_weight, config.sibling_weight)


def _scored(p: Prepared, config, q, q_texts):
    return server_context_stage(p, config, q, first_stage_scores(p, config, q, q_texts))


def request_stages(p: Prepared, config, q, q_texts, encoder):
    """The first stage's scores [Q, N] of q [Q, d] after the request stages of ``config``: server context, and with
    multi_step the request's paths as words, its steps
    (``retrieve.steps.pack_steps``) embedded by ``encoder`` and scored the same way (each with those stages), the
    best step's z-score added (``retrieve.steps.fuse_steps``). Splitting a request is text work on the host, so
    this stage is not jitted; what follows is."""
    if not config.multi_step:
        return _scored(p, config, q, q_texts)
    if q_texts is None or len(q_texts) != q.shape[0]:
        raise RankerError("multi_step needs the query texts, one per query embedding")
    whole_texts = [steps.normalise_paths(t) for t in q_texts]
    changed = [i for i, (a, b) in enumerate(zip(whole_texts, q_texts)) if a != b]
    flat, index = steps.pack_steps(q_texts, config.max_steps)
    new = [whole_texts[i] for i in changed] + flat
    emb = embed_requests(encoder, new) if new else np.zeros((0, q.shape[1]), np.float32)
    whole_q = np.array(q, np.float32)
    whole_q[changed] = emb[:len(changed)]
    whole = _scored(p, config, whole_q, whole_texts)
    if not flat:
        return whole
    # steps padded to a power of two (repeating the last) and the index to max_steps columns, so the jitted
    # stages compile once per bucket, not once per number of steps
    pad = query_bucket(len(flat)) - len(flat)
    step_q = np.concatenate([emb[len(changed):], np.repeat(emb[-1:], pad, axis=0)])
    index = np.pad(index, ((0, 0), (0, config.max_steps - index.shape[1])), constant_values=-1)
    return steps.fuse_steps(whole, _scored(p, config, step_q, flat + flat[-1:] * pad), index, config.step_weight)


def query_array(p: Prepared, q_emb) -> np.ndarray:
    """q_emb as float32 [Q, d]; RankerError unless its width is the registry's."""
    q = np.asarray(q_emb, np.float32)
    if q.ndim != 2 or q.shape[1] != p.dim:
        raise RankerError(f"query embeddings must be [Q, {p.dim}], got {q.shape}")
    return q


def stage_inputs(p: Prepared, config, q_emb, q_texts, encoder):
    """(q [B, d], request-staged first-stage scores [B, N], Q) on the device, padded to the query bucket B. When Q
    is a bucket size already (one request) nothing is padded and the first stage's scores stay on the device."""
    q = query_array(p, q_emb)
    n_q, pad = q.shape[0], query_bucket(q.shape[0]) - q.shape[0]
    if pad == 0:
        q = jnp.asarray(q)
        return q, jnp.asarray(request_stages(p, config, q, q_texts, encoder)), n_q
    first = np.asarray(request_stages(p, config, q, q_texts, encoder))
    return jnp.asarray(np.pad(q, ((0, pad), (0, 0)))), jnp.asarray(np.pad(first, ((0, pad), (0, 0)))), n_q


# ---------------------------------------------------------------------------------------------- intent


def request_needs(p: Prepared, config, q_texts, first) -> intent.RequestNeeds:
    """What each of the requests ``q_texts`` asks for (``retrieve.intent.request_needs``): keywords, the shipped
    intent model, and with ``config.intent_agreement`` > 0 the effects of the first stage's top tools (first
    [Q', N], Q' ≥ Q: the rows of the requests first)."""
    texts = list(q_texts)
    model = intent_model.default_model()
    learned = None if model is None else model.probs(texts)
    agree = None
    if config.intent_agreement > 0:
        agree = intent.agreement(np.asarray(first)[:len(texts)], p.effects)
    return intent.request_needs(texts, learned, agree, config.intent_agreement)


class IntentStage(NamedTuple):
    """What the intent stage gives the stages after it: needs, what the Q requests were read as asking
    (``retrieve.intent.RequestNeeds``); weight float32 [B, N], the exposure weight λ·f_risk is multiplied by;
    held bool [B, N], the tools held back (ranked last, after the graph). Padding rows: weight 1, nothing held."""

    needs: intent.RequestNeeds
    weight: jax.Array
    held: jax.Array


def intent_stage(p: Prepared, config, q_texts, first) -> IntentStage | None:
    """The intent stage of the requests ``q_texts`` (Q of them) against the tools' effects, padded to first's B
    rows (``retrieve.intent.exposure_weight``, ``held_back``); None without intent."""
    if not config.intent:
        return None
    if q_texts is None:
        raise RankerError("intent needs the request texts, one per query embedding")
    needs = request_needs(p, config, q_texts, first)
    pad = ((0, first.shape[0] - needs.need.shape[0]), (0, 0))
    w = np.asarray(intent.exposure_weight(needs.need, p.effects, config.intent_strength, config.intent_relief,
                                          config.intent_specific))
    held = np.asarray(intent.held_back(needs.need, p.must_confirm, config.intent_hold_back))
    return IntentStage(needs, jnp.asarray(np.pad(w, pad, constant_values=1.0)),
                       jnp.asarray(np.pad(held, pad, constant_values=False)))


def _weight(it: IntentStage | None):
    return None if it is None else it.weight


def hold_offset(config, it: IntentStage | None, cand=None):
    """float32 [B, N] (or at the candidates cand int [B, C]): ``HOLD_OFFSET`` where the intent stage holds a tool
    back, else 0; 0 without intent and at λ = 0 (the hold-back is part of the penalty)."""
    if it is None or config.lam == 0:
        return 0.0
    held = it.held if cand is None else jnp.take_along_axis(it.held, cand, axis=-1)
    return jnp.where(held, jnp.float32(intent.HOLD_OFFSET), jnp.float32(0.0))


def hold_stage(config, scores, it: IntentStage | None, cand=None):
    """``scores`` [B, N] (or the candidates' [B, C], cand int [B, C]) less ``hold_offset``: a held-back tool below
    every other tool, in their own order. After the graph, so a held-back tool's neighbours keep their scores."""
    return scores - hold_offset(config, it, cand)


# ---------------------------------------------------------------------------------------------- risk, graph


def _risk(device, q_emb, first, config, weight=None):
    """(relevance, risk_penalty, penalised), each [Q, N]; weight [Q, N]: the intent stage's (None: 1)."""
    t_emb, risk = device["tool_emb"], device["risk_scores"]
    if weight is not None:
        risk = risk * weight
    rel = heads.relevance_full(device["params"], q_emb, t_emb) if "params" in device else first
    return rel, jnp.broadcast_to(config.lam * risk, rel.shape), penalise(rel, risk, config.lam)


risk_stage = jax.jit(_risk, static_argnames=("config",))
risk_stage.__doc__ = ("(relevance, risk_penalty, penalised), each [Q, N], of q [Q, d] and first-stage scores [Q, N]; "
                      "weight [Q, N]: the intent stage's exposure weight (None: none).")


def graph_stage(p: Prepared, config, pen):
    """Total scores [Q, N]: the ToolGraph smoothing of penalised [Q, N] over the full pool (α > 0 and a graph),
    else the penalised scores."""
    if config.alpha > 0 and p.graph is not None:
        return smoothing.smooth_full(pen, p.graph_tables, config.alpha)
    return pen


@functools.partial(jax.jit, static_argnames=("config",))
def _candidates(device, q_emb, first, config, weight=None):
    rel, risk_penalty, pen = _risk(device, q_emb, first, config, weight)
    return rel, risk_penalty, pen, first_stage.top_candidates(first, c=config.n_candidates)


def candidate_stage(p: Prepared, config, q, first, weight=None):
    """(relevance, risk_penalty, penalised [B, N], candidate scores after the graph [B, C], candidates [B, C]):
    the risk stage (weight: the intent stage's), the first stage's top n_candidates, then the graph over the
    candidates."""
    rel, risk_penalty, pen, cand = _candidates(p.device, q, first, config, weight)
    cs = stacked.gather_candidates(pen, cand)
    if config.alpha > 0 and p.graph is not None:
        cs = smoothing.smooth_candidates(cs, np.asarray(cand), p.graph, config.alpha)
    return rel, risk_penalty, pen, cs, cand


# ---------------------------------------------------------------------------------------------- names


def name_texts(p: Prepared, config, q_texts, n_rows: int):
    """The request texts the name stage reads (``q_texts``, at most n_rows, the query bucket), or None unless
    ``config.name_evidence``; RankerError when they are missing or the name table is not built."""
    if not config.name_evidence:
        return None
    if q_texts is None or len(q_texts) > n_rows:
        raise RankerError("name_evidence needs the query texts, one per query embedding")
    if p.names is None:
        raise RankerError("name_evidence needs the name table: change a ranker's config with with_config")
    return list(q_texts)


def name_stage(p: Prepared, config, scores, texts, cand=None):
    """``scores`` [B, N] (or the candidates' [B, C], cand int [B, C]) with each sibling group of every request's top
    ``config.name_window`` (tools that share an object word) put in the order of its scores plus name_weight ×
    spread × the name evidence of the request ``texts[b]`` (``retrieve.names.name_evidence``, read for those
    window tools only), on the group's own scores (``retrieve.names.sibling_order``): siblings are told apart, a
    tool without a sibling there keeps its place, and the window keeps its set (Recall and complete@window are the
    graph's). After the graph, so no neighbour inherits a place; before the hold, so a held-back tool stays last.
    ``scores`` unchanged when texts is None (the stage is off); rows beyond the texts (padding) unchanged. Host
    work on each request's window only."""
    if texts is None:
        return scores
    host = np.asarray(scores)
    n, cand = len(texts), None if cand is None else np.asarray(cand)[:len(texts)]
    window = min(config.name_window, int(host.shape[1]))
    tops = np.stack([names.top_window(row, window) for row in host[:n]])  # [Q, window] columns
    tools = tops if cand is None else np.take_along_axis(cand, tops, axis=-1)
    # one read of the names for every request's window tools, then each request's own columns of it
    union, where = np.unique(tools, return_inverse=True)
    evidence = np.zeros((n, host.shape[1]), np.float32)
    np.put_along_axis(evidence, tops, np.take_along_axis(
        names.name_evidence(p.names, texts, union), where.reshape(tools.shape), axis=-1), axis=-1)
    out = host.copy()
    out[:n] = names.sibling_order(host[:n], evidence, p.names.objects, window, cand, weight=config.name_weight,
                                  tops=tops)
    return jnp.asarray(out)


# ---------------------------------------------------------------------------------------------- filter, top k


def _rule(ranking, device, config):
    return stacked.apply_rule_filter(ranking, device["risk_levels"], device["perm_level"], device["tool_emb"],
                                     k=config.k, risk_cap=config.risk_cap, perm_cap=config.perm_cap,
                                     sim_threshold=config.sim_threshold)


@functools.partial(jax.jit, static_argnames=("config", "k"))
def top_k(device, total, config, k: int):
    """int32 [Q, k] from total [Q, N]: descending order (ties to the lower index), the rule filter when enabled,
    the first k."""
    ranking = rank_order(total)
    return (_rule(ranking, device, config) if config.rule_filter else ranking)[:, :k]


@functools.partial(jax.jit, static_argnames=("config", "k"))
def top_k_with_parts(device, rel, risk_penalty, pen, smoothed, named, total, config, k: int):
    """(ids int32 [Q, k], ScoreParts gathered at ids, each [Q, k]) from the full-pool stages' [Q, N] scores:
    penalised, smoothed (the graph's), named (the name stage's) and total (after the hold)."""
    parts = ScoreParts(rel, risk_penalty, smoothed - pen, named - smoothed, total)
    if config.rule_filter:
        ids = _rule(rank_order(parts.total), device, config)[:, :k]
    else:  # the first k of rank_order, without sorting all N
        ids = top_order(parts.total, k)
    return ids, ScoreParts(*(jnp.take_along_axis(x, ids, axis=-1) for x in parts))


@functools.partial(jax.jit, static_argnames=("config", "k"))
def candidate_top_k(device, cand_scores, cand, first, config, k: int):
    """int32 [Q, k]: the candidates by their scores [Q, C], the rule filter when enabled, then the tools beyond
    the candidates in the first stage's order [Q, N]; the first k."""
    order = stacked.candidate_ranking(cand_scores, cand)
    if config.rule_filter:
        order = _rule(order, device, config)
    return first_stage.candidate_full_ranking(order, rank_order(first))[:, :k]


# ---------------------------------------------------------------------------------------------- the composition


def _scattered(base, cand, values):
    """``base`` [Q, N] with ``values`` [Q, C] written at the candidates ``cand`` [Q, C] of each row."""
    return base.at[jnp.arange(cand.shape[0])[:, None], cand].set(values)


def score_parts(p: Prepared, config, q_emb, q_texts, encoder) -> ScoreParts:
    """ScoreParts of Q queries (q_emb float [Q, d]; q_texts for BM25, hybrid and multi-step), each [Q, N]; with
    n_candidates the tools beyond the candidates score −inf in total and 0 in graph. A tool the intent stage holds
    back carries ``HOLD_OFFSET`` in its risk penalty."""
    q, first, n_q = stage_inputs(p, config, q_emb, q_texts, encoder)
    it = intent_stage(p, config, q_texts, first)
    ev = name_texts(p, config, q_texts, first.shape[0])
    if config.n_candidates is None:
        rel, risk_penalty, pen = risk_stage(p.device, q, first, config, _weight(it))
        smoothed = graph_stage(p, config, pen)
        named = name_stage(p, config, smoothed, ev)
        parts = ScoreParts(rel, risk_penalty + hold_offset(config, it), smoothed - pen, named - smoothed,
                           hold_stage(config, named, it))
    else:
        rel, risk_penalty, pen, cs, cand = candidate_stage(p, config, q, first, _weight(it))
        named = name_stage(p, config, cs, ev, cand)
        total = _scattered(jnp.full(pen.shape, -jnp.inf, pen.dtype), cand, hold_stage(config, named, it, cand))
        graph = _scattered(jnp.zeros_like(pen), cand, cs - stacked.gather_candidates(pen, cand))
        parts = ScoreParts(rel, risk_penalty + hold_offset(config, it), graph,
                           _scattered(jnp.zeros_like(pen), cand, named - cs), total)
    return ScoreParts(*(x[:n_q] for x in parts))


def ranked(p: Prepared, config, q_emb, q_texts, k: int, encoder) -> np.ndarray:
    """int32 [Q, k] tool ids of Q queries, best first: every stage in order."""
    q, first, n_q = stage_inputs(p, config, q_emb, q_texts, encoder)
    it = intent_stage(p, config, q_texts, first)
    ev = name_texts(p, config, q_texts, first.shape[0])
    if config.n_candidates is None:
        _, _, pen = risk_stage(p.device, q, first, config, _weight(it))
        ids = top_k(p.device, hold_stage(config, name_stage(p, config, graph_stage(p, config, pen), ev), it), config, k)
    else:
        _, _, _, cs, cand = candidate_stage(p, config, q, first, _weight(it))
        ids = candidate_top_k(p.device, hold_stage(config, name_stage(p, config, cs, ev, cand), it, cand), cand, first,
                              config, k)
    return np.asarray(ids[:n_q])


def _top_with_scores(p: Prepared, config, q, first, k: int, it: IntentStage | None, ev=None):
    """(ids int32 [B, k], total [B, k], relevance [B, k]) from the staged inputs q [B, d], first [B, N], the
    intent stage (or None) and the texts the name stage reads, ev (``name_texts``; None: off): the risk,
    candidate, graph, name, hold, filter and top-k stages of ``config``."""
    if config.n_candidates is None:
        rel, risk_penalty, pen = risk_stage(p.device, q, first, config, _weight(it))
        smoothed = graph_stage(p, config, pen)
        named = name_stage(p, config, smoothed, ev)
        ids, parts = top_k_with_parts(p.device, rel, risk_penalty, pen, smoothed, named, hold_stage(config, named, it),
                                      config, k)
        return ids, parts.total, parts.relevance
    rel, _, pen, cs, cand = candidate_stage(p, config, q, first, _weight(it))
    cs = hold_stage(config, name_stage(p, config, cs, ev, cand), it, cand)
    ids = candidate_top_k(p.device, cs, cand, first, config, k)
    total = _scattered(jnp.full(pen.shape, -jnp.inf, pen.dtype), cand, cs)
    return ids, jnp.take_along_axis(total, ids, -1), jnp.take_along_axis(rel, ids, -1)


class Walk(NamedTuple):
    """One walk down the stages for Q requests: ids int32 [Q, k], total [Q, k], relevance [Q, k] (numpy); more:
    the ids [Q, k] at each λ of ``also_at_lambdas``; intent: the intent stage (its weight and held rows cut to
    Q), None without intent."""

    ids: np.ndarray
    total: np.ndarray
    relevance: np.ndarray
    more: tuple
    intent: IntentStage | None


def walk(p: Prepared, config, q_emb, q_texts, k: int, encoder, also_at_lambdas=()) -> Walk:
    """The top k under ``config`` with their scores, the top k at each λ of ``also_at_lambdas``, and what the
    intent stage read: the first stage, the request stages and the intent stage (which λ does not change) run
    once for all of them."""
    q, first, n_q = stage_inputs(p, config, q_emb, q_texts, encoder)
    it = intent_stage(p, config, q_texts, first)
    ev = name_texts(p, config, q_texts, first.shape[0])
    out = _top_with_scores(p, config, q, first, k, it, ev)
    more = tuple(np.asarray(_top_with_scores(p, dataclasses.replace(config, lam=float(lam)), q, first, k, it, ev)[0]
                            )[:n_q] for lam in also_at_lambdas)
    if it is not None:
        it = it._replace(weight=np.asarray(it.weight)[:n_q], held=np.asarray(it.held)[:n_q])
    return Walk(*(np.asarray(x)[:n_q] for x in out), more, it)


def ranked_with_scores(p: Prepared, config, q_emb, q_texts, k: int, encoder, also_at_lambdas=()) -> tuple:
    """(ids int32 [Q, k], total [Q, k], relevance [Q, k], *the ids [Q, k] at each λ of ``also_at_lambdas``) as
    numpy: ``walk`` without the intent stage's reading."""
    w = walk(p, config, q_emb, q_texts, k, encoder, also_at_lambdas)
    return (w.ids, w.total, w.relevance, *w.more)


__all__ = ["Prepared", "ScoreParts", "prepare", "query_bucket", "embed_requests", "first_stage_scores", "request_stages",
           "server_context_stage", "name_texts", "name_stage", "stage_inputs", "IntentStage", "intent_stage", "request_needs",
           "hold_offset", "hold_stage",
           "risk_stage", "graph_stage", "candidate_stage", "top_k", "top_k_with_parts", "candidate_top_k",
           "score_parts", "ranked", "Walk", "walk", "ranked_with_scores", "needs_bm25", "text_effects"]
