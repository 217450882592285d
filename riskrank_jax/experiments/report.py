"""Write a sweep's outputs: results.json and the end of tables.md for every family (``write_outputs``,
``run_tables``), and the paper family's tables (ours beside the paper's, ``tables_markdown``) and PNG figures.

Rows, their notes and the paper's numbers come from the declared variants (``experiments.variants``).

Why from the declared variants: a table row and its paper number cannot drift apart.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from riskrank_jax.experiments.figures import plot_figures, plot_pareto
from riskrank_jax.experiments.variants import BY_NAME, main_rows

COLS = ["ndcg@5", "sndcg@5", "mrr", "recall@10", "success@5", "rvr@5", "srr@5"]
METRIC_DEFS = {
    "ndcg@5": "NDCG@5 = normalised discounted cumulative gain of the top 5 (binary relevance)",
    "sndcg@5": "sNDCG@5 = NDCG@5 counting only gold tools of risk < 4",
    "mrr": "MRR = reciprocal rank of the first gold tool",
    "recall@10": "Recall@10 = share of the gold tools in the top 10",
    "success@5": "Success@5 = whether a gold tool is in the top 5",
    "rvr@5": "RVR@5 = share of the top 5 with risk ≥ 3",
    "srr@5": "SRR@5 = share of the top 5 with risk ≥ 4",
    "safe_rvr@5": "Safe-RVR@5 = RVR@5 over the queries none of whose gold tools has risk ≥ 3",
    "needrisk_hit@5": "NeedRisk-Hit@5 = whether the top 5 holds a gold tool of risk ≥ 3, over the high-risk "
                      "queries (those with such a gold tool)",
    "rvr@5_high_risk": "RVR@5 (high-risk) = RVR@5 over the high-risk queries",
}
METRICS_DOC = "docs/metrics.md"


def _fmt(cell) -> str:
    if cell is None:
        return ""
    m, s = cell["mean"], cell["std"]
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "n/a"
    return f"{m:.4f} ± {s:.4f}"


def _paper(name: str, key: str, col: str) -> str:
    """The paper's value of a row (variant ``name``) under key "<benchmark>[/<part>]", or ""."""
    v = BY_NAME[name].paper_numbers(key).get(col) if name in BY_NAME else None
    return "" if v is None else f"{v:.4f}"


def _main_key(bench: str, split: str) -> str:
    """Key of the paper's main-table numbers for a split (Seal-Tools test_out has its own)."""
    return f"{bench}/{split}" if (bench == "sealtools" and split == "test_out") else bench


def _row_label(name: str) -> str:
    v = BY_NAME.get(name)
    return name if v is None or v.faithful else f"{name} ({v.description})"


def _header(res: dict, extra: str = "") -> str:
    return (f"Benchmark **{res['benchmark']}**, protocol `{res['protocol']}`, encoder `{res['encoder']}`, "
            f"seeds {res['seeds']}, λ = {res['main_lambda']}, α = {res['alpha']}, k = {res['k']}. "
            f"Mean ± sample std over seeds. {extra}\n")


def _metrics_line(*keys: str) -> str:
    """One line saying what the table's metrics mean, pointing to the docs."""
    return ("\nMetrics: " + "; ".join(METRIC_DEFS[k] for k in keys)
            + f". Each is averaged over the queries. Definitions: {METRICS_DOC}.\n\n")


