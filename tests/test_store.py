"""The DuckDB store: round trips of real EXPLAIN JSON, append-only runs, atomic batches,
migrations, and refusals (newer schema, foreign files, passwords)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers import FIXTURES, T0, fixture, new_run, observation, observation_of

from detector.errors import PlanshiftError
from detector.model import (
    Finding,
    Plan,
    Severity,
    fingerprint,
    parse_plan,
    shape_json,
    signature,
)
from detector.store import PgssEntry, Store
from detector.store.migrate import load_migrations


def table_counts(path: Path) -> dict[str, int]:
    """What a DBA would see: row counts of every table, read with plain SQL."""
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in sorted(tables)}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Store(tmp_path / "nested" / "dir" / "planshift.duckdb") as opened:
        yield opened


def test_a_new_store_is_created_with_its_parents_and_migrated(store: Store) -> None:
    assert store.path.exists()
    assert store.schema_version == len(load_migrations()) >= 1
    assert store.runs() == [] and store.latest_run_id() is None


def test_every_table_and_column_is_documented_for_dbas(store: Store) -> None:
    store.close()
    with duckdb.connect(str(store.path), read_only=True) as con:
        undocumented = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE NOT internal AND (comment IS NULL OR comment = '')"
        ).fetchall()
        tables = con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall()
    assert undocumented == []
    assert {name for name, _ in tables} >= {
        "runs", "targets", "queries", "plans", "plan_nodes", "observations",
        "pgss_snapshots", "comparisons", "findings", "schema_version",
    }  # fmt: skip
    assert all(comment for _, comment in tables)


def test_observations_round_trip_with_the_numbers_of_the_captured_plans(store: Store) -> None:
    (target,) = new_run(store)
    names = ["join_hash", "range_bitmap_scan", "range_index_scan", "seq_scan_disabled_cost"]
    stored = store.add_observations([observation(target, n, point="N=1") for n in names])
    assert stored == 4

    rows = store.observations([target])
    assert [r.query_key for r in rows] == sorted(names)
    for row in rows:
        plan, text = fixture(row.query_key)
        assert row.fingerprint == fingerprint(plan)
        assert row.total_cost == pytest.approx(plan.total_cost)
        assert row.total_cost < 1e9  # disable_cost removed (seq_scan_disabled_cost)
        assert row.startup_cost == pytest.approx(plan.startup_cost)
        assert row.plan_rows == plan.root.plan_rows
        assert row.actual_rows == plan.root.actual_rows_total
        assert row.shared_hit == plan.buffers_total().shared_hit > 0
        assert row.duration_ms == plan.execution_ms and row.planning_ms == plan.planning_ms
        assert row.point == "N=1" and row.params == "[0]" and row.source == "explain"
        assert row.collected_at == T0
        record = store.plan_record(row.fingerprint)
        assert record.signature == signature(plan) and record.shape_json == shape_json(plan)
        assert json.loads(record.plan_json) == json.loads(text)
        assert store.plan(row.fingerprint) == plan
    by_name = {r.query_key: r for r in rows}
    assert by_name["range_bitmap_scan"].exact_heap_blocks == 132
    assert by_name["range_bitmap_scan"].lossy_heap_blocks == 0
    assert by_name["range_index_scan"].exact_heap_blocks is None


CAPTURED = sorted((FIXTURES / "plans").glob("pg*/*.json"))
FIRST_PLAN_OF: dict[str, Plan] = {}  # fingerprint -> the first captured plan stored with it


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Store(tmp_path_factory.mktemp("shared") / "planshift.duckdb") as opened:
        yield opened


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_captured_fixture_plan_round_trips(shared_store: Store, path: Path) -> None:
    """The shared fixtures of tests/fixtures/plans/pg*/ (PostgreSQL 15, 17, 18)."""
    store = shared_store
    explain = json.loads(path.read_text())["explain"]
    plan = parse_plan(explain)
    (target,) = new_run(store)
    store.add_observations([observation_of(target, path.stem, plan, json.dumps(explain), 0)])
    (row,) = store.observations([target])
    assert row.fingerprint == fingerprint(plan)
    # the same shape captured elsewhere (another version, other constants) keeps the first JSON
    assert store.plan(row.fingerprint) == FIRST_PLAN_OF.setdefault(row.fingerprint, plan)
    assert row.total_cost == pytest.approx(plan.total_cost)
    assert row.actual_rows == plan.root.actual_rows_total


def test_plan_nodes_are_queryable_with_plain_sql(store: Store) -> None:
    (target,) = new_run(store)
    store.add_observations([observation(target, "join_hash")])
    store.close()
    with duckdb.connect(str(store.path), read_only=True) as con:
        rows = con.execute(
            "SELECT path, parent_path, node_type, relation, index_name FROM plan_nodes "
            "WHERE node_type LIKE 'Bitmap%' ORDER BY path"
        ).fetchall()
    assert rows == [
        ("0.0.1.0", "0.0.1", "Bitmap Heap Scan", "sbtest1", None),
        ("0.0.1.0.0", "0.0.1.0", "Bitmap Index Scan", None, "k_1"),
    ]


def test_plan_json_is_kept_once_per_fingerprint_the_first_seen(store: Store) -> None:
    (target,) = new_run(store)
    first = observation(target, "range_index_scan", 0)
    again_plan, again_text = fixture("range_index_scan_again")
    again = replace(first, plan=again_plan, plan_json=again_text, sample_index=1)
    assert fingerprint(again_plan) == fingerprint(first.plan) and again_text != first.plan_json
    store.add_observations([first, again])
    store.add_observations([replace(again, sample_index=2, collected_at=T0 + timedelta(1))])

    record = store.plan_record(fingerprint(first.plan))
    assert record.plan_json == first.plan_json and record.first_seen == T0
    assert [r.sample_index for r in store.observations([target])] == [0, 1, 2]
    store.close()
    counts = table_counts(store.path)
    assert counts["plans"] == 1
    assert counts["plan_nodes"] == sum(1 for _ in first.plan.nodes())
    assert counts["observations"] == 3


def test_a_second_run_appends_and_overwrites_nothing(store: Store) -> None:
    (first_target,) = new_run(store, "first")
    store.upsert_query("range_index_scan", name="range", sql="SELECT 1", queryid=42)
    store.add_observations([observation(first_target, "range_index_scan", i) for i in range(3)])
    store.finish_run(store.runs()[0].run_id)
    before = store.observations([first_target])

    (second_target,) = new_run(store, "second")
    assert store.latest_run_id() == store.runs()[0].run_id  # the second is still running
    store.upsert_query("range_index_scan", name="range", sql="SELECT 1")
    store.add_observations([observation(second_target, "range_index_scan", i) for i in range(3)])
    second_run = store.runs()[1].run_id
    store.finish_run(second_run)

    assert store.observations([first_target]) == before
    assert len(store.observations([first_target, second_target])) == 6
    assert [r.label for r in store.runs()] == ["first", "second"]
    assert store.latest_run_id() == second_run
    assert [t.name for t in store.targets([second_run])] == ["pg15"]
    assert store.targets([second_run])[0].target_id != first_target
    assert store.queries()["range_index_scan"].queryid == 42  # kept when not given again


def test_observations_come_back_ordered_by_target_query_point_sample(store: Store) -> None:
    a, b = new_run(store, names=("a", "b"))
    batch = [
        observation(b, "range_index_scan", 1),
        observation(a, "range_index_scan", 1, point="N=2"),
        observation(a, "range_index_scan", 0, point="N=2"),
        observation(a, "join_hash", 0),
        observation(b, "range_index_scan", 0),
        observation(a, "range_index_scan", 0, point="N=1"),
    ]
    store.add_observations(batch)
    order = [
        (r.target_id, r.query_key, r.point, r.sample_index) for r in store.observations([a, b])
    ]
    assert order == sorted(order, key=lambda k: (k[0], k[1], k[2] or "", k[3]))
    assert [r.target_id for r in store.observations([b])] == [b, b]


def test_a_failing_batch_leaves_the_store_exactly_as_before(store: Store) -> None:
    (target,) = new_run(store)
    store.add_observations([observation(target, "range_index_scan")])
    before = store.observations([target])
    store.close()
    counts = table_counts(store.path)

    reopened = Store(store.path)
    good = [observation(target, n, 1) for n in ("join_hash", "range_bitmap_scan")]
    bad_json = observation(target, "seq_scan_disabled_cost", 2, params="{not json")
    with pytest.raises(PlanshiftError, match="cannot store 5 observations"):
        reopened.add_observations([*good, bad_json, *good])  # fails after the new plans went in
    broken = replace(good[0], plan=None)  # raises in the middle of building the rows
    with pytest.raises(AttributeError):
        reopened.add_observations([good[1], broken])
    with pytest.raises(PlanshiftError, match="unknown target"):
        reopened.add_observations([good[0], observation(target + 99, "join_hash")])
    assert reopened.observations([target]) == before
    reopened.add_observations(good)  # still usable after the failures
    reopened.close()
    after = table_counts(store.path)
    assert after["observations"] == counts["observations"] + 2
    assert after["plans"] == counts["plans"] + 2


def test_transaction_groups_writes_and_rolls_back_on_error(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        (target,) = new_run(store)
        store.add_observations([observation(target, "join_hash")])
        raise RuntimeError("collector crashed")
    assert store.runs() == [] and store.targets() == []
    with store.transaction():
        (target,) = new_run(store)
        store.add_observations([observation(target, "join_hash")])
    assert len(store.observations([target])) == 1


def test_naive_times_are_taken_as_utc_and_aware_ones_converted(store: Store) -> None:
    (target,) = new_run(store)
    paris = datetime(2024, 5, 1, 14, 0, tzinfo=UTC).astimezone()  # any zone
    naive = datetime(2024, 5, 1, 12, 0, 1)
    store.add_observations(
        [
            observation(target, "join_hash", 0, collected_at=paris),
            observation(target, "join_hash", 1, collected_at=naive),
        ]
    )
    times = [r.collected_at for r in store.observations([target])]
    assert times == [datetime(2024, 5, 1, 14, 0, tzinfo=UTC), naive.replace(tzinfo=UTC)]


def test_runs_finish_as_complete_or_failed_only(store: Store) -> None:
    new_run(store)
    run_id = store.runs()[0].run_id
    with pytest.raises(PlanshiftError):
        store.finish_run(run_id, "running")
    with pytest.raises(PlanshiftError, match="no run"):
        store.finish_run(run_id + 1)
    store.finish_run(run_id, "failed")
    (run,) = store.runs()
    assert run.status == "failed" and run.finished_at is not None
    assert store.latest_run_id() is None


# -- migrations ------------------------------------------------------------------------------

ADD_NOTE = """
ALTER TABLE runs ADD COLUMN note VARCHAR;
COMMENT ON COLUMN runs.note IS 'A note (test migration).';
"""


def migrations_dir(tmp_path: Path, extra: dict[str, str]) -> Path:
    """The packaged migrations plus `extra` files, in a directory of their own."""
    directory = tmp_path / "migrations"
    directory.mkdir(exist_ok=True)
    for migration in load_migrations():
        (directory / migration.file_name).write_text(migration.sql)
    for name, sql in extra.items():
        (directory / name).write_text(sql)
    return directory


def test_an_older_store_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    current = load_migrations()
    with Store(path, migrations=current) as old:
        (target,) = new_run(old)
        old.add_observations([observation(target, "join_hash")])
        rows = old.observations([target])
    newer = load_migrations(
        migrations_dir(tmp_path, {f"{len(current) + 1:03d}_note.sql": ADD_NOTE})
    )
    with Store(path, migrations=newer) as upgraded:
        assert upgraded.schema_version == len(current) + 1
        assert upgraded.observations([target]) == rows
    with duckdb.connect(str(path), read_only=True) as con:
        versions = con.execute("SELECT version, name FROM schema_version ORDER BY 1").fetchall()
        note = con.execute("SELECT note FROM runs").fetchall()
    assert [v for v, _ in versions] == list(range(1, len(current) + 2))
    assert versions[-1][1] == "note" and note == [(None,)]


def test_a_failing_migration_is_rolled_back(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    current = load_migrations()
    Store(path, migrations=current).close()
    broken = ADD_NOTE + "SELECT * FROM no_such_table;"
    newer = load_migrations(migrations_dir(tmp_path, {f"{len(current) + 1:03d}_bad.sql": broken}))
    with pytest.raises(duckdb.Error):
        Store(path, migrations=newer)
    with Store(path, migrations=current) as store:
        assert store.schema_version == len(current)
    with duckdb.connect(str(path), read_only=True) as con:
        columns = con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'")
        assert "note" not in {c for (c,) in columns.fetchall()}


def test_a_store_from_a_newer_planshift_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    current = load_migrations()
    newer = load_migrations(
        migrations_dir(tmp_path, {f"{len(current) + 1:03d}_note.sql": ADD_NOTE})
    )
    Store(path, migrations=newer).close()
    with pytest.raises(PlanshiftError, match="newer") as caught:
        Store(path)
    assert "upgrade planshift" in (caught.value.hint or "")
    with pytest.raises(PlanshiftError, match="newer"):
        Store(path, read_only=True)


def test_migration_files_must_be_numbered_without_gaps(tmp_path: Path) -> None:
    far = f"{len(load_migrations()) + 2:03d}_far.sql"  # one number skipped
    directory = migrations_dir(tmp_path, {far: ADD_NOTE})
    with pytest.raises(ValueError, match="without gaps"):
        load_migrations(directory)
    (directory / far).rename(directory / "readme-not-a-migration.sql")
    with pytest.raises(ValueError, match="NNN_name"):
        load_migrations(directory)


# -- files that are not stores ---------------------------------------------------------------


def test_a_file_that_is_not_duckdb_is_refused_by_name(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.duckdb"
    garbage.write_text("these are my notes, not a database\n" * 200)
    for read_only in (False, True):
        with pytest.raises(PlanshiftError, match="not a DuckDB database") as caught:
            Store(garbage, read_only=read_only)
        assert str(garbage) in str(caught.value)
    assert garbage.read_text().startswith("these are my notes")  # untouched
    with pytest.raises(PlanshiftError, match=re.escape(str(tmp_path))):
        Store(tmp_path)  # a directory


def test_a_foreign_duckdb_database_is_not_written_into(tmp_path: Path) -> None:
    path = tmp_path / "analytics.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sales (id INTEGER)")
    with pytest.raises(PlanshiftError, match=r"not a planshift store \(tables: sales\)"):
        Store(path)
    assert table_counts(path) == {"sales": 0}


def test_read_only_needs_an_existing_current_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.duckdb"
    with pytest.raises(PlanshiftError, match="does not exist"):
        Store(missing, read_only=True)
    assert not missing.exists()
    with Store(missing) as store:
        new_run(store)
    with Store(missing, read_only=True) as reader:
        assert [r.label for r in reader.runs()] == ["run"]
        with pytest.raises(duckdb.Error):
            reader.begin_run("x", workload_hash=None, tool_version="0", host="h")


# -- secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "gucs"),
    [
        ({"dsn": "host=db user=app password=s3cret dbname=prod"}, {}),
        ({"dsn": "postgresql://app:s3cret@db:5432/prod"}, {}),
        ({"dsn": "postgres://db/prod?user=app&password=s3cret"}, {}),
        ({"servers": [{"conninfo": "host=db password='with space'"}]}, {}),
        ({"password": "s3cret"}, {}),
        ({"password": "s3cret-not-redacted"}, {}),
        ({}, {"primary_conninfo": "host=primary PASSWORD=s3cret"}),
    ],
)
def test_a_password_is_never_stored(
    store: Store, info: dict[str, Any], gucs: dict[str, str]
) -> None:
    run_id = store.begin_run("run", workload_hash=None, tool_version="0.1.0", host="test")
    with pytest.raises(PlanshiftError, match="password") as caught:
        store.add_target(
            run_id, "prod", source="dsn", server_version_num=None, gucs=gucs, info=info
        )
    assert "s3cret" not in str(caught.value) and "with space" not in str(caught.value)
    assert store.targets() == []


def test_redacted_connection_strings_are_accepted(store: Store) -> None:
    from collectors.servers.targets import redact_conninfo

    run_id = store.begin_run("run", workload_hash=None, tool_version="0.1.0", host="test")
    info = {
        "dsn": redact_conninfo("postgresql://app:s3cret@db:5432/prod"),
        "uri": "postgresql://app:***@db/prod",
        "plain": "host=db user=app dbname=prod",
        "password": "<redacted>",
        "settings": {"password_encryption": "scram-sha-256"},
        "conf": "password_encryption = 'scram-sha-256'",
    }
    assert "s3cret" not in json.dumps(info)
    store.add_target(run_id, "prod", source="dsn", server_version_num=None, gucs={}, info=info)
    assert store.targets()[0].info == info


# -- snapshots, comparisons, findings --------------------------------------------------------


def test_pg_stat_statements_snapshots_round_trip(store: Store) -> None:
    (target,) = new_run(store)
    entries = [
        PgssEntry(queryid=-812345678901234567, calls=10, total_exec_time=12.5, query="SELECT $1"),
        PgssEntry(queryid=7, calls=1, total_exec_time=0.25, rows=3, shared_blks_hit=9),
    ]
    first = store.add_pgss_snapshot(target, entries, taken_at=T0)
    second = store.add_pgss_snapshot(target, entries[:1], taken_at=T0 + timedelta(minutes=1))
    rows = store.pgss_snapshots([target])
    assert second > first
    assert [(r.snapshot_id, r.entry.queryid) for r in rows] == [
        (first, -812345678901234567), (first, 7), (second, -812345678901234567),
    ]  # fmt: skip
    assert rows[1].entry == entries[1] and rows[0].taken_at == T0
    with pytest.raises(PlanshiftError, match="no target"):
        store.add_pgss_snapshot(target + 1, entries)


def test_comparisons_and_findings_round_trip_in_order(store: Store) -> None:
    findings = [
        Finding("PS100", "index-to-bitmap", Severity.ERROR, "q1", "range", "IndexScan -> Bitmap",
                {"before": {"cost": 11.4}, "after": {"cost": 3562.5}}),
        Finding("PS300", "duration-regression", Severity.WARNING, "q2", "join", "1.3x slower"),
    ]  # fmt: skip
    comparison = store.add_comparison("pg15", "pg17", [2, 1])
    store.add_findings(comparison, findings)
    store.add_findings(comparison, findings[:1])
    assert store.findings(comparison) == [*findings, findings[0]]
    assert store.findings(comparison + 1) == []
    with pytest.raises(PlanshiftError, match="no comparison"):
        store.add_findings(comparison + 1, findings)


# -- batches -----------------------------------------------------------------------------


def test_ten_thousand_observations_insert_in_one_batch(store: Store) -> None:
    a, b = new_run(store, names=("a", "b"))
    names = ["join_hash", "range_bitmap_scan", "range_index_scan", "seq_scan_disabled_cost"]
    plans = {name: fixture(name) for name in names}
    batch = []
    for i in range(10_000):
        name = names[i % 4]
        plan, text = plans[name]
        plan = replace(plan, execution_ms=float(i))  # a Plan object per execution, as collected
        batch.append(
            observation(
                a if i % 2 else b, name, i // 8, plan=plan, plan_json=text, duration_ms=float(i)
            )
        )
    assert store.add_observations(batch) == 10_000
    rows = store.observations([a, b])
    assert len(rows) == 10_000
    assert sorted(r.duration_ms for r in rows) == [float(i) for i in range(10_000)]


def test_a_run_whose_process_is_gone_is_marked_failed_on_open(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "s.duckdb"
    script = (
        "import os, sys; from detector.store import Store\n"
        f"s = Store({str(path)!r}); s.begin_run('killed', workload_hash=None, "
        "tool_version='0', host='h'); s.close(); os._exit(0)\n"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", script], check=True, cwd=root)
    with Store(path) as store:
        new_run(store)
        run_ids = [run.run_id for run in store.runs()]
        assert store.settled_runs == (run_ids[0],)
    with Store(path, read_only=True) as reader:
        first, second = reader.runs()
        assert reader.settled_runs == ()
    assert (first.status, second.status) == ("failed", "running")
    assert first.finished_at is not None and "gone" in (first.note or "")
    assert second.note is None  # this process is alive: its run is left running


def test_a_run_s_kind_not_its_label_makes_it_an_a_a_run(tmp_path: Path) -> None:
    from detector.engine.comparison.noise import latest_noise_run, noise_label

    with Store(tmp_path / "s.duckdb") as store:
        runs = {}
        for kind in ("noise", "run"):  # a user's --label can read like an A/A run's
            run_id = store.begin_run(
                noise_label("pg15"), workload_hash=None, tool_version="0", host="h", kind=kind
            )
            store.add_target(
                run_id, "pg15/aa1", source="embedded", server_version_num=None, gucs={},
                info={"server": "pg15"},
            )  # fmt: skip
            store.finish_run(run_id)
            runs[kind] = run_id
        (target,) = store.targets([runs["run"]])
        assert latest_noise_run(store, target) == runs["noise"]
        assert {r.run_id: r.kind for r in store.runs()} == {
            runs["noise"]: "noise",
            runs["run"]: "run",
        }
        with pytest.raises(PlanshiftError, match="unknown run kind"):
            store.begin_run("x", workload_hash=None, tool_version="0", host="h", kind="other")


def test_the_packaged_reference_schema_is_what_the_migrations_build() -> None:
    """The store's check reads the reference schema from reference_columns.json (built at
    start-up otherwise): it must be what the migrations build, for none and for all of them."""
    from importlib import resources

    from detector.store.schema import REFERENCE_FILE, built_reference, reference_key

    migrations = load_migrations()
    text = resources.files("detector.store.migrations").joinpath(REFERENCE_FILE).read_text()
    packaged = json.loads(text)
    for chosen in ((), migrations):
        entry = packaged.get(reference_key(chosen))
        assert entry is not None, (
            "detector/store/migrations/reference_columns.json is stale: `make readme` "
            "(scripts/store_schema.py) refreshes it"
        )
        columns = {table: tuple(map(tuple, found)) for table, found in entry["columns"].items()}
        assert columns == built_reference(chosen)
