"""Which calls the gateway lets through: `Policy` (the config's ``policy`` block) and `decide_call`, the one
function from what the gate knows of a tool now (`ToolState`: its current definition, its pin, its assessed
dimensions), a call's arguments and the session's flow to a `Decision` with its rule and reason. The MCP layer
only translates the decision; nothing else decides.

Order of the rules (the first that applies decides; `Decision.rule` names it, the audit log records it):

1. **unknown tool** / **not callable** / **unavailable**: a name the gateway did not list, a tool listed from a
   registry file, a tool its server no longer lists, a server that is down: refused;
2. ``deny`` patterns refuse ("deny"); patterns match the tool's identity ``server.tool`` only;
3. **schema**: arguments that do not validate against the tool's current ``inputSchema`` are refused with what
   is wrong (`serve.call_arguments.schema_errors`), before anything is forwarded;
4. **pin** ("state store", "quarantine", "definition changed"): a state store the gateway cannot read refuses (fail
   closed); a tool held in quarantine, or whose definition changed since it was accepted (or is not yet
   assessed), asks, whatever its level and the allow patterns (`serve.pins`);
5. **agent instructions**: a tool whose description or schema carries instructions aimed at the agent
   (`registry.poisoning`) asks;
6. **secret in arguments**: a secret found in an argument value (`serve.call_arguments.find_secrets`) going to
   a public-sink, open-world or unannotated tool asks; an argument naming a secret file (``~/.ssh/id_rsa``,
   ``.env``) makes the call a secret source for step 10;
7. **arguments** ("sql: ...", "shell: ...", "code: ..."): for a tool whose risk lies in one argument
   (`registry.dimensions.argument_rule`), `registry.arguments.judge_arguments` reads this call's argument — one
   read-only SQL statement or one read-only shell command is a read for this call (mutation read, no
   execution); anything else counts as execution and a destructive write for this call. Steps 8–11 then see the
   call's dimensions and level;
8. **session flow** ("session flow"): once a tool that returns untrusted content has answered in this session,
   a call that is a public sink, destructive or a secret source needs confirmation even when its level alone
   would pass — prompt-injected content could otherwise leak data or act through it (``session_flow``);
9. ``allow`` patterns let through ("allow pattern");
10. **dimensions** ("dimension"): a call with a dimension in ``ask_dimensions`` needs confirmation; one above
    ``allow_level`` whose every risky dimension is in ``allow_dimensions`` goes through;
11. **level** ("level"): at or below ``allow_level`` it goes through; above it the call needs confirmation
    (``confirm: "elicit"``, asked through MCP elicitation when the client supports it) or is refused
    (``confirm: "refuse"``).

With the default ``allow_level`` 3 and dimension-based levels (`registry.dimensions.level_from_dimensions`),
reads and local reversible writes pass and every destructive, public-sink, secret-source, execution or money
call asks. Every reason names the level and the dimensions with their sources, in the gateway's own words: the
only foreign text in a reason is a validated tool identity or an escaped, capped name (`serve.identity.shown`).

Why deny first: a deny is an audit decision, and no risk level, argument or allow pattern may override it.
Why pins and instructions before allow patterns: a pattern was written for the tool as it was when the user
wrote it, not for what a server turned it into since.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass

from riskrank_jax.registry.dimensions import (DEFAULT_ALLOW_LEVEL, DIMENSION_NAMES, FLAGS, MUTATIONS, describe,
                                              level_from_dimensions)

CONFIRM_MODES = ("elicit", "refuse")
FLOW_DIMENSIONS = ("public_sink", "destructive", "secret_source")  # asked for after untrusted content


@dataclass(frozen=True)
class Policy:
    """allow_level: highest risk level (1..5) that passes without confirmation; allow / deny: globs over the
    tool's identity ``server.tool``; trusted_servers: servers whose MCP annotations may lower a tool's risk;
    confirm: "elicit" or "refuse" for calls that need confirmation; ask_dimensions / allow_dimensions: dimension
    names (DIMENSION_NAMES) that always ask / that do not count against a call; session_flow: apply the
    session-flow rule; quarantine_new_servers: hold every tool seen for the first time until a person accepts
    it (`riskrank-jax pins accept`)."""

    allow_level: int = DEFAULT_ALLOW_LEVEL
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    trusted_servers: tuple[str, ...] = ()
    confirm: str = "elicit"
    ask_dimensions: tuple[str, ...] = ()
    allow_dimensions: tuple[str, ...] = ()
    session_flow: bool = True
    quarantine_new_servers: bool = False

    def __post_init__(self):
        for key in ("ask_dimensions", "allow_dimensions"):
            bad = [d for d in getattr(self, key) if d not in DIMENSION_NAMES]
            if bad:
                raise ValueError(f"policy.{key}: unknown dimension(s) {', '.join(map(repr, bad))} "
                                 f"(known: {', '.join(DIMENSION_NAMES)})")


@dataclass(frozen=True)
class Decision:
    """action: "allow", "confirm" or "refuse"; reason: one sentence for the client and the audit log, in the
    gateway's own words; rule: the rule that decided (module docstring); secrets: the kinds of secret found in
    the arguments, with their argument paths ({"path", "kind"}; never a value), for the audit log; dimensions:
    the dimension row of this call (the tool's, as this call's arguments make it: secret files they name, the
    argument rule's verdict), None when the tool's level does not come from dimensions or the arguments are not
    an object — computed once by `decide_call`, recorded by the audit log."""

    action: str
    reason: str
    rule: str = "level"
    secrets: tuple = ()
    dimensions: dict | None = None


@dataclass(frozen=True)
class ToolState:
    """What the gate knows of one tool at the moment of a call.

    name: the gateway identity ``server.tool``; server: None for a tool listed from a registry file (never
    callable); level, source, dimensions: the catalog's assessment (dimensions: the tool's dimension row, or
    None when its level does not come from dimensions); definition: the MCP tool object its server lists now
    (None: it no longer lists it); assessed: the assessment is of that definition; pin: its `serve.pins`
    status; unavailable: why it cannot be called now (server down, unreadable schema), or None; instructions:
    the source of its ``agent_instructions`` dimension ("detector: <categories>") or None."""

    name: str
    server: str | None
    level: int
    source: str
    dimensions: dict | None
    definition: dict | None
    assessed: bool = True
    pin: str = "accepted"
    unavailable: str | None = None
    instructions: str | None = None


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
    extra = ("agent_instructions",) if (row.get("agent_instructions") or {}).get("value") else ()
    return ((m,) if m != "read" else ()) + tuple(f for f in FLAGS if row[f]["value"]) + extra


def call_dimensions(row: dict | None, arguments) -> tuple[dict | None, str | None]:
    """(the dimension row of this call, the argument rule's verdict or None): a tool with an argument rule whose
    argument reads is a read for this call; one whose argument does not read counts as execution and as a
    destructive write."""
    if not row or not row.get("argument_rule") or not isinstance(arguments, dict):
        return row, None
    # deferred: the argument readers (sqlglot, bashlex) load on a call's first argument rule, not for searches
    from riskrank_jax.registry.arguments import judge_arguments

    judged = judge_arguments(row["argument_rule"], arguments)
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in row.items()}
    if getattr(judged, "secret_source", False):
        out["secret_source"] = {"value": True, "source": judged.rule}
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
    instructions = bool((row.get("agent_instructions") or {}).get("value"))
    return int(level_from_dimensions([mut], [[row[f]["value"] for f in FLAGS]], [instructions])[0])


def _ask(policy: Policy, what: str, rule: str, secrets=()) -> Decision:
    if policy.confirm == "elicit":
        return Decision("confirm", f"{what}: needs the user's confirmation", rule, secrets)
    return Decision("refuse", f"{what}, and the policy refuses such calls (confirm: refuse)", rule, secrets)


def decide(policy: Policy, names: tuple[str, ...], level: int, source: str, dimensions: dict | None = None,
           arguments=None, flow: str | None = None) -> Decision:
    """Steps 2 and 7-11 of the module docstring (`decide_call` runs them last): the decision for calling a tool
    known by ``names`` (its identity first) at risk ``level`` (1..5) whose level came from ``source``.

    dimensions: the tool's dimension row (`DimensionAssessment.row`) or None when its level does not come from
    dimensions (declared risk, an explicit risk head); arguments: this call's arguments (None: not known, as in
    a listing); flow: the name of a tool that returned untrusted content earlier in this session, or None.
    """
    row, arg_rule = call_dimensions(dimensions, arguments)
    return _decide_row(policy, names, level, source, row, arg_rule, flow)


def _decide_row(policy: Policy, names: tuple[str, ...], level: int, source: str, row: dict | None,
                arg_rule: str | None, flow: str | None) -> Decision:
    """`decide` on the call's dimension row ``row`` (`call_dimensions`: ``arg_rule`` the argument rule's verdict,
    None when no rule judged this call)."""
    pattern = _matching(policy.deny, names)
    if pattern is not None:
        return Decision("refuse", f"'{names[0]}' matches the policy's deny pattern '{pattern}'", "deny")
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


def _open_world(definition: dict, row: dict | None) -> bool:
    """Whether a secret given to this tool may leave: a public sink, or a tool not annotated as closed-world
    (MCP's openWorldHint defaults to true; an unannotated tool is presumed to reach outside)."""
    if row is not None and row["public_sink"]["value"]:
        return True
    hints = definition.get("annotations") or {}
    return hints.get("openWorldHint") is not False


def _with_secret_paths(row: dict | None, found) -> dict | None:
    """The dimension row of a call whose arguments name secret files: a secret source for this call."""
    if row is None or not found or row["secret_source"]["value"]:
        return row
    out = dict(row)
    out["secret_source"] = {"value": True, "source": f"arguments: {', '.join(sorted({f.kind for f in found}))}"}
    return out


def decide_call(policy: Policy, tool: ToolState | None, arguments=None, flow: str | None = None) -> Decision:
    """The decision for one call of ``tool`` with ``arguments`` (None: no call, as in a listing, which skips the
    argument checks) in a session whose ``flow`` is the tool that returned untrusted content earlier (None:
    none did), carrying the call's dimension row (`Decision.dimensions`). The rules and their order: the module
    docstring. Pure: it reads nothing but its inputs."""
    if tool is None:
        return Decision("refuse", "unknown tool: the gateway did not list it (use search_tools to find tools)",
                        "unknown tool")
    row, call = tool.dimensions, (tool.dimensions, None)
    if isinstance(arguments, dict):
        # deferred: the argument checks (detect_secrets, jsonschema, sqlglot) load on a first call, not for searches
        from riskrank_jax.serve.call_arguments import secret_paths

        row = _with_secret_paths(row, secret_paths(arguments))
        call = call_dimensions(row, arguments)  # once: the rules read it, the audit line records it
    decision = _decide_tool(policy, tool, arguments, flow, row, call)
    return dataclasses.replace(decision, dimensions=call[0] if isinstance(arguments, dict) else None)


def _decide_tool(policy: Policy, tool: ToolState, arguments, flow: str | None, row: dict | None,
                 call: tuple[dict | None, str | None]) -> Decision:
    """Steps 1-11 for a listed tool: ``row`` its dimension row with the secret files the arguments name,
    ``call`` (`call_dimensions` of it: this call's row, the argument rule's verdict)."""
    if tool.server is None:
        return Decision("refuse", f"'{tool.name}' is listed from a registry file, not served by any MCP server",
                        "not callable")
    if arguments is not None and not isinstance(arguments, dict):
        return Decision("refuse", "arguments must be a JSON object", "schema")
    pattern = _matching(policy.deny, (tool.name,))
    if pattern is not None:
        return Decision("refuse", f"'{tool.name}' matches the policy's deny pattern '{pattern}'", "deny")
    if tool.definition is None:
        return Decision("refuse", f"server '{tool.server}' no longer lists '{tool.name}'", "unavailable")
    if tool.unavailable is not None:
        return Decision("refuse", tool.unavailable, "unavailable")
    secrets = ()
    level, source = tool.level, tool.source
    if arguments is not None:
        # deferred: loaded on the first call (decide_call's secret_paths loads the module already)
        from riskrank_jax.serve.call_arguments import find_secrets, schema_errors

        errors = schema_errors(tool.definition.get("inputSchema") or {"type": "object"}, arguments)
        if errors:
            return Decision("refuse", f"the arguments do not match the input schema of '{tool.name}': "
                                      + "; ".join(errors), "schema")
        secrets = tuple({"path": f.path, "kind": f.kind} for f in find_secrets(arguments))
        if row is not tool.dimensions and source != "declared":
            level, source = row_level(row), describe(row)
    what = f"risk level {level} ({source})"
    if tool.pin == "unavailable":
        return Decision("refuse", "the gateway cannot read its state store, so it cannot tell whether this tool's "
                                  "definition changed or what this session did before; refused (fail closed)",
                        "state store", secrets)
    if tool.pin == "quarantined":
        return _ask(policy, f"'{tool.name}' is in quarantine until a person accepts it (riskrank-jax pins "
                            f"accept {tool.name}); {what}", "quarantine", secrets)
    if tool.pin != "accepted" or not tool.assessed:
        why = ("its definition changed since it was accepted (riskrank-jax pins accept " + tool.name + ")"
               if tool.pin != "accepted" else "the server lists a definition the gateway has not assessed yet")
        return _ask(policy, f"'{tool.name}': {why}; {what}", "definition changed", secrets)
    if tool.instructions is not None:
        return _ask(policy, f"'{tool.name}' has instructions aimed at the agent in its description or schema "
                            f"({tool.instructions}); {what}", "agent instructions", secrets)
    if secrets and _open_world(tool.definition, row):
        kinds = ", ".join(sorted({s["kind"] for s in secrets}))
        return _ask(policy, f"the arguments hold a secret ({kinds}) and '{tool.name}' may send it outside "
                            f"(public sink, open-world or unannotated); {what}", "secret in arguments", secrets)
    d = _decide_row(policy, (tool.name,), level, source, *call, flow)
    return dataclasses.replace(d, secrets=secrets)


__all__ = ["Policy", "Decision", "ToolState", "decide_call", "decide", "call_dimensions", "active_dimensions",
           "row_level", "CONFIRM_MODES", "DEFAULT_ALLOW_LEVEL", "FLOW_DIMENSIONS"]
