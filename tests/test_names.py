"""Name evidence between sibling tools (``retrieve.names``) and its request stage (``RankConfig.name_evidence``)."""

from __future__ import annotations

import numpy as np
import pytest

from riskrank_jax.errors import RankerError
from riskrank_jax.rank.ranker import RankConfig, Ranker
from riskrank_jax.retrieve import names


# ---------------------------------------------------------------------------------------------- words and verbs


@pytest.mark.parametrize("name, words", [
    ("speech_to_text", ("speech", "to", "text")),
    ("list-airtable-bases", ("list", "airtable", "bases")),
    ("getForensicAnalysis", ("get", "forensic", "analysis")),
    ("HTTPRequest", ("http", "request")),
    ("pdf2text", ("pdf", "2", "text")),
    ("fs.read_file", ("fs", "read", "file")),
    ("npmSearch", ("npm", "search")),
])
def test_name_words_split_snake_kebab_dots_camel_and_digits(name, words):
    assert names.name_words(name) == words


def test_verbs_of_names_and_requests():
    assert names.tool_verb(names.name_words("create_issue")) == ("create", 0)
    assert names.tool_verb(names.name_words("getBasketballScore")) == ("get", 0)
    assert names.tool_verb(names.name_words("youtube_get_transcript")) == ("get", 1)
    assert names.tool_verb(names.name_words("academic_paper_search")) == ("search", 2)
    assert names.tool_verb(names.name_words("text_to_speech")) == (None, -1)
    assert names.tool_verb(names.name_words("get_news")) == ("get", 0)  # "news" is no inflected "new"
    words = names.request_words("Show me the list of open issues")
    assert names.request_verbs(words) == {"get"}  # "the list" is a noun
    assert names.request_verbs(names.request_words("Listing all bases, then deleted the old ones")) == {
        "list", "delete"}
    assert names.request_verbs(names.request_words("open a new issue")) == {"create"}
    assert names.request_verbs(names.request_words("what is the weather")) == frozenset()


def test_verb_evidence_same_similar_other():
    assert names.verb_evidence("create", {"create"}) == 1.0
    assert names.verb_evidence("update", {"create"}) == 0.0  # both change a resource
    assert names.verb_evidence("get", {"create"}) == -1.0
    assert names.verb_evidence("list", {"get"}) == 0.0
    assert names.verb_evidence("get", set()) == 0.0 and names.verb_evidence(None, {"get"}) == 0.0
    assert names.verb_evidence("delete", {"get", "delete"}) == 1.0


def test_direction_of_names_and_requests():
    words = names.name_words
    assert names.direction(words("speech_to_text")) == ({"speech"}, {"text"})
    assert names.direction(words("pdf2text")) == ({"pdf"}, {"text"})
    assert names.direction(words("convert_from_docx_to_pdf")) == ({"docx"}, {"pdf"})
    assert names.direction(words("extract_text_from_pdf")) == ({"pdf"}, {"text"})  # "extract" is its verb
    assert names.direction(words("get_issue")) is None
    req = names.request_words
    s2t, t2s = ({"speech"}, {"text"}), ({"text"}, {"speech"})
    assert names.direction_evidence(req("convert speech to text"), *s2t) == 1.0
    assert names.direction_evidence(req("convert speech to text"), *t2s) == -1.0
    assert names.direction_evidence(req("read this text aloud as speech"), *t2s) == 1.0
    assert names.direction_evidence(req("transcribe the audio into text"), *s2t) == 1.0  # "into" marks the target
    assert names.direction_evidence(req("transcribe the audio into text"), *t2s) == -1.0
    assert names.direction_evidence(req("make speech from this text"), *t2s) == 1.0  # "from" marks the source
    assert names.direction_evidence(req("summarise this article"), *s2t) == 0.0


def test_objects_and_siblings():
    assert names.object_words(names.name_words("list_airtable_bases")) == ("airtable", "base")
    assert names.siblings("list_bases", "get_base") and names.siblings("create_issue", "update_issue")
    assert not names.siblings("get_weather", "send_email")


def _evidence(tools, request):
    return dict(zip(tools, names.name_evidence(names.name_table(tools), [request])[0].tolist()))


def test_evidence_separates_real_siblings():
    e = _evidence(["speech_to_text", "text_to_speech"], "Convert speech to text")
    assert e["speech_to_text"] > e["text_to_speech"]
    e = _evidence(["list_bases", "list_sources"], "list the X bases")
    assert e["list_bases"] > e["list_sources"]
    issues = ["create_issue", "update_issue", "get_issue"]
    e = _evidence(issues, "open a new issue about the crash")
    assert e["create_issue"] > e["update_issue"] > e["get_issue"]
    e = _evidence(issues, "edit the title of issue 12")
    assert max(e, key=e.get) == "update_issue"
    e = _evidence(issues, "show me issue 12")
    assert max(e, key=e.get) == "get_issue"
    e = _evidence(["getBasketballScore", "getFootballScore"], "What was the score of last night's basketball game?")
    assert e["getBasketballScore"] > e["getFootballScore"]


