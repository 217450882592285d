"""`riskrank-jax registry audit` and `fit-risk` on the shipped examples (real default encoder, temporary cache)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from conftest import cli_invoker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MCP = str(EXAMPLES / "mcp_tools.json")
RISKY = str(EXAMPLES / "risky_tools.json")


@pytest.fixture(scope="module")
def invoke(tmp_path_factory):
    return cli_invoker(str(tmp_path_factory.mktemp("cache")))


def test_audit_json_of_the_mcp_example(invoke):
    """Risk by dimensions (the default since issue 35): every tool that deletes, sends, pays, runs code or reads
    credentials needs confirmation at the default policy, the reads pass, and each dimension names its source."""
    out = json.loads(invoke("registry", "audit", MCP, "--json").stdout)
    rows = {r["name"]: r for r in out["tools"]}
    assert out["summary"]["tools"] == len(rows) == 37 and out["warnings"] == []
    assert sum(out["summary"]["per_level"].values()) == 37
    passing = sum(r["risk"] <= 3 for r in rows.values())  # the default allow_level
    assert out["summary"]["per_call"] == {"allowed": passing, "needs confirmation": 37 - passing} and passing >= 14
    for gated in ("run_command", "run_python", "create_refund", "send_payment", "get_api_credentials",
                  "delete_file", "delete_email", "git_reset_hard", "git_delete_branch", "git_push", "send_email",
                  "forward_all_mail", "kill_process", "write_file"):
        assert rows[gated]["risk"] >= 4 and rows[gated]["call"] == "needs confirmation", rows[gated]
    for safe in ("read_file", "list_directory", "git_status", "git_log", "web_search", "search_docs",
                 "list_transactions", "get_balance"):
        assert rows[safe]["risk"] <= 2 and rows[safe]["call"] == "allowed", rows[safe]
        assert rows[safe]["dimensions"]["mutation"] == {"value": "read", "source": "learned"}, rows[safe]
    dims = {n: r["dimensions"] for n, r in rows.items()}
    assert dims["send_payment"]["money"] == {"value": True, "source": "keywords:send payment"}
    assert dims["send_payment"]["mutation"] == {"value": "destructive", "source": "mcp:destructiveHint=true"}
    assert dims["kill_process"]["mutation"]["source"] == "mcp:destructiveHint=true"
    assert dims["write_file"]["mutation"] == {"value": "destructive", "source": "mcp:readOnlyHint=false"}
    assert dims["git_push"]["public_sink"] == {"value": True, "source": "keywords:push"}
    assert dims["get_api_credentials"]["secret_source"] == {"value": True, "source": "keywords:get api credentials"}
    assert dims["run_command"]["execution"]["source"] == "keywords:run command"
    assert dims["run_command"]["argument_rule"] == "shell:command" and dims["read_file"]["argument_rule"] is None
    assert rows["run_command"]["categories"] == ["shell"] and "execution" in rows["run_command"]["risk_keywords"]
    assert rows["delete_file"]["annotations"] == ["destructiveHint=true"] and rows["delete_file"]["line"] > 1
    # learned: the model's highest must-confirm probability
    assert all(0.0 <= r["learned"] <= 1.0 for r in rows.values())
    assert rows["send_payment"]["learned"] > 0.5 > rows["read_file"]["learned"]


def test_audit_csv_and_text_with_merge_and_warnings(invoke):
    files = [MCP, str(EXAMPLES / "openai_tools.json"), str(EXAMPLES / "anthropic_tools.json")]
    res = invoke("registry", "audit", *files, "--csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 37 + 4 + 3
    by = {r["name"]: r for r in rows}
    assert by["anthropic_tools/read_file"]["risk"] == "1" and by["anthropic_tools/read_file"]["risk_source"] == "declared"
    assert "namespaced as 'mcp_tools/read_file'" in by["mcp_tools/read_file"]["warnings"]
    assert "web_search_preview" in res.stderr and "tool_search_tool_bm25_20251119" in res.stderr
    text = invoke("registry", "audit", *files).stdout
    assert text.splitlines()[-1].startswith("44 tools; risk levels 1..5: ")


def test_trust_annotations_only_lowers(invoke):
    default = json.loads(invoke("registry", "audit", MCP, "--json").stdout)
    trusted = json.loads(invoke("registry", "audit", MCP, "--json", "--trust-annotations").stdout)
    assert trusted["trust_annotations"] and not default["trust_annotations"]
    for d, t in zip(default["tools"], trusted["tools"]):
        assert t["risk"] <= d["risk"]
        if "readOnlyHint=true" in d["annotations"]:  # reading credentials stays above allow_level 3
            secret = "secret" in d["categories"] or "credential" in d["risk_keywords"]
            assert t["risk"] <= (4 if secret else 2)
            assert t["risk"] >= 4 or not secret


def test_audit_of_the_risky_example_with_the_shipped_head(invoke):
    """The registry written to check the gateway's default (allow_level 3): shell, code, money, credentials,
    deletion and messages to other people above it (each with the dimension that puts it there), reading and
    searching at most 2, whatever the annotations claim."""
    out = json.loads(invoke("registry", "audit", RISKY, "--json").stdout)
    rows = {r["name"]: r for r in out["tools"]}
    gated = {"run_shell_command": "execution", "execute_python": "execution", "refund_payment": "money",
             "transfer_money": "money", "charge_card": "money", "get_vault_secret": "secret_source",
             "send_email": "public_sink", "post_slack_message": "public_sink", "drop_table": "mutation",
             "delete_everything": "mutation"}
    for name, dim in gated.items():
        assert rows[name]["risk"] >= 4 and rows[name]["call"] == "needs confirmation", rows[name]
        d = rows[name]["dimensions"][dim]
        assert d["value"] in (True, "destructive") and d["source"].startswith("keywords:"), rows[name]
    for name in ("rotate_api_key", "delete_file", "write_file"):
        assert rows[name]["risk"] >= 4 and rows[name]["call"] == "needs confirmation", rows[name]
    for name in ("read_file", "list_files", "search_docs", "get_weather", "web_search", "list_transactions",
                 "get_balance"):
        assert rows[name]["risk"] <= 2 and rows[name]["call"] == "allowed", rows[name]
    # delete_everything claims readOnlyHint: true; an untrusted server's claim lowers nothing
    assert "readOnlyHint=true" in rows["delete_everything"]["annotations"]
    assert rows["delete_everything"]["dimensions"]["mutation"] == {"value": "destructive", "source": "keywords:delete"}
    assert out["summary"]["per_call"] == {"allowed": 7, "needs confirmation": 14}
    text = invoke("registry", "audit", RISKY).stdout.splitlines()
    assert text[0].split()[:5] == ["risk", "name", "call", "source", "keywords"]
    assert any(line.split()[:4] == ["5", "refund_payment", "needs", "confirmation"]
               and "money (keywords:refund)" in line for line in text), text
    assert text[-1].endswith("calls: allowed 7, needs confirmation 14")


def test_bad_input_exits_1_with_file_and_line(invoke, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "a",\n  "description": 5}]')
    res = invoke("registry", "audit", str(bad), code=1)
    assert res.stderr.startswith("error: ") and "bad.json:1: description of tool 'a' must be a string" in res.stderr
    bad.write_text('[{"name": "a"},\n {"name": }]')
    assert "bad.json:2: malformed JSON" in invoke("registry", "audit", str(bad), code=1).stderr
    assert "choose one of --json and --csv" in invoke("registry", "audit", MCP, "--json", "--csv", code=2).stderr


def test_fit_risk_on_a_labelled_file_then_audit_with_it(invoke, tmp_path):
    tools = [{"name": f"read_{i}", "description": f"Read report number {i} and show it.", "risk": 1} for i in range(6)]
    tools += [{"name": f"wipe_{i}", "description": f"Permanently wipe disk {i} and every backup on it.", "risk": 5}
              for i in range(6)]
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("\n".join(json.dumps(t) for t in tools))
    head = tmp_path / "head.npz"
    res = invoke("fit-risk", str(labelled), "--out", str(head), "--cv", "0", "--epochs", "200")
    assert "12 tools, risk levels 1..5: 6 / 0 / 0 / 0 / 6" in res.stdout and head.is_file()
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps([{"name": "wipe_server", "description": "Permanently wipe the server disk."},
                                 {"name": "read_summary", "description": "Read the summary report."}]))
    rows = json.loads(invoke("registry", "audit", str(probe), "--json", "--risk-head", str(head)).stdout)["tools"]
    assert rows[0]["learned"] > 0.5 > rows[1]["learned"]
    unlabelled = tmp_path / "u.json"
    unlabelled.write_text(json.dumps([{"name": "x", "description": "y"}]))
    assert "declare no 'risk'" in invoke("fit-risk", str(unlabelled), "--out", str(head), code=1).stderr
    assert "either FILE... or --benchmark" in invoke("fit-risk", "--out", str(head), code=2).stderr
    os.remove(head)
