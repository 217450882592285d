"""`riskrank-jax audit`: ask the gateway's audit records questions (`serve.audit.query_records`).

    riskrank-jax audit --server slack --decision confirmed --since 7d
    riskrank-jax audit --outcome interrupted --format json
    riskrank-jax audit --database postgresql://gw@db/gateway --format jsonl > audit.jsonl    # an export

Why a command of its own: the records are in the state store (SQLite in the state directory, or the PostgreSQL
database the replicas share), and a platform team asks them questions without reading the database.
"""

from __future__ import annotations

import datetime as dt
import json
import re

import click

from riskrank_jax.cli.pins import state_dir_option

DECISIONS = ("allowed", "confirmed", "refused")
OUTCOMES = ("open", "ok", "error", "interrupted", "not forwarded")
FORMATS = ("table", "json", "jsonl")
TABLE = (("time", 19), ("decision", 9), ("outcome", 13), ("rule", 18), ("risk", 4), ("tool", 0), ("session", 12))
RELATIVE = re.compile(r"^(\d+)([smhdw])$")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str | None, option: str) -> str | None:
    """``text`` as the store's time (UTC ISO 8601, milliseconds): an ISO 8601 date or time (UTC unless it says
    otherwise) or a span back from now ("30m", "12h", "7d", "2w"); click.BadParameter naming ``option``."""
    if text is None:
        return None
    m = RELATIVE.match(text.strip())
    if m:
        when = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=int(m.group(1)) * UNIT_S[m.group(2)])
    else:
        try:
            when = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise click.BadParameter(f"{text!r} is neither an ISO 8601 time (YYYY-MM-DD or YYYY-MM-DDTHH:MM) nor a "
                                     "span back from now (30m, 12h, 7d, 2w)", param_hint=option) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")


def table(rows: list[dict]) -> str:
    """The records as a text table, newest first; the tool column as wide as its longest name."""
    if not rows:
        return "no audit records match"
    cells = [{"time": r["time"][:19].replace("T", " "), "decision": r["decision"], "outcome": r["outcome"] or "open",
              "rule": r["rule"] or "-", "risk": "-" if r["risk_level"] is None else str(r["risk_level"]),
              "tool": r["tool"], "session": r["session"] or "-"} for r in rows]
    widths = {k: w or max(len(c[k]) for c in cells) for k, w in TABLE}
    lines = ["  ".join(k.ljust(widths[k]) for k, _ in TABLE).rstrip()]
    lines += ["  ".join(c[k].ljust(widths[k]) for k, _ in TABLE).rstrip() for c in cells]
    return "\n".join(lines)


@click.command("audit")
@click.option("--since", default=None, metavar="TIME", help="Records from this time on: ISO 8601 (UTC unless it "
              "says otherwise) or a span back from now: 30m, 12h, 7d, 2w.")
@click.option("--until", default=None, metavar="TIME", help="Records before this time (as --since).")
@click.option("--server", default=None, metavar="NAME", help="Calls of this downstream server's tools.")
@click.option("--tool", default=None, metavar="SERVER.TOOL", help="Calls of this tool (the gateway's name).")
@click.option("--decision", type=click.Choice(DECISIONS), default=None, help="Calls the gateway decided so.")
@click.option("--rule", default=None, metavar="RULE", help='Calls decided by this rule (e.g. "deny", "session flow", '
              '"state store"; the column "rule" of the table).')
@click.option("--session", default=None, metavar="ID", help="Calls of one MCP session (its 12-digit audit id).")
@click.option("--outcome", type=click.Choice(OUTCOMES), default=None,
              help="What became of the call: open (forwarded, no answer yet), ok, error, interrupted (cancelled "
                   "or its replica stopped), not forwarded (refused).")
@click.option("--replica", default=None, metavar="ID", help="Calls decided by this gateway replica.")
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True, help="At most this many records "
              "(newest first).")
@click.option("--all", "everything", is_flag=True, help="Every matching record (no --limit).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table; json (one array, every field); jsonl (one record per line: an export).")
@state_dir_option
def audit_command(since, until, server, tool, decision, rule, session, outcome, replica, limit, everything, fmt,
                  state_dir, database):
    """Query the audit records of `riskrank-jax serve`: one per call decision, newest first.

    Each record holds the time, tool, server, risk level and its source, the decision (allowed, confirmed,
    refused), its reason and rule, the call's risk dimensions, the pin status, the MCP session's audit id, a
    keyed digest of the arguments (never their values), the replica that decided it, and the call's outcome
    once its server answered. Filters combine (AND).
    """
    # deferred: the store is needed only when the command runs, not for `riskrank-jax --help`
    import os

    from riskrank_jax.errors import ConfigError
    from riskrank_jax.serve.audit import query_records
    from riskrank_jax.serve.pins import resolve_state_dir
    from riskrank_jax.serve.store import DB_NAME, open_store

    path = resolve_state_dir(state_dir) / DB_NAME
    if not (database or os.environ.get("RISKRANK_DATABASE")) and not path.exists():
        raise ConfigError("no state store here: the gateway has not run with this state directory (give "
                          "--state-dir DIR or --database URL)", path)
    store = open_store(state_dir, database)
    rows = query_records(store, None if everything else limit, since=parse_time(since, "--since"),
                         until=parse_time(until, "--until"), server=server, tool=tool, decision=decision, rule=rule,
                         session=session, outcome=outcome, replica=replica)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    elif fmt == "jsonl":
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False))
    else:
        click.echo(table(rows))


__all__ = ["audit_command", "parse_time"]
