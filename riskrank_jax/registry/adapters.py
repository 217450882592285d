"""Tool entries of every accepted format -> Tool, with the checks that make bad entries clear errors.

Why strict: a malformed entry is an error naming its file and line, never a silently skipped tool.
"""

from __future__ import annotations

from riskrank_jax.errors import ToolSpecError, UnknownFormatError
from riskrank_jax.registry.formats import Entry, accepted_formats_text, entry_format, json_kind
from riskrank_jax.registry.tool import ANNOTATION_DEFAULTS, Annotations, Tool

_MISSING = object()
# format -> (key of the name, key of the description, key of the input schema)
_KEYS = {
    "mcp": ("name", "description", "inputSchema"),
    "openai-chat": ("name", "description", "parameters"),
    "openai-responses": ("name", "description", "parameters"),
    "anthropic": ("name", "description", "input_schema"),
    "beir": ("_id", "text", None),
    "plain": ("name", "description", "parameters"),
}
FORMAT_LABELS = {"mcp": "MCP", "openai-chat": "OpenAI Chat Completions", "openai-responses": "OpenAI Responses",
                 "anthropic": "Anthropic", "beir": "BEIR corpus", "plain": "plain list"}


def read_entry(entry: Entry, source: str, path: str | None) -> tuple[Tool | None, str | None]:
    """(tool, None) for a tool entry, (None, warning) for a built-in tool that is skipped."""
    fmt = entry_format(entry.item)
    if fmt is None:
        what = "an object" if isinstance(entry.item, dict) else json_kind(entry.item)
        keys = f" with keys {', '.join(sorted(map(str, entry.item))[:8])}" if isinstance(entry.item, dict) else ""
        raise UnknownFormatError(f"unrecognised tool entry ({what}{keys}); {accepted_formats_text()}",
                                 path, entry.line)
    if fmt == "skip":
        name = entry.item.get("name")
        label = f" '{name}'" if isinstance(name, str) else ""
        return None, (f"{path or '<' + source + '>'}{'' if entry.line is None else ':' + str(entry.line)}: "
                      f"skipped built-in tool{label} of type '{entry.item['type']}' (no description to rank)")
    body = entry.item
    if fmt == "openai-chat":
        body = entry.item["function"]
        if not isinstance(body, dict):
            raise ToolSpecError(f"'function' must be an object, got {json_kind(body)}", path, entry.line)
    return _build(body, entry.item, fmt, source, path, entry.line, entry.server), None


def _build(body: dict, outer: dict, fmt: str, source: str, path, line, server) -> Tool:
    name_key, desc_key, schema_key = _KEYS[fmt]
    name = _name(body.get(name_key, _MISSING), fmt, path, line)
    description = body.get(desc_key)
    if description is None:
        description = ""
    elif not isinstance(description, str):
        raise ToolSpecError(f"description of tool '{name}' must be a string, got {json_kind(description)}", path, line)
    warnings: list[str] = []
    if not description.strip():
        warnings.append("empty description")
    title = body.get("title")
    if title is not None and not isinstance(title, str):
        warnings.append(f"title ignored: {json_kind(title)}, not a string")
        title = None
    params: tuple = ()
    if schema_key is not None:
        schema = body.get(schema_key, _MISSING)
        if schema is _MISSING and fmt in ("mcp", "anthropic"):
            warnings.append(f"unreadable schema: no '{schema_key}'")
        elif schema is not _MISSING and schema is not None:
            params = _params(schema, schema_key, warnings)
    annotations = _annotations(body.get("annotations"), warnings) if fmt == "mcp" else None
    risk = _risk(name, _declared_risk(body, outer, fmt), path, line)
    return Tool(name=name, raw_name=name, description=description.strip(), format=fmt, source=server or source,
                title=title, params=params, declared_risk=risk, annotations=annotations, path=path, line=line,
                warnings=tuple(warnings))


def _name(value, fmt: str, path, line) -> str:
    if value is _MISSING or value is None:
        raise ToolSpecError(f"{FORMAT_LABELS[fmt]} tool without a name", path, line)
    if fmt == "beir" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ToolSpecError(f"tool name must be a string, got {json_kind(value)}", path, line)
    if not value.strip():
        raise ToolSpecError("tool without a name (the name is empty)", path, line)
    return value.strip()


def _declared_risk(body: dict, outer: dict, fmt: str):
    for obj in (body, outer, body.get("metadata") if fmt == "beir" else None):
        if isinstance(obj, dict) and obj.get("risk") is not None:
            return obj["risk"]
    return None


def _risk(name: str, value, path, line) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ToolSpecError(f"risk of tool '{name}' is {value!r}; expected an integer 1..5 (or null)", path, line)
    return int(value)


def _params(schema, key: str, warnings: list[str]) -> tuple[tuple[str, str], ...]:
    """(name, description) of the schema's top-level properties; problems become warnings."""
    if not isinstance(schema, dict):
        warnings.append(f"unreadable schema: '{key}' is {json_kind(schema)}, not an object")
        return ()
    props = schema.get("properties", {})
    if props is None:
        return ()
    if not isinstance(props, dict):
        warnings.append(f"unreadable schema: 'properties' is {json_kind(props)}, not an object")
        return ()
    out = []
    for pname, spec in props.items():
        desc = spec.get("description") if isinstance(spec, dict) else None
        if not isinstance(spec, dict):
            warnings.append(f"unreadable schema: property '{pname}' is {json_kind(spec)}, not an object")
        out.append((str(pname), desc.strip() if isinstance(desc, str) else ""))
    return tuple(out)


def _annotations(raw, warnings: list[str]) -> Annotations:
    """MCP annotations with the specification's defaults for absent or null hints."""
    if raw is None:
        return Annotations()
    if not isinstance(raw, dict):
        warnings.append(f"annotations ignored: {json_kind(raw)}, not an object")
        return Annotations()
    values = dict(ANNOTATION_DEFAULTS)
    declared = set()
    for hint in ANNOTATION_DEFAULTS:
        v = raw.get(hint)
        if isinstance(v, bool):
            values[hint] = v
            declared.add(hint)
        elif v is not None:
            warnings.append(f"annotation {hint} ignored: {json_kind(v)}, not a boolean")
    title = raw.get("title") if isinstance(raw.get("title"), str) else None
    return Annotations(read_only=values["readOnlyHint"], destructive=values["destructiveHint"],
                       idempotent=values["idempotentHint"], open_world=values["openWorldHint"], title=title,
                       declared=frozenset(declared))
