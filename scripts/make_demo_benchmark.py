#!/usr/bin/env python3
"""Generator of the embedded demo benchmark (riskrank_jax/data/demo/) in the Seal-Tools file schema, from the
hand-written data files scripts/demo_benchmark/tools.tsv and queries.tsv.

Rerun it only to change the demo benchmark on purpose (every committed demo result then changes).

All tools, descriptions and queries were written by hand for this project; nothing is copied from any public
benchmark. The output is deterministic (no randomness): running the script twice produces byte-identical files.

Files written:
  tool.jsonl         {"api_name", "api_description", "field", "parameters", "required", "responses"}
  risk_labels.json   {api_name: {"risk_level": 1..5, "description": api_description}}
  train.jsonl        {"id", "query", "calling": [{"api", "parameters", "responses"}]}
  test.jsonl         same schema

Risk rubric: 1 read-only, no side effects; 2 minor reversible action / non-sensitive personal data;
3 sensitive data access or persistent writes; 4 irreversible actions, security controls, system-level
permissions; 5 critical, large-scale harm.

Usage: python scripts/make_demo_benchmark.py [--out DIR]   (from the project environment)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DEFAULT = ROOT / "riskrank_jax" / "data" / "demo"
DATA_DIR = Path(__file__).resolve().parent / "demo_benchmark"  # the hand-written tools and queries
TOOL_COLUMNS = ("api_name", "risk_level", "field", "description", "parameters", "responses")
QUERY_COLUMNS = ("tag", "query", "gold")

# Permission categories (docs/method.md): the package's own table (one definition for data and checks).
sys.path.insert(0, str(ROOT))
from riskrank_jax.permissions import PERMISSION_CATEGORIES as PERMISSION_KEYWORDS  # noqa: E402


def read_tsv(path: Path, columns: tuple[str, ...]) -> list[list[str]]:
    """The rows of a tab-separated data file: lines starting with # and blank lines skipped, the first other
    line the header ``columns``; a row with another number of fields is an error naming its line."""
    rows, header = [], None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if header is None:
            header = tuple(fields)
            if header != columns:
                raise SystemExit(f"{path}:{n}: header {list(header)}, expected {list(columns)}")
            continue
        if len(fields) != len(columns):
            raise SystemExit(f"{path}:{n}: {len(fields)} tab-separated fields, expected {len(columns)}")
        rows.append(fields)
    return rows


def read_tools(path: Path = DATA_DIR / "tools.tsv") -> list[tuple]:
    """(api_name, risk_level, field "Domain/Subdomain", description, parameters, responses) per tool.
    parameters: "name*:type:text|name:type:text" (* = required); responses: "name:type:text|..."."""
    return [(name, int(risk), field, desc, params, responses)
            for name, risk, field, desc, params, responses in read_tsv(path, TOOL_COLUMNS)]


def read_queries(path: Path = DATA_DIR / "queries.tsv") -> list[tuple]:
    """(tag, query text, gold tools) per query; tag "L" = look-alike trap (every gold tool is safe, r <= 2,
    but the request uses words that make a risky sibling plausible), "" = none ("-" in the file)."""
    return [("" if tag == "-" else tag, text, gold.split(",")) for tag, text, gold in read_tsv(path, QUERY_COLUMNS)]


TOOLS = read_tools()
QUERIES = read_queries()


def perm_categories(description: str) -> list[str]:
    low = description.lower()
    return [c for c, kws in PERMISSION_KEYWORDS.items() if any(k in low for k in kws)]


def _parse_fields(spec: str) -> tuple[dict, list]:
    fields, required = {}, []
    for item in filter(None, (s.strip() for s in spec.split("|"))):
        name, typ, text = item.split(":", 2)
        if name.endswith("*"):
            name = name[:-1]
            required.append(name)
        fields[name] = {"type": typ, "description": text}
    return fields, required


def build_tools() -> list[dict]:
    out = []
    for name, risk, field, desc, params, responses in TOOLS:
        p, req = _parse_fields(params)
        r, _ = _parse_fields(responses)
        out.append({"api_name": name, "api_description": desc, "field": field,
                    "parameters": p, "required": req, "responses": r})
    return out


def split_queries() -> tuple[list[dict], list[dict]]:
    train, test = [], []
    for i, (_tag, text, gold) in enumerate(QUERIES):
        calling = [{"api": g, "parameters": {}, "responses": []} for g in gold]
        dest = train if i % 5 < 3 else test
        prefix = "demo-train-" if dest is train else "demo-test-"
        dest.append({"id": f"{prefix}{len(dest)}", "query": text, "calling": calling})
    return train, test


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def validate() -> list[str]:
    """Hard checks (raise) and soft requirement checks (returned as a list of unmet items)."""
    names = [t[0] for t in TOOLS]
    assert len(names) == len(set(names)), "duplicate api_name"
    risk = {t[0]: t[1] for t in TOOLS}
    for name, r, field, desc, _p, _r in TOOLS:
        assert r in (1, 2, 3, 4, 5), name
        assert desc and desc.endswith(".") and "/" in field, name
    texts = [q[1].strip().lower() for q in QUERIES]
    assert len(texts) == len(set(texts)), "duplicate query text"
    for tag, text, gold in QUERIES:
        assert 1 <= len(gold) <= 4 and len(gold) == len(set(gold)), text
        for g in gold:
            assert g in risk, f"unknown gold tool {g!r} in {text!r}"
        if tag == "L":
            assert all(risk[g] <= 2 for g in gold), f"look-alike query with a risky gold tool: {text!r}"
    return []


def stats(tools: list[dict], train: list[dict], test: list[dict]) -> list[str]:
    risk = {t[0]: t[1] for t in TOOLS}
    unmet = []
    n = len(tools)
    domains = Counter(t["field"].split("/")[0] for t in tools)
    hist = Counter(risk.values())
    perm = {t["api_name"]: perm_categories(t["api_description"]) for t in tools}
    high_perm = [k for k, v in perm.items() if len(v) >= 2]
    allq = train + test
    golds = [sorted({c["api"] for c in q["calling"]}) for q in allq]
    mean_gold = sum(map(len, golds)) / len(golds)
    high_risk_q = sum(any(risk[g] >= 3 for g in gs) for gs in golds)
    lookalike = sum(1 for tag, _t, _g in QUERIES if tag == "L")
    safe_q = sum(all(risk[g] <= 2 for g in gs) for gs in golds)
    multi = sum(len(gs) >= 2 for gs in golds)
    used = {g for gs in golds for g in gs}
    used_train = {c["api"] for q in train for c in q["calling"]}
    used_test = {c["api"] for q in test for c in q["calling"]}
    print(f"tools: {n}")
    print(f"domains: {len(domains)} " + ", ".join(f"{d}={c}" for d, c in sorted(domains.items())))
    print("risk histogram: " + ", ".join(f"L{r}={hist[r]} ({100 * hist[r] / n:.1f}%)" for r in range(1, 6)))
    print(f"perm_level>=2 tools: {len(high_perm)} ({', '.join(sorted(high_perm))})")
    print(f"perm_level>=1 tools: {sum(1 for v in perm.values() if v)}")
    print(f"queries: train={len(train)} test={len(test)} total={len(allq)}")
    print(f"mean gold tools per query: {mean_gold:.3f} (train {sum(len(q['calling']) for q in train) / len(train):.3f}, "
          f"test {sum(len(q['calling']) for q in test) / len(test):.3f}); multi-tool queries: {multi}")
    print(f"high-risk queries (some gold r>=3): {high_risk_q} ({100 * high_risk_q / len(allq):.1f}%)")
    print(f"look-alike safe queries (tag L, all gold r<=2): {lookalike} ({100 * lookalike / len(allq):.1f}%); "
          f"all-safe queries overall: {safe_q}")
    print(f"tools used as gold: {len(used)}/{n} ({100 * len(used) / n:.1f}%); train-only {len(used_train - used_test)}, "
          f"test-only {len(used_test - used_train)}")
    unused = sorted(set(risk) - used)
    if unused:
        print(f"never gold: {', '.join(unused)}")
    checks = [
        (n >= 160, "tools >= 160"),
        (len(domains) >= 10, "domains >= 10"),
        (len(high_perm) >= 15, "perm_level>=2 tools >= 15"),
        (len(train) >= 180 and len(test) >= 120 and len(allq) >= 300, "query counts"),
        (1.6 <= mean_gold <= 2.0, "mean gold about 1.8"),
        (high_risk_q >= 0.25 * len(allq), "high-risk queries >= 25%"),
        (lookalike >= 0.20 * len(allq), "look-alike queries >= 20%"),
        (len(used) >= 0.70 * n, "tools used as gold >= 70%"),
        (not ({q["query"] for q in train} & {q["query"] for q in test}), "no test query copied from train"),
    ]
    for ok, what in checks:
        if not ok:
            unmet.append(what)
    print("requirements: " + ("all met" if not unmet else "UNMET: " + "; ".join(unmet)))
    return unmet


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT_DEFAULT, help="output folder")
    args = ap.parse_args()
    validate()
    tools = build_tools()
    train, test = split_queries()
    args.out.mkdir(parents=True, exist_ok=True)
    _write_jsonl(args.out / "tool.jsonl", tools)
    labels = {t[0]: {"risk_level": t[1], "description": t[3]} for t in TOOLS}
    with open(args.out / "risk_labels.json", "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(labels, ensure_ascii=False, indent=1) + "\n")
    _write_jsonl(args.out / "train.jsonl", train)
    _write_jsonl(args.out / "test.jsonl", test)
    print(f"wrote {args.out}")
    unmet = stats(tools, train, test)
    return 1 if unmet else 0


if __name__ == "__main__":
    raise SystemExit(main())
