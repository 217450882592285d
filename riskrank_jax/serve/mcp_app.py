"""The gateway's MCP surface, built on the official SDK's `MCPServer`: the tools ``search_tools``,
``call_tool`` and ``list_servers``, or (``expose = "filtered"``) the downstream tools themselves.

Confirmation of a call above ``allow_level`` goes through the SDK's resolver mechanism (``Resolve`` +
``Elicit``): on a 2026-07-28 connection it rides an ``InputRequiredResult``, on earlier ones an
``elicitation/create`` request, and the call's body — the only place that forwards — runs after the answer.

Why the SDK's server: the protocol (both eras, stdio and streamable HTTP) is the SDK's, never hand-written here.
"""


import json
from typing import Annotated, Any

import mcp_types as types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from riskrank_jax.errors import RiskRankError


class Confirm(BaseModel):
    """What the gateway asks the user before a call above allow_level."""

    confirm: bool = Field(description="Let this call go through to the downstream server")


def _caps_elicit(ctx) -> bool:
    caps = getattr(ctx, "client_capabilities", None)
    return bool(caps is not None and getattr(caps, "elicitation", None) is not None)


def search_text(result: dict) -> str:
    """The short text beside the structured search result."""
    lines = [f"{len(result['tools'])} tools for: {result['query']}"]
    for j, t in enumerate(result["tools"], 1):
        lines.append(f"{j}. {t['name']} — risk {t['risk_level']} ({t['risk_source']}); call: {t['call']}")
    for h in result["held_back"]:
        lines.append(f"held back: {h['name']} — {h['reason']}")
    return "\n".join(lines)


def build_server(gateway) -> MCPServer:
    """The gateway's MCPServer (see the module docstring); the gateway holds the state, this only the surface."""

    def text_result(text: str, structured: dict | None = None, error: bool = False):
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured, is_error=error)

    async def ask(name: str, ctx: Context, arguments: dict[str, Any] | None = None):
        """Resolver of call_tool's confirmation: asks only when the policy says "confirm" and the client can
        answer; otherwise it answers for itself (the body decides again and refuses or forwards)."""
        await _catalog_or_none()
        catalog, i, decision = gateway.gate(name, arguments if arguments is not None else {})
        if decision.action != "confirm" or not _caps_elicit(ctx):
            return Confirm(confirm=False)  # injected as AcceptedElicitation(data=Confirm(confirm=False))
        keys = ", ".join(sorted(arguments or {})) or "none"
        return Elicit(f"Allow the call to '{name}' (server '{catalog.entries[i].server}')? {decision.reason}. "
                      f"Argument names: {keys}.", Confirm)

    async def _catalog_or_none():
        try:
            return await gateway.wait_catalog()
        except RiskRankError:
            return None

    async def gated_call(name: str, arguments, confirmed: bool | None, ctx) -> types.CallToolResult:
        await _catalog_or_none()
        catalog, i, decision = gateway.gate(name, arguments)
        if decision.action == "confirm":
            if confirmed:
                decision = decision.__class__("allow", decision.reason.replace("needs the user's confirmation",
                                                                               "confirmed by the user"))
                verdict = "confirmed"
            else:
                why = ("the user declined" if confirmed is False and _caps_elicit(ctx)
                       else "this client cannot ask the user (no elicitation support)")
                decision = decision.__class__("refuse", f"{decision.reason}; {why}")
                verdict = "refused"
        else:
            verdict = "allowed" if decision.action == "allow" else "refused"
        gateway.record(catalog, i, name, arguments, verdict, decision.reason)
        if decision.action != "allow":
            structured = {"refused": True, "tool": name, "reason": decision.reason}
            if i is not None:
                structured.update(risk_level=int(catalog.ranker.risk_levels[i]),
                                  risk_source=catalog.ranker.risk_source[i])
            return text_result(f"refused: {decision.reason}", structured, error=True)
        return await gateway.forward(catalog, i, arguments)

    class GatewayServer(MCPServer):
        """MCPServer whose tool list is the catalog's in filtered mode."""

        async def list_tools(self):
            if gateway.options.expose != "filtered":
                return await super().list_tools()
            catalog = await _catalog_or_none()  # the first listing waits for the first catalog
            if catalog is None:
                return []
            out = []
            for i, e in enumerate(catalog.entries):
                if e.server is None or gateway.gate(e.name, {})[2].action != "allow":
                    continue
                listed = dict(e.listed, name=e.name)
                out.append(types.Tool.model_validate(listed))
            return out

        async def call_tool(self, name, arguments, context=None):
            if gateway.options.expose != "filtered":
                return await super().call_tool(name, arguments, context)
            return await gated_call(name, arguments, None, context)

        def _tool_input_schema(self, name):
            return None if gateway.options.expose == "filtered" else super()._tool_input_schema(name)

    server = GatewayServer("riskrank-jax", log_level="WARNING", instructions=(
        "Risk-aware tool gateway. Call search_tools with the user's request to find the few tools it needs "
        "(risky tools are held back unless the request needs them), then call_tool to run one; calls above the "
        "policy's risk level are refused or need the user's confirmation."))

    if gateway.options.expose == "search":
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
                            confirmation: Annotated[ElicitationResult[Confirm], Resolve(ask)],
                            arguments: dict[str, Any] | None = None) -> types.CallToolResult:
            """Call a tool that search_tools returned, with its arguments (an object matching its input schema).
            Calls above the policy's risk level are refused with the reason, or need the user's confirmation."""
            accepted = isinstance(confirmation, AcceptedElicitation) and confirmation.data.confirm
            return await gated_call(name, {} if arguments is None else arguments, accepted, ctx)

        @server.tool(annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False))
        async def list_servers() -> types.CallToolResult:
            """Each downstream server's state, tool count and risk histogram (tools per level 1..5)."""
            status = gateway.servers_status()
            lines = [f"{s['name']}: {s['state']}, {s['tools']} tools" + (f" ({s['error']})" if s.get("error") else "")
                     for s in status["servers"]]
            return text_result("\n".join(lines) or "no servers", json.loads(json.dumps(status)))

    return server


__all__ = ["build_server", "Confirm"]
