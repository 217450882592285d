"""One supervised MCP client per downstream server: connect, list every page of tools (leniently), watch for
``list_changed``, forward calls, and restart a server that fails or dies, with a backoff that settles.

    ds = Downstream(spec, limits, on_tools=catalog_changed)
    task_group.start_soon(ds.run)          # runs until cancelled
    await ds.ready.wait()                  # set after the first attempt (up or failed)
    result = await ds.call("read_file", {"path": "notes.txt"})

States: "starting", "up", "down" (the last error is kept, and the next attempt is ``retry_in`` seconds
away). A change of a server's tools (first listing, ``list_changed``, a restart with other tools) calls
``on_tools(ds)``. The tools of a server that went down stay in ``tools`` (search keeps them, marked
unavailable) until it lists again.

What a real server may do, and what happens:

* no ``subscriptions/listen`` ("Method not found"), or a protocol revision without it: list_changed by
  notification, liveness by ping (an error answer to ping still proves the server alive);
* the ``server/discover`` probe works but the connection then fails at the protocol level: the next attempt
  uses the initialize handshake by itself (``protocol`` "auto");
* invalid tools in ``tools/list``: the valid ones are kept, each invalid one is named in ``problems`` and on
  stderr; an input schema that lacks only ``"type": "object"`` (or is missing) is repaired with a warning;
  one that cannot be read at all leaves the tool listed but not callable (``not_callable``); a name that
  breaks MCP's tool-name rules (`serve.identity`) leaves the tool out, reported with its name escaped;
* duplicate names (the first is kept), more tools than ``max_tools_per_server``, descriptions longer than
  ``max_description_chars``: reported, then cut;
* no answer to the handshake, a ping or a call within its timeout: a named error (a call's timeout fails
  only that call); lines on stdout that are not JSON-RPC: counted and reported, the connection goes on;
* ``list_changed`` in a loop: re-listed at most every ``relist_min_interval_s``, the catalog rebuilt only
  when the tools really changed, and the loop reported.

Why one task per server: one server that fails to start, or dies, never stops the others from serving.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT
from pydantic import ValidationError

from riskrank_jax.serve.config import Limits, ServerSpec
from riskrank_jax.serve.bounded_stdio import http_client as bounded_http_client
from riskrank_jax.serve.bounded_stdio import is_too_large, sse_too_large
from riskrank_jax.serve.bounded_stdio import stdio_client as bounded_stdio_client
from riskrank_jax.serve.identity import shown, tool_name_problem
from riskrank_jax.serve.operate import log_line, stderr_sink, write_line
from riskrank_jax.serve.sdk_hooks import absorb_tool_listing, send_raw_tools_list

LIST_PAGE_CAP = 1000
LOOP_WINDOW_S = 10.0  # list_changed more often than LOOP_COUNT times in this window is reported as a loop
LOOP_COUNT = 20
MAX_PROBLEMS_LOGGED = 20  # per listing; list_servers has them all


class DownstreamError(RuntimeError):
    """A call that could not reach its downstream server (not running, died, timed out)."""


def log(message: str, level: str = "info", **fields) -> None:
    """One line on stderr (stdout carries the MCP protocol under stdio): text, or with runtime.log_format "json"
    a JSON object with ``level`` and ``fields`` (`serve.operate.log_line`)."""
    write_line(log_line(message, level, fields))


def tool_dict(tool) -> dict:
    """An `mcp_types.Tool` as the MCP tools/list JSON object (camelCase keys, nulls left out)."""
    return tool.model_dump(by_alias=True, exclude_none=True, mode="json")


class _NotJSONRPC(logging.Filter):
    """Drops the SDK's traceback for each stdout line that is not JSON-RPC: the gateway counts and names
    those per server instead."""

    def filter(self, record):
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


logging.getLogger("mcp.client.stdio").addFilter(_NotJSONRPC())


# ---------------------------------------------------------------------------------------------- listing


def vet_tools(raw_tools, limits: Limits) -> tuple[list[dict], list[dict], dict[str, str]]:
    """(tools kept, problems, not_callable) for a server's raw tools/list entries.

    problems: ``{"tool", "problem", "action"}`` per tool that was skipped, repaired or cut; not_callable:
    name -> why, for tools listed without a readable input schema (search shows them, calls are refused).
    """
    kept, problems, not_callable, seen = [], [], {}, set()

    def problem(name, what, action):
        problems.append({"tool": name, "problem": what, "action": action})

    for j, t in enumerate(raw_tools):
        if not isinstance(t, dict):
            problem(f"#{j + 1}", f"a tools/list entry is a JSON {type(t).__name__}, not an object", "skipped")
            continue
        name = t.get("name")
        if not isinstance(name, str) or not name.strip():
            problem(f"#{j + 1}", f"no tool name (got a JSON {type(name).__name__})", "skipped")
            continue
        if (why := tool_name_problem(name)) is not None:  # never callable, under any spelling
            problem(shown(name), why, "left out, never callable")
            continue
        if name in seen:
            problem(name, "duplicate name: the server lists it more than once", "skipped; the first one is kept")
            continue
        t = _repaired(name, t, limits, problem, not_callable)
        try:
            tool = types.Tool.model_validate(t, by_name=False)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ())) or "the tool"
            problem(name, f"{where}: {err.get('msg', 'invalid')}", "skipped")
            not_callable.pop(name, None)
            continue
        seen.add(name)
        kept.append(tool_dict(tool))
    if len(kept) > limits.max_tools_per_server:
        problem(f"{len(kept) - limits.max_tools_per_server} tools", f"the server lists {len(kept):,} tools",
                f"the first {limits.max_tools_per_server:,} are kept (limits.max_tools_per_server)")
        for t in kept[limits.max_tools_per_server:]:
            not_callable.pop(t["name"], None)
        kept = kept[:limits.max_tools_per_server]
    return kept, problems, not_callable


def _repaired(name: str, t: dict, limits: Limits, problem, not_callable: dict) -> dict:
    """A copy of tool ``t`` with its input schema repaired (or replaced, leaving the tool not callable) and
    its description fixed or cut; each change reported through ``problem(name, what, action)``."""
    t = dict(t)
    schema = t.get("inputSchema")
    if schema is None:
        problem(name, "no inputSchema", 'repaired: {"type": "object"} (no declared arguments)')
        t["inputSchema"] = {"type": "object"}
    elif isinstance(schema, dict) and "type" not in schema:
        problem(name, 'inputSchema has no "type": "object"', 'repaired: "type": "object" added')
        t["inputSchema"] = {"type": "object", **schema}
    elif (what := _unreadable(schema)) is not None:
        problem(name, what, "listed, not callable")
        not_callable[name] = f"its input schema cannot be read ({what})"
        t["inputSchema"] = {"type": "object"}
    desc = t.get("description")
    if desc is not None and not isinstance(desc, str):
        problem(name, f"description is a JSON {type(desc).__name__}, not a string", "description left out")
        t.pop("description")
    elif isinstance(desc, str) and len(desc) > limits.max_description_chars:
        problem(name, f"description of {len(desc):,} characters",
                f"cut to the first {limits.max_description_chars:,} (limits.max_description_chars)")
        t["description"] = desc[:limits.max_description_chars]
    return t


def _unreadable(schema) -> str | None:
    """What makes an input schema unusable for a call (None: it is an object schema the gateway can pass on)."""
    if not isinstance(schema, dict):
        return f"inputSchema is a JSON {type(schema).__name__}"
    if schema.get("type") != "object":
        return f'inputSchema has "type": {json.dumps(schema.get("type"))}, not "object"'
    if "properties" in schema and not isinstance(schema["properties"], dict):
        return f"inputSchema.properties is a JSON {type(schema['properties']).__name__}, not an object"
    req = schema.get("required", [])
    if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
        return "inputSchema.required is not a list of property names"
    return None


async def _raw_list_page(client, cursor: str | None) -> tuple[list, str | None]:
    """One tools/list page as the server sent it (no validation), for a listing the SDK's strict model
    rejects."""
    raw = await send_raw_tools_list(client, cursor)
    tools = raw.get("tools") if isinstance(raw, dict) else None
    if not isinstance(tools, list):
        raise DownstreamError(f"tools/list answered without a list of tools ({str(raw)[:120]})")
    nxt = raw.get("nextCursor")
    return tools, nxt if isinstance(nxt, str) and nxt else None


def _absorb(client, tools: list[dict]) -> None:
    """Tell the SDK session the vetted tools (output schemas, x-mcp-header maps), as a strict listing would."""
    try:
        absorb_tool_listing(client, tools)
    except Exception as e:  # noqa: BLE001 - an SDK without this hook still calls the tools, unvalidated
        log(f"could not register the vetted tools with the MCP client ({_describe(e)})")


# ---------------------------------------------------------------------------------------------- the server


class Downstream:
    """A downstream MCP server and the supervised client connected to it (see the module docstring)."""

    def __init__(self, spec: ServerSpec, limits: Limits | None = None,
                 on_tools: Callable[["Downstream"], Awaitable[None]] | None = None):
        self.spec = spec
        self.name = spec.name
        self.limits = dataclasses.replace(limits or Limits(), **dict(spec.limits))
        self.on_tools = on_tools
        self.state = "starting"
        self.error: str | None = None
        self.last_error: str | None = None
        self.tools: list[dict] = []
        self.problems: list[dict] = []
        self.not_callable: dict[str, str] = {}
        self.warnings: list[str] = []
        self._warned: set[str] = set()
        self.restarts = 0
        self.mode = spec.protocol
        self.protocol: str | None = None
        self.watch: str | None = None
        self.retry_at: float | None = None
        self.up_since: float | None = None
        self.list_changed = 0
        self.stdout_garbage = 0
        self.pings = 0  # liveness checks answered (any answer counts)
        self.metrics = None  # serve.operate.GatewayMetrics: each call's latency (set by the gateway)
        self.delays: deque[float] = deque(maxlen=64)  # the restart delays used, latest last
        self.ready = anyio.Event()
        self._client = None
        self._changed = anyio.Event()
        self._recent_changes: deque[float] = deque(maxlen=LOOP_COUNT)
        self._last_relist = 0.0
        self._lost = False
        self._by_name: tuple[list, dict] = (None, {})  # (the tools list indexed, name -> tool)

    def warn(self, text: str, kind: str | None = None) -> None:
        """A server-level warning: on stderr once per kind (default: the text), and in list_servers."""
        kind = kind or text
        if kind not in self._warned:
            self._warned.add(kind)
            self.warnings.append(text)
            log(f"server '{self.name}': {text}")

    # ------------------------------------------------------------------------------------ connection
    def _on_change_notice(self) -> None:
        self.list_changed += 1
        now = time.monotonic()
        self._recent_changes.append(now)
        if len(self._recent_changes) == LOOP_COUNT and now - self._recent_changes[0] < LOOP_WINDOW_S:
            self.warn(f"sends notifications/tools/list_changed in a loop ({LOOP_COUNT} in "
                      f"{now - self._recent_changes[0]:.1f} s); re-listing at most every "
                      f"{self.limits.relist_min_interval_s:g} s", kind="list_changed loop")
        self._changed.set()

    @asynccontextmanager
    async def _connect(self, mode: str):
        async def on_message(message):
            if isinstance(message, Exception):  # a line on stdout that is not JSON-RPC, or a transport fault
                self.stdout_garbage += 1
                if self.stdout_garbage == 1:
                    self.warn(f"wrote something that is not JSON-RPC ({_describe(message)}); ignored")
                return
            root = getattr(message, "root", message)
            if getattr(root, "method", None) == "notifications/tools/list_changed":
                self._on_change_notice()

        def on_dropped(dropped):  # a message over limits.max_message_bytes (serve.bounded_stdio)
            text = dropped.what + ("" if dropped.response and dropped.id is not None else
                                   " (not an answer the gateway could name: nothing failed at once)")
            if "message too large" in self._warned:
                log(f"server '{self.name}': {text}")
            else:
                self.warn(text, kind="message too large")

        # bounded transports: one message never holds more than limits.max_message_bytes (serve.bounded_stdio)
        cap = self.limits.max_message_bytes
        if self.spec.transport == "stdio":
            target = bounded_stdio_client(
                StdioServerParameters(command=self.spec.command, args=list(self.spec.args),
                                      env=dict(self.spec.env) or None, cwd=self.spec.cwd),
                errlog=stderr_sink(self.name),  # text logs: stderr as it is now; json: relayed as JSON
                max_message_bytes=cap, label=self.name, on_dropped=on_dropped)
        else:
            target = streamable_http_client(
                self.spec.url, max_sse_event_size=cap,
                http_client=bounded_http_client(dict(self.spec.headers), max_message_bytes=cap, label=self.name))
        async with Client(target, message_handler=on_message, cache=None, mode=mode) as client:
            yield client

    async def _list_all(self, client) -> tuple[list[dict], list[dict], dict[str, str]]:
        raw, cursor, strict = [], None, True
        for _ in range(LIST_PAGE_CAP):
            if strict:
                try:
                    page = await client.list_tools(cursor=cursor)
                    raw.extend(tool_dict(t) for t in page.tools)
                    cursor = page.next_cursor
                except ValidationError:
                    strict = False  # this page again, as sent: vet_tools keeps the valid tools
            if not strict:
                tools, cursor = await _raw_list_page(client, cursor)
                raw.extend(tools)
            if not cursor:
                break
        else:
            raise DownstreamError(f"returned more than {LIST_PAGE_CAP} pages of tools")
        tools, problems, not_callable = vet_tools(raw, self.limits)
        if not strict:
            _absorb(client, tools)
        return tools, problems, not_callable

    def _report(self, problems: list[dict]) -> None:
        for p in problems[:MAX_PROBLEMS_LOGGED]:
            log(f"server '{self.name}', tool '{p['tool']}': {p['problem']}; {p['action']}")
        if len(problems) > MAX_PROBLEMS_LOGGED:
            log(f"server '{self.name}': {len(problems) - MAX_PROBLEMS_LOGGED} more tool problems (list_servers "
                "has them all)")

    async def _refresh(self, client) -> None:
        wait = self._last_relist + self.limits.relist_min_interval_s - time.monotonic()
        if wait > 0:
            await anyio.sleep(wait)  # notices arriving meanwhile fold into this one listing
        self._changed = anyio.Event()
        self._last_relist = time.monotonic()
        with anyio.move_on_after(self.limits.connect_timeout_s) as scope:
            tools, problems, not_callable = await self._list_all(client)
        if scope.cancelled_caught:
            raise DownstreamError(f"did not answer tools/list (after list_changed) within "
                                  f"{self.limits.connect_timeout_s:g} s (limits.connect_timeout_s)")
        if problems != self.problems:
            self._report(problems)
        changed = tools != self.tools or not_callable != self.not_callable
        self.tools, self.problems, self.not_callable = tools, problems, not_callable
        if changed and self.on_tools is not None:
            await self.on_tools(self)

    async def _ping(self, client) -> None:
        """Liveness: any answer (even an error such as "Method not found") proves the server alive."""
        try:
            with anyio.fail_after(self.limits.connect_timeout_s), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK warns that ping is gone from the newest revision
                await client.send_ping()
        except TimeoutError:
            raise DownstreamError(f"did not answer a ping within {self.limits.connect_timeout_s:g} s") from None
        except MCPError as e:
            if e.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise
        self.pings += 1

    async def _watch(self, client) -> None:
        """Return (or raise) when the connection ends; re-list on every list_changed meanwhile."""
        try:
            async with client.listen(tools_list_changed=True) as sub:
                self.watch = "subscriptions/listen"
                async for _ in sub:
                    self._on_change_notice()
                    await self._refresh(client)
            raise DownstreamError("ended its subscriptions/listen stream")
        except ListenNotSupportedError:
            pass
        except MCPError as e:
            if e.code != METHOD_NOT_FOUND:
                raise
            log(f"server '{self.name}' has no subscriptions/listen (\"{e.message}\"); watching it by "
                "notifications and ping")
        self.watch = "notifications + ping"
        while True:
            with anyio.move_on_after(self.limits.ping_every_s):
                await self._changed.wait()
            if self._lost:
                raise DownstreamError("closed the connection in the middle of a call")
            if self._changed.is_set():
                await self._refresh(client)
            await self._ping(client)

    async def _session(self) -> None:
        """One connection: handshake and first listing within connect_timeout_s, then serve until it ends."""
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.limits.connect_timeout_s)
        with scope:
            async with self._connect(self.mode) as client:
                tools, problems, not_callable = await self._list_all(client)
                scope.deadline = math.inf
                self._client, self.state, self.error, self.retry_at = client, "up", None, None
                self.protocol = client.protocol_version
                self.up_since = time.monotonic()
                changed = (tools, not_callable) != (self.tools, self.not_callable) or self.restarts == 0
                self.tools, self.problems, self.not_callable = tools, problems, not_callable
                self._last_relist = time.monotonic()
                log(f"server '{self.name}' up ({len(tools)} tools, protocol {self.protocol}"
                    + (f", restart {self.restarts}" if self.restarts else "") + ")")
                self._report(problems)
                if changed and self.on_tools is not None:
                    await self.on_tools(self)
                self.ready.set()
                await self._watch(client)
        if scope.cancelled_caught:
            raise DownstreamError(f"no answer to the handshake and tools/list within "
                                  f"{self.limits.connect_timeout_s:g} s (limits.connect_timeout_s)")

    async def run(self) -> None:
        """Connect, serve, and reconnect after a failure, until cancelled."""
        L = self.limits
        delay = L.backoff_first_s
        while True:
            self.up_since, self._lost = None, False
            try:
                await self._session()
                self.error = "closed the connection"
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as e:  # noqa: BLE001 - any failure of one server is reported, then retried
                self.error = _describe(e)
                if self.mode == "auto" and self.up_since is None and _protocol_failure(e):
                    self.mode = "legacy"
                    self.warn(f"failed on the newest protocol revision ({self.error}); connecting with the "
                              "initialize handshake from now on")
            self._client = None
            self.last_error = self.error
            if self.up_since is not None and time.monotonic() - self.up_since >= L.stable_after_s:
                delay = L.backoff_first_s  # it stayed up a while: a fresh failure, not a crash loop
            self.state = "down"
            self.restarts += 1
            self.delays.append(delay)
            self.retry_at = time.time() + delay
            log(f"server '{self.name}' ({self.spec.where}) is down: {self.error}; restart {self.restarts} in "
                f"{delay:.1f} s")
            self.ready.set()
            await anyio.sleep(delay)  # its tools stay in the catalog meanwhile, marked unavailable
            delay = min(delay * 2, L.backoff_max_s)
            self.state = "starting"

    # ------------------------------------------------------------------------------------ calls
    def listed(self, name: str) -> dict | None:
        """The tool ``name`` as the server lists it now (its latest listing), or None."""
        tools = self.tools
        if self._by_name[0] is not tools:
            self._by_name = (tools, {t["name"]: t for t in tools})
        return self._by_name[1].get(name)

    def unavailable(self) -> str | None:
        """Why a call to this server cannot go through now (None: it is up)."""
        if self._client is not None and self.state == "up":
            return None
        why = f": {shown(self.error, 160)}" if self.error else ""  # the error's text may be the server's
        return (f"server '{self.name}' is not running ({self.state}{why}); the gateway is restarting it "
                f"(restart {self.restarts})")

    async def call(self, tool: str, arguments: dict, progress=None):
        """The downstream `CallToolResult`, unchanged; DownstreamError when the server cannot be reached,
        fails during the call, or does not answer within limits.call_timeout_s. progress: an async callback
        (progress, total, message) for the server's progress notifications."""
        if self.metrics is None:
            return await self._call(tool, arguments, progress)
        with self.metrics.downstream_call(self.name):
            return await self._call(tool, arguments, progress)

    async def _call(self, tool: str, arguments: dict, progress=None):
        client, why = self._client, self.unavailable()
        if why is not None:
            raise DownstreamError(why)
        if tool in self.not_callable:
            raise DownstreamError(f"'{tool}' of server '{self.name}' is not callable: {self.not_callable[tool]}")
        t = self.limits.call_timeout_s
        try:
            with anyio.move_on_after(t):  # a cancelled call sends the server notifications/cancelled
                return await client.call_tool(tool, arguments, progress_callback=progress)
        except anyio.get_cancelled_exc_class():
            raise
        except MCPError as e:
            too_large = f"server '{self.name}' sent a message of more than "
            if is_too_large(e) or too_large in e.message:  # dropped unread (serve.bounded_stdio): stdio, HTTP body
                raise DownstreamError(f"{e.message[e.message.find(too_large):]} (the answer to the call to "
                                      f"'{tool}')") from e
            if sse_too_large(e.message):  # an SSE event over max_sse_event_size: that call fails, the server is up
                raise DownstreamError(f"{too_large}{self.limits.max_message_bytes:,} bytes "
                                      f"(limits.max_message_bytes) in answer to the call to '{tool}'; dropped") from e
            if e.code == CONNECTION_CLOSED:
                self._lost = True
                self._changed.set()  # the watch loop ends this connection now, not at the next ping
                raise DownstreamError(f"server '{self.name}' closed the connection (exited?) in the middle of "
                                      f"the call to '{tool}'; the gateway is restarting it") from e
            raise DownstreamError(f"server '{self.name}' failed during the call to '{tool}': "
                                  f"{shown(_describe(e), 160)}") from e
        except Exception as e:  # noqa: BLE001
            raise DownstreamError(f"server '{self.name}' failed during the call to '{tool}': "
                                  f"{shown(_describe(e), 160)}") from e
        raise DownstreamError(f"server '{self.name}' did not answer the call to '{tool}' within {t:g} s "
                              "(limits.call_timeout_s); the gateway cancelled it")

    def status(self) -> dict:
        out = {"name": self.name, "transport": self.spec.transport, "state": self.state, "tools": len(self.tools),
               "restarts": self.restarts, "protocol": self.protocol, "watch": self.watch}
        if self.error:
            out["error"] = self.error
        if self.last_error:
            out["last_error"] = self.last_error
        if self.retry_at is not None and self.state != "up":
            out["retry_in_s"] = round(max(0.0, self.retry_at - time.time()), 1)
        if self.delays:
            out["backoff_s"] = self.delays[-1]
        if self.up_since is not None and self.state == "up":
            out["up_for_s"] = round(time.monotonic() - self.up_since, 1)
        if self.mode != self.spec.protocol:
            out["protocol_fallback"] = f"{self.spec.protocol} -> {self.mode}"
        if self.problems:
            out["tool_problems"] = list(self.problems)
        if self.not_callable:
            out["not_callable"] = dict(self.not_callable)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.stdout_garbage:
            out["non_jsonrpc_messages"] = self.stdout_garbage
        if self.list_changed:
            out["list_changed"] = self.list_changed
        if self.pings:
            out["pings"] = self.pings
        return out


def _protocol_failure(e: BaseException) -> bool:
    """Whether a failed connect looks like the peer mishandling the newest revision (an error answer or an
    unreadable result), not an outage (a process that exits, a refused connection, a timeout)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, MCPError):
        return e.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    return isinstance(e, ValidationError)


def _describe(e: BaseException) -> str:
    """A one-line description of an exception (exception groups: their first leaf)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


__all__ = ["Downstream", "DownstreamError", "tool_dict", "vet_tools", "log"]
