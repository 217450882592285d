"""The experiments: the declared variants, the sweep over them, its report and its measurements.

    variants.py    every evaluated variant as a ``Variant`` record (the one list)
    run.py         the sweep skeleton, one benchmark (``run_benchmark``: its family's data and evaluation; run key,
                   reuse, results.json, closing lines) and several (``run_tasks``); command line ``riskrank_jax/sweep.py``
    family.py      what a benchmark family supplies to the skeleton (``Family``: load, plan, key parts, evaluate, tables)
    paper.py       the paper's benchmarks (demo, UltraTool, Seal-Tools) as a family: train, build graphs, evaluate
    config.py      the sweep's configuration tree, one ``SweepConfig`` per benchmark (``--set PATH=VALUE``)
    jobs.py        several benchmarks side by side, one pinned worker process each (``--jobs``)
    stages.py      embedding, training runs, timed stages with peak memory
    beyond.py      the beyond-paper families' steps (hybrid first stages, correction reranker, risk budget)
    tuned.py       the tuned-encoder families (ft_*): fine-tuning per seed x fold, gated against the frozen one
    cross.py       the cross-encoder rows (ce_*, opt-in) and the general-purpose reranker baselines
    intent.py      the *_intent rows' inputs: the benchmark tools' effects, their requests' targets, intent models per fold
    evaluate.py    rankings and metrics of variants on one split (seeds x λ at once)
    report.py      results.json (every family) and the paper family's tables.md (calls figures.py: lambda_sweep,
                   tradeoff, pareto PNGs)
    transfer.py    risk-head transfer across registries -> risk_transfer.{json,md}
    throughput.py  smoothing throughput (message passing vs scipy vs dense)
    reproducibility.py  what a rerun may differ by: flip bounds in query units, and the rule comparing two runs
    livemcp.py     LiveMCPBench as a family: zero-shot rows over real MCP servers' tools (no training)
    livemcp_tables.py  its main table and tables.md
    livemcp_transfer.py  its rows of models trained on Seal-Tools' training data (tuned encoder, cross-encoder)
    livemcp_defaults.py  its zero-shot λ and α chosen by a rule on folds over servers, with the sensitivity
    mcp_risk_eval.py the MCP risk model and its baselines judged by folds over servers (gate metrics)

Why variants are data: adding a row to the tables touches variants.py only, and the sweep is a loop over them.
"""
