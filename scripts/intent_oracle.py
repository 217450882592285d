"""The ceiling of exposure by intent: the sweep's ``*_intent`` rows with a perfect reader of requests.

    python scripts/intent_oracle.py [--benchmark demo] [--out /tmp/intent_oracle] [sweep options ...]

Runs ``python -m riskrank_jax.sweep`` with one change: each test request's needs are the effects of its own gold
tools (``experiments.intent.request_targets``) instead of what the keywords, the intent model and the first
stage's agreement read from it. The tools' effects, the exposure weight and every other stage are the sweep's.
The gap between these rows and the sweep's own ``*_intent`` rows is what a better reader of requests could gain
(docs/intent.md, "Where the loss comes from"). Never writes into experiments/results/.
"""

from __future__ import annotations

import dataclasses
import sys

from riskrank_jax.experiments import intent
from riskrank_jax.sweep import run as sweep_run


def oracle_needs(x, run):
    """``experiments.intent.with_intent`` with the gold tools' effects as each request's needs."""
    return dataclasses.replace(x, first={**(x.first or {}), ("intent", "learned"): intent.request_targets(
        x.gold, run.effects)})


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--update-reference" in args:
        sys.exit("intent_oracle.py never writes the reference results")
    if "--out" not in args:
        args += ["--out", "/tmp/intent_oracle"]
    if "--variants" not in args:
        args += ["--variants", "hybrid_risk_graph", "hybrid_risk_graph_intent"]
    args += ["--force"]  # never reuse a run of the same config: its needs were read from the requests
    intent.with_intent = oracle_needs
    sweep_run(args)
