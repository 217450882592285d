"""First-stage retrieval: the baselines every reranker starts from.

    baselines.py  BM25 (bm25s) and dense cosine scores, full rankings, top candidates
    hybrid.py     BM25 and cosine fused per query as a weighted z-score sum; the weight chosen on labels
    steps.py      a request split into its steps (rules, no LLM) and the steps' scores fused into one list
    servers.py    the server as evidence (server context), and the server-first baselines (two-stage, MCP-Zero)

Why apart from rank/: these scores need no training and no risk, and both the sweep and the Ranker use them.
"""
