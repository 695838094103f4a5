"""The Python front door: `detector.compare_plans` and `detector.compare`, as a notebook uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fixed_store

import detector
from detector import CompareOptions, PlanshiftError, Store, compare, compare_plans

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans" / "pg17"


def explain(name: str) -> object:
    return json.loads((PLANS / f"{name}.json").read_text())["explain"]


def test_two_plans_without_timings_name_the_flip_and_stay_inconclusive() -> None:
    result = compare_plans(explain("range_bitmap_scan"), explain("range_index_scan"))
    (query,) = result.queries
    assert query.plan_changed and query.timing.verdict == "inconclusive"
    assert "no timings" in query.timing.describe()
    assert "PS100" in {f.code for f in result.findings}


def test_paired_timings_give_a_verdict_and_text_plans_are_refused() -> None:
    before = [0.30, 0.31, 0.29, 0.30, 0.32, 0.30, 0.31, 0.30]
    after = [b * 1.5 for b in before]
    result = compare_plans(
        json.dumps(explain("range_bitmap_scan")),
        explain("range_index_scan"),
        before_ms=before,
        after_ms=after,
        paired=True,
    )
    assert result.interleaved and result.queries[0].timing.verdict == "regressed"
    assert {"PS100", "PS200"} <= {f.code for f in result.findings}
    with pytest.raises(PlanshiftError, match="paired timings need equal counts"):
        compare_plans(
            explain("range_bitmap_scan"),
            explain("range_index_scan"),
            before_ms=before,
            after_ms=after[:-1],
            paired=True,
        )
    with pytest.raises(PlanshiftError, match="not an EXPLAIN JSON document"):
        compare_plans(
            "Seq Scan on t  (cost=0.00..1.00 rows=1 width=4)", explain("range_index_scan")
        )


def test_the_same_plan_is_no_plan_change_and_rules_can_be_selected() -> None:
    plan = explain("range_index_scan")
    result = compare_plans(plan, plan, options=CompareOptions(select=("PS1",)))
    assert not result.queries[0].plan_changed and result.findings == ()


def test_compare_on_a_store_equals_the_cli_json() -> None:
    path = fixed_store()
    with Store(path, read_only=True) as store:
        result = compare(store, "indexscan", "seqscan", options=CompareOptions(noise_run=None))
    shown = subprocess.run(
        [sys.executable, "-m", "detector", "compare", "--store", str(path), "-b", "indexscan",
         "-c", "seqscan", "--format", "json", "--fail-on", "never"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    document = json.loads(shown.stdout)
    assert [q["name"] for q in document["queries"]] == [q.query_name for q in result.queries]
    assert sorted(f["code"] for f in document["findings"]) == sorted(
        f.code for f in result.findings
    )


def test_the_package_is_typed_and_lazy() -> None:
    assert (Path(detector.__file__).parent / "py.typed").is_file()
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, detector.model; print('duckdb' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "False"
    with pytest.raises(AttributeError):
        _ = detector.nothing_here  # type: ignore[attr-defined]
