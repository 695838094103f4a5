"""Postmortem computations on real logs: a prepared statement whose custom plans flip after a
reload while its generic plan already had the new shape (fixtures/logs/prepared/reload.log,
see capture_reload.py), one p90 in `timeline` and `compare`, and windows with no plans."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers import ingest
from rich.console import Console
from typer.testing import CliRunner

from detector.cli.app import app
from detector.engine.comparison.compare import compare_sides, resolve_side, settings_diff
from detector.engine.comparison.plan_mix import mix_text, plan_mix_shifts
from detector.engine.timeline.build import build_timeline
from detector.errors import PlanshiftError
from detector.model import ComparisonResult, Verdict
from detector.reports.common import is_quiet
from detector.reports.comparison.terminal import render_terminal
from detector.store import Store, TargetRecord

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
RELOAD = LOGS / "prepared" / "reload.log"
INCIDENT = LOGS / "incident" / "pg.log"
QUERY = "SELECT sum(amount) FROM orders WHERE customer = $1"
BITMAP = "Aggregate > BitmapHeapScan(orders) > BitmapIndexScan(orders_customer)"
INDEX = "Aggregate > IndexScan(orders orders_customer)"


@pytest.fixture(scope="module")
def reload_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, datetime]:
    """The reload log ingested; the time of the `random_page_cost` change."""
    store = tmp_path_factory.mktemp("reload") / "s.duckdb"
    ingest(store, RELOAD, source="shop")
    with Store(store, read_only=True) as db:
        (event,) = [e for e in db.log_events() if e.kind == "setting"]
    assert event.subject == "random_page_cost" and event.logged_at is not None
    return store, event.logged_at


def test_generic_plan_is_recorded_per_execution(reload_store: tuple[Path, datetime]) -> None:
    """The generic plan and the small customers' custom plans share a shape (one fingerprint):
    the plan-cache mode is the execution's, in JSON and in text entries."""
    store, changed = reload_store
    with Store(store, read_only=True) as db:
        rows = db.log_observations()
        modes = db._con.execute(
            "SELECT plan_format, generic, count(*) FROM log_entries GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    assert modes == [
        ("json", False, 90),
        ("json", True, 90),
        ("text", False, 90),
        ("text", True, 90),
    ]
    index = {r.row.fingerprint for r in rows if r.generic}
    assert len(index) == 1
    custom_index = [r for r in rows if not r.generic and r.row.fingerprint in index]
    assert len(custom_index) == 20 + 90  # small customers before, every custom plan after
    before = [r for r in rows if r.row.collected_at < changed]
    assert sum(r.row.fingerprint not in index for r in before) == 70


def test_custom_plans_flip_though_the_generic_plan_had_the_new_shape(
    reload_store: tuple[Path, datetime],
) -> None:
    store, changed = reload_store
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query=QUERY)
    ((before, after),) = timeline.flips
    assert not before.generic and not after.generic
    assert (before.signature, after.signature) == (BITMAP, INDEX)
    assert before.count == 90 and round(before.share * 90) == 70  # 70 of the 90 custom plans
    assert after.start > changed
    (causes,) = timeline.causes
    assert 'parameter "random_page_cost" changed to "1.1"' in causes[0].text
    generic = [s for s in timeline.segments if s.generic]
    assert {s.signature for s in generic} == {INDEX} and sum(s.count for s in generic) == 180
    shown = CliRunner().invoke(app, ["timeline", "--store", str(store), "--query", "orders"])
    assert shown.exit_code == 0, shown.output
    assert "1 flip;" in shown.output
    assert ">> FLIP of the custom plans at " in shown.output
    assert 'random_page_cost" changed to "1.1"' in shown.output


def test_window_compare_says_the_plan_mix_changed(reload_store: tuple[Path, datetime]) -> None:
    """Same dominant plan (Index Scan) in both windows, but 70 of 180 executions were Bitmap
    Heap Scans before the reload and none after: the query is not `unchanged`."""
    store, changed = reload_store
    before, after = f"..{changed.isoformat()}", f"{changed.isoformat()}.."
    with Store(store, read_only=True) as db:
        result = compare_sides(db, resolve_side(db, before, None), resolve_side(db, after, None))
    (query,) = result.queries
    assert not query.plan_changed
    shifts = {s.signature: s for s in plan_mix_shifts(query)}
    assert (shifts[BITMAP].baseline, shifts[BITMAP].candidate) == (70, 0)
    assert (shifts[INDEX].baseline, shifts[INDEX].candidate) == (110, 180)
    assert mix_text(query) is not None
    unchanged = replace(query, timing=replace(query.timing, verdict=Verdict.UNCHANGED))
    assert not is_quiet(unchanged)  # shown without -v
    assert is_quiet(replace(unchanged, candidate=unchanged.baseline))  # the same mix: quiet
    console = Console(record=True, width=300)
    render_terminal(replace(result, queries=(unchanged,)), console)
    text = console.export_text()
    assert f"plan mix changed: {BITMAP} 70/180 -> 0/180" in text
    assert f"{QUERY}  timing unchanged" in text and "-v shows them" not in text
    assert "settings that differ: random_page_cost" in text


