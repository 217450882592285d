"""The gateway's MCP surface, built on the official SDK's `MCPServer`: the tools ``search_tools``,
``call_tool`` and ``list_servers``, or (``expose = "filtered"``) the downstream tools themselves.

Confirmation of a call above ``allow_level`` goes through the SDK's resolver mechanism (``Resolve`` +
``Elicit``): on a connection of the newest protocol revision it rides an ``InputRequiredResult``, on older
ones an ``elicitation/create`` request, and the call's body — the only place that forwards — runs after the
answer.

The session-flow rule (serve.policy) is kept per MCP session (`session_key`): one stdio or in-memory
connection of a 2025-era revision, or one streamable-HTTP session the SDK issued an ``Mcp-Session-Id`` for;
requests of the stateless newest revision (on any transport: the SDK gives each of them a session object of its
own) share the gateway's one flow, so that the rule still holds across them.

Why the SDK's server: the protocol (both eras, stdio and streamable HTTP) is the SDK's, never hand-written here.
"""

import dataclasses
import functools
import json
import re
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field

from riskrank_jax.errors import RiskRankError
from riskrank_jax.serve.downstream import log
from riskrank_jax.serve.identity import shown
from riskrank_jax.serve.audit import arguments_digest
from riskrank_jax.serve.policy import Decision, ToolState
from riskrank_jax.serve.store import StoreUnavailable


class Confirm(BaseModel):
    """What the gateway asks the user before a call above allow_level."""

    confirm: bool = Field(description="Let this call go through to the downstream server")


def _caps_elicit(ctx) -> bool:
    caps = getattr(ctx, "client_capabilities", None)
    return bool(caps is not None and getattr(caps, "elicitation", None) is not None)


GATEWAY_FLOW = None  # the key of the gateway's one flow: requests that belong to no session


def session_key(ctx) -> str | None:
    """The key of the MCP session a request belongs to (the module docstring): "http:<Mcp-Session-Id>",
    "connection:<id>" for a stdio or in-memory connection of a 2025-era revision, else GATEWAY_FLOW (requests of
    the stateless revision, whose session objects last one request each, on any transport). The HTTP session id is one the
    SDK's session manager issued and checks (an unknown one is answered 404 before any tool runs)."""
    if ctx is None:
        return GATEWAY_FLOW
    try:
        headers = ctx.headers
        session = ctx.session
    except ValueError:  # no request context
        return GATEWAY_FLOW
    if headers is not None:
        sid = headers.get("mcp-session-id")
        return f"http:{sid}" if sid else GATEWAY_FLOW
    if session is None or getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return GATEWAY_FLOW  # the newest revision has no sessions: each request gets a session object of its own
    return f"connection:{id(session)}"


def search_text(result: dict) -> str:
    """The short text beside the structured search result."""
    lines = [f"{len(result['tools'])} tools for: {result['query']}"]
    if result.get("request"):
        lines.append(f"read as: {result['request']['asks']}")
    for j, t in enumerate(result["tools"], 1):
        flags = "".join(f"; {f}" for f in t.get("flags") or ())
        lines.append(f"{j}. {t['name']} — risk {t['risk_level']} ({t['risk_source']}); call: {t['call']}{flags}")
    for h in result["held_back"]:
        lines.append(f"held back: {h['name']} — {h['reason'].removeprefix('held back: ')}")
    return "\n".join(lines)


def server_line(s: dict) -> str:
    """One line of list_servers' text: state, tools, restarts, last error, tool problems, warnings."""
    line = f"{s['name']}: {s['state']}, {s['tools']} tools, {s['restarts']} restarts"
    if s.get("last_error"):
        line += f" (last error: {s['last_error']})"
    if s.get("tool_problems"):
        line += f"; {len(s['tool_problems'])} tool problems: " + "; ".join(
            f"{p['tool']}: {p['problem']} ({p['action']})" for p in s["tool_problems"][:5])
    for key, what in (("changed_tools", "definitions changed since accepted"),
                      ("quarantined_tools", "tools in quarantine"),
                      ("flagged_tools", "tools with instructions aimed at the agent")):
        if s.get(key):
            line += f"; {len(s[key])} {what}: " + ", ".join(list(s[key])[:5])
    if s.get("left_out"):
        line += f"; tools left out: {s['left_out']}"
    for w in s.get("warnings", ()):
        line += f"; {w}"
    return line


def text_result(text: str, structured: dict | None = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=structured, is_error=error)


async def catalog_or_none(gateway):
    """The gateway's catalog, waiting for the first one; None when there is none to wait for."""
    try:
        return await gateway.wait_catalog()
    except RiskRankError:
        return None


