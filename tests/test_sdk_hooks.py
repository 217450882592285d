"""serve.sdk_hooks: each private part of the MCP SDK the gateway relies on, checked against the installed SDK
with a real in-memory MCPServer and the SDK's own Client (an SDK upgrade that moves one fails here, by name)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from riskrank_jax.serve import sdk_hooks

ROOT = Path(__file__).resolve().parent.parent


def _server(**kwargs) -> MCPServer:
    server = MCPServer("hooks", **kwargs)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    return server


def test_the_sdk_is_the_version_pinned_exactly():
    pin = re.search(r'"mcp==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin is not None, "pyproject.toml must pin mcp exactly (mcp==X.Y.Z)"
    assert importlib.metadata.version("mcp") == pin.group(1)


def test_raw_tools_list_returns_the_page_as_sent_and_absorb_registers_it():
    async def run():
        async with Client(_server()) as client:
            raw = await sdk_hooks.send_raw_tools_list(client, None)
            assert [t["name"] for t in raw["tools"]] == ["echo"]
            assert raw["tools"][0]["inputSchema"]["required"] == ["text"]
            sdk_hooks.absorb_tool_listing(client, raw["tools"])  # raises if the hook moved
            result = await client.call_tool("echo", {"text": "hi"})
            assert result.content[0].text == "echo: hi"

    anyio.run(run)


def test_publish_tools_changed_reaches_a_listening_client():
    server = _server()

    async def run():
        async with Client(server) as client:
            async with client.listen(tools_list_changed=True) as sub:
                got = []

                async def first():
                    async for item in sub:
                        got.append(item)
                        return

                async with anyio.create_task_group() as tg:
                    tg.start_soon(first)
                    await anyio.sleep(0.1)
                    await sdk_hooks.publish_tools_changed(server)
                    with anyio.fail_after(5):
                        while not got:
                            await anyio.sleep(0.02)
                assert got

    anyio.run(run)


def test_the_tool_input_schema_hook_is_what_the_sdk_reads_a_tools_schema_from():
    """GatewayServer (--expose filtered) overrides this hook so the SDK's streamable-HTTP transport does not look
    a downstream tool's schema up in its own tool manager: the override must be what the transport calls."""
    assert callable(getattr(MCPServer, sdk_hooks.TOOL_INPUT_SCHEMA_HOOK))

    class NoSchema(MCPServer):
        def _tool_input_schema(self, name):
            return {"overridden": name}

    server = _server()
    assert getattr(server, sdk_hooks.TOOL_INPUT_SCHEMA_HOOK)("echo")["required"] == ["text"]
    lowlevel = server._lowlevel_server
    assert lowlevel.get_tool_input_schema("echo")["required"] == ["text"]
    assert NoSchema("hooks")._lowlevel_server.get_tool_input_schema("x") == {"overridden": "x"}


def test_the_stdio_client_parts_spawn_parse_drain_and_stop_a_real_process():
    """The parts serve.bounded_stdio reuses around its own reader, on a real child process."""
    import sys

    from mcp.client import stdio
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.message import SessionMessage

    assert sdk_hooks.STDIO_WRITER_FLUSH_S == stdio._WRITER_FLUSH_TIMEOUT
    assert sdk_hooks.stdio_logger() is stdio.logger
    ok = sdk_hooks.stdio_parse_line('{"jsonrpc": "2.0", "id": 1, "result": {}}')
    assert isinstance(ok, SessionMessage) and ok.message.id == 1
    assert isinstance(sdk_hooks.stdio_parse_line("not json"), Exception)

    async def drained_after_stop():
        async def stop_soon(p):
            await anyio.sleep(0.5)
            await sdk_hooks.stdio_stop(p)

        import tempfile

        server = StdioServerParameters(command=sys.executable, args=[
            "-c", "import sys, time; print('x' * 100000); sys.stdout.flush(); time.sleep(60)"])
        with tempfile.TemporaryFile("w+") as err:
            process = await sdk_hooks.stdio_spawn(server, err)
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_soon, process)
                with anyio.fail_after(20):
                    await sdk_hooks.stdio_drain_stdout(process)
        return process

    p = anyio.run(drained_after_stop)
    assert p.returncode is not None  # the drain read 100 kB until the SDK's stop sequence ended the child
    a, b = anyio.create_memory_object_stream(1)
    anyio.run(sdk_hooks.aclose_all, a, b)
    with pytest.raises(anyio.ClosedResourceError):
        a.send_nowait(1)


def test_the_http_client_parts_build_wrap_and_decode():
    import gzip

    client = sdk_hooks.create_http_client({"Authorization": "Bearer t"})
    assert client.headers["authorization"] == "Bearer t"
    wrapped = []
    sdk_hooks.wrap_http_transports(client, lambda t: wrapped.append(t) or ("wrapped", t))
    assert client._transport[0] == "wrapped" and wrapped
    decoder = sdk_hooks.content_decoder(["gzip"])
    out = b"".join(decoder.decode(gzip.compress(b"hello " * 1000))) + b"".join(decoder.flush())
    assert out == b"hello " * 1000
