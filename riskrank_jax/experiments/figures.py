"""The sweep's figures: λ sweep, relevance–exposure plane and the Pareto front (NDCG@5 against RVR@5).

Every figure gives one colour per variant family (``res["variant_families"]``, else the declared variant's
``family``, else the name up to its first underscore) and, inside a family, one marker and line style per
variant; a legend outside the axes names them all; text labels are placed only where they overlap nothing
(``place_labels``); files are saved with ``bbox_inches="tight"`` so nothing is clipped.

Why one colour per family: a variant and its graph / rule-filter versions read as one line of work.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from riskrank_jax.experiments.variants import BY_NAME, VARIANTS

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))
BASELINES = {"bm25": "s", "dense": "D", "hybrid": "^", "hybrid_named": "v"}  # Pareto baselines: name -> marker
BASELINE_COLOUR = "#555555"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#393b79", "#637939")
FONT = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8.5,
        "xtick.labelsize": 9, "ytick.labelsize": 9}


# ---------------------------------------------------------------------------------------------- styles


def families(res: dict, names) -> dict[str, str]:
    """variant -> family: res["variant_families"], else the declared Variant.family, else the name's prefix."""
    given = res.get("variant_families") or {}
    return {n: given.get(n) or (BY_NAME[n].family if n in BY_NAME else n.split("_")[0]) for n in names}


def family_colours(fams) -> dict[str, str]:
    """family -> colour, stable across figures: baselines grey, declared families in declaration order, then
    the rest alphabetically."""
    declared = list(dict.fromkeys(v.family for v in VARIANTS if v.family != "baseline"))
    order = declared + sorted(set(fams) - set(declared) - {"baseline"})
    out = {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(order)}
    out["baseline"] = BASELINE_COLOUR
    return {f: out[f] for f in fams}


def variant_styles(res: dict, names) -> dict[str, dict]:
    """variant -> {"color", "marker", "linestyle", "family"}; the i-th variant of a family gets marker i."""
    fam = families(res, names)
    colours = family_colours(set(fam.values()))
    seen: dict[str, int] = {}
    out = {}
    for n in names:
        i = seen[fam[n]] = seen.get(fam[n], -1) + 1
        out[n] = {"color": colours[fam[n]], "marker": MARKERS[i % len(MARKERS)],
                  "linestyle": LINESTYLES[i % len(LINESTYLES)], "family": fam[n]}
    return out


# ---------------------------------------------------------------------------------------------- labels


