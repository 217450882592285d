"""`riskrank-jax serve` in front of servers that misbehave on purpose (tests/gateway_servers/, over stdio),
driven by the SDK's client: each bad behaviour is reported by name in list_servers and on stderr, the good
server keeps serving, a restarting server's tools stay in search marked unavailable, progress and
cancellation pass through, and every call leaves its audit line. Every tool is called by its gateway identity
``server.tool``; the servers' own calls logs see the bare name the gateway forwards.

One gateway runs for the whole module (a start costs an encoder load).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attack_harness import Gate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "gateway_servers"


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


class Bad(Gate):
    """The connected client (on a blocking portal) with the attack tests' calls (``call``, ``search``), the gateway's
    stderr file, audit log and calls log, and the server list."""

    def __init__(self, portal, client, d: Path):
        super().__init__(portal, client, d)
        self.audit, self.calls = self.audit_log, self.calls_log

    def servers(self) -> dict:
        r = self.portal.call(self.client.call_tool, "list_servers", {})
        return {s["name"]: s for s in r.structured_content["servers"]}, r

    def wait(self, cond, what: str, seconds: float = 60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            s, _ = self.servers()
            if cond(s):
                return s
            time.sleep(0.2)
        pytest.fail(f"never happened: {what}: {self.servers()[0]}")


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    d = tmp_path_factory.mktemp("bad-gateway")
    calls = str(d / "calls.jsonl")

    def raw(behaviour, **limits):
        entry = {"command": sys.executable, "args": [str(SERVERS / "raw_server.py"), behaviour, calls]}
        return dict(entry, limits=limits) if limits else entry

    cfg = {"mcpServers": {
        "nolisten": {"command": sys.executable, "args": [str(SERVERS / "sdk_server.py"), calls]},
        "lenient": raw("lenient"), "duplicates": raw("duplicates"), "huge": raw("huge"),
        "many": raw("many", connect_timeout_s=120, max_tools_per_server=200),
        "hang": raw("hang", connect_timeout_s=1),
        "crash": raw("crash", backoff_first_s=600),  # stays down after the crash: its tools must stay listed
        "stall": raw("stall", call_timeout_s=1), "loop": raw("loop"), "garbage": raw("garbage")},
        "limits": {"ping_every_s": 0.5, "relist_min_interval_s": 0.5},
        "policy": {"deny": ["*format_disk*"], "trusted_servers": ["nolisten", "lenient", "duplicates", "huge", "many",
                                                                 "hang", "crash", "stall", "loop", "garbage"]}}
    (d / "servers.json").write_text(json.dumps(cfg))
    env = dict(os.environ, RISKRANK_CACHE=str(d / "cache"), RISKRANK_STATE=str(d / "state"),  # pins of its own
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "riskrank_jax", "serve", "--config", str(d / "servers.json"), "--audit-log", str(d / "audit.jsonl")],
        env=env)
    with open(d / "stderr.txt", "w") as errlog, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(stdio_client(params, errlog=errlog),
                                                      read_timeout_seconds=300)) as client:
            b = Bad(portal, client, d)
            b.search("warm up")  # waits for the first catalog
            b.wait(lambda s: all(x["state"] == "up" and sum(x.get("risk_histogram", {}).values()) == x["tools"]
                                 for n, x in s.items() if n != "hang"), "every server up and in the catalog")
            yield b


def test_the_good_server_serves_while_the_others_misbehave(bad):
    s = bad.wait(lambda s: s["nolisten"]["state"] == "up" and s["loop"].get("warnings"), "the loop reported")
    assert s["nolisten"]["restarts"] == 0 and s["nolisten"]["watch"] == "notifications + ping"
    r = bad.call("nolisten.world_clock", {"city": "Tokyo"})
    assert not r.is_error and r.content[0].text == "it is noon in Tokyo"
    assert {"server": "nolisten", "tool": "world_clock", "arguments": {"city": "Tokyo"}} in _records(bad.calls)
    top = bad.search("what time is it in Tokyo", k=3)["tools"][0]
    assert top["name"] == "nolisten.world_clock" and top["call"] == "allowed" and top["server"] == "nolisten"
    assert top["flags"] == [] and top["pin"] == "accepted"
    r = bad.call("world_clock", {"city": "Lima"})  # the bare name is no identity, even of a tool no other has
    assert r.is_error and r.structured_content["rule"] == "unknown tool"
    assert "unknown tool: the gateway did not list it" in r.content[0].text
    assert {"server": "nolisten", "tool": "world_clock", "arguments": {"city": "Lima"}} not in _records(bad.calls)


def test_concurrent_searches_are_all_answered_while_servers_misbehave(bad):
    queries = [f"tide times for harbour {i}" if i % 2 else f"phase of the moon on day {i}" for i in range(30)]

    async def many():
        out = [None] * len(queries)

        async def one(i):
            out[i] = await bad.client.call_tool("search_tools", {"query": queries[i], "k": 3})

        async with anyio.create_task_group() as tg:
            for i in range(len(queries)):
                tg.start_soon(one, i)
        return out

    results = bad.portal.call(many)
    assert [r.structured_content["query"] for r in results] == queries
    assert {r.structured_content["tools"][0]["name"] for r in results} == {"loop.tide_times", "garbage.moon_phase"}
    s, _ = bad.servers()
    assert s["loop"]["list_changed"] > 100 and s["loop"]["state"] == "up"


def test_invalid_tools_are_named_valid_ones_kept_and_repaired_ones_callable(bad):
    s, text = bad.servers()
    problems = {p["tool"]: p for p in s["lenient"]["tool_problems"]}
    assert set(problems) == {"ping_host", "list_labels", "format_disk", "#5", "rename_label"}
    assert s["lenient"]["state"] == "up" and s["lenient"]["tools"] == 4 and s["lenient"]["restarts"] == 0
    assert "lenient: up, 4 tools, 0 restarts; 5 tool problems: ping_host: no inputSchema" in text.content[0].text
    err = bad.stderr.read_text()
    assert "server 'lenient', tool 'list_labels': inputSchema has no \"type\": \"object\"; repaired" in err
    assert "server 'lenient', tool 'format_disk': inputSchema is a JSON str; listed, not callable" in err
    r = bad.call("lenient.list_labels", {"project": "gateway"})
    assert not r.is_error and r.content[0].text == "list_labels ok"
    assert {"server": "lenient", "tool": "list_labels", "arguments": {"project": "gateway"}} in [
        {k: c[k] for k in ("server", "tool", "arguments")} for c in _records(bad.calls) if "tool" in c]
    dup = {p["tool"]: p for p in s["duplicates"]["tool_problems"]}
    assert dup["lookup_word"]["problem"].startswith("duplicate name") and s["duplicates"]["tools"] == 2
    rows = {t["name"]: t for t in bad.search("look up a word in the dictionary", k=3)["tools"]}
    assert rows["duplicates.lookup_word"]["description"] == "Look up a word in the dictionary."  # the first one


def test_a_tool_whose_schema_cannot_be_read_is_listed_but_never_callable(bad):
    rows = {t["name"]: t for t in bad.search("format a disk partition", k=3)["tools"]}
    row = rows["lenient.format_disk"]
    assert row["available"] is False and "input schema cannot be read" in row["call"]
    r = bad.call("lenient.format_disk", {})  # denied by the policy: the deny reason wins
    assert r.is_error and r.structured_content["rule"] == "deny" and "'*format_disk*'" in r.content[0].text
    r = bad.portal.call(bad.client.call_tool, "call_tool", {"name": "lenient.ping_host", "arguments": {}})
    bad.made += 1
    assert not r.is_error  # repaired (no inputSchema): callable
    assert "format_disk" not in [c.get("tool") for c in _records(bad.calls)]


def test_ten_thousand_tools_and_a_megabyte_description_are_cut_and_named(bad):
    s, _ = bad.servers()
    assert s["many"]["state"] == "up" and s["many"]["tools"] == 200
    assert s["many"]["tool_problems"][0]["problem"] == "the server lists 10,000 tools"
    assert s["huge"]["tool_problems"][0]["problem"] == "description of 1,048,591 characters"
    row = {t["name"]: t for t in bad.search("render a poem", k=3)["tools"]}["huge.render_poem"]
    assert len(row["description"]) == 8192


def test_a_server_that_hangs_on_initialise_is_named(bad):
    s = bad.wait(lambda s: s["hang"]["restarts"] >= 1, "hang restarted")
    assert s["hang"]["state"] != "up" and s["hang"]["tools"] == 0
    assert "no answer to the handshake and tools/list within 1 s" in s["hang"]["last_error"]
    assert "server 'hang'" in bad.stderr.read_text()


def test_a_call_with_no_answer_times_out_by_name_and_garbage_is_counted(bad):
    r = bad.call("stall.wait_forever")
    assert r.is_error and r.content[0].text == (
        "error: server 'stall' did not answer the call to 'wait_forever' within 1 s (limits.call_timeout_s); "
        "the gateway cancelled it")
    r = bad.call("garbage.moon_phase", {"date": "2026-01-01"})
    assert not r.is_error and r.content[0].text == "moon_phase ok"
    s, _ = bad.servers()
    assert s["garbage"]["non_jsonrpc_messages"] >= 1 and s["garbage"]["restarts"] == 0
    assert s["stall"]["state"] == "up" and s["stall"]["restarts"] == 0


def test_progress_reaches_the_client_and_cancellation_reaches_the_server(bad):
    seen = []

    async def progress(p, total=None, message=None):
        seen.append((p, total, message))

    async def both():
        r = await bad.client.call_tool("call_tool", {"name": "nolisten.count_slowly", "arguments": {"n": 3}},
                                       progress_callback=progress)
        with anyio.move_on_after(2):
            await bad.client.call_tool("call_tool", {"name": "nolisten.wait_for_approval",
                                                     "arguments": {"ticket": "T-1"}})
        return r

    bad.made += 2
    r = bad.portal.call(both)
    assert not r.is_error and r.content[0].text == "counted to 3"
    assert seen == [(i, 3.0, f"step {i} of 3") for i in (1, 2, 3)]
    deadline = time.time() + 30
    while time.time() < deadline and {"server": "nolisten", "cancelled": "wait_for_approval"} not in _records(bad.calls):
        time.sleep(0.1)
    assert {"server": "nolisten", "cancelled": "wait_for_approval"} in _records(bad.calls)


def test_a_server_that_exits_mid_call_is_named_and_its_tools_stay_in_search_unavailable(bad):
    r = bad.call("crash.crash_now", {"path": "build.tar"})
    assert r.is_error and "server 'crash' closed the connection (exited?) in the middle of the call" in r.content[0].text
    s = bad.wait(lambda s: s["crash"]["state"] != "up", "crash down")
    assert s["crash"]["restarts"] == 1 and "in the middle of a call" in s["crash"]["last_error"]
    rows = {t["name"]: t for t in bad.search("compute the checksum of a build artefact", k=3)["tools"]}
    row = rows["crash.crash_now"]
    assert row["available"] is False and row["call"].startswith("unavailable: server 'crash' is not running")
    r = bad.call("crash.crash_now", {"path": "build.tar"})
    assert r.is_error and "server 'crash' is not running" in r.content[0].text
    assert r.structured_content["rule"] == "unavailable"
    assert [c["tool"] for c in _records(bad.calls) if c.get("server") == "crash"] == ["crash_now"]  # once
    assert not bad.call("nolisten.world_clock", {"city": "Oslo"}).is_error  # the others keep serving


def test_no_audit_line_is_lost(bad):
    bad.call("no_such_tool")
    lines = _records(bad.audit)
    assert len(lines) == bad.made
    refused = [x for x in lines if x["decision"] == "refused"]
    unknown = json.dumps("no_such_tool")  # a name the gateway did not list is written escaped and quoted
    assert {x["tool"] for x in refused} >= {"lenient.format_disk", "crash.crash_now", unknown}
    unavailable = [x for x in refused if x["tool"] == "crash.crash_now"]
    assert len(unavailable) == 1 and "is not running" in unavailable[0]["reason"]
    assert unavailable[0]["rule"] == "unavailable" and unavailable[0]["server"] == "crash"
    assert {(x["tool"], x["rule"]) for x in refused} >= {("lenient.format_disk", "deny"), (unknown, "unknown tool"),
                                                       (json.dumps("world_clock"), "unknown tool")}
    assert all(len(x["arguments_hmac"]) == 64 and "arguments_sha256" not in x for x in lines)
    assert all(x["pin"] == "accepted" for x in lines if x["server"] is not None)
    assert all(x["pin"] is None and x["server"] is None for x in lines if x["rule"] == "unknown tool")
    assert "Tokyo" not in bad.audit.read_text()  # never an argument value
