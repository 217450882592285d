"""One supervised MCP client per downstream server: connect, list every page of tools, watch for
``list_changed``, forward calls, and restart a server that fails or dies, with exponential backoff.

    ds = Downstream(spec, on_tools=catalog_changed)
    task_group.start_soon(ds.run)          # runs until cancelled
    await ds.ready.wait()                  # set after the first attempt (up or failed)
    result = await ds.call("read_file", {"path": "notes.txt"})

States: "starting", "up", "down" (the last error is kept, and the next attempt is ``retry_in`` seconds
away). A change of a server's tools (first listing, ``list_changed``, a restart) calls ``on_tools(ds)``.

Why one task per server: one server that fails to start, or dies, never stops the others from serving.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from riskrank_jax.serve.config import ServerSpec

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
PING_EVERY_S = 2.0  # liveness check of servers on a protocol without subscriptions/listen
LIST_PAGE_CAP = 1000
CONNECT_TIMEOUT_S = 30.0


class DownstreamError(RuntimeError):
    """A call that could not reach its downstream server (not running, died, timed out)."""


def log(message: str) -> None:
    """One line on stderr (stdout carries the MCP protocol under stdio)."""
    print(f"riskrank-jax serve: {message}", file=sys.stderr, flush=True)


def tool_dict(tool) -> dict:
    """An `mcp_types.Tool` as the MCP tools/list JSON object (camelCase keys, nulls left out)."""
    return tool.model_dump(by_alias=True, exclude_none=True, mode="json")


class Downstream:
    """A downstream MCP server and the supervised client connected to it (see the module docstring)."""

    def __init__(self, spec: ServerSpec, on_tools: Callable[["Downstream"], Awaitable[None]] | None = None):
        self.spec = spec
        self.name = spec.name
        self.on_tools = on_tools
        self.state = "starting"
        self.error: str | None = None
        self.tools: list[dict] = []
        self.restarts = 0
        self.protocol: str | None = None
        self.retry_at: float | None = None
        self.ready = anyio.Event()
        self._client = None
        self._changed = anyio.Event()

    # ------------------------------------------------------------------------------------ connection
    @asynccontextmanager
    async def _connect(self):
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        async def on_message(message):  # legacy protocol: list_changed arrives as a notification
            root = getattr(message, "root", message)
            if getattr(root, "method", None) == "notifications/tools/list_changed":
                self._changed.set()

        if self.spec.transport == "stdio":
            target = StdioServerParameters(command=self.spec.command, args=list(self.spec.args),
                                           env=dict(self.spec.env) or None, cwd=self.spec.cwd)
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            target = streamable_http_client(self.spec.url,
                                            http_client=create_mcp_http_client(headers=dict(self.spec.headers)))
        async with Client(target, message_handler=on_message, cache=None, mode=self.spec.protocol) as client:
            yield client

    async def _list_all(self, client) -> list[dict]:
        tools, cursor = [], None
        for _ in range(LIST_PAGE_CAP):
            page = await client.list_tools(cursor=cursor)
            tools.extend(tool_dict(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise DownstreamError(f"server '{self.name}' returned more than {LIST_PAGE_CAP} pages of tools")

    async def _refresh(self, client) -> None:
        self.tools = await self._list_all(client)
        if self.on_tools is not None:
            await self.on_tools(self)

    async def _watch(self, client) -> None:
        """Return when the connection ends; re-list on every list_changed meanwhile."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _ in sub:
                    await self._refresh(client)
            raise DownstreamError("closed the connection")
        except ListenNotSupportedError:
            pass
        while True:  # an older protocol revision: notifications through the message handler, liveness by ping
            with anyio.move_on_after(PING_EVERY_S):
                await self._changed.wait()
            if self._changed.is_set():
                self._changed = anyio.Event()
                await self._refresh(client)
            with anyio.fail_after(CONNECT_TIMEOUT_S), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK warns that ping is gone from the newest revision
                await client.send_ping()

    async def run(self) -> None:
        """Connect, serve, and reconnect after a failure, until cancelled."""
        delay = BACKOFF_FIRST_S
        while True:
            try:
                async with self._connect() as client:
                    with anyio.fail_after(CONNECT_TIMEOUT_S):
                        tools = await self._list_all(client)
                    self._client, self.state, self.error, self.retry_at = client, "up", None, None
                    self.protocol = client.protocol_version
                    self.tools = tools
                    log(f"server '{self.name}' up ({len(tools)} tools, protocol {self.protocol})")
                    if self.on_tools is not None:
                        await self.on_tools(self)
                    self.ready.set()
                    delay = BACKOFF_FIRST_S
                    await self._watch(client)
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as e:  # noqa: BLE001 - any failure of one server is reported, then retried
                self.error = _describe(e)
            self._client = None
            self.state = "down"
            self.restarts += 1
            self.retry_at = time.time() + delay
            log(f"server '{self.name}' ({self.spec.where}) is down: {self.error}; restarting in {delay:.1f} s")
            self.ready.set()
            await anyio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
            self.state = "starting"

    # ------------------------------------------------------------------------------------ calls
    async def call(self, tool: str, arguments: dict, timeout: float | None = None):
        """The downstream `CallToolResult`, unchanged; DownstreamError when the server cannot be reached."""
        client = self._client
        if client is None or self.state != "up":
            why = f": {self.error}" if self.error else ""
            raise DownstreamError(f"server '{self.name}' is not running ({self.state}{why}); the gateway is "
                                  "restarting it")
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as e:  # noqa: BLE001
            raise DownstreamError(f"server '{self.name}' failed during the call: {_describe(e)}") from e

    def status(self) -> dict:
        out = {"name": self.name, "transport": self.spec.transport, "state": self.state, "tools": len(self.tools),
               "restarts": self.restarts, "protocol": self.protocol}
        if self.error:
            out["error"] = self.error
        if self.retry_at is not None:
            out["retry_in_s"] = round(max(0.0, self.retry_at - time.time()), 1)
        return out


def _describe(e: BaseException) -> str:
    """A one-line description of an exception (exception groups: their first leaf)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


__all__ = ["Downstream", "DownstreamError", "tool_dict", "log"]
