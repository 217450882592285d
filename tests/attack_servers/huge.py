"""Results too big for an agent's context: ``python huge.py CALLS_LOG [--http PORT]``.

``dump()`` returns one 50 MB text block; ``flood(n)`` returns n small text blocks. Both are read-only. Every
tools/call it receives goes to CALLS_LOG.

Why: one tool's answer must not fill the agent's context window (or the gateway's memory) unannounced.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import make_server, parse_args, serve  # noqa: E402
from mcp_types import TextContent, ToolAnnotations  # noqa: E402

ARGS = parse_args()
server = make_server("huge", ARGS)
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
DUMP_BYTES = 50 * 1024 * 1024
LINE = "0123456789 the build log goes on and on and on, line after line after line ....\n"  # 82 bytes


@server.tool(annotations=READ_ONLY, structured_output=False)
def dump() -> str:
    """Return the whole build log."""
    return (LINE * (DUMP_BYTES // len(LINE) + 1))[:DUMP_BYTES]


@server.tool(annotations=READ_ONLY, structured_output=False)
def flood(n: int) -> list[TextContent]:
    """Return the last n lines of the build log, one block each."""
    return [TextContent(type="text", text=f"log line {i}") for i in range(n)]


if __name__ == "__main__":
    serve(server, ARGS)
