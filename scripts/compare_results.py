"""Compare the values of two sweep results.json files (e.g. before and after a refactor).

    python scripts/compare_results.py before.json after.json [--tol 0] [--ignore KEY ...]

Walks both JSON trees and compares every leaf (numbers within --tol, everything else exactly), skipping
keys that describe the run rather than its results (timings, throughput, memory, run key, device).
Prints the number of values compared, how many differ (with the first few paths), the largest absolute
difference and the paths present on one side only. Exit status 1 when any value differs beyond --tol or a
value of `before` is missing from `after`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

# run metadata and derived text, not measured values; a key of this list is skipped at any depth (e.g. the
# "config" tree's runtime.cache_dir: where a run kept its files is not a result)
IGNORED = ("timings", "smoothing_throughput", "peak_rss_mb", "memory_budget", "run_key", "device", "finished_at",
           "reproducibility", "recommendation", "cache_dir", "checkpoint_dir", "data_dir", "side_by_side")


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


def _differ(a, b, tol: float) -> tuple[bool, float]:
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
    args = ap.parse_args(argv)
    with open(args.before) as f:
        before = json.load(f)
    with open(args.after) as f:
        after = json.load(f)
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


if __name__ == "__main__":
    sys.exit(main())
