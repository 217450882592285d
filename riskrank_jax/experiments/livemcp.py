"""LiveMCPBench as a family of the sweep skeleton (``experiments.run``; ``python -m riskrank_jax.sweep
--benchmark livemcpbench``): real MCP servers' tools, multi-step requests, zero-shot rows side by side. The family
supplies the data and the rows (``LIVEMCP``); run key, reuse, results.json and closing lines are the skeleton's,
the tables ``experiments.livemcp_tables``.

Rows (``ROWS``, zero-shot: no row but ``ranker_server_steps_cv`` uses the benchmark's tasks):

* ``bm25``, ``dense``, ``hybrid`` — the baselines over the tool texts ``riskrank-jax rank`` embeds;
* ``two_stage`` — LiveMCPBench's own agent: the top ``mcp.top_servers`` servers by cosine with their name and
  description, then each one's top ``mcp.top_tools`` tools by cosine (same encoder), listed server by server;
* ``mcp_zero`` — MCP-Zero's hierarchical server → tool matcher, (s_server · s_tool) · max(s_server, s_tool);
* ``ranker`` — ``Ranker.from_registry`` with ``DEFAULT_REGISTRY_CONFIG`` less its request stages (server
  context, multi-step, intent: what ``riskrank-jax rank`` did before them), and ``ranker_lam0`` the same at λ = 0;
* ``ranker_server`` / ``ranker_steps`` / ``ranker_server_steps`` — with the server-context stage, the multi-step
  stage, or both (``RankConfig.server_context`` / ``multi_step``), each also at λ = 0 (``…_lam0``); the row whose
  config is ``DEFAULT_REGISTRY_CONFIG`` is what ``riskrank-jax rank`` does now (results.json "rank_default");
* ``ranker_intent`` / ``ranker_server_intent`` / ``ranker_server_steps_intent`` — ``ranker``, ``ranker_server``,
  ``ranker_server_steps`` with the intent stage on (``RankConfig.intent``, ``retrieve.intent``: each tool's
  penalty λ·f_risk weighed by whether the request asks for its effects), at the setting ``INTENT`` that the
  folds-over-servers rule chooses (``livemcp_defaults.choose_intent``); every other row runs without intent, and
  its λ = 0 row is also the intent row's (at λ = 0 the intent weight changes nothing);
* ``ranker_server_steps_namesakes`` — ``ranker_server_steps`` with every copy of a tool name ranked at its best
  copy's score (the benchmark makes both copies gold);
* ``ranker_server_text`` / ``ranker_server_text_steps`` — server context (and multi-step) over tool texts that end
  with their server's name and description (``with_server_text``);
* ``ranker_server_steps_cv`` — both stages with their weights chosen per fold over the tasks on the other folds
  (``cv_row``): the one row that learns from the tasks, the check on the hand-set weights;
* ``ranker_server_intent_names`` — ``ranker_server_intent`` with the name stage (``RankConfig.name_evidence``,
  ``retrieve.names``: the tool names' verbs, directions and object words against the request's reorder its final
  top 10), the rank default; every other Ranker row runs without the name stage;
* opt-in (``mcp.encoders``, ``mcp.adapt``; ``opt_in_rows``): ``enc_<name>`` / ``enc_<name>_names`` —
  ``ranker_server_intent`` and the rank default (with the name stage) with another encoder (``encode.families``: mpnet, use, e5, fusions such as
  minilm+use; "+" written "_"), and ``ranker_server_intent_adapted`` — with relevance adapted to the registry
  (``model.registry_adapt``); each row's encoder id or adaptation report is in results.json "opt_in".

Also: the rank default's row (less intent, ``lambda_row``) over the λ × α grid of ``mcp`` (``sensitivity``), and
the λ, α and intent setting chosen by folds over servers (``experiments.livemcp_defaults``).

Metrics per row: NDCG@5, Recall@5, Recall@10, complete@10 (every needed tool in the top 10), with the standard
error of the mean over tasks; RVR@5 = the share of the top 5 that must be confirmed, from the labelled corpus
(``mcp.risk_labels``; "not labelled" when it covers none of the tools); cost = the row's wall-clock seconds
(ranking every task, after the shared embedding of tools and queries).

Why its own family: there is nothing to train, the server of each tool is part of the data, and every row is a
ranker a user can run on their own servers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

import click
import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data.livemcpbench import load_livemcpbench, risk_labels
from riskrank_jax.data.ultratool import fold_assignment
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.errors import DataError
from riskrank_jax.experiments import livemcp_defaults as defaults_by_servers
from riskrank_jax.experiments import livemcp_transfer as transfer
from riskrank_jax.encode.families import load_encoder
from riskrank_jax.experiments.family import Family
from riskrank_jax.experiments.livemcp_tables import table_text, tables_md
from riskrank_jax.experiments.livemcp_transfer import CE_TOP
from riskrank_jax.experiments.stages import StageLog
from riskrank_jax.model import intent_model
from riskrank_jax.model.cross_encoder_train import candidates, rerank_relevance
from riskrank_jax.paths import REPO_ROOT, resolve_data_dir
from riskrank_jax.model.registry_adapt import AdaptConfig
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker
from riskrank_jax.rank.registry_inputs import registry_graph
from riskrank_jax.registry import load_registry
from riskrank_jax.retrieve import first_stage, hybrid, servers
from riskrank_jax.scoring import rank_order_host, top_order

RESULTS_VERSION = 1
# the shipped MCP risk model the Ranker rows assess risk with: part of the run key
RISK_MODEL_FILE = Path(__file__).resolve().parent.parent / "model" / "mcp_risk_model.npz"
LIST_K = 10
NOT_LABELLED = "not labelled"
# the intent stage of the *_intent rows: the setting the folds-over-servers rule picks on the pooled scoring folds
# (``livemcp_defaults.choose_intent``; results.json → defaults → intent → rule_on_all_scoring_folds, which
# test_livemcpbench checks equals this) — strength 4 for a tool whose effects the request does not ask for, relief 1
INTENT = {"intent": True, "intent_strength": 4.0, "intent_specific": 1.0, "intent_agreement": 0.0,
          "intent_relief": 1.0, "intent_hold_back": 0.0}
# row -> (what it is, the RankConfig fields it changes from DEFAULT_REGISTRY_CONFIG less its request stages
# (``row_config``); None: not such a Ranker row)
ROWS = {
    "bm25": ("BM25 over the tool texts", None),
    "dense": ("dense cosine (the encoder) over the tool texts", None),
    "hybrid": ("hybrid: 0.6·z(cosine) + 0.4·z(BM25)", None),
    "two_stage": ("LiveMCPBench's agent: top servers by cosine, then their top tools", None),
    "mcp_zero": ("MCP-Zero: (s_server · s_tool) · max(s_server, s_tool)", None),
    "ranker": ("the zero-shot Ranker without request stages (hybrid − λ·risk, graph; the issue's default)", {}),
    "ranker_lam0": ("the same at λ = 0", {"lam": 0.0}),
    "ranker_intent": ("+ intent (the setting chosen by folds over servers)", INTENT),
    "ranker_server": ("+ server context", {"server_context": True}),
    "ranker_server_lam0": ("+ server context, λ = 0", {"server_context": True, "lam": 0.0}),
    "ranker_server_intent": ("+ server context + intent", {"server_context": True, **INTENT}),
    "ranker_server_intent_names": ("+ server context + intent + names (the final top 10 reordered by the tool "
                                   "names' verbs, directions and object words)",
                                   {"server_context": True, **INTENT, "name_evidence": True}),
    "ranker_steps": ("+ multi-step", {"multi_step": True}),
    "ranker_steps_lam0": ("+ multi-step, λ = 0", {"multi_step": True, "lam": 0.0}),
    "ranker_server_steps": ("+ server context + multi-step", {"server_context": True, "multi_step": True}),
    "ranker_server_steps_lam0": ("+ server context + multi-step, λ = 0",
                                 {"server_context": True, "multi_step": True, "lam": 0.0}),
    "ranker_server_steps_intent": ("+ server context + multi-step + intent",
                                   {"server_context": True, "multi_step": True, **INTENT}),
    "ranker_server_steps_namesakes": ("ranker_server_steps, each tool name's copies ranked together", None),
    "ranker_server_text": ("+ server context, each tool's text ending with its server's name and description",
                           {"server_context": True}),
    "ranker_server_text_steps": ("+ server context + multi-step, each tool's text with its server's",
                                 {"server_context": True, "multi_step": True}),
    "ranker_graph_servers": ("the Ranker with each server's tools as a co-occurrence group of the graph (sibling "
                             "edges), no server-context stage", None),
    "ranker_server_graph": ("+ server context, and the server-sibling edges in the graph", None),
    "ranker_server_steps_cv": ("+ server context + multi-step, the three stage weights chosen on the other "
                               "tasks (5 folds over tasks; the only row that learns from the tasks)", None),
}
# each *_intent row -> the row it adds the intent stage to
INTENT_ROWS = {"ranker_intent": "ranker", "ranker_server_intent": "ranker_server",
               "ranker_server_steps_intent": "ranker_server_steps"}
# each name-stage row -> the row it adds the name stage to (``RankConfig.name_evidence``)
NAME_ROWS = {"ranker_server_intent_names": "ranker_server_intent"}
# the (server_weight, sibling_weight, step_weight) grid of ranker_server_steps_cv
CV_GRID = tuple((s, b, g) for s in (0.25, 0.5, 1.0) for b in (0.0, 0.5) for g in (0.0, 0.3, 0.6))
# rows ranked by the Ranker over tool texts that end with their server's name and description
SERVER_TEXT_ROWS = ("ranker_server_text", "ranker_server_text_steps")
# the graph rows: (config change, whether the server-sibling edges are in the graph)
GRAPH_ROWS = {"ranker_graph_servers": {}, "ranker_server_graph": {"server_context": True}}
# rows of models trained on another benchmark's training data (``experiments.livemcp_transfer``), run when the
# benchmark is read from the data directory: (what it is, the RankConfig change of the Ranker it starts from)
TRANSFER_ROWS = {
    "tuned_sealtools": ("ranker_server with the encoder tuned on Seal-Tools' training queries (its top 2 layers; no "
                        "LiveMCPBench training)", {"server_context": True}),
    "tuned_sealtools_text_steps": ("ranker_server_text_steps with the encoder tuned on Seal-Tools' training queries",
                                   {"server_context": True, "multi_step": True}),
    "cross_encoder_sealtools": ("ranker_server's top 20 reranked by the cross-encoder trained on Seal-Tools' training "
                                "queries, its gate γ chosen on Seal-Tools' held-out queries", {"server_context": True}),
}
# opt-in rows (``McpConfig.encoders`` / ``adapt``): the rank default's row with another encoder, with and without
# the name stage, and with the registry adapted (``model.registry_adapt``); "{name}" is the encoder's name
ENCODER_ROWS = {
    "enc_{name}": ("ranker_server_intent with the encoder {name}", {"server_context": True, **INTENT}),
    "enc_{name}_names": ("the rank default (ranker_server_intent_names) with the encoder {name}",
                         {"server_context": True, **INTENT, "name_evidence": True}),
}
ADAPTED_ROW = ("ranker_server_intent_adapted", "the rank default with relevance adapted to the registry (its "
               "encoder's top layers tuned on pairs of the tools' own texts; used only if they beat the frozen "
               "encoder on held-out pairs)", {"server_context": True, **INTENT, "name_evidence": True})
# rows that take a model trained on another benchmark and are not run here, and why
NOT_RUN = {
    "sealtools_heads": "not run: the Seal-Tools-trained dual heads and correction reranker score the benchmark's own "
                       "embeddings of its own tools (f_rel over a fixed tool pool); they are not registry rankers and "
                       "have no form that scores another registry's tools",
}
NOT_RUN_TRANSFER = ("not run: the transfer rows run on the benchmark read from the data directory unless turned "
                    "off (this run was given its benchmark, or run_benchmark(..., transfer=False))")


def list_metrics(ranking, gold, confirm_levels=None) -> dict[str, jax.Array]:
    """Per-query metrics of rankings int32 [Q, L >= 10] against gold int32 [Q, G] (-1 padded): NDCG@5, Recall@5,
    Recall@10, complete@10, and with ``confirm_levels`` (int32 [N], 3 for a tool that must be confirmed, else 1)
    RVR@5. Each float32 [Q]."""
    ranking, gold = jnp.asarray(ranking), jnp.asarray(gold)
    out = {"ndcg@5": metrics.ndcg_at_k(ranking, gold, k=5), "recall@5": metrics.recall_at_k(ranking, gold, k=5),
           "recall@10": metrics.recall_at_k(ranking, gold, k=10),
           "complete@10": metrics.complete_at_k(ranking, gold, k=10)}
    if confirm_levels is not None:
        out["rvr@5"] = metrics.rvr_at_k(ranking, jnp.asarray(confirm_levels), k=5)
    return out


def _labels_path(cfg) -> Path | None:
    if not cfg.mcp.risk_labels:
        return None
    p = Path(cfg.mcp.risk_labels)
    return p if p.is_absolute() else REPO_ROOT / p


def _file_hash(path: Path | None) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path is not None and path.is_file() else None


def tool_texts(bench) -> tuple[str, ...]:
    """Each tool's text as ``riskrank-jax rank`` embeds it (``registry.tool_text``: name words, description,
    parameters), read from the benchmark's server documents by the registry loader."""
    texts = load_registry(list(bench.documents)).texts
    if len(texts) != bench.size:
        raise DataError(f"the registry reader kept {len(texts)} of {bench.size} tools", bench.source)
    return texts


