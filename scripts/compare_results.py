"""Compare the values of two sweep results.json files (e.g. before and after a refactor).

    python scripts/compare_results.py before.json after.json [--tol 0] [--ignore KEY ...]
    python scripts/compare_results.py before.json after.json --query-units [--data-dir DIR]

Walks both JSON trees and compares every leaf (numbers within --tol, everything else exactly), skipping
keys that describe the run rather than its results (timings, throughput, memory, run key, device).
Prints the number of values compared, how many differ (with the first few paths), the largest absolute
difference and the paths present on one side only. Exit status 1 when any value differs beyond --tol or a
value of `before` is missing from `after`.

With --query-units (runs from two machines), the metric sections are compared by the rule of results.json's
"reproducibility": each mean and std in (query, seed) pairs flipped, within its metric family's flip bound
(riskrank_jax.experiments.reproducibility); the benchmark, named in the files, is loaded for its query counts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

# run metadata and derived text, not measured values; a key of this list is skipped at any depth (e.g. the
# "config" tree's runtime.cache_dir: where a run kept its files is not a result)
IGNORED = ("timings", "smoothing_throughput", "peak_rss_mb", "memory_budget", "run_key", "device", "finished_at",
           "reproducibility", "recommendation", "cache_dir", "checkpoint_dir", "data_dir", "side_by_side",
           "cost_s", "common_cost_s")  # the last two: LiveMCPBench's wall-clock seconds per row and shared step


def leaves(tree, prefix=""):
    """{path: leaf} of a JSON tree (dict keys and list indices joined by '/')."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, list):
        items = enumerate(tree)
    else:
        return {prefix: tree}
    out = {}
    for k, v in items:
        out.update(leaves(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


def _undefined(x) -> bool:
    """None or NaN: a metric with no value (results.json writes NaN as null; older LiveMCPBench files wrote NaN)."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def _differ(a, b, tol: float) -> tuple[bool, float]:
    if _undefined(a) and _undefined(b):
        return False, 0.0
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return False, 0.0
        d = abs(float(a) - float(b))
        return not d <= tol, d
    return a != b, 0.0


def compare(before: dict, after: dict, tol: float = 0.0, ignore=IGNORED) -> dict:
    def kept(tree: dict) -> dict:
        return {p: v for p, v in leaves(tree).items() if not set(p.split("/")) & set(ignore)}

    lb, la = kept(before), kept(after)
    common = sorted(set(lb) & set(la))
    diffs, max_abs = [], 0.0
    for path in common:
        bad, d = _differ(lb[path], la[path], tol)
        max_abs = max(max_abs, d)
        if bad:
            diffs.append(path)
    return {"compared": len(common), "differing": diffs, "max_abs_diff": max_abs,
            "only_before": sorted(set(lb) - set(la)), "only_after": sorted(set(la) - set(lb))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--tol", type=float, default=0.0, help="largest allowed absolute difference (default 0)")
    ap.add_argument("--ignore", nargs="*", default=list(IGNORED), help="top-level keys to skip")
    ap.add_argument("--query-units", action="store_true",
                    help="compare the metrics in flipped (query, seed) pairs within results.json's flip bounds")
    ap.add_argument("--data-dir", default=None, help="the real benchmarks' root (for --query-units)")
    args = ap.parse_args(argv)
    with open(args.before) as f:
        before = json.load(f)
    with open(args.after) as f:
        after = json.load(f)
    if args.query_units:
        return query_units_main(before, after, args.data_dir)
    r = compare(before, after, args.tol, tuple(args.ignore))
    print(f"values compared: {r['compared']}")
    print(f"values differing (tol {args.tol}): {len(r['differing'])}")
    print(f"max abs diff: {r['max_abs_diff']:.3g}")
    for path in r["differing"][:20]:
        print(f"  differs: {path}")
    for side in ("only_before", "only_after"):
        if r[side]:
            print(f"{side.replace('_', ' in ')}: {len(r[side])} value(s), e.g. {', '.join(r[side][:5])}")
    return 1 if r["differing"] or r["only_before"] else 0


def query_units_main(before: dict, after: dict, data_dir) -> int:
    """Print the query-unit comparison of two runs of one benchmark; exit status 1 when a value is over its
    bound or missing from ``before``."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.experiments.reproducibility import REPRODUCIBILITY, compare_in_query_units, query_counts

    if before.get("benchmark") != after.get("benchmark"):
        print(f"the files hold different benchmarks: {before.get('benchmark')} and {after.get('benchmark')}")
        return 1
    bounds = after.get("reproducibility", {}).get("flip_bounds") or REPRODUCIBILITY["flip_bounds"]
    counts = query_counts(load_benchmark(after["benchmark"], data_dir))
    r = compare_in_query_units(before, after, counts, len(after["seeds"]), bounds)
    print(f"values compared: {r['compared']}; moved: {r['changed']}")
    print(f"largest (query, seed) pairs flipped in one value, per family: {r['max_units']} (bounds {bounds})")
    print(f"summed over the means: {r['flipped']}")
    for path, units, bound in r["exceeding"][:20]:
        print(f"  over its bound: {path}: {units:g} > {bound}")
    if r["missing"]:
        print(f"only in after: {len(r['missing'])} value(s), e.g. {', '.join(r['missing'][:5])}")
    return 1 if r["exceeding"] or r["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
