"""Loading a captured dump into replay targets: the file read statement by statement with COPY
rows in blocks (memory flat in its size), every target loaded at the same time with progress,
and production's settings each target takes. Real pg_dump output of real clusters."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb
from psycopg.conninfo import conninfo_to_dict

from collectors import setup_files
from collectors.capture.dump import DUMP_OPTIONS
from collectors.server_setup import prepare_servers
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import Server
from collectors.setup_files import SetupFile
from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload

# what pg_dump writes, and what it can hold: a `;` in strings, comments and function bodies,
# a line of data that looks like the end marker but is escaped, an empty table
DUMP = """\\restrict AbC123
--
-- Name: t; Type: TABLE; Schema: public; Owner: -
--
SET statement_timeout = 0; SET lock_timeout = 0;
CREATE TABLE public.t (id integer, note text); -- a comment with a ; in it
CREATE FUNCTION public.f() RETURNS integer LANGUAGE plpgsql AS $body$
BEGIN
  RETURN 1; -- ;
END;
$body$;
/* a block comment; still a comment
   over lines; */
INSERT INTO public.t VALUES (0, 'it''s;
a string over two lines;');
COPY public.t (id, note) FROM stdin;
1\tone
2\ta\\\\.b
3\t\\\\.
\\.
COPY public.empty (id) FROM stdin;
\\.
SELECT 'after the data'
"""


def statements(path: Path) -> list[tuple[str, bytes | None]]:
    found = []
    for statement in SetupFile(path):
        rows = b"".join(statement.copy_rows) if statement.copy_rows is not None else None
        found.append((statement.sql.split("\n")[0][:40], rows))
    return found


@pytest.mark.parametrize("block", [1 << 20, 7, 1])
def test_a_dump_is_read_statement_by_statement_with_copy_rows_in_blocks(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(setup_files, "BLOCK", block)  # block boundaries anywhere in the rows
    path = tmp_path / "dump.sql"
    path.write_text(DUMP)
    reader = SetupFile(path)
    assert statements(path) == [
        ("SET statement_timeout = 0", None),
        ("SET lock_timeout = 0", None),
        ("CREATE TABLE public.t (id integer, note ", None),
        ("CREATE FUNCTION public.f() RETURNS integ", None),
        ("INSERT INTO public.t VALUES (0, 'it''s;", None),
        ("COPY public.t (id, note) FROM stdin", b"1\tone\n2\ta\\\\.b\n3\t\\\\.\n"),
        ("COPY public.empty (id) FROM stdin", b""),
        ("SELECT 'after the data'", None),
    ]
    list(reader)  # the consumer may skip the rows: the reader skips them itself
    assert reader.rows == 3 and reader.bytes_read == reader.size == len(DUMP.encode())


def test_what_a_setup_file_cannot_hold_is_an_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.sql"
    path.write_text("CREATE TABLE t (a int);\n\\connect other\n")
    with pytest.raises(PlanshiftError, match=r"bad.sql:2: psql meta-command \\connect"):
        list(SetupFile(path))
    path.write_text("COPY t FROM stdin;\n1\n2\n")
    with pytest.raises(PlanshiftError, match=r"bad.sql:1: COPY data without its end marker"):
        list(SetupFile(path))
    path.write_bytes(b"SELECT 1;\nSELECT '\xff';\n")
    with pytest.raises(PlanshiftError, match=r"bad.sql:2: not UTF-8"):
        list(SetupFile(path))


def pg_dump(cluster: EmbeddedCluster, dsn: str, out: Path) -> None:
    params = conninfo_to_dict(dsn)
    env = {**os.environ, "PGHOST": str(params["host"]), "PGPORT": str(params["port"])}
    command = [str(cluster.installation.bindir / "pg_dump"), *DUMP_OPTIONS, "-U", "postgres"]
    with out.open("wb") as stream:
        subprocess.run([*command, str(params["dbname"])], stdout=stream, env=env, check=True)


def test_targets_load_a_real_dump_together_with_progress_and_settings(
    pg15: EmbeddedCluster, pg17: EmbeddedCluster, fresh_db: FreshDb, tmp_path: Path
) -> None:
    """pg_dump 15's output of a database with awkward rows, loaded into a database on 15 and
    one on 17 at the same time: every row arrives, production's work_mem is set in the setup
    sessions, a setting 15 does not have is left out there, with the reason."""
    source = fresh_db(pg15)
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE items (id int PRIMARY KEY, note text, doc jsonb);"
            "INSERT INTO items SELECT i, CASE WHEN i % 7 = 0 THEN E'tab\\there\\n\\\\.' "
            "ELSE repeat('x', i % 300) END, jsonb_build_object('i', i) "
            "FROM generate_series(1, 30000) i;"
            "CREATE INDEX items_note ON items (note);"
        )
    pg_dump(pg15, source, tmp_path / "dump.sql")
    (tmp_path / "workload.toml").write_text(
        "[setup]\nfiles = ['dump.sql']\nsql = 'CREATE SCHEMA side'\n"
        "[settings]\nwork_mem = '24MB'\nenable_group_by_reordering = 'off'\n"
        "[[queries]]\nname = 'q'\nsql = 'SELECT count(*) FROM items'\n"
    )
    workload = load_workload(tmp_path / "workload.toml")
    servers = [
        Server(name, fresh_db(cluster), "embedded") for name, cluster in (("a", pg15), ("b", pg17))
    ]
    lines: list[str] = []
    taken = prepare_servers(servers, workload, False, lambda text, _: lines.append(text))
    for server in servers:
        with psycopg.connect(server.conninfo) as conn:
            rows = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE note LIKE E'%\\\\\\\\.'), "
                "sum((doc->>'i')::int) FROM items"
            ).fetchone()
            assert rows == (30000, 4285, 30000 * 30001 // 2)
            assert conn.execute("SELECT to_regclass('items_note')").fetchone() == ("items_note",)
    assert taken == {
        "a": {"work_mem": "24MB"},
        "b": {"work_mem": "24MB", "enable_group_by_reordering": "off"},
    }
    assert servers[0].info["workload_settings"]["not_applied"] == {
        "enable_group_by_reordering": "PostgreSQL 15 has no setting enable_group_by_reordering"
    }
    assert lines[-1].startswith("set up a, b in ") and "30,000 rows each" in lines[-1]


def test_a_failing_target_stops_the_setup_with_the_file_and_line(
    pg15: EmbeddedCluster, fresh_db: FreshDb, tmp_path: Path
) -> None:
    (tmp_path / "dump.sql").write_text("CREATE TABLE t (a int);\nCOPY t FROM stdin;\nx\n\\.\n")
    (tmp_path / "workload.toml").write_text(
        "[setup]\nfiles = ['dump.sql']\n[[queries]]\nname = 'q'\nsql = 'SELECT 1'\n"
    )
    workload = load_workload(tmp_path / "workload.toml")
    servers = [Server(name, fresh_db(pg15), "embedded") for name in ("a", "b")]
    with pytest.raises(PlanshiftError, match=r"dump.sql:2 failed on [ab]: .*invalid input syntax"):
        prepare_servers(servers, workload, False)
