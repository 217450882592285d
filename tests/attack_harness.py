"""The attacker's harness for `riskrank-jax serve` (tests/test_serve_attacks.py): the gateway started as a
subprocess over stdio or streamable HTTP in front of the attack servers of tests/attack_servers/, driven by the
official SDK's client on a blocking portal, with an elicitation callback that records every message the user is
shown and answers as told; and readers of the servers' calls log, the audit log and the pins CLI.

    with stdio_gateway(work_dir, config, cache) as g:        # or http_gateway(...)
        g.answer = "decline"
        r = g.call("args.post_message", {"channel": "general", "text": token})
        assert g.asked[-1] ... and not g.calls("args") and g.audit()[-1]["rule"] == ...

Why a harness of its own: every attack test asserts the same three things (what reached the downstream server,
what the user was asked, what the audit log says), so each reads them the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal

ROOT = Path(__file__).resolve().parent.parent
ATTACK = ROOT / "tests" / "attack_servers"
EXAMPLES = ROOT / "examples" / "gateway"
TOKEN = "attack-harness-token-0123456789"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_ports import free_port, wait_port  # noqa: E402


def records(path: Path) -> list[dict]:
    """The JSON lines of a file ([] when it does not exist yet)."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def gateway_env(cache: Path) -> dict:
    """The environment of a gateway subprocess: its own cache, this checkout first on the path."""
    return dict(os.environ, RISKRANK_CACHE=str(cache),
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def attack_server(name: str, calls_log: Path, *extra: str) -> dict:
    """The config entry of tests/attack_servers/<name>.py over stdio."""
    return {"command": sys.executable, "args": [str(ATTACK / f"{name}.py"), str(calls_log), *extra]}


def files_server(calls_log: Path) -> dict:
    """The config entry of the honest files server of examples/gateway/ (it logs its calls to $CALLS_LOG)."""
    return {"command": sys.executable, "args": [str(EXAMPLES / "files_server.py")],
            "env": {"CALLS_LOG": str(calls_log)}}


@contextlib.contextmanager
def http_server(name: str, calls_log: Path, *extra: str):
    """Start tests/attack_servers/<name>.py over streamable HTTP; yields its URL, stops it on exit."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ATTACK / f"{name}.py"), str(calls_log), *extra, "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc, seconds=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


class Gate:
    """One client of a gateway (on a blocking portal) and what the attack tests read around it: ``asked`` (every
    elicitation message shown to the user), ``answer`` ("accept" or "decline": what the user answers), the
    calls log of the downstream servers, the audit log and the pins' state directory."""

    def __init__(self, portal, client, d: Path):
        self.portal, self.client, self.dir = portal, client, d
        self.calls_log, self.audit_log, self.state = d / "calls.jsonl", d / "audit.jsonl", d / "state"
        self.stderr = d / "stderr.txt"
        self.asked: list[str] = []
        self.answer = "decline"
        self.made = 0  # call_tool requests sent: each must leave one audit line

    # ------------------------------------------------------------------------------------------ the gateway
    def call(self, name: str, arguments: dict | None = None):
        """call_tool(name, arguments): the gateway's CallToolResult."""
        self.made += 1
        return self.portal.call(self.client.call_tool, "call_tool", {"name": name, "arguments": arguments or {}})

    def search(self, query: str, k: int = 50) -> dict:
        r = self.portal.call(self.client.call_tool, "search_tools", {"query": query, "k": k})
        assert not r.is_error, r.content[0].text
        return r.structured_content

    def rows(self, query: str = "any tool", k: int = 50) -> dict[str, dict]:
        """name -> search row of every tool the search returns (k at its maximum: the whole small catalog)."""
        found = self.search(query, k)
        return {t["name"]: t for t in found["tools"]}

    def servers(self):
        """({name: server row}, the list_servers result)."""
        r = self.portal.call(self.client.call_tool, "list_servers", {})
        return {s["name"]: s for s in r.structured_content["servers"]}, r

    def wait(self, cond, what: str, seconds: float = 60, every: float = 0.2):
        """Poll ``cond()`` until it returns something true (returned); fail naming ``what`` after ``seconds``."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            got = cond()
            if got:
                return got
            time.sleep(every)
        pytest.fail(f"never happened within {seconds:.0f} s: {what}")

    def wait_ready(self, seconds: float = 120) -> dict:
        """Every server up and every one of its tools in the catalog."""
        self.search("warm up", 1)  # waits for the first catalog
        return self.wait(lambda: (lambda s: s if all(
            x["state"] == "up" and sum(x.get("risk_histogram", {}).values()) == x["tools"] for x in s.values())
            else None)(self.servers()[0]), "every server up and in the catalog", seconds)

    # ------------------------------------------------------------------------------------------ around it
    def calls(self, server: str | None = None, tool: str | None = None) -> list[dict]:
        """The tools/call requests the downstream servers received (``server`` / ``tool``: only those)."""
        return [c for c in records(self.calls_log)
                if (server is None or c.get("server") == server) and (tool is None or c.get("tool") == tool)]

    def audit(self) -> list[dict]:
        return records(self.audit_log)

    def audit_text(self) -> str:
        return self.audit_log.read_text() if self.audit_log.exists() else ""

    def last_audit(self, tool: str) -> dict:
        """The newest audit line of ``tool`` (its gateway identity, or a name the gateway did not list, which it
        may write JSON-quoted as foreign text)."""
        lines = [x for x in self.audit() if x.get("tool") in (tool, json.dumps(tool))]
        assert lines, f"no audit line for {tool!r}: {self.audit()[-3:]}"
        return lines[-1]

    def pins_json(self) -> list[dict]:
        """``pins list --json``: one JSON object per pinned tool (one per line, or one JSON array)."""
        out = self.pins("list", "--json").stdout.strip()
        if out.startswith("["):
            return json.loads(out)
        return [json.loads(x) for x in out.splitlines() if x.strip()]

    def pins(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """``riskrank-jax pins ARGS... --state-dir STATE`` as a subprocess (beside the running gateway)."""
        cmd = [sys.executable, "-m", "riskrank_jax", "pins", args[0], "--state-dir", str(self.state), *args[1:]]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=gateway_env(self.dir / "pins-cache"))
        assert not check or p.returncode == 0, f"{' '.join(cmd[3:])} exited with {p.returncode}: {p.stdout}{p.stderr}"
        return p


def _elicitation(gate_box: list):
    """An elicitation callback that records the message the user is shown and answers ``gate.answer``."""
    import mcp_types as types

    async def elicit(ctx, params):
        gate = gate_box[0]
        gate.asked.append(params.message)
        if gate.answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    return elicit


def _write_config(d: Path, config: dict) -> tuple[Path, list[str]]:
    (d / "servers.json").write_text(json.dumps(config, indent=1))
    return d / "servers.json", ["--state-dir", str(d / "state")]


@contextlib.contextmanager
def stdio_gateway(d: Path, config: dict, cache: Path, read_timeout_s: float = 300):
    """`riskrank-jax serve --config ... --audit-log ... --state-dir ...` over stdio, the SDK's client connected,
    every server up and in the catalog; yields the Gate. The calls log is ``d/calls.jsonl`` (give it to the
    servers of ``config``)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cfg, state = _write_config(d, config)
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "riskrank_jax", "serve", "--config", str(cfg), "--audit-log", str(d / "audit.jsonl"), *state],
        env=gateway_env(cache))
    box: list = []
    with open(d / "stderr.txt", "w") as errlog, start_blocking_portal() as portal:
        client = Client(stdio_client(params, errlog=errlog), read_timeout_seconds=read_timeout_s,
                        elicitation_callback=_elicitation(box))
        with portal.wrap_async_context_manager(client) as c:
            gate = Gate(portal, c, d)
            box.append(gate)
            gate.wait_ready()
            yield gate


