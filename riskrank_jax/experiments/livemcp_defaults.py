"""The zero-shot λ and α chosen on real servers' tools: LiveMCPBench with the corpus's risk labels, by folds over
servers.

    out = choose_by_server_folds(cfg, bench, encoder, cache, must_confirm, base_config)

The 70 servers are split into ``FOLDS`` folds (a fixed seeded permutation, ``data.ultratool.fold_assignment``).
For fold f the *choosing* registry is every other fold's servers and the *scoring* registry fold f's own: each is
a registry a user could load (``Ranker.from_registry`` over those servers' tool lists, risk, graph and server
context of its own), so no server, tool or graph edge is in both. A task is evaluated on a registry with its
gold tools that registry holds (a task with none there is left out of it); its other needed tools are on the
other side, so a task can count once on each side.

The rule (``choose``), the demo's rule (docs/registry.md, "How λ and α were chosen") on must-confirm labels: over
the ``LAMBDAS`` × ``ALPHAS`` grid, a point is *eligible* when its NDCG@5 is at most ``TOLERANCE`` below the best
NDCG@5 at λ = 0 (over α), its Recall@10 at most ``TOLERANCE`` below its own α's λ = 0 value, and neither its NeedRisk-Hit@5 (tasks that need a must-confirm tool and get one in
the top 5) nor its NeedRisk-Recall@10 (the share of the needed must-confirm tools in the top 10, over the tasks
that need one) is below its own α's λ = 0 value — no needed tool that must be confirmed is hidden on average; the rule takes the largest eligible λ and, at that λ, the eligible α with
the best NDCG@5 (ties: the smaller α). The choice of fold f is made on its choosing registry alone and scored
on fold f's; the pooled scoring-fold metrics of every grid point are the sensitivity table.

Why folds over servers, not tasks: a default is for registries no one has seen, so the servers it is scored on
must be servers it was not chosen on.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data.ultratool import fold_assignment
from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.scoring import top_order

FOLDS = 5
FOLD_SEED = 36
LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
ALPHAS = (0.0, 0.1, 0.2, 0.4)
TOLERANCE = 0.01  # the bound: the risk-aware default at most 0.01 NDCG@5 below λ = 0
METRIC_KEYS = ("ndcg@5", "recall@10", "complete@10", "rvr@5", "safe_rvr@5", "needrisk_hit@5", "needrisk_recall@10")


def needrisk_recall_at_k(ranking, gold, confirm, k: int = 10) -> np.ndarray:
    """float [Q]: the share of each task's needed must-confirm tools (confirm level >= 3) in its top k (NaN for a
    task that needs none); ranking int [Q, >= k], gold int [Q, G] (-1 padded), confirm int [N]."""
    ranking, gold, confirm = np.asarray(ranking), np.asarray(gold), np.asarray(confirm)
    needed = (gold >= 0) & (confirm[np.where(gold >= 0, gold, 0)] >= 3)
    found = (gold[:, :, None] == ranking[:, None, :k]).any(-1) & needed
    n = needed.sum(1)
    return np.where(n > 0, found.sum(1) / np.maximum(n, 1), np.nan)


def server_fold(n_servers: int) -> np.ndarray:
    """int32 [M]: the fold of each server (``FOLDS`` folds, seed ``FOLD_SEED``)."""

    return fold_assignment(n_servers, FOLDS, FOLD_SEED)


def sub_pool(bench, servers_kept: np.ndarray):
    """(documents of the kept servers, tool ids int [n] of the pool, task rows int [Q'], gold int32 [Q', G] in the
    sub-pool's ids, -1 padded) for bool servers_kept [M]; tasks with no gold tool in the sub-pool are left out."""
    docs = [d for d, keep in zip(bench.documents, servers_kept) if keep]
    tools = np.flatnonzero(servers_kept[bench.servers.of_tool])
    new_id = np.full(bench.size + 1, -1, np.int64)
    new_id[tools] = np.arange(tools.size)
    gold = np.asarray(bench.queries.gold)
    mapped = np.where(gold >= 0, new_id[np.where(gold >= 0, gold, bench.size)], -1)
    rows = np.flatnonzero((mapped >= 0).any(1))
    g = mapped[rows]
    g = -np.sort(-g, axis=1)  # the kept ids first, then the -1 padding
    width = max(1, int((g >= 0).sum(1).max())) if rows.size else 1
    return docs, tools, rows, g[:, :width].astype(np.int32)


def grid_per_query(ranker, q_emb, q_texts, gold, confirm, base_config, lambdas=LAMBDAS, alphas=ALPHAS) -> dict:
    """{(λ, α): per-query metrics {name: float [Q]} with "high_risk" (0/1: the task needs a must-confirm tool)} of
    ``ranker`` with base_config at every grid point; confirm int32 [N] (3: must be confirmed, else 1)."""
    out = {}
    for alpha in alphas:
        for lam in lambdas:
            r = ranker.with_config(dataclasses.replace(base_config, lam=float(lam), alpha=float(alpha)))
            total = np.asarray(r.scores(q_emb, q_texts=list(q_texts)).total)
            ids = top_order(jnp.asarray(total), min(10, ranker.size))
            g = jnp.asarray(gold)
            pq = {k: np.asarray(v) for k, v in metrics.compute_all(ids, g, jnp.asarray(confirm), k=5).items()}
            pq["recall@10"] = np.asarray(metrics.recall_at_k(ids, g, k=10))
            pq["complete@10"] = np.asarray(metrics.complete_at_k(ids, g, k=10))
            pq["needrisk_recall@10"] = needrisk_recall_at_k(ids, gold, confirm, 10)
            out[(float(lam), float(alpha))] = pq
    return out


def pooled(per_query_list: list[dict]) -> dict:
    """``METRIC_KEYS`` means over the concatenated per-query metrics of several registries (NaN where no task
    qualifies: Safe-RVR@5 over tasks that need no must-confirm tool, NeedRisk-Hit@5 over those that need one)."""
    cat = {k: np.concatenate([pq[k] for pq in per_query_list]) for k in per_query_list[0]}
    high = cat["high_risk"] > 0.5
    out = {k: float(cat[k].mean()) for k in ("ndcg@5", "recall@10", "complete@10", "rvr@5")}
    out["safe_rvr@5"] = float(cat["rvr@5"][~high].mean()) if (~high).any() else float("nan")
    out["needrisk_hit@5"] = float(cat["needrisk_hit@5"][high].mean()) if high.any() else float("nan")
    out["needrisk_recall@10"] = float(cat["needrisk_recall@10"][high].mean()) if high.any() else float("nan")
    out["tasks"], out["tasks_needing_confirm"] = int(high.size), int(high.sum())
    return out


def choose(table: dict) -> tuple[float, float]:
    """(λ, α) by the module's rule from {(λ, α): pooled metrics} (``pooled``)."""
    lams = sorted({lam for lam, _ in table})
    alphas = sorted({a for _, a in table})
    best0 = max(table[(0.0, a)]["ndcg@5"] for a in alphas)

    def eligible(lam, a):
        m, m0 = table[(lam, a)], table[(0.0, a)]
        hit_ok = all(np.isnan(m0[key]) or m[key] >= m0[key] - 1e-9 for key in ("needrisk_hit@5", "needrisk_recall@10"))
        recall_ok = m["recall@10"] >= m0["recall@10"] - TOLERANCE - 1e-9
        return m["ndcg@5"] >= best0 - TOLERANCE - 1e-9 and recall_ok and hit_ok

    for lam in reversed(lams):
        ok = [a for a in alphas if eligible(lam, a)]
        if ok:
            return lam, max(ok, key=lambda a: (round(table[(lam, a)]["ndcg@5"], 6), -a))
    return 0.0, max(alphas, key=lambda a: (round(table[(0.0, a)]["ndcg@5"], 6), -a))


def _registry(bench, keep, encoder, cache, confirm_all):

    docs, tools, rows, gold = sub_pool(bench, keep)
    names = [bench.servers.names[i] for i in np.flatnonzero(keep)]
    ranker = Ranker.from_registry(docs, encoder=encoder, cache=cache,
                                  server_texts={n: t for n, t in zip(bench.servers.names, bench.servers.texts)
                                                if n in set(names)})
    if ranker.size != tools.size:
        raise ValueError(f"the registry of {len(docs)} servers has {ranker.size} tools, the pool {tools.size}")
    texts = [bench.queries.texts[i] for i in rows]
    return ranker, embed_texts(encoder, texts, cache), texts, gold, confirm_all[tools]


def choose_by_server_folds(cfg, bench, encoder, cache, confirm, base_config, current=None) -> dict:
    """The choice per fold and its scoring (see the module docstring): {"folds", "servers_per_fold", "rule",
    "chosen_per_fold": [{fold, lam, alpha, choosing: metrics, scoring: metrics}], "scored_chosen": pooled metrics
    of every fold's choice on its scoring registry, "scored_current": those of ``current`` (λ, α) (default:
    base_config's), "sensitivity": [{lam, alpha, **pooled scoring metrics}], "choosing_sensitivity": the same
    over the choosing registries}. confirm int32 [N] over the whole pool."""
    fold = server_fold(bench.servers.size)
    current = (float(base_config.lam), float(base_config.alpha)) if current is None else current
    scoring_pq, choosing_tables, choices, choose_pq = [], [], [], []
    for f in range(FOLDS):
        per_side = {}
        for side, keep in (("choosing", fold != f), ("scoring", fold == f)):
            ranker, q_emb, texts, gold, conf = _registry(bench, keep, encoder, cache, confirm)
            per_side[side] = grid_per_query(ranker, q_emb, texts, gold, conf, base_config)
        table = {p: pooled([pq]) for p, pq in per_side["choosing"].items()}
        lam, alpha = choose(table)
        choices.append({"fold": f, "lam": lam, "alpha": alpha, "choosing": _rounded(table[(lam, alpha)]),
                        "scoring": _rounded(pooled([per_side["scoring"][(lam, alpha)]]))})
        scoring_pq.append(per_side["scoring"])
        choose_pq.append(per_side["choosing"])
        choosing_tables.append(table)
    grid = list(scoring_pq[0])
    sens = [{"lam": lam, "alpha": a, **_rounded(pooled([s[(lam, a)] for s in scoring_pq]))} for lam, a in grid]
    chosen_sens = [{"lam": lam, "alpha": a, **_rounded(pooled([s[(lam, a)] for s in choose_pq]))}
                   for lam, a in grid]
    scored_chosen = pooled([s[(c["lam"], c["alpha"])] for s, c in zip(scoring_pq, choices)])
    whole = choose({(r["lam"], r["alpha"]): r for r in sens})
    return {"folds": FOLDS, "fold_seed": FOLD_SEED,
            "servers_per_fold": [int((fold == f).sum()) for f in range(FOLDS)],
            "lambdas": list(LAMBDAS), "alphas": list(ALPHAS), "tolerance": TOLERANCE,
            "chosen_per_fold": choices, "scored_chosen": _rounded(scored_chosen),
            "current": {"lam": current[0], "alpha": current[1]},
            "scored_current": _rounded(pooled([s[current] for s in scoring_pq])) if current in grid else None,
            "scored_lam0": {a: _rounded(pooled([s[(0.0, a)] for s in scoring_pq])) for a in map(float, ALPHAS)},
            "rule_on_all_scoring_folds": {"lam": whole[0], "alpha": whole[1]},
            "sensitivity": sens, "choosing_sensitivity": chosen_sens}


def _rounded(m: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}


__all__ = ["FOLDS", "LAMBDAS", "ALPHAS", "TOLERANCE", "server_fold", "sub_pool", "grid_per_query", "pooled",
           "choose", "choose_by_server_folds"]
