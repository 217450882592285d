"""Keep libraries' debug chatter out of riskrank-jax's output.

When an application (or a user's script) turns the root logger to DEBUG/INFO (`logging.basicConfig(...)`),
the libraries riskrank-jax drives log hundreds of lines that mean nothing to a user: bm25s ("Building index
from tokens"), orbax through absl ("Saving checkpoint ..."), jax's compiler and cache, matplotlib's font
manager, asyncio. `quiet_library_loggers` raises those loggers to WARNING (a level set higher is kept).
Called once when riskrank_jax is imported, and again after importing a library that sets its own logger to
DEBUG on import (bm25s does).

Why at import: users see riskrank-jax's own messages, not the libraries'.
"""

from __future__ import annotations

import logging

NOISY_LOGGERS: tuple[str, ...] = (
    "bm25s", "absl", "orbax", "jax", "jaxlib", "matplotlib", "asyncio", "etils", "numba", "PIL", "fsspec",
    "filelock", "urllib3", "h5py", "tensorstore", "flax", "transformers", "huggingface_hub",
)


def quiet_library_loggers(level: int = logging.WARNING, names: tuple[str, ...] = NOISY_LOGGERS) -> None:
    """Set each of `names` to `level` when its level is unset (NOTSET) or lower than `level`."""
    for name in names:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < level:
            logger.setLevel(level)
