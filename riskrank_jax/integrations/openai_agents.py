"""OpenAI Agents SDK (``openai-agents``): a risk-aware ``tool_filter`` and ``require_approval`` for an MCP server,
and a function tool that searches a registry with the risk-aware ranker.

    async with MCPServerStdio(params=..., name="files") as plain:          # list once, unfiltered
        policy = RiskPolicyForAgents.from_mcp_tools(await plain.list_tools())
    server = MCPServerStdio(params=..., name="files",
                            tool_filter=policy.tool_filter(block_above=4),  # drops tools with risk level > 4
                            require_approval=policy.require_approval(above=3))  # asks before risk level > 3
    agent = Agent(name="a", mcp_servers=[server], tools=[search_tool(policy, k=5)])

SDK shapes (openai-agents 0.24): a callable tool filter is ``(ToolFilterContext, mcp Tool) -> bool`` and the SDK
applies it in ``list_tools(run_context, agent)`` (both are then required; a filter that raises drops the tool); a
static filter is ``{"allowed_tool_names": [...], "blocked_tool_names": [...]}``; ``require_approval`` takes
``{"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}`` (names not listed need no approval) or a
callable ``(run_context, agent, tool) -> bool``. Tools the ranker has not seen (a server that adds tools later)
are blocked by ``tool_filter`` and need approval under ``needs_approval`` unless told otherwise.

Why here: the SDK's filter and approval hooks take names, and riskrank-jax knows each name's assessed risk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from riskrank_jax.errors import DuplicateToolError, RankerError, ToolSpecError
from riskrank_jax.rank.explain import search_with_held_back
from riskrank_jax.rank.ranker import Ranker, check_queries

UNKNOWN = ("block", "allow")


def _as_dict(tool, i: int) -> dict:
    """One tool entry as a dict: an MCP ``Tool`` (pydantic) is dumped with its wire names."""
    if hasattr(tool, "model_dump") and not isinstance(tool, dict):
        tool = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not isinstance(tool, dict):
        raise ToolSpecError(f"tool {i + 1} is a {type(tool).__name__}, not a tool object (a dict or an MCP Tool)")
    return tool


def _name_and_description(entry: dict, i: int) -> tuple[str, str]:
    """(name, description) of an MCP, OpenAI (chat or responses) or plain tool entry, checked."""
    body = entry["function"] if isinstance(entry.get("function"), dict) else entry
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolSpecError(f"tool {i + 1} has no name (got {type(name).__name__})")
    desc = body.get("description")
    if desc is not None and not isinstance(desc, str):
        raise ToolSpecError(f"description of tool '{name}' must be a string, got {type(desc).__name__}")
    if not (desc or "").strip():
        raise ToolSpecError(f"tool '{name}' has no description: the ranker and the risk head have nothing to read")
    return name, desc.strip()


def check_tools(tools) -> tuple[list[dict], dict[str, str]]:
    """(tool dicts, name -> description) of a tool list, raising ToolSpecError / DuplicateToolError naming the
    tool for a non-object entry, a missing name or description, or a name used twice."""
    if isinstance(tools, dict):
        tools = tools.get("tools") if "tools" in tools else [tools]
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ToolSpecError(f"expected a list of tools (or {{'tools': [...]}}), got {type(tools).__name__}")
    entries, described = [], {}
    for i, tool in enumerate(tools):
        entry = _as_dict(tool, i)
        name, desc = _name_and_description(entry, i)
        if name in described:
            raise DuplicateToolError(f"duplicate tool name '{name}' (tools {list(described).index(name) + 1} "
                                     f"and {i + 1})")
        described[name] = desc
        entries.append(entry)
    if not entries:
        raise ToolSpecError("no tools given")
    return entries, described


@dataclasses.dataclass(frozen=True, eq=False)
class RiskPolicyForAgents:
    """A Ranker over one server's (or registry's) tools, turned into the SDK's filter and approval settings."""

    ranker: object
    descriptions: dict

    @classmethod
    def from_mcp_tools(cls, tools, **ranker_kwargs) -> RiskPolicyForAgents:
        """From ``await server.list_tools()`` (MCP Tool objects) or tool dicts; kwargs go to Ranker.from_registry."""
        entries, descriptions = check_tools(tools)
        return cls(Ranker.from_registry({"tools": entries}, **ranker_kwargs), descriptions)

    @classmethod
    def from_registry(cls, tools, **ranker_kwargs) -> RiskPolicyForAgents:
        """From one in-memory tool list: an MCP document ``{"tools": [...]}`` or an OpenAI tool list."""
        entries, descriptions = check_tools(tools)
        doc = {"tools": entries} if isinstance(tools, dict) and "tools" in tools else entries
        return cls(Ranker.from_registry(doc, **ranker_kwargs), descriptions)

    @classmethod
    def from_ranker(cls, ranker, descriptions: dict | None = None) -> RiskPolicyForAgents:
        """From an already built Ranker (descriptions default to the ranker's tool texts)."""
        _check_ranker(ranker)
        return cls(ranker, dict(descriptions or zip(ranker.tool_names, ranker.tool_texts)))

    # ------------------------------------------------------------------------------------ per tool
    def risk(self, name: str) -> tuple[int, str] | None:
        """(risk level 1..5, where it came from) of a tool name; None when the ranker has not seen it."""
        i = self.ranker.tool_index.get(name)
        return None if i is None else (int(self.ranker.risk_levels[i]), self.ranker.risk_source[i])

    def risk_table(self) -> dict[str, dict]:
        """name -> {"risk_level", "risk_source"} for every tool, for display."""
        return {n: {"risk_level": lvl, "risk_source": src} for n in self.ranker.tool_names
                for lvl, src in [self.risk(n)]}

    def names_above(self, level: int) -> list[str]:
        """Tool names whose risk level is above ``level``, in registry order."""
        _check_level(level)
        return [n for n, lvl in zip(self.ranker.tool_names, self.ranker.risk_levels) if int(lvl) > level]

    # ------------------------------------------------------------------------------------ the SDK's settings
    def tool_filter(self, block_above: int = 4, *, allow=(), block=(), unknown: str = "block"):
        """A callable ``tool_filter`` ``(ToolFilterContext, tool) -> bool``: False for tools above ``block_above``,
        for names in ``block`` and (``unknown="block"``) for names the ranker has not seen; names in ``allow``
        always pass."""
        if unknown not in UNKNOWN:
            raise RankerError(f"unknown must be one of {', '.join(UNKNOWN)}, got {unknown!r}")
        _check_level(block_above)
        allow, block = _names(allow, "allow"), _names(block, "block")
        levels = {n: int(lvl) for n, lvl in zip(self.ranker.tool_names, self.ranker.risk_levels)}

        def risk_filter(context, tool) -> bool:
            """True when the tool may be listed to the agent (see RiskPolicyForAgents.tool_filter)."""
            name = getattr(tool, "name", None)
            if name in allow:
                return True
            if name in block:
                return False
            if name not in levels:
                return unknown == "allow"
            return levels[name] <= block_above

        return risk_filter

    def static_tool_filter(self, block_above: int = 4, *, block=()) -> dict:
        """The SDK's static filter ``{"blocked_tool_names": [...]}`` (needs no run context in ``list_tools``)."""
        return {"blocked_tool_names": sorted(set(self.names_above(block_above)) | set(_names(block, "block")))}

    def require_approval(self, above: int = 3) -> dict:
        """``{"always": {"tool_names": tools above the level}, "never": {"tool_names": the rest}}``."""
        risky = self.names_above(above)
        return {"always": {"tool_names": risky},
                "never": {"tool_names": [n for n in self.ranker.tool_names if n not in risky]}}

    def needs_approval(self, above: int = 3):
        """A callable ``require_approval`` ``(run_context, agent, tool) -> bool`` that also asks for unseen tools."""
        risky = set(self.names_above(above))
        known = set(self.ranker.tool_names)

        def approval(run_context, agent, tool) -> bool:
            """True when a call of this tool needs the user's approval."""
            name = getattr(tool, "name", None)
            return name in risky or name not in known

        return approval


