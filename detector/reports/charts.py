"""Charts for the HTML report, drawn by matplotlib and inlined as SVG (works offline).

No pyplot and no global backend: each chart is a `Figure` saved with the SVG backend, with a
fixed hash salt and no date, so the same data gives the same bytes. Element ids get a per-chart
prefix because several SVGs share one HTML document's id space.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from detector.model import QueryComparison
from detector.model.units import fmt_ms
from detector.reports.common import SweepGroup, fmt_number, fmt_tick
from detector.reports.escape import for_matplotlib
from detector.reports.sweeps import SweepAnalysis

BASELINE = "#3b6fb6"
CANDIDATE = "#e07b39"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
RC = {
    "svg.hashsalt": "planshift",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.grid": True,
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
}


def _rc() -> AbstractContextManager[None]:
    return matplotlib.rc_context(cast(Any, RC))


def to_svg(fig: Figure, chart_id: str) -> str:
    """The figure as an `<svg>` element: no XML prolog, responsive, ids prefixed with chart_id."""
    buffer = io.StringIO()
    with _rc():
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": "planshift"})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'id="([^"]+)"', rf'id="{chart_id}-\1"', text)
    text = re.sub(r'(href="#|url\(#)([^")]+)', rf"\1{chart_id}-\2", text)
    text = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r"<svg \1", text, count=1)
    return text.replace("<svg ", f'<svg class="chart" role="img" data-chart="{chart_id}" ', 1)


def _figure(width: float, height: float) -> Figure:
    with _rc():
        return Figure(figsize=(width, height), layout="constrained")


def _spread(values: Sequence[float]) -> bool:
    """Worth a log axis: positive values over more than ~1.5 decades."""
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) and bool(positive) and max(positive) / min(positive) > 30


PERCENTILE_MARKERS = (("median", "o", 0.5), ("p90", "s", 0.9), ("p99", "^", 0.99))


def cdf_chart(query: QueryComparison, chart_id: str) -> str:
    """Empirical CDF of both sides' durations, median/p90/p99 marked on each curve."""
    with _rc():
        fig = _figure(6.2, 3.0)
        ax = fig.add_subplot()
        everything: list[float] = []
        handles: list[Line2D] = []
        for side, color in ((query.baseline, BASELINE), (query.candidate, CANDIDATE)):
            values = np.sort(np.asarray(side.durations_ms, dtype=float))
            if not len(values):
                continue
            everything.extend(values.tolist())
            y = np.arange(1, len(values) + 1) / len(values)
            ax.step(values, y, where="post", color=color, linewidth=1.6)
            label = f"{for_matplotlib(side.label)} (n={len(values)})"
            if side.timing:
                picks = (side.timing.median_ms, side.timing.p90_ms, side.timing.p99_ms)
                for (_, marker, quantile), value in zip(PERCENTILE_MARKERS, picks, strict=True):
                    ax.plot(
                        [value],
                        [quantile],
                        marker=marker,
                        color=color,
                        markersize=6,
                        markeredgecolor="white",
                        markeredgewidth=0.8,
                    )
                ax.axvline(side.timing.median_ms, color=color, linewidth=0.8, linestyle=":")
                label += (
                    ": "
                    + ", ".join(
                        f"{name} {fmt_ms(v)}"
                        for (name, _, _), v in zip(PERCENTILE_MARKERS, picks, strict=True)
                    )
                    + " ms"
                )
            handles.append(Line2D([], [], color=color, linewidth=1.6, label=label))
        handles += [
            Line2D([], [], linestyle="none", marker=m, color="#555555", label=name)
            for name, m, _ in PERCENTILE_MARKERS
        ]
        if _spread(everything):
            ax.set_xscale("log")
        ax.set_xlabel("duration (ms)")
        ax.set_ylabel("fraction of executions")
        ax.set_ylim(0, 1.04)
        fig.legend(
            handles=handles, loc="outside lower center", ncols=1, fontsize=7.5, frameon=False
        )
    return to_svg(fig, chart_id)