def test_evidence_at_some_tools_and_the_window_equal_the_full_computation():
    table = names.name_table(["text_to_speech", "speech_to_text", "list_bases", "get_base", "pdf2text"])
    texts = ["convert speech to text", "list the bases", "turn this pdf into text"]
    tools = np.asarray([4, 1, 3])
    np.testing.assert_array_equal(names.name_evidence(table, texts, tools), names.name_evidence(table, texts)[:, tools])
    rng = np.random.default_rng(0)
    for _ in range(50):  # with ties: the ranking's order (descending, ties to the lower column)
        row = rng.integers(0, 6, size=40).astype(np.float32)
        for w in (1, 5, 10, 40):
            np.testing.assert_array_equal(names.top_window(row, w), np.argsort(-row, kind="stable")[:w])


def test_sibling_order_moves_siblings_only_within_the_window():
    table = names.name_table(["list_bases", "list_sources", "git_log", "get_file_info", "list_tables"])
    # scores: list_sources 1.0, git_log 0.9, list_bases 0.8, get_file_info 0.7 (window 4), list_tables 0.1
    scores = np.asarray([[0.8, 1.0, 0.9, 0.7, 0.1]], np.float32)
    evidence = np.asarray([[2.0, 0.0, 0.0, 1.0, 2.0]], np.float32)
    out = names.sibling_order(scores, evidence, table.objects, 4, weight=1.0)
    np.testing.assert_array_equal(out, scores)  # verbs are not object words: no two of the window are siblings
    table = names.name_table(["list_airtable_bases", "list_airtable_sources", "git_log", "get_file_info",
                              "airtable_base_schema"])
    out = names.sibling_order(scores, evidence, table.objects, 4, weight=1.0)
    # the airtable siblings trade their scores (spread 0.3: 0.8 + 0.6 beats 1.0); git_log and get_file_info keep
    # theirs; airtable_base_schema, a sibling outside the window, is not lifted
    np.testing.assert_array_equal(out, np.asarray([[1.0, 0.8, 0.9, 0.7, 0.1]], np.float32))
    np.testing.assert_array_equal(names.sibling_order(scores, evidence, table.objects, 4, weight=0.0), scores)
    # with candidates, a column's tool comes from cand
    cand = np.asarray([[1, 0, 2, 3]])
    out = names.sibling_order(np.asarray([[0.8, 1.0, 0.9, 0.7]], np.float32), np.asarray([[2.0, 0.0, 0.0, 0.0]]),
                              table.objects, 4, cand, weight=1.0)
    np.testing.assert_array_equal(out, np.asarray([[1.0, 0.8, 0.9, 0.7]], np.float32))


# ---------------------------------------------------------------------------------------------- the stage


def _ranker(config):
    tools = ["text_to_speech", "speech_to_text", "get_weather", "batch_speech_to_text"]
    # cosine with the request: text_to_speech 0.95, speech_to_text 0.9, get_weather 0.5, batch_speech_to_text 0.3
    cos = np.asarray([0.95, 0.9, 0.5, 0.3], np.float32)
    emb = np.stack([cos, np.sqrt(1 - cos ** 2), np.zeros(4), np.zeros(4)], 1).astype(np.float32)
    return Ranker.build(encoder_id="test", tool_names=tools, tool_emb=emb, risk_levels=np.ones(4, np.int32),
                        config=config), np.asarray([[1.0, 0.0, 0.0, 0.0]], np.float32)


def test_the_stage_reorders_siblings_and_leaves_a_far_tool():
    base = RankConfig(lam=0.0, first_stage="dense", k=4)
    ranker, q = _ranker(base)
    text = ["convert speech to text"]
    assert ranker.rank(q, q_texts=text).tolist() == [[0, 1, 2, 3]]
    on = ranker.with_config(RankConfig(lam=0.0, first_stage="dense", k=4, name_evidence=True, name_weight=1.0,
                                       name_window=2))
    assert on.rank(q, q_texts=text).tolist() == [[1, 0, 2, 3]]  # the sibling swaps; the far namesake stays last
    parts = on.scores(q, text)
    np.testing.assert_allclose(np.asarray(parts.total)[0], [0.9, 0.95, 0.5, 0.3], rtol=1e-6)  # scores traded
    np.testing.assert_allclose(np.asarray(parts.names)[0], [-0.05, 0.05, 0.0, 0.0], atol=1e-6)
    np.testing.assert_array_equal(on.first_stage_scores(q, text), ranker.first_stage_scores(q, text))  # after it
    assert on.prepared.names is not None and ranker.prepared.names is None
    assert on.prepared.device is ranker.prepared.device  # the with_config copy reuses what it can
    with pytest.raises(RankerError):
        on.rank(q)  # the stage reads the request's words
    with pytest.raises(RankerError):
        RankConfig(name_weight=-1.0)
