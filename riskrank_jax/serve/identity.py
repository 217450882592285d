"""One identity per tool at the gateway: ``server.tool``, always, and the MCP specification's name rules.

* a **server name** (the config's ``mcpServers`` key) is 1–64 characters of ``A-Za-z0-9_-``: never the
  separator ".", so ``server.tool`` splits at its first "." into exactly one server and one tool;
* a **tool name** follows the MCP specification's tool-name rules: 1–128 characters of ``A-Za-z0-9_-.``
  (case-sensitive; no spaces, commas or other characters). A tool whose name breaks them is reported and never
  callable, whatever its spelling;
* `shown` is how any text that a server or an agent wrote (a name, an argument name) appears in what the
  gateway writes: escaped, quoted and capped, so it can never read as the gateway's own words.

Why always prefixed: with a prefix only on collision, one server could list a tool whose bare name is another
server's prefixed name and inherit that name's policy rules.
"""

from __future__ import annotations

import json
import re

from riskrank_jax.errors import escaped

SEPARATOR = "."
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
SHOWN_CHARS = 40


def server_name_problem(name) -> str | None:
    """Why ``name`` cannot name a downstream server (None: it can)."""
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        return (f"server name {shown(name)} must be 1-64 characters of A-Z, a-z, 0-9, '_' and '-' (it prefixes "
                f"its tools as server{SEPARATOR}tool, so it cannot contain '{SEPARATOR}')")
    return None


def tool_name_problem(name) -> str | None:
    """Why ``name`` breaks the MCP specification's tool-name rules (None: it follows them)."""
    if not isinstance(name, str):
        return f"tool name is a JSON {type(name).__name__}, not a string"
    if not 1 <= len(name) <= 128:
        return f"tool name of {len(name)} characters (the MCP specification allows 1-128)"
    if not TOOL_NAME.fullmatch(name):
        return "tool name has characters outside A-Z, a-z, 0-9, '_', '-' and '.' (MCP's tool-name rules)"
    return None


def identity(server: str, tool: str) -> str:
    """The gateway's name of ``tool`` of ``server``: "server.tool"."""
    return f"{server}{SEPARATOR}{tool}"


def split_identity(name: str) -> tuple[str, str] | None:
    """(server, tool) of a gateway identity, None when ``name`` is not one (no separator)."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def shown(text, cap: int = SHOWN_CHARS) -> str:
    """``text`` JSON-quoted, every control, non-ASCII or DEL character as an escape, its content cut to ``cap``
    characters with "…" inside the quotes (a non-string is shown as its JSON; `errors.escaped`)."""
    if not isinstance(text, str):
        text = json.dumps(text, default=str)
    return f'"{escaped(text, cap)}"'


__all__ = ["SEPARATOR", "server_name_problem", "tool_name_problem", "identity", "split_identity", "shown"]
