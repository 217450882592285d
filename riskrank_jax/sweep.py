"""`python -m riskrank_jax.sweep` keeps working: the sweep lives in ``riskrank_jax.experiments.run``."""

from riskrank_jax.experiments.run import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":
    run()
