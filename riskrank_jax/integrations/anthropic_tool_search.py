"""Anthropic Messages API client-side tool search, ranked by riskrank-jax.

    search = ToolSearch.from_tools(tools, k=5)                   # tools: your Anthropic tool definitions
    request_tools = [search.definition(), *with_deferred(tools)]  # every tool but the search tool deferred
    ...                                                         # the model calls tool_search(query, k)
    result = search.handle(tool_use_block)                      # {"type": "tool_result", "content": [
                                                                #   {"type": "tool_reference", "tool_name": ...}]}

The API loads only the definitions the ``tool_reference`` blocks name, so the tools the model can call for a
request are the ranker's top k: relevance − λ·risk, so risky tools (deleting, paying, running code, revealing
secrets) are held back unless the request needs them. Payload shapes are the SDK's ``ToolParam``,
``ToolReferenceBlockParam`` and ``ToolResultBlockParam``; ``validate`` checks one against them.

Why client-side: the API's own search tools rank by regex or BM25 alone; this one knows each tool's risk.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass

import pydantic

from riskrank_jax.errors import DataError, DuplicateToolError, RankerError, ToolSpecError
from riskrank_jax.rank.explain import risky_held_back
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, Ranker

SEARCH_TOOL_NAME = "tool_search"
SERVER_SEARCH_PREFIX = "tool_search_tool_"  # the API's own search tools (regex, BM25): never deferred
MAX_K = 20
RISKRANK_KEYS = ("risk",)  # read by the registry loader, not part of the API's ToolParam
SEARCH_DESCRIPTION = (
    "Search the available tools by what you want to do and load the best matching ones. Describe the task "
    "in plain words (e.g. 'read the config file'); the matching tools become callable. Tools that delete, "
    "pay, send, run code or reveal secrets are returned only when the request asks for that.")


def search_tool_definition(name: str = SEARCH_TOOL_NAME, max_k: int = MAX_K) -> dict:
    """The search tool's ToolParam (query, optional k): put it in ``tools`` as is, not deferred."""
    return {"name": name, "description": SEARCH_DESCRIPTION,
            "input_schema": {"type": "object",
                             "properties": {"query": {"type": "string",
                                                      "description": "What you want to do, in plain words"},
                                            "k": {"type": "integer", "minimum": 1, "maximum": max_k,
                                                  "description": "How many tools to load (default 5)"}},
                             "required": ["query"]}}


def _is_custom(tool: dict) -> bool:
    """True for a user-defined tool (no type, or type "custom"); False for the API's server/client tools."""
    return tool.get("type") in (None, "custom")


def rankable_tools(tools, search_name: str = SEARCH_TOOL_NAME) -> list[dict]:
    """The custom tools to rank (not the search tool, not typed built-ins), each checked; ToolSpecError
    naming the tool for a non-dict, a nameless or description-less tool, DuplicateToolError for a name twice."""
    if not isinstance(tools, (list, tuple)):
        raise ToolSpecError(f"tools must be a list of Anthropic tool definitions, got {type(tools).__name__}")
    out, seen = [], set()
    for i, tool in enumerate(tools, 1):
        if not isinstance(tool, dict):
            raise ToolSpecError(f"tool {i} is a {type(tool).__name__}, not a dict: {str(tool)[:60]!r}")
        name = tool.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ToolSpecError(f"tool {i} has no name")
        if name in seen:
            raise DuplicateToolError(f"duplicate tool name '{name}' (tool {i})")
        seen.add(name)
        if name == search_name or not _is_custom(tool):
            continue
        desc = tool.get("description")
        if not isinstance(desc, str) or not desc.strip():
            raise ToolSpecError(f"tool '{name}' (tool {i}) has no description: the ranker matches requests to "
                                "descriptions, so give it one")
        out.append(tool)
    if not out:
        raise ToolSpecError("no custom tool with a description to rank")
    return out


def with_deferred(tools, keep=(), search_name: str = SEARCH_TOOL_NAME) -> list[dict]:
    """A copy of ``tools`` with ``defer_loading: True`` on each, except the search tool, the names in ``keep``
    and the API's own tool-search tools (which must stay loaded); riskrank's own ``risk`` key is dropped,
    as the API accepts only ToolParam's fields."""
    keep = {search_name, *keep}
    out = []
    for tool in tools:
        tool = {k: copy.deepcopy(v) for k, v in tool.items() if k not in RISKRANK_KEYS}
        if tool.get("name") not in keep and not str(tool.get("type", "")).startswith(SERVER_SEARCH_PREFIX):
            tool["defer_loading"] = True
        out.append(tool)
    return out


def _block_fields(block) -> tuple:
    """(type, id, name, input) of a tool_use block: the SDK's ToolUseBlock or a plain dict."""
    if isinstance(block, dict):
        return block.get("type"), block.get("id"), block.get("name"), block.get("input")
    return (getattr(block, "type", None), getattr(block, "id", None), getattr(block, "name", None),
            getattr(block, "input", None))


