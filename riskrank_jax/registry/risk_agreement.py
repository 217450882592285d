"""How well a risk score matches audited labels: AUC of detecting r >= 3, Spearman's rho, and
out-of-fold scores of the learned head (k-fold cross-validation).

Why rank statistics: a risk score only has to order tools, not match levels exactly.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from riskrank_jax.model.risk_head import HeadConfig, levels_from_scores, predict, train_risk_head
from riskrank_jax.permissions import permission_mask
from riskrank_jax.registry.permissions import permission_mask_words
from riskrank_jax.registry.risk import DEFAULT_KEYWORD_FLOORS, keyword_floor
from riskrank_jax.scoring import RISK_THRESHOLD

HIGH_RISK = RISK_THRESHOLD  # r >= 3 counts as high risk (as in the metrics' RVR)


def auc(scores, labels, threshold: int = HIGH_RISK) -> float:
    """ROC AUC of `scores` [N] separating labels >= threshold from the rest (ties count one half); NaN if
    one class is empty."""
    scores = np.asarray(scores, np.float64)
    pos = np.asarray(labels) >= threshold
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = stats.rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def spearman(scores, labels) -> float:
    """Spearman's rank correlation of scores [N] with labels [N] (NaN when either is constant)."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels, np.float64)
    if np.ptp(scores) == 0 or np.ptp(labels) == 0:
        return float("nan")
    return float(stats.spearmanr(scores, labels).statistic)


def fold_ids(n: int, folds: int, seed: int = 0) -> np.ndarray:
    """int [N]: a fixed random fold per item, sizes differing by at most one."""
    return np.random.default_rng(seed).permutation(np.arange(n) % folds)


def cross_val_scores(emb, risk, folds: int = 5, config: HeadConfig = HeadConfig()) -> np.ndarray:
    """float [N]: each tool's f_risk from a head trained on the other folds."""
    emb, risk = np.asarray(emb, np.float32), np.asarray(risk)
    fid = fold_ids(len(risk), folds, config.seed)
    out = np.zeros(len(risk), np.float32)
    for f in range(folds):
        test = fid == f
        params, _ = train_risk_head(emb[~test], risk[~test], config)
        out[test] = predict(params, emb[test])
    return out


def score_report(scores, labels) -> dict:
    """{"auc_r>=3", "spearman"} rounded to 4 places."""
    return {"auc_r>=3": round(auc(scores, labels), 4), "spearman": round(spearman(scores, labels), 4)}


def compare_sources(learned, texts, risk, floors: dict | None = None) -> dict:
    """AUC (r >= 3) and Spearman rho of the risk sources alone and combined, for labelled tools.

    learned: f_risk [N] (out-of-fold or from a head trained elsewhere); texts: tool texts [N]; risk: labels
    [N]. Rows: the learned head (continuous and as a level), the keyword prior (the paper's substring rule
    and the word rule, counting categories; the word rule's category floors), and the combination that
    `assess_risk` uses (continuous score and level).
    """
    floors = DEFAULT_KEYWORD_FLOORS if floors is None else floors
    f = np.asarray(learned, np.float64)
    words = permission_mask_words(list(texts))
    kw = keyword_floor(words, floors)
    rows = {
        "learned head f_risk": 1 + 4 * f,
        "learned head level": levels_from_scores(f),
        "keywords, substring rule (categories)": permission_mask(list(texts)).sum(1),
        "keywords, word rule (categories)": words.sum(1),
        "keywords, word rule (floors)": kw,
        "combined score max(f_risk, floors)": np.maximum(1 + 4 * f, kw),
        "combined level (assess_risk)": np.maximum(levels_from_scores(f), kw),
    }
    return {k: score_report(v, risk) for k, v in rows.items()}
