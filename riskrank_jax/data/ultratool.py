"""UltraTool (English): the files of docs/data.md and the training protocols of docs/protocols.md.

* Pool: the entries of `from_paper_release/ultratool_risk_labels_resolved.json` (name, description, risk).
* Test queries: for each line of `test_set/tool_usage.json`, the `step` strings of the `input` items that
  carry a `tool` key, joined with single spaces; gold = the set of `reference[].tool`.
* Training: `dev.json` (`question`, names in `tools`) when present; otherwise 5-fold cross-validation over
  the 1,000 test queries, training on the `question` and `tools` of the matching `test.json` record.

Why protocols here: the split a model trains on is part of the data, decided once when loading.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from riskrank_jax.data.jsonl import read_jsonl, require
from riskrank_jax.data.labels import read_risk_labels
from riskrank_jax.data.types import Benchmark, QuerySet, ToolRegistry
from riskrank_jax.errors import DataError

N_FOLDS = 5
FOLD_SEED = 2026  # fixed: the fold assignment is part of the protocol, not of a run's seed


def read_pool(label_file: Path) -> tuple[ToolRegistry, dict]:
    labels = read_risk_labels(label_file)
    names, descs, risk = [], [], []
    for name, lab in labels.items():
        if not lab.description.strip():
            raise DataError(f"tool '{name}' has an empty description", label_file, lab.line)
        names.append(name)
        descs.append(lab.description.strip())
        risk.append(lab.risk)
    if not names:
        raise DataError("no tools", label_file)
    notes = {"null_risk_mapped_to_2": sum(lab.was_null for lab in labels.values()), "unlabelled_tools_risk_1": 0}
    return ToolRegistry.build(names, descs, risk, source=str(label_file)), notes


def gold_ids(items: list, list_key: str, name_key: str, index: dict[str, int], path: Path, line: int, *,
             missing: str) -> list[int]:
    """Pool ids of the tools that ``items`` (the list under ``list_key`` of one record) name under ``name_key``, in
    order, each once; a malformed item, a name outside the pool or no item at all (the DataError ``missing``) is
    a DataError at path:line."""
    ids: list[int] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get(name_key), str):
            raise DataError(f"each '{list_key}' item needs a string '{name_key}'", path, line)
        if item[name_key] not in index:
            raise DataError(f"gold tool '{item[name_key]}' is not in the tool pool", path, line)
        if index[item[name_key]] not in ids:
            ids.append(index[item[name_key]])
    if not ids:
        raise DataError(missing, path, line)
    return ids


def query_set(prefix: str, rows: list[tuple[str, list[int]]], path: Path, empty: str) -> QuerySet:
    """The QuerySet of (text, gold ids) rows, query ids "<prefix>-<i>"; no rows is the DataError ``empty``."""
    if not rows:
        raise DataError(empty, path)
    return QuerySet.build([f"{prefix}-{i}" for i in range(len(rows))], [t for t, _ in rows], [g for _, g in rows])


def read_tool_usage(path: Path, index: dict[str, int]) -> tuple[QuerySet, list[str]]:
    """Rebuild the step queries; also return each record's `question` (to align with test.json)."""
    rows, questions = [], []
    for line, rec in read_jsonl(path):
        steps = require(rec, "input", path, line, list)
        reference = require(rec, "reference", path, line, list)
        parts = []
        for item in steps:
            if not isinstance(item, dict) or not isinstance(item.get("step"), str):
                raise DataError("each 'input' item needs a string 'step'", path, line)
            if "tool" in item:
                parts.append(item["step"])
        text = " ".join(parts).strip()
        if not text:
            raise DataError("no 'input' step carries a 'tool' key, so the query is empty", path, line)
        rows.append((text, gold_ids(reference, "reference", "tool", index, path, line,
                                    missing="no gold tool in 'reference'")))
        questions.append(str(rec.get("question", "")))
    return query_set("ultratool-test", rows, path, "no queries"), questions


def read_question_file(path: Path, index: dict[str, int], prefix: str) -> QuerySet:
    """test.json / dev.json records as training queries: `question` text, gold = names in `tools`."""
    rows = [(require(rec, "question", path, line).strip(),
             gold_ids(require(rec, "tools", path, line, list), "tools", "name", index, path, line,
                      missing="record has no tool in 'tools'"))
            for line, rec in read_jsonl(path)]
    return query_set(prefix, rows, path, "no records")


def fold_assignment(n: int, n_folds: int = N_FOLDS, seed: int = FOLD_SEED) -> np.ndarray:
    """int32 [n]: fold of each query, from a fixed seeded permutation (sizes differ by at most one)."""
    perm = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=np.int32)
    fold[perm] = np.arange(n) % n_folds
    return fold


def load_ultratool(root: Path) -> Benchmark:
    """`root` = <data>/ultratool."""
    en = root / "data" / "English-dataset"
    tools, notes = read_pool(root / "from_paper_release" / "ultratool_risk_labels_resolved.json")
    index = tools.index_of()
    test, usage_questions = read_tool_usage(en / "test_set" / "tool_usage.json", index)
    tests = {"test": test}
    if (en / "dev.json").is_file():
        train = read_question_file(en / "dev.json", index, "ultratool-dev")
        mask = np.ones((1, train.size), dtype=bool)
        test_fold = {"test": np.zeros(test.size, dtype=np.int32)}
        protocol = "ultratool-dev (train on dev.json, as the paper)"
        notes["train_split"] = "dev"
    else:
        path = en / "test.json"
        train = read_question_file(path, index, "ultratool-cvtrain")
        if train.size != test.size:
            raise DataError(f"has {train.size} records but test_set/tool_usage.json has {test.size}; "
                            "the cross-validation protocol needs them aligned", path)
        for i, (a, b) in enumerate(zip(train.texts, usage_questions)):
            if a != b.strip():
                raise DataError("question differs from the same record of test_set/tool_usage.json; "
                                "the files are not aligned", path, i + 1)
        fold = fold_assignment(test.size)
        mask = fold[None, :] != np.arange(N_FOLDS)[:, None]
        test_fold = {"test": fold}
        protocol = "ultratool-cv5 (5-fold CV over the 1,000 test queries; paper: train on dev.json)"
        notes["train_split"] = "cv_train"
    return Benchmark("ultratool", protocol, tools, train, tests, mask, test_fold, notes)
