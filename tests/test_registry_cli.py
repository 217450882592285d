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
    out = json.loads(invoke("registry", "audit", MCP, "--json").stdout)
    rows = {r["name"]: r for r in out["tools"]}
    assert out["summary"]["tools"] == len(rows) == 37 and out["warnings"] == []
    assert sum(out["summary"]["per_level"].values()) == 37
    for risky in ("delete_file", "git_delete_branch", "send_payment", "run_command", "git_reset_hard"):
        assert rows[risky]["risk"] >= 3, rows[risky]
    for safe in ("read_file", "list_directory", "git_status", "git_log", "web_search", "search_docs",
                 "list_transactions", "get_balance"):
        assert rows[safe]["risk"] <= 2, rows[safe]
    for gated in ("run_command", "run_python", "create_refund", "send_payment", "get_api_credentials",
                  "delete_file", "delete_email", "git_reset_hard"):  # above a gateway's default allow_level 3
        assert rows[gated]["risk"] >= 4, rows[gated]
    assert rows["send_email"]["risk"] >= 3 and rows["send_email"]["risk_keywords"] == ["message"]
    assert rows["kill_process"]["risk_source"] == ["mcp:destructiveHint"] and rows["kill_process"]["risk"] == 4
    assert rows["run_command"]["categories"] == ["shell"] and rows["run_command"]["risk_keywords"] == ["exec"]
    assert rows["delete_file"]["annotations"] == ["destructiveHint=true"] and rows["delete_file"]["line"] > 1
    assert all(0.0 < r["learned"] < 1.0 for r in rows.values())


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
    """The registry written to check the gateway's default (allow_level 3): shell, code, money, credentials and
    deletion above it, e-mail and chat messages at 3, reading and searching at most 2, whatever the head says."""
    out = json.loads(invoke("registry", "audit", RISKY, "--json").stdout)
    rows = {r["name"]: r for r in out["tools"]}
    gated = {"run_shell_command": "exec", "execute_python": "exec", "refund_payment": "money",
             "transfer_money": "money", "charge_card": "money", "get_vault_secret": "credential",
             "rotate_api_key": "credential", "delete_file": "delete", "drop_table": "delete",
             "delete_everything": "delete"}
    for name, group in gated.items():
        assert rows[name]["risk"] >= 4 and group in rows[name]["risk_keywords"], rows[name]
        assert any(s.startswith("keywords:") for s in rows[name]["risk_source"]), rows[name]
    for name in ("send_email", "post_slack_message"):
        assert rows[name]["risk"] >= 3 and "message" in rows[name]["risk_keywords"], rows[name]
    for name in ("read_file", "list_files", "search_docs", "get_weather", "web_search", "list_transactions",
                 "get_balance"):
        assert rows[name]["risk"] <= 2 and rows[name]["risk_keywords"] == [], rows[name]
    assert "readOnlyHint=true" in rows["delete_everything"]["annotations"]
    assert "mcp:readOnlyHint" not in rows["delete_everything"]["risk_source"]
    text = invoke("registry", "audit", RISKY).stdout.splitlines()
    assert text[0].split()[:4] == ["risk", "name", "source", "keywords"]
    assert any(line.split()[:3] == ["4", "refund_payment", "keywords:money"] for line in text), text


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
