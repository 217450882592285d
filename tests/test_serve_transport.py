"""The gateway's transport hardening, without a gateway or an encoder: the HTTP guard (serve.http_guard) around
small real ASGI apps served by real uvicorn and asked by real HTTP clients; the token rules of the CLI; results
cut to max_result_bytes (serve.results); and downstream messages over max_message_bytes dropped with bounded
memory (serve.bounded_stdio), over stdio from real subprocesses and over HTTP from a real SDK server.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from click.testing import CliRunner

from riskrank_jax.errors import ConfigError
from riskrank_jax.serve.bounded_stdio import http_client, name_message, read_lines
from riskrank_jax.serve.config import Limits, ServerSpec
from riskrank_jax.serve.downstream import Downstream, DownstreamError
from riskrank_jax.serve.http_guard import HttpGuard, sdk_transport_security
from riskrank_jax.serve.results import cap_result, str_json_len

from local_ports import free_port

TOKEN = "guard-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MB = 1_000_000


# ---------------------------------------------------------------------------------------------- servers


class Counting:
    """A tiny ASGI app that counts the requests that reach it and answers with the body length it read."""

    def __init__(self):
        self.calls = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.calls += 1
        size, more = 0, True
        while more:
            m = await receive()
            size += len(m.get("body", b""))
            more = m.get("more_body", False)
        body = json.dumps({"read": size}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


class Served:
    """uvicorn serving ``app`` on host:port in a thread of this process, until stop()."""

    def __init__(self, app, host: str, port: int):
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="error", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"uvicorn did not start on {host}:{port}")
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


def loopback_alias_works() -> bool:
    """Linux routes all of 127/8 to lo; other systems may not."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.2", 0))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def guarded():
    """(Counting app, port) behind an HttpGuard bound to 127.0.0.1 with a token, an extra host and origin."""
    app, port = Counting(), free_port()
    guard = HttpGuard(app, bind_host="127.0.0.1", port=port, token=TOKEN, allowed_hosts=("gw.example.com",),
                      allowed_origins=("https://app.example.com",), max_request_bytes=1 << 20)
    served = Served(guard, "127.0.0.1", port)
    yield app, port
    served.stop()


def ask(port: int, host: str | None = None, origin: str | None = None, auth=True, content=b"{}", ip="127.0.0.1",
        **kw) -> httpx2.Response:
    headers = {**(AUTH if auth else {}), **({"Host": host} if host else {}), **({"Origin": origin} if origin else {})}
    return httpx2.post(f"http://{ip}:{port}/mcp", headers=headers, content=content, timeout=30, **kw)


# ---------------------------------------------------------------------------------------------- the guard


def test_foreign_host_is_refused_before_the_app_sees_it(guarded):
    app, port = guarded
    before = app.calls
    for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1:{port + 1}", f"localhost.evil:{port}",
                 f"127.0.0.1:{port}@attacker.example"):
        r = ask(port, host=host)
        assert r.status_code == 421, (host, r.text)
        assert r.json()["error"].startswith("riskrank-jax gateway: misdirected request") and "--allowed-host" in r.text
    assert app.calls == before  # none reached the app
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}", "gw.example.com",
                 "gw.example.com:443"):
        r = ask(port, host=host)
        assert r.status_code == 200 and r.json() == {"read": 2}, (host, r.text)
    assert app.calls == before + 6


def test_foreign_origin_is_refused_and_no_origin_passes(guarded):
    app, port = guarded
    before = app.calls
    for origin in ("http://attacker.example", f"http://attacker.example:{port}", "null", "https://app.example.com:8443",
                   f"file://localhost:{port}"):
        r = ask(port, origin=origin)
        assert r.status_code == 403 and "Origin" in r.json()["error"], (origin, r.text)
    assert app.calls == before
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", "https://app.example.com",
                   "https://gw.example.com", None):
        assert ask(port, origin=origin).status_code == 200, origin
    assert app.calls == before + 5


def test_token_is_required_and_compared(guarded):
    app, port = guarded
    before = app.calls
    r = ask(port, auth=False)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer" and "Bearer" in r.json()["error"]
    for wrong in ("Bearer wrong-token-0123456789", f"Bearer {TOKEN}x", TOKEN, f"bearer  {TOKEN}"):
        assert httpx2.post(f"http://127.0.0.1:{port}/mcp", headers={"Authorization": wrong}).status_code == 401
    assert app.calls == before
    assert ask(port).status_code == 200


