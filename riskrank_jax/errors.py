"""Errors with a location, so bad input is reported as `file:line: message`."""

from __future__ import annotations

from pathlib import Path


class RiskRankError(Exception):
    """Base class for errors the CLI reports without a traceback."""


class DataError(RiskRankError):
    """Bad input data. Names the file and (1-based) line when known."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.message = message
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


class CacheError(RiskRankError):
    """A cache or checkpoint that cannot be used (stale, corrupt, or for another configuration)."""


class RankerError(RiskRankError):
    """A Ranker that cannot be built, loaded or used as asked (bad arrays, other encoder or registry)."""
