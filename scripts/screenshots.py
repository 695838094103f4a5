"""Regenerate the screenshots in docs/ from real stores, with headless Chromium.

    .venv/bin/python scripts/screenshots.py [--demo-store S] [--sweep-store S] [--out docs]

- docs/report-demo.png: the top of the demo's HTML report (`planshift demo`'s comparison, from
  examples/demo/demo.duckdb, a real run of examples/demo/workload.toml on PostgreSQL 15), which
  is also written as the sample report, examples/demo/report.html (`--sample`);
- docs/report-plan-diff.png: the demo report's most important query: findings, census, plan diff;
- docs/report-sweep.png: the sweep section of tests/fixtures/reports/store.duckdb's comparison
  indexscan -> seqscan (a real sweep of seed 000's range query, built by make_store.py);
- docs/report-census.png: `planshift census -o census.html` of that store (the plan diagrams).

Each store is copied first (opening a store may migrate it). A section is shot by writing a page
that holds the report's head and that one section, so no scrolling is needed. Needs Chromium
(`scripts/bootstrap.sh --test`); pixels differ between machines, so no test compares them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from chromium import screenshot  # noqa: E402

from detector.engine.comparison.options import CompareOptions  # noqa: E402
from detector.jobs.census import census_from_store  # noqa: E402
from detector.jobs.compare import compare_from_store  # noqa: E402
from detector.model import Severity  # noqa: E402
from detector.reports import render  # noqa: E402
from detector.reports.census.html import render_census_html  # noqa: E402
from detector.reports.common import by_importance  # noqa: E402

DEMO_STORE = ROOT / "examples" / "demo" / "demo.duckdb"
SWEEP_STORE = ROOT / "tests" / "fixtures" / "reports" / "store.duckdb"
WIDTH = 1280


def section(page: str, start: str, end: str) -> str:
    """The report's head and the first element that opens with `start` (up to `end`), alone."""
    head = page[: page.index("<body>") + len("<body>")]
    begin = page.index(start)
    stop = page.index(end, begin) + len(end)
    return f"{head}<main>{page[begin:stop]}</main></body></html>\n"


def _copy(store: Path, directory: Path) -> Path:
    copy = directory / store.name
    shutil.copyfile(store, copy)
    return copy


def _shoot(html: str, directory: Path, png: Path, height: int) -> None:
    page = directory / (png.stem + ".html")
    page.write_text(html)
    screenshot(page, png.resolve(), WIDTH, height)
    print(f"wrote {png}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-store", type=Path, default=DEMO_STORE)
    parser.add_argument("--sweep-store", type=Path, default=SWEEP_STORE)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--sample", type=Path, default=ROOT / "examples" / "demo" / "report.html")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="planshift-screenshots-") as temp:
        directory = Path(temp)
        demo = compare_from_store(
            _copy(args.demo_store, directory), "current", "proposed", None, CompareOptions()
        )
        page = render("html", demo, fail_on=Severity.ERROR)
        args.sample.write_text(page)
        print(f"wrote {args.sample}")
        _shoot(page, directory, args.out / "report-demo.png", 2000)
        first = by_importance(demo)[0]
        _shoot(
            section(page, f'<h3 id="plan{first}-diff">', "</table>"),
            directory,
            args.out / "report-plan-diff.png",
            520,
        )
        sweep_store = _copy(args.sweep_store, directory)
        sweeps = compare_from_store(sweep_store, "indexscan", "seqscan", None, CompareOptions())
        page = render("html", sweeps, fail_on=Severity.ERROR)
        _shoot(
            section(page, '<section id="sweeps">', "</section>"),
            directory,
            args.out / "report-sweep.png",
            1000,
        )
        census = render_census_html(census_from_store(sweep_store, None, None, []))
        _shoot(census, directory, args.out / "report-census.png", 1150)


if __name__ == "__main__":
    main()
