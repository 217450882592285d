"""Turn a sweep's results dict into results.json, tables.md (ours beside the paper's) and PNG figures.

Rows, their notes and the paper's numbers come from the declared variants (``experiments.variants``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from riskrank_jax.experiments.variants import BY_NAME, main_rows

COLS = ["ndcg@5", "sndcg@5", "mrr", "recall@10", "success@5", "rvr@5", "srr@5"]


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


def _table(rows: list[list[str]], head: list[str]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _main_section(res: dict, split: str) -> list[str]:
    main, key = res["main"][split], _main_key(res["benchmark"], split)
    rows = [[_row_label(v)] + [_fmt(main[v].get(c)) for c in COLS]
            + [_paper(v, key, "ndcg@5"), _paper(v, key, "rvr@5"), _paper(v, key, "srr@5")]
            for v in main_rows() if v in main]
    return [f"\n## Tables 2/3 — main results and ablation, split `{split}` ({res['splits'][split]} queries)\n",
            _header(res, "Full pool unless the row starts with cand100 (dense top-100 candidates)."),
            _table(rows, ["variant", *COLS, "paper NDCG@5", "paper RVR@5", "paper SRR@5"])]


def _lambda_section(res: dict, split: str) -> list[str]:
    rows = []
    for v, d in res["lambda_sweep"][split].items():
        for lv, cell in d.items():
            key = f"{res['benchmark']}/lambda={float(lv)}"
            rows.append([v, lv, _fmt(cell["ndcg@5"]), _fmt(cell["rvr@5"]), _fmt(cell["srr@5"]),
                         _paper(v, key, "ndcg@5")[:5], _paper(v, key, "rvr@5")[:5]])
    return [f"\n## Figure 3 — λ sweep, split `{split}`\n", _header(res),
            _table(rows, ["variant", "λ", "NDCG@5", "RVR@5", "SRR@5", "paper NDCG@5", "paper RVR@5"])]


def _edges_section(res: dict, split: str) -> list[str]:
    rows = [[n, _fmt(c["ndcg@5"]), _fmt(c["mrr"]), _fmt(c["rvr@5"]), _fmt(c["srr@5"])]
            for n, c in res["edge_ablation"][split].items()]
    return [f"\n## Table 4 — edge-type ablation (core + graph at λ={res['main_lambda']}), split `{split}`\n",
            _header(res), _table(rows, ["edges", "NDCG@5", "MRR", "RVR@5", "SRR@5"])]


def _context_section(res: dict, split: str) -> list[str]:
    ctx, key = res["context"][split], f"{res['benchmark']}/context"
    rows = [[v, _fmt(ctx[v]["safe_rvr@5"]), _fmt(ctx[v]["needrisk_hit@5"]), _fmt(ctx[v]["rvr@5_high_risk"]),
             _paper(v, key, "rvr@5_high_risk")] for v in main_rows() if v in ctx]
    return [f"\n## Table 5 — context-aware safety, split `{split}`\n",
            _header(res, "Safe-RVR@5 over queries without a gold tool of r ≥ 3; NeedRisk-Hit@5 and "
                         "RVR@5 over the high-risk queries."),
            _table(rows, ["variant", "Safe-RVR@5", "NeedRisk-Hit@5", "RVR@5 (high-risk)", "paper RVR@5 (high-risk)"])]


def _exposure_section(res: dict, split: str) -> list[str]:
    key = _main_key(res["benchmark"], split)
    rows = [[v, _fmt(c["rvr@5"]), _fmt(c["srr@5"]), _paper(v, key, "rvr@5"), _paper(v, key, "srr@5")]
            for v, c in res["exposure"][split].items()]
    return [f"\n## Table 6 — candidate exposure (top-5 shown to the agent), split `{split}`\n",
            _header(res, "ours = core_graph; ours+rule = core_graph_rule."),
            _table(rows, ["retriever", "RVR@5", "SRR@5", "paper RVR@5", "paper SRR@5"])]


def _stress_section(res: dict, split: str) -> list[str]:
    st, key = res["stress"][split], f"{res['benchmark']}/stress"
    rows = [[v, _fmt(c["ndcg@5"]), _fmt(c["rvr@5"]), _fmt(c["srr@5"]), _paper(v, key, "rvr@5"),
             _paper(v, key, "srr@5")] for v, c in st["rows"].items()]
    return [f"\n## Table 7 — stress test, split `{split}` (n = {st['n']})\n",
            f"Selection: {st['selection_rule']}. Query ids: {', '.join(st['query_ids']) or 'none'}.\n\n",
            _table(rows, ["variant", "NDCG@5", "RVR@5", "SRR@5", "paper RVR@5", "paper SRR@5"])]


def _throughput_section(res: dict) -> list[str]:
    th = res["smoothing_throughput"]
    rows = [[r["mode"], r["path"], f"{r['queries_per_s']:.0f}", f"{r['edges_per_s']:.3g}",
             f"{r['ratio_vs_dense']:.2f}", f"{r['bytes_per_call']:.3g}", f"{r['flops_per_call']:.3g}"]
            for r in th["rows"]]
    return ["\n## Smoothing throughput (measured in this run)\n", f"Device: {res.get('device', '?')}.\n\n",
            _table(rows, ["mode", "path", "queries/s", "edges/s", "speed vs dense", "bytes/call", "flops/call"])]


SPLIT_SECTIONS = (_main_section, _lambda_section, _edges_section, _context_section, _exposure_section,
                  _stress_section)


def tables_markdown(res: dict) -> str:
    parts = [f"# Results: {res['benchmark']}\n",
             "Our absolute numbers differ from the paper's (different encoder and training protocol: see the "
             "protocol named above each table). The paper's figures stand in the `paper` columns.\n"]
    if "reproducibility" in res:
        parts.append(reproducibility_sentence(res["reproducibility"]))
    for split in res["main"]:
        for section in SPLIT_SECTIONS:
            parts += section(res, split)
    if "smoothing_throughput" in res:
        parts += _throughput_section(res)
    parts.append("\n## Stage timings (s)\n")
    parts.append(_table([[k, f"{v:.1f}"] for k, v in res["timings"].items()], ["stage", "seconds"]))
    if "peak_rss_mb" in res:
        parts.append("\n## Peak resident memory after each stage (MiB)\n")
        parts.append(_table([[k, f"{v:.0f}"] for k, v in res["peak_rss_mb"].items()], ["stage", "MiB"]))
    return "".join(parts)


def reproducibility_sentence(rep: dict) -> str:
    """One line of tables.md's header: what a rerun may differ by (results.json "reproducibility")."""
    return (f"\nReproducibility: reruns on the same machine are {rep['same_machine']}; on another x86 CPU every "
            f"mean metric agrees within ±{rep['across_x86_cpus_abs_tolerance']} (absolute).\n")


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


