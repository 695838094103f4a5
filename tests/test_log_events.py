"""Server events in real logs (tests/fixtures/logs/events, captured by capture_events.py from a
PostgreSQL 17 cluster): setting changes, starts, autovacuum/autoanalyze, DDL; and the flip that
`ALTER SYSTEM SET random_page_cost` + reload causes, named on the timeline with the prefix
guessed, in stderr, csvlog and jsonlog, read sequentially and by worker processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from collectors.logs.autoexplain import IngestOptions, LogIngest
from collectors.logs.events import event_of, plan_settings
from detector.cli.app import app
from detector.engine.timeline.build import build_timeline
from detector.engine.timeline.causes import event_cause, settings_diff, version_changes
from detector.model.log_rows import LogEventRow
from detector.store import Store

EVENTS = Path(__file__).resolve().parent / "fixtures" / "logs" / "events"
LOGS = ("pg.log", "pg.csv", "pg.json")
SETTING_MESSAGE = 'parameter "random_page_cost" changed to "60"'
WHEN = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)


def ingest(store_path: Path, log: Path, workers: int = 1, batch_size: int = 7) -> int:
    with Store(store_path) as store:
        run_id = store.begin_run("events test", workload_hash=None, tool_version="t", host="h")
        target = store.add_target(
            run_id, "log", source="log", server_version_num=None, gucs={}, info={}
        )
        options = IngestOptions(batch_size=batch_size, workers=workers)
        report = LogIngest(store, target, options).ingest(log)
        store.finish_run(run_id)
    return report.events


def events_of(store_path: Path) -> list[LogEventRow]:
    with Store(store_path, read_only=True) as store:
        return store.log_events()


def setting_line(log: Path) -> int:
    """The line of the setting change: a csvlog record or stderr/json line holding it."""
    text = log.read_text().splitlines()
    needle = SETTING_MESSAGE.replace('"', '""') if log.suffix == ".csv" else SETTING_MESSAGE
    if log.suffix == ".json":
        needle = json.dumps(SETTING_MESSAGE)[1:-1]
    return next(n for n, line in enumerate(text, 1) if needle in line)


@pytest.mark.parametrize("name", LOGS)
def test_the_flip_names_the_setting_change_with_the_prefix_guessed(
    name: str, tmp_path: Path
) -> None:
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    done = runner.invoke(app, ["ingest", str(EVENTS / name), "--store", str(store)])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["timeline", "--store", str(store), "--query", "items"])
    assert shown.exit_code == 0, shown.output
    (flip,) = [line for line in shown.output.splitlines() if ">> FLIP" in line]
    line = setting_line(EVENTS / name)
    assert f"after: {SETTING_MESSAGE} at " in flip
    assert f"(log line {line} of {name})" in flip
    assert "plan Settings: random_page_cost default -> 60" in flip
    document = runner.invoke(
        app, ["timeline", "--store", str(store), "--query", "items", "--format", "json"]
    )
    (query,) = json.loads(document.output)["queries"]
    (causes,) = [flip["causes"] for flip in query["flip_causes"]]
    assert (causes[0]["kind"], causes[0]["line"]) == ("setting", line)
    assert causes[1]["kind"] == "plan-settings"


@pytest.mark.parametrize("name", LOGS)
def test_every_event_kind_is_stored_once_with_its_line(name: str, tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    count = ingest(store, EVENTS / name)
    events = events_of(store)
    assert count == len(events) and {e.kind for e in events} == {
        "setting", "reload", "start", "autovacuum", "autoanalyze", "ddl"
    }  # fmt: skip
    found = {(e.kind, e.subject, e.value) for e in events}
    assert ("setting", "random_page_cost", "60") in found
    assert ("autovacuum", "public.churn", None) in found
    assert ("autoanalyze", "public.churn", None) in found
    assert ("ddl", "churn_id", None) in found  # DROP INDEX names the index
    assert any(e.kind == "start" and (e.subject or "").startswith("17.") for e in events)
    ddl = [e.message.split(": ", 1)[1].split()[0] for e in events if e.subject == "items"]
    assert ddl == ["CREATE", "ALTER", "ANALYZE", "VACUUM", "CLUSTER", "REINDEX"]
    text = (EVENTS / name).read_text().splitlines()
    for event in events:  # file:line points at the message
        assert event.message.split('"')[0][:40] in text[event.line - 1].replace('""', '"')
        assert event.logged_at is not None and event.path.endswith(name)
    assert ingest(store, EVENTS / name) == 0 and len(events_of(store)) == len(events)


@pytest.mark.parametrize("name", LOGS)
def test_worker_processes_read_the_same_events(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(tmp_path / "one.duckdb", EVENTS / name)
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 8 << 10)
    ingest(tmp_path / "two.duckdb", EVENTS / name, workers=2, batch_size=5000)
    assert events_of(tmp_path / "two.duckdb") == events_of(tmp_path / "one.duckdb")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('parameter "work_mem" changed to "64MB"', ("setting", "work_mem", "64MB")),
        ("received SIGHUP, reloading configuration files", ("reload", None, None)),
        ("starting PostgreSQL 18.1 on aarch64", ("start", "18.1", None)),
        ("database system is ready to accept connections", ("start", None, None)),
        (
            'automatic aggressive vacuum of table "db.s.t": index scans: 0',
            ("autovacuum", "s.t", None),
        ),
        (
            'automatic vacuum to prevent wraparound of table "db.public.t": index scans: 1',
            ("autovacuum", "public.t", None),
        ),
        ('automatic analyze of table "db.public.t"', ("autoanalyze", "public.t", None)),
        (
            'execute <unnamed>: CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS i ON ONLY public."T" (a)',
            ("ddl", "public.T", None),
        ),
        ("statement: drop index if exists s.i", ("ddl", "s.i", None)),
        ("statement: ANALYZE", ("ddl", None, None)),
        ("statement: VACUUM (VERBOSE, ANALYZE) public.t", ("ddl", "public.t", None)),
        ("statement: reindex (verbose) index concurrently i", ("ddl", "i", None)),
        ("statement: SELECT 1", None),
        ("statement: CREATE TABLE x (a int)", None),
        ("duration: 1.0 ms  statement: SELECT 'changed to'", None),
        ("checkpoint starting: time", None),
    ],
)
def test_messages_read_as_events(
    message: str, expected: tuple[str, str | None, str | None] | None
) -> None:
    event = event_of(message, 3, 100, WHEN)
    assert (None if event is None else (event.kind, event.subject, event.value)) == expected


def test_plan_settings_from_json_and_text_plans() -> None:
    json_plan = b'\t{\n\t  "Plan": {},\n\t  "Settings": {\n\t    "jit": "off",\n\t    "work_mem": "8MB"\n\t  }\n\t}\n'
    assert plan_settings(json_plan) == "jit = 'off', work_mem = '8MB'"
    text_plan = (
        "Query Text: SELECT 1\nResult  (cost=0.00..0.01 rows=1 width=4)\nSettings: jit = 'off'\n"
    )
    assert plan_settings(text_plan) == "jit = 'off'"
    assert plan_settings(b'\t{\n\t  "Plan": {}\n\t}\n') is None
    assert settings_diff("jit = 'off'", "jit = 'on', work_mem = '8MB'") == (
        "jit off -> on, work_mem default -> 8MB"
    )


def _event(minutes: int, kind: str, subject: str | None, value: str | None = None) -> LogEventRow:
    when = WHEN + timedelta(minutes=minutes)
    return LogEventRow(minutes, minutes, when, 1, "db", kind, subject, value, f"{kind} {subject}")


def test_only_events_that_can_explain_a_flip_are_named() -> None:
    events = [
        _event(1, "start", "16.4"),
        _event(2, "ddl", "public.items"),
        _event(3, "setting", "log_min_duration_statement", "0"),
        _event(4, "autoanalyze", "public.other"),
        _event(5, "start", "17.2"),
        _event(6, "start", "17.2"),
        _event(7, "reload", None),
    ]
    versions = version_changes(events)
    flip = WHEN + timedelta(minutes=10)
    names = {"items", "public.items", "items_v"}

    def named(start: int, upto: list[LogEventRow]) -> str | None:
        cause = event_cause(
            upto, version_changes(upto), WHEN + timedelta(minutes=start), flip, names
        )
        return None if cause is None else cause.text

    assert versions == {4}
    assert named(0, events) == "start 17.2"  # the restart into another version
    assert named(0, events[:4]) == "ddl public.items"  # not the other table, not logging
    assert named(2, events[:4]) is None  # before the window
    assert named(0, [*events[:4], _event(8, "ddl", None)]) == "ddl None"  # all tables
    assert named(0, [*events, _event(11, "setting", "work_mem")]) == "start 17.2"  # later


def test_timeline_without_events_names_no_cause(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    ingest(store, EVENTS / "pg.log")
    with Store(store) as db:
        db._con.execute("DELETE FROM log_events")
        db._con.execute("UPDATE log_entries SET settings = NULL")
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="items")
    assert len(timeline.flips) == 1 and timeline.causes == [[]]
    (line,) = [line for lines in timeline.transition_lines().values() for line in lines]
    assert "after:" not in line


def test_a_change_of_the_plans_settings_alone_is_named(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    ingest(store, EVENTS / "pg.json")
    with Store(store) as db:
        db._con.execute("DELETE FROM log_events")
    with Store(store, read_only=True) as db:
        (timeline,) = build_timeline(db, query="items")
    ((cause,),) = timeline.causes
    assert cause.kind == "plan-settings" and cause.at == timeline.segments[1].start
    assert cause.text == "plan Settings: random_page_cost default -> 60"


def test_compare_of_two_windows_names_the_settings_and_events_between(tmp_path: Path) -> None:
    """Before the reload and after it: the windows' logged Settings differ (random_page_cost
    default -> 60), the events are listed with the window they fell in (the reload and the
    change between the two) and file:line (terminal and JSON), and a window side is its own
    type, never a target of the store."""
    import jsonschema

    from detector.engine.comparison.compare import compare_sides, resolve_side
    from detector.engine.comparison.windows import WindowSide

    store = tmp_path / "s.duckdb"
    ingest(store, EVENTS / "pg.log")
    with Store(store, read_only=True) as db:
        (change,) = [e for e in db.log_events() if e.kind == "setting"]
        (reload,) = [e for e in db.log_events() if e.kind == "reload"]
        rows = db.log_observations()
        first = next(r.row for r in rows if "random_page_cost" in (r.settings or ""))
        flip_at = first.collected_at
        last_before = max(  # the query's last execution before the change
            r.row.collected_at
            for r in rows
            if r.row.query_key == first.query_key and r.row.collected_at < flip_at
        )
        assert reload.logged_at is not None and change.logged_at is not None
        assert last_before < reload.logged_at <= change.logged_at < flip_at
        base_spec = f"..{(last_before + (reload.logged_at - last_before) / 2).isoformat()}"
        cand_spec = f"{flip_at.isoformat()}.."
        before, after = resolve_side(db, base_spec, None), resolve_side(db, cand_spec, None)
        assert isinstance(before, WindowSide) and isinstance(after, WindowSide)
        assert after.since == flip_at and before.until is not None and before.until < flip_at
        # the version of the last server start logged before each window's end
        assert before.server_version_num == after.server_version_num == 170010
        assert before.target_id not in {t.target_id for t in db.targets()}
        result = compare_sides(db, before, after)
    assert result.settings_diff["random_page_cost"] == ("default", "60")
    where = {(e.kind, e.subject): w for w, e in result.events}
    assert where[("setting", "random_page_cost")] == where[("reload", None)] == "between"
    assert where[("start", "17.10")] == "baseline"
    runner = CliRunner()
    args = ["compare", "--store", str(store), "-b", base_spec, "-c", cand_spec]
    shown = runner.invoke(app, args)
    assert shown.exit_code in (0, 1), shown.output
    assert "settings that differ: random_page_cost default -> 60" in shown.output
    assert "(PostgreSQL 17.10) vs" in shown.output
    assert "server events in and between the windows" in shown.output
    line = setting_line(EVENTS / "pg.log")
    assert f"between   setting     {SETTING_MESSAGE}  (pg.log:{line})" in shown.output
    document = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)
    schema = Path(__file__).resolve().parents[1] / "detector/reports/schema/report-v1.schema.json"
    jsonschema.Draft202012Validator(json.loads(schema.read_text())).validate(document)
    (setting,) = [e for e in document["log_events"] if e["kind"] == "setting"]
    found = (setting["where"], setting["subject"], setting["value"], setting["line"])
    assert found == ("between", "random_page_cost", "60", line)
    mixed = runner.invoke(app, ["compare", "--store", str(store), "-b", base_spec, "-c", "log"])
    assert mixed.exit_code == 2 and "hint:" in mixed.output


def test_windows_of_one_source_list_only_its_logs_events(tmp_path: Path) -> None:
    """Two servers' logs in one store (the same events written as stderr and as csvlog): a
    window named SOURCE@... lists its own server's events, once; unnamed windows list both."""
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    for source, name in (("a", "pg.log"), ("b", "pg.csv")):
        done = runner.invoke(
            app, ["ingest", str(EVENTS / name), "--store", str(store), "--source", source]
        )
        assert done.exit_code == 0, done.output
    with Store(store, read_only=True) as db:
        (change, _) = [e for e in db.log_events() if e.kind == "setting"]
    assert change.logged_at is not None
    split = change.logged_at.isoformat()

    def setting_events(base: str, cand: str) -> list[str]:
        shown = runner.invoke(app, ["compare", "--store", str(store), "-b", base, "-c", cand])
        assert shown.exit_code in (0, 1), shown.output
        return [line for line in shown.output.splitlines() if SETTING_MESSAGE in line]

    (only,) = setting_events(f"a@..{split}", f"a@{split}..")
    assert only.endswith(f"(pg.log:{setting_line(EVENTS / 'pg.log')})")
    assert len(setting_events(f"..{split}", f"{split}..")) == 2