def test_timeline_and_compare_give_one_p90(tmp_path: Path) -> None:
    """The 50 executions of the generic plan with the index dropped, as a timeline segment and
    as a window: the same p90 (and median)."""
    store = tmp_path / "s.duckdb"
    ingest(store, INCIDENT, source="shop")
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="orders")
        first, dropped = timeline.segments[0], timeline.segments[3]
        assert dropped.generic and "SeqScan" in dropped.signature
        tick = timedelta(microseconds=1)
        base = resolve_side(
            db, f"{first.start.isoformat()}..{(first.end + tick).isoformat()}", None
        )
        cand = resolve_side(
            db, f"{dropped.start.isoformat()}..{(dropped.end + tick).isoformat()}", None
        )
        (query,) = [
            q for q in compare_sides(db, base, cand).queries if q.sql.startswith("SELECT sum")
        ]
    assert dropped.count == query.candidate.samples == 50
    assert query.candidate.timing is not None
    assert dropped.p90_ms == query.candidate.timing.p90_ms
    assert dropped.median_ms == query.candidate.timing.median_ms


def test_an_empty_window_exits_2_with_the_logs_time_span(
    reload_store: tuple[Path, datetime],
) -> None:
    store, changed = reload_store
    runner = CliRunner()
    result = runner.invoke(
        app, ["compare", "--store", str(store), "-b", "10:00..11:00", "-c", f"{changed}.."]
    )
    assert result.exit_code == 2, result.output
    day = changed.date().isoformat()
    assert (
        f"error: no logged plans in the time window '10:00..11:00' (from {day} 10:00:00.000 UTC to {day} 11:00:00.000 UTC)"
        in result.output
    )
    assert f"hint: the logged plans span {day} " in result.output and "(360 plans)" in result.output
    assert "0 queries compared" not in result.output and "None" not in result.output
    other = runner.invoke(
        app, ["compare", "--store", str(store), "-b", "db9@..11:00", "-c", f"{changed}.."]
    )
    assert other.exit_code == 2 and "no logged plans of source 'db9'; sources: shop" in other.output
    gap = f"shop@{(changed - timedelta(seconds=1)).isoformat()}..{changed.isoformat()}"
    with Store(store, read_only=True) as db, pytest.raises(PlanshiftError) as error:
        resolve_side(db, gap, None)  # between the sessions before and the reload
    assert "no logged plans in the time window" in error.value.message
    assert "of 'shop' span" in str(error.value.hint)


def test_an_unknown_version_is_no_difference() -> None:
    """A window before the first logged server start has no version: not `None -> 150018`."""
    known = TargetRecord(1, 1, "after", "log", 150018, {}, {})
    unknown = replace(known, name="before", server_version_num=None)
    assert "server_version_num" not in settings_diff(unknown, known)
    assert settings_diff(replace(known, server_version_num=170010), known)[
        "server_version_num"
    ] == ("170010", "150018")
    header = Console(record=True, width=200)
    render_terminal(
        ComparisonResult("before", "after", (1,), (), (), versions=(None, 150018)), header
    )
    assert "None" not in header.export_text()


def test_the_text_check_of_a_generic_plan_agrees_with_the_parsed_plan() -> None:
    """`is_generic` reads the JSON text of each logged plan (a $n outside literals and InitPlan
    outputs): on every real plan of the fixtures it says what the parsed plan says."""
    from collectors.logs.formats import Position, open_log
    from collectors.logs.plans import EntryError, generic_plan, is_generic, read_entry
    from collectors.logs.prefix import TimeParser
    from collectors.logs.registry import detect_format, make_reader

    seen = {True: 0, False: 0}
    for log in sorted(LOGS.rglob("*")):
        if log.suffix not in (".log", ".csv", ".json", ".gz") or log.parent.name == "unreadable":
            continue
        stream, _ = open_log(log)
        with stream:
            log_format = detect_format(stream.read(65536))
            reader = make_reader(log_format, stream, Position(), TimeParser(), None, 1 << 20)
            entries = [entry for batch in reader.batches() for entry in batch.entries]
        for entry in entries:
            if not entry.body or entry.body.lstrip()[:1] not in (b"{", "{"):
                continue  # text plans: read from the parsed plan
            try:
                truth = generic_plan(read_entry(entry).document)
            except EntryError:  # a repro of broken input: no plan to compare with
                continue
            assert is_generic(entry.body) is truth, (log, entry.line)
            seen[truth] += 1
    assert seen[True] >= 300 and seen[False] >= 1000  # reload.log, incident, prepared; the rest
