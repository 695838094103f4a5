"""The sweep page: seed 000's crossing chart first, its crossing labels never printed over each
other, the caption agreeing with the crossings found, and crossings only where the two sides'
plans differ (the same plan on both sides differs by noise only)."""

from __future__ import annotations

import itertools
import math
import shutil
from pathlib import Path

from chromium import DevTools, needs_chromium
from helpers import COMMITTED

from detector.engine.sweeps import SideSeries, SweepAnalysis, crossings
from detector.reports.comparison.charts import CHAR, label_rows
from detector.reports.comparison.sweeps import caption


def _analysis(costs: tuple[tuple[float, ...], tuple[float, ...]],
              durations: tuple[tuple[float, ...], tuple[float, ...]],
              shapes: tuple[tuple[str, ...], tuple[str, ...]]) -> SweepAnalysis:  # fmt: skip
    xs = [10.0 * 2**i for i in range(len(costs[0]))]
    series = tuple(
        SideSeries(label, shape, cost, duration)
        for label, cost, duration, shape in zip(("a", "b"), costs, durations, shapes, strict=True)
    )
    same = [x == y for x, y in zip(*shapes, strict=True)]
    return SweepAnalysis(
        series=series,  # type: ignore[arg-type]
        shape_index={s: i for i, s in enumerate(dict.fromkeys(shapes[0] + shapes[1]))},
        cost_crossings=tuple(crossings(xs, *costs, True, same)),
        duration_crossings=tuple(crossings(xs, *durations, True, same)),
        switches=(),
        log_x=True,
    )


def test_labels_of_close_crossings_take_rows_and_never_overlap() -> None:
    wanted = [(100.0 + 7 * i, f"durations cross N≈{1000 + i}") for i in range(6)]
    wanted += [(690.0, "costs cross N≈99,999"), (40.0, "costs cross N≈1")]
    placed = label_rows(wanted, left=64.0, right=690.0)
    assert len(placed) == len(wanted)
    boxes = []
    for label, row in placed:
        width = len(label.text) * CHAR
        start = label.x if label.anchor == "start" else label.x - width
        assert start >= 64.0 and start + width <= 690.0 + 1e-9, label  # inside the chart
        boxes.append((row, start, start + width))
    for (row_a, a0, a1), (row_b, b0, b1) in itertools.combinations(boxes, 2):
        assert row_a != row_b or a1 <= b0 or b1 <= a0, "two labels of one row overlap"


def test_no_crossing_where_both_sides_ran_the_same_plan() -> None:
    # both sides ran plan A at the first three points (durations differ by noise and cross
    # twice there); at the last two the plans differ, and cross between them
    analysis = _analysis(
        ((1, 2, 3, 4, 5), (1, 2, 3, 3.5, 9)),
        ((1.0, 2.1, 2.9, 3.0, 9), (1.1, 1.9, 3.1, 3.5, 8)),
        (("A", "A", "A", "A", "A"), ("A", "A", "A", "B", "B")),
    )
    assert len(analysis.duration_crossings) == 1
    assert 80 < analysis.duration_crossings[0] < 160  # between the 4th and the 5th point


def test_the_caption_agrees_with_the_crossings() -> None:
    forced = (("A",) * 4, ("B",) * 4)
    both = _analysis(((1, 2, 4, 8), (3, 3, 3, 3)), ((1, 2, 4, 8), (2.5, 2.5, 2.5, 2.5)), forced)
    assert both.cost_crossings and both.duration_crossings
    assert "between the two the planner picks the slower plan" in caption(both, "N", [])
    costs_only = _analysis(((1, 2, 4, 8), (3, 3, 3, 3)), ((1, 2, 3, 4), (5, 5, 5, 5)), forced)
    text = caption(costs_only, "N", [])
    assert not costs_only.duration_crossings and "but the durations do not" in text
    neither = _analysis(((1, 2, 3, 4), (5, 6, 7, 8)), ((5, 6, 7, 8), (1, 2, 3, 4)), forced)
    text = caption(neither, "N", [])
    assert "nothing crosses" in text and "costs lower is the slower one at every point" in text
    assert "between the cost crossing" not in text  # the old caption said so regardless
    units = caption(both, "N", ["random_page_cost"])
    assert "different units" in units and "N≈" in units
    switching = _analysis(((1, 2, 4, 8), (1, 2, 3, 3)), ((1, 2, 4, 8), (1, 2, 3, 3)),
                          (("A",) * 4, ("A", "A", "B", "B")))  # fmt: skip
    assert "Each side chose its own plan" in caption(switching, "N", [])


@needs_chromium
def test_the_crossing_chart_is_the_first_thing_seen(tmp_path: Path) -> None:
    """The committed store's forced-plan sweep (a real PostgreSQL 15 run): the first chart of
    the page is the sweep chart, inside the first screen, and its crossing labels overlap
    neither each other nor the plot."""
    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.compare import compare_from_store
    from detector.model import Severity
    from detector.reports import render

    store = tmp_path / "store.duckdb"
    shutil.copyfile(COMMITTED, store)
    result = compare_from_store(store, "indexscan", "seqscan", None, CompareOptions())
    page = tmp_path / "sweep.html"
    page.write_text(render("html", result, fail_on=Severity.ERROR))
    with DevTools(page) as browser:
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )
        first = browser.evaluate("document.querySelector('svg.chart').getAttribute('data-kind')")
        top = browser.evaluate("document.querySelector('svg.chart').getBoundingClientRect().top")
        assert first == "sweep" and top < 450
        boxes = browser.evaluate(
            "Array.from(document.querySelectorAll('svg[data-kind=sweep] text.crossing'),"
            " t => { var b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; })"
        )
        plot_top = browser.evaluate(
            "document.querySelector('svg[data-kind=sweep] path.frame').getBBox().y"
        )
    assert len(boxes) == 2  # costs cross, durations cross
    for a, b in itertools.combinations(boxes, 2):
        apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
        assert apart, (a, b)
    assert all(box[3] <= plot_top for box in boxes)
    assert not any(math.isnan(v) for box in boxes for v in box)