def _error_result(tool_use_id: str, message: str) -> dict:
    """A tool_result with is_error set: the model sees why its search failed and can retry."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": message, "is_error": True}


def _parse_input(args, default_k: int, max_k: int) -> tuple[str, int]:
    """(query, k) from the tool_use input; DataError saying what is wrong, for the model to read."""
    if not isinstance(args, dict):
        raise DataError(f"input must be an object with 'query', got {type(args).__name__}")
    query, k = args.get("query"), args.get("k", default_k)
    if not isinstance(query, str) or not query.strip():
        raise DataError("'query' must be a non-empty string describing what you want to do")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise DataError(f"'k' must be a positive integer, got {k!r}")
    return query, min(k, max_k)


@dataclass(frozen=True)
class ToolSearch:
    """A riskrank-jax Ranker behind an Anthropic client-side search tool: definition() to offer it, handle()
    to answer the model's call with tool_reference blocks. explain: add a text block naming held-back tools."""

    ranker: object
    k: int = 5
    name: str = SEARCH_TOOL_NAME
    explain: bool = False

    @classmethod
    def from_tools(cls, tools, *, k: int = 5, lam: float | None = None, encoder=None, cache=None,
                   name: str = SEARCH_TOOL_NAME, explain: bool = False, **ranker_kwargs) -> "ToolSearch":
        """Check ``tools`` (Anthropic definitions), then Ranker.from_registry over the custom ones; lam: λ
        (default DEFAULT_REGISTRY_CONFIG's); extra keywords go to Ranker.from_registry."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise RankerError(f"k must be a positive integer, got {k!r}")
        ranked = rankable_tools(tools, name)
        config = DEFAULT_REGISTRY_CONFIG if lam is None else dataclasses.replace(DEFAULT_REGISTRY_CONFIG,
                                                                                 lam=float(lam))
        ranker = Ranker.from_registry([("anthropic", {"tools": ranked})], encoder=encoder, cache=cache,
                                      config=config, **ranker_kwargs)
        return cls(ranker, min(k, ranker.size), name, explain)

    def definition(self) -> dict:
        """This search tool's ToolParam (see ``search_tool_definition``)."""
        return search_tool_definition(self.name, min(MAX_K, self.ranker.size))

    def search(self, query: str, k: int | None = None) -> list[str]:
        """Names of the top-k tools for ``query``, best first (risky ones held back unless needed)."""
        k = self.k if k is None else min(int(k), self.ranker.size)
        return [h.name for h in self.ranker.rank_queries([query], k=k)[0]]

    def held_back(self, query: str, names) -> list[str]:
        """'name (risk r, #j at λ = 0)' for each risky tool in the top len(names) at λ = 0 but not in ``names``."""
        ids = [self.ranker.tool_index[n] for n in names]
        return [f"{self.ranker.tool_names[t]} (risk {int(self.ranker.risk_levels[t])}, #{j} at λ = 0)"
                for t, j in risky_held_back(self.ranker, query, len(ids), ids)]

    def handle(self, tool_use_block) -> dict:
        """The ToolResultBlockParam answering the model's tool_use of this search tool: tool_reference blocks
        of the top k (plus a text block on held-back tools when explain); bad input -> an is_error result."""
        kind, use_id, name, args = _block_fields(tool_use_block)
        if kind != "tool_use" or not isinstance(use_id, str) or name != self.name:
            raise RankerError(f"not a tool_use of '{self.name}': type {kind!r}, name {name!r}")
        try:
            query, k = _parse_input(args, self.k, self.ranker.size)
        except DataError as e:
            return _error_result(use_id, f"{self.name}: {e}")
        names = self.search(query, k)
        content = [{"type": "tool_reference", "tool_name": n} for n in names]
        if self.explain:
            held = self.held_back(query, names)
            if held:
                content.append({"type": "text", "text": "Held back as risky for this request: " + "; ".join(held)})
        return {"type": "tool_result", "tool_use_id": use_id, "content": content}


def _materialise(value):
    """value with pydantic's lazy ValidatorIterators (the SDK's Iterable fields) turned into lists, recursively."""
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ValidatorIterator":
        return [_materialise(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def _adapter(param_type):
    """pydantic.TypeAdapter over an SDK type, built once (the unions of MessageParam take seconds to build)."""
    return pydantic.TypeAdapter(param_type)


def validate(payload, param_type):
    """payload checked against an SDK param type (e.g. anthropic.types.ToolResultBlockParam) with pydantic;
    DataError when it does not fit or has keys the type does not define (pydantic would drop them)."""
    adapter = _adapter(param_type)  # kept alive while its lazy iterators are read
    try:
        checked = _materialise(adapter.validate_python(payload))
    except pydantic.ValidationError as e:
        raise DataError(f"payload is not a valid {getattr(param_type, '__name__', param_type)}: {e}") from e
    if checked != _materialise(payload):
        raise DataError(f"payload has fields {getattr(param_type, '__name__', param_type)} does not define: "
                        f"{payload!r}")
    return checked


__all__ = ["SEARCH_TOOL_NAME", "ToolSearch", "rankable_tools", "search_tool_definition", "validate",
           "with_deferred"]
