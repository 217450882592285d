"""Figures: one colour per variant family, labels that overlap nothing, the paper's points, and the committed
results rendered without error into a temporary directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from riskrank_jax.experiments import figures, report  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "experiments" / "results"
PNG = b"\x89PNG\r\n\x1a\n"


def _cell(m: float, s: float = 0.01) -> dict:
    return {"mean": m, "std": s}


def _point(ndcg: float, rvr: float) -> dict:
    return {"ndcg@5": _cell(ndcg), "rvr@5": _cell(rvr), "srr@5": _cell(rvr / 3)}


def synthetic_results(families_field: bool = True) -> dict:
    """A tiny results dict: two families with their own λ grids (one declared, one new) and four baselines."""
    grid = ("0.0", "0.25", "0.5", "1.0", "2.0")
    sweep = {
        "core": {lam: _point(.50 - .02 * i, .20 - .03 * i) for i, lam in enumerate(("0.0", "0.05", "0.1", "0.2"))},
        "rerank": {lam: _point(.62 - .01 * i, .15 - .025 * i) for i, lam in enumerate(grid)},
        "rerank_graph": {lam: _point(.64 - .01 * i, .16 - .025 * i) for i, lam in enumerate(grid)},
    }
    main = {"bm25": _point(.30, .19), "dense": _point(.29, .15), "hybrid": _point(.40, .17),
            "hybrid_named": _point(.42, .18), "core": _point(.47, .10)}
    res = {"benchmark": "ultratool", "protocol": "ultratool-cv5 (test)", "main_split": "test", "main_lambda": 0.1,
           "main": {"test": main}, "lambda_sweep": {"test": sweep}}
    if families_field:
        res["variant_families"] = {"rerank": "rerank", "rerank_graph": "rerank", "core": "core"}
    return res


def _texts_overlap(fig) -> list[tuple[str, str]]:
    """Pairs of axes texts (labels placed on the plot) whose rendered boxes overlap."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        boxes = [(t.get_text(), t.get_window_extent(r)) for t in ax.texts]
        out += [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]
    return out


def test_families_from_results_then_declared_then_prefix():
    res = synthetic_results()
    assert figures.families(res, ["rerank_graph", "core_graph", "hybrid_x"]) == {
        "rerank_graph": "rerank", "core_graph": "core", "hybrid_x": "hybrid"}
    assert figures.families(synthetic_results(False), ["rerank_graph"]) == {"rerank_graph": "rerank"}


def test_one_colour_per_family_and_distinct_markers_inside_a_family():
    names = ["core", "core_graph", "core_graph_rule", "zeroshot_core", "rerank", "rerank_graph"]
    st = figures.variant_styles(synthetic_results(), names)
    assert st["core"]["color"] == st["core_graph"]["color"] == st["core_graph_rule"]["color"]
    assert st["rerank"]["color"] == st["rerank_graph"]["color"]
    assert len({st[n]["color"] for n in ("core", "zeroshot_core", "rerank")}) == 3
    assert len({(st[n]["marker"], st[n]["linestyle"]) for n in ("core", "core_graph", "core_graph_rule")}) == 3
    # colours are stable: a family's colour does not depend on which other variants are plotted
    assert figures.variant_styles({}, ["core_plus"])["core_plus"]["color"] == \
        figures.variant_styles({}, ["core", "core_plus"])["core_plus"]["color"]


def test_place_labels_never_overlap_and_drop_what_does_not_fit():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    items = [(f"label number {i}", (0.5, 0.5), "k") for i in range(20)]
    placed = figures.place_labels(ax, items, avoid_points=[(0.5, 0.5)])
    assert 2 <= len(placed) < 20  # twenty labels at one point cannot all fit around it
    assert _texts_overlap(fig) == []
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    for t in placed:
        b = t.get_window_extent(fig.canvas.get_renderer())
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
    plt.close(fig)


def test_pareto_figure_draws_families_baselines_and_paper_points():
    fig = figures.pareto_figure(synthetic_results())
    ax = fig.axes[0]
    labels = {ln.get_label(): ln for ln in ax.get_lines()}
    assert {"rerank [rerank]", "rerank_graph [rerank]", "core [core]", "bm25 (baseline)", "dense (baseline)",
            "hybrid (baseline)", "hybrid_named (baseline)", "paper's reported points"} <= set(labels)
    assert labels["rerank [rerank]"].get_color() == labels["rerank_graph [rerank]"].get_color()
    assert len(labels["rerank [rerank]"].get_xdata()) == 5  # one point per λ of the family's own grid
    stars = labels["paper's reported points"]
    assert stars.get_marker() == "*" and stars.get_color() == "black"
    # UltraTool paper points: main rows with both NDCG@5 and RVR@5 (dense, rel_only, core, core_graph,
    # core_graph_rule) and the λ = 0 / 0.2 points of core and core_graph
    assert len(stars.get_xdata()) == 9
    assert (0.1384, 0.5508) in set(zip(stars.get_xdata(), stars.get_ydata()))
    assert any(t.get_text().startswith("λ=") for t in ax.texts)
    assert _texts_overlap(fig) == []
    legend_texts = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert "paper's reported points" in legend_texts
    plt.close(fig)


def test_paper_points_follow_the_split():
    res = {"benchmark": "sealtools", "main_split": "test_in", "main": {"test_in": {}, "test_out": {}}}
    assert sorted(figures.paper_points(res, "test_in")) == [("core", .0098, .8326), ("core_graph_rule", .0062, .827)]
    assert sorted(figures.paper_points(res, "test_out")) == [("core", .0152, .7931),
                                                            ("core_graph_rule", .0109, .7847)]


@pytest.mark.parametrize("bench", ["demo", "ultratool", "sealtools"])
def test_committed_results_render_legibly(tmp_path, bench):
    """The committed results.json of each benchmark, copied to a temporary directory: every figure is written
    and no two placed labels overlap; every table of tables.md says what its metrics mean."""
    src = RESULTS / bench / "results.json"
    if not src.is_file():
        pytest.skip(f"no committed results for {bench}")
    shutil.copy(src, tmp_path / "results.json")
    res = json.loads((tmp_path / "results.json").read_text())
    for name, make in figures.FIGURES.items():
        fig = make(res)
        assert _texts_overlap(fig) == [], name
        plt.close(fig)
    report.write_outputs(res, tmp_path)  # what the sweep calls: figures, tables.md, results.json
    for name in ("lambda_sweep.png", "tradeoff.png", "pareto.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    assert json.loads((tmp_path / "results.json").read_text())["main"] == res["main"]
    text = report.tables_markdown(res)
    # each of the six per-split tables, and the seventh, "Exposure by intent", where the *_intent rows ran
    intent = any(name.endswith("_intent") for name in next(iter(res["main"].values())))
    assert text.count("docs/metrics.md") == (6 + intent) * len(res["main"])
    assert "SPEC" not in text and "shared" not in text
    assert "RVR@5 = share of the top 5 with risk ≥ 3" in text and "SRR@5 = share of the top 5 with risk ≥ 4" in text


def test_lambda_sweep_uses_symlog_when_grids_differ_in_scale():
    fig = figures.lambda_sweep_figure(synthetic_results())  # λ from 0.05 to 2
    assert fig.axes[0].get_xscale() == "symlog"
    plt.close(fig)
    res = synthetic_results()
    del res["lambda_sweep"]["test"]["rerank"], res["lambda_sweep"]["test"]["rerank_graph"]
    fig = figures.lambda_sweep_figure(res)  # 0.05 .. 0.2
    assert fig.axes[0].get_xscale() == "linear"
    plt.close(fig)
