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

The intent stage (``RankConfig.intent``, ``retrieve.intent``) is chosen the same way, on the same registries, at
the shipped λ and α (``current``: base_config's, which the rule above picks on the pooled scoring folds; the
intent weight multiplies λ·f_risk, so at λ = 0 intent changes nothing). Its grid (``INTENT_GRID``): intent off,
and on with strength ∈ ``INTENT_STRENGTHS`` × specific ∈ ``INTENT_SPECIFICS`` × agreement ∈
``INTENT_AGREEMENTS`` (relief ``INTENT_RELIEF``, no hold-back). The rule (``choose_intent``): a setting is
eligible when its NDCG@5 is at most ``INTENT_TOLERANCE`` below the λ = 0 NDCG@5 (same α: the same ranker
without the risk penalty) and neither its NeedRisk-Hit@5 nor its NeedRisk-Recall@10 is below λ = 0's; among the
eligible the lowest RVR@5 wins (ties: the smaller strength — off counts as 0 —, then the smaller specific, then
the smaller agreement); when none is eligible, intent stays off. Chosen per fold on the choosing registry,
scored on the fold's own; the pooled scoring-fold metrics of every setting are its table.

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
# the intent grid (module docstring): None = intent off, else (strength, specific, agreement)
INTENT_STRENGTHS = (2.0, 4.0, 8.0)
INTENT_SPECIFICS = (0.5, 1.0)
INTENT_AGREEMENTS = (0.0, 1.0)
INTENT_RELIEF = 1.0
INTENT_GRID = (None, *((s, p, a) for s in INTENT_STRENGTHS for p in INTENT_SPECIFICS for a in INTENT_AGREEMENTS))
INTENT_TOLERANCE = 0.005  # issue 47's bound: with intent at most 0.005 NDCG@5 below λ = 0
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


def per_query(ranker, q_emb, q_texts, gold, confirm, config) -> dict:
    """Per-query metrics {name: float [Q]} with "high_risk" (0/1: the task needs a must-confirm tool) of
    ``ranker`` with ``config``; confirm int32 [N] (3: must be confirmed, else 1)."""
    total = np.asarray(ranker.with_config(config).scores(q_emb, q_texts=list(q_texts)).total)
    return ids_per_query(top_order(jnp.asarray(total), min(10, ranker.size)), gold, confirm)


def ids_per_query(ids, gold, confirm) -> dict:
    """``per_query``'s metrics of rankings ids int [Q, 10] (best first) against gold int [Q, G] (-1 padded)."""
    ids = jnp.asarray(ids)
    g = jnp.asarray(gold)
    pq = {k: np.asarray(v) for k, v in metrics.compute_all(ids, g, jnp.asarray(confirm), k=5).items()}
    pq["recall@10"] = np.asarray(metrics.recall_at_k(ids, g, k=10))
    pq["complete@10"] = np.asarray(metrics.complete_at_k(ids, g, k=10))
    pq["needrisk_recall@10"] = needrisk_recall_at_k(ids, gold, confirm, 10)
    return pq


def grid_per_query(ranker, q_emb, q_texts, gold, confirm, base_config, lambdas=LAMBDAS, alphas=ALPHAS) -> dict:
    """{(λ, α): ``per_query`` metrics} of ``ranker`` with base_config at every grid point."""
    return {(float(lam), float(alpha)): per_query(ranker, q_emb, q_texts, gold, confirm,
                                                  dataclasses.replace(base_config, lam=float(lam), alpha=float(alpha)))
            for alpha in alphas for lam in lambdas}


def intent_config(base_config, setting):
    """base_config with the intent stage of ``setting`` (None: off; else (strength, specific, agreement), relief
    ``INTENT_RELIEF``, no hold-back)."""
    return dataclasses.replace(base_config, **intent_setting(setting))


def intent_setting(setting) -> dict:
    """The RankConfig fields of an intent grid setting (JSON-ready)."""
    if setting is None:
        return {"intent": False}
    strength, specific, agree = map(float, setting)
    return {"intent": True, "intent_strength": strength, "intent_specific": specific, "intent_agreement": agree,
            "intent_relief": INTENT_RELIEF, "intent_hold_back": 0.0}


def intent_per_query(ranker, q_emb, q_texts, gold, confirm, base_config, grid=INTENT_GRID) -> dict:
    """{setting: ``per_query`` metrics} of ``ranker`` with base_config (λ, α as given) and each intent setting."""
    return {s: per_query(ranker, q_emb, q_texts, gold, confirm, intent_config(base_config, s)) for s in grid}


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


def _intent_order(setting) -> tuple:
    return (0.0, 0.0, 0.0) if setting is None else tuple(map(float, setting))


