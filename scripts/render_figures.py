"""Redraw the figures (and, with --tables, tables.md) of committed results from their results.json, without
rerunning anything: lambda_sweep.png, tradeoff.png and pareto.png under each results directory.

    python scripts/render_figures.py [--tables] [DIR ...]     # default: experiments/results/*/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from riskrank_jax.experiments import report  # noqa: E402
from riskrank_jax.experiments.figures import plot_figures  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="results directories holding results.json")
    ap.add_argument("--tables", action="store_true", help="also rewrite tables.md from results.json")
    args = ap.parse_args(argv)
    dirs = args.dirs or sorted(p.parent for p in (REPO / "experiments" / "results").glob("*/results.json"))
    for d in dirs:
        res = json.loads((d / "results.json").read_text())
        written = plot_figures(res, d)
        if args.tables:
            (d / "tables.md").write_text(report.tables_markdown(res) + report.run_tables(res))
            written.append(d / "tables.md")
        print(f"{d}: " + ", ".join(p.name for p in written))


if __name__ == "__main__":
    main()
