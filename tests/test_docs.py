"""The README is checked against the code: its workload example loads, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from detector.cli.app import app
from detector.jobs.workload import load_workload
from detector.store import Store

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


def test_readme_store_tables_exist(tmp_path: Path) -> None:
    documented = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", README, re.M))
    names = {name for pair in documented for name in pair if name}
    Store(tmp_path / "s.duckdb").close()
    with duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    assert names and names <= tables, names - tables


def test_readme_how_it_decides_is_what_the_code_says() -> None:
    from detector.engine.compare import HOW_IT_DECIDES

    readme = (ROOT / "README.md").read_text()
    start = readme.index("<!-- how-it-decides:")
    section = readme[readme.index("\n", start) + 1 : readme.index("<!-- /how-it-decides -->")]
    assert section == HOW_IT_DECIDES