def ranker_rankings(ranker, queries, config, k: int = LIST_K, q_emb=None) -> tuple[np.ndarray, np.ndarray]:
    """(int32 [Q, k] tool ids, float32 [Q, N] total scores) of ``ranker`` with ``config`` for the query texts.
    q_emb: ``ranker.encode_queries(queries)`` when the caller ranks the same queries under many settings (None:
    encoded here, as `riskrank-jax rank` does, so that a timed row's cost includes it)."""
    r = ranker.with_config(config)
    q_emb = r.encode_queries(queries) if q_emb is None else q_emb
    total = np.asarray(r.scores(q_emb, q_texts=list(queries)).total)
    return np.asarray(top_order(jnp.asarray(total), k)), total


def baseline_rows(cfg, bench, texts, emb, k: int, timed) -> None:
    """The rows that are not a Ranker: BM25, dense, hybrid, the two-stage agent, MCP-Zero (``timed(name, fn)``
    runs and records each); emb = {"tools", "queries", "servers"} embeddings."""
    mcp, queries = cfg.mcp, list(bench.queries.texts)
    cos = lambda: first_stage.dense_scores(emb["queries"], emb["tools"])  # noqa: E731
    srv = lambda: first_stage.dense_scores(emb["queries"], emb["servers"])  # noqa: E731
    timed("bm25", lambda: top_order(jnp.asarray(first_stage.Bm25Index(list(texts)).scores(queries)), k))
    timed("dense", lambda: top_order(cos(), k))
    timed("hybrid", lambda: top_order(hybrid.fuse(cos(), first_stage.Bm25Index(list(texts)).scores(queries),
                                                  hybrid.DEFAULT_WEIGHT), k))
    n_two = min(mcp.top_servers * mcp.top_tools, bench.size)
    timed("two_stage", lambda: servers.two_stage_ranking(srv(), cos(), bench.servers.of_tool, mcp.top_servers,
                                                         mcp.top_tools, n_two)[:, :k])
    timed("mcp_zero", lambda: top_order(servers.mcp_zero_scores(srv(), cos(), bench.servers.of_tool), k))


