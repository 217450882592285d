"""Data layer: loaders on tiny fixtures in the official formats, bad-input errors, and the real counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from riskrank_jax.data import benchmark_stats, load_benchmark
from riskrank_jax.permissions import permission_mask
from riskrank_jax.data.ultratool import fold_assignment, gold_ids
from riskrank_jax.errors import DataError

# ---------------------------------------------------------------- fixtures in the official formats

SEAL_TOOLS = [
    {"api_name": "readFile", "api_description": "Read the contents of a file", "field": "OS/Files"},
    {"api_name": "deleteFile", "api_description": "Delete a file from the disk", "field": "OS/Files"},
    {"api_name": "runShell", "api_description": "Execute a shell command and return its output",
     "field": "OS/Shell"},
    {"api_name": "getWeather", "api_description": "Get the weather forecast for a city", "field": "Weather/Forecast"},
]
SEAL_LABELS = {"readFile": 1, "deleteFile": 4, "runShell": 5, "getWeather": None}


def _jsonl(path: Path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_seal(root: Path, *, tools=None, labels=None, dev=None) -> Path:
    ds = root / "seal_tools" / "Seal-Tools_Dataset"
    ds.mkdir(parents=True)
    rel = root / "seal_tools" / "from_paper_release"
    rel.mkdir()
    tools = SEAL_TOOLS if tools is None else tools
    labels = SEAL_LABELS if labels is None else labels
    _jsonl(ds / "tool.jsonl", tools)
    (rel / "sealtools_risk_labels_resolved.json").write_text(json.dumps(
        {k: {"risk_level": v, "description": "x"} for k, v in labels.items()}, indent=2))
    q = lambda i, apis: {"id": f"q{i}", "query": f"query {i}", "calling": [{"api": a} for a in apis]}
    _jsonl(ds / "dev.jsonl", dev or [q(0, ["readFile"]), q(1, ["deleteFile", "readFile", "deleteFile"])])
    _jsonl(ds / "test_in_domain.jsonl", [q(2, ["getWeather"])])
    _jsonl(ds / "test_out_domain.jsonl", [q(3, ["runShell", "readFile"]), q(4, ["deleteFile"])])
    return root


def make_ultra(root: Path, n: int = 10) -> Path:
    en = root / "ultratool" / "data" / "English-dataset"
    (en / "test_set").mkdir(parents=True)
    rel = root / "ultratool" / "from_paper_release"
    rel.mkdir()
    labels = {"file_write": (3, "Write content to a file"), "file_delete": (4, "Delete a file"),
              "weather_query": (1, "Query the weather"), "send_email": (2, "Send an email")}
    (rel / "ultratool_risk_labels_resolved.json").write_text(json.dumps(
        {k: {"risk_level": r, "description": d} for k, (r, d) in labels.items()}, indent=2))
    names = list(labels)
    usage, test = [], []
    for i in range(n):
        g = [names[i % 4], names[(i + 1) % 4]]
        question = f"Question {i}\n"
        usage.append({"question": question, "input": [
            {"step": f"1. Plan {i}"}, {"step": f"1.1 Use {g[0]}", "tool": g[0], "param": ""},
            {"step": f"1.2 Use {g[1]}", "tool": g[1], "param": ""}],
            "toolset": [], "reference": [{"step": "x", "tool": t, "param": {}} for t in g]})
        test.append({"question": question, "plan": [], "tools": [{"name": t, "description": ""} for t in g],
                     "domain": "Test"})
    _jsonl(en / "test_set" / "tool_usage.json", usage)
    _jsonl(en / "test.json", test)
    return root


# ---------------------------------------------------------------- loaders


def test_sealtools_fixture(tmp_path):
    b = load_benchmark("sealtools", make_seal(tmp_path))
    assert b.tools.names == ("readFile", "deleteFile", "runShell", "getWeather")
    np.testing.assert_array_equal(b.tools.risk, [1, 4, 5, 2])  # null -> 2
    assert b.train.gold.tolist() == [[0, -1], [1, 0]]  # duplicates collapse, order kept
    assert b.tests["test_out"].gold.tolist() == [[2, 0], [1, -1]]
    assert b.n_folds == 1 and b.protocol.startswith("sealtools-dev")
    s = benchmark_stats(b)
    assert s["splits"] == {"dev": 2, "test_in": 1, "test_out": 2}
    assert s["mean_gold"]["dev"] == 1.5
    assert s["high_risk_queries"] == {"dev": 1, "test_in": 0, "test_out": 2}
    assert s["risk_histogram"] == {"1": 1, "2": 1, "3": 0, "4": 1, "5": 1}
    assert s["mapped"]["null_risk_mapped_to_2"] == 1


def test_sealtools_train_jsonl_preferred(tmp_path):
    root = make_seal(tmp_path)
    _jsonl(root / "seal_tools" / "Seal-Tools_Dataset" / "train.jsonl",
           [{"id": "t0", "query": "train q", "calling": [{"api": "runShell"}]}])
    b = load_benchmark("sealtools", root)
    assert b.train.texts == ("train q",) and b.protocol == "sealtools-train"


def test_unlabelled_tool_counts_as_one(tmp_path):
    labels = dict(SEAL_LABELS)
    del labels["getWeather"]
    b = load_benchmark("sealtools", make_seal(tmp_path, labels=labels))
    assert b.tools.risk[3] == 1 and b.data_notes["unlabelled_tools_risk_1"] == 1


def test_ultratool_fixture_cv_protocol(tmp_path):
    b = load_benchmark("ultratool", make_ultra(tmp_path))
    assert b.tests["test"].texts[0] == "1.1 Use file_write 1.2 Use file_delete"
    assert b.train.texts[0] == "Question 0"
    assert b.n_folds == 5 and b.train_fold_mask.shape == (5, 10)
    fold = b.test_fold["test"]
    # each query is held out by exactly one fold model, which never trains on it
    assert (b.train_fold_mask.sum(0) == 4).all()
    assert not b.train_fold_mask[fold, np.arange(10)].any()


def test_ultratool_dev_json_preferred(tmp_path):
    root = make_ultra(tmp_path)
    en = root / "ultratool" / "data" / "English-dataset"
    _jsonl(en / "dev.json", [{"question": "dev q", "tools": [{"name": "send_email"}]}])
    b = load_benchmark("ultratool", root)
    assert b.n_folds == 1 and b.train.texts == ("dev q",) and b.protocol.startswith("ultratool-dev")


def test_fold_assignment_balanced_and_fixed():
    f = fold_assignment(1000)
    assert np.bincount(f).tolist() == [200] * 5
    np.testing.assert_array_equal(f, fold_assignment(1000))


def test_permission_categories():
    m = permission_mask(["Execute a bash command", "Upload a file via HTTP with an API key", "Get weather"])
    assert m.sum(-1).tolist() == [2, 2, 0]  # shell+code ("exec"), network+secret
    assert m[0].tolist() == [True, False, False, False, True]


def test_demo_benchmark_is_embedded():
    b = load_benchmark("demo")
    s = benchmark_stats(b)
    assert s["tools"] >= 120 and sum(s["splits"].values()) >= 200
    assert all(s["risk_histogram"][str(r)] > 0 for r in range(1, 6))
    assert s["high_risk_queries"]["test"] > 0


# ---------------------------------------------------------------- bad input names file and line


def _err(tmp_path, mutate) -> DataError:
    root = make_seal(tmp_path)
    mutate(root / "seal_tools")
    with pytest.raises(DataError) as e:
        load_benchmark("sealtools", root)
    return e.value


def test_malformed_json_line(tmp_path):
    def m(r):
        p = r / "Seal-Tools_Dataset" / "dev.jsonl"
        p.write_text(p.read_text() + '{"id": "bad", "query": \n')
    e = _err(tmp_path, m)
    assert e.path.endswith("dev.jsonl") and e.line == 3 and "malformed JSON" in str(e)


def test_missing_field(tmp_path):
    def m(r):
        _jsonl(r / "Seal-Tools_Dataset" / "test_in_domain.jsonl", [{"id": "a", "calling": [{"api": "readFile"}]}])
    e = _err(tmp_path, m)
    assert e.path.endswith("test_in_domain.jsonl") and e.line == 1 and "missing field 'query'" in str(e)


def test_unknown_gold_tool(tmp_path):
    def m(r):
        _jsonl(r / "Seal-Tools_Dataset" / "test_out_domain.jsonl",
               [{"id": "a", "query": "x", "calling": [{"api": "readFile"}]},
                {"id": "b", "query": "y", "calling": [{"api": "noSuchTool"}]}])
    e = _err(tmp_path, m)
    assert e.line == 2 and "noSuchTool" in str(e) and "not in the tool pool" in str(e)


def test_duplicate_tool_id(tmp_path):
    e = _err(tmp_path, lambda r: _jsonl(r / "Seal-Tools_Dataset" / "tool.jsonl", SEAL_TOOLS + [SEAL_TOOLS[1]]))
    assert e.path.endswith("tool.jsonl") and e.line == 5 and "duplicate tool id 'deleteFile'" in str(e)


def test_empty_description(tmp_path):
    tools = [dict(t) for t in SEAL_TOOLS]
    tools[2]["api_description"] = "   "
    e = _err(tmp_path, lambda r: _jsonl(r / "Seal-Tools_Dataset" / "tool.jsonl", tools))
    assert e.line == 3 and "'api_description' is empty" in str(e)


@pytest.mark.parametrize("level", [0, 6, "3", 2.5])
def test_risk_level_out_of_range(tmp_path, level):
    def m(r):
        p = r / "from_paper_release" / "sealtools_risk_labels_resolved.json"
        labels = {k: {"risk_level": v, "description": "x"} for k, v in SEAL_LABELS.items()}
        labels["runShell"]["risk_level"] = level
        p.write_text(json.dumps(labels, indent=2))
    e = _err(tmp_path, m)
    assert e.path.endswith("sealtools_risk_labels_resolved.json") and "runShell" in str(e)
    assert e.line == 10  # indent=2: runShell is the third entry, 4 lines each after "{"


def test_ultratool_misaligned_training_file(tmp_path):
    root = make_ultra(tmp_path)
    p = root / "ultratool" / "data" / "English-dataset" / "test.json"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["question"] = "something else"
    lines[3] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as e:
        load_benchmark("ultratool", root)
    assert e.value.line == 4 and "not aligned" in str(e.value)


def test_cli_reports_bad_input_without_traceback(tmp_path):
    root = make_seal(tmp_path)
    p = root / "seal_tools" / "Seal-Tools_Dataset" / "dev.jsonl"
    p.write_text(p.read_text() + "not json\n")
    r = subprocess.run([sys.executable, "-m", "riskrank_jax", "data", "stats", "--benchmark", "sealtools",
                        "--data-dir", str(root)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"{p}:3: malformed JSON" in r.stderr and "Traceback" not in r.stderr


def test_missing_data_dir_message(tmp_path):
    with pytest.raises(DataError, match="RISKRANK_DATA"):
        load_benchmark("ultratool", tmp_path / "nope")


# ---------------------------------------------------------------- the real benchmarks


@pytest.mark.realdata
def test_real_ultratool_counts(real_data_dir):
    s = benchmark_stats(load_benchmark("ultratool", real_data_dir))
    assert s["tools"] == 2032 and s["splits"]["test"] == 1000
    assert s["mean_gold"]["test"] == 2.039 and s["high_risk_queries"]["test"] == 309
    assert s["risk_histogram"] == {"1": 958, "2": 799, "3": 155, "4": 115, "5": 5}


@pytest.mark.realdata
def test_real_sealtools_counts(real_data_dir):
    s = benchmark_stats(load_benchmark("sealtools", real_data_dir))
    assert s["tools"] == 4076
    assert s["splits"] == {"dev": 700, "test_in": 700, "test_out": 654}
    assert s["mean_gold"] == {"dev": 2.577, "test_in": 2.563, "test_out": 2.957}
    assert s["risk_histogram"] == {"1": 2807, "2": 1197, "3": 51, "4": 20, "5": 1}


@pytest.mark.realdata
def test_real_data_stats_cli_json(real_data_dir):
    r = subprocess.run([sys.executable, "-m", "riskrank_jax", "data", "stats", "--benchmark", "ultratool",
                        "--json", "--data-dir", str(real_data_dir)], capture_output=True, text=True, check=True)
    s = json.loads(r.stdout)
    assert set(s) >= {"tools", "splits", "mean_gold", "high_risk_queries", "risk_histogram", "perm_level_ge2"}


def test_gold_ids_resolve_names_in_order_once_and_name_the_bad_line(tmp_path):
    index = {"a": 0, "b": 1, "c": 2}
    assert gold_ids([{"tool": "c"}, {"tool": "a"}, {"tool": "c"}], "reference", "tool", index, tmp_path, 3,
                    missing="none") == [2, 0]
    with pytest.raises(DataError, match=r":3: record has no tool in 'tools'"):
        gold_ids([], "tools", "name", index, tmp_path, 3, missing="record has no tool in 'tools'")
    with pytest.raises(DataError, match=r":7: gold tool 'zz' is not in the tool pool"):
        gold_ids([{"name": "a"}, {"name": "zz"}], "tools", "name", index, tmp_path / "dev.json", 7, missing="none")
    with pytest.raises(DataError, match=r":2: each 'reference' item needs a string 'tool'"):
        gold_ids([{"tool": 5}], "reference", "tool", index, tmp_path / "tool_usage.json", 2, missing="none")
