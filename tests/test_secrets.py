"""Passwords and literals never escape: malformed DSNs, a scram-sha-256 login with a wrong
password, pg_stat_statements rows that set a password, and `ingest --anonymize`."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import FreshDb
from psycopg import sql
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import redact_secrets
from detector.cli.app import app
from detector.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import PREFIX, capture  # type: ignore[import-not-found]

pytestmark = pytest.mark.pg
LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
PASSWORD = "S3cr3tPw"


def planshift(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def text_values(store_path: Path) -> list[str]:
    """Every VARCHAR and JSON value of every table of the store."""
    values: list[str] = []
    with Store(store_path, read_only=True) as store:
        columns = store._con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal "
            "AND data_type IN ('VARCHAR', 'JSON')"
        ).fetchall()
        for table, column in columns:
            rows = store._con.execute(f'SELECT "{column}"::VARCHAR FROM "{table}"').fetchall()
            values.extend(str(value) for (value,) in rows if value is not None)
    return values


def assert_absent(secret: str, store_path: Path) -> None:
    """`secret` in no byte of the file and no text value (nor JSON-escaped)."""
    escaped = json.dumps(secret)[1:-1]
    assert secret.encode() not in store_path.read_bytes()
    leaks = [value for value in text_values(store_path) if secret in value or escaped in value]
    assert not leaks, leaks[:3]


# -- (a) malformed DSNs -------------------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://app:S3cr3t%ZZ@localhost/db", "host=x password=S3cr3t port=abc"],
    ids=["uri-bad-percent", "keywords-bad-port"],
)
@pytest.mark.parametrize("command", ["run", "snapshot", "setup-check"])
def test_a_malformed_dsn_is_an_error_and_hint_without_the_password(
    command: str, dsn: str, tmp_path: Path
) -> None:
    store = tmp_path / "s.duckdb"
    if command == "run":
        workload = tmp_path / "w.toml"
        workload.write_text('[[queries]]\nname = "one"\nsql = "SELECT 1"\n')
        args: list[str | Path] = ["run", workload, "--dsn", f"prod={dsn}", "--store", store]
    elif command == "snapshot":
        args = ["snapshot", "--target", dsn, "--store", store]
    else:
        args = ["setup-check", "--target", dsn]
    result = planshift(*args)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "error:" in result.stderr and "hint:" in result.stderr, output
    assert "Traceback" not in output
    assert "S3cr3t" not in output


@pytest.mark.parametrize(
    ("dsn", "named"),
    [
        ("host=x passwrd=S3cr3tValue dbname=y", 'invalid connection option "passwrd"'),
        ("host=x passwrd='S3cr3t Value' dbname=y", 'invalid connection option "passwrd"'),
        ("postgresql://app@db/x?passwrd=S3cr3tValue", 'invalid URI query parameter: "passwrd"'),
        ("host=x password S3cr3tValue", 'missing "=" after "***"'),
        ("postgresql://app:S3cr3tValue@db/x?sslmode=%Z", "invalid percent-encoded token"),
    ],
    ids=["misspelled-key", "misspelled-quoted", "uri-misspelled", "no-equals", "uri-bad-percent"],
)
def test_a_dsn_libpq_refuses_never_shows_a_value_it_could_hide_a_secret_in(
    dsn: str, named: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from detector.cli.app import app

    workload = tmp_path / "w.toml"
    workload.write_text('[[queries]]\nname = "one"\nsql = "SELECT 1"\n')
    result = CliRunner().invoke(
        app, ["run", str(workload), "--dsn", f"prod={dsn}", "--store", str(tmp_path / "s.duckdb")]
    )
    assert result.exit_code == 2, result.output
    assert "error: --dsn prod: malformed connection string " in result.stderr
    assert named in result.stderr and "hint:" in result.stderr
    assert "S3cr3t" not in result.output
    assert not (tmp_path / "s.duckdb").exists()


def test_redact_secrets_masks_every_form_of_the_password() -> None:
    cases = {
        "postgresql://app:S3cr3t%ZZ@localhost/db": 'invalid percent-encoded token: "S3cr3t%ZZ"',
        "postgresql://app:p%40ss%21@h/db": "p@ss! p%40ss%21 p%40ss! [p%40ss%21]",
        "postgresql://app:pw@[::1/db": 'matching "]" in URI: "postgresql://app:pw@[::1/db"',
        "host=x password='a b\\'c' port=abc": "a b'c / password='a b\\'c'",
        "postgresql://app@h/db?password=S3%41cret&port=x": "S3Acret S3%41cret",
        "password=S3cr3t host='unterminated": "bad conninfo password=S3cr3t host=",
    }
    for conninfo, message in cases.items():
        redacted = redact_secrets(message, conninfo)
        for secret in ("S3cr3t", "p@ss", "p%40ss", ":pw@", "a b", "S3A", "S3%41"):
            assert secret not in redacted, (conninfo, redacted)
        assert "***" in redacted


# -- (b) a scram-sha-256 login with a wrong password ---------------------------------------


@pytest.fixture
def scram_role(pg17: EmbeddedCluster, fresh_db: FreshDb) -> Iterator[tuple[str, str]]:
    """(role, dsn of a fresh database) with a role that must log in with scram-sha-256."""
    dsn = fresh_db(pg17)
    role = f"scram_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg17.conninfo, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
        original = hba.read_text()
        hba.write_text(f"local all {role} scram-sha-256\n{original}")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield role, dsn
    finally:
        hba.write_text(original)
        with psycopg.connect(pg17.conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_a_wrong_scram_password_is_not_shown(scram_role: tuple[str, str], tmp_path: Path) -> None:
    role, admin = scram_role
    dsn = psycopg.conninfo.make_conninfo(admin, user=role)
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    wrong = "Wr0ng%21Pw"
    uri = f"postgresql://{role}:{wrong}@/{parts['dbname']}?host={parts['host']}&port={parts.get('port', 5432)}"
    keywords = psycopg.conninfo.make_conninfo(dsn, password="Wr0ng'Pw x")
    store = tmp_path / "s.duckdb"
    for target in (uri, keywords):
        for args in (
            ["snapshot", "--target", target, "--store", store],
            ["setup-check", "-t", target],
        ):
            result = planshift(*args)
            output = result.stdout + result.stderr
            assert result.returncode == 2 and "error:" in result.stderr, output
            assert "authentication failed" in output, output
            for secret in ("Wr0ng", "Pw x", "Pw%20x"):
                assert secret not in output, output
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    right = psycopg.conninfo.make_conninfo(dsn, password=PASSWORD)
    result = planshift("snapshot", "--target", right, "--store", store)
    assert result.returncode == 0, result.stdout + result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert_absent(PASSWORD, store)


# -- (c) pg_stat_statements rows that set a password ----------------------------------------


@pytest.mark.parametrize("anonymize", [False, True], ids=["plain", "anonymized"])
def test_snapshot_never_stores_a_password(
    pg_any: EmbeddedCluster, fresh_db: FreshDb, tmp_path: Path, anonymize: bool
) -> None:
    dsn = fresh_db(pg_any)
    role = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("CREATE TABLE t (id int)")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}0'")
        conn.execute(f"ALTER ROLE {role} PASSWORD '{PASSWORD}'")
        conn.execute(f"ALTER USER {role} WITH ENCRYPTED PASSWORD '{PASSWORD}2'")
        conn.execute("COMMENT ON TABLE t IS 'Literal-Z\u00fcrich'")
        seen = conn.execute(
            "SELECT count(*) FROM pg_stat_statements WHERE query LIKE %s", [f"%{PASSWORD}%"]
        ).fetchone()
    try:
        assert seen is not None and seen[0] >= 3  # the view has them verbatim
        store = tmp_path / "s.duckdb"
        args = ["snapshot", "--target", dsn, "--store", str(store)]
        result = CliRunner().invoke(app, args + ["--anonymize"] * anonymize)
        assert result.exit_code == 0, result.output
        assert_absent(PASSWORD, store)
        with Store(store, read_only=True) as db:
            rows = db._con.execute(
                "SELECT query, calls FROM pgss_snapshots WHERE contains(query, ?)", [role]
            ).fetchall()
            (label,) = db._con.execute("SELECT label FROM runs").fetchall()[0]
            (info,) = db._con.execute("SELECT info->>'anonymized' FROM targets").fetchall()[0]
        assert len(rows) >= 3 and all("PASSWORD <redacted>" in q and c >= 1 for q, c in rows)
        assert any(q.startswith(f"ALTER ROLE {role} PASSWORD") for q, _ in rows), rows
        if anonymize:
            assert_absent("Literal-Z\u00fcrich", store)
            assert label.endswith("(anonymized)") and info == "true"
        else:
            assert "Literal-Z\u00fcrich" in "".join(text_values(store)) and info == "false"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


# -- (d) ingest: passwords never, literals not under --anonymize ---------------------------


def _stored(store_path: Path) -> list[tuple[Any, ...]]:
    with Store(store_path, read_only=True) as store:
        rows: list[tuple[Any, ...]] = store._con.execute(
            "SELECT o.query_key, o.fingerprint, q.sql, count(*) FROM observations o "
            "JOIN queries q USING (query_key) GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    return rows


def _ingest(store: Path, files: list[Path], *extra: str) -> None:
    args = ["ingest", *map(str, files), "--store", str(store), "--log-line-prefix", PREFIX]
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["pg.log", "pg.csv", "pg.json"])
def test_ingest_anonymize_stores_no_literal_and_the_same_fingerprints(
    name: str, tmp_path: Path
) -> None:
    files = [LOGS / "pg17" / name]
    assert b"19995" in files[0].read_bytes() and b"'15000'" in files[0].read_bytes()
    plain, anonymized = tmp_path / "plain.duckdb", tmp_path / "anon.duckdb"
    _ingest(plain, files)
    _ingest(anonymized, files, "--anonymize")
    assert "19995" in "".join(text_values(plain))
    assert_absent("19995", anonymized)
    assert_absent("15000'", anonymized)
    assert _stored(plain) == _stored(anonymized)
    with Store(anonymized, read_only=True) as db:
        params = db._con.execute("SELECT DISTINCT params FROM observations").fetchall()
        (label,) = db._con.execute("SELECT label FROM runs").fetchall()[0]
    assert params == [("[]",)] and label.endswith("(anonymized)")


def _secret_workload(conninfo_of: Any) -> None:
    with psycopg.connect(conninfo_of("postgres"), autocommit=True) as conn:
        conn.execute("SET auto_explain.log_min_duration = -1")
        conn.execute("CREATE TABLE c (id int PRIMARY KEY, city text)")
        conn.execute("INSERT INTO c SELECT i, 'city' || i FROM generate_series(1, 2000) i")
        conn.execute("CREATE INDEX c_city ON c (city)")
        conn.execute("CREATE ROLE app LOGIN")
        conn.execute("VACUUM ANALYZE c")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SELECT count(*) FROM c WHERE city = %s", ["Gen\u00e8ve-9931"])
        with psycopg.ClientCursor(conn) as cursor:
            cursor.execute("SELECT count(*) FROM c WHERE city = 'Z\u00fcrich-4417'")
            cursor.execute(
                f"SELECT count(*) FROM c WHERE id < 7; ALTER ROLE app PASSWORD '{PASSWORD}'"
            )
        conn.execute("SET auto_explain.log_format = text")
        conn.execute("SELECT count(*) FROM c WHERE city = %s", ["Gen\u00e8ve-9931"])
        with psycopg.ClientCursor(conn) as cursor:
            cursor.execute("SELECT count(*) FROM c WHERE city = 'Z\u00fcrich-4417'")
            cursor.execute(
                f"SELECT count(*) FROM c WHERE id < 8; ALTER ROLE app PASSWORD '{PASSWORD}'"
            )


@pytest.fixture(scope="module")
def secret_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from collectors.servers.installations import find_installation
    from detector.errors import PlanshiftError

    try:
        find_installation(17)
    except PlanshiftError:
        pytest.skip("PostgreSQL 17 is not installed")
    logs: Path = capture(17, tmp_path_factory.mktemp("secret-logs"), _secret_workload)
    return logs


@pytest.mark.parametrize("name", ["pg.log", "pg.csv", "pg.json"])
def test_ingest_of_live_logs_keeps_passwords_and_literals_out(
    secret_logs: Path, name: str, tmp_path: Path
) -> None:
    log = secret_logs / name
    assert PASSWORD.encode() in log.read_bytes() and "Z\u00fcrich-4417".encode() in log.read_bytes()
    plain, anonymized = tmp_path / "plain.duckdb", tmp_path / "anon.duckdb"
    _ingest(plain, [log])
    _ingest(anonymized, [log], "--anonymize")
    assert_absent(PASSWORD, plain)
    assert "-4417" in "".join(text_values(plain))
    for literal in (PASSWORD, "Z\u00fcrich-4417", "-4417", "-9931", "id < 7", "id < 8"):
        assert_absent(literal, anonymized)
    assert _stored(plain) == _stored(anonymized)
    assert sum(count for *_, count in _stored(plain)) == 6
