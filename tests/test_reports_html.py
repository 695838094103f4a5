"""The HTML report as a person sees it: opened in headless Chromium (Debian's `chromium`).

Checks that the page renders without console errors and with its script run to the end, that
the charts (inline SVG) and the plan diff are in the rendered DOM, that nothing is fetched from
the network, and takes a screenshot. Also a script for the committed screenshots:

    .venv/bin/python tests/test_reports_html.py REPORT.html OUT.png [WIDTH HEIGHT]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.report_store import fixed_store

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
STORE = fixed_store()
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
)  # fmt: skip
CONSOLE_PROBLEM = re.compile(r"CONSOLE\(\d+\)\].*|Uncaught .*|Failed to load resource.*")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium missing: apt-get install chromium (scripts/bootstrap.sh does as root)",
)


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="planshift-chromium-") as profile:
        return subprocess.run(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip


def console_problems(stderr: str) -> list[str]:
    return [m.group(0) for m in CONSOLE_PROBLEM.finditer(stderr)]


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2000) -> None:
    result = chromium(page, f"--window-size={width},{height}", f"--screenshot={png}")
    assert result.returncode == 0 and png.exists(), result.stderr[-2000:]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from detector.engine.compare import CompareOptions
    from detector.jobs.run import compare_from_store
    from detector.model import Severity
    from detector.reports import render

    result = compare_from_store(STORE, "current", "proposed", None, CompareOptions())
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render("html", result, fail_on=Severity.ERROR))
    return path


def test_the_page_is_self_contained(report: Path) -> None:
    text = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", text)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)
    assert "<script src" not in text and "<link " not in text
    assert text.count("<svg") >= 2 + 9  # sweep chart, census heat map, one CDF per query


@needs_chromium
def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    assert console_problems(chromium(broken, "--dump-dom").stderr)


@needs_chromium
def test_chromium_renders_the_report(report: Path, tmp_path: Path) -> None:
    result = chromium(report, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_problems(result.stderr) == []
    dom = result.stdout
    assert 'data-ready="yes"' in dom, "the page's script did not run to the end"
    assert dom.count('<svg class="chart"') >= 11
    assert 'data-chart="sweep0"' in dom and 'data-chart="census0"' in dom
    assert dom.count('class="plandiff"') == 9
    assert '<tr class="changed"' in dom and "BitmapHeapScan(t)" in dom
    assert "Gate fails" in dom and "Findings by workload impact" in dom
    png = tmp_path / "report.png"
    screenshot(report, png)
    assert png.stat().st_size > 50_000


@needs_chromium
def test_chromium_renders_the_census_page(tmp_path: Path) -> None:
    from detector.engine.census import build_census
    from detector.reports.census_html import render_census_html
    from detector.store import Store

    with Store(STORE, read_only=True) as store:
        page = tmp_path / "census.html"
        page.write_text(render_census_html(build_census(store, store.targets())))
    result = chromium(page, "--dump-dom")
    assert result.returncode == 0 and console_problems(result.stderr) == []
    assert result.stdout.count('<svg class="chart"') == 3


if __name__ == "__main__":
    size = [int(v) for v in sys.argv[3:5]]
    screenshot(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), *size)
