"""How well a risk score matches audited labels: AUC of detecting r >= 3, Spearman's rho, and
out-of-fold scores of the learned head (k-fold cross-validation)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from riskrank_jax.registry.risk_head import HeadConfig, predict, train_risk_head

HIGH_RISK = 3  # r >= 3 counts as high risk (as in the metrics' RVR)


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