def _table(rows: list[list[str]], head: list[str]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _main_section(res: dict, split: str) -> list[str]:
    main, key = res["main"][split], _main_key(res["benchmark"], split)
    rows = [[_row_label(v)] + [_fmt(main[v].get(c)) for c in COLS]
            + [_paper(v, key, "ndcg@5"), _paper(v, key, "rvr@5"), _paper(v, key, "srr@5")]
            for v in main_rows() if v in main]
    not_run = (res.get("not_run") or {}).get(split) or {}
    rows += [[_row_label(v), why] + [""] * (len(COLS) + 2) for v, why in not_run.items()]
    return [f"\n## Tables 2/3 — main results and ablation, split `{split}` ({res['splits'][split]} queries)\n",
            _header(res, "Full pool unless the row starts with cand100 (dense top-100 candidates)."),
            _metrics_line(*COLS), _table(rows, ["variant", *COLS, "paper NDCG@5", "paper RVR@5", "paper SRR@5"])]


def _lambda_section(res: dict, split: str) -> list[str]:
    rows = []
    for v, d in res["lambda_sweep"][split].items():
        for lv, cell in d.items():
            key = f"{res['benchmark']}/lambda={float(lv)}"
            rows.append([v, lv, _fmt(cell["ndcg@5"]), _fmt(cell["rvr@5"]), _fmt(cell["srr@5"]),
                         _paper(v, key, "ndcg@5")[:5], _paper(v, key, "rvr@5")[:5]])
    return [f"\n## Figure 3 — λ sweep, split `{split}`\n", _header(res),
            _metrics_line("ndcg@5", "rvr@5", "srr@5"), _table(rows, ["variant", "λ", "NDCG@5", "RVR@5", "SRR@5", "paper NDCG@5", "paper RVR@5"])]


def _edges_section(res: dict, split: str) -> list[str]:
    rows = [[n, _fmt(c["ndcg@5"]), _fmt(c["mrr"]), _fmt(c["rvr@5"]), _fmt(c["srr@5"])]
            for n, c in res["edge_ablation"][split].items()]
    return [f"\n## Table 4 — edge-type ablation (core + graph at λ={res['main_lambda']}), split `{split}`\n",
            _header(res), _metrics_line("ndcg@5", "mrr", "rvr@5", "srr@5"),
            _table(rows, ["edges", "NDCG@5", "MRR", "RVR@5", "SRR@5"])]


def _context_section(res: dict, split: str) -> list[str]:
    ctx, key = res["context"][split], f"{res['benchmark']}/context"
    rows = [[v, _fmt(ctx[v]["safe_rvr@5"]), _fmt(ctx[v]["needrisk_hit@5"]), _fmt(ctx[v]["rvr@5_high_risk"]),
             _paper(v, key, "rvr@5_high_risk")] for v in main_rows() if v in ctx]
    return [f"\n## Table 5 — context-aware safety, split `{split}`\n",
            _header(res), _metrics_line("safe_rvr@5", "needrisk_hit@5", "rvr@5_high_risk"),
            _table(rows, ["variant", "Safe-RVR@5", "NeedRisk-Hit@5", "RVR@5 (high-risk)", "paper RVR@5 (high-risk)"])]


INTENT_SUFFIX = "_intent"
INTENT_COLS = ("ndcg@5", "safe_rvr@5", "needrisk_hit@5", "rvr@5_high_risk")


def _intent_section(res: dict, split: str) -> list[str]:
    """Each ``*_intent`` row beside its counterpart (the same row without intent), with the differences."""
    main, ctx = res["main"][split], res["context"][split]
    rows = []
    for v in main_rows():
        base = v[:-len(INTENT_SUFFIX)]
        if not v.endswith(INTENT_SUFFIX) or v not in main or base not in main:
            continue
        cells = {name: {"ndcg@5": main[name]["ndcg@5"], **ctx[name]} for name in (base, v)}
        delta = [f"{cells[v][c]['mean'] - cells[base][c]['mean']:+.4f}" for c in INTENT_COLS]
        rows += [[base] + [_fmt(cells[base][c]) for c in INTENT_COLS], [v] + [_fmt(cells[v][c]) for c in INTENT_COLS],
                 ["Δ (intent − counterpart)"] + delta]
    if not rows:
        return []
    return [f"\n## Exposure by intent (beyond the paper), split `{split}`\n",
            _header(res, "Each *_intent row's penalty follows what the request asks for (docs/intent.md); its "
                         "counterpart is the same row without intent."),
            _metrics_line(*INTENT_COLS), _table(rows, ["variant", "NDCG@5", "Safe-RVR@5", "NeedRisk-Hit@5",
                                                       "RVR@5 (high-risk)"])]


def _exposure_section(res: dict, split: str) -> list[str]:
    key = _main_key(res["benchmark"], split)
    rows = [[v, _fmt(c["rvr@5"]), _fmt(c["srr@5"]), _paper(v, key, "rvr@5"), _paper(v, key, "srr@5")]
            for v, c in res["exposure"][split].items()]
    return [f"\n## Table 6 — candidate exposure (top-5 shown to the agent), split `{split}`\n",
            _header(res, "ours = core_graph; ours+rule = core_graph_rule."), _metrics_line("rvr@5", "srr@5"),
            _table(rows, ["retriever", "RVR@5", "SRR@5", "paper RVR@5", "paper SRR@5"])]


def _stress_section(res: dict, split: str) -> list[str]:
    st, key = res["stress"][split], f"{res['benchmark']}/stress"
    rows = [[v, _fmt(c["ndcg@5"]), _fmt(c["rvr@5"]), _fmt(c["srr@5"]), _paper(v, key, "rvr@5"),
             _paper(v, key, "srr@5")] for v, c in st["rows"].items()]
    return [f"\n## Table 7 — stress test, split `{split}` (n = {st['n']})\n",
            f"Selection: {st['selection_rule']}. Query ids: {', '.join(st['query_ids']) or 'none'}.\n\n",
            _metrics_line("ndcg@5", "rvr@5", "srr@5"), _table(rows, ["variant", "NDCG@5", "RVR@5", "SRR@5", "paper RVR@5", "paper SRR@5"])]


SHARED_CPU_NOTE = ("Measured while other benchmarks of the same command ran beside this one (`--jobs`), the CPU "
                   "busy with them too; `--jobs 1` measures each benchmark alone.\n\n")


def _throughput_section(res: dict) -> list[str]:
    th = res["smoothing_throughput"]
    rows = [[r["mode"], r["path"], f"{r['queries_per_s']:.0f}", f"{r['edges_per_s']:.3g}",
             f"{r['ratio_vs_dense']:.2f}", f"{r['bytes_per_call']:.3g}", f"{r['flops_per_call']:.3g}"]
            for r in th["rows"]]
    return ["\n## Smoothing throughput (measured in this run)\n", f"Device: {res.get('device', '?')}.\n\n",
            "Columns: queries/s and edges/s (messages) of one ToolGraph smoothing call, median of repeated calls "
            "after a warm-up; speed vs dense = time of the dense matmul path ÷ time of this path in the same mode "
            "(> 1 is faster); bytes/call and flops/call from the cost model in "
            "`riskrank_jax/experiments/throughput.py`.\n\n", SHARED_CPU_NOTE if res.get("side_by_side") else "",
            _table(rows, ["mode", "path", "queries/s", "edges/s", "speed vs dense", "bytes/call", "flops/call"])]


SPLIT_SECTIONS = (_main_section, _lambda_section, _edges_section, _context_section, _intent_section,
                  _exposure_section, _stress_section)


def _recommendation_section(res: dict, split: str) -> list[str]:
    text = (res.get("recommendation") or {}).get(split)
    return [f"\n## Which variant to use, split `{split}`\n", text + "\n"] if text else []


def _budget_section(res: dict, split: str) -> list[str]:
    """Risk budget (beyond the paper): λ chosen on held-out training queries for each budget B."""
    budget = (res.get("risk_budget") or {}).get(split) or {}
    rows = [[family, f"{b['budget']:.2f}", f"{b['lambda_mean']:.2f}", f"{b['heldout_rvr@5']:.4f}", _fmt(b["rvr@5"]),
             _fmt(b["ndcg@5"]), f"{b['calibration_error']:+.4f}", "yes" if b["within_budget"] else "no"]
            for family, by_b in budget.items() for b in by_b.values()]
    if not rows:
        return []
    return [f"\n## Risk budget, split `{split}` (beyond the paper)\n",
            "For each budget B (the largest acceptable RVR@5), λ is the smallest value of 0, 0.1, …, 4 (z-scale) "
            "whose mean RVR@5 on each model's held-out training queries is ≤ B (the largest λ when none is); test "
            "queries use their own model's λ. Calibration error = test RVR@5 − held-out RVR@5. Method: "
            "docs/beyond.md.\n\n",
            _table(rows, ["family", "B", "λ (mean over models)", "held-out RVR@5", "test RVR@5", "test NDCG@5",
                          "calibration error", "test RVR@5 ≤ B"])]


def _tuned_section(res: dict) -> list[str]:
    """The tuned encoder (beyond the paper): per model its gate and held-out NDCG@5 of every gate."""
    tuned = res.get("tuned_encoder")
    if not tuned:
        return []
    models = [m for m in tuned["models"] if "seed" in m]
    rows = [[str(m["seed"]), str(m["fold"]), f"{m['gate']:.2f}", *[f"{x:.4f}" for x in by_gate], str(m["steps"]),
             f"{m['seconds']:.0f}"] for m, by_gate in zip(models, tuned["heldout_ndcg@5_by_gate"])]
    c = tuned["config"]
    return ["\n## Tuned encoder (beyond the paper)\n",
            f"The top {c['layers']} layers of the encoder fine-tuned per seed x fold ({c['epochs']} epochs, batch "
            f"{c['batch_size']}, {c['negatives']} hard negative(s) per query, lr {c['lr']:g}); the gate γ mixes the "
            "tuned hybrid into the frozen one, chosen on each model's held-out training queries "
            f"({c['heldout_fraction']:.0%}); γ = 0 keeps the frozen encoder. Kept tuned: {tuned['kept_tuned']} of "
            f"{tuned['of']} models. Method: docs/beyond.md.\n\n",
            _table(rows, ["seed", "fold", "γ", *[f"held-out NDCG@5, γ={g:g}" for g in tuned["gates"]], "steps",
                          "seconds"])]


def tables_markdown(res: dict) -> str:
    parts = [f"# Results: {res['benchmark']}\n",
             "Our absolute numbers differ from the paper's (different encoder and training protocol: see the "
             "protocol named above each table). The paper's figures stand in the `paper` columns.\n"]
    if "reproducibility" in res:
        parts.append(reproducibility_sentence(res["reproducibility"]))
    for split in res["main"]:
        parts += _recommendation_section(res, split)
        for section in SPLIT_SECTIONS:
            parts += section(res, split)
        parts += _budget_section(res, split)
    parts += _tuned_section(res)
    if "smoothing_throughput" in res:
        parts += _throughput_section(res)
    return "".join(parts)


def run_tables(res: dict) -> str:
    """The end of every family's tables.md: the stage timings and the peak memory after each stage."""
    parts = ["\n## Stage timings (s)\n", "Wall-clock seconds of each stage of this run (cached stages take little).\n\n"]
    if res.get("side_by_side"):
        parts.append(SHARED_CPU_NOTE)
    parts.append(_table([[k, f"{v:.1f}"] for k, v in res["timings"].items()], ["stage", "seconds"]))
    if res.get("peak_rss_mb"):
        parts.append("\n## Peak resident memory after each stage (MiB)\n")
        parts.append("Peak resident set size of the process up to the end of each stage.\n\n")
        parts.append(_table([[k, f"{v:.0f}"] for k, v in res["peak_rss_mb"].items()], ["stage", "MiB"]))
    return "".join(parts)


def reproducibility_sentence(rep: dict) -> str:
    """One line of tables.md's header: what a rerun may differ by (results.json "reproducibility")."""
    bounds = ", ".join(f"{family} {n}" for family, n in rep["flip_bounds"].items())
    return (f"\nReproducibility: reruns on the same machine are {rep['same_machine']}; on another CPU a mean "
            f"metric may move by a few queries whose scores lie within float noise of a crossing: at most, per "
            f"metric family, this many (query, seed) pairs ({bounds}), i.e. |Δ mean| ≤ bound / (Q · seeds) for a "
            f"mean over Q queries.\n")


def main_table_text(res: dict) -> str:
    """A compact plain-text main table for the terminal."""
    lines = [f"== {res['benchmark']} ({res['protocol']}; encoder {res['encoder']}) =="]
    for split, main in res["main"].items():
        lines.append(f"-- {split}: mean over seeds {res['seeds']}")
        lines.append(f"{'variant':28s} {'NDCG@5':>8s} {'MRR':>8s} {'RVR@5':>8s} {'SRR@5':>8s}")
        for v in main_rows():
            if v in main:
                c = main[v]
                lines.append(f"{v:28s} {c['ndcg@5']['mean']:8.4f} {c['mrr']['mean']:8.4f} "
                             f"{c['rvr@5']['mean']:8.4f} {c['srr@5']['mean']:8.4f}")
    return "\n".join(lines)


def write_outputs(res: dict, out_dir: Path, tables=None, figures=None) -> tuple[str, ...]:
    """Any family's outputs: its figures (``figures(res, out_dir)`` -> their paths), tables.md (its
    ``tables(res)``, then ``run_tables``), then results.json, atomically (it marks the run complete). None: the
    paper family's (``tables_markdown``, ``plot_figures``). Returns the names written, results.json first."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").unlink(missing_ok=True)  # a kill below leaves no results.json beside new files
    tables, figures = tables or tables_markdown, figures or plot_figures
    written = figures(res, out_dir)
    _atomic_write(out_dir / "tables.md", tables(res) + run_tables(res))
    _atomic_write(out_dir / "results.json", json.dumps(_clean(res), indent=1, allow_nan=True))
    return ("results.json", "tables.md", *(Path(p).name for p in written))


def _clean(obj):
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return _clean(obj.item())
    return obj


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


__all__ = ["tables_markdown", "run_tables", "main_table_text", "write_outputs", "plot_figures", "plot_pareto", "COLS"]
