"""The ToolGraph and the smoothing of scores over it (docs/method.md §4–5).

    tool_graph.py  four edge types (co-occurrence, semantic, permission, risk co-occurrence), one graph per fold
    smoothing.py   S -> (S + (1 − α) S + α S Âᵀ) / 2, full pool or per-query candidate subgraphs
    neighbours.py  degree-bucketed in-neighbour lists: the CPU kernel behind full-pool smoothing

Why message passing over neighbour lists: the graph is sparse, so a dense [N, N] product wastes most of its work.
"""
