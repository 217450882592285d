"""LiveMCPBench (github.com/icip-cas/LiveMCPBench): real MCP servers' tools and tasks annotated with the tools
they need, read as a zero-shot retrieval benchmark (docs/data.md, "LiveMCPBench").

* Pool: every tool of every server in `tools/LiveMCPTool/tools.json` (each entry's `tools` maps a server key to
  its `tools/list` result). A tool is keyed by server and name, id ``"<server>/<name>"``: a name listed by two
  servers is two tools. ``documents`` hold each server's tools as listed, what ``registry.load_registry``
  reads (a tool's text is the one ``riskrank-jax rank`` builds for an MCP tool: ``experiments.livemcp``).
* Servers: the server key, the entry's `name` (its title), `description` and `category`; ``of_tool`` maps each
  tool to its server, so a ranker can use the server as context.
* Queries: the 95 `Question` strings of `annotated_data/all_annotations.json`; gold: the names in `Annotator
  Metadata.Tools`, one per line with the leading "N. " stripped, matched by name (a name on two servers makes
  both gold). A mention that names no tool of the pool is reported in ``unmatched`` (task id, the mention),
  never silently dropped; a task none of whose mentions names a tool has nothing to retrieve: it is listed in
  ``no_gold`` and not evaluated.
* No training queries: the benchmark is evaluated zero-shot (95 tasks are too few to train on). Risk: the tools
  carry no audited risk labels (``risk_labels`` reads them from a labelled corpus when one is given).

Why its own container: the server a tool comes from is part of this benchmark's data, and nothing here is
trained, so the paper's Benchmark (train split, fold masks) does not fit it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from riskrank_jax.data.jsonl import read_jsonl
from riskrank_jax.data.types import QuerySet
from riskrank_jax.errors import DataError

TOOLS_FILE = Path("tools") / "LiveMCPTool" / "tools.json"
TASKS_FILE = Path("annotated_data") / "all_annotations.json"
_NUMBERED = re.compile(r"^\s*\d+\s*[.)]\s*")
# the corpus's flags that make a tool one the user must confirm (with mutation "destructive")
MUST_CONFIRM_FLAGS = ("public_sink", "secret_source", "execution", "money")


@dataclass(frozen=True, eq=False)
class McpServers:
    """The servers of a pool. names: server keys (unique); titles / descriptions / categories: the catalogue
    entry's; of_tool: int32 [N], the server of each tool."""

    names: tuple[str, ...]
    titles: tuple[str, ...]
    descriptions: tuple[str, ...]
    categories: tuple[str, ...]
    of_tool: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def texts(self) -> tuple[str, ...]:
        """"<title>: <description>" per server, what the server-level retrievers embed."""
        return tuple(f"{t}: {d}".strip() for t, d in zip(self.titles, self.descriptions))


@dataclass(frozen=True, eq=False)
class LiveMcpBench:
    """The retrieval view. ids[i] = "<server>/<tool name>"; raw_names[i] the tool's own name; descriptions[i] its
    description; documents: [(server key, {"tools": [...]})] in pool order, what ``load_registry`` reads
    (the same tools, in the same order, as a user's registry); queries: the tasks (gold int32 [Q, G], -1 padded);
    unmatched: (task id, mention) of the mentions that name no tool of the pool; no_gold: the tasks left out."""

    ids: tuple[str, ...]
    raw_names: tuple[str, ...]
    descriptions: tuple[str, ...]
    servers: McpServers
    documents: tuple
    queries: QuerySet
    categories: tuple[str, ...]  # per query
    unmatched: tuple[tuple[str, str], ...]
    no_gold: tuple[str, ...]  # tasks none of whose mentions names a tool of the pool: not evaluated
    source: str = ""
    notes: dict = field(default_factory=dict)

    name = "livemcpbench"

    @property
    def size(self) -> int:
        return len(self.ids)

    def fingerprint(self) -> str:
        """sha256 (16 hex digits) of the servers' tool lists, the servers, the queries and their gold."""
        h = hashlib.sha256()
        h.update(json.dumps(self.documents, sort_keys=True, ensure_ascii=False).encode())
        for s in (self.ids, self.servers.names, self.servers.texts, self.queries.texts):
            h.update("\x1f".join(s).encode())
            h.update(b"\x1e")
        h.update(self.servers.of_tool.tobytes())
        h.update(self.queries.gold.tobytes())
        return h.hexdigest()[:16]


def _read_json(path: Path):
    if not path.is_file():
        raise DataError("file not found", path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"malformed JSON ({e.msg} at column {e.colno})", path, e.lineno) from None


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def read_servers(path: Path) -> tuple[list[tuple[str, dict]], McpServers]:
    """(documents [(server key, {"tools": [...]})], McpServers) from tools.json; DataError on a malformed entry,
    a server key listed twice or a tool name listed twice by one server."""
    catalogue = _read_json(path)
    if not isinstance(catalogue, list) or not catalogue:
        raise DataError("expected a non-empty JSON list of servers", path)
    docs, names, titles, descs, cats, of_tool = [], [], [], [], [], []
    for i, entry in enumerate(catalogue):
        where = f"entry {i + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("tools"), dict) or not entry["tools"]:
            raise DataError(f"{where}: each server entry needs a non-empty 'tools' object", path)
        for key, listing in entry["tools"].items():
            tools = listing.get("tools") if isinstance(listing, dict) else None
            if not isinstance(tools, list):
                raise DataError(f"{where}: server '{key}' has no 'tools' list", path)
            if key in names:
                raise DataError(f"{where}: server '{key}' is listed twice", path)
            seen = set()
            for t in tools:
                if not isinstance(t, dict) or not _text(t.get("name")):
                    raise DataError(f"{where}: server '{key}' has a tool without a name", path)
                if t["name"] in seen:
                    raise DataError(f"{where}: server '{key}' lists tool '{t['name']}' twice", path)
                seen.add(t["name"])
            if not tools:
                continue
            of_tool.extend([len(names)] * len(tools))
            names.append(key)
            titles.append(_text(entry.get("name")) or key)
            descs.append(_text(entry.get("description")))
            cats.append(_text(entry.get("category")))
            docs.append((key, {"tools": tools}))
    if not docs:
        raise DataError("no tools", path)
    return docs, McpServers(tuple(names), tuple(titles), tuple(descs), tuple(cats), np.asarray(of_tool, np.int32))


