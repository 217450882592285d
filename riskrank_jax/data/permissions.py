"""Permission categories (docs/method.md §4), matched two ways.

* ``permission_mask`` — the paper's rule, used for the benchmark reproduction: a keyword matches when it is a
  substring of the lower-cased description. It over-matches ("script" inside "description", "eval" inside
  "evaluate", "exec" inside "executive").
* ``permission_mask_words`` — the rule for user registries: the same keyword lists, matched on word
  boundaries, with plain English inflections ("deletes", "deleted", "deleting", "scripts"). Use this one
  for anything that is not a reproduction of the paper's tables.

Why two rules: the reproduction must match the paper's substring rule, user registries need word boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

PERMISSION_CATEGORIES: dict[str, tuple[str, ...]] = {
    "shell": ("execute", "shell", "command", "bash", "terminal", "subprocess", "run script"),
    "write": ("write file", "create file", "modify file", "delete", "save file", "overwrite",
              "append to file", "file write"),
    "network": ("http", "https", "request", "api call", "download", "upload", "fetch url", "web request",
                "url", "endpoint"),
    "secret": ("password", "token", "credential", "secret", "api key", "authentication", "login", "oauth"),
    "code": ("python", "javascript", "script", "compile", "eval", "exec", "code execution", "run code",
             "interpreter"),
}
CATEGORY_NAMES: tuple[str, ...] = tuple(PERMISSION_CATEGORIES)


def permission_mask(descriptions: Sequence[str]) -> np.ndarray:
    """The paper's substring rule (benchmark reproduction). bool [N, 5]: category c matches tool i when any
    keyword of c is a substring of the lower-cased description i."""
    cats = list(PERMISSION_CATEGORIES.values())
    out = np.zeros((len(descriptions), len(cats)), dtype=bool)
    for i, d in enumerate(descriptions):
        low = d.lower()
        for c, kws in enumerate(cats):
            out[i, c] = any(k in low for k in kws)
    return out


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


def split_identifier(text: str) -> str:
    """Lower-cased words of identifiers inside `text`: "runShellCommand" -> "run shell command"."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return re.sub(r"[_./:]+", " ", text).lower()


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
