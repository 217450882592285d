"""riskrank-jax as an agent's tool retriever: `retrieve_tools(query) -> list[str]` over examples/mcp_tools.json.

Only the tools returned reach the agent's prompt, so destructive tools stay out of read-only requests
while a request that needs one still gets it. No dependency beyond riskrank-jax.

    python examples/retrieve_tools.py "delete the branch feature-x" "show me the recent commits"
"""

import functools
import sys
from pathlib import Path

from riskrank_jax.rank.ranker import Ranker

REGISTRY = Path(__file__).resolve().with_name("mcp_tools.json")


@functools.cache
def _ranker() -> Ranker:
    # Zero-shot: hybrid BM25 + embedding relevance − λ·risk, graph smoothing; embeddings cached by text.
    return Ranker.from_registry([REGISTRY])


def retrieve_tools(query: str, k: int = 5) -> list[str]:
    """Names of the k tools to offer the agent for `query`, best first."""
    return [hit.name for hit in _ranker().rank_queries([query], k=k)[0]]


if __name__ == "__main__":
    for q in sys.argv[1:] or ["show me the recent commits", "delete the branch feature-x"]:
        print(f"{q} -> {retrieve_tools(q)}")