ARGUMENT_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def confirmation_text(tool: ToolState, decision: Decision, arguments: dict) -> str:
    """What the user is asked, built only from the gateway's words, the tool's validated identity and server,
    the decision's reason (itself the gateway's words), and the argument names the tool's input schema declares
    and that are plain names; any other argument name is counted, never shown."""
    schema = (tool.definition or {}).get("inputSchema") or {}
    declared = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    shown_names = sorted(a for a in arguments if a in declared and ARGUMENT_NAME.fullmatch(a))
    hidden = len(arguments) - len(shown_names)
    names = ", ".join(f"'{a}'" for a in shown_names) or "none"
    if hidden:
        names += f" (and {hidden} argument name{'s' if hidden > 1 else ''} the tool does not declare, not shown)"
    return (f"riskrank-jax gateway: allow the call to '{tool.name}' (server '{tool.server}')? {decision.reason}. "
            f"Arguments: {names}.")


def confirmation_resolver(gateway):
    """The resolver of call_tool's confirmation: asks only when the policy says "confirm" and the client can
    answer; otherwise it answers for itself (the body decides again, and refuses or forwards)."""

    async def ask(name: str, ctx: Context, arguments: dict[str, Any] | None = None):
        await catalog_or_none(gateway)
        args = arguments if arguments is not None else {}
        session = session_key(ctx)
        gated = await anyio.to_thread.run_sync(gateway.gate, name, args, session)  # reads the state store
        if gated.decision.action != "confirm" or not _caps_elicit(ctx):
            return Confirm(confirm=False)  # injected as AcceptedElicitation(data=Confirm(confirm=False))
        return Elicit(confirmation_text(gated.tool, gated.decision, args), Confirm)

    return ask


def note_confirmation(gateway, session, tool: str, arguments, event: str) -> None:
    """Record the user's answer to a confirmation (granted or declined) in the state store (`serve.sessions`); a
    store that is down is logged (the call's audit record, which the call cannot go without, holds the decision
    too)."""
    try:
        gateway.sessions.confirmation(session, tool, arguments_digest(arguments, gateway.audit_key), event)
    except StoreUnavailable as e:
        log(f"cannot record a confirmation {event} for '{tool}' in the state store ({e})")


def progress_relay(ctx):
    """An async (progress, total, message) callback that passes a downstream server's progress notifications
    on to the client (the SDK sends them only when the client's request asked for progress)."""
    report = getattr(ctx, "report_progress", None)
    if report is None:
        return None

    async def relay(progress, total=None, message=None):
        try:
            await report(progress, total, message)
        except Exception as e:  # noqa: BLE001 - a client gone away must not fail the downstream call
            log(f"could not pass a progress notification on to the client ({type(e).__name__}: {e})")

    return relay


async def gated_call(gateway, name: str, arguments, confirmed: bool | None, ctx) -> types.CallToolResult:
    """Decide, write the audit line, then refuse or forward. confirmed: the user's answer (None: not asked).
    A tool the policy lets through but that cannot run now (server restarting, unreadable schema) is refused
    with that reason, so the audit line says what really happened."""
    await catalog_or_none(gateway)
    session = session_key(ctx)
    # decided again: the definition may have changed meanwhile; in a worker thread, as it reads the state store
    # (a database that does not answer holds this call, not the event loop)
    gated = await anyio.to_thread.run_sync(gateway.gate, name, arguments, session)
    decision = gated.decision
    if decision.action == "confirm":
        if confirmed:
            decision = dataclasses.replace(decision, action="allow", reason=decision.reason.replace(
                "needs the user's confirmation", "confirmed by the user"))
            verdict = "confirmed"
            await anyio.to_thread.run_sync(note_confirmation, gateway, session, gated.tool.name, arguments, "granted")
            gateway.metrics.confirmations_asked.inc()  # counted on the answer: the resolver may run twice a call
            gateway.metrics.confirmations_granted.inc()
        else:
            declined = confirmed is False and _caps_elicit(ctx)
            why = "the user declined" if declined else "this client cannot ask the user (no elicitation support)"
            decision = dataclasses.replace(decision, action="refuse", reason=f"{decision.reason}; {why}")
            verdict = "refused"
            if declined:
                await anyio.to_thread.run_sync(note_confirmation, gateway, session, gated.tool.name, arguments,
                                               "declined")
                gateway.metrics.confirmations_asked.inc()
    else:
        verdict = "allowed" if decision.action == "allow" else "refused"
    try:
        record = await anyio.to_thread.run_sync(functools.partial(
            gateway.record, gated, name, arguments, verdict, decision.reason, session,
            forwarded=decision.action == "allow"))
    except StoreUnavailable as e:  # no record, no call: refused before anything reaches the server
        log(f"refused a call of {shown(name)}: the audit record cannot be written ({e})")
        decision = dataclasses.replace(decision, action="refuse", rule="state store", reason=(
            "the gateway cannot write the call's audit record to its state store; refused (fail closed)"))
    gateway.metrics.decided(verdict if decision.action == "allow" else "refused", decision.rule)
    if decision.action != "allow":
        tool = gated.tool
        structured = {"refused": True, "tool": tool.name if tool is not None else shown(name),
                      "reason": decision.reason, "rule": decision.rule}
        if tool is not None:
            structured.update(risk_level=tool.level, risk_source=tool.source)
        return text_result(f"refused: {decision.reason}", structured, error=True)
    return await gateway.forward(gated.catalog, gated.index, arguments, progress=progress_relay(ctx), session=session,
                                 record=record)


