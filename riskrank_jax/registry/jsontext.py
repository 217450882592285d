"""JSON and JSON Lines reading that remembers where each object starts, for error messages.

`parse_json_text` returns ordinary Python values, except that every JSON object is a `LineDict` (a dict
with a `.line` attribute: the 1-based line of its opening brace). Errors are MalformedJSONError with the
file, line and column.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from pathlib import Path

from riskrank_jax.errors import EmptyRegistryError, MalformedJSONError

JSONL_SUFFIXES = (".jsonl", ".ndjson")


class LineDict(dict):
    """A dict parsed from JSON text; `line` is the 1-based line of its `{`."""

    __slots__ = ("line",)


def line_of(obj) -> int | None:
    """The line a parsed object starts on, or None (inline Python objects, non-objects)."""
    return getattr(obj, "line", None)


def _decoder(text: str, first_line: int) -> json.JSONDecoder:
    newlines = [m.start() for m in re.finditer("\n", text)]
    dec = json.JSONDecoder()

    def parse_object(s_and_end, *args, **kwargs):
        obj, end = json.decoder.JSONObject(s_and_end, *args, **kwargs)
        out = LineDict(obj)
        out.line = first_line + bisect.bisect_right(newlines, s_and_end[1] - 1)
        return out, end

    dec.parse_object = parse_object
    dec.scan_once = json.scanner.py_make_scanner(dec)
    return dec


def parse_json_text(text: str, path: str | Path | None = None, first_line: int = 1):
    """Parse one JSON document; raise MalformedJSONError naming line and column."""
    try:
        return _decoder(text, first_line).decode(text)
    except json.JSONDecodeError as e:
        raise MalformedJSONError(f"malformed JSON: {e.msg} (line {e.lineno + first_line - 1}, column {e.colno})",
                                 path, e.lineno + first_line - 1) from None
    except RecursionError:
        raise MalformedJSONError("malformed JSON: nested too deeply", path, first_line) from None


def parse_jsonl_text(text: str, path: str | Path | None = None) -> list:
    """One JSON value per non-blank line; errors name the line and column."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            out.append(parse_json_text(raw, path, first_line=lineno))
    return out


def _line_col(data: bytes, pos: int) -> tuple[int, int]:
    """1-based line and (byte) column of offset `pos`."""
    return data.count(b"\n", 0, pos) + 1, pos - (data.rfind(b"\n", 0, pos) + 1) + 1


def read_json_file(path: str | Path):
    """A .json file's value, or for .jsonl / .ndjson (or a .json that holds several values, one per line)
    the list of its lines' values."""
    path = Path(path)
    if not path.is_file():
        raise MalformedJSONError("file not found", path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        line, col = _line_col(e.object, e.start)
        raise MalformedJSONError(f"not UTF-8 text (line {line}, column {col})", path, line) from None
    if not text.strip():
        raise EmptyRegistryError("no tools: the file is empty", path)
    if path.suffix.lower() in JSONL_SUFFIXES:
        return parse_jsonl_text(text, path)
    try:
        return parse_json_text(text, path)
    except MalformedJSONError as first:
        if "Extra data" not in first.message:
            raise
        try:
            return parse_jsonl_text(text, path)
        except MalformedJSONError:
            raise first from None
