"""Read registry files (or in-memory objects), merge them, and namespace names that collide across sources.

Why namespacing: two servers may both expose `search`, and both must stay addressable.
"""

from __future__ import annotations

import os
import warnings as warnings_lib
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from riskrank_jax.errors import DuplicateToolError, EmptyRegistryError
from riskrank_jax.registry.adapters import read_entry
from riskrank_jax.registry.formats import iter_entries
from riskrank_jax.registry.jsontext import read_json_file
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.tool import Tool


class RegistryWarning(UserWarning):
    """A tool entry skipped (built-in tools with no description), also kept in `Registry.warnings`."""


def read_source(doc, source: str, path: str | None) -> tuple[list[Tool], list[str]]:
    """The tools of one parsed document, checked for duplicate names, and the skip warnings."""
    tools: list[Tool] = []
    skipped: list[str] = []
    first: dict[str, Tool] = {}
    for entry in iter_entries(doc, path):
        tool, warning = read_entry(entry, source, path)
        if tool is None:
            skipped.append(warning)
            continue
        if tool.raw_name in first:
            prev = first[tool.raw_name]
            at = "" if prev.line is None else f" (first on line {prev.line})"
            raise DuplicateToolError(f"duplicate tool name '{tool.raw_name}' in one source{at}", path, tool.line)
        first[tool.raw_name] = tool
        tools.append(tool)
    return tools, skipped


def _unique_source_names(names: list[str]) -> list[str]:
    seen: Counter = Counter()
    out = []
    for n in names:
        seen[n] += 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out


def _namespace(groups: list[list[Tool]], separator: str = "/", prefix_all: bool = False) -> list[Tool]:
    """Prefix `source<separator>` to every name that more than one source uses, with a warning on those tools
    (to every name, without a warning, with ``prefix_all``)."""
    owners: dict[str, list[str]] = {}
    for tools in groups:
        for t in tools:
            owners.setdefault(t.raw_name, []).append(t.source)
    out: list[Tool] = []
    for tools in groups:
        for t in tools:
            others = [s for s in owners[t.raw_name] if s != t.source]
            if prefix_all:
                t = replace(t, name=f"{t.source}{separator}{t.raw_name}")
            elif others:
                name = f"{t.source}{separator}{t.raw_name}"
                note = f"duplicate name: '{t.raw_name}' also in {', '.join(others)}; namespaced as '{name}'"
                t = replace(t, name=name, warnings=(*t.warnings, note))
            out.append(t)
    seen: dict[str, Tool] = {}
    for t in out:
        if t.name in seen:
            raise DuplicateToolError(f"tool name '{t.name}' is used twice after namespacing "
                                     f"(also at {seen[t.name].where})", t.path, t.line)
        seen[t.name] = t
    return out


def _as_inputs(sources) -> list[tuple[object, str, str | None]]:
    """(document or path, source name, path) per input; paths are read later, in order."""
    if isinstance(sources, (str, os.PathLike, dict)) or (
            isinstance(sources, list) and sources and all(isinstance(s, dict) for s in sources)):
        sources = [sources]
    items = []
    for i, s in enumerate(sources):
        if isinstance(s, (str, os.PathLike)):
            items.append((Path(s), Path(s).stem, str(s)))
        elif isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str):
            items.append((s[1], s[0], None))
        else:
            items.append((s, "inline" if i == 0 else f"inline-{i}", None))
    return items


def load_registry(sources: Iterable | str | os.PathLike | dict, separator: str = "/",
                  prefix_all: bool = False) -> Registry:
    """Merge tool lists into one Registry.

    sources: one path or a list of file paths (JSON or JSON Lines, any accepted format, detected
    automatically); an in-memory document (a dict, or a list of dicts, as parsed from JSON); or a list of
    (source name, document) pairs and paths. A name used by more
    than one source becomes `source/name` in every source that uses it; the source name is the MCP
    server's (`serverInfo.name` or `server` beside the tool list) or else the file stem. `separator` joins
    the two ("." gives names in MCP's tool-name character set, as the gateway needs); ``prefix_all`` names every
    tool `source<separator>name`, as the gateway does (one identity per tool, collision or not).
    Raises RegistryError subclasses (DataError) naming file and line; skipped built-in tools are warned
    about (RegistryWarning) and listed in `Registry.warnings`.
    """
    inputs = _as_inputs(sources)
    uniq = _unique_source_names([name for _, name, _ in inputs])
    groups, skipped = [], []
    for (doc, _, path), source in zip(inputs, uniq):
        if isinstance(doc, Path):
            doc = read_json_file(doc)
        tools, skip = read_source(doc, source, path)
        groups.append(tools)
        skipped.extend(skip)
    for w in skipped:
        warnings_lib.warn(w, RegistryWarning, stacklevel=2)
    tools = _namespace(groups, separator, prefix_all)
    if not tools:
        where = ", ".join(p or n for _, n, p in inputs) or "no input"
        why = f" ({len(skipped)} built-in tools skipped)" if skipped else ""
        raise EmptyRegistryError(f"no tools in {where}{why}")
    return Registry(tuple(tools), tuple(skipped), tuple(dict.fromkeys(t.source for t in tools)))
