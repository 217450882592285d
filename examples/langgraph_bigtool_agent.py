"""A langgraph-bigtool agent whose `retrieve_tools` step is riskrank-jax, run offline with a scripted chat model.

The agent starts with only `retrieve_tools`; the tools it returns are bound on the next model step, so a
read-only request should never see `delete_file` while a delete request should. Also compares the risky tools
(level >= 3) in the top-k under riskrank-jax's default against plain cosine (λ = 0, dense), which is what
bigtool's own Store-embedding retrieval amounts to.

    python examples/langgraph_bigtool_agent.py
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph_bigtool import create_agent
from pydantic import Field

from riskrank_jax.integrations.langgraph_bigtool import RiskAwareRetriever
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig

K = 3  # tools bound per retrieval (bigtool's own default limit is 2)
# λ for the agent: most of these tools touch files, so a file request scores delete_file/write_file high on
# relevance; 1.0 (twice the registry default) keeps them out of read-only top-3s. The comparison shows both.
LAM = 1.0
READ_REQUEST = "show me what is in the notes.txt file"
DELETE_REQUEST = "delete the file old_report.csv"


@tool
def read_file(path: str) -> str:
    """Read the complete contents of a text file from the workspace."""
    return f"contents of {path}"


@tool
def list_directory(path: str) -> list[str]:
    """List the files and folders in a directory with their sizes."""
    return ["README.md", "src/"]


@tool
def search_docs(query: str) -> list[str]:
    """Search the project documentation for pages matching a query."""
    return [f"docs page about {query}"]


@tool
def get_weather(city: str) -> str:
    """Get the current weather forecast for a city."""
    return f"sunny in {city}"


@tool
def write_file(path: str, content: str) -> str:
    """Create a file or overwrite an existing file with new content."""
    return f"wrote {len(content)} characters to {path}"


@tool
def delete_file(path: str) -> str:
    """Permanently delete a file from the workspace."""
    return f"deleted {path}"


@tool
def drop_database(name: str) -> str:
    """Drop a database and permanently delete all of its tables and data."""
    return f"dropped {name}"


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an e-mail message to a recipient on the user's behalf."""
    return f"sent to {to}"


@tool
def run_shell_command(command: str) -> str:
    """Execute an arbitrary shell command on the host and return its output."""
    return f"ran {command}"


@tool
def refund_payment(payment_id: str, amount: float) -> str:
    """Refund a customer's card payment, moving money back to their account."""
    return f"refunded {amount} on {payment_id}"


def make_registry() -> dict:
    """The bigtool registry: tool id -> LangChain tool."""
    tools = [read_file, list_directory, search_docs, get_weather, write_file, delete_file, drop_database,
             send_email, run_shell_command, refund_payment]
    return {f"tool-{t.name}": t for t in tools}


class ScriptedChatModel(BaseChatModel):
    """Offline chat model: asks `retrieve_tools` for the user's request, then answers listing the tools bound.

    Records the tool names bound at each step in `bound` (what the agent could call)."""

    bound: list = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        """Keep the names of the tools bigtool binds; they reach `_generate` as `tool_names`."""
        return self.bind(tool_names=[t.name for t in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, tool_names=(), **kwargs) -> ChatResult:
        """First turn: call retrieve_tools with the request; after its result: answer with the bound tools."""
        self.bound.append(list(tool_names))
        last = messages[-1]
        if isinstance(last, HumanMessage):
            call = {"name": "retrieve_tools", "args": {"query": last.content}, "id": f"call-{len(self.bound)}"}
            msg = AIMessage(content="", tool_calls=[call])
        else:
            seen = last.content if isinstance(last, ToolMessage) else ""
            msg = AIMessage(content=f"{seen}; bound now: {[n for n in tool_names if n != 'retrieve_tools']}")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def run_agent(retriever: RiskAwareRetriever, registry: dict, request: str) -> list[str]:
    """Run the bigtool agent once on `request`; the names of the registry tools bound on its last step."""
    llm = ScriptedChatModel()
    agent = create_agent(llm, registry, retrieve_tools_function=retriever.retrieve_tools_function,
                         retrieve_tools_coroutine=retriever.retrieve_tools_coroutine).compile()
    agent.invoke({"messages": [HumanMessage(request)]})
    return [n for n in llm.bound[-1] if n != "retrieve_tools"]


def risky_in_top_k(retriever: RiskAwareRetriever, query: str) -> list[str]:
    """Tools of risk level >= 3 among the retriever's top-k for `query`."""
    hits = retriever.ranker.rank_queries([query], k=retriever.k)[0]
    return [h.name for h in hits if h.risky]


def compare(retriever: RiskAwareRetriever, queries: list[str]) -> None:
    """Risky tools in the top-k per read-only request: riskrank-jax default λ, the agent's λ, plain cosine."""
    default = retriever.with_ranker(retriever.ranker.with_config(DEFAULT_REGISTRY_CONFIG))
    cosine = retriever.with_ranker(retriever.ranker.with_config(RankConfig(lam=0.0, first_stage="dense")))
    columns = {f"riskrank-jax default (λ={default.ranker.config.lam})": default,
               f"agent's (λ={retriever.ranker.config.lam})": retriever, "plain cosine (λ=0, dense)": cosine}
    print(f"\nrisky tools (level >= 3) in the top-{retriever.k} of read-only requests:")
    totals = dict.fromkeys(columns, 0)
    for q in queries:
        print(f"  {q!r}")
        for label, r in columns.items():
            risky = risky_in_top_k(r, q)
            totals[label] += len(risky)
            print(f"      {label:34s} {risky}")
    slots = retriever.k * len(queries)
    print("  total: " + ", ".join(f"{label} {n}/{slots}" for label, n in totals.items()))


def main() -> int:
    """The two agent runs, then the risky-exposure comparison on read-only requests."""
    registry = make_registry()
    retriever = RiskAwareRetriever.from_tools(registry, k=K, lam=LAM)
    read_req, delete_req = READ_REQUEST, DELETE_REQUEST
    read_tools, delete_tools = (run_agent(retriever, registry, q) for q in (read_req, delete_req))
    print(f"retrieve_tools: riskrank-jax, k={K}, λ={LAM}")
    print(f"{read_req!r} -> bound {read_tools}")
    print(f"{delete_req!r} -> bound {delete_tools}")
    ok = "delete_file" not in read_tools and "delete_file" in delete_tools
    print(f"read-only request never sees delete_file, delete request does: {ok}")
    compare(retriever, [read_req, "list the files in the src folder", "what does the documentation say about setup",
                        "open the config file and show it", "what is the weather in Paris"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
