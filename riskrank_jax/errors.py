"""Errors with a location, so bad input is reported as `file:line: message`; and `escaped`, how any text a
user did not write (a server's tool name, an agent's argument) appears inside a message."""

from __future__ import annotations

import json
from pathlib import Path


def escaped(text: str, cap: int = 40, quote: str = '"') -> str:
    """``text`` for use between ``quote`` characters in a message: every control, non-ASCII or DEL character and
    the quote as an escape (JSON's), cut to ``cap`` characters of escapes with "…"."""
    out, n = [], 0
    for ch in text:
        if ch == quote and quote != '"':
            e = f"\\u{ord(ch):04x}"
        else:
            e = "\\u007f" if ch == "\x7f" else json.dumps(ch, ensure_ascii=True)[1:-1]
        if n + len(e) > cap:
            return "".join(out) + "…"
        out.append(e)
        n += len(e)
    return "".join(out)


def read_json_object(path: Path, error: type[Exception], missing: str, what: str) -> dict:
    """The JSON object in the file ``path``, or ``error`` naming the file: ``missing`` when it does not exist, the
    line when it is not JSON (e.g. truncated by a crash), ``what`` it should be when it is JSON but not an object.
    Why one reader: every saved state (a ranker's manifest, a run's record) refuses a bad file the same way."""
    try:
        obj = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{path}: {missing}") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON, e.g. truncated by a crash (line {e.lineno}: {e.msg})") from None
    if not isinstance(obj, dict):
        raise error(f"{path}: not {what} (a JSON {type(obj).__name__})")
    return obj


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

# Errors of the registry adapters: each names the file and line of the bad entry.


class MalformedJSONError(DataError):
    """The file is not valid JSON (or a JSON Lines line is not); the message gives line and column."""


class UnknownFormatError(DataError):
    """A document or tool entry matches none of the accepted formats; the message lists them."""


class ToolSpecError(DataError):
    """A tool entry is unusable: no name, a non-string description, a risk that is not an integer 1..5."""


class DuplicateToolError(DataError):
    """Two tools with the same name inside one source (file or inline object)."""


class EmptyRegistryError(DataError):
    """No tool could be read from the given sources."""


class RiskHeadError(DataError):
    """A risk-head file that cannot be used (missing, corrupt, or for another encoder)."""


class ConfigError(DataError):
    """A configuration that cannot be used: a gateway config (`riskrank-jax serve --config`, naming the file and
    line), or a leaf of a config tree set to an unknown path or a value its type does not accept (naming the
    leaf's dotted path in the message)."""
