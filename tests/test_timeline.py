"""A postmortem on a real incident: an index is dropped on a live server (the plan flips to a
Seq Scan and gets slower), then recreated. auto_explain logs and pg_stat_statements snapshots
taken during the incident go through ingest, timeline and compare between time windows."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
from helpers import ingest
from rich.console import Console
from typer.testing import CliRunner

from collectors.servers.installations import find_installation
from detector.cli.app import app
from detector.engine.comparison.compare import compare_sides, resolve_side
from detector.engine.stats import timing_stats
from detector.engine.timeline.build import build_timeline, parse_time, store_pgss_deltas
from detector.errors import PlanshiftError
from detector.jobs.snapshot import take_snapshot
from detector.model import Verdict
from detector.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import INCIDENT_PHASES, capture, incident_workload

pytestmark = pytest.mark.pg
PREPARED = Path(__file__).resolve().parent / "fixtures" / "logs" / "prepared" / "pg.log"
QUIET = Console(file=open("/dev/null", "w"))  # noqa: SIM115


@pytest.fixture(scope="module")
def incident(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[str, datetime]]]:
    """Store with the incident's logs ingested and pgss snapshots; the phase start times."""
    try:
        find_installation(17)
    except PlanshiftError:
        pytest.skip("PostgreSQL 17 is not installed")
    out = tmp_path_factory.mktemp("incident")
    store = out / "postmortem.duckdb"
    phases: dict[str, datetime] = {}

    def checkpoint(dsn: str, phase: str) -> None:
        snapshot = take_snapshot(store_path=store, dsn=dsn, name="shop", console=QUIET)
        with Store(store, read_only=True) as db:
            (row,) = [r for r in db.pgss_snapshots([t.target_id for t in db.targets()])[-1:]]
        assert snapshot == row.snapshot_id
        phases[phase] = row.taken_at

    capture(17, out, lambda conninfo_of: incident_workload(conninfo_of, checkpoint))
    ingest(store, out / "pg.log", source="shop")
    yield store, phases


def test_the_flip_and_its_way_back_are_on_the_timeline(
    incident: tuple[Path, dict[str, datetime]],
) -> None:
    store, phases = incident
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="SELECT sum(amount) FROM orders WHERE customer = $1")
    # per phase: a session of 10 custom plans (psycopg prepares the statement at the 6th),
    # then the plan cache's generic plan
    phases_seen = [timeline.segments[i : i + 2] for i in range(0, len(timeline.segments), 2)]
    assert [[s.count for s in pair] for pair in phases_seen] == [
        [10, n - 10] for _, n in INCIDENT_PHASES
    ]
    assert all(not custom.generic and generic.generic for custom, generic in phases_seen)
    before, dropped, back = (custom for custom, _ in phases_seen)
    assert "BitmapIndexScan(orders_customer)" in before.signature
    assert dropped.signature == "Aggregate > SeqScan(public.orders)"
    assert back.fingerprint == before.fingerprint
    assert all(generic.fingerprint == custom.fingerprint for custom, generic in phases_seen)
    # each mode flips at the drop and back; the generic plan following the custom plans' change
    # is the same flip
    assert timeline.flips == [(before, dropped), (dropped, back)]
    assert phases["index dropped"] < dropped.start < phases["index back"] < back.start
    assert dropped.median_ms is not None and before.median_ms is not None
    assert dropped.median_ms > 5 * before.median_ms
    assert dropped.median_cost > 5 * before.median_cost
    assert timeline.queryids  # from %Q and the verbose plan


def test_pgss_deltas_line_up_with_the_phases(incident: tuple[Path, dict[str, datetime]]) -> None:
    store, _ = incident
    with Store(store, read_only=True) as db:
        deltas = [d for d in store_pgss_deltas(db, "shop") if d.query and "orders" in d.query]
    ours = [d for d in deltas if d.query and d.query.startswith("SELECT sum(amount)")]
    assert [d.calls for d in ours] == [n for _, n in INCIDENT_PHASES]
    means = [d.mean_ms for d in ours]
    assert all(m is not None for m in means)
    assert means[1] > 5 * means[0] and means[1] > 5 * means[2]  # type: ignore[operator]


def test_timeline_cli_marks_flips_and_shows_pgss(
    incident: tuple[Path, dict[str, datetime]],
) -> None:
    store, phases = incident
    runner = CliRunner()
    result = runner.invoke(app, ["timeline", "--store", str(store), "--query", "orders"])
    assert result.exit_code == 0, result.output
    assert result.output.count(">> FLIP of the custom plans (then of the generic plan) at") == 2
    assert "pg_stat_statements shop" in result.output and "<- flip" in result.output
    window = runner.invoke(
        app,
        ["timeline", "--store", str(store), "--query", "orders", "--since",
         phases["index dropped"].isoformat(), "--until", phases["index back"].isoformat()],
    )  # fmt: skip
    assert window.exit_code == 0, window.output
    assert ">> FLIP" not in window.output and "SeqScan(public.orders)" in window.output
    empty = runner.invoke(
        app, ["timeline", "--store", str(store), "--since", "2001-01-01", "--until", "2001-01-02"]
    )
    assert empty.exit_code == 2 and "no logged plans" in empty.output


