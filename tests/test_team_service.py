"""The gateway as a team's service, with the real parts started here on 127.0.0.1: one PostgreSQL 15
(tests/pg_server.py), two `riskrank-jax serve --http` replicas sharing it, HAProxy with the shipped
deploy/haproxy.cfg in front (tests/team_parts.py), and each replica's downstream server (tests/team_server.py),
driven by the official SDK's clients of both protocol eras.

* 50 concurrent clients over a bounded run: no error, p50 / p95 reported, every call one complete record;
* a confirmation asked by one replica and answered on the other; a session's flow noted on one replica
  honoured by the other; a pin accepted once honoured by both;
* PostgreSQL stopped: every call refused (never allowed) with the reason, nothing forwarded; back: allowed;
* one replica SIGKILLed under load: its clients recover through the other (a 2025-era session is answered
  "session not found" there and re-initialises), every forwarded call has exactly one record, the calls cut
  by the kill are recorded as interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pg_server  # noqa: E402
import team_parts  # noqa: E402
from attack_harness import gateway_env, records  # noqa: E402
from local_ports import free_port  # noqa: E402

TOKEN = "team-service-token-0123456789"
CLIENTS = 50
ROUNDS = 3  # each client: ROUNDS x (search_tools, call_tool)
ROOT = Path(__file__).resolve().parent.parent


def _missing() -> str | None:
    return pg_server.missing() or (None if team_parts.haproxy_binary() else team_parts.HAPROXY_MISSING)


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


# ---------------------------------------------------------------------------------------------------- the parts
class Replica:
    """One `riskrank-jax serve --http` process sharing the team's database."""

    def __init__(self, team: "Team", name: str):
        self.team, self.name, self.port = team, name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self) -> "Replica":
        t = self.team
        self.stderr = open(t.dir / f"{self.name}.stderr", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "riskrank_jax", "serve", "--config", str(t.cfg), "--http", f"127.0.0.1:{self.port}",
             "--token-file", str(t.token_file), "--allowed-host", "127.0.0.1", "--database", t.pg.url,
             "--state-dir", str(t.dir / f"state-{self.name}"), "--log-format", "json"],
            env=gateway_env(t.cache), stdout=subprocess.DEVNULL, stderr=self.stderr)
        return self

    def wait_ready(self, seconds: float = 240) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited with {self.proc.returncode}: {self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"replica {self.name} not ready after {seconds} s: {self.log()[-3000:]}")

    def log(self) -> str:
        return (self.team.dir / f"{self.name}.stderr").read_text(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Team:
    def __init__(self, d: Path, pg, cache: Path):
        self.dir, self.pg, self.cache = d, pg, cache
        self.calls_log = d / "calls.jsonl"
        self.token_file = d / "token"
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (TOKEN + "\n").encode())
        os.close(fd)
        self.cfg = d / "gateway.json"
        self.cfg.write_text(json.dumps({"mcpServers": {"team": {
            "command": sys.executable, "args": [str(ROOT / "tests" / "team_server.py")],
            "env": {"CALLS_LOG": str(self.calls_log)}}}}))
        self.replicas = [Replica(self, "a"), Replica(self, "b")]
        self.lb = None

    def store(self):
        from riskrank_jax.serve.store import open_store

        return open_store(None, self.pg.url)

    def records(self, **filters) -> list[dict]:
        from riskrank_jax.serve.audit import query_records

        return query_records(self.store(), None, **filters)

    def calls(self, tool: str | None = None) -> list[dict]:
        return [c for c in records(self.calls_log) if tool is None or c["tool"] == tool]

    def digest(self, arguments: dict) -> str:
        from riskrank_jax.serve.audit import arguments_digest

        return arguments_digest(arguments, self.store().secret("audit"))


@pytest.fixture(scope="module")
def team(tmp_path_factory, shared_gateway_cache):
    d = tmp_path_factory.mktemp("team")
    with pg_server.Postgres() as pg:
        t = Team(d, pg, shared_gateway_cache)
        try:
            for r in t.replicas:  # one after the other: the second reads the programs the first compiled
                r.start().wait_ready()
            t.lb = team_parts.start_haproxy(free_port(), [r.port for r in t.replicas], workdir=d / "haproxy",
                                            check_inter_ms=300)
            _wait_lb_ready(t)
            yield t
        finally:
            if t.lb is not None:
                t.lb.stop()
            for r in t.replicas:
                r.stop()


