"""Embedding cache: hits, misses, changed text, another model, corrupted shards. Uses a cheap fake encoder."""

from __future__ import annotations

import hashlib
import zipfile

import numpy as np
import pytest

from riskrank_jax.encode.embedding_cache import (KEY_DTYPE, EmbeddingCache, embed_texts, embed_texts_with_stats,
                                                 read_shard, text_key, write_shard)
from riskrank_jax.errors import CacheError, RiskRankError


class FakeEncoder:
    """Same interface as riskrank_jax.encode.encoder.Encoder; deterministic vectors from a hash of (model, text)."""

    def __init__(self, model_id: str = "fake-a@0123456789abcdef", dim: int = 8, nan_for: str | None = None):
        self.model_id = model_id
        self.dim = dim
        self.nan_for = nan_for
        self.calls: list[list[str]] = []

    def vector(self, text: str) -> np.ndarray:
        seed = int(hashlib.sha256((self.model_id + "\0" + text).encode()).hexdigest()[:12], 16)
        v = np.random.default_rng(seed).standard_normal(self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def encode(self, texts, *, batch_size=64, progress=None):
        self.calls.append(list(texts))
        out = np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        if self.nan_for is not None:
            for i, t in enumerate(texts):
                if t == self.nan_for:
                    out[i, 0] = np.nan
        return out


TEXTS = ["delete a file", "get the weather", "send an email", "delete a file", "book a flight", "get the weather"]


def encoded_texts(enc: FakeEncoder) -> list[str]:
    return [t for call in enc.calls for t in call]


def test_first_call_encodes_each_unique_text_once_in_input_order(tmp_path):
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    out, st = embed_texts_with_stats(enc, TEXTS, cache)
    assert out.dtype == np.float32 and out.shape == (6, 8)
    assert sorted(encoded_texts(enc)) == ["book a flight", "delete a file", "get the weather", "send an email"]
    for i, t in enumerate(TEXTS):
        np.testing.assert_array_equal(out[i], enc.vector(t))
    assert (st.n_texts, st.n_unique, st.hits, st.misses) == (6, 4, 0, 4)
    assert cache.last_stats is st
    assert st.summary().startswith("encoded 4 new texts, 0 from cache")
    assert cache.count(enc.model_id) == 4


def test_second_run_reads_everything_from_disk(tmp_path):
    enc = FakeEncoder()
    first = embed_texts(enc, TEXTS, EmbeddingCache(tmp_path))
    enc2 = FakeEncoder()  # a new process: new encoder object, new cache object, same directory
    cache2 = EmbeddingCache(tmp_path)
    again = embed_texts(enc2, list(reversed(TEXTS)), cache2)
    assert enc2.calls == []
    np.testing.assert_array_equal(again, first[::-1])
    st = cache2.last_stats
    assert (st.hits, st.misses, st.texts_per_s) == (4, 0, 0.0)
    assert "encoded 0 new texts, 4 from cache" in st.summary()


def test_only_new_texts_are_encoded(tmp_path):
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    embed_texts(enc, TEXTS[:3], cache)
    enc.calls.clear()
    out, st = embed_texts_with_stats(enc, ["send an email", "a new tool", "delete a file"], cache)
    assert encoded_texts(enc) == ["a new tool"]
    assert (st.hits, st.misses) == (2, 1)
    np.testing.assert_array_equal(out[1], enc.vector("a new tool"))


def test_changed_text_is_a_miss(tmp_path):
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    embed_texts(enc, ["delete a file"], cache)
    enc.calls.clear()
    out = embed_texts(enc, ["delete a file ", "Delete a file", "delete a file"], cache)
    assert encoded_texts(enc) == ["delete a file ", "Delete a file"]
    assert not np.array_equal(out[0], out[2]) and not np.array_equal(out[1], out[2])
    assert text_key("é") != text_key("e\u0301")  # exact text: no Unicode normalisation


def test_different_model_never_reads_other_vectors(tmp_path):
    a, b = FakeEncoder("model-a@1111"), FakeEncoder("model-b@2222")
    cache = EmbeddingCache(tmp_path)
    va = embed_texts(a, TEXTS, cache)
    vb = embed_texts(b, TEXTS, cache)
    assert sorted(encoded_texts(b)) == sorted(set(TEXTS))
    assert cache.last_stats.hits == 0
    assert not np.allclose(va, vb)
    np.testing.assert_array_equal(vb[0], b.vector(TEXTS[0]))
    assert cache.model_dir(a.model_id) != cache.model_dir(b.model_id)


def _only_shard(cache: EmbeddingCache, model_id: str):
    shards = sorted(cache.model_dir(model_id).glob("shard-*.npz"))
    assert len(shards) == 1
    return shards[0]


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "garbage"])
def test_damaged_shard_is_discarded_with_warning_and_recomputed(tmp_path, damage):
    enc = FakeEncoder()
    embed_texts(enc, TEXTS, EmbeddingCache(tmp_path))
    shard = _only_shard(EmbeddingCache(tmp_path), enc.model_id)
    data = shard.read_bytes()
    if damage == "truncate":
        shard.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":
        # flip one byte inside the stored vectors (the zip member data is uncompressed)
        with zipfile.ZipFile(shard) as z:
            info = z.getinfo("vectors.npy")
        pos = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
        shard.write_bytes(data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1 :])
    else:
        shard.write_bytes(b"not an npz file at all")
    enc2 = FakeEncoder()
    with pytest.warns(RuntimeWarning, match=shard.name):
        out, st = embed_texts_with_stats(enc2, TEXTS, EmbeddingCache(tmp_path))
    assert st.misses == 4 and st.hits == 0
    assert not shard.exists()
    for i, t in enumerate(TEXTS):
        np.testing.assert_array_equal(out[i], enc2.vector(t))
    # the recomputed vectors were stored again, in a fresh shard
    enc3 = FakeEncoder()
    embed_texts(enc3, TEXTS, EmbeddingCache(tmp_path))
    assert enc3.calls == []