def test_compare_between_time_windows(incident: tuple[Path, dict[str, datetime]]) -> None:
    store, phases = incident
    before = f"..{phases['index dropped'].isoformat()}"
    during = f"shop@{phases['index dropped'].isoformat()}..{phases['index back'].isoformat()}"
    with Store(store, read_only=True) as db:
        base, cand = resolve_side(db, before, None), resolve_side(db, during, None)
        result = compare_sides(db, base, cand)
    (query,) = [q for q in result.queries if q.sql.startswith("SELECT sum(amount) FROM orders")]
    assert query.plan_changed
    assert query.timing.verdict is Verdict.REGRESSED
    for side in (query.baseline, query.candidate):  # the statistics of a run's side
        assert side.timing == timing_stats(side.durations_ms)
    codes = {f.code for f in result.findings if f.query_key == query.query_key}
    assert codes >= {"PS100", "PS200"}
    runner = CliRunner()
    cli = runner.invoke(app, ["compare", "--store", str(store), "-b", before, "-c", during])
    assert cli.exit_code == 1, cli.output
    assert "SeqScan(public.orders)" in cli.output


def test_times_are_read_as_utc() -> None:
    reference = parse_time("2026-11-22T10:00:00")
    assert parse_time("14:05", reference).isoformat() == "2026-11-22T14:05:00+00:00"
    assert parse_time("2026-11-22 16:05+02:00").isoformat() == "2026-11-22T14:05:00+00:00"
    with pytest.raises(PlanshiftError):
        parse_time("yesterday")


def test_plan_cache_switch_is_labelled_not_a_flip(tmp_path: Path) -> None:
    """A prepared statement: 5 custom plans (Seq Scan for the value 0), then the generic plan
    (Bitmap Heap Scan planned for `status = $1`), in a JSON-logging and a text-logging session."""
    store = tmp_path / "s.duckdb"
    ingest(store, PREPARED, source="sysbench")
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="orders")
    assert [s.count for s in timeline.segments] == [5, 5, 5, 5]
    assert [s.generic for s in timeline.segments] == [False, True, False, True]
    assert "SeqScan" in timeline.segments[0].signature
    assert "BitmapHeapScan" in timeline.segments[1].signature
    assert timeline.flips == []
    switches = [(s.before.generic, s.after.generic, s.executions) for s in timeline.switches]
    assert switches == [(False, True, 5), (True, False, None), (False, True, 5)]
    notes = [line for lines in timeline.transition_lines().values() for line in lines]
    assert notes[0].startswith("  >> plan cache: custom -> generic plan after 5 executions at ")
    assert notes[1].startswith("  >> plan cache: generic -> custom plan (new session) at ")
    assert not [line for line in notes if "FLIP" in line]
    shown = CliRunner().invoke(app, ["timeline", "--store", str(store), "--query", "orders"])
    assert shown.exit_code == 0, shown.output
    assert "plan cache: custom -> generic plan after 5 executions" in shown.output
    assert "FLIP" not in shown.output


def test_a_generic_plan_that_changes_is_a_flip(tmp_path: Path) -> None:
    """Generic plan -> another generic plan is a flip; so is a custom plan that differs from
    the custom plan before the generic ones."""
    store = tmp_path / "s.duckdb"
    ingest(store, PREPARED, source="sysbench")
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="orders")
    first, generic, custom, _ = timeline.segments
    timeline.segments[2] = replace(custom, fingerprint="0" * 16, signature="Result")
    assert timeline.flips == [(first, timeline.segments[2])]
    timeline.segments[3] = replace(generic, fingerprint="1" * 16)
    assert timeline.flips[1] == (generic, timeline.segments[3])
    lines = timeline.transition_lines()
    assert lines[2][-1].startswith("  >> FLIP of the custom plans at ")
    assert lines[3][-1].startswith("  >> FLIP of the generic plan at ")


SCHEMAS = Path(__file__).resolve().parents[1] / "detector" / "reports" / "schema"


def valid(kind: str, document: dict[str, object]) -> None:
    schema = json.loads((SCHEMAS / f"{kind}-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


def test_top_queries_of_a_window_from_logs_and_pgss(
    incident: tuple[Path, dict[str, datetime]],
) -> None:
    """The window the index was missing: the orders query on top by total time, its logged
    executions and its pg_stat_statements calls both the phase's count."""
    store, phases = incident
    window = ["--since", phases["index dropped"].isoformat(),
              "--until", phases["index back"].isoformat()]  # fmt: skip
    runner = CliRunner()
    shown = runner.invoke(app, ["timeline", "--store", str(store), "--top", "3", *window])
    assert shown.exit_code == 0, shown.output
    assert "from the logs" in shown.output and "from pg_stat_statements" in shown.output
    result = runner.invoke(
        app, ["timeline", "--store", str(store), "--top", "3", *window, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    valid("timeline-top", document)
    calls = dict(INCIDENT_PHASES)["index dropped"]
    (first, *_) = document["logs"]
    assert first["name"].startswith("SELECT sum(amount) FROM orders")
    assert (first["calls"], first["plans"]) == (calls, 1)
    assert first["total_ms"] == max(q["total_ms"] for q in document["logs"])
    ours = [q for q in document["pg_stat_statements"] if q["query_key"] == first["query_key"]]
    assert [(q["calls"], q["partial"]) for q in ours] == [(calls, False)]
    by_calls = runner.invoke(
        app, ["timeline", "--store", str(store), "--top", "5", "--by", "calls", "--format", "json"]
    )
    counts = [q["calls"] for q in json.loads(by_calls.output)["logs"]]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] >= sum(n for _, n in INCIDENT_PHASES)
    wrong = runner.invoke(app, ["timeline", "--store", str(store), "--top", "3", "--by", "x"])
    assert wrong.exit_code == 2 and "hint:" in wrong.output


def test_timeline_json_follows_its_schema(incident: tuple[Path, dict[str, datetime]]) -> None:
    store, _ = incident
    result = CliRunner().invoke(app, ["timeline", "--store", str(store), "--format", "json"])
    assert result.exit_code == 0, result.output
    valid("timeline", json.loads(result.output))
