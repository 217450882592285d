"""integrations/: riskrank-jax at the tool-retrieval seams of the agent frameworks people already use.

* ``anthropic_tool_search`` — Anthropic Messages API client-side tool search: a search tool whose
                              ``tool_result`` holds ``tool_reference`` blocks, and ``defer_loading`` on the rest;
* ``openai_agents``         — OpenAI Agents SDK: a ``tool_filter`` and a ``require_approval`` map from risk levels,
                              and a function tool that searches a registry;
* ``openai_tool_search``    — OpenAI Responses API client-executed tool search: the ``tool_search`` tool and the
                              ``tool_search_output`` item with the risk-aware top k of the deferred tools;
* ``langgraph_bigtool``     — LangGraph ``langgraph-bigtool``: ``retrieve_tools_function`` / ``_coroutine`` over a
                              registry of LangChain tools.

Each module imports its framework only when used (optional extras: ``riskrank-jax[anthropic]``,
``riskrank-jax[openai-agents]``, ``riskrank-jax[langgraph]``).

Why adapters, not a second ranker: every seam calls the same ``Ranker`` as ``riskrank-jax rank`` and the gateway.
"""
