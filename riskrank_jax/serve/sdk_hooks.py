"""Every private part of the official MCP SDK (``mcp``, pinned exactly in pyproject.toml) that the gateway relies
on, behind one function each; tests/test_sdk_hooks.py checks each against the installed SDK.

* `send_raw_tools_list` — one tools/list page as the server sent it, unvalidated (`ClientSession._stamp`,
  ``_dispatcher.send_raw_request``): a listing the SDK's strict model rejects is read leniently and vetted;
* `absorb_tool_listing` — tells the client session the vetted tools (`ClientSession._absorb_tool_listing`),
  as a strict listing would (output schemas, x-mcp-header maps);
* `publish_tools_changed` — tells the gateway's own clients that its tool list changed
  (`MCPServer._subscriptions`), for ``--expose filtered``;
* `TOOL_INPUT_SCHEMA_HOOK` — the name of `MCPServer._tool_input_schema`, which `serve.mcp_app.GatewayServer`
  overrides so that the SDK does not validate a filtered call against a schema of its own;
* the stdio client's parts that `serve.bounded_stdio` reuses around its own bounded reader (`stdio_spawn`,
  `stdio_parse_line`, `stdio_drain_stdout`, `stdio_stop`, `aclose_all`, `STDIO_WRITER_FLUSH_S`,
  `stdio_logger`), and the HTTP client's (`create_http_client`, `wrap_http_transports`,
  `content_decoder`: the SDK's httpx2 client, its transports, httpx2's decoders).

Why one module: an SDK upgrade that moves one of them breaks this module and its test, not the gateway
silently.
"""

from __future__ import annotations

import mcp_types as types
from httpx2._decoders import MultiDecoder
from mcp.client import stdio as sdk_stdio
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ToolsListChanged

TOOL_INPUT_SCHEMA_HOOK = "_tool_input_schema"


async def send_raw_tools_list(client, cursor: str | None) -> dict:
    """The raw result dict of one tools/list request on ``client`` (an `mcp.Client`), with the SDK's
    per-revision headers and fields stamped as its own ``send_request`` adds them."""
    session = client.session
    request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict = {}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)


def absorb_tool_listing(client, tools: list[dict]) -> None:
    """Register ``tools`` (MCP tool objects, already vetted) with ``client``'s session as one complete listing."""
    client.session._absorb_tool_listing(
        types.ListToolsResult(tools=[types.Tool.model_validate(t, by_name=False) for t in tools]), complete=True)


async def publish_tools_changed(server) -> None:
    """Send ``notifications/tools/list_changed`` to the clients of ``server`` (an `MCPServer`) that listen."""
    await server._subscriptions.publish(ToolsListChanged())


# ---------------------------------------------------------------------------------------------- stdio client


def stdio_logger():
    """The SDK stdio client's logger (its messages about a failing server stay where the SDK puts them)."""
    return sdk_stdio.logger


STDIO_WRITER_FLUSH_S = 0.5  # checked against the SDK's _WRITER_FLUSH_TIMEOUT by tests/test_sdk_hooks.py


async def stdio_spawn(server, errlog):
    """The server process of ``server`` (a StdioServerParameters) started as the SDK's stdio_client starts it:
    the platform's executable, the SDK's default environment plus ``server.env``, stderr to ``errlog``."""
    command = await sdk_stdio._get_executable_command(server.command)
    return await sdk_stdio._create_platform_compatible_process(
        command=command, args=server.args, env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog, cwd=server.cwd)


def stdio_parse_line(line: str):
    """One stdout line as the SDK parses it: a SessionMessage, or the parse error as a value."""
    return sdk_stdio._parse_line(line)


async def stdio_drain_stdout(process) -> None:
    """Read and discard what is left on the server's stdout (so it never blocks on a full pipe)."""
    await sdk_stdio._drain_stdout(process)


async def stdio_stop(process) -> None:
    """The SDK's stop sequence: close stdin, wait its grace period, then kill the process tree."""
    await sdk_stdio._stop_server_process(process)


async def aclose_all(*streams) -> None:
    """Close every stream, as the SDK's stdio client does at its end."""
    await sdk_stdio._aclose_all(*streams)


# ---------------------------------------------------------------------------------------------- HTTP client


def create_http_client(headers: dict[str, str] | None = None):
    """The SDK's httpx2 client for streamable HTTP (its timeouts, proxies from the environment)."""
    return create_mcp_http_client(headers=headers)


def wrap_http_transports(client, wrap) -> None:
    """Replace each transport of an httpx2 ``client`` (its default and every mounted one) by ``wrap(transport)``."""
    client._transport = wrap(client._transport)
    client._mounts = {k: None if t is None else wrap(t) for k, t in client._mounts.items()}


def content_decoder(codings: list[str]):
    """httpx2's decoder for a list of Content-Encoding values (gzip, deflate, br, ...), applied in order."""
    return MultiDecoder(codings)


__all__ = ["send_raw_tools_list", "absorb_tool_listing", "publish_tools_changed", "TOOL_INPUT_SCHEMA_HOOK",
           "stdio_logger", "STDIO_WRITER_FLUSH_S", "stdio_spawn", "stdio_parse_line", "stdio_drain_stdout",
           "stdio_stop", "aclose_all", "create_http_client", "wrap_http_transports", "content_decoder"]
