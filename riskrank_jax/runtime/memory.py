"""The memory budget: how many bytes one step of training, scoring or evaluation may hold at once.

Every stage that could outgrow memory (models x queries x tools x hidden) sizes its groups or chunks from a
byte estimate against this budget; results never depend on it.
"""

from __future__ import annotations

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes (1 GiB)

__all__ = ["DEFAULT_MEMORY_BUDGET"]