def place_labels(ax, items, avoid_points=(), avoid_lines=(), fontsize: float = 7.5) -> list:
    """Annotate `items` [(text, (x, y), colour)] in order, each at the first of twelve offsets where it overlaps
    no earlier label, no point of `avoid_points` [(x, y)], no line of `avoid_lines` [(xs, ys)] and stays inside
    the axes; items with no such offset are left out. Returns the placed Text artists."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = [_point_box(ax, p) for p in avoid_points]
    taken += [_pixel_box(x, y, 1.5) for xs, ys in avoid_lines for x, y in _line_pixels(ax, xs, ys)]
    offsets = [(5, 4, "left", "bottom"), (5, -4, "left", "top"), (-5, 4, "right", "bottom"),
               (-5, -4, "right", "top"), (0, 8, "center", "bottom"), (0, -8, "center", "top"),
               (9, 0, "left", "center"), (-9, 0, "right", "center"), (5, 12, "left", "bottom"),
               (5, -12, "left", "top"), (-5, 12, "right", "bottom"), (-5, -12, "right", "top")]
    placed = []
    for text, xy, colour in items:
        for dx, dy, ha, va in offsets:
            t = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                            fontsize=fontsize, color=colour)
            box = t.get_window_extent(renderer).padded(3)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(b) for b in taken):
                taken.append(box)
                placed.append(t)
                break
            t.remove()
    return placed


def _point_box(ax, xy, radius: float = 6.0):
    x, y = ax.transData.transform(xy)
    return _pixel_box(x, y, radius)


def _pixel_box(x: float, y: float, radius: float):
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)


def _line_pixels(ax, xs, ys, step: float = 3.0):
    """Display coordinates [M, 2] sampled every `step` pixels along the polyline (xs, ys) in data space."""

    pix = ax.transData.transform(np.column_stack([xs, ys]))
    out = [pix[:1]]
    for a, b in zip(pix[:-1], pix[1:]):
        n = max(2, int(np.hypot(*(b - a)) / step))
        out.append(a + (b - a) * np.linspace(0, 1, n)[:, None])
    return np.concatenate(out)


# ---------------------------------------------------------------------------------------------- figures


def _splits(res: dict) -> list[str]:
    return list(res["main"]) or [res.get("main_split")]


def _protocol(res: dict) -> str:
    return res["protocol"].split(" ")[0]


def lambda_sweep_figure(res: dict):
    """NDCG@5 and RVR@5 against λ (mean ± std over seeds), main split, one line per variant."""
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    import matplotlib.pyplot as plt

    split = res.get("main_split") or next(iter(res["main"]))
    sweep = res["lambda_sweep"][split]
    styles = variant_styles(res, list(sweep))
    with plt.rc_context(FONT):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for v, d in sweep.items():
            lams, st = [float(x) for x in d], styles[v]
            for ax, m in zip(axes, ("ndcg@5", "rvr@5")):
                ax.errorbar(lams, [d[x][m]["mean"] for x in d], yerr=[d[x][m]["std"] for x in d], capsize=2.5,
                            color=st["color"], marker=st["marker"], linestyle=st["linestyle"], markersize=5,
                            elinewidth=.8, label=f"{v} [{st['family']}]")
        nonzero = sorted({float(x) for d in sweep.values() for x in d if float(x) > 0})
        for ax, m in zip(axes, ("NDCG@5 (higher is better)", "RVR@5 (share of top-5 with risk ≥ 3)")):
            if nonzero and nonzero[-1] >= 20 * nonzero[0]:  # grids of different scales (0.05 and 2): symlog
                ax.set_xscale("symlog", linthresh=nonzero[0])
            ax.set_xlabel("λ (risk penalty weight)")
            ax.set_ylabel(m)
            ax.grid(alpha=.3)
        _legend_right(fig, axes[-1], title="variant [family]")
        fig.suptitle(f"{res['benchmark']} {split}: λ sweep ({_protocol(res)}, mean ± std over seeds)")
    return fig


def tradeoff_figure(res: dict):
    """Every main-table row in the NDCG@5–RVR@5 plane at the main λ, one panel per split."""
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    import matplotlib.pyplot as plt

    splits = _splits(res)
    names = list(dict.fromkeys(v for s in splits for v in res["main"][s]))
    styles = variant_styles(res, names)
    with plt.rc_context(FONT):
        fig, axes = plt.subplots(1, len(splits), figsize=(6.2 * len(splits), 5), squeeze=False)
        for ax, split in zip(axes[0], splits):
            pts, bars = [], []
            for v, c in res["main"][split].items():
                x, y, st = c["rvr@5"]["mean"], c["ndcg@5"]["mean"], styles[v]
                dx, dy = c["rvr@5"]["std"] or 0.0, c["ndcg@5"]["std"] or 0.0
                bars += [([x - dx, x + dx], [y, y]), ([x, x], [y - dy, y + dy])]
                ax.errorbar(x, y, xerr=c["rvr@5"]["std"], yerr=c["ndcg@5"]["std"], color=st["color"],
                            marker=st["marker"], markersize=7, linestyle="none", elinewidth=.7, alpha=.9,
                            capsize=2, label=f"{v} [{st['family']}]")
                pts.append((v, (x, y), st["color"]))
            _axes_text(ax, f"{split} (λ = {res['main_lambda']})")
            place_labels(ax, pts, avoid_points=[p for _, p, _ in pts], avoid_lines=bars)
        _legend_right(fig, axes[0][-1], title="variant [family]")
        fig.suptitle(f"{res['benchmark']}: relevance–exposure plane ({_protocol(res)}, mean ± std over seeds)")
    return fig


def _axes_text(ax, title: str) -> None:
    ax.set_xlabel("RVR@5 (share of top-5 with risk ≥ 3; lower is safer)")
    ax.set_ylabel("NDCG@5")
    ax.grid(alpha=.3)
    ax.set_title(title)
    ax.margins(.08)


def _legend_right(fig, ax, title: str) -> None:
    """One legend for the figure, right of `ax`, without duplicate labels."""
    handles = {}
    for a in fig.axes:
        for h, lab in zip(*a.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    ax.legend(handles.values(), handles.keys(), title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0, frameon=False)


def save_figure(fig, path: Path) -> Path:
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def paper_points(res: dict, split: str) -> list[tuple[str, float, float]]:
    """[(label, RVR@5, NDCG@5)] of the paper's numbers for this benchmark and split: main-table rows (key
    "<benchmark>" or "<benchmark>/<split>") and, on the main split, λ-sweep points ("<benchmark>/lambda=<λ>")."""
    bench = res["benchmark"]
    main_key = f"{bench}/{split}" if any(f"{bench}/{split}" in v.paper for v in VARIANTS) else bench
    main_split = res.get("main_split") or next(iter(res["main"]))
    out = []
    for v in VARIANTS:
        keys = [(main_key, v.name)]
        if split == main_split:
            keys += [(k, f"{v.name} λ={k.split('=')[1]}") for k in v.paper if k.startswith(f"{bench}/lambda=")]
        for key, label in keys:
            p = v.paper_numbers(key)
            if "ndcg@5" in p and "rvr@5" in p:
                out.append((label, float(p["rvr@5"]), float(p["ndcg@5"])))
    return out


def _pareto_axes(ax, res: dict, split: str, styles: dict) -> None:
    """One split's panel: λ lines per variant, baselines, the paper's stars, sparse non-overlapping labels."""
    sweep = res["lambda_sweep"].get(split, {})
    points, lines, labels, ends, inner, labelled = [], [], [], [], [], set()
    for v, d in sweep.items():
        st = styles[v]
        xs = [d[x]["rvr@5"]["mean"] for x in d]
        ys = [d[x]["ndcg@5"]["mean"] for x in d]
        ax.plot(xs, ys, color=st["color"], marker=st["marker"], linestyle=st["linestyle"], markersize=5.5,
                linewidth=1.4, label=f"{v} [{st['family']}]")
        points += list(zip(xs, ys))
        lines.append((xs, ys))
        if st["family"] in labelled:  # λ labels on the first line of each family only (the legend names the rest)
            continue
        labelled.add(st["family"])
        lab = [(f"λ={float(lam):g}", (x, y), st["color"]) for lam, x, y in zip(d, xs, ys)]
        ends += [lab[0]] + lab[1:][-1:]  # ends first, so they win over interior points
        inner += lab[1:-1]
    for v, marker in BASELINES.items():
        if v in res["main"][split]:
            c = res["main"][split][v]
            xy = (c["rvr@5"]["mean"], c["ndcg@5"]["mean"])
            ax.plot(*xy, marker=marker, color=BASELINE_COLOUR, markersize=8, linestyle="none", label=f"{v} (baseline)")
            points.append(xy)
            labels.append((v, xy, BASELINE_COLOUR))
    paper = paper_points(res, split)
    if paper:
        ax.plot([p[1] for p in paper], [p[2] for p in paper], marker="*", color="black", markersize=11,
                linestyle="none", label="paper's reported points")
        points += [(p[1], p[2]) for p in paper]
        labels += [(f"paper {p[0]}", (p[1], p[2]), "black") for p in paper]
    _axes_text(ax, f"{split}")
    place_labels(ax, labels + ends + inner, avoid_points=points, avoid_lines=lines, fontsize=7.5)


def pareto_figure(res: dict):
    """NDCG@5 (y) against RVR@5 (x) over the λ grid of every λ-swept variant (one colour per
    family, a line through its λ points), the baselines present in res["main"] (bm25, dense, hybrid,
    hybrid_named) and the paper's reported points (black stars); one panel per split."""
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    import matplotlib.pyplot as plt

    splits = _splits(res)
    names = list(dict.fromkeys(v for s in splits for v in res["lambda_sweep"].get(s, {})))
    styles = variant_styles(res, names)
    with plt.rc_context(FONT):
        fig, axes = plt.subplots(1, len(splits), figsize=(6.2 * len(splits), 5), squeeze=False)
        for ax, split in zip(axes[0], splits):
            _pareto_axes(ax, res, split, styles)
        _legend_right(fig, axes[0][-1], title="variant [family] over λ")
        fig.suptitle(f"{res['benchmark']}: NDCG@5 against RVR@5 over λ ({_protocol(res)}, mean over seeds)")
    return fig


FIGURES = {"lambda_sweep.png": lambda_sweep_figure, "tradeoff.png": tradeoff_figure, "pareto.png": pareto_figure}


def _use_agg() -> None:
    # deferred: matplotlib loads only when figures are drawn (a sweep with --no-figures never needs it)
    import matplotlib

    matplotlib.use("Agg")


def plot_pareto(res: dict, out_dir: Path) -> Path:
    """Write <out_dir>/pareto.png (``pareto_figure``)."""
    _use_agg()
    return save_figure(pareto_figure(res), Path(out_dir) / "pareto.png")


def plot_figures(res: dict, out_dir: Path) -> list[Path]:
    """Write every figure of one benchmark's results: lambda_sweep.png, tradeoff.png, pareto.png."""
    _use_agg()
    return [save_figure(make(res), Path(out_dir) / name) for name, make in FIGURES.items()]