def _shard_with(tmp_path, model_id, keys, vectors):
    d = EmbeddingCache(tmp_path).model_dir(model_id)
    d.mkdir(parents=True, exist_ok=True)
    return write_shard(d / "shard-00000000000000000001-1-abcd.npz", model_id,
                       np.array([k.encode() for k in keys], dtype=KEY_DTYPE), vectors)


def test_shard_with_valid_checksum_but_nan_or_wrong_shape_is_rejected(tmp_path):
    enc = FakeEncoder(dim=8)
    keys = [text_key(t) for t in ["delete a file", "send an email"]]
    nan = np.ones((2, 8), np.float32)
    nan[1, 3] = np.nan
    path = _shard_with(tmp_path, enc.model_id, keys, nan)
    with pytest.raises(CacheError, match="NaN"):
        read_shard(path, enc.model_id, 8)
    with pytest.warns(RuntimeWarning, match=path.name):
        out, st = embed_texts_with_stats(enc, ["delete a file", "send an email"], EmbeddingCache(tmp_path))
    assert st.misses == 2 and np.isfinite(out).all()

    path = _shard_with(tmp_path / "b", enc.model_id, keys, np.ones((2, 5), np.float32))
    with pytest.raises(CacheError, match="dimension 5"):
        read_shard(path, enc.model_id, 8)
    with pytest.raises(CacheError, match="written for model"):
        read_shard(path, "someone-else", 5)
    with pytest.warns(RuntimeWarning, match=path.name):
        out, st = embed_texts_with_stats(enc, ["delete a file"], EmbeddingCache(tmp_path / "b"))
    assert st.misses == 1
    np.testing.assert_array_equal(out[0], enc.vector("delete a file"))


def test_shards_are_plain_npz_without_pickle(tmp_path):
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    embed_texts(enc, TEXTS, cache)
    shard = _only_shard(cache, enc.model_id)
    with np.load(shard, allow_pickle=False) as z:
        assert z["keys"].dtype == np.dtype("S64") and z["vectors"].dtype == np.float32
        assert z["vectors"].shape == (4, 8)
        assert set(z["keys"].tolist()) == {text_key(t).encode() for t in set(TEXTS)}
        assert str(z["model_id"]) == enc.model_id
    assert (cache.model_dir(enc.model_id) / "MODEL_ID.txt").read_text().strip() == enc.model_id
    assert not list(cache.model_dir(enc.model_id).glob(".*tmp"))


def test_many_shards_are_compacted(tmp_path):
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    cache.max_shards = 3
    texts = [f"tool number {i}" for i in range(10)]
    for t in texts:
        embed_texts(enc, [t], cache)
    n_shards = len(list(cache.model_dir(enc.model_id).glob("shard-*.npz")))
    assert n_shards <= 3
    fresh = EmbeddingCache(tmp_path)
    enc2 = FakeEncoder()
    out = embed_texts(enc2, texts, fresh)
    assert enc2.calls == [] and fresh.count(enc.model_id) == 10
    for i, t in enumerate(texts):
        np.testing.assert_array_equal(out[i], enc.vector(t))


def test_nan_from_encoder_raises_and_caches_nothing(tmp_path):
    enc = FakeEncoder(nan_for="send an email")
    cache = EmbeddingCache(tmp_path)
    with pytest.raises(RiskRankError, match="NaN"):
        embed_texts(enc, TEXTS, cache)
    assert cache.count(enc.model_id) == 0


def test_empty_input_bad_input_and_no_disk_cache(tmp_path):
    enc = FakeEncoder(dim=8)
    out = embed_texts(enc, [], EmbeddingCache(tmp_path))
    assert out.shape == (0, 8) and out.dtype == np.float32
    with pytest.raises(TypeError, match="item 1"):
        embed_texts(enc, ["ok", 3], EmbeddingCache(tmp_path))
    with pytest.raises(RiskRankError, match="list of str"):
        embed_texts(enc, "a single string", EmbeddingCache(tmp_path))
    out = embed_texts(enc, ["x", "y", "x"], cache=False)
    assert encoded_texts(enc) == ["x", "y"]
    np.testing.assert_array_equal(out[0], out[2])


def test_default_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RISKRANK_CACHE", str(tmp_path / "envcache"))
    cache = EmbeddingCache()
    assert cache.root == (tmp_path / "envcache" / "embeddings").resolve()
    enc = FakeEncoder()
    embed_texts(enc, ["a"], None)  # None -> EmbeddingCache() in the same place
    assert EmbeddingCache().count(enc.model_id) == 1
