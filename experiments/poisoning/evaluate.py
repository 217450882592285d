"""Measure the tool-poisoning detector (riskrank_jax.registry.poisoning) on labelled poisoned tools and real ones.

    python experiments/poisoning/evaluate.py [--data-dir DIR] [--out DIR]

Poisoned side: experiments/poisoning/poisoned.jsonl (build_set.py; `split` dev or heldout, held-out sources
kept away from the rules' tuning). Clean side: every tool of the risk corpus (experiments/mcp_risk/corpus,
4,490 real tools of packaged servers and LiveMCPBench; the LiveMCPBench tools' text is read from the data
directory), taken as clean. Each tool is judged in two settings: "gateway", the way the gateway would with every
corpus server connected (``other_tool_names`` = the names of all other servers' tools, ``own_tool_names`` = its
own server's; a poisoned tool is a server of its own beside the whole corpus), and "bare", with no tool names at
all (what `detect` sees when a caller passes none).

Reports, per split and per source: recall on poisoned tools; the false-positive rate on the clean tools;
precision on the union (split's poisoned + all clean). Lists every clean tool flagged (server/tool, categories,
evidence) for a reviewer. Writes results.json and results.md under experiments/results/poisoning/ (--out).
Deterministic: no randomness, ordered output; detection time is printed, not written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from riskrank_jax.paths import resolve_data_dir  # noqa: E402
from riskrank_jax.registry.mcp_corpus import livemcpbench_tools, load_corpus  # noqa: E402
from riskrank_jax.registry.poisoning import CATEGORIES, detect, sibling_names  # noqa: E402

POISONED = Path(__file__).resolve().parent / "poisoned.jsonl"
CORPUS = REPO / "experiments" / "mcp_risk" / "corpus"
OUT = REPO / "experiments" / "results" / "poisoning"
TARGET_FPR = 0.01
SPLITS = ("dev", "heldout")


def load_poisoned(path=POISONED) -> list[dict]:
    """The labelled poisoned tools, one dict per line of `path`."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def load_clean(corpus_dir=CORPUS, data_dir=None) -> list[dict]:
    """The risk corpus's tools as {"server", "tool", "description", "inputSchema"}, in the corpus's order.

    load_corpus decides which tools are in (reserved packages dropped); their raw MCP objects (the registry
    keeps only top-level parameters) are read from servers/*.json and from LiveMCPBench's tools.json."""
    data_dir = resolve_data_dir(data_dir)
    corpus = load_corpus(corpus_dir, data_dir, reserved=data_dir.parent / "RESERVED_SERVERS.md")
    packaged: dict[str, dict[str, dict]] = {}
    for f in sorted((Path(corpus_dir) / "servers").glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        packaged.setdefault(doc["server"], {}).update({t["name"]: t for t in doc.get("tools", [])})
    live = None
    out = []
    for tool, server, source in zip(corpus.registry.tools, corpus.servers, corpus.packages, strict=True):
        if source == "livemcpbench":
            live = livemcpbench_tools(data_dir) if live is None else live
            raw = next(t for t in live[server] if t["name"] == tool.raw_name)
        else:
            raw = packaged[server][tool.raw_name]
        out.append({"server": server, "tool": tool.raw_name, "description": raw.get("description"),
                    "inputSchema": raw.get("inputSchema") or raw.get("input_schema")})
    return out


def judge(poisoned: list[dict], clean: list[dict], setting: str = "gateway") -> tuple[list, list]:
    """(findings of the poisoned tools, findings of the clean tools), None where nothing was found.

    setting: "gateway" (every corpus server's tool names known, module docstring) or "bare" (no names)."""
    if setting == "bare":
        return ([detect(r["name"], r["description"], r["inputSchema"]) for r in poisoned],
                [detect(t["tool"], t["description"], t["inputSchema"]) for t in clean])
    names = sibling_names((t["server"], t["tool"]) for t in clean)
    everything = frozenset(t["tool"] for t in clean)
    found_clean = [detect(t["tool"], t["description"], t["inputSchema"], names[t["server"]][1],
                          own_tool_names=names[t["server"]][0]) for t in clean]
    found_poisoned = [detect(r["name"], r["description"], r["inputSchema"], everything - {r["name"]})
                      for r in poisoned]
    return found_poisoned, found_clean


def summarise(poisoned, clean, found_poisoned, found_clean, splits=SPLITS) -> dict:
    """Recall / FPR / precision per split and per source, the flagged clean tools, category counts."""
    fp = sum(f is not None for f in found_clean)
    n_clean = len(clean)
    out = {"corpus_tools": n_clean, "corpus_servers": len({t["server"] for t in clean}),
           "target_fpr": TARGET_FPR, "clean_flagged": fp, "fpr": fp / n_clean if n_clean else 0.0,
           "splits": {}, "sources": {}}
    for split in splits:
        idx = [i for i, r in enumerate(poisoned) if r["split"] == split]
        tp = sum(found_poisoned[i] is not None for i in idx)
        out["splits"][split] = {"poisoned": len(idx), "detected": tp, "recall": tp / len(idx) if idx else None,
                                "precision": tp / (tp + fp) if tp + fp else None}
    for source in sorted({r["source"] for r in poisoned if r["split"] in splits}):
        idx = [i for i, r in enumerate(poisoned) if r["source"] == source]
        tp = sum(found_poisoned[i] is not None for i in idx)
        cats = {c: sum(found_poisoned[i] is not None and c in found_poisoned[i].categories for i in idx)
                for c in CATEGORIES}
        out["sources"][source] = {"split": poisoned[idx[0]]["split"], "poisoned": len(idx), "detected": tp,
                                  "recall": tp / len(idx), "categories": {c: n for c, n in cats.items() if n},
                                  "missed": [poisoned[i]["id"] for i in idx if found_poisoned[i] is None]}
    out["clean_flagged_tools"] = [
        {"server": t["server"], "tool": t["tool"], "categories": list(f.categories), "evidence": list(f.evidence)}
        for t, f in zip(clean, found_clean, strict=True) if f is not None]
    return out


def markdown(res: dict) -> str:
    """results.md: the tables a user reads."""
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f} %"  # noqa: E731
    lines = ["# Tool-poisoning detector: evaluation", "",
             "Written by `python experiments/poisoning/evaluate.py`; method and caveats in docs/poisoning.md.", "",
             f"Clean side: the risk corpus (experiments/mcp_risk/corpus), {res['corpus_tools']:,} real tools of "
             f"{res['corpus_servers']} servers. Gateway setting (the figures below): each tool judged with every "
             f"other corpus server's tool names known and its own server's names as siblings. "
             f"Target: false-positive rate on these tools at most {pct(res['target_fpr'])}.", "",
             f"**False-positive rate: {res['clean_flagged']} of {res['corpus_tools']:,} clean tools flagged "
             f"= {100 * res['fpr']:.2f} %.**", "",
             "| split | poisoned tools | detected | recall | precision (split's poisoned + all clean) |",
             "|---|---:|---:|---:|---:|"]
    for split, s in res["splits"].items():
        lines.append(f"| {split} | {s['poisoned']} | {s['detected']} | {pct(s['recall'])} | "
                     f"{pct(s['precision'])} |")
    lines += ["", "Held-out sources were written before the detector and never used to tune it (their history: "
              "docs/poisoning.md).", "",
              "| source | split | poisoned | detected | recall | categories reported (tools) |",
              "|---|---|---:|---:|---:|---|"]
    for source, s in res["sources"].items():
        cats = ", ".join(f"{c} {n}" for c, n in s["categories"].items())
        lines.append(f"| {source} | {s['split']} | {s['poisoned']} | {s['detected']} | {pct(s['recall'])} | "
                     f"{cats} |")
    bare = res["bare"]
    lines += ["", "### Bare setting (no tool names passed to `detect`)", "",
              f"False-positive rate: {bare['clean_flagged']} of {res['corpus_tools']:,} clean tools flagged "
              f"= {100 * bare['fpr']:.2f} %.", "", "| split | poisoned tools | detected | recall | precision |",
              "|---|---:|---:|---:|---:|"]
    for split, s in bare["splits"].items():
        lines.append(f"| {split} | {s['poisoned']} | {s['detected']} | {pct(s['recall'])} | "
                     f"{pct(s['precision'])} |")
    lines += [""] + [f"- clean tool flagged (bare): {t['server']}/{t['tool']}: {', '.join(t['categories'])} "
                     f"(evidence: {'; '.join(t['evidence'])})" for t in bare["clean_flagged_tools"]]
    lines += ["", "## Missed poisoned tools (gateway setting)", ""]
    missed = [(src, m) for src, s in res["sources"].items() for m in s["missed"]]
    lines += [f"- {src}: {m}" for src, m in missed] or ["(none)"]
    lines += ["", "## Clean tools flagged in the gateway setting (for review)", ""]
    lines += [f"- {t['server']}/{t['tool']}: {', '.join(t['categories'])} (evidence: "
              f"{'; '.join(t['evidence'])})" for t in res["clean_flagged_tools"]] or ["(none)"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Recall, false-positive rate and precision of the tool-poisoning detector on "
                    "experiments/poisoning/poisoned.jsonl and the risk corpus's real tools; writes results.json "
                    "and results.md.")
    ap.add_argument("--data-dir", default=None,
                    help="benchmark data directory holding livemcpbench/ (default: $RISKRANK_DATA, then "
                         "../shared/datasets)")
    ap.add_argument("--corpus", default=CORPUS, type=Path,
                    help="the risk corpus directory (default: experiments/mcp_risk/corpus)")
    ap.add_argument("--poisoned", default=POISONED, type=Path,
                    help="labelled poisoned tools (default: experiments/poisoning/poisoned.jsonl)")
    ap.add_argument("--out", default=OUT, type=Path,
                    help="where results.json and results.md go (default: experiments/results/poisoning)")
    ap.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS,
                    help="which poisoned splits to score (default: both)")
    args = ap.parse_args(argv)

    poisoned = [r for r in load_poisoned(args.poisoned) if r["split"] in args.splits]
    clean = load_clean(args.corpus, args.data_dir)
    t0 = time.perf_counter()
    found_poisoned, found_clean = judge(poisoned, clean)
    took = time.perf_counter() - t0
    res = summarise(poisoned, clean, found_poisoned, found_clean, tuple(args.splits))
    res["setting"] = "gateway"
    res["bare"] = summarise(poisoned, clean, *judge(poisoned, clean, "bare"), tuple(args.splits))
    del res["bare"]["corpus_tools"], res["bare"]["corpus_servers"], res["bare"]["target_fpr"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, ensure_ascii=True) + "\n")
    (out / "results.md").write_text(markdown(res))
    for split, s in res["splits"].items():
        print(f"{split}: recall {s['detected']}/{s['poisoned']}, precision {s['precision']}")
    print(f"clean: {res['clean_flagged']}/{res['corpus_tools']} flagged (FPR {res['fpr']:.4f}); "
          f"{len(clean) + len(poisoned)} tools judged in {took:.2f} s", file=sys.stderr)
    print(f"wrote {out / 'results.json'} and {out / 'results.md'}")


if __name__ == "__main__":
    main()
