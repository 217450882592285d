"""The MCP risk corpus loader, folds over servers, the learned risk model and the gate metrics, on tiny
fixtures in the corpus's format; the shipped model and the real corpus are `realdata` / file checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax.registry.mcp_corpus import load_corpus, package_name, reserved_packages, server_folds
from riskrank_jax.errors import DataError, RiskHeadError
from riskrank_jax.registry import mcp_risk
from riskrank_jax.registry import load_registry
from riskrank_jax.registry.dimensions import DimensionPolicy
from riskrank_jax.experiments.mcp_risk_eval import annotations_only, choose_thresholds, gate_metrics, spec_defaults

REPO = Path(__file__).resolve().parent.parent


def _label(server, tool, source, mutation="read", **flags):
    row = {"server": server, "tool": tool, "source": source, "mutation": mutation, "public_sink": False,
           "secret_source": False, "untrusted_content": False, "execution": False, "money": False, "note": ""}
    row.update(flags)
    return row


def _write_corpus(root: Path, data: Path, labels) -> Path:
    corpus = root / "corpus"
    (corpus / "servers").mkdir(parents=True)
    (corpus / "servers" / "acme-git.json").write_text(json.dumps({
        "server": "acme-git", "package": "npm:@acme/git-mcp", "version": "1.0.0", "gathered": "tools/list",
        "tools": [{"name": "push", "description": "Push commits to the remote", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": False}},
                  {"name": "log", "description": "Show the commit log", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": True}}]}))
    (corpus / "servers" / "secret-vault.json").write_text(json.dumps({
        "server": "secret-vault", "package": "npm:@corp/vault-mcp", "version": "2.0.0", "gathered": "tools/list",
        "tools": [{"name": "read_secret", "description": "Return a secret", "inputSchema": {"type": "object"}}]}))
    live = data / "livemcpbench" / "tools" / "LiveMCPTool"
    live.mkdir(parents=True)
    (live / "tools.json").write_text(json.dumps([{"name": "weather", "tools": {"weather": {
        "server_name": "weather", "version": "0.1", "tools": [
            {"name": "forecast", "description": "Weather forecast for a city", "inputSchema": {"type": "object"}},
            {"name": "alerts", "description": "Weather alerts", "inputSchema": {"type": "object"}}]}}}]))
    (corpus / "labels.jsonl").write_text("\n".join(json.dumps(r) for r in labels) + "\n")
    return corpus


LABELS = [_label("acme-git", "push", "npm:@acme/git-mcp@1.0.0", "local_write", public_sink=True),
          _label("acme-git", "log", "npm:@acme/git-mcp@1.0.0"),
          _label("secret-vault", "read_secret", "npm:@corp/vault-mcp@2.0.0", secret_source=True),
          _label("weather", "forecast", "livemcpbench"),
          _label("weather", "alerts", "livemcpbench", untrusted_content=True),
          _label("weather", "gone", "livemcpbench")]


def test_corpus_reads_packaged_and_livemcpbench_tools_and_drops_reserved(tmp_path):
    corpus_dir = _write_corpus(tmp_path, tmp_path / "data", LABELS)
    reserved = tmp_path / "RESERVED.md"
    reserved.write_text("# Reserved\n\n- `@corp/vault-mcp`\n- `other-mcp`\n")
    assert reserved_packages(reserved) == {"@corp/vault-mcp", "other-mcp"}
    c = load_corpus(corpus_dir, tmp_path / "data", reserved)
    assert c.servers == ("acme-git", "acme-git", "weather", "weather")
    assert [t.raw_name for t in c.registry.tools] == ["push", "log", "forecast", "alerts"]
    assert c.mutation.tolist() == [1, 0, 0, 0]
    assert c.flags[:, 0].tolist() == [True, False, False, False] and c.flags[:, 2].tolist() == [False] * 3 + [True]
    assert c.dropped == ("secret-vault/read_secret: reserved package @corp/vault-mcp",
                         "weather/gone: no such tool in its source (livemcpbench)")
    assert len(c.fingerprint) == 16
    assert load_corpus(corpus_dir, tmp_path / "data").size == 5  # nothing reserved
    assert package_name("npm:@scope/pkg@1.2.3") == "@scope/pkg" and package_name("pypi:mcp-x@0.1") == "mcp-x"
    assert package_name("livemcpbench") is None


def test_corpus_errors_name_the_line(tmp_path):
    bad = [dict(LABELS[0]), dict(LABELS[1], mutation="write")]
    corpus_dir = _write_corpus(tmp_path, tmp_path / "data", bad)
    with pytest.raises(DataError, match=r"labels.jsonl:2: mutation must be one of read, local_write, destructive"):
        load_corpus(corpus_dir, tmp_path / "data")
    with pytest.raises(DataError, match="livemcpbench/tools/LiveMCPTool/tools.json is not under the data"):
        load_corpus(_write_corpus(tmp_path / "b", tmp_path / "b" / "d", LABELS[3:4]), tmp_path / "nowhere")


def test_server_folds_never_split_a_server_and_balance_tools():
    servers = ["a"] * 5 + ["b"] * 4 + ["c"] * 3 + ["d"] * 3 + ["e"] * 2 + ["f"] * 1
    folds = server_folds(servers, k=3)
    for s in set(servers):
        assert len({int(f) for f, t in zip(folds, servers) if t == s}) == 1
    assert sorted(np.bincount(folds).tolist()) == [6, 6, 6]
    assert server_folds(servers, k=3).tolist() == folds.tolist()
    with pytest.raises(DataError, match="2 servers cannot make 3 folds"):
        server_folds(["a", "b"], k=3)


def _toy(n=60, seed=0):
    """Features whose first coordinate says 'writes' and second 'public sink'; targets [n, 7] from them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.zeros((n, 7), np.float32)
    y[:, 0] = x[:, 0] > 0
    y[:, 2] = x[:, 1] > 0.5
    return x, y


