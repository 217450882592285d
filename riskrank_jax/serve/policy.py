"""Which calls the gateway lets through: `Policy` (the config's ``policy`` block) and `decide`.

Order of the rules (the first that applies decides; `Decision.rule` names it, the audit log records it):

1. ``deny`` patterns refuse ("deny");
2. **arguments** ("sql: ...", "shell: ...", "code: ..."): for a tool whose risk lies in one argument
   (`registry.dimensions.argument_rule`), `registry.arguments.judge_arguments` reads this call's argument — one
   read-only SQL statement or one read-only shell command is a read for this call (mutation read, no
   execution); anything else counts as execution and a destructive write for this call. Steps 3–6 then see the
   call's dimensions and level;
3. **session flow** ("session flow"): once a tool that returns untrusted content has answered in this session,
   a call that is a public sink, destructive or a secret source needs confirmation even when its level alone
   would pass — prompt-injected content could otherwise leak data or act through it (``session_flow``);
4. ``allow`` patterns let through ("allow pattern");
5. **dimensions** ("dimension"): a call with a dimension in ``ask_dimensions`` needs confirmation; one above
   ``allow_level`` whose every risky dimension is in ``allow_dimensions`` goes through;
6. **level** ("level"): at or below ``allow_level`` it goes through; above it the call needs confirmation
   (``confirm: "elicit"``, asked through MCP elicitation when the client supports it) or is refused
   (``confirm: "refuse"``).

With the default ``allow_level`` 3 and dimension-based levels (`registry.dimensions.level_from_dimensions`),
reads and local reversible writes pass and every destructive, public-sink, secret-source, execution or money
call asks. Every reason names the level and the dimensions with their sources.

Why deny first: a deny is an audit decision, and no risk level, argument or allow pattern may override it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from riskrank_jax.registry.dimensions import (DEFAULT_ALLOW_LEVEL, DIMENSION_NAMES, FLAGS, MUTATIONS, describe,
                                              level_from_dimensions)

CONFIRM_MODES = ("elicit", "refuse")
FLOW_DIMENSIONS = ("public_sink", "destructive", "secret_source")  # asked for after untrusted content


@dataclass(frozen=True)
class Policy:
    """allow_level: highest risk level (1..5) that passes without confirmation; allow / deny: tool-name globs
    (matched against the gateway's name and ``server.tool``); trusted_servers: servers whose MCP annotations
    may lower a tool's risk; confirm: "elicit" or "refuse" for calls that need confirmation; ask_dimensions /
    allow_dimensions: dimension names (DIMENSION_NAMES) that always ask / that do not count against a call;
    session_flow: apply the session-flow rule."""

    allow_level: int = DEFAULT_ALLOW_LEVEL
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    trusted_servers: tuple[str, ...] = ()
    confirm: str = "elicit"
    ask_dimensions: tuple[str, ...] = ()
    allow_dimensions: tuple[str, ...] = ()
    session_flow: bool = True

    def __post_init__(self):
        for key in ("ask_dimensions", "allow_dimensions"):
            bad = [d for d in getattr(self, key) if d not in DIMENSION_NAMES]
            if bad:
                raise ValueError(f"policy.{key}: unknown dimension(s) {', '.join(map(repr, bad))} "
                                 f"(known: {', '.join(DIMENSION_NAMES)})")


@dataclass(frozen=True)
class Decision:
    """action: "allow", "confirm" or "refuse"; reason: one sentence for the client and the audit log; rule:
    the rule that decided (module docstring)."""

    action: str
    reason: str
    rule: str = "level"


def _matching(patterns, names) -> str | None:
    for p in patterns:
        if any(fnmatch.fnmatchcase(n, p) for n in names):
            return p
    return None


def active_dimensions(row: dict | None) -> tuple[str, ...]:
    """The dimension names (DIMENSION_NAMES) that hold in a dimension row (None: none known)."""
    if not row:
        return ()
    m = row["mutation"]["value"]
    return ((m,) if m != "read" else ()) + tuple(f for f in FLAGS if row[f]["value"])


def call_dimensions(row: dict | None, arguments) -> tuple[dict | None, str | None]:
    """(the dimension row of this call, the argument rule's verdict or None): a tool with an argument rule whose
    argument reads is a read for this call; one whose argument does not read counts as execution and as a
    destructive write."""
    from riskrank_jax.registry.arguments import judge_arguments

    if not row or not row.get("argument_rule") or not isinstance(arguments, dict):
        return row, None
    judged = judge_arguments(row["argument_rule"], arguments)
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in row.items()}
    if judged.reads:
        out["mutation"] = {"value": "read", "source": judged.rule}
        out["execution"] = {"value": False, "source": None}
    else:
        out["execution"] = {"value": True, "source": judged.rule}
        if out["mutation"]["value"] != "destructive":  # a write the arguments chose: of unknown reach
            out["mutation"] = {"value": "destructive", "source": judged.rule}
    return out, judged.rule


def row_level(row: dict) -> int:
    """level_from_dimensions of one dimension row."""
    mut = MUTATIONS.index(row["mutation"]["value"])
    return int(level_from_dimensions([mut], [[row[f]["value"] for f in FLAGS]])[0])


def _ask(policy: Policy, what: str, rule: str) -> Decision:
    if policy.confirm == "elicit":
        return Decision("confirm", f"{what}: needs the user's confirmation", rule)
    return Decision("refuse", f"{what}, and the policy refuses such calls (confirm: refuse)", rule)


def decide(policy: Policy, names: tuple[str, ...], level: int, source: str, dimensions: dict | None = None,
           arguments=None, flow: str | None = None) -> Decision:
    """The decision for calling a tool known by ``names`` (its gateway name first) at risk ``level`` (1..5)
    whose level came from ``source``.

    dimensions: the tool's dimension row (`DimensionAssessment.row`) or None when its level does not come from
    dimensions (declared risk, an explicit risk head); arguments: this call's arguments (None: not known, as in
    a listing); flow: the name of a tool that returned untrusted content earlier in this session, or None.
    """
    pattern = _matching(policy.deny, names)
    if pattern is not None:
        return Decision("refuse", f"'{names[0]}' matches the policy's deny pattern '{pattern}'", "deny")
    row, arg_rule = call_dimensions(dimensions, arguments)
    if row is not None and arg_rule is not None and source != "declared":
        level, source = row_level(row), describe(row)
    what = f"risk level {level} ({source})"
    active = active_dimensions(row)
    if flow is not None and policy.session_flow:
        hit = [d for d in FLOW_DIMENSIONS if d in active]
        if hit:
            return _ask(policy, f"{what}: '{flow}' returned untrusted content earlier in this session, and a "
                                f"{' / '.join(hit)} call after it could leak data or act on injected instructions",
                        "session flow")
    pattern = _matching(policy.allow, names)
    if pattern is not None:
        return Decision("allow", f"'{names[0]}' matches the policy's allow pattern '{pattern}' ({what})",
                        "allow pattern")
    asked = [d for d in active if d in policy.ask_dimensions]
    if asked:
        return _ask(policy, f"{what}: the policy asks for {', '.join(asked)} calls", "dimension")
    rule = arg_rule or "level"
    if level <= policy.allow_level:
        return Decision("allow", f"{what} is at or below allow_level {policy.allow_level}", rule)
    risky = [d for d in active if d != "untrusted_content"]
    if risky and source != "declared" and all(d in policy.allow_dimensions for d in risky):
        return Decision("allow", f"{what}: the policy allows {', '.join(risky)} calls", "dimension")
    return _ask(policy, f"{what} is above allow_level {policy.allow_level}", rule)


__all__ = ["Policy", "Decision", "decide", "call_dimensions", "active_dimensions", "row_level", "CONFIRM_MODES",
           "DEFAULT_ALLOW_LEVEL", "FLOW_DIMENSIONS"]
