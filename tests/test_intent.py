"""What a request asks for, and exposure by intent: the keywords (negated clauses left out), the tools' effects, the
exposure weight, the intent model, and the Ranker's intent stage on a small MCP registry."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from riskrank_jax.errors import RiskHeadError
from riskrank_jax.experiments.intent import request_targets
from riskrank_jax.model import intent_model
from riskrank_jax.retrieve import intent
from riskrank_jax.retrieve.intent import EFFECTS

E = {e: i for i, e in enumerate(EFFECTS)}


def _asked(text: str) -> set[str]:
    hits, _ = intent.keyword_needs([text])
    return {e for e in EFFECTS if hits[0, E[e]]}


@pytest.mark.parametrize("text, asked", [
    ("Delete the old logs folder", {"destructive"}),
    ("Send the weekly report to the team by email", {"public_sink"}),
    ("Post 'deploy done' in #ops", {"public_sink"}),
    ("What's the API key for the staging environment?", {"secret_source"}),
    ("Run this python snippet and tell me the output", {"execution"}),
    ("Pay the electricity bill", {"money"}),
    ("Book me on the 7:05 TAP flight to Lisbon", {"money", "local_write"}),
    ("Create a file notes/todo.md listing the tasks", {"local_write"}),
    ("what did people say in the channel", set()),
    ("how many rows are in the orders table", set()),
    ("what's different between my working tree and the last commit", set()),  # "commit", the noun
    ("commit the staged changes with message 'fix'", {"local_write"}),
    ("search the docs for 'delete account'", set()),  # quoted text is what to look for, not what to do
    # clauses that say what not to do ask for nothing
    ("Check my balance before I send Sam anything; don't move any money yet.", set()),
    ("Lint the Python in etl/loader.py, no need to execute it.", set()),
    ("Show my calendar for Monday; I might cancel some meetings later", set()),
])
def test_keywords_read_what_the_request_asks_for(text, asked):
    assert _asked(text) == asked


def test_negated_clause_is_cut_from_its_cue_on():
    assert intent.normalise_request("Check my balance before I send Sam anything; don't move any money yet.") == \
        "check my balance"
    assert intent.normalise_request("deleteRepo now") == "delete repo now"
    assert intent.normalise_request("get the text of https://example.com/delete-me") == "get the text of url"


def _row(mutation, source="learned", **flags):
    row = {"mutation": {"value": mutation, "source": source}}
    row.update({f: {"value": bool(flags.get(f)), "source": "keywords" if flags.get(f) else None}
                for f in ("public_sink", "secret_source", "untrusted_content", "execution", "money")})
    return row


def test_tool_effects_from_dimension_rows():
    sql = {**_row("destructive", "spec default: unannotated", execution=True), "argument_rule": "sql:query"}
    eff = intent.tool_effects([_row("read"), _row("local_write"), _row("destructive", "keywords:delete"),
                               _row("destructive", "spec default: unannotated"),
                               _row("read", public_sink=True, untrusted_content=True), sql])
    assert eff.tolist() == [
        [False] * 6,
        [True, False, False, False, False, False],
        [False, True, False, False, False, False],
        [True, False, False, False, False, False],  # a presumed destruction counts as a write here
        [False, False, True, False, False, False],  # untrusted content is a read, not an effect
        [True, False, False, False, False, False],  # its SQL is judged per call: running code is not its effect
    ]
    # what the hold-back keeps from read requests: a presumed destruction too (the MCP specification's default)
    assert intent.tool_must_confirm([_row("read"), _row("local_write"), _row("destructive", "keywords:delete"),
                                     _row("destructive", "spec default: unannotated"), _row("read", money=True),
                                     sql]).tolist() == [False, False, True, True, True, False]


def test_exposure_weight_holds_back_what_was_not_asked_for():
    eff = np.zeros((4, 6), bool)
    eff[1, E["public_sink"]] = True  # sends
    eff[2, E["local_write"]] = True  # writes locally
    eff[3, [E["local_write"], E["destructive"]]] = True  # deletes
    need = np.zeros((3, 6), np.float32)
    need[1, E["public_sink"]] = 1.0  # a send request
    need[2, E["local_write"]] = 1.0  # a local write request
    u = np.asarray(intent.unasked(need, eff, 0.5))
    # a read request: every tool with an effect fully unasked; a tool without effects never
    assert u[0].tolist() == [0.0, 1.0, 1.0, 1.0]
    # a send request: the send tool asked; a local write covered by any change; deletion half (specific 0.5)
    assert u[1].tolist() == [0.0, 0.0, 0.0, 0.5]
    assert u[2].tolist() == [0.0, 0.5, 0.0, 0.5]
    w = np.asarray(intent.exposure_weight(need, eff, 8.0, 1.0, 0.5))
    np.testing.assert_allclose(w[0], [1.0, 9.0, 9.0, 9.0])
    np.testing.assert_allclose(w[1], [1.0, 0.0, 0.0, 5.0 - 0.5])
    # held back: the must-confirm tools (sends, deletes) of the read request only; a local write never
    must = eff[:, 1:].any(axis=1)
    held = np.asarray(intent.held_back(need, must, 0.75))
    assert held.tolist() == [[False, True, False, True], [False] * 4, [False] * 4]
    assert not np.asarray(intent.held_back(need, must, 0.0)).any()
    half = np.full((1, 6), 0.0, np.float32)
    half[0, E["local_write"]] = intent.ASKED  # read as asking: never held to reading
    assert not np.asarray(intent.held_back(half, must, 0.5)).any()


def test_request_needs_sources_and_agreement_never_makes_a_read_a_write():
    texts = ["delete the draft", "what is in the channel"]
    learned = np.zeros((2, 6), np.float32)
    learned[0, E["local_write"]] = 0.6
    agree = np.ones((2, 6), np.float32)  # the top tools of both requests all send, delete, ...
    needs = intent.request_needs(texts, learned, agree, agreement_weight=1.0)
    assert needs.sources[0][E["destructive"]] == "keywords: delete"
    assert needs.need[0, E["destructive"]] == pytest.approx(intent.KEYWORD_CONFIDENCE)
    assert needs.sources[0][E["money"]] == "agreement: 3 of the top 3"
    assert needs.need[0, E["money"]] == pytest.approx(intent.KEYWORD_CONFIDENCE)  # scaled by the words' need
    assert needs.need[1].max() == 0.0 and needs.sources[1] == ("",) * 6
    assert needs.summary(1) == "the request only reads"
    assert needs.summary(0).startswith("the request asks to change data, delete")
    sends = np.zeros(6, bool)
    sends[E["public_sink"]] = True
    assert intent.held_back_reason(needs, 1, sends) == "held back: sends to others; the request only reads"


def test_agreement_is_the_share_of_the_top_tools_with_each_effect():
    eff = np.zeros((4, 6), bool)
    eff[0, 0] = eff[1, 0] = eff[3, 1] = True
    scores = np.array([[0.9, 0.8, 0.1, 0.7], [0.0, 0.1, 0.9, 0.8]], np.float32)
    a = intent.agreement(scores, eff, top=3)
    np.testing.assert_allclose(a[:, :2], [[2 / 3, 1 / 3], [1 / 3, 1 / 3]])


def _toy_requests():
    objects = ["file", "report", "folder", "invoice", "note", "record", "entry", "ticket", "page", "draft"]
    texts = [f"delete the {o}" for o in objects] + [f"remove that {o} for good" for o in objects] + \
            [f"show the {o}" for o in objects] + [f"what is in the {o}" for o in objects]
    y = np.zeros((len(texts), 6), np.float32)
    y[:20, E["destructive"]] = 1.0
    return texts, y


def test_intent_model_learns_words_and_masks_rows_out_exactly():
    texts, y = _toy_requests()
    x = intent_model.features(texts)
    assert x.shape == (40, intent_model.HASH_DIM + 6)
    w, b = intent_model.fit(x, y, np.stack([np.ones(40), np.arange(40) % 2 == 0]))
    p = intent_model.predict(w[0], b[0], intent_model.features(["remove the contract", "show the contract"]))
    assert p[0, E["destructive"]] > 0.8 > 0.2 > p[1, E["destructive"]]
    # the model of mask row 1 is the model fitted on those rows alone
    w1, b1 = intent_model.fit(x[::2], y[::2])
    np.testing.assert_allclose(w[1], w1[0], atol=1e-5)
    np.testing.assert_allclose(b[1], b1[0], atol=1e-5)


def test_intent_model_file_round_trips_and_refuses_other_files(tmp_path):
    texts, y = _toy_requests()
    w, b = intent_model.fit(intent_model.features(texts), y)
    model = intent_model.IntentModel(w[0], b[0], {"trained_on": {"toy": 40}})
    model.save(tmp_path / "m.npz")
    back = intent_model.IntentModel.load(tmp_path / "m.npz")
    assert back.meta["trained_on"] == {"toy": 40}
    np.testing.assert_allclose(back.probs(texts), model.probs(texts), atol=2e-3)  # weights stored as float16
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    with pytest.raises(RiskHeadError, match="bad.npz: not an intent model file"):
        intent_model.IntentModel.load(tmp_path / "bad.npz")


def test_shipped_intent_model_reads_requests_it_never_saw():
    model = intent_model.default_model()
    assert model is not None and set(model.meta["trained_on"]) == {"demo", "sealtools", "ultratool"}
    p = model.probs(["please wipe the staging database", "forward this thread to the legal team",
                     "list the files in my home folder"])
    assert p[0, E["destructive"]] > p[2, E["destructive"]]
    assert p[1, E["public_sink"]] > 0.5 > p[2, E["public_sink"]]


def test_request_targets_are_the_gold_tools_effects():
    eff = np.zeros((3, 6), bool)
    eff[1, E["destructive"]] = eff[2, E["money"]] = True
    gold = np.array([[0, -1], [1, 2], [-1, -1]])
    assert request_targets(gold, eff).tolist() == [[0] * 6, [0, 1, 0, 0, 0, 1], [0] * 6]


MCP_TOOLS = {"tools": [
    {"name": "read_channel_history", "description": "Read the recent messages of a chat channel.",
     "annotations": {"readOnlyHint": True}},
    {"name": "post_message", "description": "Post a message to a chat channel.",
     "annotations": {"readOnlyHint": False, "destructiveHint": False}},
    {"name": "delete_channel", "description": "Delete a chat channel and all its messages.",
     "annotations": {"readOnlyHint": False, "destructiveHint": True}},
    {"name": "list_channels", "description": "List the chat channels of the workspace.",
     "annotations": {"readOnlyHint": True}},
    {"name": "get_weather", "description": "Get the weather forecast for a city.",
     "annotations": {"readOnlyHint": True}},
    {"name": "convert_units", "description": "Convert a quantity between units.",
     "annotations": {"readOnlyHint": True}},
]}


def test_ranker_intent_stage_holds_back_a_send_tool_from_a_read_request_and_keeps_it_for_a_send():
    from riskrank_jax.rank.ranker import Ranker

    base = Ranker.from_registry([MCP_TOOLS], trust_annotations=True)
    plain = base.with_config(dataclasses.replace(base.config, intent=False))
    held = base.with_config(dataclasses.replace(base.config, intent=True, intent_hold_back=0.75))
    read, send = "what did people say in the chat channel", "post a message in the chat channel"

    def top(r, q, k=3):
        return [h.name for h in r.rank_queries([q], k=k)[0]]

    assert {"post_message", "delete_channel"} & set(top(plain, read))  # the plain penalty leaves them in
    assert not {"post_message", "delete_channel"} & set(top(held, read))
    assert top(held, send)[0] == "post_message"
    assert "delete_channel" not in top(held, send)  # deleting was not asked for
    # explained in one walk: what the request was read as, and why each tool is held back
    from riskrank_jax.rank.explain import search_explained

    hits, back, request = search_explained(held, read, 3)
    assert [h.name for h in hits] == top(held, read) and request["asks"] == "the request only reads"
    reasons = {b["name"]: (b["held_by"], b["reason"].split(";")[0]) for b in back}
    assert reasons["post_message"] == ("intent hold-back", "held back: changes data, sends to others")
    # the graph does not carry a held-back tool's offset to its neighbours: held tools rank last, the others
    # score as with the hold-back off
    full = held.scores(held.encode_queries([read]), [read]).total[0]
    free = base.with_config(dataclasses.replace(base.config, intent=True)).scores(
        held.encode_queries([read]), [read]).total[0]
    is_held = np.asarray(full) < -intent.HOLD_OFFSET / 2
    assert is_held.sum() == 2 and np.allclose(np.asarray(full)[~is_held], np.asarray(free)[~is_held])
