"""Risk of user registries: word-boundary keywords, the risk keyword groups a gateway confirms, the combination
rule, annotations, the risk head."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax.permissions import CATEGORY_NAMES, PERMISSION_CATEGORIES, permission_mask
from riskrank_jax.model.risk_head import (HeadConfig, RiskHead, default_head, RiskHeadConfig, levels_from_scores,
                                          train_risk_head, train_risk_heads)
from riskrank_jax.registry import RiskHeadError, load_registry
from riskrank_jax.registry.permissions import matched_categories, permission_mask_words
from riskrank_jax.registry.risk import (DEFAULT_KEYWORD_FLOORS, DEFAULT_RISK_FLOORS, RISK_KEYWORDS, RiskPolicy,
                                        assess_risk, keyword_floor, matched_groups, risk_keyword_mask)
from riskrank_jax.registry.risk_agreement import auc, cross_val_scores, spearman


def test_word_boundaries_versus_the_papers_substring_rule():
    texts = ["api_description: Get the weather forecast", "Evaluate the executive summary",
             "Deletes files and runs scripts", "runShellCommand", "Tokenize a sentence"]
    words = permission_mask_words(texts)
    subs = permission_mask(texts)
    assert subs[0, 4] and not words[0].any()          # "script" inside "description": substring only
    assert subs[1, 4] and not words[1].any()          # "eval", "exec" inside longer words
    assert matched_categories(texts[2]) == ("shell", "write", "code")  # inflections: deletes, runs scripts
    assert matched_categories(texts[3]) == ("shell",)  # camelCase split
    assert subs[4, 3] and not words[4].any()          # "token" inside "tokenize"


def test_keyword_floor_takes_the_highest_matched_category():
    mask = permission_mask_words(["Fetch a URL", "Fetch a URL and run a python script", "Execute it", "Nothing here"])
    floors = {"shell": 3, "write": 3, "secret": 3, "code": 2, "network": 1}
    assert keyword_floor(mask, floors).tolist() == [1, 2, 3, 1]


def _reg(**annotations):
    return load_registry([{"name": "t", "description": "Show a report.", "inputSchema": {},
                           "annotations": annotations}])


def test_destructive_hint_raises_but_only_when_declared():
    low = np.array([0.0])  # learned level 1
    r = assess_risk(_reg(destructiveHint=True), low)
    assert r.levels.tolist() == [4] and r.sources == (("mcp:destructiveHint",),)  # above a gateway's allow_level 3
    assert r.scores.tolist() == [0.75]
    assert assess_risk(_reg(), low).levels.tolist() == [1]  # default destructiveHint=true does not raise
    assert assess_risk(_reg(destructiveHint=True, readOnlyHint=True), low).levels.tolist() == [1]


def test_annotations_never_lower_unless_trusted():
    high = np.array([0.76])  # learned level 4
    ro = _reg(readOnlyHint=True)
    r = assess_risk(ro, high)
    assert r.levels.tolist() == [4] and r.sources == (("learned",),)
    t = assess_risk(ro, high, RiskPolicy(trust_annotations=True))
    assert t.levels.tolist() == [2] and t.sources == (("mcp:readOnlyHint",),) and t.scores.tolist() == [0.25]
    secret = load_registry([{"name": "t", "description": "Reveal the stored password.", "inputSchema": {},
                             "annotations": {"readOnlyHint": True}}])
    s = assess_risk(secret, np.array([0.95]), RiskPolicy(trust_annotations=True))  # learned 5, capped at 4:
    assert s.levels.tolist() == [4] and s.sources == (("mcp:readOnlyHint",),)  # reading credentials stays risky
    assert assess_risk(_reg(readOnlyHint=True), np.array([0.1]), RiskPolicy(trust_annotations=True)).levels.tolist() == [1]


def test_declared_risk_first_and_sources_that_agree():
    reg = load_registry([
        {"name": "a", "description": "Delete a file.", "risk": 1, "inputSchema": {}, "annotations": {"destructiveHint": True}},
        {"name": "b", "description": "Run a shell command.", "inputSchema": {}},
        {"name": "c", "description": "Run a shell command.", "inputSchema": {}},
        {"name": "d", "description": "Open a terminal.", "inputSchema": {}},
    ])
    r = assess_risk(reg, np.array([0.9, 0.8, 0.0, 0.0]))
    assert r.levels.tolist() == [1, 4, 4, 3]
    assert r.sources == (("declared",), ("learned", "keywords:exec"), ("keywords:exec",), ("keywords:shell",))
    assert r.categories[1] == ("shell",) and r.groups[1] == ("exec",) and r.groups[3] == ()
    no_head = assess_risk(reg)
    assert no_head.levels.tolist() == [1, 4, 4, 3] and no_head.sources[1] == ("keywords:exec",)
    assert np.isnan(no_head.learned[1])


# ------------------------------------------------------------- risk keyword groups: what a gateway must confirm

RISKY = Path(__file__).resolve().parent.parent / "examples" / "risky_tools.json"
# tool -> the group that must hold it above a gateway's default allow_level 3
GATED = {"run_shell_command": "exec", "execute_python": "exec", "refund_payment": "money",
         "transfer_money": "money", "charge_card": "money", "get_vault_secret": "credential",
         "rotate_api_key": "credential", "delete_file": "delete", "drop_table": "delete", "delete_everything": "delete"}
LOW = ("read_file", "list_files", "search_docs", "get_weather", "web_search", "list_transactions", "get_balance")
MESSAGES = ("send_email", "post_slack_message")


def _keyword_groups(sources: tuple[str, ...]) -> list[str]:
    """The categories / groups named by a "keywords:a+b" source."""
    return [g for s in sources if s.startswith("keywords:") for g in s.split(":", 1)[1].split("+")]


def documented_categories(method_md: str) -> dict[str, tuple[str, ...]]:
    """The permission-category table of docs/method.md ("| category | keywords |" rows) as {category: keywords}."""
    table = method_md.split("| category | keywords |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()]
    return {name: tuple(k.strip() for k in keywords.split(",")) for name, keywords in rows}


def test_the_papers_permission_categories_are_the_documented_ones():
    # the benchmark reproduction (ToolGraph permission edges, rule filter) reads these; the groups are apart
    method_md = (Path(__file__).resolve().parent.parent / "docs" / "method.md").read_text()
    assert PERMISSION_CATEGORIES == documented_categories(method_md)
    assert CATEGORY_NAMES == ("shell", "write", "network", "secret", "code")
    assert DEFAULT_KEYWORD_FLOORS == {"shell": 3, "write": 3, "secret": 3, "code": 2, "network": 1}
    reg = load_registry([RISKY])
    assert reg.perm_mask().shape == permission_mask(list(reg.texts)).shape == (reg.size, 5)
    assert not reg.perm_mask()[reg.names.index("refund_payment")].any()  # money is a group, not a category


def test_risk_groups_match_actions_not_nouns():
    assert set(RISK_KEYWORDS) == set(DEFAULT_RISK_FLOORS) == {"exec", "money", "credential", "delete", "message"}
    assert min(DEFAULT_RISK_FLOORS.values()) == DEFAULT_RISK_FLOORS["message"] == 3
    cases = {
        "Run a shell command on the host": ("exec",),
        "Executes Python code in a sandbox": ("exec",),
        "runShellCommand": ("exec",),
        "api_description: Get the weather forecast": (),  # "script" inside "description"
        "List running processes and executed commands": (),
        "Refund a captured payment": ("money",),
        "Book a table and charge the deposit to the saved card": ("money",),
        "Transfer 50 USD to Bob": ("money",),
        "Place a market or limit order to buy or sell shares": ("money",),
        "List recent charges, refunds and transfers with amounts": (),  # nouns that read like verbs
        "Create a draft invoice; nothing is charged until it is sent": (),
        "Cancel the subscription; the remaining period is not refunded": (),
        "Show the balance of the payment account": (),
        "show payslip: Show the pay period. Parameters: charge (Charge id)": (),  # clause openers: not parameters
        "Rotate the API key of a service": ("credential",),
        "Read a password from the vault": ("credential",),
        "Tokenize a sentence": (),
        "Drop a table from the database": ("delete",),
        "Permanently deleting the folder": ("delete",),
        "Archive the message without deleting it": (),
        "Check that the file was deleted": (),
        "Create a new empty folder": (),
        "Remove an item from the shopping cart": (),
        "Empty the trash bin": ("delete",),
        "Send an e-mail to any recipients": ("message",),
        "Post a message to a Slack channel": ("message",),
        "Save a draft e-mail without sending it": (),
        "Register a webhook that receives an HTTP POST": (),
        "get flight status: gate and terminal": (),
    }
    for text, groups in cases.items():
        assert matched_groups(text) == groups, text
    assert risk_keyword_mask(list(cases)).shape == (len(cases), len(RISK_KEYWORDS))


def test_risky_example_needs_confirmation_at_the_default_policy():
    reg = load_registry([RISKY])
    r = assess_risk(reg)  # no head: the keywords and annotations alone
    by = {n: i for i, n in enumerate(reg.names)}
    for name, group in GATED.items():
        i = by[name]
        assert r.levels[i] >= 4 and group in r.groups[i], (name, r.groups[i])
        assert group in _keyword_groups(r.sources[i]), (name, r.sources[i])  # the source says why
    for name in MESSAGES:
        assert r.levels[by[name]] == 3 and r.sources[by[name]] == ("keywords:message",)
    for name in LOW:
        assert r.levels[by[name]] <= 2 and r.groups[by[name]] == (), name
    assert r.levels[by["write_file"]] == 4 and r.sources[by["write_file"]] == ("mcp:destructiveHint",)
    i = by["delete_everything"]  # its annotations lie: readOnlyHint true, destructiveHint false
    assert reg.annotations[i].declared_true("readOnlyHint") and "mcp:readOnlyHint" not in r.sources[i]
    trusted = assess_risk(reg, policy=RiskPolicy(trust_annotations=True))  # only trusting the server lowers it
    assert trusted.levels[i] == 2 and trusted.sources[i] == ("mcp:readOnlyHint",)
    assert trusted.levels[by["get_vault_secret"]] == 4  # credentials stay above allow_level 3 even then
    assert assess_risk(reg, policy=RiskPolicy(trusted_sources=(reg.tools[i].source,))).levels[i] == 2
    old = RiskPolicy(risk_floors={}, destructive_floor=3)  # the rule before the groups: they passed at 3
    assert all(assess_risk(reg, policy=old).levels[by[n]] <= 3 for n in ("run_shell_command", "refund_payment",
                                                                         "get_vault_secret", "send_email"))


def test_levels_from_scores():
    assert levels_from_scores([0.0, 0.12, 0.13, 0.5, 0.9, 1.0]).tolist() == [1, 1, 2, 3, 5, 5]


def _clusters(n=80, d=16, seed=0):
    rng = np.random.default_rng(seed)
    risk = rng.integers(1, 6, n)
    centre = rng.normal(size=d)
    emb = rng.normal(size=(n, d)) * 0.3 + np.outer(risk - 3, centre) * 0.3
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32), risk


def test_risk_head_learns_and_round_trips(tmp_path):
    emb, risk = _clusters()
    params, losses = train_risk_head(emb, risk, HeadConfig(epochs=40))
    assert losses[-1] < losses[0]
    head = RiskHead(params, "enc@x", "synthetic", len(risk), HeadConfig(epochs=40))
    assert auc(head.scores(emb), risk) > 0.95 and spearman(head.scores(emb), risk) > 0.8
    oof = cross_val_scores(emb, risk, 4, HeadConfig(epochs=40))
    assert auc(oof, risk) > 0.85
    back = RiskHead.load(head.save(tmp_path / "h.npz"))
    assert np.array_equal(back.scores(emb), head.scores(emb)) and back.config.epochs == 40
    with pytest.raises(RiskHeadError, match="trained on enc@x embeddings"):
        back.check_encoder("other", 16)


def test_risk_head_bad_files_and_inputs(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(RiskHeadError, match="x.npz: not a risk head file"):
        RiskHead.load(tmp_path / "x.npz")
    with pytest.raises(RiskHeadError, match="not found"):
        RiskHead.load(tmp_path / "missing.npz")
    with pytest.raises(RiskHeadError, match="1..5"):
        train_risk_head(np.zeros((4, 3), np.float32), np.array([0, 1, 2, 3]))


def test_one_trainer_for_one_seed_and_for_a_vmapped_seed_axis():
    emb, risk = _clusters()
    cfg = RiskHeadConfig(epochs=5)  # the sweep's: adam, no decay, the dual-head initialisation
    assert (cfg.optimizer, cfg.init, cfg.weight_decay, cfg.batch_size) == ("adam", "dual", 0.0, 64)
    stacked = train_risk_heads(emb, risk, (3, 8), cfg)["risk"]
    assert stacked["V1"].shape == (2, emb.shape[1], cfg.hidden)
    for i, seed in enumerate((3, 8)):
        one, _ = train_risk_head(emb, risk, dataclasses.replace(cfg, seed=seed))
        for k in one:
            np.testing.assert_allclose(np.asarray(stacked[k][i]), one[k], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="optimizer"):
        HeadConfig(optimizer="sgd")
    with pytest.raises(RiskHeadError, match="1..5"):
        train_risk_heads(emb, np.zeros(len(risk), int), (0,))


def test_shipped_head_is_the_demo_head():
    head = default_head()
    assert head.trained_on == "demo" and head.n_tools == 263 and head.dim == 384
    assert head.encoder_id.startswith("sentence-transformers/all-MiniLM-L6-v2@")
    assert head.metrics["5fold_cv"]["auc_r>=3"] > 0.85
