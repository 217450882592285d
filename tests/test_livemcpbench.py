"""LiveMCPBench: the loader (tiny fixtures in the benchmark's format, and the real files when present), the request
stages (steps, server context), the server-first baselines, complete@k, the rank command's flags, and the sweep's
rows end to end on the fixture with the embedded encoder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax import metrics
from riskrank_jax.data.livemcpbench import load_livemcpbench, risk_labels, tool_mentions
from riskrank_jax.errors import DataError
from riskrank_jax.experiments.family import RUN_FIELDS
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig, Ranker
from riskrank_jax.retrieve import servers, steps

FIXTURE = Path(__file__).parent / "fixtures" / "livemcpbench"


@pytest.fixture(scope="module")
def encoder():
    """The embedded default encoder (the shipped risk model reads its embeddings)."""
    from riskrank_jax.encode.encoder import load_encoder

    return load_encoder()


@pytest.fixture(scope="module")
def bench():
    return load_livemcpbench(FIXTURE)


# ---------------------------------------------------------------------------------------------- loader


def test_tools_are_keyed_by_server_and_name_and_a_shared_name_is_gold_twice(bench):
    assert bench.ids == ("word-document-server/create_document", "word-document-server/add_paragraph",
                         "word-document-server/convert_to_pdf", "filesystem/write_file", "filesystem/read_file",
                         "desktop-commander/write_file", "desktop-commander/get_weather")
    assert bench.servers.of_tool.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert bench.servers.texts[1] == "Filesystem MCP Server: Read and write files on the local disk."
    # the text riskrank-jax rank embeds: name words, description, parameters
    from riskrank_jax.experiments.livemcp import tool_texts

    assert bench.descriptions[6] == "Get the weather forecast for a city."
    assert tool_texts(bench)[3] == ("write file: Create a new file or overwrite an existing file with new content. "
                              "Parameters: path; content.")
    assert bench.queries.gold_lists() == [[6, 0, 1, 2], [3, 5], [4]]
    assert bench.notes["names_on_several_servers"] == 1 and bench.notes["distinct_names"] == 6


def test_mentions_that_name_no_tool_are_reported_and_a_task_without_gold_is_left_out(bench):
    assert bench.unmatched == (("t-save", "open_document"), ("t-none", "get_maven_latest_version"))
    assert bench.no_gold == ("t-none",)
    assert bench.queries.ids == ("t-report", "t-save", "t-read")
    assert bench.notes["tasks"] == 4 and bench.notes["tasks_evaluated"] == 3 and bench.notes["mentions_unmatched"] == 2


def test_tool_mentions_strip_the_numbering():
    assert tool_mentions("1. get-weread-rank\n2. generate_word_cloud_chart\n\n10) add_picture ") == \
        ["get-weread-rank", "generate_word_cloud_chart", "add_picture"]


def test_malformed_catalogues_stop_with_the_file(tmp_path):
    root = tmp_path / "lmb"
    shutil.copytree(FIXTURE, root)
    path = root / "tools" / "LiveMCPTool" / "tools.json"
    cat = json.loads(path.read_text())
    cat.append(cat[0])
    path.write_text(json.dumps(cat))
    with pytest.raises(DataError, match="'word-document-server' is listed twice"):
        load_livemcpbench(root)
    cat = cat[:1]
    cat[0]["tools"]["word-document-server"]["tools"].append({"description": "no name"})
    path.write_text(json.dumps(cat))
    with pytest.raises(DataError, match="without a name"):
        load_livemcpbench(root)


def test_risk_labels_from_the_corpus_lines(bench, tmp_path):
    lines = [{"server": "filesystem", "tool": "write_file", "source": "livemcpbench", "mutation": "destructive",
              "public_sink": False, "secret_source": False, "untrusted_content": False, "execution": False,
              "money": False},
             {"server": "filesystem", "tool": "read_file", "source": "livemcpbench", "mutation": "read",
              "public_sink": False, "secret_source": True, "untrusted_content": False, "execution": False,
              "money": False},
             {"server": "desktop-commander", "tool": "get_weather", "source": "livemcpbench", "mutation": "read",
              "public_sink": False, "secret_source": False, "untrusted_content": True, "execution": False,
              "money": False},
             {"server": "filesystem", "tool": "write_file", "source": "npm:other@1", "mutation": "read"}]
    p = tmp_path / "labels.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    lab = risk_labels(bench, p)
    assert lab["covered"] == 3
    assert lab["must_confirm"].tolist() == [False, False, False, True, True, False, False]
    assert risk_labels(bench, tmp_path / "absent.jsonl") is None


@pytest.fixture(scope="module")
def real_root():
    """The real LiveMCPBench directory; skips the test (saying why) when it is absent."""
    from riskrank_jax.paths import resolve_data_dir

    try:
        root = resolve_data_dir() / "livemcpbench"
    except DataError:
        root = None
    if root is None or not root.is_dir():
        pytest.skip("LiveMCPBench not found: set RISKRANK_DATA to a directory holding livemcpbench/")
    return root


@pytest.mark.realdata
def test_the_real_benchmark(real_root):
    b = load_livemcpbench(real_root)
    counts = (b.size, b.servers.size, b.notes["distinct_names"], b.notes["names_on_several_servers"])
    assert counts == (527, 70, 510, 13)
    assert b.notes["tasks"] == 95 and b.queries.size == 94 and len(b.unmatched) == 5
    assert sorted(m for _, m in b.unmatched) == ["ddg-search", "execute_command", "get_maven_latest_version",
                                                  "open_document", "trial_references"]
    gold = [t for row in b.queries.gold_lists() for t in row]
    shared_name = [t for t in gold if b.raw_names.count(b.raw_names[t]) > 1]
    assert (len(gold), len(shared_name)) == (282, 60)  # 60 gold tools are copies of a name that two servers list


# ---------------------------------------------------------------------------------------------- stages


def test_steps_split_clauses_and_turn_paths_into_words():
    q = "Analyze Apple's stock for the past year, and summarize it in a PPT in /root/ppt/apple.pptx."
    assert steps.split_steps(q) == ("Analyze Apple's stock for the past year",
                                    "summarize it in a PPT in /root/ppt/apple.pptx")
    assert steps.request_steps(q) == ("Analyze Apple's stock for the past year",
                                      "summarize it in a PPT in file powerpoint presentation",
                                      "read file powerpoint presentation")
    assert steps.request_steps("Save a poem to /root/poems/rain.md")[-1] == "write file markdown"
    assert steps.request_steps("Show me the weather in Paris") == ()  # one step: ranked as a whole
    assert steps.normalise_paths("open /root/a/b.docx and /tmp/x") == "open file word document and directory"
    assert steps.split_steps("1. get the rank 2. draw a chart - then save the file") == \
        ("get the rank", "draw a chart", "save the file")
    assert steps.split_steps("Find the ticket and book it") == ("Find the ticket book it",)  # "book it": too short


def test_fuse_steps_adds_the_best_step_and_keeps_single_step_queries():
    whole = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0]], np.float32)
    step_scores = np.array([[0.0, 0.0, 0.0, 5.0], [0.0, 5.0, 0.0, 0.0]], np.float32)
    index = np.array([[0, 1], [-1, -1]], np.int32)
    out = np.asarray(steps.fuse_steps(whole, step_scores, index, 0.5))
    np.testing.assert_array_equal(out[1], whole[1])
    z = (step_scores - step_scores.mean(1, keepdims=True)) / step_scores.std(1, keepdims=True)
    np.testing.assert_allclose(out[0], whole[0] + 0.5 * whole[0].std() * z.max(0), rtol=1e-5)
    assert np.argsort(-out[0])[:3].tolist() == [0, 1, 3]  # both steps' tools now follow the whole request's


def test_server_context_lifts_a_matching_servers_tools_and_is_inert_for_one_server():
    tool = np.array([[3.0, 1.0, 0.0, 2.5]], np.float32)
    of_tool = np.array([0, 1, 1, 0], np.int32)
    server = np.array([[0.0, 1.0]], np.float32)
    out = np.asarray(servers.server_context(tool, server, of_tool, 1.0, 0.0))
    np.testing.assert_allclose(out, tool + tool.std() * np.array([[-1.0, 1.0, 1.0, -1.0]]), rtol=1e-5)
    same = np.asarray(servers.server_context(tool, np.zeros((1, 1)), np.zeros(4, np.int32), 1.0, 1.0))
    np.testing.assert_array_equal(same, tool)
    np.testing.assert_array_equal(np.asarray(servers.server_max(tool, of_tool, 2)), [[3.0, 1.0]])


def test_two_stage_lists_the_top_servers_tools_server_by_server():
    server = np.array([[0.1, 0.9, 0.5]], np.float32)
    tool = np.array([[0.9, 0.2, 0.3, 0.1, 0.8, 0.7]], np.float32)
    of_tool = np.array([0, 1, 1, 1, 2, 2], np.int32)
    ids = np.asarray(servers.two_stage_ranking(server, tool, of_tool, top_servers=2, top_tools=2))
    assert ids.tolist() == [[2, 1, 4, 5]]
    assert np.asarray(servers.two_stage_ranking(server, tool, of_tool, 1, 2)).tolist() == [[2, 1]]


def test_mcp_zero_score_and_namesakes():
    s = np.asarray(servers.mcp_zero_scores(np.array([[0.5, 0.2]]), np.array([[0.4, 0.9]]), np.array([0, 1])))
    np.testing.assert_allclose(s, [[0.5 * 0.4 * 0.5, 0.2 * 0.9 * 0.9]], rtol=1e-6)
    t = np.asarray(servers.namesake_max(np.array([[1.0, 5.0, 2.0]]), np.array([0, 1, 0])))
    np.testing.assert_array_equal(t, [[2.0, 5.0, 2.0]])


def test_complete_at_k():
    ranking = np.array([[3, 1, 2, 0], [0, 1, 2, 3], [2, 2, 2, 2]], np.int32)
    gold = np.array([[1, 3], [1, 3], [-1, -1]], np.int32)
    np.testing.assert_array_equal(np.asarray(metrics.complete_at_k(ranking, gold, k=2)), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(metrics.complete_at_k(ranking, gold, k=4)), [1.0, 1.0, 0.0])


# ---------------------------------------------------------------------------------------------- the Ranker


@pytest.fixture(scope="module")
def ranker(bench, encoder):
    return Ranker.from_registry(list(bench.documents), encoder=encoder, cache=False,
                                server_texts=dict(zip(bench.servers.names, bench.servers.texts)))


def test_a_registry_of_several_servers_knows_each_tools_server(ranker, bench, tmp_path):
    np.testing.assert_array_equal(ranker.tool_server, bench.servers.of_tool)
    assert ranker.server_emb.shape == (3, 384)
    back = Ranker.load(ranker.with_config(dataclasses_replace(server_context=True)).save(tmp_path / "r"))
    np.testing.assert_array_equal(back.tool_server, ranker.tool_server)
    assert back.config.server_context
    one = Ranker.from_registry([bench.documents[0]], encoder=ranker.encoder, cache=False)
    assert one.tool_server is None


def dataclasses_replace(**kw) -> RankConfig:
    """DEFAULT_REGISTRY_CONFIG without its request stages, then ``kw``."""
    import dataclasses

    return dataclasses.replace(DEFAULT_REGISTRY_CONFIG, **{"server_context": False, "multi_step": False, **kw})


def test_the_stages_change_the_first_stage_when_on(ranker):
    q = ["Read the notes file", "Write a report on the weather and save it as a Word document"]
    q_emb = ranker.encode_queries(q)
    plain = ranker.with_config(dataclasses_replace()).first_stage_scores(q_emb, q)
    assert DEFAULT_REGISTRY_CONFIG.server_context and not DEFAULT_REGISTRY_CONFIG.multi_step  # what rank uses
    np.testing.assert_array_equal(plain, ranker.with_config(dataclasses_replace(server_context=True,
                                                                                server_weight=0.0,
                                                                                sibling_weight=0.0))
                                  .first_stage_scores(q_emb, q))
    ctx = ranker.with_config(dataclasses_replace(server_context=True)).first_stage_scores(q_emb, q)
    expected = servers.server_context(plain, q_emb @ ranker.server_emb.T, ranker.tool_server, 0.5, 0.5)
    np.testing.assert_allclose(ctx, np.asarray(expected), rtol=1e-5, atol=1e-6)
    assert not np.allclose(ctx, plain)
    multi = ranker.with_config(dataclasses_replace(multi_step=True)).first_stage_scores(q_emb, q)
    np.testing.assert_array_equal(multi[0], plain[0])  # one step: unchanged
    assert not np.allclose(multi[1], plain[1])
    with pytest.raises(Exception, match="multi_step needs the query texts"):
        ranker.with_config(dataclasses_replace(multi_step=True, first_stage="dense")).first_stage_scores(q_emb)


def test_rank_queries_runs_the_stages(ranker):
    hits = ranker.with_config(dataclasses_replace(server_context=True, multi_step=True)).rank_queries(
        ["Write a report on the weather in Paris, save it as a Word document and convert it to PDF."], k=5)
    names = [h.name for h in hits[0]]
    assert "desktop-commander/get_weather" in names[:3] or "get_weather" in names[:3]
    assert any("convert_to_pdf" in n for n in names)


def test_server_siblings_become_graph_edges(ranker, bench):
    from riskrank_jax.experiments import livemcp

    groups = livemcp.server_groups(np.array([0, 0, 1, 2, 2, 2]), 3)
    np.testing.assert_array_equal(groups, [[0, 1, -1], [0, 1, -1], [2, -1, -1], [2, -1, -1], [3, 4, 5], [3, 4, 5]])
    g = livemcp.with_server_graph(ranker, bench.servers.of_tool, bench.servers.size).graph
    pairs = set(zip(np.asarray(g.senders).tolist(), np.asarray(g.receivers).tolist()))
    of = bench.servers.of_tool
    siblings = {(i, j) for i in range(bench.size) for j in range(bench.size) if i != j and of[i] == of[j]}
    assert siblings and siblings <= pairs  # every two tools of one server are neighbours
    assert not siblings <= set(zip(np.asarray(ranker.graph.senders).tolist(),
                                   np.asarray(ranker.graph.receivers).tolist()))


def test_a_ranker_moved_to_another_encoder_keeps_its_risk_and_config(ranker, bench):
    from riskrank_jax.experiments.livemcp import _server_texts_in_order
    from riskrank_jax.experiments.livemcp_transfer import with_encoder

    same = with_encoder(ranker, ranker.encoder, False, _server_texts_in_order(bench))
    np.testing.assert_allclose(same.tool_emb, ranker.tool_emb, atol=1e-6)
    np.testing.assert_allclose(same.server_emb, ranker.server_emb, atol=1e-6)
    np.testing.assert_array_equal(same.risk_scores, ranker.risk_scores)
    assert same.config == ranker.config and same.risk_source == ranker.risk_source
    q = ["Write a report on the weather and save it as a Word document"]
    np.testing.assert_array_equal(same.rank(ranker.encode_queries(q), k=5, q_texts=q),
                                  ranker.rank(ranker.encode_queries(q), k=5, q_texts=q))
    with pytest.raises(ValueError, match="server texts"):
        with_encoder(ranker, ranker.encoder, False, ["one"])


def test_sub_pools_by_server_remap_gold_and_drop_tasks_without_any():
    from types import SimpleNamespace

    from riskrank_jax.experiments import livemcp_defaults as d

    of_tool = np.array([0, 0, 1, 2, 2])
    b = SimpleNamespace(documents=("s0", "s1", "s2"), size=5, servers=SimpleNamespace(of_tool=of_tool),
                        queries=SimpleNamespace(gold=np.array([[0, 3, -1], [2, -1, -1], [4, 1, 2]])))
    docs, tools, rows, gold = d.sub_pool(b, np.array([True, False, True]))
    assert docs == ["s0", "s2"] and tools.tolist() == [0, 1, 3, 4] and rows.tolist() == [0, 2]
    assert gold.tolist() == [[2, 0], [3, 1]]  # sub-pool ids, the task's kept gold first, -1 padding after
    r = d.needrisk_recall_at_k(np.array([[0, 1, 2], [3, 4, 5]]), np.array([[0, 5], [1, -1]]),
                               np.array([3, 1, 1, 1, 1, 3]), k=2)
    assert r[0] == 0.5 and np.isnan(r[1])  # task 0 needs tools 0 and 5, finds 0; task 1 needs none


def test_the_defaults_rule_takes_the_largest_safe_lambda():
    from riskrank_jax.experiments.livemcp_defaults import choose

    def m(ndcg, recall=0.6, hit=0.5, nr=0.5):
        return {"ndcg@5": ndcg, "recall@10": recall, "needrisk_hit@5": hit, "needrisk_recall@10": nr}

    table = {(0.0, 0.0): m(0.40), (0.5, 0.0): m(0.395), (1.0, 0.0): m(0.402), (2.0, 0.0): m(0.38),
             (0.0, 0.2): m(0.41), (0.5, 0.2): m(0.405), (1.0, 0.2): m(0.404, nr=0.4), (2.0, 0.2): m(0.39)}
    # λ 2 loses NDCG@5 (> 0.01 below 0.41); λ 1 at α 0.2 hides a needed must-confirm tool; λ 1 at α 0 keeps all
    assert choose(table) == (1.0, 0.0)
    table[(1.0, 0.0)] = m(0.405, recall=0.58)  # Recall@10 0.02 below λ = 0: not eligible either
    assert choose(table) == (0.5, 0.2)


def test_the_intent_rule_takes_the_lowest_rvr_that_keeps_ndcg_and_the_needed_tools():
    from riskrank_jax.experiments.livemcp_defaults import INTENT_GRID, choose_intent

    def m(ndcg, rvr, hit=0.05, nr=0.1):
        return {"ndcg@5": ndcg, "rvr@5": rvr, "needrisk_hit@5": hit, "needrisk_recall@10": nr}

    lam0 = m(0.400, 0.009)
    table = {None: m(0.403, 0.006), (2.0, 0.5, 0.0): m(0.410, 0.004), (4.0, 1.0, 0.0): m(0.409, 0.002),
             (8.0, 1.0, 0.0): m(0.394, 0.0), (8.0, 0.5, 0.0): m(0.41, 0.0, nr=0.075), (4.0, 0.5, 1.0): m(0.40, 0.002)}
    # strength 8: one loses > 0.005 NDCG@5, the other hides a needed must-confirm tool; the two at RVR@5 0.002
    # both have strength 4, so the smaller specific wins
    assert choose_intent(table, lam0) == (4.0, 0.5, 1.0)
    del table[(4.0, 0.5, 1.0)]
    assert choose_intent(table, lam0) == (4.0, 1.0, 0.0)
    assert choose_intent({None: m(0.40, 0.0), (2.0, 0.5, 0.0): m(0.40, 0.0)}, lam0) is None  # a tie: off
    assert choose_intent({(2.0, 0.5, 0.0): m(0.39, 0.0)}, lam0) is None  # none eligible: off
    assert choose_intent({None: m(0.40, 0.005, hit=float("nan"), nr=float("nan"))},
                         m(0.40, 0.01, hit=float("nan"), nr=float("nan"))) is None
    assert INTENT_GRID[0] is None and len(INTENT_GRID) == 13


def _expected_rank_default():
    """The LiveMCPBench row that is ``DEFAULT_REGISTRY_CONFIG``: ``ranker_server`` without intent, its intent row
    when the default's intent fields are the rows' ``INTENT``, else none."""
    from riskrank_jax.experiments import livemcp

    if not DEFAULT_REGISTRY_CONFIG.intent:
        return "ranker_server"
    same = all(getattr(DEFAULT_REGISTRY_CONFIG, k) == v for k, v in livemcp.INTENT.items())
    if not same:
        return None
    return "ranker_server_intent_names" if DEFAULT_REGISTRY_CONFIG.name_evidence else "ranker_server_intent"


def test_every_row_but_the_intent_rows_runs_without_intent():
    import dataclasses

    from riskrank_jax.experiments import livemcp
    from riskrank_jax.experiments.config import default_config

    cfg = default_config("livemcpbench", {})
    for name, (_, change) in livemcp.ROWS.items():
        if change is None:
            continue
        config = livemcp.row_config(cfg, change)
        if name in livemcp.NAME_ROWS:  # its base row's config with the name stage on, nothing else
            base = livemcp.row_config(cfg, livemcp.ROWS[livemcp.NAME_ROWS[name]][1])
            assert config == dataclasses.replace(base, name_evidence=True) and not base.name_evidence, name
            continue
        assert config.intent == (name in livemcp.INTENT_ROWS), name
        assert not config.name_evidence, name
        if name in livemcp.INTENT_ROWS:  # its base row's config plus the INTENT fields, nothing else
            base = livemcp.row_config(cfg, livemcp.ROWS[livemcp.INTENT_ROWS[name]][1])
            assert config == dataclasses.replace(base, **livemcp.INTENT), name
    assert livemcp.rank_default_row(cfg) == _expected_rank_default()
    assert livemcp.lambda_row(cfg) == "ranker_server"  # the λ / α choice runs without intent, whatever the default


def test_the_committed_intent_rows_and_choice():
    """On the committed LiveMCPBench run (its real numbers): the intent rows' setting is the one the
    folds-over-servers rule picks on the pooled scoring folds, recomputed here from the committed table; issue 47's
    target — each intent row has RVR@5 no higher than its λ = 0 row and NDCG@5 at most 0.005 below it — holds on the
    whole pool, and on the held-out servers (each fold's choice), where neither needed-tool guard falls."""
    from riskrank_jax.experiments import livemcp
    from riskrank_jax.experiments.livemcp_defaults import INTENT_TOLERANCE, choose_intent
    from riskrank_jax.paths import REFERENCE_RESULTS_DIR

    res = json.loads((REFERENCE_RESULTS_DIR / "livemcpbench" / "results.json").read_text())
    assert res["intent_setting"] == livemcp.INTENT and res["intent_rows"] == livemcp.INTENT_ROWS
    i = res["defaults"]["intent"]

    def key(r):
        return None if not r["intent"] else (r["intent_strength"], r["intent_specific"], r["intent_agreement"])
    table = {key(r): r for r in i["sensitivity"]}
    chosen = choose_intent(table, i["scored_lam0"])
    assert chosen == key(livemcp.INTENT) == key(i["rule_on_all_scoring_folds"])
    assert (i["lam"], i["alpha"]) == (res["defaults"]["current"]["lam"], res["defaults"]["current"]["alpha"])
    rows = res["rows"]
    for name, base in livemcp.INTENT_ROWS.items():  # at λ = 0 intent changes nothing: base_lam0 is its λ = 0 row
        lam0, got = rows[base + "_lam0"], rows[name]
        assert got["rvr@5"] <= lam0["rvr@5"] and got["ndcg@5"] >= lam0["ndcg@5"] - INTENT_TOLERANCE, (name, got)
        detail = res["risk_detail"]
        assert detail[name]["ndcg@5"] == got["ndcg@5"] and detail[name]["rvr@5"] == got["rvr@5"]
        assert detail[name]["needrisk_hit@5"] >= detail[base + "_lam0"]["needrisk_hit@5"]
    # the rank default's intent row lowers the exposure of the same row without intent, which λ alone does not here
    assert rows["ranker_server_intent"]["rvr@5"] < rows["ranker_server"]["rvr@5"] == rows["ranker_server_lam0"]["rvr@5"]
    held_out, lam0 = i["scored_chosen"], i["scored_lam0"]
    assert held_out["rvr@5"] <= lam0["rvr@5"] and held_out["ndcg@5"] >= lam0["ndcg@5"] - INTENT_TOLERANCE
    assert held_out["needrisk_recall@10"] >= lam0["needrisk_recall@10"]
    # the pooled pick keeps both needed-tool guards held out; the folds' own picks (strength 8 in two folds, whose
    # choosing registries show no needed must-confirm tool at λ = 0 to guard) lose one of the two held-out tasks
    # that λ = 0 serves (docs/livemcpbench.md)
    assert table[chosen]["needrisk_hit@5"] >= lam0["needrisk_hit@5"] > held_out["needrisk_hit@5"]
    lost = (lam0["needrisk_hit@5"] - held_out["needrisk_hit@5"]) * held_out["tasks_needing_confirm"]
    assert round(lost) == 1 and max(c["intent_strength"] for c in i["chosen_per_fold"]) == 8.0
    assert len(i["chosen_per_fold"]) == res["defaults"]["folds"]


# ---------------------------------------------------------------------------------------------- the sweep


def test_the_sweep_rows_on_the_fixture(bench, encoder, tmp_path):
    from riskrank_jax.experiments import livemcp
    from riskrank_jax.experiments.config import default_config
    from riskrank_jax.experiments.run import run_benchmark

    cfg = default_config("livemcpbench", {"mcp.risk_labels": "", "runtime.cache_dir": str(tmp_path)})
    res = run_benchmark(cfg, tmp_path / "out", bench=bench, encoder=encoder, report_to=lambda s: None)
    assert set(res["rows"]) == set(livemcp.ROWS) and res["rank_default"] == _expected_rank_default()
    assert res["intent_setting"] == livemcp.INTENT and {r["row"] for r in res["sensitivity"]} == {"ranker_server"}
    assert res["defaults"] is None and res["risk_detail"] is None  # no labels: no choice by folds over servers
    for name, row in res["rows"].items():
        assert row["rvr@5"] == "not labelled"
        assert 0.0 <= row["complete@10"] <= row["recall@10"] <= 1.0 and res["cost_s"][name] >= 0
    # 7 tools, k = 10: every list holds the whole pool, so every row finds every needed tool
    assert all(row["recall@10"] == 1.0 and row["complete@10"] == 1.0 for row in res["rows"].values())
    assert res["rows"]["two_stage"]["recall@5"] <= 1.0 and res["tasks_without_gold"] == ["t-none"]
    text = (tmp_path / "out" / "livemcpbench" / "tables.md").read_text()
    assert "`open_document` (task t-save)" in text and "not labelled" in text and "shared" not in text.lower()
    again = run_benchmark(cfg, tmp_path / "out2", bench=bench, encoder=encoder, report_to=lambda s: None)
    assert again["rows"] == res["rows"]  # deterministic
    # the skeleton's common fields, as every family's results.json has them
    saved = json.loads((tmp_path / "out" / "livemcpbench" / "results.json").read_text())
    assert set(RUN_FIELDS) <= set(saved) and saved["config"]["mcp"]["risk_labels"] == ""
    lines = []
    reused = run_benchmark(cfg, tmp_path / "out", bench=bench, encoder=encoder, report_to=lines.append)
    assert reused["run_key"] == saved["run_key"] and lines[-1].startswith("[livemcpbench] reusing your run of ")


def _transfer_trained(committed) -> bool:
    """Whether the committed run's transferred models are in this checkout's checkpoints (loaded, not trained)."""
    t = committed.get("transfer") or {}
    dirs = [Path(t[k]["dir"]).name for k in ("tuned_encoder", "cross_encoder") if t.get(k)]
    from riskrank_jax.paths import default_checkpoint_dir

    root = default_checkpoint_dir() / "livemcpbench"
    return bool(dirs) and all((root / d / "transfer.json").is_file() for d in dirs)


@pytest.mark.realdata
def test_the_committed_livemcpbench_results_are_reproduced(tmp_path, real_root):
    """A rerun of the sweep on the real files gives the committed rows (within the cross-machine tolerance)."""
    from riskrank_jax.experiments import livemcp
    from riskrank_jax.experiments.config import default_config
    from riskrank_jax.experiments.run import run_benchmark
    from riskrank_jax.paths import REFERENCE_RESULTS_DIR

    committed = json.loads((REFERENCE_RESULTS_DIR / "livemcpbench" / "results.json").read_text())
    cfg = default_config("livemcpbench", {"mcp.risk_labels": committed["config"]["mcp"]["risk_labels"]})
    # the transfer rows are compared when their models are in the checkpoints (a fresh checkout would train them)
    res = run_benchmark(cfg, tmp_path, report_to=lambda s: None, transfer=_transfer_trained(committed))
    committed["rows"] = {k: v for k, v in committed["rows"].items() if k in res["rows"]}
    assert list(res["rows"]) == list(committed["rows"])
    assert set(res["rows"]) >= set(livemcp.ROWS)
    # within float noise of a crossing another CPU may move a task or two: at most 2 tasks' worth of a mean over
    # the tasks (query units, as the other sweeps' reproducibility rule), plus the 4-decimal rounding
    tolerance = 2 / committed["data"]["tasks_evaluated"] + 1e-4
    for name, row in committed["rows"].items():
        for metric, value in row.items():
            got = res["rows"][name][metric]
            ok = got == value if isinstance(value, str) else abs(got - value) <= tolerance
            assert ok, (name, metric, got, value, tolerance)
    assert committed["rows"]["ranker_server"]["ndcg@5"] > committed["rows"]["ranker"]["ndcg@5"] + 0.025  # +0.030 measured


def test_rank_command_turns_the_stages_on_and_off(bench, tmp_path):
    from conftest import cli_invoker

    files = []
    for key, doc in bench.documents:
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(doc))
        files.append(str(path))
    run = cli_invoker(str(tmp_path / "cache"))
    q = "Get the weather in Paris, save it as a Word document and convert it to PDF"
    default = json.loads(run("rank", *files, "--query", q, "--json").output)
    assert default["config"]["server_context"] is True and default["config"]["multi_step"] is False
    both = json.loads(run("rank", *files, "--query", q, "--json", "--multi-step", "--no-server-context").output)
    assert both["config"]["server_context"] is False and both["config"]["multi_step"] is True
    names = [h["name"] for h in both["results"][0]["hits"]]
    assert "get_weather" in names and "convert_to_pdf" in names
    ex = json.loads(run("rank", *files, "--query", q + " at /root/out.pdf", "--json", "--explain", "--multi-step")
                    .output)["results"][0]["explain"]["config"]
    assert ex["server_context"] is True
    assert ex["steps"] == ["Get the weather in Paris", "save it as a Word document",
                           "convert it to PDF at file pdf", "write file pdf"]