def _wait_lb_ready(t: Team, seconds: float = 30) -> None:
    """Until HAProxy's health checks found both replicas up, then one search answered through it."""
    deadline = time.time() + seconds
    while not _both_up(t):
        assert time.time() < deadline, f"HAProxy did not find both replicas up: {t.lb.log()[-2000:]}"
        time.sleep(0.2)
    anyio.run(_one_search, t.lb.url + "/mcp", "read a note")


def _both_up(t: Team) -> bool:
    """Whether HAProxy's stats (CSV) show both gateway servers UP."""
    with urllib.request.urlopen(t.lb.stats_url + "/stats;csv", timeout=5) as r:
        rows = [line.split(",") for line in r.read().decode().splitlines()]
    return sum(1 for row in rows if len(row) > 17 and row[0] == "gateways" and row[1].startswith("gateway-")
               and row[17] == "UP") == 2


def _http(headers=None, route=None):
    from mcp.shared._httpx_utils import create_mcp_http_client

    from riskrank_jax.serve.sdk_hooks import wrap_http_transports

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
    if route is not None:
        wrap_http_transports(http, route)
    return http


def _client(url: str, mode: str = "auto", route=None, **kw):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=_http(route=route)), read_timeout_seconds=120, mode=mode, **kw)


async def _one_search(url: str, query: str) -> dict:
    async with _client(url) as c:
        r = await c.call_tool("search_tools", {"query": query, "k": 4})
        assert not r.is_error, r.content[0].text
        return r.structured_content


def _metric(replica: Replica, name: str) -> float:
    """The value of an unlabelled counter in the replica's /metrics (Prometheus text, bearer token)."""
    from prometheus_client.parser import text_string_to_metric_families

    req = urllib.request.Request(replica.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return sample.value
    raise AssertionError(f"no {name} in {replica.url}/metrics")


LEGACY = "2025-11-25"


def _post(url: str, body: dict, headers: dict | None = None):
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def _status(url: str, body: dict, headers: dict | None = None) -> int:
    return _post(url, body, headers)[0]


def _legacy_session(url: str) -> str:
    """A 2025-era session initialised on ``url`` (one replica): its Mcp-Session-Id."""
    status, headers = _post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "team-test", "version": "1"}}})
    assert status == 200, status
    return {k.lower(): v for k, v in headers.items()}["mcp-session-id"]


def _pct(values, q) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


# ---------------------------------------------------------------------------------------------------- tests
def test_fifty_concurrent_clients_through_the_load_balancer(team, report_line):
    """50 clients at once, half on 2025-era sessions (sticky), half stateless (any replica), each making ROUNDS
    searches and note reads: no error, every call forwarded once and recorded once, complete, on both replicas."""
    before_calls, before_records = len(team.calls("read_note")), len(team.records(tool="team.read_note"))
    latency = {"search_tools": [], "call_tool": []}
    errors: list[str] = []
    made: list[str] = []

    async def client(n: int):
        mode = "legacy" if n % 2 else "auto"
        try:
            async with _client(team.lb.url + "/mcp", mode=mode) as c:
                for r in range(ROUNDS):
                    t0 = time.perf_counter()
                    s = await c.call_tool("search_tools", {"query": "read the team's note about the release", "k": 3})
                    latency["search_tools"].append(time.perf_counter() - t0)
                    if s.is_error or s.structured_content["tools"][0]["name"] != "team.read_note":
                        errors.append(f"client {n}: search {s.content[0].text[:200]}")
                    call = f"load-{n}-{r}"
                    t0 = time.perf_counter()
                    res = await c.call_tool("call_tool", {"name": "team.read_note",
                                                          "arguments": {"name": "release", "call": call}})
                    latency["call_tool"].append(time.perf_counter() - t0)
                    made.append(call)
                    if res.is_error:
                        errors.append(f"client {n}: call {res.content[0].text[:200]}")
        except Exception as e:  # noqa: BLE001 - every failure is collected and asserted below
            errors.append(f"client {n} ({mode}): {type(e).__name__}: {e}")

    async def run():
        async with anyio.create_task_group() as tg:
            for n in range(CLIENTS):
                tg.start_soon(client, n)

    t0 = time.perf_counter()
    anyio.run(run)
    wall = time.perf_counter() - t0
    assert errors == []
    assert len(made) == CLIENTS * ROUNDS
    forwarded = [c for c in team.calls("read_note")[before_calls:]]
    assert sorted(c["arguments"]["call"] for c in forwarded) == sorted(made)  # each call reached a server once
    recs = team.records(tool="team.read_note")[: len(team.records(tool="team.read_note")) - before_records]
    assert len(recs) == len(made) and {r["outcome"] for r in recs} == {"ok"}
    assert {r["decision"] for r in recs} == {"allowed"}
    by_replica = {}
    for r in recs:
        by_replica[r["replica"]] = by_replica.get(r["replica"], 0) + 1
    assert len(by_replica) == 2, by_replica  # both replicas served
    for what, xs in latency.items():
        report_line(f"team service, {CLIENTS} clients x {ROUNDS} through HAProxy to 2 replicas + PostgreSQL: "
                    f"{what} p50 {1000 * statistics.median(xs):.0f} ms, p95 {1000 * _pct(xs, 0.95):.0f} ms "
                    f"({len(xs)} requests, {wall:.1f} s wall, calls per replica {sorted(by_replica.values())})")


