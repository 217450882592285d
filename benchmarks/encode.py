"""Encoder throughput on the real UltraTool tool descriptions: compile time and warm texts/s.

Reads `<data>/ultratool/from_paper_release/ultratool_risk_labels_resolved.json` ({name: {risk_level,
description}}) directly and encodes every description (the tool text of the pool). The first pass compiles one
program per (batch, length bucket) shape; the warm passes reuse them.

    python benchmarks/encode.py [--data-dir DIR] [--encoder DIR] [--batch-size 64 128] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LABEL_FILE = Path("ultratool") / "from_paper_release" / "ultratool_risk_labels_resolved.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="benchmark root (default: $RISKRANK_DATA or ../shared/datasets)")
    ap.add_argument("--encoder", default=None, help="model directory or hub id (default: embedded all-MiniLM-L6-v2)")
    ap.add_argument("--batch-size", type=int, nargs="+", default=[64])
    ap.add_argument("--repeats", type=int, default=2, help="warm passes per batch size")
    ap.add_argument("--limit", type=int, default=None, help="encode only the first N descriptions")
    args = ap.parse_args()

    import jax
    import numpy as np

    from riskrank_jax.encoder import load_encoder
    from riskrank_jax.paths import resolve_data_dir

    path = resolve_data_dir(args.data_dir) / LABEL_FILE
    labels = json.loads(path.read_text(encoding="utf-8"))
    texts = [str(v.get("description") or "").strip() or name for name, v in labels.items()]
    if args.limit:
        texts = texts[: args.limit]

    t0 = time.perf_counter()
    enc = load_encoder(args.encoder)
    load_s = time.perf_counter() - t0
    lengths = [len(x) for x in enc.tokenize(texts)]
    per_bucket = Counter(enc.bucket_for(n) for n in lengths)

    print(f"encoder   {enc.model_id}")
    print(f"devices   {len(jax.devices())} x {jax.devices()[0].device_kind} ({jax.default_backend()}), "
          f"{platform.processor() or platform.machine()}")
    print(f"texts     {len(texts)} UltraTool tool descriptions from {path}")
    print(f"tokens    mean {np.mean(lengths):.1f}, max {max(lengths)}; texts per bucket "
          + ", ".join(f"{b}:{per_bucket[b]}" for b in sorted(per_bucket)))
    print(f"load      {load_s:.2f} s (weights, tokenizer, sha256)")
    print()
    print(f"{'batch':>5} {'shapes':>6} {'compile s':>9} {'cold s':>7} {'warm s':>7} {'texts/s':>8} "
          f"{'tokens/s':>9} {'max|warm-cold|':>14}")
    for bs in args.batch_size:
        before = dict(enc.compile_seconds)
        t = time.perf_counter()
        cold = enc.encode(texts, batch_size=bs, progress=False)
        cold_s = time.perf_counter() - t
        new = {k: v for k, v in enc.compile_seconds.items() if k not in before}
        warm_times = []
        for _ in range(max(1, args.repeats)):
            t = time.perf_counter()
            warm = enc.encode(texts, batch_size=bs, progress=False)
            warm_times.append(time.perf_counter() - t)
        warm_s = statistics.median(warm_times)
        n_tok = sum(lengths)
        print(f"{enc.effective_batch_size(bs):>5} {len(new):>6} {sum(new.values()):>9.2f} {cold_s:>7.2f} "
              f"{warm_s:>7.2f} {len(texts) / warm_s:>8.1f} {n_tok / warm_s:>9.0f} "
              f"{float(np.max(np.abs(warm - cold))):>14.1e}")
        for (b, length), s in sorted(new.items()):
            print(f"      compiled ({b}, {length}) in {s:.2f} s")


if __name__ == "__main__":
    main()
