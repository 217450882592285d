"""The labelled corpus of real MCP tools (experiments/mcp_risk/corpus; rubric: docs/risk_rubric.md).

    corpus = load_corpus("experiments/mcp_risk/corpus", data_dir)   # MCPRiskCorpus
    corpus.registry            # one Registry over every labelled tool, source = its server
    corpus.mutation [N], corpus.flags [N, 5], corpus.servers [N]
    folds = server_folds(corpus.servers, k=5)                       # int [N]: no server in two folds

Layout: ``labels.jsonl`` (one line per tool: server, tool, source "npm:pkg@ver" | "pypi:pkg@ver" |
"livemcpbench", mutation, the five flags, note) and ``servers/<slug>.json`` ({"server", "package", "version",
"tools": [MCP tool objects]}) for the servers gathered from packages; a "livemcpbench" tool's text is read from
the LiveMCPBench tool list under the data directory (``livemcpbench/tools/LiveMCPTool/tools.json``).

Packages listed in a reserved-servers file (a Markdown list of `` `package` `` items) are dropped before
anything reads them (``reserved``): they are kept for an independent check of the model.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from riskrank_jax.errors import DataError
from riskrank_jax.registry.dimensions import FLAGS, MUTATIONS
from riskrank_jax.registry.loader import load_registry

LIVEMCPBENCH_TOOLS = Path("livemcpbench") / "tools" / "LiveMCPTool" / "tools.json"
LABEL_KEYS = ("server", "tool", "source", "mutation") + FLAGS


@dataclass(frozen=True, eq=False)
class MCPRiskCorpus:
    """registry: the labelled tools (source = server); mutation int8 [N] (MUTATIONS); flags bool [N, 5] (FLAGS);
    servers: per tool its server; packages: per tool its label's source; fingerprint: sha256 of the labels and
    of every tool object read; dropped: labels left out ("server/tool: why")."""

    registry: object
    mutation: np.ndarray
    flags: np.ndarray
    servers: tuple[str, ...]
    packages: tuple[str, ...]
    fingerprint: str
    dropped: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(self.mutation.shape[0])


def reserved_packages(path) -> frozenset[str]:
    """Package names listed as `` - `name` `` in a reserved-servers Markdown file (empty when there is none)."""
    if path is None or not Path(path).is_file():
        return frozenset()
    return frozenset(re.findall(r"^\s*[-*]\s+`([^`]+)`", Path(path).read_text(), re.M))


def package_name(source: str) -> str | None:
    """"@scope/pkg" of "npm:@scope/pkg@1.2.3", "pkg" of "pypi:pkg@0.1"; None for other sources."""
    kind, _, rest = source.partition(":")
    if kind not in ("npm", "pypi") or not rest:
        return None
    return rest.rsplit("@", 1)[0] if rest.rfind("@") > 0 else rest


def livemcpbench_tools(data_dir) -> dict[str, list[dict]]:
    """LiveMCPBench's raw MCP tool objects per server, read from ``data_dir`` / LIVEMCPBENCH_TOOLS."""
    path = Path(data_dir) / LIVEMCPBENCH_TOOLS
    if not path.is_file():
        raise DataError(f"the corpus labels LiveMCPBench tools, but {LIVEMCPBENCH_TOOLS} is not under the data "
                        "directory (pass --data-dir DIR or set RISKRANK_DATA; see docs/data.md)")
    out: dict[str, list[dict]] = {}
    for entry in json.loads(path.read_text()):
        for name, server in (entry.get("tools") or {}).items():
            out.setdefault(server.get("server_name") or name, []).extend(server.get("tools") or [])
    return out


def _label_line(n: int, line: str, path: Path) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{n}: not JSON ({e.msg})") from None
    missing = [k for k in LABEL_KEYS if k not in row]
    if missing:
        raise DataError(f"{path}:{n}: label without {', '.join(missing)}")
    if row["mutation"] not in MUTATIONS:
        raise DataError(f"{path}:{n}: mutation must be one of {', '.join(MUTATIONS)}, got {row['mutation']!r}")
    bad = [f for f in FLAGS if not isinstance(row[f], bool)]
    if bad:
        raise DataError(f"{path}:{n}: {', '.join(bad)} must be true or false")
    return row


