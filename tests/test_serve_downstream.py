"""The gateway's downstream client (`serve.downstream.Downstream`) against servers that misbehave on purpose
(tests/gateway_servers/, started over stdio), without a gateway or an encoder: each failure is named, the
restart backoff grows and settles, a server without ``subscriptions/listen`` stays up, a call that gets no
answer times out and its cancellation reaches the server, and lenient listing keeps the valid tools.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from riskrank_jax.serve.config import Limits, ServerSpec
from riskrank_jax.serve.downstream import Downstream, DownstreamError, vet_tools

SERVERS = Path(__file__).resolve().parent / "gateway_servers"
FAST = Limits(connect_timeout_s=5, call_timeout_s=1, backoff_first_s=0.05, backoff_max_s=0.4,
              stable_after_s=30, ping_every_s=0.1, relist_min_interval_s=0.5, max_tools_per_server=300)


def raw(behaviour: str, log: Path, **env) -> ServerSpec:
    return ServerSpec(behaviour, command=sys.executable,
                      args=(str(SERVERS / "raw_server.py"), behaviour, str(log)), env=tuple(env.items()))


def records(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def drive(spec: ServerSpec, limits: Limits, body, seconds: float = 60):
    """Run a Downstream for ``spec`` and ``await body(ds)`` beside it; returns what body returns."""

    async def main():
        ds = Downstream(spec, limits)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ds.run)
            with anyio.fail_after(seconds):
                await ds.ready.wait()
                out = await body(ds)
            tg.cancel_scope.cancel()
        return out

    return anyio.run(main)


async def until(cond, what: str, seconds: float = 30):
    with anyio.move_on_after(seconds):
        while not cond():
            await anyio.sleep(0.02)
        return
    pytest.fail(f"never happened: {what}")


# ---------------------------------------------------------------------------------------------- listing


def test_vet_tools_keeps_valid_repairs_missing_type_and_names_the_rest():
    tools, problems, not_callable = vet_tools([
        {"name": "ok", "inputSchema": {"type": "object"}},
        {"name": "bare"},
        {"name": "typeless", "inputSchema": {"$schema": "x", "properties": {"a": {"type": "string"}}}},
        {"name": "stringly", "inputSchema": "see docs"},
        {"name": "arrayish", "inputSchema": {"type": "array"}},
        {"name": "ok", "description": "again", "inputSchema": {"type": "object"}},
        {"description": "nameless"},
        "not an object",
        {"name": "long", "description": "d" * 50, "inputSchema": {"type": "object"}},
        {"name": "listprops", "inputSchema": {"type": "object", "properties": ["a"]}},
        {"name": "send mail\u202e", "inputSchema": {"type": "object"}},  # breaks MCP's tool-name rules
    ], Limits(max_description_chars=10))
    assert [t["name"] for t in tools] == ["ok", "bare", "typeless", "stringly", "arrayish", "long", "listprops"]
    assert tools[1]["inputSchema"] == {"type": "object"}
    assert tools[2]["inputSchema"] == {"type": "object", "$schema": "x", "properties": {"a": {"type": "string"}}}
    assert tools[5]["description"] == "d" * 10
    assert set(not_callable) == {"stringly", "arrayish", "listprops"} and '"type": "array"' in not_callable["arrayish"]
    assert "inputSchema.properties is a JSON list" in not_callable["listprops"]
    by = {(p["tool"], p["action"].split(":")[0].split(";")[0]) for p in problems}
    assert by == {("bare", "repaired"), ("typeless", "repaired"), ("stringly", "listed, not callable"),
                  ("arrayish", "listed, not callable"), ("ok", "skipped"), ("#7", "skipped"), ("#8", "skipped"),
                  ("long", "cut to the first 10 (limits.max_description_chars)"), ("listprops", "listed, not callable"),
                  ('"send mail\\u202e"', "left out, never callable")}  # the name escaped and quoted, never raw
    bad = next(p for p in problems if p["action"] == "left out, never callable")
    assert "outside A-Z, a-z, 0-9" in bad["problem"] and "send mail" not in json.dumps(not_callable)


def test_lenient_listing_keeps_valid_tools_of_a_server_the_sdk_would_reject(tmp_path):
    log = tmp_path / "calls.jsonl"

    async def body(ds):
        ok = await ds.call("list_labels", {"project": "x"})
        with pytest.raises(DownstreamError, match="'format_disk' of server 'lenient' is not callable"):
            await ds.call("format_disk", {})
        return ds.status(), ok

    s, ok = drive(raw("lenient", log), FAST, body)
    assert s["state"] == "up" and s["tools"] == 4 and s["restarts"] == 0
    assert ok.content[0].text == "list_labels ok"
    problems = {p["tool"]: p for p in s["tool_problems"]}
    assert set(problems) == {"ping_host", "list_labels", "format_disk", "#5", "rename_label"}
    assert problems["rename_label"]["problem"].startswith("annotations.readOnlyHint")
    assert problems["format_disk"]["action"] == "listed, not callable"
    assert [r["tool"] for r in records(log)] == ["list_labels"]  # format_disk never reached the server


def test_ten_thousand_tools_are_listed_in_pages_and_capped_by_name(tmp_path):
    async def body(ds):
        return ds.status(), [t["name"] for t in ds.tools]

    s, names = drive(raw("many", tmp_path / "c"), Limits(connect_timeout_s=60, max_tools_per_server=300), body)
    assert s["state"] == "up" and len(names) == 300 and names[0] == "metric_00000" and names[-1] == "metric_00299"
    assert s["tool_problems"] == [{"tool": "9700 tools", "problem": "the server lists 10,000 tools",
                                   "action": "the first 300 are kept (limits.max_tools_per_server)"}]


# ---------------------------------------------------------------------------------------------- failures


def test_a_server_that_hangs_on_initialise_is_named_and_retried(tmp_path):
    async def body(ds):
        await until(lambda: ds.restarts >= 2, "two restarts")
        return ds.status()

    s = drive(raw("hang", tmp_path / "c"), Limits(connect_timeout_s=0.5, backoff_first_s=0.05), body)
    assert s["state"] != "up" and s["tools"] == 0
    assert "no answer to the handshake and tools/list within 0.5 s" in s["last_error"]


def test_a_call_that_gets_no_answer_times_out_by_name_and_the_server_sees_the_cancel(tmp_path):
    log = tmp_path / "calls.jsonl"

    async def body(ds):
        with pytest.raises(DownstreamError) as e:
            await ds.call("wait_forever", {})
        await until(lambda: any("cancelled" in r for r in records(log)), "the cancellation reaching the server")
        return str(e.value), ds.status()

    err, s = drive(raw("stall", log), FAST, body)
    assert err == ("server 'stall' did not answer the call to 'wait_forever' within 1 s (limits.call_timeout_s); "
                   "the gateway cancelled it")
    call, cancel = records(log)
    assert call["tool"] == "wait_forever" and cancel["cancelled"] == call["id"]
    assert s["state"] == "up" and s["restarts"] == 0


def test_a_server_that_exits_mid_call_is_named_and_restarted(tmp_path):
    log = tmp_path / "calls.jsonl"

    async def body(ds):
        with pytest.raises(DownstreamError) as e:
            await ds.call("crash_now", {"path": "a"})
        await until(lambda: ds.restarts >= 1 and ds.state == "up", "the restart")
        return str(e.value), ds.status()

    err, s = drive(raw("crash", log), FAST, body)
    assert err.startswith("server 'crash' closed the connection (exited?) in the middle of the call to 'crash_now'")
    assert s["last_error"] == "DownstreamError: closed the connection in the middle of a call"
    assert s["state"] == "up" and s["restarts"] == 1 and s["tools"] == 1


def test_garbage_on_stdout_is_counted_and_named_and_the_server_keeps_serving(tmp_path):
    async def body(ds):
        r = await ds.call("moon_phase", {"date": "2026-01-01"})
        return r, ds.status()

    r, s = drive(raw("garbage", tmp_path / "c"), FAST, body)
    assert r.content[0].text == "moon_phase ok"
    assert s["state"] == "up" and s["restarts"] == 0 and s["non_jsonrpc_messages"] >= 3
    assert s["warnings"][0].startswith("wrote something that is not JSON-RPC")


def test_list_changed_in_a_loop_is_reported_and_does_not_relist_each_time(tmp_path):
    changes = []

    async def body(ds):
        await until(lambda: ds.list_changed >= 200, "200 list_changed notices")
        return ds.status()

    spec = raw("loop", tmp_path / "c")

    async def main():
        async def on_tools(ds):
            changes.append(len(ds.tools))

        ds = Downstream(spec, FAST, on_tools=on_tools)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ds.run)
            await ds.ready.wait()
            out = await body(ds)
            tg.cancel_scope.cancel()
        return out

    s = anyio.run(main)
    assert s["state"] == "up" and s["restarts"] == 0 and s["list_changed"] >= 200
    assert changes == [1]  # the first listing only: re-listings that found the same tools rebuild nothing
    assert len(s["warnings"]) == 1 and "sends notifications/tools/list_changed in a loop" in s["warnings"][0]


# ---------------------------------------------------------------------------------------------- settling


def test_backoff_grows_for_a_server_that_keeps_dropping(tmp_path):
    async def body(ds):
        await until(lambda: len(ds.delays) >= 5, "five restarts")
        return list(ds.delays)[:5]

    delays = drive(raw("flap", tmp_path / "c", FLAP_AFTER_S="0.05"), FAST, body)
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.4]  # doubling up to backoff_max_s; never reset by a short uptime


def test_backoff_resets_only_after_the_server_stayed_up_for_stable_after_s(tmp_path):
    async def body(ds):
        await until(lambda: len(ds.delays) >= 3, "three restarts")
        return list(ds.delays)[:3]

    limits = Limits(backoff_first_s=0.05, backoff_max_s=5, stable_after_s=0.3, ping_every_s=0.1)
    delays = drive(raw("flap", tmp_path / "c", FLAP_AFTER_S="1.0"), limits, body)
    assert delays == [0.05, 0.05, 0.05]  # up 1 s each time, longer than stable_after_s: a fresh start each time


def test_method_not_found_to_listen_means_notifications_and_ping_not_death(tmp_path):
    log = tmp_path / "calls.jsonl"
    spec = ServerSpec("nolisten", command=sys.executable, args=(str(SERVERS / "sdk_server.py"), str(log)))

    async def body(ds):
        await until(lambda: ds.pings >= 10, "ten answered liveness checks")
        r = await ds.call("world_clock", {"city": "Tokyo"})
        return r, ds.status()

    r, s = drive(spec, FAST, body)
    assert s["protocol"] >= "2026" and s["watch"] == "notifications + ping"
    assert s["state"] == "up" and s["restarts"] == 0 and "last_error" not in s
    assert r.content[0].text == "it is noon in Tokyo"


def test_progress_reaches_the_caller(tmp_path):
    spec = ServerSpec("nolisten", command=sys.executable,
                      args=(str(SERVERS / "sdk_server.py"), str(tmp_path / "c")))
    seen = []

    async def body(ds):
        async def progress(p, total=None, message=None):
            seen.append((p, total, message))

        return await ds.call("count_slowly", {"n": 4}, progress=progress)

    r = drive(spec, FAST, body)
    assert r.content[0].text == "counted to 4"
    assert seen == [(i, 4.0, f"step {i} of 4") for i in range(1, 5)]


def test_config_limits_block_and_per_server_overrides(tmp_path):
    from riskrank_jax.errors import ConfigError
    from riskrank_jax.serve.config import read_config

    p = tmp_path / "servers.json"
    p.write_text(json.dumps({"mcpServers": {"a": {"command": "x", "limits": {"connect_timeout_s": 90}}},
                             "limits": {"call_timeout_s": 5, "max_tools_per_server": 50}}))
    c = read_config(p)
    ds = Downstream(c.servers[0], c.limits)
    assert (ds.limits.connect_timeout_s, ds.limits.call_timeout_s, ds.limits.max_tools_per_server) == (90, 5, 50)
    p.write_text('{\n "mcpServers": {"a": {"command": "x"}},\n "limits": {\n  "call_timeout_s": -1\n }\n}')
    with pytest.raises(ConfigError, match=r":3: limits.call_timeout_s must be a positive number"):
        read_config(p)
    p.write_text('{\n "mcpServers": {"a": {"command": "x", "limits": {"retries": 3}}}\n}')
    with pytest.raises(ConfigError, match=r"mcpServers.a.limits: unknown key\(s\) retries"):
        read_config(p)


def test_the_protocol_probe_falls_back_to_the_handshake_by_itself(tmp_path):
    async def body(ds):
        await until(lambda: ds.state == "up", "up on the handshake")
        return ds.status(), await ds.call("roll_dice", {})

    s, r = drive(raw("halfmodern", tmp_path / "c"), FAST, body)
    assert s["protocol"] == "2024-11-05" and s["protocol_fallback"] == "auto -> legacy" and s["restarts"] == 1
    assert "failed on the newest protocol revision (MCPError: Internal error)" in s["warnings"][0]
    assert r.content[0].text == "roll_dice ok"