@contextlib.contextmanager
def http_gateway(d: Path, config: dict, cache: Path, read_timeout_s: float = 300):
    """The gateway over streamable HTTP on 127.0.0.1 with a bearer token (``--token-file``, mode 0600), the
    SDK's client connected with the token, every server up; yields the Gate with ``url`` and ``token``."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    cfg, state = _write_config(d, config)
    token_file = d / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (TOKEN + "\n").encode())
    os.close(fd)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with open(d / "stderr.txt", "w") as errlog:
        proc = subprocess.Popen([sys.executable, "-m", "riskrank_jax", "serve", "--config", str(cfg),
                                 "--http", f"127.0.0.1:{port}", "--token-file", str(token_file),
                                 "--audit-log", str(d / "audit.jsonl"), *state],
                                env=gateway_env(cache), stdout=subprocess.DEVNULL, stderr=errlog)
        try:
            wait_port(port, proc, seconds=180)
            box: list = []
            with start_blocking_portal() as portal:
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
                client = Client(streamable_http_client(url, http_client=http), read_timeout_seconds=read_timeout_s,
                                elicitation_callback=_elicitation(box))
                with portal.wrap_async_context_manager(client) as c:
                    gate = Gate(portal, c, d)
                    gate.url, gate.token, gate.process = url, TOKEN, proc
                    box.append(gate)
                    gate.wait_ready()
                    yield gate
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def inspector(exe: Path, url: str, *args: str, is_error: bool = False) -> dict:
    """The MCP Inspector CLI's JSON output against the HTTP gateway (bearer token); it exits 5 when the tool's
    result has isError."""
    p = subprocess.run([str(exe), "--cli", "--transport", "http", "--server-url", url,
                        "--header", f"Authorization: Bearer {TOKEN}", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == (5 if is_error else 0), p.stdout + p.stderr
    return json.loads(p.stdout)


def text_of(result) -> str:
    """All text blocks of a CallToolResult, joined."""
    return "".join(getattr(b, "text", "") for b in result.content)


__all__ = ["ROOT", "ATTACK", "EXAMPLES", "TOKEN", "records", "gateway_env", "attack_server", "files_server",
           "http_server", "Gate", "stdio_gateway", "http_gateway", "inspector", "text_of"]