def row_config(cfg, change: dict):
    """The RankConfig of a Ranker row: ``DEFAULT_REGISTRY_CONFIG`` without request stages (server context,
    multi-step, intent) and the name stage, the sweep's stage weights (``cfg.mcp``), then the row's ``change``."""
    base = {"server_context": False, "multi_step": False, "intent": False, "name_evidence": False,
            "server_weight": cfg.mcp.server_weight,
            "sibling_weight": cfg.mcp.sibling_weight, "step_weight": cfg.mcp.step_weight}
    return dataclasses.replace(DEFAULT_REGISTRY_CONFIG, **{**base, **change})


def rank_default_row(cfg) -> str | None:
    """The Ranker row whose config is ``DEFAULT_REGISTRY_CONFIG`` (what ``riskrank-jax rank`` does), or None."""
    return next((name for name, (_, change) in ROWS.items()
                 if change is not None and row_config(cfg, change) == DEFAULT_REGISTRY_CONFIG), None)


def lambda_row(cfg) -> str:
    """The row the λ × α sensitivity and the folds-over-servers choice run on: the rank default less its name stage
    (the row a ``NAME_ROWS`` row adds it to) and its intent stage (the row an ``INTENT_ROWS`` row adds intent to),
    else ``ranker_server``."""
    name = rank_default_row(cfg)
    name = NAME_ROWS.get(name, name)
    return INTENT_ROWS.get(name, name) or "ranker_server"


