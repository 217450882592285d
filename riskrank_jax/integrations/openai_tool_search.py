"""OpenAI Responses API client-executed tool search: the ``tool_search`` tool (``execution: "client"``) and the
``tool_search_output`` item that loads the risk-aware top k of the deferred function tools.

    search = ResponsesToolSearch.from_tools(function_tools, k=5)       # [{"type": "function", "name", ...}]
    tools = [search.definition(), *search.deferred()]                  # responses.create(..., tools=tools)
    item = search.output(tool_search_call)                             # append to the next request's input

Both shapes are checked against the ``openai`` SDK's own param types (``ToolSearchToolParam``,
``ResponseToolSearchOutputItemParamParam``).

Why the same Ranker: the Responses API loads whatever the client returns, so the client's list is the agent's
action space, and it should hold risky tools back as every other riskrank-jax seam does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from riskrank_jax.errors import DuplicateToolError, RankerError, ToolSpecError
from riskrank_jax.integrations.anthropic_tool_search import validate
from riskrank_jax.rank.ranker import Ranker

QUERY_SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "description": "The user's request"}},
                "required": ["query"]}


def _checked(function_tools) -> list[dict]:
    """The function tools as dicts, each with a name and a description; errors name the tool."""
    if not isinstance(function_tools, (list, tuple)) or not function_tools:
        raise ToolSpecError("expected a non-empty list of Responses API function tools")
    out, seen = [], set()
    for i, t in enumerate(function_tools):
        if not isinstance(t, dict) or t.get("type") != "function":
            raise ToolSpecError(f"tool {i + 1} is not a Responses API function tool ({{\"type\": \"function\", ...}})")
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise ToolSpecError(f"tool {i + 1} has no name")
        if not isinstance(t.get("description"), str) or not t["description"].strip():
            raise ToolSpecError(f"tool '{name}' has no description to rank")
        if name in seen:
            raise DuplicateToolError(f"tool name '{name}' is used twice")
        seen.add(name)
        out.append(dict(t))
    return out


@dataclass(frozen=True, eq=False)
class ResponsesToolSearch:
    """A Ranker over Responses API function tools, with the tool-search payloads built around it."""

    ranker: object
    tools: dict
    k: int = 5

    @classmethod
    def from_tools(cls, function_tools, *, k: int = 5, **ranker_kwargs) -> "ResponsesToolSearch":
        """Rank ``function_tools`` ([{"type": "function", "name", "description", "parameters"}]) zero-shot."""
        tools = _checked(function_tools)
        ranker = Ranker.from_registry({"tools": tools}, **ranker_kwargs)
        return cls(ranker, {t["name"]: t for t in tools}, k)

    def definition(self, description: str | None = None) -> dict:
        """The ``tool_search`` tool, executed by this client."""
        # deferred: the openai SDK comes with the optional [openai-agents] extra
        from openai.types.responses import ToolSearchToolParam

        return validate({"type": "tool_search", "execution": "client", "parameters": QUERY_SCHEMA,
                         "description": description or "Find the tools for the user's request; risky tools are "
                                                       "loaded only when the request needs them."},
                        ToolSearchToolParam)

    def deferred(self) -> list[dict]:
        """Every function tool with ``defer_loading: true`` (loaded when a search returns it)."""
        return [dict(t, defer_loading=True) for t in self.tools.values()]

    def output(self, call) -> dict:
        """The ``tool_search_output`` item for a ``tool_search_call`` (an SDK object or a dict): the top k tools."""
        # deferred: the openai SDK comes with the optional [openai-agents] extra
        from openai.types.responses.response_tool_search_output_item_param_param import (
            ResponseToolSearchOutputItemParamParam)

        get = call.get if isinstance(call, dict) else (lambda key, default=None: getattr(call, key, default))
        if get("type") != "tool_search_call":
            raise RankerError(f"expected a tool_search_call item, got {get('type')!r}")
        args = get("arguments") or {}
        args = json.loads(args) if isinstance(args, str) else args
        query = args.get("query") if isinstance(args, dict) else None
        if not isinstance(query, str) or not query.strip():
            raise RankerError("the tool_search_call has no query")
        hits = self.ranker.rank_queries([query], k=min(self.k, self.ranker.size))[0]
        item = {"type": "tool_search_output", "call_id": get("call_id"), "execution": "client",
                "status": "completed", "tools": [self.tools[h.name] for h in hits]}
        return validate(item, ResponseToolSearchOutputItemParamParam)


__all__ = ["ResponsesToolSearch", "QUERY_SCHEMA"]
