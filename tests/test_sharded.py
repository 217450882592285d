"""Tool-axis sharding: 4 forced host devices return exactly the ids of 1 device and of a brute-force ranking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from riskrank_jax.model import heads as model
    from riskrank_jax.rank.sharded import Scorer, shard_registry, sharded_topk, tool_mesh, per_device_bytes
    assert len(jax.devices()) == 4, jax.devices()
    rng = np.random.default_rng(0)
    n, d, q, k = 1001, 16, 7, 12
    t = rng.normal(size=(n, d)).astype(np.float32)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    t[500] = t[20]  # duplicate tool: equal cosine scores, lower id must come first
    qe = rng.normal(size=(q, d)).astype(np.float32)
    qe[0] = t[20]
    risk = rng.integers(1, 6, n).astype(np.float32) / 5
    risk[500] = risk[20]
    params = model.init_params(jax.random.key(1), d, hidden=8)
    out = {}
    for name, sc in [("cosine", Scorer("cosine", lam=0.1)), ("head", Scorer("head", lam=0.2, params=params))]:
        for n_dev in (1, 4):
            reg = shard_registry(t, tool_mesh(jax.devices()[:n_dev]), risk=risk, tool_chunk=64)
            v, i = sharded_topk(qe, reg, sc, k)
            out[f"{name}{n_dev}"] = {"v": np.asarray(v).tolist(), "i": np.asarray(i).tolist(),
                                     "shard_rows": int(reg.emb.addressable_shards[0].data.shape[0])}
        out[f"{name}_bytes"] = per_device_bytes(qe, reg, sc, k)
    out["t"], out["q"], out["risk"] = t.tolist(), qe.tolist(), risk.tolist()
    out["rel"] = np.asarray(model.relevance_full(params, jax.numpy.asarray(qe), jax.numpy.asarray(t))).tolist()
    out["frisk"] = np.asarray(model.risk(params, jax.numpy.asarray(t))).tolist()
    json.dump(out, sys.stdout)
""")


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def brute(scores, k):
    order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)
    return order[:, :k]


def test_four_devices_equal_one_device_and_brute_force(result):
    t, q, risk = (np.asarray(result[x], np.float32) for x in ("t", "q", "risk"))
    for name, scores in [("cosine", q @ t.T - np.float32(0.1) * risk),
                         ("head", np.asarray(result["rel"]) - np.float32(0.2) * np.asarray(result["frisk"]))]:
        one, four = result[f"{name}1"], result[f"{name}4"]
        assert one["i"] == four["i"] and one["v"] == four["v"]
        np.testing.assert_array_equal(np.asarray(four["i"]), brute(scores, 12))
        np.testing.assert_allclose(np.asarray(four["v"]), np.take_along_axis(scores, brute(scores, 12), 1), atol=1e-5)
    assert result["cosine4"]["i"][0][:2] == [20, 500]  # tie: lower id first
    assert result["cosine1"]["shard_rows"] == 1024 and result["cosine4"]["shard_rows"] == 256  # 1001 -> 4 x 4 x 64


def test_per_device_memory_is_a_shard(result):
    b = result["cosine_bytes"]
    # arguments: one shard of embeddings (256 x 16) + risk + queries; far below the whole registry
    assert 256 * 16 * 4 <= b["arguments"] < 1001 * 16 * 4
    assert b["total"] == b["arguments"] + b["outputs"] + b["temporaries"]


def test_bad_inputs():
    import jax

    from riskrank_jax.rank.sharded import Scorer, shard_registry, sharded_topk, tool_mesh

    with pytest.raises(ValueError, match="kind"):
        Scorer("bm25")
    with pytest.raises(ValueError, match="params"):
        Scorer("head")
    reg = shard_registry(np.eye(4, dtype=np.float32), tool_mesh(jax.devices()[:1]))
    with pytest.raises(ValueError, match="k must"):
        sharded_topk(np.eye(4, dtype=np.float32), reg, Scorer(), 5)
    with pytest.raises(ValueError, match="q_emb"):
        sharded_topk(np.eye(3, dtype=np.float32), reg, Scorer(), 2)
