"""Progress bars that appear only on a terminal.

A bar is drawn (tqdm, on stderr) only when it is enabled *and* stderr is a TTY *and* the environment does not
set ``RISKRANK_PROGRESS=0``, so logs, pipes, CI output and captured subprocess output never hold carriage
returns or bar characters. The sweep's worker processes (``--jobs``) set it: their bars would share one
terminal line.

Why only on a terminal: captured output stays plain text.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable

from tqdm.auto import tqdm


def stderr_is_terminal() -> bool:
    """True when sys.stderr is an interactive terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **tqdm_kwargs):
    """A tqdm bar over `iterable` when enabled, stderr is a terminal and RISKRANK_PROGRESS is not "0"; else a
    silent stand-in.

    The stand-in iterates `iterable` unchanged and accepts update()/set_postfix()/close() as no-ops, so callers
    never branch on whether a bar is shown.
    """
    if enabled and stderr_is_terminal() and os.environ.get("RISKRANK_PROGRESS", "1") != "0":
        return tqdm(iterable, file=sys.stderr, **tqdm_kwargs)
    return _NoBar(iterable)


class _NoBar:
    """What progress_bar returns when no bar is shown."""

    def __init__(self, iterable: Iterable | None):
        self._iterable = iterable

    def __iter__(self):
        return iter(self._iterable if self._iterable is not None else ())

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass
