"""LangGraph ``langgraph-bigtool``: riskrank-jax as the ``retrieve_tools`` step of ``create_agent``.

    from langgraph_bigtool import create_agent
    from riskrank_jax.integrations.langgraph_bigtool import RiskAwareRetriever

    retriever = RiskAwareRetriever.from_tools(tool_registry, k=5)
    agent = create_agent(llm, tool_registry, retrieve_tools_function=retriever.retrieve_tools_function,
                         retrieve_tools_coroutine=retriever.retrieve_tools_coroutine).compile()

bigtool wraps the two callables in one ``StructuredTool`` (name, argument schema and description from the
function: ``retrieve_tools(query: str) -> list[str]``), calls it with the arguments the model gives, and binds
the registry entries whose ids it returns on the next model step. Its default retrieval is embedding
similarity over a Store; this one ranks with ``Ranker`` (relevance − λ·risk), so destructive tools reach the
model only when the request needs them.

Why LangChain is imported inside functions: riskrank-jax works without the ``[langgraph]`` extra.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field

from riskrank_jax.errors import DuplicateToolError, RankerError, ToolSpecError
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig, Ranker

RETRIEVE_DOC = ("Search the tool registry for the tools that fit a request and make them available. "
                "Describe what you need to do in `query`.")


def _input_schema(tool) -> dict:
    """The JSON schema of the arguments the model fills (no injected ones), as an MCP ``inputSchema``."""
    # deferred: LangChain comes with the optional [langgraph] extra
    from langchain_core.utils.function_calling import convert_to_openai_tool

    params = convert_to_openai_tool(tool)["function"].get("parameters") or {}
    schema = {"type": "object", "properties": dict(params.get("properties") or {})}
    if params.get("required"):
        schema["required"] = list(params["required"])
    return schema


def tools_document(tool_registry: dict) -> tuple[dict, dict[str, str]]:
    """An MCP ``tools/list``-style document of the registry's LangChain tools, and tool name -> tool id.

    Raises ToolSpecError for a value that is not a LangChain ``BaseTool`` or has no description, and
    DuplicateToolError for two ids whose tools share a name (the model calls tools by name)."""
    # deferred: LangChain comes with the optional [langgraph] extra
    from langchain_core.tools import BaseTool

    if not isinstance(tool_registry, dict) or not tool_registry:
        raise ToolSpecError("tool_registry must be a non-empty dict of tool id -> LangChain tool")
    entries, id_of = [], {}
    for tool_id, tool in tool_registry.items():
        if not isinstance(tool, BaseTool):
            raise ToolSpecError(f"tool_registry[{tool_id!r}] is a {type(tool).__name__}, not a LangChain tool; "
                                "wrap it with langchain_core.tools.tool or StructuredTool.from_function")
        if not isinstance(tool.description, str) or not tool.description.strip():
            raise ToolSpecError(f"tool '{tool.name}' (id {tool_id!r}) has no description; the ranker reads it "
                                "to match requests and to assess risk")
        if tool.name in id_of:
            raise DuplicateToolError(f"tool name '{tool.name}' is used by ids {id_of[tool.name]!r} and "
                                     f"{tool_id!r}; the model calls tools by name, so names must be unique")
        id_of[tool.name] = tool_id
        entries.append({"name": tool.name, "description": tool.description, "inputSchema": _input_schema(tool)})
    return {"tools": entries}, id_of


@dataclass(frozen=True)
class RiskAwareRetriever:
    """Tool ids for a request from a risk-aware ``Ranker`` over a bigtool registry of LangChain tools."""

    ranker: Ranker
    tool_ids: dict[str, str]  # ranker tool name -> registry id
    k: int = 5
    retrieve_tools_function: object = field(init=False, repr=False, compare=False)
    retrieve_tools_coroutine: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.k < 1:
            raise RankerError(f"k must be >= 1, got {self.k}")
        object.__setattr__(self, "retrieve_tools_function", self._make_function())
        object.__setattr__(self, "retrieve_tools_coroutine", self._make_coroutine())

    @classmethod
    def from_tools(cls, tool_registry: dict, *, k: int = 5, lam: float | None = None, encoder=None, cache=None,
                   config: RankConfig | None = None) -> RiskAwareRetriever:
        """A retriever over ``tool_registry`` (id -> LangChain tool): names, descriptions and argument schemas
        ranked zero-shot by ``Ranker.from_registry``; ``lam`` overrides the default config's λ."""
        config = DEFAULT_REGISTRY_CONFIG if config is None else config
        if lam is not None:
            config = dataclasses.replace(config, lam=float(lam))
        doc, id_of = tools_document(tool_registry)
        ranker = Ranker.from_registry(doc, encoder=encoder, cache=cache, config=config)
        missing = [n for n in ranker.tool_names if n not in id_of]
        if missing:
            raise RankerError(f"ranker tool names {missing} do not match the registry's tools")
        return cls(ranker=ranker, tool_ids=id_of, k=k)

    def with_ranker(self, ranker: Ranker) -> RiskAwareRetriever:
        """The same registry mapping over another ranker (e.g. ``ranker.with_config(...)`` to compare)."""
        return RiskAwareRetriever(ranker=ranker, tool_ids=self.tool_ids, k=self.k)

    def retrieve(self, query: str) -> list[str]:
        """Registry ids of the top-k tools for ``query``, best first (risky ones held back unless needed)."""
        k = min(self.k, self.ranker.size)
        return [self.tool_ids[hit.name] for hit in self.ranker.rank_queries([query], k=k)[0]]

    def _make_function(self):
        """``retrieve_tools(query)`` for bigtool: its name, signature and docstring become the tool's schema."""
        def retrieve_tools(query: str) -> list[str]:
            return self.retrieve(query)

        retrieve_tools.__doc__ = RETRIEVE_DOC
        return retrieve_tools

    def _make_coroutine(self):
        """The async twin, ranking in a worker thread so the event loop is not blocked."""
        async def retrieve_tools(query: str) -> list[str]:
            return await asyncio.to_thread(self.retrieve, query)

        retrieve_tools.__doc__ = RETRIEVE_DOC
        return retrieve_tools