def with_server_text(bench) -> list:
    """The benchmark's server documents with every tool's description followed by "(server <name>: <description>)"."""
    out = []
    for (key, doc), text in zip(bench.documents, bench.servers.texts):
        tools = [{**t, "description": f"{(t.get('description') or '').strip()} (server {text})".strip()}
                 for t in doc["tools"]]
        out.append((key, {**doc, "tools": tools}))
    return out


def ranker_rows(cfg, bench, ranker, k: int, timed, text_ranker=None) -> None:
    """The Ranker rows of ``ROWS`` (the default config with each row's change and the sweep's stage weights; the
    ``SERVER_TEXT_ROWS`` by ``text_ranker``, built over ``with_server_text``), then the namesake row from
    ``ranker_server_steps``' scores."""
    queries = list(bench.queries.texts)
    scores_of = {}
    for name, (_, change) in ROWS.items():
        if change is None or (name in SERVER_TEXT_ROWS and text_ranker is None):
            continue
        config = row_config(cfg, change)

        def run(config=config, name=name):
            r = text_ranker if name in SERVER_TEXT_ROWS else ranker
            ids, scores_of[name] = ranker_rankings(r, queries, config, k)
            return ids
        timed(name, run)
    group = np.unique(np.asarray(bench.raw_names), return_inverse=True)[1].astype(np.int32)
    timed("ranker_server_steps_namesakes",
          lambda: top_order(servers.namesake_max(scores_of["ranker_server_steps"], group), k))