class GatewayServer(MCPServer):
    """MCPServer whose tool list is the catalog's in filtered mode (``gateway.settings.runtime.expose``)."""

    def __init__(self, gateway, **kwargs):
        super().__init__(**kwargs)
        self.gateway = gateway

    async def list_tools(self):
        if self.gateway.settings.runtime.expose != "filtered":
            return await super().list_tools()
        catalog = await catalog_or_none(self.gateway)  # the first listing waits for the first catalog
        if catalog is None:
            return []
        return [types.Tool.model_validate(t) for t in self.gateway.filtered_tools(catalog)]

    async def call_tool(self, name, arguments, context=None):
        if self.gateway.settings.runtime.expose != "filtered":
            return await super().call_tool(name, arguments, context)
        return await gated_call(self.gateway, name, arguments, None, context)

    def _tool_input_schema(self, name):  # sdk_hooks.TOOL_INPUT_SCHEMA_HOOK: the gate validates, not the SDK
        return None if self.gateway.settings.runtime.expose == "filtered" else super()._tool_input_schema(name)


def add_search_tools(server: MCPServer, gateway) -> None:
    """search_tools, call_tool and list_servers on ``server`` (``expose = "search"``)."""

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    async def search_tools(query: str, k: int = 5) -> types.CallToolResult:
        """Find the tools for a request: the risk-aware top k (name, description, input schema, risk level and
        its source, and whether call_tool will let it through), plus the risky tools held back and why."""
        try:
            result = await gateway.search_tools(query, k)
        except RiskRankError as e:
            return text_result(f"error: {e}", {"error": str(e)}, error=True)
        return text_result(search_text(result), result)

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=True))
    async def call_tool(name: str, ctx: Context,
                        confirmation: Annotated[ElicitationResult[Confirm], Resolve(confirmation_resolver(gateway))],
                        arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """Call a tool that search_tools returned, with its arguments (an object matching its input schema).
        Calls above the policy's risk level are refused with the reason, or need the user's confirmation."""
        accepted = isinstance(confirmation, AcceptedElicitation) and confirmation.data.confirm
        return await gated_call(gateway, name, {} if arguments is None else arguments, accepted, ctx)

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    async def list_servers() -> types.CallToolResult:
        """Each downstream server's state, tool count, restarts and last error, the tools it listed that are
        invalid (and what the gateway did with them), and its risk histogram (tools per level 1..5)."""
        status = gateway.servers_status()
        lines = [server_line(s) for s in status["servers"]]
        return text_result("\n".join(lines) or "no servers", json.loads(json.dumps(status)))


def build_server(gateway) -> MCPServer:
    """The gateway's MCPServer (see the module docstring); the gateway holds the state, this only the surface."""
    # the seal of the newest revision's requestState (a confirmation's round trip): one key in the state store,
    # so the answer may come back to any replica
    security = RequestStateSecurity(keys=[gateway.store.secret("request_state")])
    server = GatewayServer(gateway, name="riskrank-jax", log_level="WARNING", request_state_security=security,
                           instructions=(
        "Risk-aware tool gateway. Call search_tools with the user's request to find the few tools it needs "
        "(risky tools are held back unless the request needs them), then call_tool to run one; calls above the "
        "policy's risk level are refused or need the user's confirmation."))
    if gateway.settings.runtime.expose == "search":
        add_search_tools(server, gateway)
    return server


__all__ = ["build_server", "Confirm", "GatewayServer", "session_key", "GATEWAY_FLOW"]
