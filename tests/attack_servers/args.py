"""Tools whose arguments carry the attack: ``python args.py CALLS_LOG [--http PORT]``.

* ``create_ticket(title: str, priority: int)``: an explicit inputSchema, both required and
  ``"additionalProperties": false`` (a wrong type, a missing or an extra argument breaks it);
* ``post_message(channel, text)``: a public sink, where a secret in the text is published;
* ``run_command(command)``: a shell tool, whose risk lies in the command of each call;
* ``lookup(query)``: read-only.

Every tools/call it receives goes to CALLS_LOG, also one the SDK would reject.

Why: the gate decides per call, so what the arguments hold (their shape, a credential, a command that writes)
must be judged before anything is forwarded.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import make_server, parse_args, serve  # noqa: E402
from mcp.server.mcpserver.tools import Tool  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

ARGS = parse_args()
TICKET_SCHEMA = {"type": "object",
                 "properties": {"title": {"type": "string", "description": "One line saying what is wrong."},
                                "priority": {"type": "integer", "minimum": 1, "maximum": 5,
                                             "description": "1 (urgent) to 5 (whenever)."}},
                 "required": ["title", "priority"], "additionalProperties": False}


def create_ticket(title: str, priority: int) -> str:
    """Open a ticket in the team's internal tracker."""
    return f"opened ticket '{title}' at priority {priority}"


ticket = Tool.from_function(create_ticket, annotations=ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
server = make_server("args", ARGS, tools=[ticket.model_copy(update={"parameters": TICKET_SCHEMA})])


@server.tool()
def post_message(channel: str, text: str) -> str:
    """Post a message to a public channel."""
    return f"posted to #{channel}"


@server.tool()
def run_command(command: str) -> str:
    """Run a shell command and return its output."""
    return f"ran: {command}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def lookup(query: str) -> str:
    """Look up a term in the team glossary."""
    return f"{query}: a term of the glossary"


if __name__ == "__main__":
    serve(server, ARGS)
