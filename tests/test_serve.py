"""`riskrank-jax serve`: the MCP gateway, with real downstream MCP servers (examples/gateway/, the official
SDK's MCPServer) started as subprocesses over stdio and streamable HTTP, driven by the SDK's own client.

Two gateways run for the whole module (each start costs an encoder load): one over stdio with the example
servers at the default policy, one over streamable HTTP with a bearer token and a policy that allows
`delete_file`. Config errors and the policy are tested without starting anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal

from riskrank_jax.errors import ConfigError, MalformedJSONError
from riskrank_jax.serve.config import read_config
from riskrank_jax.serve.policy import Policy, decide

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "gateway"
sys.path.insert(0, str(EXAMPLES))
from session import config_for, transcript  # noqa: E402
from local_ports import child_pid, free_port, wait_port  # noqa: E402


def _calls(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------------------------------------- no servers


@pytest.mark.parametrize("text, line, message", [
    ('{\n "mcpServers": {\n  "a": {"command": "python",}\n }\n}', 3, "malformed JSON"),
    ('{\n "mcpServers": {\n  "a": {"command": "python", "args": [1]}\n }\n}', 3, "args must be a list of strings"),
    ('{\n "mcpServers": {\n  "a": {"url": "ftp://x"}\n }\n}', 3, "must be an http:// or https:// URL"),
    ('{\n "mcpServers": {\n  "a": {"command": "x", "url": "http://y"}\n }\n}', 3, "exactly one of"),
    ('{\n "mcpServers": {\n  "a": {"command": "x", "headers": {}}\n }\n}', 3, "unknown key(s) headers"),
    ('{\n "mcpServers": {\n  "a": {"type": "sse", "url": "http://y"}\n }\n}', 3, "deprecated SSE"),
    ('{\n "mcpServers": {\n  "a": {"command": "x", "protocol": "v1"}\n }\n}', 3, "protocol must be one of"),
    ('{\n "mcpServers": {\n  "a.b": {"command": "x"}\n }\n}', 3, "cannot contain '.'"),
    ('{\n "mcpServers": {\n  "my server": {"command": "x"}\n }\n}', 3, "1-64 characters of A-Z"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "policy": {\n  "allow_level": 9\n }\n}', 3, "allow_level"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "policy": {\n  "confirm": "maybe"\n }\n}', 3, "policy.confirm"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "policy": {\n  "trusted_servers": ["b"]\n }\n}', 3,
     "not in mcpServers"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "registries": ["missing.json"]\n}', 1, "no such file"),
    ('{\n "mcpservers": {}\n}', 1, "unknown key(s) mcpservers"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "runtime": {\n  "expose": "all"\n }\n}', 3, "runtime.expose"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "http": {\n  "address": "nonsense"\n }\n}', 3, "HOST:PORT"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "rank": {\n  "lam": 0.3\n }\n}', 3, "rank: unknown key(s) lam"),
    ('{\n "mcpServers": {"a": {"command": "x"}},\n "rank": {\n  "trust_annotations": 1\n }\n}', 3,
     "rank.trust_annotations must be true or false"),
    ('{\n "mcpServers": {}\n}', 1, "nothing to serve"),
    ('[1, 2]', 1, "JSON object"),
])
def test_bad_config_names_file_and_line(tmp_path, text, line, message):
    p = tmp_path / "servers.json"
    p.write_text(text)
    with pytest.raises((ConfigError, MalformedJSONError)) as e:  # both DataError: file:line: message
        read_config(p)
    assert str(e.value).startswith(f"{p}:{line}: "), str(e.value)
    assert message in str(e.value)


def test_cli_reports_bad_config_and_options_before_starting(tmp_path):
    from click.testing import CliRunner

    from riskrank_jax.cli.main import cli

    bad = tmp_path / "servers.json"
    bad.write_text('{\n "mcpServers": {\n  "a": {"command": "python", "args": "x"}\n }\n}')
    runner = CliRunner()
    r = runner.invoke(cli, ["serve", "--config", str(bad)])
    assert r.exit_code == 1 and f"error: {bad}:3: mcpServers.a.args must be a list of strings" in r.output
    good = tmp_path / "ok.json"
    good.write_text(json.dumps({"mcpServers": {"a": {"command": "python"}}}))
    r = runner.invoke(cli, ["serve", "--config", str(good), "--http", "0.0.0.0:8931"])
    assert r.exit_code == 2 and "--token-file" in r.output
    r = runner.invoke(cli, ["serve", "--config", str(good), "--http", "nonsense"])
    assert r.exit_code == 2 and "HOST:PORT" in r.output
    short = tmp_path / "token"
    short.write_text("abc")
    r = runner.invoke(cli, ["serve", "--config", str(good), "--http", "0.0.0.0:8931", "--token-file", str(short)])
    assert r.exit_code == 1 and "at least 16 characters" in r.output
    broken = tmp_path / "tools.json"
    broken.write_text('{"tools": [{"name": "a", "description": 3}]}')
    r = runner.invoke(cli, ["serve", str(broken)])
    assert r.exit_code == 1 and f"error: {broken}" in r.output and "description" in r.output
    r = runner.invoke(cli, ["serve"])
    assert r.exit_code == 2 and "--config" in r.output


def test_policy_order_deny_allow_level_confirm():
    p = Policy(allow_level=3, allow=("files.delete_*",), deny=("*.wipe*",))
    assert decide(p, ("wipe", "s.wipe", "wipe"), 1, "learned").action == "refuse"  # deny beats a low level
    assert decide(p, ("delete_file", "files.delete_file", "delete_file"), 5, "keywords:delete").action == "allow"
    assert decide(p, ("read", "s.read", "read"), 3, "learned").action == "allow"
    d = decide(p, ("pay", "s.pay", "pay"), 4, "keywords:money")
    assert d.action == "confirm" and "risk level 4 (keywords:money)" in d.reason
    assert decide(Policy(confirm="refuse"), ("pay",), 4, "k").action == "refuse"


# ---------------------------------------------------------------------------------------------- the gateways


class Session:
    """A connected SDK client on a blocking portal, so sync tests can call the gateway."""

    def __init__(self, portal, client, proc_dir: Path):
        self.portal, self.client, self.dir = portal, client, proc_dir
        self.calls = proc_dir / "calls.jsonl"
        self.audit = proc_dir / "audit.jsonl"
        self.answer = "decline"  # what the elicitation callback answers

    def call(self, tool: str, args: dict | None = None):
        return self.portal.call(self.client.call_tool, tool, args or {})

    def search(self, query: str, k: int = 5) -> dict:
        r = self.call("search_tools", {"query": query, "k": k})
        assert not r.is_error, r.content[0].text
        return r.structured_content

    def servers(self) -> dict:
        return {s["name"]: s for s in self.call("list_servers").structured_content["servers"]}


def _gateway_env(cache: Path) -> dict:
    env = dict(os.environ)
    env["RISKRANK_CACHE"] = str(cache)
    env["RISKRANK_STATE"] = str(cache / "state")  # this module's gateways share their pins, no other module's
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def gateway_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gateway-cache")


@pytest.fixture(scope="module")
def stdio_gateway(tmp_path_factory, gateway_cache):
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    d = tmp_path_factory.mktemp("stdio-gateway")
    cfg = d / "servers.json"
    doc = config_for(sys.executable, str(d / "calls.jsonl"))
    doc["mcpServers"]["broken"] = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no config')"]}
    cfg.write_text(json.dumps(doc))
    holder = {}

    async def elicit(ctx, params):
        holder["asked"] = params.message
        if holder["session"].answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "riskrank_jax", "serve", "--config", str(cfg), "--audit-log", str(d / "audit.jsonl")],
        env=_gateway_env(gateway_cache))
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(params, read_timeout_seconds=180,
                                                      elicitation_callback=elicit)) as client:
            s = Session(portal, client, d)
            s.holder = holder
            holder["session"] = s
            yield s


def test_transcript_matches_docs(stdio_gateway):
    lines = stdio_gateway.portal.call(transcript, stdio_gateway.client)
    docs = (ROOT / "docs" / "serve.md").read_text()
    block = docs.split("<!-- transcript -->")[1].split("```")[1].strip("\n").removeprefix("text\n")
    assert "\n".join(lines) == block.rstrip("\n")


def test_a_server_that_fails_to_start_is_reported_and_retried_while_others_serve(stdio_gateway):
    deadline = time.time() + 20
    while time.time() < deadline and stdio_gateway.servers()["broken"]["restarts"] < 1:
        time.sleep(0.2)
    s = stdio_gateway.servers()
    assert s["broken"]["state"] in ("down", "starting") and s["broken"]["tools"] == 0
    assert s["broken"]["restarts"] >= 1 and "Connection closed" in s["broken"]["error"]
    assert s["files"]["state"] == "up" and s["files"]["tools"] == 6


def test_read_request_returns_read_tools_and_holds_back_delete(stdio_gateway):
    res = stdio_gateway.search("show me what is in notes.txt", k=3)
    names = [t["name"] for t in res["tools"]]
    assert "files.read_file" in names
    assert not {"files.delete_file", "helpful.delete_everything"} & set(names)
    row = {t["name"]: t for t in res["tools"]}["files.read_file"]
    assert row["input_schema"]["properties"]["path"]["type"] == "string" and row["risk_level"] <= 2
    assert row["call"] == "allowed" and row["server"] == "files"
    res = stdio_gateway.search("delete the old report file", k=3)
    row = {t["name"]: t for t in res["tools"]}["files.delete_file"]
    assert row["risk_level"] >= 4 and row["call"] == "needs confirmation" and "destructive" in row["risk_source"]


def test_delete_is_refused_at_the_default_policy_and_never_reaches_the_server(stdio_gateway):
    stdio_gateway.answer = "decline"
    r = stdio_gateway.call("call_tool", {"name": "files.delete_file", "arguments": {"path": "report.md"}})
    assert r.is_error and "above allow_level 3" in r.content[0].text and "declined" in r.content[0].text
    assert "'files.delete_file' (server 'files')" in stdio_gateway.holder["asked"]
    assert "Arguments: 'path'." in stdio_gateway.holder["asked"]
    assert r.structured_content["refused"] is True and r.structured_content["risk_level"] >= 4
    assert all(c["tool"] != "delete_file" for c in _calls(stdio_gateway.calls))
    line = json.loads(stdio_gateway.audit.read_text().splitlines()[-1])
    assert line["tool"] == "files.delete_file" and line["decision"] == "refused" and line["rule"] == "level"
    assert "report.md" not in json.dumps(line) and len(line["arguments_hmac"]) == 64 and line["pin"] == "accepted"
    stdio_gateway.answer = "accept"  # the user confirms: now it goes through, once
    r = stdio_gateway.call("call_tool", {"name": "files.delete_file", "arguments": {"path": "report.md"}})
    assert not r.is_error and r.content[0].text == "deleted report.md"
    assert [c["arguments"] for c in _calls(stdio_gateway.calls) if c["tool"] == "delete_file"] == [
        {"path": "report.md"}]
    assert json.loads(stdio_gateway.audit.read_text().splitlines()[-1])["decision"] == "confirmed"
    stdio_gateway.answer = "decline"


def test_allowed_call_passes_the_downstream_result_unchanged(stdio_gateway):
    r = stdio_gateway.call("call_tool", {"name": "files.read_file", "arguments": {"path": "notes.txt"}})
    assert not r.is_error and r.content[0].text == "contents of notes.txt"
    assert r.structured_content == {"result": "contents of notes.txt"}
    r = stdio_gateway.call("call_tool", {"name": "no_such_tool", "arguments": {}})
    assert r.is_error and "unknown tool: the gateway did not list it" in r.content[0].text
    r = stdio_gateway.call("call_tool", {"name": "read_file", "arguments": {"path": "notes.txt"}})
    assert r.is_error and r.structured_content["rule"] == "unknown tool"  # the bare name is no identity


def test_lying_read_only_hint_does_not_lower_risk(stdio_gateway):
    res = stdio_gateway.search("delete everything in the workspace", k=5)
    rows = {t["name"]: t for t in res["tools"] + res["held_back"]}
    assert rows["helpful.delete_everything"]["risk_level"] >= 4, rows
    assert "mcp:readOnlyHint" not in rows["helpful.delete_everything"]["risk_source"]
    r = stdio_gateway.call("call_tool", {"name": "helpful.delete_everything", "arguments": {}})
    assert r.is_error and "deny pattern" in r.content[0].text
    assert all(c["tool"] != "delete_everything" for c in _calls(stdio_gateway.calls))


def test_money_and_credentials_need_confirmation(stdio_gateway):
    res = stdio_gateway.search("refund the customer's last payment", k=5)
    row = {t["name"]: t for t in res["tools"] + res["held_back"]}["payments.refund_payment"]
    assert row["risk_level"] >= 4
    r = stdio_gateway.call("call_tool", {"name": "payments.refund_payment",
                                         "arguments": {"payment_id": "p", "amount": 1}})
    assert r.is_error and all(c["tool"] != "refund_payment" for c in _calls(stdio_gateway.calls))


def test_list_changed_adds_a_new_tool_to_search(stdio_gateway):
    assert "files.get_forecast" not in [t["name"] for t in stdio_gateway.search("weather forecast for Paris")["tools"]]
    r = stdio_gateway.call("call_tool", {"name": "files.load_plugins", "arguments": {}})
    assert not r.is_error, r.content[0].text
    deadline = time.time() + 60
    while time.time() < deadline:
        if "files.get_forecast" in [t["name"] for t in stdio_gateway.search("weather forecast for Paris")["tools"]]:
            break
        time.sleep(0.5)
    else:
        pytest.fail("get_forecast never appeared in search results after list_changed")
    assert stdio_gateway.servers()["files"]["tools"] == 7


def test_fifty_concurrent_searches_are_all_answered(stdio_gateway):
    queries = [f"read file number {i}" if i % 2 else f"refund payment {i}" for i in range(50)]

    async def many():
        out = [None] * 50

        async def one(i):
            out[i] = await stdio_gateway.client.call_tool("search_tools", {"query": queries[i], "k": 3})

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
        return out

    results = stdio_gateway.portal.call(many)
    assert all(r is not None and not r.is_error and r.structured_content["query"] == q
               for r, q in zip(results, queries))
    assert len({r.structured_content["tools"][0]["name"] for r in results}) == 2


def _gateway_pid(marker: str) -> int:
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "riskrank_jax serve" in cmd and marker in cmd:
                return int(p.name)
    raise LookupError(marker)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the server's process in /proc (Linux)")
def test_killed_server_reports_error_search_goes_on_and_it_restarts(stdio_gateway):
    gw = _gateway_pid(str(stdio_gateway.dir))
    os.kill(child_pid(gw, "payments_server.py"), signal.SIGKILL)
    deadline = time.time() + 20
    r = None
    while time.time() < deadline:
        r = stdio_gateway.call("call_tool", {"name": "payments.get_balance", "arguments": {"account": "acme"}})
        if r.is_error:
            break
        time.sleep(0.05)
    assert r is not None and r.is_error and "server 'payments'" in r.content[0].text, r.content[0].text
    assert stdio_gateway.search("read the notes")["tools"]  # search keeps working
    deadline = time.time() + 30
    while time.time() < deadline:
        s = stdio_gateway.servers()["payments"]
        if s["state"] == "up" and s["restarts"] >= 1:
            break
        time.sleep(0.25)
    else:
        pytest.fail(f"payments was not restarted: {s}")
    r = stdio_gateway.call("call_tool", {"name": "payments.get_balance", "arguments": {"account": "acme"}})
    assert not r.is_error and "120.00" in r.content[0].text


# ---------------------------------------------------------------------------------------------- over HTTP


def test_http_gateway_token_policy_allow_http_downstream_and_sigkill_audit(tmp_path, gateway_cache):
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    calls = tmp_path / "calls.jsonl"
    tickets_port, gw_port = free_port(), free_port()
    tickets = subprocess.Popen([sys.executable, str(EXAMPLES / "tickets_http_server.py"), str(tickets_port)],
                               env={**os.environ, "CALLS_LOG": str(calls)}, stderr=subprocess.DEVNULL)
    cfg = config_for(sys.executable, str(calls), policy={"allow_level": 2, "allow": ["files.delete_file"],
                                                          "trusted_servers": ["files", "tickets"]})
    cfg["mcpServers"] = {"files": cfg["mcpServers"]["files"],
                         "tickets": {"url": f"http://127.0.0.1:{tickets_port}/mcp"}}
    (tmp_path / "servers.json").write_text(json.dumps(cfg))
    token = "s3cret-token-0123456789"
    (tmp_path / "token").write_text(token + "\n")
    os.chmod(tmp_path / "token", 0o600)  # a token file others can read is refused
    audit = tmp_path / "audit.jsonl"
    gw = subprocess.Popen([sys.executable, "-m", "riskrank_jax", "serve", "--config", str(tmp_path / "servers.json"),
                           "--http", f"127.0.0.1:{gw_port}", "--token-file", str(tmp_path / "token"),
                           "--audit-log", str(audit)], env=_gateway_env(gateway_cache), stderr=subprocess.PIPE)
    try:
        wait_port(tickets_port, tickets)
        wait_port(gw_port, gw)
        url = f"http://127.0.0.1:{gw_port}/mcp"
        r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401
        r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Authorization": "Bearer wrong-token-0123456789"})
        assert r.status_code == 401

        async def session():
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=180) as c:
                found = await c.call_tool("search_tools", {"query": "find the support ticket about the printer"})
                deleted = await c.call_tool("call_tool", {"name": "files.delete_file",
                                                          "arguments": {"path": "old.txt"}})
                refused = await c.call_tool("call_tool", {"name": "files.write_file",
                                                          "arguments": {"path": "a", "content": "b"}})
            async def accept(ctx, params):  # a 2025-era client: elicitation/create mid-call
                return types.ElicitResult(action="accept", content={"confirm": True})

            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=accept,
                              read_timeout_seconds=180) as c:
                assert c.protocol_version < "2026"
                confirmed = await c.call_tool("call_tool", {"name": "files.write_file",
                                                            "arguments": {"path": "b", "content": "c"}})
            return found, deleted, refused, confirmed

        found, deleted, refused, confirmed = anyio.run(session)
        assert not confirmed.is_error and confirmed.content[0].text == "wrote 1 characters to b"
        rows = {t["name"]: t for t in found.structured_content["tools"]}
        row = rows["tickets.search_tickets"]
        assert row["server"] == "tickets" and row["call"] == "allowed"
        assert not deleted.is_error and deleted.content[0].text == "deleted old.txt"  # the policy allows it
        assert {"server": "files", "tool": "delete_file", "arguments": {"path": "old.txt"}} in _calls(calls)
        assert refused.is_error and "cannot ask the user" in refused.content[0].text  # this client cannot elicit
        assert refused.structured_content["risk_level"] > 2
        assert [c["arguments"] for c in _calls(calls) if c["tool"] == "write_file"] == [{"path": "b"}]  # not "a"
        os.kill(gw.pid, signal.SIGKILL)  # right after the calls: their audit lines are complete on disk
        gw.wait(10)
        lines = audit.read_text().splitlines()
        assert audit.read_text().endswith("\n")
        records = [json.loads(x) for x in lines]
        assert [(x["tool"], x["decision"]) for x in records] == [
            ("files.delete_file", "allowed"), ("files.write_file", "refused"), ("files.write_file", "confirmed")]
        assert records[0]["decision"] == "allowed" and "allow pattern" in records[0]["reason"]
        assert len(records[0]["arguments_hmac"]) == 64 and "old.txt" not in lines[0]
    finally:
        for p in (gw, tickets):
            if p.poll() is None:
                p.kill()
            p.wait(10)


# ---------------------------------------------------------------------------------------------- in-process


@pytest.fixture(scope="module")
def encoder():
    from riskrank_jax.encode.encoder import load_encoder

    return load_encoder()


def _in_process(settings, leaves, encoder, body):
    """Run ``body(client)`` against a Gateway served in this process (the SDK's in-memory transport), on
    ``settings`` with ``leaves`` ({"section.key": value}) set."""
    from mcp import Client

    from riskrank_jax.serve.config import with_leaves
    from riskrank_jax.serve.gateway import Gateway

    async def run():
        gw = Gateway(with_leaves(settings, leaves), encoder=encoder)
        async with anyio.create_task_group() as tg:
            tg.start_soon(gw.start)
            async with Client(gw.mcp_server(), read_timeout_seconds=180) as client:
                out = await body(client)
            tg.cancel_scope.cancel()
        return out, gw

    return anyio.run(run)


def test_registry_files_only_serve_search_with_tool_references(tmp_path, encoder):
    from riskrank_jax.serve.config import GatewaySettings

    config = GatewaySettings(registries=(str(ROOT / "examples" / "mcp_tools.json"),))
    options = {"runtime.tool_references": True, "runtime.cache_dir": str(tmp_path),
               "runtime.state_dir": str(tmp_path / "state")}

    async def body(client):
        found = await client.call_tool("search_tools", {"query": "read a file from the workspace", "k": 3})
        call = await client.call_tool("call_tool", {"name": "mcp_tools.read_file", "arguments": {"path": "a"}})
        bad_k = await client.call_tool("search_tools", {"query": "x", "k": 500})
        blank = await client.call_tool("search_tools", {"query": "  "})
        return found, call, bad_k, blank

    (found, call, bad_k, blank), _ = _in_process(config, options, encoder, body)
    res = found.structured_content
    assert res["tools"][0]["name"] == "mcp_tools.read_file" and res["tools"][0]["server"] is None
    assert res["tools"][0]["call"].startswith("not callable")
    assert res["tool_references"] == [{"type": "tool_reference", "tool_name": t["name"]} for t in res["tools"]]
    assert call.is_error and "registry file" in call.content[0].text
    assert bad_k.is_error and "k must be in 1..50" in bad_k.content[0].text
    assert blank.is_error and "query 1 is empty" in blank.content[0].text


def test_search_says_what_the_request_asks_and_why_a_tool_is_held_back(tmp_path, encoder):
    """rank.intent and rank.intent_hold_back reach the served ranker; search_tools says what the request was read
    as asking and, in the gateway's words, which effects of each held-back tool it did not ask for; with
    rank.intent false there is no reading and nothing is held back by intent."""
    from riskrank_jax.serve.config import GatewaySettings

    config = GatewaySettings(registries=(str(ROOT / "examples" / "mcp_tools.json"),))
    options = {"runtime.cache_dir": str(tmp_path), "runtime.state_dir": str(tmp_path / "state"),
               "rank.intent_hold_back": 0.75}

    async def body(client):
        return await client.call_tool("search_tools", {"query": "show me the recent commits", "k": 5})

    found, gw = _in_process(config, options, encoder, body)
    assert gw.catalog.ranker.config.intent and gw.catalog.ranker.config.intent_hold_back == 0.75
    res = found.structured_content
    assert res["request"]["asks"] == "the request only reads"
    assert all(set(v) == {"need", "source"} for v in res["request"]["effects"].values())
    push = {h["name"]: h for h in res["held_back"]}["mcp_tools.git_push"]
    assert push["held_by"] == "intent hold-back" and push["risk_level"] >= 4 and push["server"] is None
    assert push["reason"].startswith("held back: ")
    assert "sends to others; the request only reads; risk level" in push["reason"]
    text = found.content[0].text.splitlines()
    assert text[1] == "read as: the request only reads"
    assert any(x.startswith("held back: mcp_tools.git_push — ") and x.count("held back") == 1 for x in text)
    off, gw = _in_process(config, {**options, "rank.intent": False}, encoder, body)
    assert not gw.catalog.ranker.config.intent and off.structured_content["request"] is None
    assert all(h["held_by"] == "risk penalty" for h in off.structured_content["held_back"])


def test_expose_filtered_lists_downstream_tools_minus_risky_ones(tmp_path, encoder):
    from riskrank_jax.serve.config import read_config

    calls = tmp_path / "calls.jsonl"
    doc = config_for(sys.executable, str(calls))
    doc["mcpServers"] = {"files": doc["mcpServers"]["files"]}
    doc["policy"]["trusted_servers"] = ["files"]
    doc["runtime"] = {"expose": "filtered", "audit_log": "audit.jsonl"}  # relative to the config file
    (tmp_path / "servers.json").write_text(json.dumps(doc))
    config = read_config(tmp_path / "servers.json")
    assert config.runtime.audit_log == str(tmp_path / "audit.jsonl")
    options = {"runtime.cache_dir": str(tmp_path), "runtime.state_dir": str(tmp_path / "state")}

    async def body(client):
        listed = [t.name for t in (await client.list_tools()).tools]
        read = await client.call_tool("files.read_file", {"path": "notes.txt"})
        delete = await client.call_tool("files.delete_file", {"path": "notes.txt"})
        return listed, read, delete

    (listed, read, delete), _ = _in_process(config, options, encoder, body)
    assert {"files.read_file", "files.list_directory", "files.search_files"} <= set(listed)
    assert "files.delete_file" not in listed and "search_tools" not in listed
    assert not read.is_error and read.content[0].text == "contents of notes.txt"
    assert delete.is_error and "above allow_level 3" in delete.content[0].text
    assert [c["tool"] for c in _calls(calls)] == ["read_file"]


def test_model_dir_is_served_while_its_tools_match(tmp_path, encoder, capfd):
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.rank.ranker import RankConfig, Ranker
    from riskrank_jax.serve.config import GatewaySettings

    mcp = str(ROOT / "examples" / "mcp_tools.json")
    saved = Ranker.from_registry([mcp], encoder=encoder, cache=EmbeddingCache(tmp_path))
    saved.with_config(RankConfig(lam=0.25, alpha=0.0, first_stage="hybrid")).save(tmp_path / "model")

    async def body(client):
        return await client.call_tool("search_tools", {"query": "read a file", "k": 3})

    options = {"runtime.cache_dir": str(tmp_path), "rank.model": str(tmp_path / "model"),
               "runtime.state_dir": str(tmp_path / "st")}
    found, gw = _in_process(GatewaySettings(registries=(mcp,)), options, encoder, body)
    assert not found.is_error and gw.catalog.ranker.config.lam == 0.25  # the saved ranker's own config
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"tools": [{"name": "read_file", "description": "Read a file."},
                                           {"name": "drop_db", "description": "Drop the production database."}]}))
    found, gw = _in_process(GatewaySettings(registries=(str(other),)), options, encoder, body)
    assert not found.is_error and gw.catalog.ranker.config.lam != 0.25  # zero-shot: the tools differ
    assert "fitted to other tools" in capfd.readouterr().err


def test_older_protocol_downstream_lists_changes_and_serves(tmp_path, encoder):
    """A server reached with the initialize handshake ("protocol": "legacy"): list_changed arrives as a
    notification through the message handler, liveness by ping."""
    from riskrank_jax.serve.config import read_config

    calls = tmp_path / "calls.jsonl"
    doc = config_for(sys.executable, str(calls))
    doc["mcpServers"] = {"files": dict(doc["mcpServers"]["files"], protocol="legacy")}
    doc["policy"]["trusted_servers"] = ["files"]
    (tmp_path / "servers.json").write_text(json.dumps(doc))
    config = read_config(tmp_path / "servers.json")

    async def body(client):
        await client.call_tool("search_tools", {"query": "read a file"})  # waits for the first catalog
        status = (await client.call_tool("list_servers", {})).structured_content["servers"][0]
        await client.call_tool("call_tool", {"name": "files.load_plugins", "arguments": {}})
        names = []
        with anyio.move_on_after(60):
            while "files.get_forecast" not in names:
                await anyio.sleep(0.3)
                found = await client.call_tool("search_tools", {"query": "weather forecast for Paris"})
                names = [t["name"] for t in found.structured_content["tools"]]
        return status, names

    (status, names), _ = _in_process(config, {"runtime.cache_dir": str(tmp_path),
                                               "runtime.state_dir": str(tmp_path / "state")}, encoder, body)
    assert status["state"] == "up" and status["protocol"] < "2026"
    assert "files.get_forecast" in names


def test_quarantine_holds_a_new_servers_tools_until_a_person_accepts_them(tmp_path, encoder):
    """policy.quarantine_new_servers: every tool seen for the first time asks (here: refused, the in-memory
    client cannot be asked) until `riskrank-jax pins accept` — run as a person would, beside the gateway."""
    from riskrank_jax.serve.config import read_config

    calls = tmp_path / "calls.jsonl"
    doc = config_for(sys.executable, str(calls))
    doc["mcpServers"] = {"files": doc["mcpServers"]["files"]}
    doc["policy"] = {"trusted_servers": ["files"], "quarantine_new_servers": True}
    (tmp_path / "servers.json").write_text(json.dumps(doc))
    state = tmp_path / "state"
    options = {"runtime.cache_dir": str(tmp_path), "runtime.state_dir": str(state)}

    async def body(client):
        found = await client.call_tool("search_tools", {"query": "read the file notes.txt", "k": 2})
        held = await client.call_tool("call_tool", {"name": "files.read_file", "arguments": {"path": "notes.txt"}})
        p = await anyio.run_process([sys.executable, "-m", "riskrank_jax", "pins", "accept", "--server", "files",
                                     "--state-dir", str(state)], env=_gateway_env(tmp_path), check=False)
        read = await client.call_tool("call_tool", {"name": "files.read_file", "arguments": {"path": "notes.txt"}})
        return found, held, p, read

    (found, held, p, read), _ = _in_process(read_config(tmp_path / "servers.json"), options, encoder, body)
    row = {t["name"]: t for t in found.structured_content["tools"]}["files.read_file"]
    assert row["pin"] == "quarantined" and "quarantined until accepted" in row["flags"]
    assert row["call"] == "needs confirmation"
    assert held.is_error and held.structured_content["rule"] == "quarantine"
    assert p.returncode == 0 and b"accepted files.read_file" in p.stdout, p.stderr
    assert not read.is_error and read.content[0].text == "contents of notes.txt"
    assert [c["tool"] for c in _calls(calls)] == ["read_file"]  # only the call after the acceptance
