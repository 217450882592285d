"""`riskrank-jax fit` against `fit --tune-encoder` on a user-like registry and log built from Seal-Tools:
held-out NDCG@5 of the zero-shot ranker, the trained heads and the tuned encoder, and the wall time of each fit.

The registry and the log are written to a temporary directory (removed afterwards; nothing is written to the
repository): the ``--tools`` most-used tools of dev, test_in_domain and test_out_domain together (0: every tool
some query uses) as an OpenAI Chat Completions tools JSON (name, description, parameters), and every query of
those splits whose gold tools all lie among them as a JSONL log ``{"query", "tools"}``, in a fixed shuffled order
(fit holds out a seeded 20 %). Both fits use the CLI's defaults (FitConfig: seeds 0 1 2, 10 head epochs) and share one
embedding cache, the plain fit first (so the tuned fit's zero-shot part is warm); ``--tune-only`` skips the
plain fit (its zero-shot and head figures are in the tuned fit's report too).

    python benchmarks/fit_tune.py [--tools 0] [--layers 3] [--epochs 4] [--lr 2e-4] [--tune-only] [--no-retrain]
                                  [--log-size N] [--json OUT]

``--log-size N`` draws N requests from those queries (seeded, with replacement: requests repeat, as they do in a
real log) to measure what a long log costs (``fit --tune-encoder`` on 17,000 requests: ``--tools 500 --log-size
17000 --tune-only``); only the distinct texts are embedded, so the tuning steps, not the encoding, grow with N.
Repeated requests fall on both sides of the held-out split, so its NDCG figures then overstate; the wall time is
what the measurement is for.

Seal-Tools has 2,054 queries in these splits over 2,587 used tools, most used once or twice: the 300 most-used
tools cover only 147 queries whose gold all lie among them, 1,000 cover 736, all 2,587 cover 2,054. See
docs/registry.md ("Fine-tuning the encoder") for the measured figures.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPLITS = ("dev.jsonl", "test_in_domain.jsonl", "test_out_domain.jsonl")
JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
              "dict": "object"}


def read_seal_tools(root: Path):
    """(tools {name: record} of tool.jsonl, queries [(text, [gold names])] of SPLITS, in file order)."""
    tools = {}
    for line in (root / "tool.jsonl").read_text().splitlines():
        rec = json.loads(line)
        tools[rec["api_name"].strip()] = rec
    queries = []
    for split in SPLITS:
        for line in (root / split).read_text().splitlines():
            rec = json.loads(line)
            gold = list(dict.fromkeys(c["api"].strip() for c in rec["calling"]))
            queries.append((rec["query"].strip(), gold))
    return tools, queries


def openai_tool(rec: dict) -> dict:
    """An OpenAI Chat Completions tool of a Seal-Tools tool record."""
    props = {}
    for name, p in (rec.get("parameters") or {}).items():
        p = p if isinstance(p, dict) else {}
        props[name] = {"type": JSON_TYPES.get(str(p.get("type", "str")).lower(), "string"),
                       "description": str(p.get("description", ""))}
    return {"type": "function", "function": {
        "name": rec["api_name"].strip(), "description": rec["api_description"].strip(),
        "parameters": {"type": "object", "properties": props, "required": list(rec.get("required") or [])}}}


def build_inputs(data: Path, n_tools: int, out: Path, seed: int = 0, log_size: int = 0) -> dict:
    """Write out/tools.json and out/log.jsonl (see the module docstring; ``log_size`` > 0: that many requests drawn
    with replacement); return what was written."""
    import numpy as np

    tools, queries = read_seal_tools(data)
    used = collections.Counter(t for _, gold in queries for t in gold)
    keep = {t for t, _ in (used.most_common(n_tools) if n_tools else used.items())}
    log = [(q, g) for q, g in queries if all(t in keep for t in g)]
    rng = np.random.default_rng(seed)
    log = [log[i] for i in (rng.integers(0, len(log), log_size) if log_size else rng.permutation(len(log)))]
    names = sorted(keep)
    (out / "tools.json").write_text(json.dumps({"tools": [openai_tool(tools[n]) for n in names]}))
    (out / "log.jsonl").write_text("".join(json.dumps({"query": q, "tools": g}) + "\n" for q, g in log))
    return {"tools": len(names), "queries": len(log), "distinct_queries": len({q for q, _ in log}),
            "gold_per_query": round(sum(len(g) for _, g in log) / len(log), 2)}


def run_fit(out: Path, config, name: str) -> tuple[dict, float]:
    """fit_ranker over out/tools.json and out/log.jsonl, saved to out/<name>; (report, wall seconds)."""
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.rank.fit import fit_ranker

    t0 = time.perf_counter()
    ranker, report = fit_ranker([str(out / "tools.json")], str(out / "log.jsonl"), encoder=load_encoder(),
                                cache=EmbeddingCache(out / "cache"), config=config, work_dir=out / f"{name}-work")
    ranker.save(out / name)
    return report, time.perf_counter() - t0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="Seal-Tools_Dataset directory (default: <data dir>/seal_tools/...)")
    ap.add_argument("--tools", type=int, default=0, help="keep the N most-used tools (0: every used tool)")
    ap.add_argument("--layers", type=int, default=None, help="tuned layers (default: FIT_TUNE_CONFIG's)")
    ap.add_argument("--epochs", type=int, default=None, help="tuning epochs (default: FIT_TUNE_CONFIG's)")
    ap.add_argument("--lr", type=float, default=None, help="tuning peak learning rate (default: FIT_TUNE_CONFIG's)")
    ap.add_argument("--tune-only", action="store_true", help="skip the plain fit")
    ap.add_argument("--no-retrain", action="store_true",
                    help="keep the held-out-trained layers when the tuned ranker wins (skips the last tuning run)")
    ap.add_argument("--log-size", type=int, default=0,
                    help="draw this many requests, with replacement (0: each kept query once)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    from riskrank_jax.paths import resolve_data_dir
    from riskrank_jax.rank.fit import FIT_TUNE_CONFIG, FitConfig

    data = Path(args.data) if args.data else resolve_data_dir() / "seal_tools" / "Seal-Tools_Dataset"
    changes = {k: v for k, v in (("layers", args.layers), ("epochs", args.epochs), ("lr", args.lr)) if v is not None}
    tune = dataclasses.replace(FIT_TUNE_CONFIG, **changes)
    plain = FitConfig()  # the CLI's defaults
    result = {"machine": f"{platform.machine()}, {platform.processor() or '?'}", "tune": tune.to_dict()}
    with tempfile.TemporaryDirectory(prefix="riskrank-fit-tune-") as tmp:
        out = Path(tmp)
        result["inputs"] = build_inputs(data, args.tools, out, log_size=args.log_size)
        print(f"registry {result['inputs']['tools']} tools, log {result['inputs']['queries']} requests "
              f"({result['inputs']['distinct_queries']} distinct) "
              f"({result['inputs']['gold_per_query']} tools each on average)", flush=True)
        if not args.tune_only:
            today, seconds = run_fit(out, plain, "plain")
            result["plain"] = {"report": _brief(today), "wall_s": round(seconds, 1)}
            print(f"fit:                 {_line(today)}; chosen {today['chosen']}; {seconds:.0f} s", flush=True)
        tuned, seconds = run_fit(out, dataclasses.replace(plain, tune_encoder=tune, tune_retrain=not args.no_retrain),
                                 "tuned")
        result["tuned"] = {"report": _brief(tuned), "wall_s": round(seconds, 1)}
    k = tuned["k"]
    zero, heads = tuned[f"ndcg@{k}_zero_shot"], sum(tuned[f"ndcg@{k}_head_per_seed"]) / len(plain.seeds)
    ft = sum(tuned[f"ndcg@{k}_tuned_per_seed"]) / len(tuned[f"ndcg@{k}_tuned_per_seed"])
    result["summary"] = {"zero_shot": zero, "heads_mean": round(heads, 4), "tuned_mean": round(ft, 4),
                         "tuned_minus_today": round(ft - max(zero, heads), 4)}
    print(f"fit --tune-encoder:  {_line(tuned)}; chosen {tuned['chosen']}; {seconds:.0f} s "
          f"(seconds: {tuned['seconds']})")
    print(f"held-out NDCG@{k}: zero-shot {zero:.4f}, heads {heads:.4f}, tuned {ft:.4f}; tuned − today's choice "
          f"{ft - max(zero, heads):+.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


def _brief(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("fit", "log")}


def _line(report: dict) -> str:
    k = report["k"]
    text = (f"{report['queries']} requests, {report['heldout']} held out; NDCG@{k} zero-shot "
            f"{report[f'ndcg@{k}_zero_shot']:.4f}, heads " + "/".join(f"{x:.4f}" for x in report[f"ndcg@{k}_head_per_seed"]))
    if f"ndcg@{k}_tuned_per_seed" in report:
        text += ", tuned " + "/".join(f"{x:.4f}" for x in report[f"ndcg@{k}_tuned_per_seed"])
    return text


if __name__ == "__main__":
    main()