def opt_in_rows(cfg, bench, cache, k: int, timed) -> dict:
    """The opt-in rows of ``cfg.mcp`` (``ENCODER_ROWS`` per encoder name, ``ADAPTED_ROW``): each a registry Ranker
    built as ``prepare`` builds the default's, with that encoder (or the adapted one). Returns {row: (description,
    encoder id or the adaptation's report)}."""
    queries = list(bench.queries.texts)
    server_texts = dict(zip(bench.servers.names, bench.servers.texts))
    out = {}
    for enc_name in cfg.mcp.encoders:
        encoder = load_encoder(enc_name, cache_dir=cfg.runtime.cache_dir)
        ranker = Ranker.from_registry(list(bench.documents), encoder=encoder, cache=cache, server_texts=server_texts)
        slug = enc_name.replace("+", "_")
        for pattern, (text, change) in ENCODER_ROWS.items():
            name = pattern.format(name=slug)
            timed(name, lambda c=row_config(cfg, change): ranker_rankings(ranker, queries, c, k)[0])
            out[name] = (text.format(name=enc_name), encoder.model_id)
    if cfg.mcp.adapt:
        name, text, change = ADAPTED_ROW
        ranker = Ranker.from_registry(list(bench.documents), encoder=load_encoder(None), cache=cache,
                                      server_texts=server_texts, adapt=AdaptConfig())
        timed(name, lambda: ranker_rankings(ranker, queries, row_config(cfg, change), k)[0])
        out[name] = (text, {k: v for k, v in ranker.provenance["adapted"].items() if k != "cache"})  # no local path
    return out


def server_groups(of_tool, n_servers: int) -> np.ndarray:
    """int32 [2·M, max tools of a server]: each server's tools, twice (-1 padded) — the co-occurrence "log" that
    makes every two tools of one server a co-occurrence edge of the graph (``build_tool_graph`` keeps pairs seen
    at least twice, weighted by count / the largest count: every sibling pair gets the full co-occurrence weight)."""
    of_tool = np.asarray(of_tool)
    rows = [np.flatnonzero(of_tool == m) for m in range(n_servers)]
    out = np.full((2 * n_servers, max(1, max(map(len, rows), default=1))), -1, np.int32)
    for m, r in enumerate(rows):
        out[2 * m, :r.size] = out[2 * m + 1, :r.size] = r
    return out


def with_server_graph(ranker, of_tool, n_servers: int):
    """``ranker`` with its graph rebuilt as ``from_registry`` builds it plus every pair of server siblings as a
    co-occurrence edge (``server_groups``)."""
    graph = registry_graph(ranker.tool_emb, ranker.tool_texts, ranker.risk_levels, server_groups(of_tool, n_servers))
    return dataclasses.replace(ranker, graph=graph)


def graph_rows(cfg, bench, ranker, k: int, timed) -> None:
    """``GRAPH_ROWS``: the registry ranker with the server-sibling edges in its graph (``with_server_graph``)."""
    graph_ranker = with_server_graph(ranker, bench.servers.of_tool, bench.servers.size)
    for name, change in GRAPH_ROWS.items():
        timed(name, lambda change=change: ranker_rankings(graph_ranker, list(bench.queries.texts),
                                                          row_config(cfg, change), k)[0])


def _server_texts_in_order(bench) -> list[str]:
    """The servers' texts in the order a registry of the benchmark's documents lists its sources."""
    text = dict(zip(bench.servers.names, bench.servers.texts))
    return [text[bench.servers.names[m]] for m in dict.fromkeys(int(m) for m in bench.servers.of_tool)]


