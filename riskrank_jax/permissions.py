"""Permission categories (docs/method.md §4) and the paper's rule for them.

* ``PERMISSION_CATEGORIES``: the five categories and their keyword lists (one table for every rule).
* ``permission_mask``: the paper's rule, used for the benchmark reproduction: a keyword matches when it is a
  substring of the lower-cased description. It over-matches ("script" inside "description", "eval" inside
  "evaluate", "exec" inside "executive").
* ``split_identifier``: the words of camelCase / snake_case identifiers.

User registries use the word-boundary rule over the same keyword lists (riskrank_jax/registry/permissions.py).

Why at the bottom of the package (beside metrics.py), not with the benchmark loaders: the loaders build every
benchmark tool's paper mask, and registry/ and rank/ classify user tools with the same categories.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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


def split_identifier(text: str) -> str:
    """Lower-cased words of identifiers inside `text`: "runShellCommand" -> "run shell command"."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return re.sub(r"[_./:]+", " ", text).lower()
