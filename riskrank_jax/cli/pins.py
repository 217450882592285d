"""`riskrank-jax pins`: review and accept the tool definitions the gateway pinned (`serve.pins`).

    riskrank-jax pins list [--state-dir DIR] [--json]        # every pinned tool and its status
    riskrank-jax pins show files.read_file                    # every definition seen of one tool, oldest first
    riskrank-jax pins accept files.read_file [--server S] [--all]

Why a command of its own: a changed or quarantined tool asks on every call until a person accepts its current
definition, and that person reviews it here, outside the agent's loop (a running gateway reads the store on
every decision, so an acceptance takes effect at its next call).
"""

from __future__ import annotations

import json

import click

from riskrank_jax.errors import RiskRankError
from riskrank_jax.serve.pins import PinStore

STATE_DIR_HELP = ("The gateway's state directory (the SQLite state store: pins, audit records, session flows; "
                  "the audit key). Default: $RISKRANK_STATE, else "
                  "$XDG_STATE_HOME/riskrank-jax, else ~/.local/state/riskrank-jax.")


DATABASE_HELP = ("The PostgreSQL database the gateway's replicas share (postgresql://USER@HOST/DB; a password is "
                 "best kept in ~/.pgpass or $PGPASSWORD, not in the URL). Default: $RISKRANK_DATABASE, else SQLite "
                 "in the state directory.")


def state_dir_option(f):
    """--state-dir and --database: where the gateway's state store is (`serve.store.open_store`)."""
    f = click.option("--database", type=str, default=None, metavar="URL", help=DATABASE_HELP)(f)
    return click.option("--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
                        help=STATE_DIR_HELP)(f)


@click.group("pins")
def pins_group():
    """Review and accept the tool definitions `riskrank-jax serve` pinned.

    The gateway records each downstream tool's definition (name, description, schemas, annotations) when it
    first sees it. A tool whose definition changed since it was accepted, or that is held in quarantine
    (policy.quarantine_new_servers), asks the user on every call until you accept it here.
    """


@pins_group.command("list")
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per pinned tool, one per line.")
@click.option("--status", type=click.Choice(["accepted", "changed", "quarantined"]), default=None,
              help="Only the tools with this status.")
def pins_list(state_dir, database, as_json, status):
    """Every pinned tool: status, accepted and current definition (first 12 hex digits of their sha256),
    when it changed, who accepted it."""
    rows = [r for r in PinStore(state_dir, database).rows() if status is None or r["status"] == status]
    if as_json:
        for r in rows:
            click.echo(json.dumps(r))
        return
    if not rows:
        click.echo("no pinned tools" + (f" with status {status}" if status else ""))
        return
    width = max(len(r["tool"]) for r in rows)
    click.echo(f"{'tool'.ljust(width)}  status       accepted      current       definitions  changed at")
    for r in rows:
        click.echo(f"{r['tool'].ljust(width)}  {r['status']:<11}  {r['accepted'] or '-':<12}  {r['current']:<12}  "
                   f"{r['definitions_seen']:>11}  {r['changed_at'] or '-'}")


@pins_group.command("show")
@click.argument("tool")
@state_dir_option
def pins_show(tool, state_dir, database):
    """Every definition seen of TOOL (server.tool), oldest first, as JSON: compare them before accepting."""
    try:
        seen = PinStore(state_dir, database).definitions(tool)
    except KeyError as e:
        raise RiskRankError(e.args[0]) from None
    click.echo(json.dumps(seen, indent=2, ensure_ascii=False))


@pins_group.command("accept")
@click.argument("tools", nargs=-1)
@click.option("--server", "servers", multiple=True, metavar="NAME", help="Accept every tool of this server.")
@click.option("--all", "everything", is_flag=True, help="Accept every pinned tool's current definition.")
@state_dir_option
def pins_accept(tools, servers, everything, state_dir, database):
    """Accept the current definition of each TOOL (server.tool): its calls are decided by the policy again."""
    if not (tools or servers or everything):
        raise click.UsageError("name the tools to accept (server.tool), or give --server NAME or --all")
    try:
        done = PinStore(state_dir, database).accept(tools, servers, everything)
    except KeyError as e:
        raise RiskRankError(e.args[0]) from None
    for name in done:
        click.echo(f"accepted {name}")


__all__ = ["pins_group", "state_dir_option"]
