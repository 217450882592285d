"""Seal-Tools (and the embedded demo, which uses the same schema).

tool.jsonl: {"api_name", "api_description", "field", ...}; query files: {"id", "query", "calling": [{"api"}]}.
Retrieval view (docs/data.md): query = `query`, gold = unique `calling[].api`, tool text = `api_description`.

Why the demo shares it: one reader for one schema, so the demo exercises the real loader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from riskrank_jax.data.jsonl import read_jsonl, require
from riskrank_jax.data.labels import UNLABELLED_RISK_LEVEL, read_risk_labels
from riskrank_jax.data.types import Benchmark, QuerySet, ToolRegistry
from riskrank_jax.errors import DataError


def read_tool_pool(tool_file: Path, label_file: Path) -> tuple[ToolRegistry, dict]:
    labels = read_risk_labels(label_file)
    names, descs, risk = [], [], []
    seen: dict[str, int] = {}
    unlabelled = 0
    for line, rec in read_jsonl(tool_file):
        name = require(rec, "api_name", tool_file, line).strip()
        desc = require(rec, "api_description", tool_file, line).strip()
        if name in seen:
            raise DataError(f"duplicate tool id '{name}' (first on line {seen[name]})", tool_file, line)
        seen[name] = line
        lab = labels.get(name)
        if lab is None:
            unlabelled += 1
        names.append(name)
        descs.append(desc)
        risk.append(UNLABELLED_RISK_LEVEL if lab is None else lab.risk)
    for name, lab in labels.items():
        if name not in seen:
            raise DataError(f"risk label for '{name}', which is not a tool in {tool_file}", label_file, lab.line)
    if not names:
        raise DataError("no tools", tool_file)
    notes = {
        "null_risk_mapped_to_2": sum(lab.was_null for lab in labels.values()),
        "unlabelled_tools_risk_1": unlabelled,
    }
    return ToolRegistry.build(names, descs, risk, source=str(tool_file)), notes


def read_query_file(path: Path, tool_index: dict[str, int]) -> QuerySet:
    ids, texts, gold = [], [], []
    seen_ids: dict[str, int] = {}
    for line, rec in read_jsonl(path):
        qid = str(rec.get("id", f"{path.stem}-{line}"))
        if qid in seen_ids:
            raise DataError(f"duplicate query id '{qid}' (first on line {seen_ids[qid]})", path, line)
        seen_ids[qid] = line
        text = require(rec, "query", path, line).strip()
        calling = require(rec, "calling", path, line, list)
        g: list[int] = []
        for call in calling:
            if not isinstance(call, dict) or not isinstance(call.get("api"), str):
                raise DataError("each 'calling' item needs a string 'api'", path, line)
            api = call["api"].strip()
            if api not in tool_index:
                raise DataError(f"gold tool '{api}' is not in the tool pool", path, line)
            if tool_index[api] not in g:
                g.append(tool_index[api])
        if not g:
            raise DataError("query has no gold tool ('calling' is empty)", path, line)
        ids.append(qid)
        texts.append(text)
        gold.append(g)
    if not texts:
        raise DataError("no queries", path)
    return QuerySet.build(ids, texts, gold)


def single_split_protocol(train: QuerySet, tests: dict[str, QuerySet]):
    """F = 1: one model per seed, trained on all training queries, evaluates every test query."""
    mask = np.ones((1, train.size), dtype=bool)
    return mask, {k: np.zeros(v.size, dtype=np.int32) for k, v in tests.items()}


def load_sealtools(root: Path) -> Benchmark:
    """`root` = <data>/seal_tools. Trains on train.jsonl when present, else on dev.jsonl (docs/protocols.md)."""
    ds = root / "Seal-Tools_Dataset"
    tools, notes = read_tool_pool(ds / "tool.jsonl", root / "from_paper_release" / "sealtools_risk_labels_resolved.json")
    index = tools.index_of()
    if (ds / "train.jsonl").is_file():
        train_name, train, protocol = "train", read_query_file(ds / "train.jsonl", index), "sealtools-train"
    else:
        train_name, train = "dev", read_query_file(ds / "dev.jsonl", index)
        protocol = "sealtools-dev (train on dev.jsonl; paper: train.jsonl)"
    tests = {"test_in": read_query_file(ds / "test_in_domain.jsonl", index),
             "test_out": read_query_file(ds / "test_out_domain.jsonl", index)}
    mask, test_fold = single_split_protocol(train, tests)
    notes["train_split"] = train_name
    return Benchmark("sealtools", protocol, tools, train, tests, mask, test_fold, notes)


def load_demo(root: Path) -> Benchmark:
    """The embedded demo benchmark (package data, written for this project; Seal-Tools schema)."""
    tools, notes = read_tool_pool(root / "tool.jsonl", root / "risk_labels.json")
    index = tools.index_of()
    train = read_query_file(root / "train.jsonl", index)
    tests = {"test": read_query_file(root / "test.jsonl", index)}
    mask, test_fold = single_split_protocol(train, tests)
    notes["train_split"] = "train"
    return Benchmark("demo", "demo (train.jsonl / test.jsonl)", tools, train, tests, mask, test_fold, notes)
