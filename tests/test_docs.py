"""The README is checked against the code: its workload example loads, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from detector.cli.app import app
from detector.jobs.workload import load_workload
from detector.store import Store
from detector.store.schema_dump import readme_tables, schema_sql

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
COMMANDS = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback} | {
    g.name for g in app.registered_groups if g.name
}


def test_readme_workload_example_is_a_valid_workload(tmp_path: Path) -> None:
    blocks = re.findall(r"```toml\n(.*?)```", README, re.S)
    assert blocks, "README has a TOML workload example"
    path = tmp_path / "readme.toml"
    path.write_text(blocks[0])
    workload = load_workload(path)
    assert {q.name for q in workload.queries} == {"range", "swept"}
    assert set(workload.variants) == {"current", "proposed"}


def test_readme_mentions_only_real_commands_and_all_of_them() -> None:
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", README, re.S))
    mentioned = set(re.findall(r"^planshift (\w[\w-]*)", shell, re.M))
    assert mentioned
    assert mentioned <= COMMANDS, mentioned - COMMANDS
    for command in COMMANDS:
        assert f"planshift {command}" in README or f"make {command}" in README, command


OPENING = "<!-- store-tables -->\n"


def test_schema_sql_and_the_readme_store_table_are_what_the_migrations_create(
    tmp_path: Path,
) -> None:
    """Both ways: every table a new store has is in the README and in schema.sql, and nothing
    else is (`make readme` rewrites them)."""
    schema = (ROOT / "detector" / "store" / "schema.sql").read_text()
    assert schema == schema_sql(), "detector/store/schema.sql is not current: run `make readme`"
    block = README[README.index(OPENING) + len(OPENING) : README.index("<!-- /store-tables")]
    assert block == readme_tables(), "the README's store table is not current: run `make readme`"
    Store(tmp_path / "s.duckdb").close()
    with duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    assert set(re.findall(r"^\| `(\w+)` \|", block, re.M)) == tables
    assert set(re.findall(r"^CREATE TABLE \"?(\w+)\"?\(", schema, re.M)) == tables


def test_readme_how_it_decides_is_what_the_code_says() -> None:
    from detector.engine.comparison.compare import HOW_IT_DECIDES

    readme = (ROOT / "README.md").read_text()
    start = readme.index("<!-- how-it-decides:")
    section = readme[readme.index("\n", start) + 1 : readme.index("<!-- /how-it-decides -->")]
    assert section == HOW_IT_DECIDES


def test_contributing_names_real_files() -> None:
    """CONTRIBUTING.md's recipes name the files to touch: each one exists (placeholders such as
    `<format>`, `NNN`, `*` and the example rule PS406 aside), and so does each name it cites."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    paths = set(re.findall(r"`([\w./-]+/[\w./-]*|[\w/-]+\.(?:py|md|toml|sql|json))`", text))
    placeholder = re.compile(r"[<*]|NNN|(?i:ps406)|^\.venv/")
    checked = sorted(p for p in paths if not placeholder.search(p) and not p.startswith("."))
    assert len(checked) > 30, checked
    missing = [p for p in checked if not (ROOT / p.split(":")[0]).exists()]
    assert not missing, f"CONTRIBUTING.md names files that do not exist: {missing}"
    for name in ("FORMATS", "DETECTION_ORDER", "format_of", "LogFormat", "_REPORTERS"):
        assert name in text
    assert "FORMATS = (" in (ROOT / "collectors/logs/registry.py").read_text()
    assert "DETECTION_ORDER = (" in (ROOT / "collectors/logs/registry.py").read_text()
    assert "class LogFormat(Protocol)" in (ROOT / "collectors/logs/formats.py").read_text()
    assert "_REPORTERS = (" in (ROOT / "detector/reports/__init__.py").read_text()
    assert "EXTENSIONS = {" in (ROOT / "tests/test_reports_golden.py").read_text()
    assert "DOCS_PAGES = {" in (ROOT / "tests/test_rules.py").read_text()
