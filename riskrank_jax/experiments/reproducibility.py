"""What a rerun of the sweep may differ by, and the rule that compares two runs at each metric's granularity.

A mean metric of results.json is a mean over S seeds of a mean over Q queries (Q: the split, or the subset a
context metric averages over, or the stress queries), so it moves in steps: one query whose ranking changes in one
seed moves it by at most 1/(Q·S) (per-query values lie in [0, 1]). Two runs on different CPUs differ where a
query's scores lie within the other CPU's float noise of a crossing (after the tie rule of ``scoring``, equal
scores are never such a place), so their difference is counted in *query units*: |Δ mean|·Q·S for a mean, the
number of (query, seed) pairs that must have changed at least; |Δ std|·Q·√(S−1) for a seed standard deviation
(the sample std is Lipschitz: |std(v) − std(w)| ≤ ‖v − w‖₂/√(S−1) ≤ ‖v − w‖₁/√(S−1)). A comparison passes when
every value's units are within its metric family's bound, which ``benchmarks/reproducibility.py`` measured by
moving embedding components by one ulp (what another CPU's kernels change) and rerunning the demo's paper rows.

    counts = query_counts(bench)                               # {split: {"all", "high_risk", "safe"}}
    report = compare_in_query_units(committed, rerun, counts, n_seeds=3, bounds=REPRODUCIBILITY["flip_bounds"])
    report["exceeding"], report["flipped"]                     # paths over their bound; units per family

Why units and not one absolute tolerance: a tolerance right for 149 queries is wrong for the 46 that need a
risky tool (one flip there is 0.0072), and one that admits that admits a real regression of the whole split.
"""

from __future__ import annotations

import math

import numpy as np

from riskrank_jax import metrics

# per-query metric -> the family whose bound applies (the families move together under one flipped query)
METRIC_FAMILIES = {
    "ndcg@5": "ndcg", "ndcg@10": "ndcg", "sndcg@5": "ndcg",
    "mrr": "mrr",
    "recall@10": "recall", "success@5": "recall",
    "rvr@5": "exposure", "srr@5": "exposure", "safe_rvr@5": "exposure", "rvr@5_high_risk": "exposure",
    "needrisk_hit@5": "needrisk",
}
# the query subset a context metric averages over (metrics.context_metrics); the others average over all
METRIC_SUBSETS = {"safe_rvr@5": "safe", "needrisk_hit@5": "high_risk", "rvr@5_high_risk": "high_risk"}
# results.json sections whose leaves are {row: ... {metric: {"mean", "std"}}} per split
COMPARED_SECTIONS = ("main", "lambda_sweep", "edge_ablation", "context", "stress", "exposure")

# results.json "reproducibility": measured by benchmarks/reproducibility.py (docs/protocols.md, "Reproducibility").
# A bound is twice the largest units of one value measured, and at least the seeds (one query in every seed).
REPRODUCIBILITY = {
    "same_machine": "bit-identical (any thread count)",
    "across_cpus": "every mean and std within its metric family's flip bound in query units: |Δ mean|·Q·S "
                   "(|Δ std|·Q·√(S−1)), Q the queries the metric averages over and S the seeds, i.e. the (query, "
                   "seed) pairs whose ranking changed at least; ties within 16 float32 ulps of a query's top score "
                   "are broken by tool index on every machine",
    "flip_bounds": {"ndcg": 6, "mrr": 5, "recall": 12, "exposure": 6, "needrisk": 3},
    "how_measured": "the demo's paper rows (570 means and stds): 18 reruns with 0.1-10% of the embedding components "
                    "moved by one ulp, from empty caches, against the unperturbed run, moved one value by at most "
                    "ndcg 1.9, mrr 2.2, recall 3.0, exposure 2.8, needrisk 1.0 units; a rerun on an AMD EPYC of "
                    "family 26 against the committed results (made on another x86-64 CPU) by at most ndcg 2.6, "
                    "mrr 2.1, recall 5.7, exposure 2.2, needrisk 1.0; two runs on one machine with 1 and 2 threads "
                    "are bit-identical. tests/test_reproducibility.py reruns the demo from empty caches and compares "
                    "with the committed results by this rule",
}


