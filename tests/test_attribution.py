"""Attribution on real PostgreSQL: of three settings that differ, the one that moves the plan
is named, tested by re-planning; the other two are said not to move it."""

from __future__ import annotations

from pathlib import Path

from helpers import run_and_compare

from collectors.runner import RunOptions
from detector.jobs.demo import DEMO_WORKLOAD
from detector.reports.comparison.json_report import to_document


def test_of_three_differing_settings_the_one_that_moves_the_plan_is_named(
    tmp_path: Path, installations: object
) -> None:
    text = DEMO_WORKLOAD.read_text()
    text = text.replace("repetitions = 100", "repetitions = 6")
    text = text.replace(
        '[variants.proposed]\nrandom_page_cost = "1.1"',
        '[variants.proposed]\nrandom_page_cost = "1.1"\nwork_mem = "64MB"\n'
        'effective_io_concurrency = "200"',
    )
    result = run_and_compare(
        tmp_path, text, "current", "proposed", RunOptions(queries=("sum_range",))
    )
    (query,) = result.queries
    assert query.plan_changed
    assert query.attribution is not None
    assert query.attribution["restores"] == ["random_page_cost"]
    assert set(query.attribution["tested"]) == {
        "random_page_cost",
        "work_mem",
        "effective_io_concurrency",
    }
    timed = query.attribution["counterfactual"]
    assert timed["forced_settings"] == {"random_page_cost": "4"}
    assert timed["fingerprint_matched"] is True
    assert timed["samples"] == 6 and timed["ratio_vs_chosen"] > 0
    (finding,) = [f for f in result.findings if f.code == "PS500"]
    assert finding.message.startswith("caused by random_page_cost 4 -> 1.1: setting it back")
    assert "effective_io_concurrency, work_mem also differ but do not move it" in finding.message
    assert "the rejected plan, timed on the candidate (random_page_cost = 4): " in finding.message
    document = to_document(result)
    (entry,) = document["queries"]
    assert entry["attribution"]["counterfactual"]["fingerprint_matched"] is True