def test_oversized_body_gets_413_and_never_reaches_the_app(guarded):
    app, port = guarded
    before = app.calls
    r = ask(port, content=b"x" * (2 << 20))  # Content-Length over the limit
    assert r.status_code == 413 and "larger than 1,048,576 bytes" in r.json()["error"]

    def chunks():  # no Content-Length: chunked; the guard counts what arrives
        for _ in range(40):
            yield b"y" * 65536

    r = ask(port, content=chunks())
    assert r.status_code == 413
    assert app.calls == before
    r = ask(port, content=b"z" * (1 << 20))  # exactly the limit passes, whole
    assert r.status_code == 200 and r.json() == {"read": 1 << 20}


def test_guard_unit_rules():
    g = HttpGuard(None, bind_host="0.0.0.0", port=8931, allowed_hosts=("gw.example.com:443", "10.0.0.5"))
    assert g.host_allowed("127.0.0.1:8931", 80) and g.host_allowed("localhost:8931", 80)  # wildcard: loopback too
    assert not g.host_allowed("gw.example.com", 80) and g.host_allowed("gw.example.com", 443)
    assert g.host_allowed("10.0.0.5:1234", 80) and not g.host_allowed(None, 80) and not g.host_allowed("", 80)
    assert not g.host_allowed("attacker.example:8931", 80) and not g.host_allowed("[::1", 80)
    g = HttpGuard(None, bind_host="::1", port=80)
    assert g.host_allowed("[::1]", 80) and g.host_allowed("localhost", 80) and g.host_allowed("localhost.", 80)
    g = HttpGuard(None, bind_host="192.168.1.5", port=8931)  # not loopback: its own address only
    assert g.host_allowed("192.168.1.5:8931", 80) and not g.host_allowed("127.0.0.1:8931", 80)
    with pytest.raises(ValueError):
        HttpGuard(None, bind_host="127.0.0.1", port=1, allowed_origins=("app.example.com",))