def plot_figures(res: dict, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    split = res.get("main_split") or next(iter(res["main"]))
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for v, d in res["lambda_sweep"][split].items():
        lams = [float(x) for x in d]
        for ax, m in zip(axes, ("ndcg@5", "rvr@5")):
            mean = [d[x][m]["mean"] for x in d]
            std = [d[x][m]["std"] for x in d]
            ax.errorbar(lams, mean, yerr=std, marker="o", capsize=3, label=v)
    for ax, m in zip(axes, ("NDCG@5", "RVR@5")):
        ax.set_xlabel("λ")
        ax.set_ylabel(m)
        ax.grid(alpha=.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{res['benchmark']} {split}: λ sweep ({res['protocol'].split(' ')[0]}, mean ± std over seeds)")
    paths.append(_save(fig, out_dir / "lambda_sweep.png"))

    fig, ax = plt.subplots(figsize=(7, 5))
    for v, c in res["main"][split].items():
        x, y = c["rvr@5"]["mean"], c["ndcg@5"]["mean"]
        ax.errorbar(x, y, xerr=c["rvr@5"]["std"], yerr=c["ndcg@5"]["std"], fmt="o", capsize=2)
        ax.annotate(v, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("RVR@5 (lower is safer)")
    ax.set_ylabel("NDCG@5")
    ax.grid(alpha=.3)
    ax.set_title(f"{res['benchmark']} {split}: relevance–exposure plane")
    paths.append(_save(fig, out_dir / "tradeoff.png"))
    return paths


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(res: dict, out_dir: Path) -> None:
    """Write figures and tables first, results.json last and atomically (it marks the run complete)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").unlink(missing_ok=True)  # a kill below leaves no results.json beside new files
    plot_figures(res, out_dir)
    _atomic_write(out_dir / "tables.md", tables_markdown(res))
    _atomic_write(out_dir / "results.json", json.dumps(_clean(res), indent=1, allow_nan=True))


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
