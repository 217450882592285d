"""Anthropic client-side tool search ranked by riskrank-jax, end to end without network.

The model's turns are recorded ``anthropic.types.Message`` objects (a scripted client stands in for
``client.messages.create``); everything sent is checked against the SDK's param types. The tools are
examples/mcp_tools.json in Anthropic format (examples/anthropic_tools.json has no delete tool). Prints the
tool_reference names returned per request, then, for read-only requests, the risky tools (risk >= 3) in the
top k with riskrank-jax against plain cosine over all-MiniLM-L6-v2 (the Anthropic cookbook's embedding search).

    python examples/anthropic_tool_search.py
"""

import json
from pathlib import Path

from anthropic.types import Message, MessageParam, TextBlock, ToolUnionParam, ToolUseBlock, Usage

from riskrank_jax.integrations.anthropic_tool_search import ToolSearch, validate, with_deferred
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.rank.ranker import RankConfig
from riskrank_jax.runtime import compile_cache

TOOLS_FILE = Path(__file__).resolve().with_name("mcp_tools.json")
MODEL = "claude-sonnet-4-5"
K = 3  # tools loaded per search (the README's "read the config file" example uses --k 3 too)
REQUESTS = ["read the config file", "delete the branch feature-x"]
READ_ONLY = ["read the config file", "show me the recent commits", "list my unread e-mails",
             "what is my account balance", "list the files in the src folder", "show the diff of my changes",
             "search the docs for the install steps", "list the running processes",
             "show the status of the repository", "find the latest news about JAX"]


def anthropic_tools(path: Path = TOOLS_FILE) -> list[dict]:
    """An MCP tools/list response as Anthropic tool definitions (inputSchema -> input_schema)."""
    tools = json.loads(path.read_text())["result"]["tools"]
    return [{"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in tools]


def recorded_turns(request: str, n: int) -> list[Message]:
    """The model's two recorded turns for a request: call tool_search with it, then answer in text."""
    usage = Usage(input_tokens=0, output_tokens=0)
    call = ToolUseBlock(type="tool_use", id=f"toolu_{n:02d}", name="tool_search", input={"query": request})
    return [Message(id=f"msg_{n:02d}a", type="message", role="assistant", model=MODEL, content=[call],
                    stop_reason="tool_use", stop_sequence=None, usage=usage),
            Message(id=f"msg_{n:02d}b", type="message", role="assistant", model=MODEL,
                    content=[TextBlock(type="text", text="Loaded the tools I need.")],
                    stop_reason="end_turn", stop_sequence=None, usage=usage)]


class ScriptedClient:
    """Stands in for ``anthropic.Anthropic().messages``: checks each request, returns the next recorded turn."""

    def __init__(self, turns):
        self.turns = list(turns)

    def create(self, *, model, max_tokens, tools, messages):
        for tool in tools:
            validate(tool, ToolUnionParam)
        for message in messages:
            validate(message, MessageParam)
        return self.turns.pop(0)


def run_conversation(search: ToolSearch, tools: list[dict]) -> dict:
    """{request: tool_reference names} from one scripted conversation per request."""
    request_tools = [search.definition(), *with_deferred(tools)]
    out = {}
    for n, request in enumerate(REQUESTS, 1):
        client = ScriptedClient(recorded_turns(request, n))
        messages = [{"role": "user", "content": request}]
        reply = client.create(model=MODEL, max_tokens=1024, tools=request_tools, messages=messages)
        results = [search.handle(b) for b in reply.content if b.type == "tool_use" and b.name == search.name]
        out[request] = [c["tool_name"] for r in results for c in r["content"] if c["type"] == "tool_reference"]
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                     {"role": "user", "content": results}]
        client.create(model=MODEL, max_tokens=1024, tools=request_tools, messages=messages)
    return out


def risky_in_top_k(ranker, queries, k: int) -> list[list[str]]:
    """Per query, the names of the risky tools (risk >= 3) in the ranker's top k."""
    return [[h.name for h in hits if h.risky] for hits in ranker.rank_queries(queries, k=k)]


def main() -> None:
    compile_cache.enable(resolve_cache_dir())  # a second run loads its compiled programs, as the CLI does
    tools = anthropic_tools()
    search = ToolSearch.from_tools(tools, k=K)
    for request, names in run_conversation(search, tools).items():
        print(f"{request} -> tool_reference: {', '.join(names)}")
    cosine = search.ranker.with_config(RankConfig(lam=0.0, first_stage="dense"))
    print(f"risky tools (risk >= 3) in the top k over {len(READ_ONLY)} read-only requests:")
    for k in (K, 5):
        ours, base = risky_in_top_k(search.ranker, READ_ONLY, k), risky_in_top_k(cosine, READ_ONLY, k)
        print(f"  k={k}: riskrank-jax {sum(map(len, ours))}, cosine {sum(map(len, base))}")
        for q, a, b in zip(READ_ONLY, ours, base):
            if a or b:
                print(f"    {q}: riskrank-jax [{', '.join(a)}]  cosine [{', '.join(b)}]")


if __name__ == "__main__":
    main()
