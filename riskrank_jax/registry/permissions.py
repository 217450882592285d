"""The permission classifier for user registries: the categories of riskrank_jax/permissions.py matched on
word boundaries, with plain English inflections ("deletes", "deleted", "deleting", "scripts"), after camelCase
and snake_case identifiers are split ("deleteFile", "run_script"). Use this one for anything that is not a
reproduction of the paper's tables (that is ``permissions.permission_mask``, a substring rule).

Why a rule of its own: the paper's substring rule over-matches ("script" inside "description").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from riskrank_jax.permissions import CATEGORY_NAMES, PERMISSION_CATEGORIES, split_identifier


def _inflected(word: str) -> str:
    """A regex for `word` and its regular inflections: delete -> delete|deletes|deleted|deleting|deleter(s)."""
    w = re.escape(word)
    if word.endswith("e"):
        return w[:-1] + "(?:e|es|ed|ing|er|ers)"
    return w + "(?:s|es|ed|ing|er|ers)?"


def keyword_pattern(keyword: str) -> str:
    """Word-boundary regex of one keyword; every word of a multi-word keyword may inflect ("writes files")."""
    words = keyword.split()
    return r"\b" + r"[\s_-]+".join(_inflected(w) for w in words) + r"\b"


@lru_cache(maxsize=1)
def _category_regexes() -> tuple[re.Pattern, ...]:
    return tuple(re.compile("|".join(keyword_pattern(k) for k in kws)) for kws in PERMISSION_CATEGORIES.values())


def permission_mask_words(texts: Sequence[str]) -> np.ndarray:
    """Word-boundary rule. bool [N, 5]: category c matches text i when a keyword of c (or an inflection of it)
    appears as whole words. camelCase and snake_case identifiers are split first, so "deleteFile" and
    "run_script" match "delete" and "run script"; "description" does not match "script"."""
    regexes = _category_regexes()
    out = np.zeros((len(texts), len(regexes)), dtype=bool)
    for i, t in enumerate(texts):
        low = split_identifier(t)
        for c, rx in enumerate(regexes):
            out[i, c] = rx.search(low) is not None
    return out


def matched_categories(text: str) -> tuple[str, ...]:
    """Names of the categories the word-boundary rule finds in one text, in PERMISSION_CATEGORIES order."""
    row = permission_mask_words([text])[0]
    return tuple(c for c, hit in zip(CATEGORY_NAMES, row) if hit)


__all__ = ["keyword_pattern", "permission_mask_words", "matched_categories"]