def test_model_learns_separable_dimensions_deterministically():
    x, y = _toy()
    cfg = mcp_risk.RiskModelConfig(hidden=16, steps=300, seeds=(0, 1))
    params, losses = mcp_risk.train(x, y, cfg)
    assert params["W1"].shape == (2, 8, 16) and losses.shape == (2, 300)
    assert losses[:, -1].max() < 0.5 * losses[:, 0].min()
    p = mcp_risk.predict(params, x)
    assert p.shape == (60, 7)
    assert ((p[:, 0] > 0.5) == (y[:, 0] > 0.5)).mean() >= 0.95
    assert ((p[:, 2] > 0.5) == (y[:, 2] > 0.5)).mean() >= 0.9
    again, _ = mcp_risk.train(x, y, cfg)
    np.testing.assert_array_equal(again["W2"], params["W2"])
    with pytest.raises(RiskHeadError, match=r"targets \[N, 7\]"):
        mcp_risk.train(x, y[:, :3], cfg)


def test_model_file_round_trip_and_encoder_check(tmp_path):
    x, y = _toy(20)
    params, _ = mcp_risk.train(np.concatenate([x, np.zeros((20, 15), np.float32)], 1), y,
                               mcp_risk.RiskModelConfig(hidden=4, steps=5, seeds=(0,)))
    m = mcp_risk.RiskModel(params, "enc-a", {"fingerprint": "abc", "servers": 2, "tools": 20},
                           thresholds={"flag_threshold": 0.3, "destructive_threshold": 0.1})
    back = mcp_risk.RiskModel.load(m.save(tmp_path / "m.npz"))
    assert back.corpus == {"fingerprint": "abc", "servers": 2, "tools": 20} and back.dim == 8
    assert back.dimension_policy(trust_annotations=True).flag_threshold == 0.3
    assert back.dimension_policy().destructive_threshold == 0.1
    np.testing.assert_array_equal(back.params["W1"], m.params["W1"])
    back.check_encoder("enc-a", 8)
    with pytest.raises(RiskHeadError, match="trained on enc-a embeddings"):
        back.check_encoder("enc-b", 8)
    (tmp_path / "bad.npz").write_bytes(b"no")
    with pytest.raises(RiskHeadError, match="not a risk model file"):
        mcp_risk.RiskModel.load(tmp_path / "bad.npz")


