"""The HTTP gateway as a service (serve.operate): /healthz, /readyz and /metrics on a real `riskrank-jax serve
--http` subprocess, the drain on SIGTERM during a slow downstream call, and its JSON log lines.

One gateway runs for the module (its start costs an encoder load), in front of tests/gateway_servers/sdk_server.py
started 2 s late, so that /readyz is seen to say "building the first catalog" first. Its tests run in file
order (the suite distributes whole files): the SIGTERM test stops it, the JSON-log test reads what it wrote.
The drain timeout, the config leaves and the log format are also tested in this process, without a gateway.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from local_ports import free_port, wait_port

ROOT = Path(__file__).resolve().parent.parent
SDK_SERVER = ROOT / "tests" / "gateway_servers" / "sdk_server.py"
TOKEN = "operate-token-0123456789"
FOREIGN_HOST = "10.1.2.3"  # a pod IP, as a Kubernetes or HAProxy probe names it
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _samples(text: str) -> dict:
    """{(sample name, frozenset of its labels): value} of a Prometheus text exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _sum(samples: dict, name: str, **labels) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


class Running:
    def __init__(self, proc, port, tmp, stderr, readyz):
        self.proc, self.port, self.tmp, self.stderr, self.readyz = proc, port, tmp, stderr, readyz

    def get(self, path: str, host: str | None = None, auth: bool = False) -> httpx2.Response:
        headers = {"Host": host or f"127.0.0.1:{self.port}"}
        if auth:
            headers["Authorization"] = f"Bearer {TOKEN}"
        return httpx2.get(f"http://127.0.0.1:{self.port}{path}", headers=headers, timeout=30)

    def metrics(self) -> dict:
        r = self.get("/metrics", auth=True)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
        return _samples(r.text)

    def calls(self) -> list[dict]:
        p = self.tmp / "calls.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []

    def log_lines(self) -> list[str]:
        return [x for x in self.stderr.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, shared_gateway_cache):
    tmp = tmp_path_factory.mktemp("operate")
    late_start = ("import runpy, sys, time; print('nolisten: starting in 2 s', file=sys.stderr, flush=True); "
                  f"time.sleep(2); sys.argv = ['sdk_server.py', {str(tmp / 'calls.jsonl')!r}]; "
                  f"runpy.run_path({str(SDK_SERVER)!r}, run_name='__main__')")
    (tmp / "servers.json").write_text(json.dumps({"mcpServers": {"nolisten": {
        "command": sys.executable, "args": ["-c", late_start]}}}))
    (tmp / "token").write_text(TOKEN + "\n")
    os.chmod(tmp / "token", 0o600)
    env = dict(os.environ, RISKRANK_CACHE=str(shared_gateway_cache), RISKRANK_STATE=str(tmp / "state"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port = free_port()
    stderr = tmp / "stderr.log"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "riskrank_jax", "serve", "--config", str(tmp / "servers.json"),
                                 "--http", f"127.0.0.1:{port}", "--token-file", str(tmp / "token"),
                                 "--drain-timeout", "20", "--log-format", "json"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_port(port, proc)
        readyz = []  # every /readyz answer until the first 200
        deadline = time.time() + 240
        while time.time() < deadline:
            r = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
            readyz.append((r.status_code, r.json()))
            if r.status_code == 200:
                break
            time.sleep(0.2)
        yield Running(proc, port, tmp, stderr, readyz)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


async def _session(port: int, body):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                      read_timeout_seconds=180) as client:
        return await body(client)


# ---------------------------------------------------------------------------------------------- probes


def test_readyz_says_503_until_the_first_catalog_then_200(gateway):
    first_status, first_body = gateway.readyz[0]
    assert (first_status, first_body) == (503, {"ready": False, "why": "building the first catalog"})
    assert gateway.readyz[-1] == (200, {"ready": True})
    assert len(gateway.readyz) >= 5  # the downstream server alone starts 2 s late; polled every 0.2 s


def test_probes_answer_any_host_without_a_token_and_mcp_still_checks_host(gateway):
    foreign = f"{FOREIGN_HOST}:{gateway.port}"
    r = gateway.get("/healthz", host=foreign)
    assert r.status_code == 200 and r.json() == {"alive": True}
    r = gateway.get("/readyz", host=foreign)
    assert r.status_code == 200 and r.json() == {"ready": True}  # the state, nothing else
    assert r.headers["cache-control"] == "no-store"
    r = httpx2.post(f"http://127.0.0.1:{gateway.port}/mcp", content=b"{}", timeout=30,
                    headers={"Host": foreign, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert r.status_code == 421 and "misdirected request" in r.json()["error"]
    assert httpx2.post(f"http://127.0.0.1:{gateway.port}/readyz", timeout=30).status_code == 405


def test_metrics_need_the_token_and_count_exactly_one_search_and_one_call(gateway):
    assert gateway.get("/metrics").status_code == 401
    r = httpx2.get(f"http://127.0.0.1:{gateway.port}/metrics", timeout=30,
                   headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert gateway.get("/metrics", host=f"{FOREIGN_HOST}:{gateway.port}", auth=True).status_code == 200  # no Host check
    before = gateway.metrics()
    assert before[("riskrank_gateway_catalog_tools", frozenset())] == 3
    assert before[("riskrank_gateway_downstream_up", frozenset({("server", "nolisten")}))] == 1
    assert before[("riskrank_gateway_downstream_restarts_total", frozenset({("server", "nolisten")}))] == 0

    async def body(client):
        found = await client.call_tool("search_tools", {"query": "what time is it in Paris", "k": 3})
        called = await client.call_tool("call_tool", {"name": "nolisten.world_clock", "arguments": {"city": "Paris"}})
        return found, called

    found, called = anyio.run(_session, gateway.port, body)
    assert "nolisten.world_clock" in [t["name"] for t in found.structured_content["tools"]]
    assert not called.is_error and called.content[0].text == "it is noon in Paris"
    after = gateway.metrics()

    def moved(name, **labels):
        return _sum(after, name, **labels) - _sum(before, name, **labels)

    assert moved("riskrank_gateway_searches_total", outcome="ok") == 1
    assert moved("riskrank_gateway_searches_total", outcome="error") == 0
    assert moved("riskrank_gateway_search_seconds_count") == 1
    assert moved("riskrank_gateway_calls_total") == 1
    assert moved("riskrank_gateway_calls_total", decision="allowed") == 1
    assert moved("riskrank_gateway_downstream_call_seconds_count", server="nolisten") == 1
    assert 0 < moved("riskrank_gateway_downstream_call_seconds_sum", server="nolisten") < 30
    assert moved("riskrank_gateway_confirmations_asked_total") == 0
    assert moved("riskrank_gateway_downstream_call_errors_total") == 0
    assert after[("riskrank_gateway_calls_in_flight", frozenset())] == 0
    assert after[("riskrank_gateway_draining", frozenset())] == 0


# ---------------------------------------------------------------------------------------------- the drain


def test_sigterm_lets_the_call_in_flight_finish_refuses_new_requests_and_exits_0(gateway):
    url = f"http://127.0.0.1:{gateway.port}"
    seen = {}

    async def body(client):
        # the SDK's client lists the tools to validate a call's result when it has not yet: listed now, since
        # every new request of the drain is refused, that one too
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            async def slow():  # 150 steps of 20 ms in the downstream server: about 3 s
                seen["result"] = await client.call_tool("call_tool", {"name": "nolisten.count_slowly",
                                                                      "arguments": {"n": 150}})
                seen["finished"] = time.monotonic()

            tg.start_soon(slow)
            with anyio.fail_after(60):
                while not any(c.get("tool") == "count_slowly" for c in gateway.calls()):
                    await anyio.sleep(0.02)
            os.kill(gateway.proc.pid, signal.SIGTERM)
            seen["signalled"] = time.monotonic()
            async with httpx2.AsyncClient(timeout=30) as http:
                with anyio.fail_after(10):
                    while (r := await http.get(f"{url}/readyz")).status_code != 503:
                        await anyio.sleep(0.02)
                seen["readyz"] = r.json()
                seen["new"] = await http.post(f"{url}/mcp", headers={"Authorization": f"Bearer {TOKEN}"},
                                              json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                seen["healthz"] = (await http.get(f"{url}/healthz")).status_code
                seen["still_running"] = "result" not in seen

    anyio.run(_session, gateway.port, body)
    assert seen["still_running"]  # the 503s came while the call was in flight
    assert seen["readyz"] == {"ready": False, "why": "draining: the gateway is shutting down"}
    new = seen["new"]
    assert new.status_code == 503 and new.headers["retry-after"] == "1"
    assert new.json()["error"].startswith("riskrank-jax gateway: shutting down")
    assert seen["healthz"] == 200  # alive while it drains
    result = seen["result"]
    assert not result.is_error and result.content[0].text == "counted to 150"
    assert gateway.proc.wait(60) == 0
    messages = [json.loads(x)["message"] for x in gateway.log_lines()]
    draining = [m for m in messages if m.startswith("draining: ")]
    assert draining and draining[0].startswith("draining: 1 request in flight"), messages
    drained = [m for m in messages if m.startswith("drained in ")]
    assert drained and 0 < float(drained[0].split()[2]) < 20, messages
    assert "stopped taking requests; closing the downstream servers" in messages


def test_json_logs_are_one_object_a_line_downstream_stderr_included(gateway):
    if gateway.proc.poll() is None:
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.proc.wait(60)
    records = [json.loads(line) for line in gateway.log_lines()]  # each line is one JSON object
    assert len(records) >= 5
    for rec in records:
        assert {"time", "level", "logger", "message"} <= set(rec), rec
        assert ISO_MS.fullmatch(rec["time"]), rec["time"]
    ours = [r for r in records if r["logger"] == "riskrank-jax serve"]
    assert any(r["message"] == "catalog: 3 tools" or r["message"].startswith("catalog: 3 tools (") for r in ours)
    assert {"level": "info", "server": "nolisten", "stream": "stderr", "message": "nolisten: starting in 2 s"}.items() \
        <= next(r for r in ours if r.get("stream") == "stderr").items()
    drained = next(r for r in ours if r["message"].startswith("drained in "))
    assert isinstance(drained["seconds"], float)


# ---------------------------------------------------------------------------------------------- in this process


def _fake_gateway(timeout: float):
    first = anyio.Event()
    return SimpleNamespace(settings=SimpleNamespace(http=SimpleNamespace(drain_timeout_s=timeout)), catalog=None,
                           rebuilds=0, downstreams={}, _first_catalog=first, metrics=None)


def test_drain_timeout_cuts_the_request_left_and_says_so(capsys):
    from riskrank_jax.serve.operate import Operate

    async def slow_app(scope, receive, send):
        await anyio.sleep(30)

    async def main():
        gw = _fake_gateway(0.3)
        op = Operate(slow_app, gw)
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        server = SimpleNamespace(should_exit=False, force_exit=False)
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
        async with anyio.create_task_group() as tg:
            tg.start_soon(op, scope, receive, send)
            await anyio.sleep(0.05)
            assert op.in_flight == 1
            op.start_drain()
            start = time.monotonic()
            await op._drain_when_signalled(server)
            took = time.monotonic() - start
            await op(dict(scope), receive, send)  # a new request while draining
            tg.cancel_scope.cancel()
        return took, server, sent

    took, server, sent = anyio.run(main)
    assert 0.3 <= took < 2 and server.should_exit
    assert sent[0]["status"] == 503 and (b"retry-after", b"1") in sent[0]["headers"]
    err = capsys.readouterr().err
    assert "riskrank-jax serve: draining: 1 request in flight" in err
    assert "riskrank-jax serve: drain timeout: 1 request cut after 0." in err


def test_log_format_json_and_text(capsys):
    from riskrank_jax.serve.downstream import log
    from riskrank_jax.serve.operate import set_log_format

    log("plain line")
    set_log_format("json")
    try:
        log("a json line", "warning", server="files", n=2)
        import logging
        logging.getLogger("some.library").warning("a library's warning")
    finally:
        set_log_format("text")
    log("plain again")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "riskrank-jax serve: plain line" and lines[-1] == "riskrank-jax serve: plain again"
    ours, library = json.loads(lines[1]), json.loads(lines[2])
    assert ISO_MS.fullmatch(ours.pop("time")) and ISO_MS.fullmatch(library.pop("time"))
    assert ours == {"level": "warning", "logger": "riskrank-jax serve", "message": "a json line", "server": "files",
                    "n": 2}
    assert library == {"level": "warning", "logger": "some.library", "message": "a library's warning"}
    with pytest.raises(ValueError):
        set_log_format("xml")


def test_config_leaves_drain_timeout_and_log_format(tmp_path):
    from click.testing import CliRunner

    from riskrank_jax.cli.main import cli
    from riskrank_jax.errors import ConfigError
    from riskrank_jax.serve.config import read_config

    def config(**sections):
        p = tmp_path / "servers.json"
        p.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}, **sections}))
        return p

    s = read_config(config(http={"drain_timeout_s": 45}, runtime={"log_format": "json"}))
    assert (s.http.drain_timeout_s, s.runtime.log_format) == (45.0, "json")
    assert read_config(config()).http.drain_timeout_s == 30.0
    with pytest.raises(ConfigError, match="http.drain_timeout_s must be a number in 0..3600"):
        read_config(config(http={"drain_timeout_s": -1}))
    with pytest.raises(ConfigError, match="runtime.log_format must be one of text, json"):
        read_config(config(runtime={"log_format": "xml"}))
    r = CliRunner().invoke(cli, ["serve", "--config", str(config()), "--http", "127.0.0.1:8931", "--drain-timeout",
                                 "7.5", "--log-format", "json", "--show-config"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.output)
    assert shown["http"]["drain_timeout_s"] == 7.5 and shown["runtime"]["log_format"] == "json"
