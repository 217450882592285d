"""How far another CPU may move the sweep's numbers: the demo's paper rows rerun on embeddings moved by one ulp.

    PYTHONPATH=. python benchmarks/reproducibility.py [--fractions 0.01 0.05] [--draws 3] [--out DIR]
                                                      [--against experiments/results/demo/results.json]

Another CPU's floating-point kernels (another vector width, another summation order) change an embedding's
components in the last bit; training and ranking then move a few queries. This script measures that: it runs the
demo's paper rows (``--variants paper``) once as they are, then once per (fraction, draw) with that fraction of
every embedding's components moved by one ulp in a random direction (``np.nextafter``), each run from empty
caches and checkpoints, and compares every perturbed run with the unperturbed one in query units
(``experiments.reproducibility.compare_in_query_units``: |Δ mean|·Q·S, the (query, seed) pairs that changed).
It prints the largest units of one value per metric family, over all runs, which is what
``REPRODUCIBILITY["flip_bounds"]`` states, and with ``--against`` the same comparison of the unperturbed run with
a results.json made elsewhere (e.g. the committed one, made on another CPU). It writes the figures to
<out>/reproducibility.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from riskrank_jax.data import load_benchmark
from riskrank_jax.encode.encoder import load_encoder_lazily
from riskrank_jax.experiments.config import default_config, with_overrides
from riskrank_jax.experiments.reproducibility import REPRODUCIBILITY, compare_in_query_units, query_counts
from riskrank_jax.experiments.run import run_benchmark


class UlpPerturbed:
    """An encoder whose vectors have ``fraction`` of their components moved by one ulp (direction and place drawn
    from ``seed``); everything else is the wrapped encoder's. Its model_id differs, so no cache mixes the two."""

    def __init__(self, encoder, fraction: float, seed: int):
        self._encoder, self.fraction, self.seed = encoder, fraction, seed
        self.model_id = f"{encoder.model_id}+ulp{fraction:g}-{seed}"

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode(self, texts, **kwargs):
        vecs = np.asarray(self._encoder.encode(texts, **kwargs), np.float32)
        rng = np.random.default_rng(self.seed)
        moved = rng.random(vecs.shape) < self.fraction
        toward = np.where(rng.random(vecs.shape) < 0.5, np.float32(-np.inf), np.float32(np.inf))
        return np.where(moved, np.nextafter(vecs, toward), vecs).astype(np.float32)


def paper_rows(root: Path, encoder, bench):
    cfg = with_overrides(default_config("demo"), {"eval.variants": ("paper",), "eval.smoothing_benchmark": False,
                                                   "runtime.cache_dir": str(root / "cache"),
                                                   "runtime.checkpoint_dir": str(root / "ckpt")})
    return run_benchmark(cfg, root / "runs", force=True, bench=bench, encoder=encoder, report_to=lambda _: None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--against", type=Path, default=None, help="a results.json of the demo made elsewhere")
    ap.add_argument("--out", type=Path, default=Path("runs/reproducibility"))
    args = ap.parse_args(argv)
    bench = load_benchmark("demo")
    encoder = load_encoder_lazily()
    counts = query_counts(bench)
    bounds = REPRODUCIBILITY["flip_bounds"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = paper_rows(tmp / "base", encoder, bench)
        n_seeds = len(base["seeds"])
        runs = {}
        for fraction in args.fractions:
            for draw in range(args.draws):
                res = paper_rows(tmp / f"p{fraction:g}-{draw}", UlpPerturbed(encoder, fraction, draw), bench)
                r = compare_in_query_units(base, res, counts, n_seeds, bounds)
                runs[f"{fraction:g}/{draw}"] = {k: r[k] for k in ("compared", "changed", "max_units", "flipped")}
                print(f"ulp on {fraction:.1%} of components, draw {draw}: {r['changed']} of {r['compared']} values "
                      f"moved; largest units per family {r['max_units']}", flush=True)
    families = list(bounds)
    measured = {f: max(r["max_units"][f] for r in runs.values()) for f in families}
    out = {"benchmark": "demo", "rows": "paper", "query_counts": counts, "seeds": n_seeds, "runs": runs,
           "max_units": measured}
    print("largest units of one value over all runs:", measured)
    if args.against is not None:
        other = json.loads(args.against.read_text())
        r = compare_in_query_units(other, base, counts, n_seeds, bounds)
        out["against"] = {"file": str(args.against), **{k: r[k] for k in ("compared", "changed", "max_units",
                                                                          "flipped")}}
        print(f"this machine's run against {args.against}: {r['changed']} of {r['compared']} values moved; largest "
              f"units per family {r['max_units']}; summed {r['flipped']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "reproducibility.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out / 'reproducibility.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
