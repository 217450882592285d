"""Experiment orchestration: the declared variants, the sweep over them, its report and throughput measurement.

    riskrank_jax.experiments.variants    every evaluated variant as a ``Variant`` record (the one list)
    riskrank_jax.experiments.run       ``python -m riskrank_jax.sweep``: train, build graphs, evaluate, report
    riskrank_jax.experiments.evaluate    rankings and metrics of variants on one split (seeds x λ at once)
    riskrank_jax.experiments.stages      embedding, training runs, timed stages with peak memory
    riskrank_jax.experiments.report      results.json and tables.md (calls figures)
    riskrank_jax.experiments.figures     lambda_sweep.png, tradeoff.png, pareto.png (one colour per family)
    riskrank_jax.experiments.transfer    risk-head transfer across registries -> risk_transfer.{json,md}
    riskrank_jax.experiments.throughput  smoothing throughput (message passing vs scipy vs dense)
"""
