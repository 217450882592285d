"""Errors of the registry adapters. All are DataError (so RiskRankError): the CLI prints them as
`error: FILE:LINE: message` and exits 1."""

from __future__ import annotations

from riskrank_jax.errors import DataError


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
