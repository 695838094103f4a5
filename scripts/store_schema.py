"""Write detector/store/schema.sql, the README's table of store tables and the reference schema
the store's check reads (migrations/reference_columns.json) from the migrations (`make readme`
runs it); `--check` exits 1 when one is not current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from detector.store.migrate import load_migrations
from detector.store.schema import REFERENCE_FILE, reference_json
from detector.store.schema_dump import readme_tables, schema_sql

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "detector" / "store" / "schema.sql"
REFERENCE = ROOT / "detector" / "store" / "migrations" / REFERENCE_FILE
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- store-tables -->\n)(.*?)(<!-- /store-tables -->)", re.S)


def main(check: bool) -> int:
    readme = README.read_text()
    if not BLOCK.search(readme):
        print("README.md has no <!-- store-tables --> block", file=sys.stderr)
        return 1
    wanted = {
        SCHEMA: schema_sql(),
        REFERENCE: reference_json(load_migrations()),
        README: BLOCK.sub(lambda m: m.group(1) + readme_tables() + m.group(3), readme),
    }
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not current: run `make readme`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
