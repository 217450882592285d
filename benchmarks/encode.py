"""Encoding throughput, riskrank-jax against sentence-transformers (torch, CPU), side by side in one run.

Texts: UltraTool's 2,032 tool descriptions (`<data>/ultratool/from_paper_release/ultratool_risk_labels_resolved.json`,
{name: {risk_level, description}}), or the embedded demo's 263 tool descriptions when that file is absent.
Both encoders load the same all-MiniLM-L6-v2 weights (or --encoder DIR), use the same batch size and
normalise. After one warm-up pass each (riskrank-jax compiles there), the two are timed alternately,
`--repeats` times each, and the best pass of each counts, so background load hits both alike.

Prints texts/s, padded tokens (what each actually ran through the model), the speed ratio and the max abs
difference of the embeddings (must be <= 1e-5). Needs the optional extra: pip install -e ".[bench]".

    python benchmarks/encode.py [--data-dir DIR] [--encoder DIR] [--batch-size 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np
import torch
from sentence_transformers import SentenceTransformer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from riskrank_jax.encode.encoder import load_encoder  # noqa: E402
from riskrank_jax.encode.sentence_config import default_model_dir  # noqa: E402
from riskrank_jax.errors import RiskRankError  # noqa: E402
from riskrank_jax.paths import resolve_data_dir  # noqa: E402

LABEL_FILE = Path("ultratool") / "from_paper_release" / "ultratool_risk_labels_resolved.json"
DEMO_TOOLS = Path(__file__).resolve().parent.parent / "riskrank_jax" / "data" / "demo" / "tool.jsonl"


def load_texts(data_dir: str | None) -> tuple[list[str], str]:
    """UltraTool's tool descriptions when available, else the demo's; with a label saying which."""
    try:
        path = resolve_data_dir(data_dir) / LABEL_FILE
    except RiskRankError:
        path = None
    if path is not None and path.is_file():
        labels = json.loads(path.read_text(encoding="utf-8"))
        return [str(v.get("description") or "").strip() or k for k, v in labels.items()], f"UltraTool ({path})"
    rows = [json.loads(line) for line in DEMO_TOOLS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["api_description"] for r in rows], f"demo ({DEMO_TOOLS}; UltraTool not found)"


def st_padded_tokens(tokenizer, texts: list[str], batch_size: int, max_len: int) -> int:
    """Tokens sentence-transformers runs: it sorts texts by character length (longest first) and pads each
    batch to its longest tokenised text."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    lens = [len(x) for x in tokenizer([texts[i] for i in order], truncation=True, max_length=max_len)["input_ids"]]
    return sum(len(lens[i : i + batch_size]) * max(lens[i : i + batch_size]) for i in range(0, len(lens), batch_size))


def jax_padded_tokens(enc, texts: list[str], batch_size: int) -> int:
    """Tokens riskrank-jax runs: each packed batch's rows times its row length."""
    lengths = np.array([len(x) for x in enc.tokenize(texts)])
    return sum(n_rows * length for _, length, n_rows in enc.batches(lengths, batch_size))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="benchmark root (default: $RISKRANK_DATA; layout: docs/data.md)")
    ap.add_argument("--encoder", default=None, help="local model directory (default: embedded all-MiniLM-L6-v2)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes of each encoder (best counts)")
    args = ap.parse_args()
    texts, source = load_texts(args.data_dir)
    model_dir = Path(args.encoder).resolve() if args.encoder else default_model_dir()
    enc = load_encoder(model_dir)
    st = SentenceTransformer(str(model_dir), device="cpu")
    bs = args.batch_size

    def run_jax():
        return enc.encode(texts, batch_size=bs, progress=False)

    def run_st():
        return st.encode(texts, batch_size=bs, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)

    t = time.perf_counter()
    ours = run_jax()
    cold = time.perf_counter() - t
    ref = run_st()
    best = {"riskrank-jax": float("inf"), "sentence-transformers": float("inf")}
    for _ in range(max(1, args.repeats)):
        for name, fn in (("riskrank-jax", run_jax), ("sentence-transformers", run_st)):
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    real = sum(len(x) for x in enc.tokenize(texts))
    padded = {"riskrank-jax": jax_padded_tokens(enc, texts, bs),
              "sentence-transformers": st_padded_tokens(enc.tokenizer, texts, bs, enc.max_seq_length)}

    print(f"encoder  {enc.model_id}")
    print(f"machine  {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}; jax {jax.__version__} "
          f"({len(jax.devices())} {jax.default_backend()} device), torch {torch.__version__} "
          f"({torch.get_num_threads()} threads)")
    print(f"texts    {len(texts)} tool descriptions from {source}; {real} real tokens; batch size {bs}")
    print(f"riskrank-jax first pass (compiles {len(enc.compiled_shapes)} shapes) {cold:.2f} s")
    print()
    print(f"{'encoder':<22} {'best s':>7} {'texts/s':>8} {'padded tokens':>13} {'padded tok/s':>12}")
    for name, sec in best.items():
        print(f"{name:<22} {sec:>7.3f} {len(texts) / sec:>8.1f} {padded[name]:>13} {padded[name] / sec:>12.0f}")
    ratio = best["sentence-transformers"] / best["riskrank-jax"]
    diff = float(np.max(np.abs(ours - ref)))
    print()
    print(f"speed ratio riskrank-jax / sentence-transformers: {ratio:.2f}x (texts/s)")
    print(f"max |riskrank-jax - sentence-transformers| = {diff:.2e} ({'ok' if diff <= 1e-5 else 'ABOVE 1e-5'})")


if __name__ == "__main__":
    main()
