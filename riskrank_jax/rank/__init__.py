"""Ranking a registry for queries: the `Ranker` object and the stacked pipeline the experiments run.

    ranker.py           `Ranker`: a registry's arrays (+ heads, graph) and `RankConfig`; build, save / load
    stages.py           ranking as small pure stages composed once: first stage, request stages (server
                        context, multi-step), risk, graph, rule filter, top k; `Prepared`, what they reuse
    ranker_store.py     a saved ranker's directory: manifest, orbax arrays, its own tuned encoder
    stacked.py          score -> penalise -> smooth -> rank -> rule filter over stacked seeds, folds and λ
    rule_filter.py      the rule filter for audited registries (risk / permission caps, near-duplicates)
    registry_inputs.py  a user registry -> embeddings, assessed risk, zero-shot graph
    tool_hits.py        the `ToolHit` records `rank_queries` returns
    explain.py          how each stage moved each returned tool (`rank --explain`)
    fit.py              `riskrank-jax fit`: train heads on a query log, or keep the zero-shot ranker
    query_log.py        query files and (query, tools used) logs
    risk_budget.py      choose λ so that mean RVR@k stays within a budget
    sharded.py          top-k over a registry sharded over devices

A request walks down ranker.py -> stages.py once (and tool_hits.py for the records it returns).

Why one folder: a deployed `Ranker` and the sweep call the same stage functions, so their rankings agree.
"""