def query_counts(bench) -> dict[str, dict[str, int]]:
    """{split: {"all": Q, "high_risk": queries needing a risky tool, "safe": the others}}: the denominators of
    the means in results.json (``metrics.is_high_risk_query``; the stress rows' is their section's "n")."""
    out = {}
    for split, qs in bench.tests.items():
        high = np.asarray(metrics.is_high_risk_query(np.asarray(qs.gold), np.asarray(bench.tools.risk)), bool)
        out[split] = {"all": int(high.size), "high_risk": int(high.sum()), "safe": int((~high).sum())}
    return out


def _value_leaves(section: str, tree, prefix: tuple = ()):
    """(path parts, metric, "mean" | "std", value) of every {metric: {"mean", "std"}} leaf under ``tree``."""
    if isinstance(tree, dict):
        if set(tree) == {"mean", "std"} and prefix and prefix[-1] in METRIC_FAMILIES:
            for stat in ("mean", "std"):
                yield prefix, prefix[-1], stat, tree[stat]
            return
        for k, v in tree.items():
            yield from _value_leaves(section, v, (*prefix, str(k)))


def units_of(delta: float, stat: str, n_queries: int, n_seeds: int) -> float:
    """Query units of a difference ``delta`` of a mean (|Δ|·Q·S) or a seed std (|Δ|·Q·√(S−1); S = 1: no std)."""
    if stat == "mean":
        return abs(delta) * n_queries * n_seeds
    return abs(delta) * n_queries * math.sqrt(max(n_seeds - 1, 1))


def compare_in_query_units(before: dict, after: dict, counts: dict, n_seeds: int, bounds: dict,
                           sections=COMPARED_SECTIONS) -> dict:
    """Every mean / std of ``after`` in ``sections`` against ``before``, in query units.

    Args:
      before, after: results.json trees (``after`` may hold fewer rows: its values are the ones compared).
      counts: ``query_counts`` of the benchmark, {split: {"all", "high_risk", "safe"}}.
      n_seeds: S, the seeds each mean is taken over.
      bounds: {family: largest allowed units} (``REPRODUCIBILITY["flip_bounds"]``).

    Returns:
      {"compared": int, "missing": [paths of ``after`` absent from ``before``], "exceeding": [(path, units,
      bound)], "flipped": {family: units summed over the compared means}, "max_units": {family: largest units
      of one value}, "changed": number of values that differ at all}. Units are rounded to 1e-6 (float32 means).
    """
    report = {"compared": 0, "missing": [], "exceeding": [], "changed": 0,
              "flipped": {f: 0.0 for f in bounds}, "max_units": {f: 0.0 for f in bounds}}
    for section in sections:
        for split, rows in (after.get(section) or {}).items():
            for parts, metric, stat, value in _value_leaves(section, rows):
                path = "/".join((section, split, *parts, stat))
                ref = _at(before, (section, split, *parts, stat))
                if ref is None:
                    report["missing"].append(path)
                    continue
                report["compared"] += 1
                if isinstance(value, float) and isinstance(ref, float) and math.isnan(value) and math.isnan(ref):
                    continue
                n = int(after["stress"][split]["n"]) if section == "stress" else \
                    counts[split][METRIC_SUBSETS.get(metric, "all")]
                units = round(units_of(float(value) - float(ref), stat, n, n_seeds), 6)
                family = METRIC_FAMILIES[metric]
                report["changed"] += units > 0
                if stat == "mean":
                    report["flipped"][family] = round(report["flipped"][family] + units, 6)
                report["max_units"][family] = max(report["max_units"][family], units)
                if units > bounds[family]:
                    report["exceeding"].append((path, units, bounds[family]))
    return report


def _at(tree, parts):
    for p in parts:
        if not isinstance(tree, dict) or p not in tree:
            return None
        tree = tree[p]
    return tree


__all__ = ["REPRODUCIBILITY", "METRIC_FAMILIES", "METRIC_SUBSETS", "COMPARED_SECTIONS", "query_counts", "units_of",
           "compare_in_query_units"]