def tool_mentions(tools_field: str) -> list[str]:
    """The tool names of an `Annotator Metadata.Tools` string: one per non-blank line, "N. " stripped."""
    return [_NUMBERED.sub("", line).strip() for line in tools_field.splitlines() if line.strip()]


def read_tasks(path: Path, by_name: dict[str, list[int]]):
    """(QuerySet, categories, unmatched, no_gold) from all_annotations.json; gold = every tool a mention names.
    unmatched: (task id, mention) of the mentions that name no tool; no_gold: the ids of the tasks none of whose
    mentions names a tool (left out of the QuerySet, as they have nothing to retrieve)."""
    tasks = _read_json(path)
    if not isinstance(tasks, list) or not tasks:
        raise DataError("expected a non-empty JSON list of tasks", path)
    ids, texts, gold, cats, unmatched, no_gold = [], [], [], [], [], []
    for i, task in enumerate(tasks):
        meta = task.get("Annotator Metadata") if isinstance(task, dict) else None
        if not isinstance(meta, dict) or not _text(task.get("Question")) or not isinstance(meta.get("Tools"), str):
            raise DataError(f"task {i + 1}: needs a 'Question' and 'Annotator Metadata' with a 'Tools' string", path)
        tid = _text(task.get("task_id")) or f"task-{i + 1}"
        if tid in ids or tid in no_gold:
            raise DataError(f"task {i + 1}: task_id '{tid}' is used twice", path)
        g: list[int] = []
        for mention in tool_mentions(meta["Tools"]):
            if mention not in by_name:
                unmatched.append((tid, mention))
            g.extend(t for t in by_name.get(mention, ()) if t not in g)
        if not g:
            no_gold.append(tid)
            continue
        ids.append(tid)
        texts.append(task["Question"].strip())
        gold.append(g)
        cats.append(_text(task.get("category")))
    if not ids:
        raise DataError("no task names a tool of the pool", path)
    return QuerySet.build(ids, texts, gold), tuple(cats), tuple(unmatched), tuple(no_gold)


def load_livemcpbench(root: Path) -> LiveMcpBench:
    """`root` = <data>/livemcpbench (tools/LiveMCPTool/tools.json, annotated_data/all_annotations.json)."""
    root = Path(root)
    docs, servers = read_servers(root / TOOLS_FILE)
    raw = tuple(t["name"].strip() for _, doc in docs for t in doc["tools"])
    descriptions = tuple(_text(t.get("description")) for _, doc in docs for t in doc["tools"])
    ids = tuple(f"{servers.names[s]}/{n}" for s, n in zip(servers.of_tool, raw))
    by_name: dict[str, list[int]] = {}
    for i, n in enumerate(raw):
        by_name.setdefault(n, []).append(i)
    queries, cats, unmatched, no_gold = read_tasks(root / TASKS_FILE, by_name)
    notes = {"tools": len(ids), "servers": servers.size, "distinct_names": len(by_name),
             "names_on_several_servers": sum(len(v) > 1 for v in by_name.values()),
             "tasks": queries.size + len(no_gold), "tasks_evaluated": queries.size,
             "mentions_unmatched": len(unmatched)}
    return LiveMcpBench(ids, raw, descriptions, servers, tuple(docs), queries, cats, unmatched, no_gold,
                        str(root), notes)


def risk_labels(bench: LiveMcpBench, path: Path) -> dict | None:
    """The corpus labels of the pool's tools (one JSON line per tool: server, tool, source, mutation,
    public_sink, secret_source, untrusted_content, execution, money), as {"must_confirm": bool [N],
    "destructive": bool [N], "covered": int}; None when no line covers a tool of the pool. "must confirm" =
    mutation "destructive" or any of ``MUST_CONFIRM_FLAGS``."""
    path = Path(path)
    if not path.is_file():
        return None
    index = {(s, n): i for i, (s, n) in enumerate(zip((bench.servers.names[j] for j in bench.servers.of_tool),
                                                       bench.raw_names))}
    confirm = np.zeros(bench.size, bool)
    destructive = np.zeros(bench.size, bool)
    covered = np.zeros(bench.size, bool)
    for _, rec in read_jsonl(path):
        if rec.get("source") not in (None, "livemcpbench"):
            continue
        i = index.get((rec.get("server"), rec.get("tool")))
        if i is None:
            continue
        covered[i] = True
        destructive[i] = rec.get("mutation") == "destructive"
        confirm[i] = destructive[i] or any(bool(rec.get(f)) for f in MUST_CONFIRM_FLAGS)
    if not covered.any():
        return None
    return {"must_confirm": confirm, "destructive": destructive, "covered": int(covered.sum())}


__all__ = ["LiveMcpBench", "McpServers", "load_livemcpbench", "read_servers", "read_tasks", "tool_mentions",
           "risk_labels", "MUST_CONFIRM_FLAGS"]
