"""Which calls the gateway lets through: `Policy` (the config's ``policy`` block) and `decide`.

Order of the rules: ``deny`` patterns refuse; ``allow`` patterns let through; a tool at or below
``allow_level`` goes through; above it the call needs confirmation (``confirm: "elicit"``, asked through MCP
elicitation when the client supports it) or is refused (``confirm: "refuse"``).

Why deny first: a deny is an audit decision, and no risk level or allow pattern may override it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

CONFIRM_MODES = ("elicit", "refuse")
DEFAULT_ALLOW_LEVEL = 3


@dataclass(frozen=True)
class Policy:
    """allow_level: highest risk level (1..5) that passes without confirmation; allow / deny: tool-name globs
    (matched against the gateway's name and ``server.tool``); trusted_servers: servers whose MCP annotations
    may lower a tool's risk; confirm: "elicit" or "refuse" for calls above allow_level."""

    allow_level: int = DEFAULT_ALLOW_LEVEL
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    trusted_servers: tuple[str, ...] = ()
    confirm: str = "elicit"


@dataclass(frozen=True)
class Decision:
    """action: "allow", "confirm" or "refuse"; reason: one sentence for the client and the audit log."""

    action: str
    reason: str


def _matching(patterns, names) -> str | None:
    for p in patterns:
        if any(fnmatch.fnmatchcase(n, p) for n in names):
            return p
    return None


def decide(policy: Policy, names: tuple[str, ...], level: int, source: str) -> Decision:
    """The decision for calling a tool known by ``names`` (its gateway name first) at risk ``level`` (1..5)
    whose level came from ``source``."""
    what = f"risk level {level} ({source})"
    pattern = _matching(policy.deny, names)
    if pattern is not None:
        return Decision("refuse", f"'{names[0]}' matches the policy's deny pattern '{pattern}'")
    pattern = _matching(policy.allow, names)
    if pattern is not None:
        return Decision("allow", f"'{names[0]}' matches the policy's allow pattern '{pattern}' ({what})")
    if level <= policy.allow_level:
        return Decision("allow", f"{what} is at or below allow_level {policy.allow_level}")
    if policy.confirm == "elicit":
        return Decision("confirm", f"{what} is above allow_level {policy.allow_level}: needs the user's confirmation")
    return Decision("refuse", f"{what} is above allow_level {policy.allow_level}, and the policy refuses "
                              "such calls (confirm: refuse)")


__all__ = ["Policy", "Decision", "decide", "CONFIRM_MODES", "DEFAULT_ALLOW_LEVEL"]