def test_gate_metrics_and_baselines():
    m = gate_metrics(np.array([False, False, True, True, True, False]), np.array([True, True, True, False, False, False]))
    assert m["must_confirm_recall"] == pytest.approx(2 / 3) and m["reads_allowed"] == pytest.approx(2 / 3)
    assert m["asked"] == pytest.approx(0.5) and (m["must_confirm"], m["others"]) == (3, 3)
    reg = load_registry([("s", {"tools": [
        {"name": "a", "description": "A", "inputSchema": {}, "annotations": {"readOnlyHint": True}},
        {"name": "b", "description": "B", "inputSchema": {}, "annotations": {"readOnlyHint": False,
                                                                             "destructiveHint": False,
                                                                             "openWorldHint": False}},
        {"name": "c", "description": "C", "inputSchema": {}}]})])
    assert annotations_only(reg).tolist() == [True, False, False]
    assert spec_defaults(reg).tolist() == [True, True, False]


def test_thresholds_are_chosen_for_recall_first():
    tools = [{"name": f"t{i}", "description": "Tool", "inputSchema": {}} for i in range(4)]
    reg = load_registry([("s", {"tools": tools})])
    probs = np.zeros((4, 7), np.float32)
    probs[:, 0] = probs[:, 1] = [0.02, 0.08, 0.12, 0.6]  # P(writes), P(destructive): t3 destroys, t2 reads
    mutation = np.array([0, 0, 0, 2])
    flags = np.zeros((4, 5), bool)
    ch = choose_thresholds(reg, probs, mutation, flags, DimensionPolicy(learned_clears="reads"))
    assert ch["recall"] == 1.0 and ch["reads_allowed"] == 1.0
    assert 0.12 < ch["read_threshold"] <= 0.6 and ch["destructive_threshold"] == 0.0
    probs[2, :2], probs[3, :2] = 0.35, 0.25  # the destructive tool now sits among the reads: keeping it costs t2
    ch = choose_thresholds(reg, probs, mutation, flags, DimensionPolicy(learned_clears="reads"))
    assert ch["recall"] == 1.0 and ch["reads_allowed"] == pytest.approx(2 / 3) and ch["read_threshold"] == 0.2


def test_shipped_model_records_its_corpus():
    path = mcp_risk.default_model_path()
    if not path.is_file():
        pytest.skip("no shipped risk model in this checkout (experiments/mcp_risk/evaluate.py --ship writes it)")
    m = mcp_risk.RiskModel.load(path)
    assert m.encoder_id and len(m.corpus["fingerprint"]) == 16 and m.corpus["servers"] >= 10
    assert set(m.thresholds) >= {"flag_threshold", "learned_clears"}
    results = REPO / "experiments" / "results" / "mcp_risk" / "results.json"
    if results.is_file():
        r = json.loads(results.read_text())
        assert r["split"] == "by_server" and "riskrank" in r["rows"]
        assert r["corpus_fingerprint"] == m.corpus["fingerprint"]


@pytest.mark.realdata
def test_real_corpus_loads_without_reserved_servers(real_data_dir):
    corpus = REPO / "experiments" / "mcp_risk" / "corpus"
    if not (corpus / "labels.jsonl").is_file():
        pytest.skip("no labelled corpus in this checkout")
    c = load_corpus(corpus, real_data_dir, real_data_dir.parent / "RESERVED_SERVERS.md")
    blocked = reserved_packages(real_data_dir.parent / "RESERVED_SERVERS.md")
    assert c.size >= 500 and len(set(c.servers)) >= 60
    assert not {package_name(p) for p in c.packages} & blocked
    folds = server_folds(c.servers, 5)
    for f in range(5):
        assert not set(np.array(c.servers)[folds == f]) & set(np.array(c.servers)[folds != f])