def choose_intent(table: dict, lam0: dict):
    """The intent setting by the module's rule from {setting: pooled metrics} and the pooled metrics of the same
    ranker at λ = 0 (``lam0``): None (off) or (strength, specific, agreement)."""
    def eligible(s):
        m = table[s]
        hit_ok = all(np.isnan(lam0[key]) or m[key] >= lam0[key] - 1e-9
                     for key in ("needrisk_hit@5", "needrisk_recall@10"))
        return m["ndcg@5"] >= lam0["ndcg@5"] - INTENT_TOLERANCE - 1e-9 and hit_ok

    ok = [s for s in table if eligible(s)]
    if not ok:
        return None
    return min(ok, key=lambda s: (round(table[s]["rvr@5"], 6), *_intent_order(s)))


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
    over the choosing registries, "intent": the intent stage chosen the same way at ``current`` (``INTENT_GRID``,
    ``choose_intent``; ``_intent_summary``)}. confirm int32 [N] over the whole pool; base_config without intent
    (the λ / α grid runs it as given)."""
    fold = server_fold(bench.servers.size)
    current = (float(base_config.lam), float(base_config.alpha)) if current is None else current
    intent_base = dataclasses.replace(base_config, lam=current[0], alpha=current[1])
    scoring_pq, choosing_tables, choices, choose_pq = [], [], [], []
    intent_scoring, intent_choices, lam0_scoring = [], [], []
    for f in range(FOLDS):
        per_side, intent_side, lam0 = {}, {}, {}
        for side, keep in (("choosing", fold != f), ("scoring", fold == f)):
            ranker, q_emb, texts, gold, conf = _registry(bench, keep, encoder, cache, confirm)
            per_side[side] = grid_per_query(ranker, q_emb, texts, gold, conf, base_config)
            intent_side[side] = intent_per_query(ranker, q_emb, texts, gold, conf, intent_base)
            lam0[side] = per_query(ranker, q_emb, texts, gold, conf,
                                   dataclasses.replace(intent_base, lam=0.0, intent=False))
        table = {p: pooled([pq]) for p, pq in per_side["choosing"].items()}
        lam, alpha = choose(table)
        choices.append({"fold": f, "lam": lam, "alpha": alpha, "choosing": rounded(table[(lam, alpha)]),
                        "scoring": rounded(pooled([per_side["scoring"][(lam, alpha)]]))})
        scoring_pq.append(per_side["scoring"])
        choose_pq.append(per_side["choosing"])
        choosing_tables.append(table)
        itable = {s: pooled([pq]) for s, pq in intent_side["choosing"].items()}
        setting = choose_intent(itable, pooled([lam0["choosing"]]))
        intent_choices.append({"fold": f, **intent_setting(setting), "choosing": rounded(itable[setting]),
                               "scoring": rounded(pooled([intent_side["scoring"][setting]])), "_setting": setting})
        intent_scoring.append(intent_side["scoring"])
        lam0_scoring.append(lam0["scoring"])
    grid = list(scoring_pq[0])
    sens = [{"lam": lam, "alpha": a, **rounded(pooled([s[(lam, a)] for s in scoring_pq]))} for lam, a in grid]
    chosen_sens = [{"lam": lam, "alpha": a, **rounded(pooled([s[(lam, a)] for s in choose_pq]))}
                   for lam, a in grid]
    scored_chosen = pooled([s[(c["lam"], c["alpha"])] for s, c in zip(scoring_pq, choices)])
    whole = choose({(r["lam"], r["alpha"]): r for r in sens})
    return {"folds": FOLDS, "fold_seed": FOLD_SEED,
            "servers_per_fold": [int((fold == f).sum()) for f in range(FOLDS)],
            "lambdas": list(LAMBDAS), "alphas": list(ALPHAS), "tolerance": TOLERANCE,
            "chosen_per_fold": choices, "scored_chosen": rounded(scored_chosen),
            "current": {"lam": current[0], "alpha": current[1]},
            "scored_current": rounded(pooled([s[current] for s in scoring_pq])) if current in grid else None,
            "scored_lam0": {a: rounded(pooled([s[(0.0, a)] for s in scoring_pq])) for a in map(float, ALPHAS)},
            "rule_on_all_scoring_folds": {"lam": whole[0], "alpha": whole[1]},
            "sensitivity": sens, "choosing_sensitivity": chosen_sens,
            "intent": _intent_summary(intent_scoring, intent_choices, lam0_scoring, current)}


def _intent_summary(scoring_pq: list[dict], choices: list[dict], lam0_pq: list[dict], current) -> dict:
    """The intent choice's section of ``choose_by_server_folds``: the grid, the rule, the choice per fold, the
    pooled scoring-fold metrics of every setting, of each fold's choice, of λ = 0, and the rule on all of them."""
    lam0 = pooled(lam0_pq)
    table = {s: pooled([pq[s] for pq in scoring_pq]) for s in INTENT_GRID}
    whole = choose_intent(table, lam0)
    scored_chosen = pooled([pq[c["_setting"]] for pq, c in zip(scoring_pq, choices)])
    return {"lam": current[0], "alpha": current[1], "tolerance": INTENT_TOLERANCE,
            "strengths": list(INTENT_STRENGTHS), "specifics": list(INTENT_SPECIFICS),
            "agreements": list(INTENT_AGREEMENTS), "relief": INTENT_RELIEF,
            "rule": f"eligible: NDCG@5 at most {INTENT_TOLERANCE:g} below λ = 0 (same α), NeedRisk-Hit@5 and "
                    "NeedRisk-Recall@10 not below λ = 0; the lowest RVR@5 among the eligible (ties: the smaller "
                    "strength, off counting as 0, then specific, then agreement); none eligible: off",
            "chosen_per_fold": [{k: v for k, v in c.items() if k != "_setting"} for c in choices],
            "scored_chosen": rounded(scored_chosen), "scored_lam0": rounded(lam0),
            "scored_off": rounded(table[None]),
            "rule_on_all_scoring_folds": intent_setting(whole),
            "sensitivity": [{**intent_setting(s), **rounded(table[s])} for s in INTENT_GRID]}


def rounded(m: dict) -> dict:
    """``m`` with its floats rounded to 4 decimals (as results.json holds them)."""
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}



__all__ = ["FOLDS", "LAMBDAS", "ALPHAS", "TOLERANCE", "INTENT_GRID", "INTENT_TOLERANCE", "server_fold", "sub_pool",
           "per_query", "ids_per_query", "rounded", "grid_per_query", "intent_config", "intent_setting", "intent_per_query", "pooled", "choose",
           "choose_intent", "choose_by_server_folds"]
