"""What a tuning run of the encoder's top layers is: its settings (``TuneConfig``) and the run lengths they
imply (epochs within the step budget, warm-up steps).

    config = TuneConfig(layers=3, epochs=4, step_budget=512)
    epochs_run(config, n_queries)          # 4, or fewer whole epochs when 4 would exceed 512 steps

Why a module of its own: the batches, the step, the loop and the sweep's config tree all read it, and the
config tree needs no JAX.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class TuneConfig:
    """layers: top transformer layers trained (the rest frozen); epochs over the training queries (the most: with
    an ``evaluate`` hook, ``tune_encoder`` keeps the best epoch's layers); batch_size: queries
    per step; negatives: hard negatives per query, drawn from the first stage's ``hard_pool`` best non-gold tools; lr: AdamW's
    peak learning rate (warm-up over ``warmup`` of the steps, then linear decay to 0); temperature τ of the
    softmax over cosines; max_query_tokens / max_tool_tokens: training view of a text (its first tokens; the
    final embeddings always use every token); heldout_fraction: training queries kept out to choose the gate;
    step_budget: the most steps of a run (None: no limit), in whole epochs, at least one: a long log makes as many
    updates in fewer passes over it (``epochs_run``)."""

    layers: int = 2
    epochs: int = 4
    batch_size: int = 32
    negatives: int = 1
    hard_pool: int = 10
    lr: float = 2e-4
    weight_decay: float = 0.01
    warmup: float = 0.1
    temperature: float = 0.05
    max_query_tokens: int = 64
    max_tool_tokens: int = 64
    heldout_fraction: float = 0.2
    checkpoint_every: int = 50
    step_budget: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def epochs_run(config: TuneConfig, n_queries: int) -> int:
    """Epochs a run over ``n_queries`` training queries takes: ``config.epochs``, fewer when they would exceed
    ``config.step_budget`` steps (whole epochs, at least one)."""
    per_epoch = max(1, int(n_queries) // max(1, min(int(config.batch_size), int(n_queries))))
    if config.step_budget is None:
        return int(config.epochs)
    return max(1, min(int(config.epochs), int(config.step_budget) // per_epoch))


def warmup_steps(config: TuneConfig, total_steps: int) -> int:
    """Steps of the learning-rate warm-up of a run of ``total_steps`` (at least 1)."""
    return max(1, int(round(config.warmup * total_steps)))


__all__ = ["TuneConfig", "epochs_run", "warmup_steps"]