def _check_level(level) -> None:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5:
        raise RankerError(f"a risk level threshold must be an integer 0..5, got {level!r}")


def _names(names, what: str) -> frozenset:
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise RankerError(f"{what} must be a list of tool names (strings), got {names!r}")
    return frozenset(names)


def _check_ranker(ranker) -> None:
    if not isinstance(ranker, Ranker):
        raise RankerError(f"expected a riskrank_jax Ranker (or RiskPolicyForAgents), got {type(ranker).__name__}")


def search(policy: RiskPolicyForAgents, query: str, k: int) -> dict:
    """{"query", "k", "tools": name, description, risk level and source, score; "held_back": risky tools the
    risk penalty kept out of the top k} — the same result as the gateway's search_tools."""
    check_queries([query])
    r = policy.ranker
    k = max(1, min(int(k), r.size))
    hits, held_back = search_with_held_back(r, query, k)
    tools = [{"name": h.name, "description": policy.descriptions.get(h.name, ""), "risk_level": h.risk_level,
              "risk_source": h.risk_source, "score": round(h.score, 4)} for h in hits]
    held = [{k_: v for k_, v in x.items() if k_ != "index"} for x in held_back]
    return {"query": query, "k": k, "tools": tools, "held_back": held}


def search_tool(ranker, k: int = 5, *, name: str = "search_tools"):
    """An Agents SDK ``FunctionTool`` that returns the risk-aware top k tools for a request (names, descriptions,
    risk levels) and the risky tools held back; ``ranker``: a Ranker or a RiskPolicyForAgents."""
    # deferred: the Agents SDK comes with the optional [openai-agents] extra
    from agents import function_tool

    policy = ranker if isinstance(ranker, RiskPolicyForAgents) else RiskPolicyForAgents.from_ranker(ranker)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= policy.ranker.size:
        raise RankerError(f"k must be an integer in 1..{policy.ranker.size}, got {k!r}")

    def search_tools(query: str) -> dict:
        """Search the tool registry for the tools that fit a request; risky tools that fit less are held back.

        Args:
            query: the user's request in plain words.
        """
        return search(policy, query, k)

    return function_tool(search_tools, name_override=name)


__all__ = ["RiskPolicyForAgents", "check_tools", "search", "search_tool"]