def transfer_rows(cfg, bench, encoder, cache, rankers, k: int, timed) -> dict:
    """``TRANSFER_ROWS`` (``experiments.livemcp_transfer``: trained on Seal-Tools' training queries, or loaded from
    the checkpoints a previous sweep saved); returns {"tuned_encoder": how it trained, "cross_encoder": ...}."""
    ckpt = cfg.runtime.checkpoint_root()
    ranker, text_ranker = rankers
    queries, info = list(bench.queries.texts), {}
    t0 = time.perf_counter()
    tuned_enc, info["tuned_encoder"] = transfer.source_tuned_encoder(cfg, encoder, cache, ckpt)
    info["tuned_encoder"]["load_or_train_s"] = round(time.perf_counter() - t0, 1)
    servers_text = _server_texts_in_order(bench)
    t0 = time.perf_counter()
    tuned = transfer.with_encoder(ranker, tuned_enc, cache, servers_text)
    tuned_text = transfer.with_encoder(text_ranker, tuned_enc, cache, servers_text)
    info["tuned_encoder"]["embed_registry_s"] = round(time.perf_counter() - t0, 1)
    change = TRANSFER_ROWS["tuned_sealtools"][1]
    timed("tuned_sealtools", lambda: ranker_rankings(tuned, queries, row_config(cfg, change), k)[0])
    change = TRANSFER_ROWS["tuned_sealtools_text_steps"][1]
    timed("tuned_sealtools_text_steps", lambda: ranker_rankings(tuned_text, queries, row_config(cfg, change), k)[0])

    def cross():
        _, total = ranker_rankings(ranker, queries, row_config(cfg, TRANSFER_ROWS["cross_encoder_sealtools"][1]),
                                   k)
        cand = candidates(total, min(CE_TOP, bench.size))
        ce, info["cross_encoder"] = transfer.source_cross_encoder_scores(cfg, encoder, cache, ckpt, queries,
                                                                         list(ranker.tool_texts), cand)
        rel = np.asarray(rerank_relevance(total, cand, ce, info["cross_encoder"]["gate"]))
        return rank_order_host(rel)[:, :k]
    timed("cross_encoder_sealtools", cross)
    return info


