"""Add the derived fields that newer code writes (recommendation per split, the reproducibility statement) to results.json files made by an
earlier commit of the sweep, then redraw their tables and figures. Metric values are not touched.

    python scripts/finish_results.py experiments/results/demo [...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from riskrank_jax.experiments import beyond, report  # noqa: E402
from riskrank_jax.experiments.run import REPRODUCIBILITY  # noqa: E402


def main(dirs) -> None:
    for d in map(Path, dirs):
        res = json.loads((d / "results.json").read_text())
        res["recommendation"] = {split: beyond.recommendation(main, res.get("variant_families", {}))
                                 for split, main in res["main"].items()}
        res.setdefault("reproducibility", REPRODUCIBILITY)
        report.write_outputs(res, d)
        print(f"{d}: recommendation added, tables and figures redrawn")


if __name__ == "__main__":
    main(sys.argv[1:])
