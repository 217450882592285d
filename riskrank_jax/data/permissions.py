"""Permission categories (docs/method.md §4): keyword substring match on the lower-cased description."""

from __future__ import annotations

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


def permission_mask(descriptions: Sequence[str]) -> np.ndarray:
    """bool [N, 5]: category c matches tool i when any keyword of c is a substring of description i."""
    cats = list(PERMISSION_CATEGORIES.values())
    out = np.zeros((len(descriptions), len(cats)), dtype=bool)
    for i, d in enumerate(descriptions):
        low = d.lower()
        for c, kws in enumerate(cats):
            out[i, c] = any(k in low for k in kws)
    return out
