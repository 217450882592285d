"""Every private part of the official MCP SDK (``mcp``, pinned exactly in pyproject.toml) that the gateway relies
on, behind one function each; tests/test_sdk_hooks.py checks each against the installed SDK.

* `send_raw_tools_list` — one tools/list page as the server sent it, unvalidated (`ClientSession._stamp`,
  ``_dispatcher.send_raw_request``): a listing the SDK's strict model rejects is read leniently and vetted;
* `absorb_tool_listing` — tells the client session the vetted tools (`ClientSession._absorb_tool_listing`),
  as a strict listing would (output schemas, x-mcp-header maps);
* `publish_tools_changed` — tells the gateway's own clients that its tool list changed
  (`MCPServer._subscriptions`), for ``--expose filtered``;
* `TOOL_INPUT_SCHEMA_HOOK` — the name of `MCPServer._tool_input_schema`, which `serve.mcp_app.GatewayServer`
  overrides so that the SDK does not validate a filtered call against a schema of its own.

Why one module: an SDK upgrade that moves one of them breaks one function and its test, not the gateway
silently.
"""

from __future__ import annotations

TOOL_INPUT_SCHEMA_HOOK = "_tool_input_schema"


async def send_raw_tools_list(client, cursor: str | None) -> dict:
    """The raw result dict of one tools/list request on ``client`` (an `mcp.Client`), with the SDK's
    per-revision headers and fields stamped as its own ``send_request`` adds them."""
    import mcp_types as types

    session = client.session
    request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict = {}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)


def absorb_tool_listing(client, tools: list[dict]) -> None:
    """Register ``tools`` (MCP tool objects, already vetted) with ``client``'s session as one complete listing."""
    import mcp_types as types

    client.session._absorb_tool_listing(
        types.ListToolsResult(tools=[types.Tool.model_validate(t, by_name=False) for t in tools]), complete=True)


async def publish_tools_changed(server) -> None:
    """Send ``notifications/tools/list_changed`` to the clients of ``server`` (an `MCPServer`) that listen."""
    from mcp.shared.subscriptions import ToolsListChanged

    await server._subscriptions.publish(ToolsListChanged())


__all__ = ["send_raw_tools_list", "absorb_tool_listing", "publish_tools_changed", "TOOL_INPUT_SCHEMA_HOOK"]
