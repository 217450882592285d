"""The gateway's state store end to end: `riskrank-jax serve` (stdio, SQLite in its state directory) in front of
the honest files server, driven by the official SDK's client; every call leaves exactly one record in the store
(the same decision as its JSONL export line) with its outcome, confirmations are recorded, and
`riskrank-jax audit` answers questions about them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attack_harness import files_server, gateway_env, stdio_gateway  # noqa: E402
from riskrank_jax.serve.sessions import Sessions  # noqa: E402
from riskrank_jax.serve.store import open_store  # noqa: E402


@pytest.fixture(scope="module")
def g(tmp_path_factory, shared_gateway_cache):
    d = tmp_path_factory.mktemp("store-gateway")
    team = {"command": sys.executable, "args": [str(Path(__file__).resolve().parent / "team_server.py")],
            "env": {"CALLS_LOG": str(d / "team-calls.jsonl")}}
    cfg = {"mcpServers": {"files": files_server(d / "calls.jsonl"), "team": team},
           "policy": {"deny": ["files.delete_file"]}}
    with stdio_gateway(d, cfg, shared_gateway_cache) as gate:
        yield gate


def audit(g, *args: str, fmt: str = "json"):
    """``riskrank-jax audit --state-dir STATE --all ARGS...`` as a subprocess: parsed JSON, or the table's text."""
    cmd = [sys.executable, "-m", "riskrank_jax", "audit", "--state-dir", str(g.state), "--all", "--format", fmt, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=gateway_env(g.dir / "cli-cache"))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if fmt == "json" else p.stdout


def test_every_call_has_one_record_with_its_outcome_and_the_export_agrees(g):
    g.answer = "accept"
    assert not g.call("files.read_file", {"path": "notes.txt"}).is_error
    assert g.call("files.delete_file", {"path": "notes.txt"}).is_error  # denied by the policy
    assert not g.call("files.write_file", {"path": "notes.txt", "content": "hi"}).is_error  # asks: accepted
    g.answer = "decline"
    assert g.call("files.write_file", {"path": "notes.txt", "content": "bye"}).is_error
    assert g.call("files.no_such_tool", {}).is_error
    records, lines = audit(g)[::-1], g.audit()  # oldest first, as the export
    assert len(records) == len(lines) == g.made == 5
    for r, line in zip(records, lines):  # the same decision in both, field for field
        assert {k: r[k] for k in line if k != "secrets"} == line
    assert [(r["tool"], r["decision"], r["outcome"]) for r in records] == [
        ("files.read_file", "allowed", "ok"), ("files.delete_file", "refused", "not forwarded"),
        ("files.write_file", "confirmed", "ok"), ("files.write_file", "refused", "not forwarded"),
        ('"files.no_such_tool"', "refused", "not forwarded")]
    assert [c["tool"] for c in g.calls()] == ["read_file", "write_file"]  # what reached the server
    assert len({r["id"] for r in records}) == 5 and len({r["replica"] for r in records}) == 1
    assert all(r["completed_at"] >= r["time"] for r in records)
    events = Sessions(open_store(g.state), "reader").confirmations()
    assert sorted(c["event"] for c in events) == ["declined", "granted"]
    assert {c["tool"] for c in events} == {"files.write_file"}


def test_audit_command_filters_and_table(g):
    if not g.made:
        test_every_call_has_one_record_with_its_outcome_and_the_export_agrees(g)
    denied = audit(g, "--tool", "files.delete_file")
    assert [(r["decision"], r["rule"]) for r in denied] == [("refused", "deny")]
    assert [r["tool"] for r in audit(g, "--decision", "confirmed", "--server", "files", "--since", "1h")] == [
        "files.write_file"]
    assert audit(g, "--until", "2000-01-01") == []
    assert {r["outcome"] for r in audit(g, "--outcome", "ok")} == {"ok"}
    # a client of the stateless newest revision has no session: its calls share the gateway's one flow
    assert {r["session"] for r in audit(g)} == {None} and audit(g, "--session", "bf091faa6994") == []
    text = audit(g, "--decision", "refused", fmt="table")
    assert text.splitlines()[0].split() == ["time", "decision", "outcome", "rule", "risk", "tool", "session"]
    assert "files.delete_file" in text and "not forwarded" in text and "files.read_file" not in text
    jsonl = audit(g, fmt="jsonl").splitlines()
    assert [json.loads(x)["id"] for x in jsonl] == [r["id"] for r in audit(g)]
    p = subprocess.run([sys.executable, "-m", "riskrank_jax", "audit", "--state-dir", str(g.state), "--since",
                        "last tuesday"], capture_output=True, text=True, timeout=120,
                       env=gateway_env(g.dir / "cli-cache"))
    assert p.returncode == 2 and "--since" in p.stderr and "7d" in p.stderr


def test_over_stdio_the_newest_revision_keeps_one_flow_across_requests(g):
    """A stdio client of the 2026-07-28 revision gets a new session object from the SDK for every request; the
    session-flow rule must still carry from the call that returned untrusted content to the next sink call."""
    if not g.made:
        test_every_call_has_one_record_with_its_outcome_and_the_export_agrees(g)
    g.answer = "decline"
    assert not g.call("team.fetch_page", {"url": "https://example.com/news"}).is_error
    r = g.call("team.post_message", {"channel": "public", "text": "notes"})
    assert r.is_error and r.structured_content["rule"] == "session flow"
    assert "'team.fetch_page' returned untrusted content earlier in this session" in r.structured_content["reason"]
    assert [x["rule"] for x in audit(g, "--server", "team")] == ["session flow", "level"]  # newest first