class Alternate:
    """An httpx2 transport that sends each tools/call request to the next of ``ports`` in turn (a
    confirmation's first round to one replica, its answer to the other)."""

    def __init__(self, inner, ports):
        self.inner, self.ports, self.n = inner, ports, 0

    async def handle_async_request(self, request):
        body = request.content if request.method == "POST" else b""
        if b'"tools/call"' in body:
            request.url = request.url.copy_with(port=self.ports[self.n % len(self.ports)])
            self.n += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def test_a_confirmation_asked_by_one_replica_is_answered_on_the_other(team):
    import mcp_types as types

    a, b = team.replicas
    asked = []

    async def elicit(ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def run():
        route = lambda inner: Alternate(inner, [a.port, b.port])  # noqa: E731
        async with _client(a.url + "/mcp", route=route, elicitation_callback=elicit) as c:
            assert c.protocol_version >= "2026"
            return await c.call_tool("call_tool", {"name": "team.post_message",
                                                   "arguments": {"channel": "releases", "text": "shipping"}})

    result = anyio.run(run)
    assert not result.is_error, result.content[0].text
    assert len(asked) == 1 and "team.post_message" in asked[0]
    (rec,) = team.records(tool="team.post_message", decision="confirmed")
    assert rec["outcome"] == "ok" and rec["replica"].split(":")[1] == str(b.proc.pid)  # decided and sent by b
    assert len(team.calls("post_message")) == 1
    from riskrank_jax.serve.sessions import Sessions

    assert [c["event"] for c in Sessions(team.store(), "test").confirmations()] == ["granted"]
    # asked on a, answered on b: b counts one confirmation asked and granted, a none (the answer came to b)
    assert [_metric(r, "riskrank_gateway_confirmations_asked_total") for r in (a, b)] == [0, 1]
    assert _metric(b, "riskrank_gateway_confirmations_granted_total") == 1


def test_a_flow_noted_on_one_replica_and_a_pin_accepted_once_hold_on_both(team):
    a, b = team.replicas

    async def call(url, name, arguments):
        async with _client(url + "/mcp") as c:  # stateless: the gateway's one flow, in the database
            return await c.call_tool("call_tool", {"name": name, "arguments": arguments})

    fetched = anyio.run(call, a.url, "team.fetch_page", {"url": "https://example.com/news"})
    assert not fetched.is_error and "Ignore previous instructions" in fetched.content[0].text
    after = anyio.run(call, b.url, "team.post_message", {"channel": "public", "text": "notes"})
    assert after.is_error and after.structured_content["rule"] == "session flow"
    assert "'team.fetch_page' returned untrusted content earlier in this session" in after.structured_content["reason"]
    # one pin store: a definition accepted with the CLI (against the database) is the one both replicas hold
    out = subprocess.run([sys.executable, "-m", "riskrank_jax", "pins", "list", "--json", "--database", team.pg.url],
                         capture_output=True, text=True, timeout=120, env=gateway_env(team.dir / "cli-cache"))
    pins = [json.loads(x) for x in out.stdout.splitlines()]
    assert {p["tool"] for p in pins} == {"team.read_note", "team.slow_report", "team.fetch_page", "team.post_message"}
    assert {p["status"] for p in pins} == {"accepted"} and {p["definitions_seen"] for p in pins} == {1}
    for r in (a, b):
        ok = anyio.run(call, r.url, "team.read_note", {"name": "pins", "call": f"pin-{r.name}"})
        assert not ok.is_error


def test_a_database_that_is_down_refuses_every_call_until_it_is_back(team):
    before = len(team.calls())
    team.pg.stop()
    try:
        async def call():
            async with _client(team.lb.url + "/mcp") as c:
                return await c.call_tool("call_tool", {"name": "team.read_note",
                                                       "arguments": {"name": "x", "call": "while-down"}})

        found = anyio.run(_one_search, team.lb.url + "/mcp", "read a note")  # searches still answer
        assert {t["call"] for t in found["tools"]} == {"refused"}
        for _ in range(4):  # both replicas (the load balancer spreads stateless requests)
            r = anyio.run(call)
            assert r.is_error and r.structured_content["refused"], r.content[0].text
            assert r.structured_content["rule"] == "state store"
            assert "state store" in r.structured_content["reason"] and "fail closed" in r.structured_content["reason"]
        assert len(team.calls()) == before  # nothing reached the server
    finally:
        team.pg.start()
    async def call_ok(call):
        async with _client(team.lb.url + "/mcp") as c:
            return await c.call_tool("call_tool", {"name": "team.read_note", "arguments": {"name": "x", "call": call}})

    for call in ("back-1", "back-2"):  # the first call after the restart already reconnects
        r = anyio.run(call_ok, call)
        assert not r.is_error, r.content[0].text
    assert len(team.calls()) == before + 2


def test_a_replica_killed_under_load_its_clients_recover_and_every_call_has_one_record(team, report_line):
    a, b = team.replicas
    store = team.store()
    key = store.secret("audit")
    from riskrank_jax.serve.audit import STALE_S, arguments_digest

    session_of_a = _legacy_session(a.url + "/mcp")
    done: list[str] = []  # calls answered
    failed: list[str] = []  # calls whose answer was lost with the replica
    recovered = []

    async def client(n: int, started: anyio.Event):
        mode = "legacy" if n % 2 else "auto"
        for attempt in range(3):
            try:
                async with _client(team.lb.url + "/mcp", mode=mode) as c:
                    for r in range(3):
                        call = f"kill-{n}-{attempt}-{r}"
                        started.set()
                        res = await c.call_tool("call_tool", {"name": "team.slow_report",
                                                              "arguments": {"seconds": 1.0, "call": call}})
                        assert not res.is_error, res.content[0].text
                        done.append(call)
                    if attempt:
                        recovered.append(n)
                    return
            except Exception:  # noqa: BLE001 - the replica went away mid-call: a new client, through the other
                failed.append(n)
        raise AssertionError(f"client {n} did not recover in 3 attempts")

    async def run():
        started = anyio.Event()
        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(client, n, started)
            await started.wait()
            await anyio.sleep(1.5)  # calls in flight on both replicas
            await anyio.to_thread.run_sync(a.kill)

    anyio.run(run)
    assert failed and recovered, "no client was cut by the kill (nothing in flight on the killed replica?)"
    # a 2025-era session the killed replica issued: the load balancer sends it to the other replica, which
    # answers the protocol's "session not found" (404), so the client initialises a new session
    assert _status(team.lb.url + "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                   {"Mcp-Session-Id": session_of_a, "MCP-Protocol-Version": LEGACY}) == 404
    # every forwarded call: exactly one record, complete; those cut by the kill: interrupted (marked by b once
    # a has been silent for STALE_S)
    deadline = time.time() + STALE_S + 20
    while True:
        recs = team.records(tool="team.slow_report")
        if all(r["outcome"] is not None for r in recs) or time.time() > deadline:
            break
        time.sleep(1)
    by_digest: dict[str, list] = {}
    for r in recs:
        by_digest.setdefault(r["arguments_hmac"], []).append(r)
    forwarded = team.calls("slow_report")
    assert forwarded
    for c in forwarded:
        got = by_digest.get(arguments_digest({"seconds": 1.0, "call": c["arguments"]["call"]}, key), [])
        assert len(got) == 1, (c, got)
        # an answer the client got is "ok"; one lost with the replica is interrupted (or "ok" when the replica
        # completed the record in the instant before it died)
        assert got[0]["outcome"] in (("ok",) if c["arguments"]["call"] in done else ("interrupted", "ok")), got[0]
    interrupted = [r for r in recs if r["outcome"] == "interrupted"]
    assert interrupted and all(r["replica"].split(":")[1] == str(a.proc.pid) for r in interrupted)
    assert "stopped before the call was answered" in interrupted[0]["outcome_detail"]
    report_line(f"team service, replica SIGKILLed under 20 clients: {len(interrupted)} calls recorded interrupted, "
                f"{len(set(failed))} clients recovered through the other replica, {len(done)} calls answered")
