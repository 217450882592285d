"""A tool result cut to a size the gateway passes on (``limits.max_result_bytes``).

    result, note = cap_result(result, limits.max_result_bytes)   # note: None when nothing was cut

Sizes are compact-JSON sizes in UTF-8, as the result goes on the wire: a text block counts its escaped text
plus its keys, an image counts its base64 data, structured content counts its JSON. They are computed
without serializing the big strings (a 50 MB text is counted, not copied).

What is kept, in order: content blocks while they fit; a text block that does not fit is cut at a character
(so UTF-8) boundary and ends the result; an image, audio, resource or resource-link block that does not fit
is left out whole, and later blocks may still fit; structured content is kept only whole, when it still fits
after the content. A final text block says what happened, in the gateway's own words, and the capped result
(the blocks kept, the structured content if kept, and that note, each counted as above) stays within
``max_bytes``.

Why here and not in the transport: the agent gets the start of a long answer and a note it can act on
(narrow the query, page), instead of an error for the whole call.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

NOTE_LABEL = "limits.max_result_bytes"
_ESCAPED_2 = '"\\\n\r\t\b\f'  # one extra byte each in JSON
_CONTROL_6 = tuple(chr(c) for c in range(0x20) if chr(c) not in "\n\r\t\b\f")  # \u00XX: five extra bytes
_UTF8_SLICE = 1 << 20
_BLOCK_KINDS = ("text", "image", "audio", "resource", "resource_link", "other")
_NO_STRUCTURED = "the structured content"


def _utf8_len(s: str) -> int:
    if s.isascii():  # O(1) in CPython
        return len(s)
    return sum(len(s[i:i + _UTF8_SLICE].encode("utf-8", "surrogatepass")) for i in range(0, len(s), _UTF8_SLICE))


def str_json_len(s: str) -> int:
    """Bytes of ``json.dumps(s, ensure_ascii=False)`` in UTF-8, without building it."""
    extra = sum(s.count(c) for c in _ESCAPED_2)
    if not s.isprintable() or extra:  # control characters are rare: count them only when there may be some
        extra += 5 * sum(s.count(c) for c in _CONTROL_6)
    return 2 + _utf8_len(s) + extra


def json_len(value: Any, _depth: int = 0) -> int:
    """Bytes of ``value`` as compact JSON (",", ":"), UTF-8; strings are counted, not serialized."""
    if _depth > 200:
        raise ValueError("structure nested more than 200 levels deep")
    if isinstance(value, str):
        return str_json_len(value)
    if isinstance(value, dict):
        return 1 + max(0, len(value) - 1) + len(value) + sum(  # braces, commas; a ':' per member
            str_json_len(str(k)) + json_len(v, _depth + 1) for k, v in value.items()) + 1
    if isinstance(value, (list, tuple)):
        return 2 + max(0, len(value) - 1) + sum(json_len(v, _depth + 1) for v in value)
    return len(json.dumps(value, default=str))


def _block_dict(block) -> dict:
    if isinstance(block, dict):
        return block
    return block.model_dump(by_alias=True, exclude_none=True, mode="json")


def block_len(block) -> int:
    """A content block's compact-JSON size."""
    return json_len(_block_dict(block))


def _text_prefix(text: str, room: int) -> str:
    """The longest prefix of ``text`` whose JSON string is at most ``room`` bytes (may be "")."""
    if room <= 2:
        return ""
    hi = min(len(text), room - 2)  # a character is at least one byte
    if str_json_len(text[:hi]) <= room:
        return text[:hi]
    lo = 0  # str_json_len(text[:lo]) <= room holds; hi does not fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if str_json_len(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid
    return text[:lo]


def _note_text(kept: int, total: int, left_out: list[str]) -> str:
    text = f"[riskrank-jax gateway: the result was cut: {kept:,} of {total:,} bytes kept ({NOTE_LABEL})"
    if left_out:
        text += "; left out: " + ", ".join(left_out)
    return text + "]"


def cap_result(result, max_bytes: int):
    """(result, note): ``result`` (an `mcp_types.CallToolResult`) unchanged with note None when its content and
    structured content fit in ``max_bytes``; otherwise a copy cut as the module docstring says, ending in a
    text block with the note, and that note."""
    content = list(result.content or [])
    sizes = [block_len(b) for b in content]
    structured = result.structured_content
    try:
        s_size = 0 if structured is None else json_len(structured)
    except ValueError:
        s_size = max_bytes + 1  # too deep to pass on
    total = sum(sizes) + s_size
    if total <= max_bytes:
        return result, None

    # room for the note block: its JSON at the longest it can be (every kind left out, the largest numbers)
    worst = _note_text(total, total, [f"{len(content)} {k} blocks" for k in _BLOCK_KINDS] + [_NO_STRUCTURED])
    budget = max(0, max_bytes - block_len(types.TextContent(type="text", text=worst)))
    kept_blocks, kept, left_out, ended = [], 0, {}, False

    def leave_out(block):
        kind = getattr(block, "type", None) or (block.get("type") if isinstance(block, dict) else None)
        kind = kind if kind in _BLOCK_KINDS else "other"
        left_out[kind] = left_out.get(kind, 0) + 1

    for block, size in zip(content, sizes):
        if ended:
            leave_out(block)
        elif kept + size <= budget:
            kept_blocks.append(block)
            kept += size
        elif getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str):
            overhead = size - str_json_len(block.text)
            prefix = _text_prefix(block.text, budget - kept - overhead)
            if prefix:
                kept_blocks.append(block.model_copy(update={"text": prefix}))
                kept += overhead + str_json_len(prefix)
            else:
                leave_out(block)
            ended = True  # a cut text ends the result: what follows would read as its continuation
        else:
            leave_out(block)
    keep_structured = structured is not None and kept + s_size <= budget
    if keep_structured:
        kept += s_size
    words = [f"{n} {kind} block{'s' if n > 1 else ''}" for kind, n in left_out.items()]
    if structured is not None and not keep_structured:
        words.append(_NO_STRUCTURED)
    note = _note_text(kept, total, words)
    out = result.model_copy(update={
        "content": [*kept_blocks, types.TextContent(type="text", text=note)],
        "structured_content": structured if keep_structured else None,
    })
    return out, note


__all__ = ["cap_result", "json_len", "str_json_len", "block_len", "NOTE_LABEL"]