@pytest.mark.skipif(not loopback_alias_works(), reason="127.0.0.2 is not routed to loopback here")
def test_real_mcp_app_on_127_0_0_2_is_guarded_where_the_sdk_is_not():
    """The SDK switches its DNS-rebinding check on only for 127.0.0.1, localhost and ::1: on 127.0.0.2 its app
    lets a foreign Host through; behind the guard it is refused, and a real MCP client still works."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.mcpserver import MCPServer
    from mcp.shared._httpx_utils import create_mcp_http_client

    def app():
        server = MCPServer("guarded")

        @server.tool()
        def echo(text: str) -> str:
            """Echo the text."""
            return text

        return server.streamable_http_app(host="127.0.0.2", transport_security=sdk_transport_security(),
                                          json_response=True)

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Host": "attacker.example"}
    bare_port, port = free_port(), free_port()
    bare = Served(app(), "127.0.0.2", bare_port)
    guarded = Served(HttpGuard(app(), bind_host="127.0.0.2", port=port, token=TOKEN), "127.0.0.2", port)
    try:
        r = httpx2.post(f"http://127.0.0.2:{bare_port}/mcp", json=init, headers=headers)
        assert r.status_code == 200  # the SDK alone: a foreign Host reaches the MCP server
        r = httpx2.post(f"http://127.0.0.2:{port}/mcp", json=init, headers={**headers, **AUTH})
        assert r.status_code == 421

        async def session():
            http = create_mcp_http_client(headers=AUTH)
            async with Client(streamable_http_client(f"http://127.0.0.2:{port}/mcp", http_client=http)) as c:
                return await c.call_tool("echo", {"text": "through the guard"})

        assert anyio.run(session).content[0].text == "through the guard"
    finally:
        bare.stop()
        guarded.stop()


# ---------------------------------------------------------------------------------------------- the CLI


def test_cli_needs_a_token_beyond_exactly_127_0_0_1_and_a_private_token_file(tmp_path):
    from riskrank_jax.cli.main import cli
    from riskrank_jax.cli.serve import read_token

    cfg = tmp_path / "servers.json"
    cfg.write_text(json.dumps({"mcpServers": {"a": {"command": "python"}}}))
    runner = CliRunner()
    for host in ("127.0.0.2", "127.1", "0.0.0.0", "[::]", "example.com"):
        r = runner.invoke(cli, ["serve", "--config", str(cfg), "--http", f"{host}:8931"])
        assert r.exit_code == 2 and "--token-file" in r.output, (host, r.output)
    r = runner.invoke(cli, ["serve", "--config", str(cfg), "--allowed-host", "gw.example.com"])
    assert r.exit_code == 2 and "--allowed-host is for --http" in r.output
    r = runner.invoke(cli, ["serve", "--config", str(cfg), "--http", "127.0.0.1:8931", "--allowed-origin", "nope"])
    assert r.exit_code == 2 and "allowed origin 'nope'" in r.output
    help_text = runner.invoke(cli, ["serve", "--help"]).output
    assert "--allowed-host NAME[:PORT]" in help_text and "--allowed-origin URL" in help_text

    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    r = runner.invoke(cli, ["serve", "--config", str(cfg), "--http", "127.0.0.2:8931", "--token-file", str(token)])
    assert r.exit_code == 1 and f"error: {token}" in r.output and "mode 0644" in r.output and "chmod 600" in r.output
    token.chmod(0o620)
    with pytest.raises(ConfigError, match="mode 0620"):
        read_token(token)
    token.chmod(0o600)
    r = runner.invoke(cli, ["serve", "--config", str(cfg), "--http", "127.0.0.2:8931", "--token-file", str(token),
                            "--show-config"])
    assert r.exit_code == 0 and TOKEN not in r.output, r.output
    http = json.loads(r.output)["http"]
    assert http["address"] == "127.0.0.2:8931" and http["token_file"] == str(token)
    assert http["token"].startswith("set") and "--token-file" in http["token"]
    link = tmp_path / "link"
    link.symlink_to(token)  # a symlink is followed (as Kubernetes mounts secrets); the file itself is checked
    assert read_token(link) == TOKEN
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_token(fifo)  # refused at once, not blocked waiting for a writer


# ---------------------------------------------------------------------------------------------- results


def test_cap_result_cuts_a_50_mb_text_and_keeps_blocks_in_order():
    import mcp_types as types

    big = "é" + "x" * (50 * MB)
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="first"),
                 types.ImageContent(type="image", data="QUJD" * 10, mime_type="image/png"),
                 types.TextContent(type="text", text=big),
                 types.TextContent(type="text", text="after the cut")],
        structured_content={"result": "y" * 1000}, is_error=False)
    out, note = cap_result(result, 1_048_576)
    assert [b.type for b in out.content] == ["text", "image", "text", "text"]
    assert out.content[0].text == "first" and out.content[1].data == "QUJD" * 10
    assert big.startswith(out.content[2].text) and 1_000_000 < len(out.content[2].text.encode()) < 1_048_576
    assert out.content[3].text == note and out.structured_content is None
    assert note.startswith("[riskrank-jax gateway: the result was cut: ") and "(limits.max_result_bytes)" in note
    assert " of 50,001,1" in note and "left out: 1 text block, the structured content" in note
    wire = len(out.model_dump_json(by_alias=True, exclude_none=True).encode())
    assert wire < 1_048_576 + 200  # the blocks and the note within the limit; the result's own keys besides
    assert result.content[2].text is big  # the input is not changed

    small = types.CallToolResult(content=[types.TextContent(type="text", text="ok")], structured_content={"a": 1})
    assert cap_result(small, 1_048_576) == (small, None)


def test_cap_result_cuts_text_at_a_character_and_drops_blobs_whole():
    import mcp_types as types

    text = "😀" * 1000 + '"quoted"\n'
    out, note = cap_result(types.CallToolResult(content=[types.TextContent(type="text", text=text)]), 2500)
    kept = out.content[0].text
    assert text.startswith(kept) and kept and len(kept.encode()) <= 2500  # whole characters, valid UTF-8
    assert str_json_len(kept) + str_json_len(note) < 2500
    out, note = cap_result(types.CallToolResult(content=[
        types.ImageContent(type="image", data="A" * 5000, mime_type="image/png"),
        types.AudioContent(type="audio", data="B" * 5000, mime_type="audio/wav"),
        types.TextContent(type="text", text="still fits")]), 1000)
    assert [b.type for b in out.content] == ["text", "text"] and out.content[0].text == "still fits"
    assert "left out: 1 image block, 1 audio block" in note
    out, note = cap_result(types.CallToolResult(content=[types.TextContent(type="text", text="z" * 500)],
                                                is_error=True), 10)  # smaller than the note: the note alone
    assert [b.text for b in out.content] == [note] and out.is_error


# ---------------------------------------------------------------------------------------------- bounded reads


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """The highest RSS of this process while the block runs, sampled every millisecond."""

    def __enter__(self):
        self.before = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.growth = self.peak - self.before


WRITER = textwrap.dedent("""
    import sys
    out = sys.stdout.buffer
    out.write(b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"')
    for _ in range(50):
        out.write(b"x" * 1_000_000)
    out.write(b'"}]}}\\n{"jsonrpc":"2.0","id":8,"result":{"content":[]}}\\n')
    out.flush()
""")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="RSS is read from /proc")
def test_bounded_reader_drops_a_50_mb_line_with_bounded_memory():
    lines, dropped = [], []

    async def main():
        async with await anyio.open_process([sys.executable, "-c", WRITER]) as proc:
            async def deliver(data):
                lines.append(data)

            async def drop(d):
                dropped.append(d)

            with PeakRSS() as rss:
                await read_lines(lambda: proc.stdout.receive(65536), 1 << 20, deliver, drop)
            return rss

    rss = anyio.run(main)
    assert [d.id for d in dropped] == [7] and dropped[0].response and dropped[0].size == 50 * MB + 73
    assert "sent a message of more than 1,048,576 bytes (50,000,073 bytes" in dropped[0].describe("x")
    assert lines == [b'{"jsonrpc":"2.0","id":8,"result":{"content":[]}}']  # the next line passes
    assert rss.growth < 12 * MB, f"RSS grew by {rss.growth / MB:.1f} MB while reading a 50 MB line"


def test_dropped_messages_are_named_from_their_start_or_end():
    def named(head, tail=b""):
        d = name_message(head, tail, 10, 1)
        return d.id, d.response

    assert named(b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"text":"xx') == (5, True)
    assert named(b'{"result":{"content":[', b'x"}]},"jsonrpc":"2.0","id":"a7"}\r') == ("a7", True)  # TypeScript's order
    assert named(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', b'"id":3}}') == (None, False)
    assert named(b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{') == (4, False)  # a request
    assert named(b'{"jsonrpc":"2.0","error":{"code":1,"message":"', b'","id":9}}') == (None, True)  # nested id
    assert named(b'not json at all') == (None, False)


BIG_SERVER = textwrap.dedent('''
    import sys
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big")

    @server.tool()
    def big(n: int) -> str:
        """A text of n bytes."""
        return "x" * n

    @server.tool()
    def small() -> str:
        """A short text."""
        return "ok"

    if __name__ == "__main__":
        server.run("stdio")
''')


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="RSS is read from /proc")
def test_downstream_sdk_server_50_mb_result_fails_named_and_the_server_stays_up(tmp_path):
    script = tmp_path / "big_server.py"
    script.write_text(BIG_SERVER)
    limits = Limits(connect_timeout_s=30, call_timeout_s=60)

    async def main():
        ds = Downstream(ServerSpec("big", command=sys.executable, args=(str(script),)), limits)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ds.run)
            with anyio.fail_after(60):
                await ds.ready.wait()
                assert ds.state == "up", ds.error
                await ds.call("small", {})
                with PeakRSS() as rss:
                    with pytest.raises(DownstreamError) as e:
                        await ds.call("big", {"n": 50 * MB})  # text and structured content: 100 MB on one line
                after = await ds.call("small", {})
            tg.cancel_scope.cancel()
        return ds, rss, str(e.value), after

    ds, rss, error, after = anyio.run(main)
    assert error.startswith("server 'big' sent a message of more than 8,388,608 bytes (100,000,") and \
        "limits.max_message_bytes); dropped (the answer to the call to 'big')" in error
    assert after.content[0].text == "ok" and ds.state == "up" and ds.restarts == 0
    assert any("sent a message of more than" in w for w in ds.status()["warnings"])
    assert rss.growth < 30 * MB, f"RSS grew by {rss.growth / MB:.1f} MB for a 100 MB message"


# ---------------------------------------------------------------------------------------------- HTTP downstreams


def test_http_client_caps_json_bodies_and_gzip_bombs():
    async def bodies(scope, receive, send):
        if scope["type"] != "http":
            return
        await receive()
        small = b'{"ok": true}'
        if scope["path"] == "/big":
            body = b"[" + b"1," * (3 << 20) + b"1]"
            extra = [(b"content-length", str(len(body)).encode())]  # declared: refused before reading
        elif scope["path"] == "/bomb":
            body, extra = gzip.compress(b" " * (40 << 20), 9), [(b"content-encoding", b"gzip")]
        else:
            body, extra = gzip.compress(small), [(b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), *extra]})
        await send({"type": "http.response.body", "body": body})

    port = free_port()
    served = Served(bodies, "127.0.0.1", port)

    async def main():
        async with http_client({"X-Test": "1"}, max_message_bytes=1 << 20, label="tickets") as client:
            out = {}
            for path in ("big", "bomb", "ok"):
                try:
                    out[path] = (await client.get(f"http://127.0.0.1:{port}/{path}")).json()
                except httpx2.StreamError as e:
                    out[path] = str(e)
            return out

    try:
        out = anyio.run(main)
    finally:
        served.stop()
    assert out["big"].startswith("server 'tickets' sent a message of more than 1,048,576 bytes (6,291,459 bytes")
    assert out["bomb"].startswith("server 'tickets' sent a message of more than 1,048,576 bytes")  # cut while inflating
    assert out["ok"] == {"ok": True}


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
def test_http_downstream_result_over_the_limit_fails_named(json_response):
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tickets")

    @server.tool()
    def big(n: int) -> str:
        """A text of n bytes."""
        return "x" * n

    port = free_port()
    served = Served(server.streamable_http_app(json_response=json_response), "127.0.0.1", port)
    limits = Limits(connect_timeout_s=20, call_timeout_s=30, max_message_bytes=1 << 20)

    async def main():
        ds = Downstream(ServerSpec("tickets", url=f"http://127.0.0.1:{port}/mcp"), limits)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ds.run)
            with anyio.fail_after(40):
                await ds.ready.wait()
                assert ds.state == "up", ds.error
                with pytest.raises(DownstreamError) as e:
                    await ds.call("big", {"n": 3 * MB})
                fine = await ds.call("big", {"n": 1000})
            tg.cancel_scope.cancel()
        return ds, str(e.value), fine

    try:
        ds, error, fine = anyio.run(main)
    finally:
        served.stop()
    assert error.startswith("server 'tickets' sent a message of more than 1,048,576 bytes"), error
    assert "the call to 'big'" in error and fine.content[0].text == "x" * 1000 and ds.restarts == 0


def test_bodies_held_together_are_bounded_and_released():
    """Two requests whose bodies fit one by one but not together: the second gets 503 while the first is in
    progress, and passes once it is answered."""
    release, calls = anyio.Event(), []

    async def slow(scope, receive, send):
        calls.append((await receive())["body"])
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    guard = HttpGuard(slow, bind_host="127.0.0.1", port=8931, max_request_bytes=1000, max_buffered_bytes=1500)
    scope = {"type": "http", "scheme": "http", "headers": [(b"host", b"127.0.0.1:8931")]}

    async def request(body: bytes):
        sent, chunks = [], [{"type": "http.request", "body": body[:500], "more_body": True},
                            {"type": "http.request", "body": body[500:], "more_body": False}]

        async def receive():
            return chunks.pop(0) if chunks else await anyio.sleep_forever()

        async def send(message):
            sent.append(message)

        await guard(scope, receive, send)
        return sent[0]["status"], sent[-1]["body"]

    async def main():
        async with anyio.create_task_group() as tg:
            first = []
            tg.start_soon(lambda: _append(first, request(b"a" * 1000)))
            while not calls:
                await anyio.sleep(0.01)
            assert guard.buffered == 1000
            status, body = await request(b"b" * 1000)
            assert status == 503 and b"busy" in body and guard.buffered == 1000
            release.set()
        assert first == [(200, b"done")] and guard.buffered == 0
        assert (await request(b"c" * 1000))[0] == 200 and guard.buffered == 0

    async def _append(out, coro):
        out.append(await coro)

    anyio.run(main)
