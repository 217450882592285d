"""Query files for `riskrank-jax rank --queries` and query logs for `riskrank-jax fit`.

    queries = read_queries("queries.txt")          # one query per line (blank lines skipped); or .jsonl {"query"}
    log = read_query_log("log.jsonl", ranker.tool_names)
    log.queries (Q texts), log.gold int32 [Q, G] (tool ids padded with -1), log.lines (1-based)

A log line is one JSON object {"query": "...", "tools": ["tool_name", ...]}: a request and the tools the
agent used for it. Tool names are the registry's (namespaced `source/name` ones included).

Why strict: a typo in a tool name is reported with its line, not silently dropped.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from riskrank_jax.data.jsonl import read_jsonl
from riskrank_jax.errors import DataError


def read_queries(path) -> list[str]:
    """Queries of a text file (one per non-blank line) or of a .jsonl file ({"query": "..."} per line)."""
    path = Path(path)
    if path.suffix in (".jsonl", ".ndjson"):
        out = []
        for line, rec in read_jsonl(path):
            q = rec.get("query")
            if not isinstance(q, str) or not q.strip():
                raise DataError('each line needs a non-empty string "query"', path, line)
            out.append(q)
    else:
        if not path.is_file():
            raise DataError("file not found", path)
        try:
            out = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except UnicodeDecodeError as e:
            raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start})", path) from None
    if not out:
        raise DataError("no queries in the file", path)
    return out


@dataclass(frozen=True, eq=False)
class QueryLog:
    """queries: Q texts; gold: int32 [Q, G] tool ids padded with -1; lines: the 1-based line of each."""

    path: str
    queries: tuple[str, ...]
    gold: np.ndarray
    lines: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.queries)


def _tool_ids(tools, index: dict[str, int], path, line) -> list[int]:
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise DataError('"tools" must be a non-empty list of tool names', path, line)
    ids = []
    for name in tools:
        if name not in index:
            near = difflib.get_close_matches(name, list(index), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise DataError(f"unknown tool '{name}': not in the registry{hint}", path, line)
        if index[name] not in ids:
            ids.append(index[name])
    return ids


def read_query_log(path, tool_names) -> QueryLog:
    """Read a log of {"query", "tools"} lines; unknown tool names are an error naming file and line."""
    index = {n: i for i, n in enumerate(tool_names)}
    queries, golds, lines = [], [], []
    for line, rec in read_jsonl(path):
        q = rec.get("query")
        if not isinstance(q, str) or not q.strip():
            raise DataError('each line needs a non-empty string "query"', path, line)
        golds.append(_tool_ids(rec.get("tools"), index, path, line))
        queries.append(q)
        lines.append(line)
    if not queries:
        raise DataError("no logged queries in the file", path)
    gold = np.full((len(golds), max(map(len, golds))), -1, np.int32)
    for i, g in enumerate(golds):
        gold[i, :len(g)] = g
    return QueryLog(str(path), tuple(queries), gold, tuple(lines))


__all__ = ["read_queries", "read_query_log", "QueryLog"]