def prepare(cfg, bench, encoder, cache) -> tuple[tuple, dict, object, dict]:
    """(tool texts, {"tools", "queries", "servers"} embeddings, (the registry Ranker, the one over texts with their
    servers'), {step: seconds}): what every row shares, the Ranker's programs compiled once by a warm-up run."""
    common, t0 = {}, time.perf_counter()
    texts = tool_texts(bench)
    emb = {"tools": embed_texts(encoder, list(texts), cache),
           "queries": embed_texts(encoder, list(bench.queries.texts), cache),
           "servers": embed_texts(encoder, list(bench.servers.texts), cache)}
    common["embed tools, queries, servers (cached)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ranker = Ranker.from_registry(list(bench.documents), encoder=encoder, cache=cache,
                                  server_texts=dict(zip(bench.servers.names, bench.servers.texts)))
    common["build the registry ranker (risk, graph)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    text_ranker = Ranker.from_registry(with_server_text(bench), encoder=encoder, cache=cache,
                                       server_texts=dict(zip(bench.servers.names, bench.servers.texts)))
    common["build the ranker over the texts with their servers'"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for change in ({}, INTENT):  # the plain ranker and with intent (its model loaded once)
        ranker_rankings(ranker, list(bench.queries.texts), row_config(cfg, change), min(LIST_K, bench.size))
    common["warm-up run of the default ranker (compilation)"] = time.perf_counter() - t0
    return texts, emb, (ranker, text_ranker), {name: round(v, 3) for name, v in common.items()}


def sensitivity(cfg, bench, ranker, k: int, confirm) -> list[dict]:
    """The rank default's row less intent (``lambda_row``) over the λ × α grid of ``cfg.mcp`` (lambdas, alphas):
    [{row, lam, alpha, metrics}], each metric the mean over tasks (RVR@5 "not labelled" without labels)."""
    name = lambda_row(cfg)
    queries = list(bench.queries.texts)
    q_emb, out = ranker.encode_queries(queries), []
    for alpha in cfg.mcp.alphas:
        for lam in cfg.mcp.lambdas:
            config = dataclasses.replace(row_config(cfg, ROWS[name][1]), lam=float(lam), alpha=float(alpha))
            ids, _ = ranker_rankings(ranker, queries, config, k, q_emb)
            m = metrics.summarize_over_queries(list_metrics(ids, bench.queries.gold, confirm))
            m = {key: v for key, v in m.items() if not key.endswith("_se")}
            out.append({"row": name, "lam": float(lam), "alpha": float(alpha),
                        **m, **({} if confirm is not None else {"rvr@5": NOT_LABELLED})})
    return out


def cv_row(cfg, bench, ranker, k: int) -> tuple[np.ndarray, list[dict]]:
    """(int32 [Q, k] rankings, the weights chosen per fold) of ``ranker_server_steps_cv``: every task is ranked with
    the ``CV_GRID`` weights whose mean NDCG@5 is highest on the tasks of the other folds (ties: the first in grid
    order); folds from ``data.ultratool.fold_assignment`` (fixed seed) over the tasks."""
    queries, gold = list(bench.queries.texts), bench.queries.gold
    q_emb, ids, ndcg = ranker.encode_queries(queries), [], []
    for s, b, g in CV_GRID:
        change = {"server_context": True, "multi_step": g > 0, "server_weight": s, "sibling_weight": b,
                  "step_weight": g}
        r, _ = ranker_rankings(ranker, queries, row_config(cfg, change), k, q_emb)
        ids.append(r)
        ndcg.append(np.asarray(metrics.ndcg_at_k(jnp.asarray(r), jnp.asarray(gold), k=5)))
    ids, ndcg = np.stack(ids), np.stack(ndcg)  # [W, Q, k], [W, Q]
    fold = fold_assignment(len(queries), cfg.mcp.cv_folds)
    out, chosen = np.empty_like(ids[0]), []
    for f in range(cfg.mcp.cv_folds):
        best = int(np.argmax(np.round(ndcg[:, fold != f].mean(-1), 6)))
        out[fold == f] = ids[best, fold == f]
        chosen.append(dict(zip(("server_weight", "sibling_weight", "step_weight"), CV_GRID[best])))
    return out, chosen


def evaluate_rows(cfg, bench, encoder, cache, transfer: bool = False) -> dict:
    """{"rows": {row: metrics}, "cost_s": {row: seconds}, "common_cost_s": {...}, "risk_labels": ..., "risk_detail":
    {row: the whole pool's ``livemcp_defaults.pooled`` metrics (Safe-RVR@5, NeedRisk-Hit@5, NeedRisk-Recall@10 with
    the rest)} of each intent row, its base row and their λ = 0 row (None without labels),
    "defaults": the λ / α and intent choice by folds over servers (``experiments.livemcp_defaults``; None without
    labels or with fewer than two servers per fold), "transfer": how the transferred models trained (None unless
    ``transfer``)} for every row of ``ROWS`` (and ``TRANSFER_ROWS`` with ``transfer``)."""
    labels = risk_labels(bench, _labels_path(cfg)) if _labels_path(cfg) is not None else None
    confirm = None if labels is None else np.where(labels["must_confirm"], 3, 1).astype(np.int32)
    k = min(LIST_K, bench.size)
    texts, emb, (ranker, text_ranker), common = prepare(cfg, bench, encoder, cache)
    rankings, cost = {}, {}

    def timed(name, fn):
        click.echo(f"[livemcpbench] row {name} ...", err=True)
        t = time.perf_counter()
        rankings[name] = np.asarray(fn())
        cost[name] = round(time.perf_counter() - t, 3)

    baseline_rows(cfg, bench, texts, emb, k, timed)
    ranker_rows(cfg, bench, ranker, k, timed, text_ranker)
    graph_rows(cfg, bench, ranker, k, timed)
    cv = {}

    def run_cv():
        out, cv["chosen_per_fold"] = cv_row(cfg, bench, ranker, k)
        return out
    timed("ranker_server_steps_cv", run_cv)
    transfer_info = transfer_rows(cfg, bench, encoder, cache, (ranker, text_ranker), k, timed) if transfer else None
    opt_in = opt_in_rows(cfg, bench, cache, k, timed)
    defaults = None
    if confirm is not None and bench.servers.size >= 2 * defaults_by_servers.FOLDS:
        t0 = time.perf_counter()
        defaults = defaults_by_servers.choose_by_server_folds(cfg, bench, encoder, cache, confirm,
                                                              row_config(cfg, ROWS[lambda_row(cfg)][1]))
        defaults["cost_s"] = round(time.perf_counter() - t0, 1)
    risk_detail = None
    if confirm is not None:  # the intent rows beside their base rows and λ = 0 rows, with the needed-tool metrics
        names = [n for name, base in INTENT_ROWS.items() for n in (f"{base}_lam0", base, name)]
        risk_detail = {n: defaults_by_servers.rounded(defaults_by_servers.pooled(
            [defaults_by_servers.ids_per_query(rankings[n], bench.queries.gold, confirm)])) for n in names
            if n in rankings}
    rows = {}
    for name in (n for n in (*ROWS, *TRANSFER_ROWS, *opt_in) if n in rankings):
        ids = rankings[name]
        rows[name] = metrics.summarize_over_queries(list_metrics(ids, bench.queries.gold, confirm))
        if confirm is None:
            rows[name]["rvr@5"] = NOT_LABELLED
    return {"rows": rows, "cost_s": cost, "common_cost_s": common,
            "sensitivity": sensitivity(cfg, bench, ranker, k, confirm),
            "cv": {"folds": cfg.mcp.cv_folds, "grid": [list(w) for w in CV_GRID], **cv},
            "defaults": defaults, "transfer": transfer_info, "risk_detail": risk_detail,
            "opt_in": {name: {"description": text, "source": source} for name, (text, source) in opt_in.items()},
            "risk_labels": None if labels is None else {
                "tools_covered": labels["covered"], "tools": bench.size,
                "must_confirm": int(labels["must_confirm"].sum()),
                "rule": "must confirm = mutation destructive, or public_sink, secret_source, execution or money; "
                        "RVR@5 = the share of the top 5 that must be confirmed; an unlabelled tool counts as not",
                "caveat": "the ranker rows assess risk with the shipped MCP risk model, which was trained on the "
                          "whole labelled corpus, these tools included: their exposure here is measured in-sample"}}


# ---------------------------------------------------------------------------------------------- the family's steps


def load(cfg, log: StageLog):
    """LiveMCPBench from the data directory (DataError naming the folder when it is missing)."""
    root = resolve_data_dir(cfg.data.data_dir) / "livemcpbench"
    if not root.is_dir():
        raise DataError(f"{root} does not exist: the livemcpbench benchmark is missing from the data directory "
                        "(docs/data.md, 'LiveMCPBench')")
    return log.run("load data", load_livemcpbench, root)


def plan(cfg, bench_given: bool, transfer: bool | None = None) -> bool:
    """Whether the ``TRANSFER_ROWS`` run: ``transfer``, by default when the benchmark is read from the data
    directory (their models are trained once, on Seal-Tools' training queries, then loaded from the checkpoint
    root)."""
    return not bench_given if transfer is None else bool(transfer)


def key_parts(cfg, transfer: bool) -> list:
    """Besides the config, data and encoder, the run key hashes the risk labels, the shipped risk model and intent
    model (files), the rows, the transfer rows when they run, the intent rows' setting, the intent grid and
    tolerance of the folds-over-servers choice, and ``DEFAULT_REGISTRY_CONFIG`` (every Ranker row's base and
    which row is the rank default)."""
    return [_file_hash(_labels_path(cfg)), _file_hash(RISK_MODEL_FILE), sorted(ROWS),
            sorted(TRANSFER_ROWS) if transfer else None, _file_hash(intent_model.default_model_path()),
            sorted(INTENT.items()), repr(defaults_by_servers.INTENT_GRID), defaults_by_servers.INTENT_TOLERANCE,
            repr(DEFAULT_REGISTRY_CONFIG)]


def evaluate(cfg, bench, encoder, transfer: bool, log: StageLog) -> dict:
    """results.json's sections: every row of ``ROWS`` (and ``TRANSFER_ROWS`` with ``transfer``) with its metrics
    and cost, the sensitivity grid, the cross-validated weights, the λ / α and intent choice by folds over
    servers."""
    ev = log.run("evaluate every row", evaluate_rows, cfg, bench, encoder, EmbeddingCache(cfg.runtime.cache_dir),
                 transfer)
    return {
        "protocol": "zero-shot: no row is trained on the benchmark's tasks (ranker_server_steps_cv chooses 3 weights "
                    "by 5 folds over them)",
        "k": LIST_K, "data": bench.notes,
        "unmatched_mentions": [{"task_id": t, "mention": m} for t, m in bench.unmatched],
        "tasks_without_gold": list(bench.no_gold),
        "rows": ev["rows"],
        "row_descriptions": {**{name: text for name, (text, _) in (*ROWS.items(), *TRANSFER_ROWS.items())},
                             **{name: row["description"] for name, row in ev["opt_in"].items()}},
        "opt_in": {name: row["source"] for name, row in ev["opt_in"].items()},
        "rank_default": rank_default_row(cfg), "intent_rows": {**INTENT_ROWS}, "intent_setting": {**INTENT},
        "not_run": {**NOT_RUN, **({} if transfer else {name: NOT_RUN_TRANSFER for name in TRANSFER_ROWS})},
        "transfer": ev["transfer"], "defaults": ev["defaults"], "risk_detail": ev["risk_detail"],
        "cost_s": ev["cost_s"],
        "common_cost_s": ev["common_cost_s"], "risk_labels": ev["risk_labels"], "sensitivity": ev["sensitivity"],
        "cv": ev["cv"],
    }


LIVEMCP = Family(load=load, plan=plan, key_parts=key_parts, evaluate=evaluate, main_table=table_text,
                 tables=tables_md, results_version=RESULTS_VERSION)


__all__ = ["LIVEMCP", "RESULTS_VERSION", "load", "plan", "key_parts", "evaluate", "evaluate_rows", "list_metrics",
           "ROWS", "INTENT", "INTENT_ROWS", "NAME_ROWS", "lambda_row", "row_config", "rank_default_row", "TRANSFER_ROWS",
           "GRAPH_ROWS", "server_groups", "with_server_graph", "NOT_RUN", "NOT_LABELLED"]
