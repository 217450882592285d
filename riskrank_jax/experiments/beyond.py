"""Training and evaluation steps of the beyond-paper families (hybrid first stage, correction reranker, risk
budget) that the sweep runs next to the paper's.

    fs = fit_first_stages(bench, emb)                 # {"description": w [F], "named": w [F]}, train BM25
    models = fit_rerankers(bench, emb, fs, seeds)     # RerankModels (every seed x fold)
    pq = budget_per_query(ev, chosen, family, ...)    # per-query test metrics at each budget's λ
    section = risk_budget_section(chosen, pq)         # results.json "risk_budget" for one split

Why apart from run.py: the beyond-paper families add steps the paper's rows do not need.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.experiments.evaluate import rank_slices
from riskrank_jax.model import rerank
from riskrank_jax.rank.risk_budget import BUDGETS, LAMBDA_GRID, lambda_for_budget, rvr_by_lambda
from riskrank_jax.retrieve import baselines, first_stage
from riskrank_jax.retrieve.hybrid import choose_weights, fuse
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET

BUDGET_FAMILIES = {"hybrid_risk": "hybrid", "rerank_risk": "rerank"}  # budget row -> relevance it penalises


@dataclass(frozen=True)
class FirstStages:
    """Per text kind ("description", "named"): hybrid weight per fold [F], and the training queries' BM25 and
    cosine over the named tool texts [Q_train, N] (the reranker's training features)."""

    weights: dict
    train_bm25_named: np.ndarray
    train_dense_named: np.ndarray


def fit_first_stages(bench, emb) -> FirstStages:
    """Choose each fold's hybrid weight on its training queries (NDCG@5), for both tool texts."""
    texts = {"description": bench.tools.descriptions, "named": bench.tools.named_texts}
    t_embs = {"description": emb["tools"], "named": emb["tools_named"]}
    weights, bm25, dense = {}, {}, {}
    for kind, tool_texts in texts.items():
        bm25[kind] = baselines.bm25_scores(list(tool_texts), list(bench.train.texts))
        dense[kind] = np.asarray(first_stage.dense_scores(jnp.asarray(emb["train"]), jnp.asarray(t_embs[kind])))
        weights[kind] = choose_weights(dense[kind], bm25[kind], bench.train.gold, bench.train_fold_mask)
    return FirstStages(weights, bm25["named"], dense["named"])


def fit_rerankers(bench, emb, fs: FirstStages, seeds, config: rerank.RerankConfig, *,
                  memory_budget: int = DEFAULT_MEMORY_BUDGET) -> rerank.RerankModels:
    """The correction reranker of every seed x fold over the named tool texts (``memory_budget``: bytes of its
    training intermediates)."""
    return rerank.train_rerankers(emb["train"], emb["tools_named"], fs.train_bm25_named, bench.train.gold,
                                  bench.train_fold_mask, seeds, config, fold_weight=fs.weights["named"],
                                  memory_budget=memory_budget)


def rerank_summary(models: rerank.RerankModels) -> dict:
    """results.json "rerank": per model its hybrid weight, gate and held-out NDCG@5 of every gate."""
    return {"config": models.config.to_dict(), "weight": np.asarray(models.weight).tolist(),
            "gate": np.asarray(models.gate).tolist(),
            "heldout_ndcg@5_by_gate": np.round(np.asarray(models.heldout_ndcg_by_gate), 4).tolist()}


def _training_relevance(family: str, bench, emb, fs: FirstStages, runs, n_seeds: int):
    """Relevance of every training query under every model m = s·F + f: [M, Q_train, N]."""
    n_folds = bench.n_folds
    if family == "rerank":
        return np.asarray(rerank.all_model_scores(runs["rerank"], emb["train"], emb["tools_named"],
                                                  fs.train_bm25_named))
    w = fs.weights["named"]
    per_fold = [np.asarray(fuse(fs.train_dense_named, fs.train_bm25_named, w[f])) for f in range(n_folds)]
    return np.stack([per_fold[f] for _ in range(n_seeds) for f in range(n_folds)])


def choose_budget_lambdas(family, bench, emb, fs, runs, seeds) -> dict:
    """{B: (λ per model [M], held-out mean RVR@5 at that λ per model [M])} on each model's held-out queries."""
    rel = _training_relevance(family, bench, emb, fs, runs, len(seeds))
    held = runs["rerank"].heldout_mask if "rerank" in runs else rerank.heldout_masks(
        bench.train_fold_mask, seeds, rerank.RerankConfig().heldout_fraction)[1]
    risk = np.asarray(runs["risk_only"])  # [S, N]
    n_folds = bench.n_folds
    rows = [np.flatnonzero(h) for h in held]  # each model's held-out queries, padded to one length below
    idx = np.stack([np.resize(r, max(map(len, rows))) for r in rows])
    rel_held = np.take_along_axis(rel, idx[:, :, None], axis=1)  # [M, H, N]
    risk_m = risk[np.arange(rel.shape[0]) // n_folds][:, None, :]  # [M, 1, N]
    rvr_all = np.asarray(rvr_by_lambda(rel_held, risk_m, bench.tools.risk, LAMBDA_GRID))  # [L, M, H]
    out = {b: ([], []) for b in BUDGETS}
    for m, r in enumerate(rows):
        mean = rvr_all[:, m, :len(r)].mean(-1)
        for b in BUDGETS:
            lam, i = lambda_for_budget(mean, LAMBDA_GRID, b)
            out[b][0].append(lam)
            out[b][1].append(float(mean[i]))
    return {b: (np.asarray(l), np.asarray(h)) for b, (l, h) in out.items()}


def budget_per_query(ev, chosen: dict, family: str, risk, n_seeds: int, n_folds: int) -> dict:
    """Per-query test metrics at the λ chosen for each budget: {B: {"rvr@5", "ndcg@5": [S, Q]}}.

    ev: a SplitEvaluation (its hybrid / reranked relevance, its queries' folds); chosen: ``choose_budget_lambdas``;
    risk: [S, N] risk-only head predictions; each test query uses the λ of its own (seed, fold) model."""
    rel = ev.hybrid("named")[None] if family == "hybrid" else ev.reranked("named")  # [S|1, Q, N]
    m_of = np.arange(n_seeds)[:, None] * n_folds + np.asarray(ev.x.fold)[None, :]  # [S, Q]
    out = {}
    for b, (lams, _) in chosen.items():
        lam_q = jnp.asarray(lams[m_of], jnp.float32)[..., None]  # [S, Q, 1]
        pq = ev.per_query(rank_slices(rel - lam_q * jnp.asarray(risk)[:, None, :]))
        out[b] = {m: pq[m] for m in ("rvr@5", "ndcg@5")}
    return out


def risk_budget_section(chosen: dict, per_query: dict) -> dict:
    """Test metrics at the λ chosen for each budget: {B: {lambda, heldout_rvr@5, rvr@5, ndcg@5, calibration}}.

    chosen: ``choose_budget_lambdas``; per_query: ``budget_per_query`` over the split's queries."""
    out = {}
    for b, (lams, held_rvr) in chosen.items():
        summary = metrics.summarize({m: x.mean(-1) for m, x in per_query[b].items()})
        out[str(b)] = {"budget": b, "lambda_mean": round(float(lams.mean()), 3),
                       "lambda_per_model": [round(float(x), 2) for x in lams],
                       "heldout_rvr@5": round(float(held_rvr.mean()), 4), **summary,
                       "calibration_error": round(summary["rvr@5"]["mean"] - float(held_rvr.mean()), 4),
                       "within_budget": bool(summary["rvr@5"]["mean"] <= b)}
    return out


FIRST_STAGES = ("bm25", "dense", "hybrid", "hybrid_named")
RISK_AWARE_FAMILIES = ("hybrid_risk", "rerank", "ft_hybrid")


def recommendation(main: dict, families: dict) -> str | None:
    """One sentence: which variant a user should pick on this split, and why.

    The pick: the risk-aware variant (hybrid_risk / rerank / ft_hybrid families) with the highest NDCG@5 among those whose
    RVR@5 is at most the dense retriever's; None when the split has none of these rows.
    """
    firsts = {v: main[v] for v in FIRST_STAGES if v in main}
    pool = {v: m for v, m in main.items() if families.get(v) in RISK_AWARE_FAMILIES}
    if not firsts or not pool or "dense" not in main:
        return None
    dense_rvr = main["dense"]["rvr@5"]["mean"]
    ok = {v: m for v, m in pool.items() if m["rvr@5"]["mean"] <= dense_rvr + 1e-12} or pool
    pick = max(ok, key=lambda v: (ok[v]["ndcg@5"]["mean"], -ok[v]["rvr@5"]["mean"]))
    best_first = max(firsts, key=lambda v: firsts[v]["ndcg@5"]["mean"])
    m, b = main[pick], firsts[best_first]
    verdict = "above" if m["ndcg@5"]["mean"] >= b["ndcg@5"]["mean"] else "below"
    return (f"Pick `{pick}`: NDCG@5 {m['ndcg@5']['mean']:.4f}, {verdict} the best first stage `{best_first}` "
            f"({b['ndcg@5']['mean']:.4f}), with RVR@5 {m['rvr@5']['mean']:.4f} against dense's {dense_rvr:.4f} "
            f"(the highest NDCG@5 among the risk-aware variants that expose no more risky tools than dense).")


__all__ = ["FirstStages", "fit_first_stages", "fit_rerankers", "choose_budget_lambdas", "budget_per_query",
           "risk_budget_section",
           "BUDGET_FAMILIES", "recommendation", "rerank_summary"]
