"""First-stage retrieval: the scores every reranker starts from, and the experiments' retrieval baselines.

    first_stage.py  the production first stages: a BM25 index (bm25s), dense cosine scores, top candidates,
                    a reranked candidate list completed to a full ranking
    baselines.py    the experiments' baselines: BM25 scores with a per-pool index cache, full rankings, the
                    host twin of the candidate completion
    hybrid.py       BM25 and cosine fused per query as a weighted z-score sum; the weight chosen on labels
    steps.py        a request split into its steps (rules, no LLM) and the steps' scores fused into one list
    servers.py      the server as evidence (server context), and the server-first baselines (two-stage, MCP-Zero)
    names.py        a tool's name as evidence between its siblings: verb, direction (A_to_B), object words
    intent.py       what a request asks a tool to do (its needed effects, each with a source) and the exposure
                    weight and hold-back that follow from it

Why apart from rank/: these scores need no training and no risk, and both the sweep and the Ranker use them.
"""