def sweep_chart(group: SweepGroup, analysis: SweepAnalysis, chart_id: str) -> str:
    """Seed 000's chart: estimated cost (solid, left axis) and measured median duration (dashed,
    right axis) of each side's plan against the swept parameter; marker shape = plan shape;
    vertical lines where the costs cross and where the durations cross."""
    xs = [p.value for p in group.points]
    with _rc():
        fig = _figure(7.4, 3.6)
        cost_ax = fig.add_subplot()
        time_ax: Axes = cost_ax.twinx()
        time_ax.grid(False)
        for series, color in zip(analysis.series, (BASELINE, CANDIDATE), strict=True):
            label = for_matplotlib(series.label)
            cost_ax.plot(xs, series.costs, color=color, linewidth=1.5, label=f"{label} cost")
            time_ax.plot(
                xs,
                series.durations,
                color=color,
                linewidth=1.5,
                linestyle="--",
                label=f"{label} duration",
            )
            for x, cost, duration, shape in zip(
                xs, series.costs, series.durations, series.shapes, strict=True
            ):
                marker = MARKERS[analysis.shape_index[shape] % len(MARKERS)]
                cost_ax.plot([x], [cost], marker=marker, color=color, markersize=6)
                time_ax.plot(
                    [x],
                    [duration],
                    marker=marker,
                    color=color,
                    markersize=6,
                    markerfacecolor="white",
                )
        if analysis.log_x:
            cost_ax.set_xscale("log")
        _mark_crossings(cost_ax, group, analysis)
        for ax, values in ((cost_ax, analysis.all_costs()), (time_ax, analysis.all_durations())):
            if _spread(values):
                ax.set_yscale("log")
        if not group.numeric:
            cost_ax.set_xticks(xs, [for_matplotlib(p.text) for p in group.points])
        cost_ax.set_xlabel(for_matplotlib(group.param))
        cost_ax.set_ylabel("estimated cost (solid)")
        time_ax.set_ylabel("median duration, ms (dashed)")
        handles = [
            Line2D([], [], color=color, label=for_matplotlib(series.label))
            for series, color in zip(analysis.series, (BASELINE, CANDIDATE), strict=True)
        ] + [
            Line2D(
                [],
                [],
                linestyle="none",
                marker=MARKERS[i % len(MARKERS)],
                color="#444444",
                label=for_matplotlib(_short(shape)),
            )
            for shape, i in sorted(analysis.shape_index.items(), key=lambda kv: kv[1])
        ]
        fig.legend(
            handles=handles, loc="outside lower center", ncols=2, fontsize=7.5, frameon=False
        )
    return to_svg(fig, chart_id)


def _mark_crossings(ax: Axes, group: SweepGroup, analysis: SweepAnalysis) -> None:
    """A vertical line per crossing, labelled at the top on a white ground; a label closer than
    a fifth of the axis to the previous one steps down a line so the two do not print over each
    other, and a label in the right quarter of the axis reads leftwards so it stays inside."""
    crossings = sorted(
        [
            *((c, "-", "costs cross") for c in analysis.cost_crossings),
            *((c, "--", "durations cross") for c in analysis.duration_crossings),
        ]
    )
    to_axes = ax.transData + ax.transAxes.inverted()
    previous, step = -1.0, 0
    for crossing, style, text in crossings:
        ax.axvline(crossing, color="#555555", linestyle=style, linewidth=1)
        where = float(to_axes.transform((crossing, ax.get_ylim()[0]))[0])
        step = step + 1 if where - previous < 0.2 else 0
        previous, right = where, where > 0.75
        ax.annotate(
            f"{text}\n{for_matplotlib(group.param)}≈{fmt_number(crossing)}",
            (crossing, 1.0),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            ha="right" if right else "left",
            va="top",
            xytext=(-3 if right else 3, -20 * (step % 3)),
            textcoords="offset points",
            bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "none"},
        )


def _tick(group: SweepGroup, text: str) -> str:
    return fmt_tick(float(text)) if group.numeric else text


def _short(signature: str, width: int = 70) -> str:
    return signature if len(signature) <= width else signature[: width - 1] + "…"