def load_corpus(corpus_dir, data_dir=None, reserved=None) -> MCPRiskCorpus:
    """Read labels.jsonl and the tool objects it names (module docstring).

    data_dir: where ``livemcpbench/`` is (needed only when a label's source is "livemcpbench"); reserved: a
    reserved-servers file, whose packages are dropped. A label whose tool cannot be found is dropped and
    listed in ``dropped``; a malformed label is a DataError naming the file and line.
    """
    corpus_dir = Path(corpus_dir)
    labels_path = corpus_dir / "labels.jsonl"
    if not labels_path.is_file():
        raise DataError(f"no labels.jsonl in {corpus_dir}")
    text = labels_path.read_text()
    labels = [_label_line(n, line, labels_path) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    packaged: dict[str, dict[str, dict]] = {}
    for f in sorted((corpus_dir / "servers").glob("*.json")):
        doc = json.loads(f.read_text())
        packaged.setdefault(doc["server"], {}).update({t["name"]: t for t in doc.get("tools", [])})
    live = None
    blocked = reserved_packages(reserved)
    by_server: dict[str, list[tuple[dict, dict]]] = {}
    dropped = []
    h = hashlib.sha256(text.encode())
    seen = set()
    for row in labels:
        key = (row["server"], row["tool"])
        pkg = package_name(row["source"])
        if pkg is not None and pkg in blocked:
            dropped.append(f"{row['server']}/{row['tool']}: reserved package {pkg}")
            continue
        if key in seen:
            dropped.append(f"{row['server']}/{row['tool']}: labelled twice (first label kept)")
            continue
        if row["source"] == "livemcpbench":
            live = livemcpbench_tools(data_dir) if live is None else live
            tools = {t["name"]: t for t in live.get(row["server"], [])}
        else:
            tools = packaged.get(row["server"], {})
        tool = tools.get(row["tool"])
        if tool is None:
            dropped.append(f"{row['server']}/{row['tool']}: no such tool in its source ({row['source']})")
            continue
        seen.add(key)
        h.update(json.dumps(tool, sort_keys=True).encode())
        by_server.setdefault(row["server"], []).append((row, tool))
    if not by_server:
        raise DataError(f"{labels_path}: no labelled tool could be read")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # name collisions across servers are expected here
        reg = load_registry([(s, {"tools": [t for _, t in rows]}) for s, rows in by_server.items()])
    rows = [r for s in by_server for r, _ in by_server[s]]
    mutation = np.array([MUTATIONS.index(r["mutation"]) for r in rows], np.int8)
    flags = np.array([[r[f] for f in FLAGS] for r in rows], bool).reshape(-1, len(FLAGS))
    return MCPRiskCorpus(reg, mutation, flags, tuple(r["server"] for r in rows), tuple(r["source"] for r in rows),
                         h.hexdigest()[:16], tuple(dropped))


def server_folds(servers, k: int = 5, seed: int = 0) -> np.ndarray:
    """int [N] in 0..k-1: fold of each tool; every server's tools in one fold. Servers are shuffled with
    ``seed`` and dealt largest first to the fold with the fewest tools, so folds hold similar tool counts."""
    names = sorted(set(servers))
    if len(names) < k:
        raise DataError(f"{len(names)} servers cannot make {k} folds over servers")
    counts = {s: 0 for s in names}
    for s in servers:
        counts[s] += 1
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    order.sort(key=lambda s: -counts[s])  # stable: ties keep the shuffled order
    load, fold_of = [0] * k, {}
    for s in order:
        f = int(np.argmin(load))
        fold_of[s] = f
        load[f] += counts[s]
    return np.array([fold_of[s] for s in servers], np.int32)


__all__ = ["MCPRiskCorpus", "load_corpus", "server_folds", "reserved_packages", "package_name",
           "LIVEMCPBENCH_TOOLS", "livemcpbench_tools"]
