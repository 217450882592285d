"""Format detection and the adapters: one parsed JSON document -> Tool entries and warnings.

Accepted (detected per document and per entry, so one file may mix them):
  * MCP: a `tools/list` JSON-RPC response, its `result`, a list of Tool objects, or several pages in a list;
  * OpenAI Chat Completions tools `{"type": "function", "function": {name, description, parameters}}`;
  * OpenAI Responses tools `{"type": "function", name, description, parameters}`;
  * Anthropic tools `{name, description, input_schema}`;
  * plain `{name, description[, risk]}` entries (JSON list or JSON Lines);
  * BEIR `corpus.jsonl` lines `{_id, title, text}`.
Any entry may carry `risk` (an integer 1..5, or null for "not declared").

Why per entry: real tool lists mix formats, and one file may hold several.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from riskrank_jax.errors import UnknownFormatError
from riskrank_jax.registry.jsontext import line_of

ACCEPTED_FORMATS = (
    "MCP tools/list response, its result {tools: [...]}, a list of MCP Tool objects {name, inputSchema, "
    "annotations}, or several such pages in a list",
    'OpenAI Chat Completions tools [{"type": "function", "function": {name, description, parameters}}]',
    'OpenAI Responses tools [{"type": "function", name, description, parameters}]',
    "Anthropic tools [{name, description, input_schema}]",
    "a JSON list or JSON Lines of {name, description[, risk]}",
    "a BEIR corpus.jsonl of {_id, title, text}",
)


def accepted_formats_text() -> str:
    return "accepted formats: " + "; ".join(ACCEPTED_FORMATS)


@dataclass(frozen=True)
class Entry:
    """A tool entry found in a document: the raw object, where it is, and the MCP server that listed it."""

    item: object
    line: int | None
    server: str | None


def entry_format(item) -> str | None:
    """The format of one tool entry, "skip" for built-in / server tools, or None when unrecognised."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "function":
        return "openai-chat" if "function" in item else "openai-responses"
    if "inputSchema" in item or "annotations" in item:
        return "mcp"
    if "input_schema" in item:
        return "anthropic"
    if isinstance(kind, str) and kind != "custom":
        return "skip"
    if "_id" in item:
        return "beir"
    if "name" in item or "description" in item:
        return "plain"
    return None


def is_page(item) -> bool:
    """A JSON-RPC response or a `{tools: [...]}` result (rather than a tool entry)."""
    if not isinstance(item, dict) or "name" in item:
        return False
    return "jsonrpc" in item or "result" in item or "tools" in item


def _server_name(doc: dict) -> str | None:
    info = doc.get("serverInfo")
    name = info.get("name") if isinstance(info, dict) else doc.get("server")
    return name.strip() if isinstance(name, str) and name.strip() else None


def iter_entries(doc, path=None, server: str | None = None) -> Iterator[Entry]:
    """Walk a parsed document (response, result, page list or tool list) and yield its tool entries."""
    if isinstance(doc, list):
        for item in doc:
            if is_page(item):
                yield from iter_entries(item, path, server)
            else:
                yield Entry(item, line_of(item), server)
        return
    if not isinstance(doc, dict):
        raise UnknownFormatError(f"expected a JSON object or list, got {json_kind(doc)}; {accepted_formats_text()}",
                                 path, line_of(doc))
    server = _server_name(doc) or server
    if not is_page(doc):
        if entry_format(doc) is None:
            raise UnknownFormatError(f"not a tool list nor a tool (keys: {', '.join(sorted(map(str, doc))[:8])}); "
                                     f"{accepted_formats_text()}", path, line_of(doc))
        yield Entry(doc, line_of(doc), server)
    elif "result" in doc:
        yield from iter_entries(doc["result"], path, server)
    elif "tools" in doc:
        tools = doc["tools"]
        if not isinstance(tools, list):
            raise UnknownFormatError(f"'tools' must be a list, got {json_kind(tools)}", path, line_of(doc))
        for item in tools:
            yield Entry(item, line_of(item) or line_of(doc), server)
    elif "error" in doc:
        raise UnknownFormatError(f"a JSON-RPC error response, not a tool list: {str(doc['error'])[:200]}",
                                 path, line_of(doc))
    else:
        raise UnknownFormatError("a JSON-RPC response without a 'result'", path, line_of(doc))


def json_kind(value) -> str:
    """"an object", "a list", "a string", "a boolean", "null" or "a number", for messages."""
    for kind, name in ((dict, "an object"), (list, "a list"), (str, "a string"), (bool, "a boolean"),
                       (type(None), "null")):
        if isinstance(value, kind):
            return name
    return "a number"
